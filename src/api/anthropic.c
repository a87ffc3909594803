/* Anthropic Messages API on the chat machinery: request translation, the message object, the
 * stream events (message_start … message_stop) and Anthropic's error shape. Follows the
 * Messages API reference (2023-06-01 version header; its value is not checked). */
#include "api/anthropic.h"

#include "api/generation/chat_session.h"
#include "api/errors.h"
#include "api/validate.h"
#include "api/handlers.h"
#include "api/ids.h"
#include "api/openai_chat.h"
#include "api/generation/sse.h"
#include "text/json_text.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- request translation ---- */

/* Frees text from json_dumps with jansson's own deallocator (tests route it through mem_). */
static void dumps_free(char *text)
{
    json_free_t jfree = free;
    json_get_alloc_funcs(NULL, &jfree);
    jfree(text);
}

static bool system_message(const json_t *sys, json_t *messages, struct api_fail *f)
{
    if (!sys || json_is_null(sys)) return true;
    if (json_is_string(sys))
        return v_append_new(messages, json_pack("{s:s, s:O}", "role", "system", "content", sys), f);
    if (!json_is_array(sys))
        return v_fail_type(f, "system", "a string or an array of text blocks", sys);
    json_t *parts = json_array();
    size_t i;
    const json_t *b;
    json_array_foreach(sys, i, b)
    {
        char param[48];
        snprintf(param, sizeof param, "system[%zu]", i);
        const char *type = v_need_string(b, "type", param, f);
        if (!type || (strcmp(type, "text") != 0 &&
                      !api_failf(f, 400, "invalid_value", param,
                                 "'%s' must be a text block (got type '%.40s')", param, type))) {
            json_decref(parts);
            return false;
        }
        const char *text = v_need_string(b, "text", param, f);
        if (!text ||
            !v_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", text), f)) {
            json_decref(parts);
            return false;
        }
    }
    return v_append_new(messages, json_pack("{s:s, s:o}", "role", "system", "content", parts), f);
}

/* An image block as an image_url part with a data URL. */
static json_t *image_part(const json_t *block, const char *param, struct api_fail *f)
{
    char sparam[160];
    snprintf(sparam, sizeof sparam, "%s.source", param);
    const json_t *src = json_object_get(block, "source");
    if (!json_is_object(src)) {
        v_fail_type(f, sparam, "an object", src);
        return NULL;
    }
    const char *type = v_need_string(src, "type", sparam, f);
    if (!type) return NULL;
    if (strcmp(type, "base64") != 0) {
        api_failf(f, 400, "unsupported_content_part_type", sparam,
                  "'%s.type' is '%.40s'; only base64 image sources are supported (remote and "
                  "file images are not fetched)",
                  sparam, type);
        return NULL;
    }
    const char *media = v_need_string(src, "media_type", sparam, f);
    const char *data = media ? v_need_string(src, "data", sparam, f) : NULL;
    if (!data) return NULL;
    struct buf url;
    buf_init(&url);
    json_t *part = NULL;
    if (buf_printf(&url, "data:%s;base64,%s", media, data) == ERR_OK)
        part = json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url", url.data);
    buf_deinit(&url);
    if (!part) v_fail_nomem(f);
    return part;
}

/* tool_result content: a string, or text/image blocks as parts. */
static json_t *tool_result_content(const json_t *block, const char *param, struct api_fail *f)
{
    const json_t *content = json_object_get(block, "content");
    bool is_error = json_is_true(json_object_get(block, "is_error"));
    char cparam[160];
    snprintf(cparam, sizeof cparam, "%s.content", param);
    if (!content || json_is_null(content) || json_is_string(content)) {
        const char *s = content && json_is_string(content) ? json_string_value(content) : "";
        json_t *j = is_error ? json_sprintf("Error: %s", s) : json_string(s);
        if (!j) v_fail_nomem(f);
        return j;
    }
    if (!json_is_array(content)) {
        v_fail_type(f, cparam, "a string or an array of blocks", content);
        return NULL;
    }
    json_t *parts = json_array();
    if (parts && is_error)
        json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", "Error:"));
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b)
    {
        char bparam[192];
        snprintf(bparam, sizeof bparam, "%s[%zu]", cparam, i);
        const char *type = v_need_string(b, "type", bparam, f);
        json_t *part = NULL;
        if (type && strcmp(type, "text") == 0) {
            const char *text = v_need_string(b, "text", bparam, f);
            part = text ? json_pack("{s:s, s:s}", "type", "text", "text", text) : NULL;
        } else if (type && strcmp(type, "image") == 0) {
            part = image_part(b, bparam, f);
        } else if (type) {
            api_failf(f, 400, "unsupported_content_part_type", bparam,
                      "'%s' has type '%.40s'; tool results hold text and image blocks", bparam,
                      type);
        }
        if (!part || json_array_append_new(parts, part) != 0) {
            if (!f->status) v_fail_nomem(f);
            json_decref(parts);
            return NULL;
        }
    }
    return parts;
}

static bool tool_result_message(const json_t *block, const char *param, json_t *messages,
                                struct api_fail *f)
{
    const char *id = v_need_string(block, "tool_use_id", param, f);
    json_t *content = id ? tool_result_content(block, param, f) : NULL;
    if (!content) return false;
    return v_append_new(
        messages,
        json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", id, "content", content), f);
}

static bool tool_use_call(const json_t *block, const char *param, json_t *calls, struct api_fail *f)
{
    const char *id = v_need_string(block, "id", param, f);
    const char *name = id ? v_need_string(block, "name", param, f) : NULL;
    if (!name) return false;
    const json_t *input = json_object_get(block, "input");
    char iparam[160];
    snprintf(iparam, sizeof iparam, "%s.input", param);
    if (!json_is_object(input)) return v_fail_type(f, iparam, "an object", input);
    char *args = json_text_dumps(input, JSON_COMPACT);
    if (!args) return v_fail_nomem(f);
    json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function",
                             "name", name, "arguments", args);
    dumps_free(args);
    return v_append_new(calls, call, f);
}

/* User content blocks: text and images gather into user messages; each tool_result becomes
 * a tool message in place, so the order of the conversation is kept. */
static bool user_blocks(const json_t *content, const char *param, json_t *messages,
                        struct api_fail *f)
{
    json_t *parts = json_array();
    size_t i;
    const json_t *b;
    bool ok = parts != NULL || v_fail_nomem(f);
    json_array_foreach(content, i, b)
    {
        if (!ok) break;
        char bparam[96];
        snprintf(bparam, sizeof bparam, "%s[%zu]", param, i);
        const char *type = v_need_string(b, "type", bparam, f);
        if (!type) {
            ok = false;
        } else if (strcmp(type, "text") == 0) {
            const char *text = v_need_string(b, "text", bparam, f);
            ok = text &&
                 v_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", text), f);
        } else if (strcmp(type, "image") == 0) {
            json_t *part = image_part(b, bparam, f);
            ok = part && v_append_new(parts, part, f);
        } else if (strcmp(type, "tool_result") == 0) {
            if (json_array_size(parts) > 0) {
                // The message takes this array; later parts go into a new one.
                ok = v_append_new(messages,
                                  json_pack("{s:s, s:o}", "role", "user", "content", parts), f);
                parts = json_array();
                ok = ok && (parts != NULL || v_fail_nomem(f));
            }
            ok = ok && tool_result_message(b, bparam, messages, f);
        } else {
            ok = api_failf(f, 400, "unsupported_content_part_type", bparam,
                           "'%s' has type '%.40s'; user content blocks are text, image and "
                           "tool_result",
                           bparam, type);
        }
    }
    if (ok && json_array_size(parts) > 0)
        ok = v_append_new(messages, json_pack("{s:s, s:O}", "role", "user", "content", parts), f);
    json_decref(parts);
    return ok;
}

/* Assistant blocks become one assistant message: text joined, thinking as
 * reasoning_content, tool_use blocks as tool_calls. */
static bool assistant_blocks(const json_t *content, const char *param, json_t *messages,
                             struct api_fail *f)
{
    struct buf text, reasoning;
    buf_init(&text);
    buf_init(&reasoning);
    json_t *calls = json_array();
    bool ok = calls != NULL || v_fail_nomem(f);
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b)
    {
        if (!ok) break;
        char bparam[96];
        snprintf(bparam, sizeof bparam, "%s[%zu]", param, i);
        const char *type = v_need_string(b, "type", bparam, f);
        const char *s = NULL;
        if (!type) {
            ok = false;
        } else if (strcmp(type, "text") == 0) {
            ok = (s = v_need_string(b, "text", bparam, f)) && buf_append_cstr(&text, s) == ERR_OK;
        } else if (strcmp(type, "thinking") == 0) {
            ok = (s = v_need_string(b, "thinking", bparam, f)) &&
                 buf_append_cstr(&reasoning, s) == ERR_OK;
        } else if (strcmp(type, "tool_use") == 0) {
            ok = tool_use_call(b, bparam, calls, f);
        } else if (strcmp(type, "redacted_thinking") != 0) {
            ok = api_failf(f, 400, "unsupported_content_part_type", bparam,
                           "'%s' has type '%.40s'; assistant content blocks are text, thinking, "
                           "redacted_thinking and tool_use",
                           bparam, type);
        }
        if (!ok && !f->status) v_fail_nomem(f);
    }
    json_t *msg = ok ? json_pack("{s:s, s:s%}", "role", "assistant", "content",
                                 text.data ? text.data : "", text.len)
                     : NULL;
    if (msg && reasoning.len)
        json_object_set_new(msg, "reasoning_content", json_stringn(reasoning.data, reasoning.len));
    if (msg && json_array_size(calls) > 0) json_object_set(msg, "tool_calls", calls);
    if (ok) ok = v_append_new(messages, msg, f);
    json_decref(calls);
    buf_deinit(&text);
    buf_deinit(&reasoning);
    return ok;
}

static bool convert_message(const json_t *msg, size_t i, json_t *messages, struct api_fail *f)
{
    char param[48];
    snprintf(param, sizeof param, "messages[%zu]", i);
    if (!json_is_object(msg)) return v_fail_type(f, param, "an object", msg);
    const char *role = v_need_string(msg, "role", param, f);
    if (!role) return false;
    bool is_user = strcmp(role, "user") == 0;
    if (!is_user && strcmp(role, "assistant") != 0)
        return api_failf(f, 400, "invalid_value", param,
                         "'%s.role' must be 'user' or 'assistant' (got '%.40s')", param, role);
    const json_t *content = json_object_get(msg, "content");
    char cparam[64];
    snprintf(cparam, sizeof cparam, "%s.content", param);
    if (json_is_string(content))
        return v_append_new(messages, json_pack("{s:s, s:O}", "role", role, "content", content), f);
    if (!json_is_array(content))
        return v_fail_type(f, cparam, "a string or an array of content blocks", content);
    if (json_array_size(content) == 0)
        return api_failf(f, 400, "invalid_value", cparam, "'%s' must not be empty", cparam);
    return is_user ? user_blocks(content, cparam, messages, f)
                   : assistant_blocks(content, cparam, messages, f);
}

/* tool_choice: none hides the tools; any and tool force a call (through the grammar), in
 * chat-completions terms "required" and {"type":"function","function":{"name"}}. */
static bool convert_tool_choice(const json_t *choice, struct anthropic_chat *out, bool *hidden,
                                struct api_fail *f)
{
    *hidden = false;
    out->is_parallel = true;
    if (!choice || json_is_null(choice)) return true;
    if (!json_is_object(choice)) return v_fail_type(f, "tool_choice", "an object", choice);
    const char *type = v_need_string(choice, "type", "tool_choice", f);
    bool no_parallel = false;
    if (!type || !v_bool(choice, "disable_parallel_tool_use",
                         "tool_choice.disable_parallel_tool_use", &no_parallel, f))
        return false;
    out->is_parallel = !no_parallel;
    if (strcmp(type, "tool") == 0) {
        const char *name = v_need_string(choice, "name", "tool_choice", f);
        out->tool_choice =
            name ? json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name) : NULL;
        return name && (out->tool_choice || v_fail_nomem(f));
    }
    if (strcmp(type, "any") == 0) {
        out->tool_choice = json_string("required");
        return out->tool_choice || v_fail_nomem(f);
    }
    if (strcmp(type, "auto") != 0 && strcmp(type, "none") != 0)
        return api_failf(f, 400, "invalid_value", "tool_choice.type",
                         "'tool_choice.type' must be auto, any, tool or none");
    *hidden = strcmp(type, "none") == 0;
    return true;
}

/* tools → OpenAI function tools, and tool_choice. */
static bool convert_tools(const json_t *body, struct anthropic_chat *c, struct api_fail *f)
{
    const json_t *tools = json_object_get(body, "tools");
    json_t **out = &c->tools;
    *out = NULL;
    bool hidden = false;
    if (!convert_tool_choice(json_object_get(body, "tool_choice"), c, &hidden, f)) return false;
    if (!tools || json_is_null(tools)) return true;
    if (!json_is_array(tools)) return v_fail_type(f, "tools", "an array", tools);
    json_t *arr = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        char param[48];
        snprintf(param, sizeof param, "tools[%zu]", i);
        const char *type = json_string_value(json_object_get(t, "type"));
        const char *name = v_need_string(t, "name", param, f);
        const json_t *schema = json_object_get(t, "input_schema");
        const json_t *desc = json_object_get(t, "description");
        json_t *fn = NULL;
        if (name && type && strcmp(type, "custom") != 0)
            api_failf(f, 400, "invalid_value", param,
                      "'%s' is a server tool (type '%.40s'); only custom tools with an "
                      "input_schema are supported",
                      param, type);
        else if (name && !json_is_object(schema))
            v_fail_type(f, strcat(param, ".input_schema"), "an object", schema);
        else if (name && desc && !json_is_string(desc))
            v_fail_type(f, strcat(param, ".description"), "a string", desc);
        else if (name)
            fn = json_pack("{s:s, s:s, s:O}", "name", name, "description",
                           desc ? json_string_value(desc) : "", "parameters", schema);
        if (!fn ||
            !v_append_new(arr, json_pack("{s:s, s:o}", "type", "function", "function", fn), f)) {
            if (!f->status) v_fail_nomem(f);
            json_decref(arr);
            return false;
        }
    }
    if (hidden || json_array_size(arr) == 0)
        json_decref(arr);
    else
        *out = arr;
    return true;
}

static bool convert_thinking(const json_t *body, int *out, struct api_fail *f)
{
    const json_t *th = json_object_get(body, "thinking");
    *out = -1;
    if (!th || json_is_null(th)) return true;
    if (!json_is_object(th)) return v_fail_type(f, "thinking", "an object", th);
    const char *type = v_need_string(th, "type", "thinking", f);
    if (!type) return false;
    if (strcmp(type, "disabled") == 0) {
        *out = 0;
        return true;
    }
    if (strcmp(type, "enabled") != 0 && strcmp(type, "adaptive") != 0)
        return api_failf(f, 400, "invalid_value", "thinking.type",
                         "'thinking.type' must be enabled, disabled or adaptive");
    int64_t budget = 0;
    // The budget is checked but not enforced: generation is bounded by max_tokens.
    if (strcmp(type, "enabled") == 0 &&
        (!v_require(th, "budget_tokens", "thinking.budget_tokens", f) ||
         !v_int(th, "budget_tokens", "thinking.budget_tokens", 1, INT32_MAX, &budget, f)))
        return false;
    *out = 1;
    return true;
}

bool anthropic_to_chat(const json_t *body, struct anthropic_chat *out, struct api_fail *f)
{
    memset(out, 0, sizeof *out);
    const json_t *msgs = json_object_get(body, "messages");
    if (!v_require(body, "messages", "messages", f)) return false;
    if (!json_is_array(msgs)) return v_fail_type(f, "messages", "an array", msgs);
    if (json_array_size(msgs) == 0)
        return api_failf(f, 400, "invalid_value", "messages",
                         "'messages' must contain at least one message");
    const json_t *meta = json_object_get(body, "metadata");
    if (meta && !json_is_null(meta) && !json_is_object(meta))
        return v_fail_type(f, "metadata", "an object", meta);
    out->messages = json_array();
    if (!out->messages) return v_fail_nomem(f);
    bool ok = system_message(json_object_get(body, "system"), out->messages, f);
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (!ok) break;
        ok = convert_message(m, i, out->messages, f);
    }
    ok = ok && convert_tools(body, out, f) && convert_thinking(body, &out->enable_thinking, f);
    if (!ok) anthropic_chat_deinit(out);
    return ok;
}

void anthropic_chat_deinit(struct anthropic_chat *c)
{
    json_decref(c->messages);
    json_decref(c->tools);
    json_decref(c->tool_choice);
    c->messages = c->tools = c->tool_choice = NULL;
}

/* ---- response shapes ---- */

static json_t *tool_use_block(const struct toolcall *tc)
{
    char id[48];
    if (tc->id)
        snprintf(id, sizeof id, "%s", tc->id);
    else
        api_make_id("toolu_", id, sizeof id);
    json_t *input = json_loads(tc->arguments, 0, NULL);
    if (!json_is_object(input)) { // the parser promises an object; stay valid regardless
        json_decref(input);
        input = json_object();
    }
    return json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", id, "name", tc->name,
                     "input", input);
}

json_t *anthropic_content_json(const struct anthropic_output *o)
{
    json_t *content = json_array();
    if (!content) return NULL;
    int rc = 0;
    if (o->reasoning.len)
        rc |= json_array_append_new(content,
                                    json_pack("{s:s, s:s%, s:s}", "type", "thinking", "thinking",
                                              o->reasoning.ptr, o->reasoning.len, "signature", ""));
    if (o->text.len || (o->n_calls == 0 && o->reasoning.len == 0))
        rc |=
            json_array_append_new(content, json_pack("{s:s, s:s%}", "type", "text", "text",
                                                     o->text.len ? o->text.ptr : "", o->text.len));
    for (int i = 0; i < o->n_calls; i++)
        rc |= json_array_append_new(content, tool_use_block(&o->calls[i]));
    if (rc) {
        json_decref(content);
        return NULL;
    }
    return content;
}

const char *anthropic_stop_reason(const char *finish_reason, bool is_stop_string)
{
    if (finish_reason && strcmp(finish_reason, "tool_calls") == 0) return "tool_use";
    if (finish_reason && strcmp(finish_reason, "length") == 0) return "max_tokens";
    return is_stop_string ? "stop_sequence" : "end_turn";
}

static void respond_fail(const struct api_fail *f, struct api_response *resp)
{
    int status = f->status ? f->status : 400;
    api_error_for(resp, API_FAMILY_ANTHROPIC, status, NULL, NULL, f->message);
    if (status == 429 || status == 503) api_response_add_header(resp, "Retry-After", "1");
}

/* ---- the handlers ---- */

struct msg_call {
    struct model *model; // one reference
    struct gen_session *session;
    json_t *body; // one reference: params.stops point into it
    struct gen_request_params params;
    char id[48];
    int n_prompt;
    struct anthropic_stream stream; // streaming: the event writer
    struct buf text;                // non-streaming: accumulated
    struct buf reasoning;
};

static void msg_call_free(void *p)
{
    struct msg_call *c = p;
    gen_session_end(c->session);
    model_release(c->model);
    json_decref(c->body);
    buf_deinit(&c->text);
    buf_deinit(&c->reasoning);
    mem_free(c);
}

static json_t *usage_json(const struct msg_call *c)
{
    struct request_timings t;
    gen_session_timings(c->session, &t);
    int n_prompt = gen_session_n_prompt(c->session);
    int n_cached = t.n_cached < n_prompt ? t.n_cached : n_prompt;
    return json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", n_prompt - n_cached, "output_tokens",
                     gen_session_n_completion(c->session), "cache_read_input_tokens", n_cached,
                     "cache_creation_input_tokens", 0);
}

static json_t *stop_sequence_json(const struct msg_call *c, const struct gen_delta *d)
{
    if (!d->is_stop_string || d->stop_index < 0 || d->stop_index >= c->params.n_stops)
        return json_null();
    return json_string(c->params.stops[d->stop_index]);
}

/* Validates and starts generation; false with f filled. */
static bool start_messages(const struct api_ctx *ctx, json_t *body, struct msg_call *c,
                           bool *stream, struct api_fail *f)
{
    static const struct params_names names = {"max_tokens", NULL, "stop_sequences"};
    c->model = api_resolve_model(ctx, body, MODEL_KIND_CHAT, f);
    if (!c->model) return false;
    c->body = json_incref(body);
    struct anthropic_chat chat;
    if (!v_require(body, "max_tokens", "max_tokens", f) ||
        !v_bool(body, "stream", "stream", stream, f) ||
        !params_merge_base(ctx->gen_defaults, model_default_params(c->model), body, &names,
                           model_desc(c->model)->n_vocab, &c->params, f) ||
        !anthropic_to_chat(body, &chat, f))
        return false;
    struct chat_session_args a = {
        .model = c->model,
        .media_path = ctx->media_path,
        .messages = chat.messages,
        .tools = chat.tools,
        .params = &c->params,
        .enable_thinking =
            chat.enable_thinking >= 0 ? chat.enable_thinking : c->params.enable_thinking,
        .structured = body, // llama.cpp's grammar / json_schema extension fields
        .tool_choice = chat.tool_choice,
        .is_parallel = chat.is_parallel,
        .metrics = ctx->metrics,
    };
    int rc = chat_session_start(&a, &c->session, &c->n_prompt, f);
    anthropic_chat_deinit(&chat);
    return rc == ERR_OK;
}

static void respond_whole(struct msg_call *c, struct api_response *resp)
{
    struct gen_delta d;
    do {
        gen_session_next(c->session, -1, &d);
        buf_append(&c->text, d.content.ptr, d.content.len);
        buf_append(&c->reasoning, d.reasoning.ptr, d.reasoning.len);
    } while (!d.is_done);
    if (!d.finish_reason) {
        struct api_fail f = {.status = d.error_status ? d.error_status : 500};
        snprintf(f.message, sizeof f.message, "%s", d.error_message);
        respond_fail(&f, resp);
        return;
    }
    struct anthropic_output o = {
        .reasoning = {c->reasoning.data, c->reasoning.len},
        .text = {c->text.data, c->text.len},
    };
    o.calls = gen_session_calls(c->session, &o.n_calls);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", c->id, "type",
                          "message", "role", "assistant", "model", model_id(c->model), "content",
                          anthropic_content_json(&o), "stop_reason",
                          anthropic_stop_reason(d.finish_reason, d.is_stop_string), "stop_sequence",
                          stop_sequence_json(c, &d), "usage", usage_json(c));
    api_respond_json(resp, 200, j);
}

/* `event: type` with data {"type": type, …j} (j consumed). */
static int event(struct buf *out, const char *type, json_t *j)
{
    json_t *o = j ? json_pack("{s:s}", "type", type) : NULL;
    if (o && json_object_update(o, j) != 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(j);
    return sse_append_json(out, type, o);
}

static int close_block(struct anthropic_stream *st, struct buf *out)
{
    if (st->open == ANTHROPIC_BLOCK_NONE) return ERR_OK;
    st->open = ANTHROPIC_BLOCK_NONE;
    return event(out, "content_block_stop", json_pack("{s:i}", "index", st->n_blocks++));
}

static int open_block(struct anthropic_stream *st, int kind, struct buf *out)
{
    if (st->open == kind) return ERR_OK;
    int rc = close_block(st, out);
    json_t *block =
        kind == ANTHROPIC_BLOCK_THINKING
            ? json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", "")
            : json_pack("{s:s, s:s}", "type", "text", "text", "");
    st->open = kind;
    if (rc == ERR_OK)
        rc = event(out, "content_block_start",
                   json_pack("{s:i, s:o}", "index", st->n_blocks, "content_block", block));
    else
        json_decref(block);
    return rc;
}

static int block_delta(const struct anthropic_stream *st, const char *type, const char *key,
                       struct str s, struct buf *out)
{
    return event(out, "content_block_delta",
                 json_pack("{s:i, s:{s:s, s:s%}}", "index", st->n_blocks, "delta", "type", type,
                           key, s.ptr, s.len));
}

static int stream_tool_use(struct anthropic_stream *st, const struct toolcall *tc, struct buf *out)
{
    int rc = close_block(st, out);
    json_t *block = tool_use_block(tc);
    if (block) json_object_set_new(block, "input", json_object()); // the input arrives as deltas
    if (rc == ERR_OK)
        rc = event(out, "content_block_start",
                   json_pack("{s:i, s:o}", "index", st->n_blocks, "content_block", block));
    else
        json_decref(block);
    struct str args = str_from_cstr(tc->arguments);
    if (rc == ERR_OK) rc = block_delta(st, "input_json_delta", "partial_json", args, out);
    if (rc == ERR_OK)
        rc = event(out, "content_block_stop", json_pack("{s:i}", "index", st->n_blocks++));
    return rc;
}

int anthropic_stream_start(const char *id, const char *model, int n_prompt, struct buf *out)
{
    json_t *msg =
        json_pack("{s:s, s:s, s:s, s:s, s:[], s:n, s:n, s:{s:i, s:i}}", "id", id, "type", "message",
                  "role", "assistant", "model", model, "content", "stop_reason", "stop_sequence",
                  "usage", "input_tokens", n_prompt, "output_tokens", 0);
    int rc = event(out, "message_start", json_pack("{s:o}", "message", msg));
    return rc == ERR_OK ? event(out, "ping", json_object()) : rc;
}

int anthropic_stream_delta(struct anthropic_stream *st, const struct anthropic_output *o,
                           struct buf *out)
{
    int rc = ERR_OK;
    if (o->reasoning.len && (rc = open_block(st, ANTHROPIC_BLOCK_THINKING, out)) == ERR_OK)
        rc = block_delta(st, "thinking_delta", "thinking", o->reasoning, out);
    if (rc == ERR_OK && o->text.len && (rc = open_block(st, ANTHROPIC_BLOCK_TEXT, out)) == ERR_OK)
        rc = block_delta(st, "text_delta", "text", o->text, out);
    for (int i = 0; rc == ERR_OK && i < o->n_calls; i++)
        rc = stream_tool_use(st, &o->calls[i], out);
    return rc;
}

int anthropic_stream_finish(struct anthropic_stream *st, const char *stop_reason,
                            json_t *stop_sequence, json_t *usage, struct buf *out)
{
    int rc = ERR_OK;
    // A message with no block at all still gets an (empty) text block, as non-streaming does.
    if (st->n_blocks == 0 && st->open == ANTHROPIC_BLOCK_NONE)
        rc = open_block(st, ANTHROPIC_BLOCK_TEXT, out);
    if (rc == ERR_OK) rc = close_block(st, out);
    json_t *delta =
        json_pack("{s:{s:s, s:o}, s:o}", "delta", "stop_reason", stop_reason, "stop_sequence",
                  stop_sequence ? stop_sequence : json_null(), "usage", usage);
    if (rc == ERR_OK)
        rc = event(out, "message_delta", delta);
    else
        json_decref(delta);
    return rc == ERR_OK ? event(out, "message_stop", json_object()) : rc;
}

static int stream_delta(struct msg_call *c, const struct gen_delta *d, struct buf *out)
{
    struct anthropic_output o = {
        .reasoning = d->reasoning, .text = d->content, .calls = d->calls, .n_calls = d->n_calls};
    return anthropic_stream_delta(&c->stream, &o, out);
}

static void stream_end(struct msg_call *c, const struct gen_delta *d, struct buf *out)
{
    if (!d->finish_reason) {
        int status = d->error_status ? d->error_status : 500;
        sse_append_json(
            out, "error",
            api_error_anthropic_json(api_error_anthropic_type(status), d->error_message));
        return;
    }
    anthropic_stream_finish(&c->stream, anthropic_stop_reason(d->finish_reason, d->is_stop_string),
                            stop_sequence_json(c, d), usage_json(c), out);
}

static enum sse_status messages_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct msg_call *c = ctx;
    struct gen_delta d;
    if (!gen_session_next(c->session, timeout_ms, &d)) return SSE_MORE;
    if (stream_delta(c, &d, out) != ERR_OK) return SSE_END;
    if (!d.is_done) return SSE_MORE;
    stream_end(c, &d, out);
    return SSE_END;
}

static void respond_stream(struct msg_call *c, struct api_response *resp)
{
    struct buf first;
    buf_init(&first);
    anthropic_stream_start(c->id, model_id(c->model), c->n_prompt, &first);
    sse_respond(resp, messages_produce, msg_call_free, c, first.data ? first.data : "");
    buf_deinit(&first);
}

void api_anthropic_messages(const struct api_ctx *ctx, const struct api_request *req,
                            struct api_response *resp)
{
    struct api_fail f = {0};
    struct msg_call *c = mem_calloc(1, sizeof *c);
    if (!c) {
        v_fail_nomem(&f);
        respond_fail(&f, resp);
        return;
    }
    bool stream = false;
    if (!start_messages(ctx, req->json, c, &stream, &f)) {
        respond_fail(&f, resp);
        msg_call_free(c);
        return;
    }
    chat_session_add_warning(c->session, resp); // what the runtime will not apply
    api_make_id("msg_", c->id, sizeof c->id);
    if (stream) {
        respond_stream(c, resp);
        return;
    }
    respond_whole(c, resp);
    msg_call_free(c);
}

void api_anthropic_count_tokens(const struct api_ctx *ctx, const struct api_request *req,
                                struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = api_resolve_model(ctx, req->json, MODEL_KIND_CHAT, &f);
    struct anthropic_chat chat = {0};
    int n = 0;
    bool ok = m && anthropic_to_chat(req->json, &chat, &f);
    if (ok) {
        struct chat_session_args a = {
            .model = m,
            .media_path = ctx->media_path,
            .messages = chat.messages,
            .tools = chat.tools,
            .enable_thinking = chat.enable_thinking,
        };
        ok = chat_session_count(&a, &n, &f) == ERR_OK;
    }
    if (ok)
        api_respond_json(resp, 200, json_pack("{s:i}", "input_tokens", n));
    else
        respond_fail(&f, resp);
    anthropic_chat_deinit(&chat);
    if (m) model_release(m);
}
