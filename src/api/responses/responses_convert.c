/* Responses API items ↔ chat messages. Follows OpenAI's Responses API reference for the item
 * and output shapes. */
#include "api/responses/responses_convert.h"

#include "api/ids.h"
#include "util/buf.h"

#include <stdio.h>
#include <string.h>

static bool is_type(const char *type, const char *want)
{
    return type && strcmp(type, want) == 0;
}

/* Conversion state across items: reasoning items attach to the next assistant message. */
struct items_state {
    json_t *messages;     // borrowed: where messages go
    struct buf reasoning; // pending reasoning text
    json_t *assistant;    // borrowed: the last message when it is an assistant one, else NULL
};

static json_t *new_assistant(struct items_state *st, struct api_fail *f)
{
    json_t *msg = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
    if (msg && st->reasoning.len) {
        json_object_set_new(msg, "reasoning_content",
                            json_stringn(st->reasoning.data, st->reasoning.len));
        buf_clear(&st->reasoning);
    }
    if (!v_append_new(st->messages, msg, f)) return NULL;
    st->assistant = msg;
    return msg;
}

/* One content part as a chat part (user/system) or as text (assistant). */
static json_t *convert_part(const json_t *part, const char *param, struct api_fail *f)
{
    const char *type = v_need_string(part, "type", param, f);
    const char *text = NULL;
    if (!type) return NULL;
    if (is_type(type, "input_text") || is_type(type, "output_text") || is_type(type, "text"))
        text = v_need_string(part, "text", param, f);
    else if (is_type(type, "refusal"))
        text = v_need_string(part, "refusal", param, f);
    if (text) return json_pack("{s:s, s:s}", "type", "text", "text", text);
    if (is_type(type, "input_image")) {
        const json_t *url = json_object_get(part, "image_url");
        if (json_is_string(url))
            return json_pack("{s:s, s:{s:O}}", "type", "image_url", "image_url", "url", url);
        api_failf(f, 400, "unsupported_value", param,
                  "'%s' needs an 'image_url' (a data URL); file_id images are not supported",
                  param);
        return NULL;
    }
    if (!f->status)
        api_failf(f, 400, "unsupported_content_part_type", param,
                  "'%s' has type '%.40s'; supported parts are input_text, input_image, "
                  "output_text and refusal",
                  param, type);
    return NULL;
}

static bool message_item(struct items_state *st, const json_t *item, const char *param,
                         struct api_fail *f)
{
    const char *role = v_need_string(item, "role", param, f);
    if (!role) return false;
    bool is_assistant = is_type(role, "assistant");
    if (!is_assistant && !is_type(role, "user") && !is_type(role, "system") &&
        !is_type(role, "developer"))
        return api_failf(f, 400, "invalid_value", param,
                         "'%s.role' must be user, assistant, system or developer", param);
    json_t *content = json_object_get(item, "content");
    char cparam[128];
    snprintf(cparam, sizeof cparam, "%s.content", param);
    if (!json_is_string(content) && !json_is_array(content))
        return v_fail_type(f, cparam, "a string or an array of content parts", content);
    json_t *parts = json_is_string(content) ? json_incref(content) : json_array();
    size_t i;
    const json_t *p;
    json_array_foreach(json_is_array(content) ? content : NULL, i, p)
    {
        char pparam[160];
        snprintf(pparam, sizeof pparam, "%s[%zu]", cparam, i);
        if (!v_append_new(parts, convert_part(p, pparam, f), f)) {
            json_decref(parts);
            return false;
        }
    }
    if (!is_assistant) {
        st->assistant = NULL;
        return v_append_new(st->messages, json_pack("{s:s, s:o}", "role", role, "content", parts),
                            f);
    }
    // Assistant history is plain text: join the text parts.
    struct buf text;
    buf_init(&text);
    if (json_is_string(parts)) buf_append_cstr(&text, json_string_value(parts));
    json_array_foreach(json_is_array(parts) ? parts : NULL, i, p)
    {
        const char *t = json_string_value(json_object_get(p, "text"));
        if (t) // images in assistant history have no text form; they are dropped
            buf_append_cstr(&text, t);
    }
    json_decref(parts);
    json_t *msg = new_assistant(st, f);
    if (msg)
        json_object_set_new(msg, "content", json_stringn(text.data ? text.data : "", text.len));
    buf_deinit(&text);
    return msg != NULL;
}

static bool function_call_item(struct items_state *st, const json_t *item, const char *param,
                               struct api_fail *f)
{
    const char *call_id = v_need_string(item, "call_id", param, f);
    const char *name = call_id ? v_need_string(item, "name", param, f) : NULL;
    const char *args = name ? v_need_string(item, "arguments", param, f) : NULL;
    if (!args) return false;
    json_t *msg = st->assistant ? st->assistant : new_assistant(st, f);
    if (!msg) return false;
    json_t *calls = json_object_get(msg, "tool_calls");
    if (!calls) {
        calls = json_array();
        if (!calls || json_object_set_new(msg, "tool_calls", calls) != 0) return v_fail_nomem(f);
    }
    return v_append_new(calls,
                        json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", call_id, "type", "function",
                                  "function", "name", name, "arguments", args),
                        f);
}

static bool function_output_item(struct items_state *st, const json_t *item, const char *param,
                                 struct api_fail *f)
{
    const char *call_id = v_need_string(item, "call_id", param, f);
    if (!call_id) return false;
    json_t *out = json_object_get(item, "output");
    char oparam[128];
    snprintf(oparam, sizeof oparam, "%s.output", param);
    json_t *content = NULL;
    if (json_is_string(out)) {
        content = json_incref(out);
    } else if (json_is_array(out)) {
        content = json_array();
        size_t i;
        const json_t *p;
        json_array_foreach(out, i, p)
        {
            char pparam[160];
            snprintf(pparam, sizeof pparam, "%s[%zu]", oparam, i);
            if (!v_append_new(content, convert_part(p, pparam, f), f)) {
                json_decref(content);
                return false;
            }
        }
    } else {
        return v_fail_type(f, oparam, "a string or an array of content parts", out);
    }
    st->assistant = NULL;
    return v_append_new(
        st->messages,
        json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", call_id, "content", content),
        f);
}

/* A reasoning item's text (content reasoning_text, else the summary) waits for the next
 * assistant message. */
static bool reasoning_item(struct items_state *st, const json_t *item)
{
    const json_t *parts = json_object_get(item, "content");
    if (!json_is_array(parts) || json_array_size(parts) == 0)
        parts = json_object_get(item, "summary");
    size_t i;
    const json_t *p;
    json_array_foreach(json_is_array(parts) ? parts : NULL, i, p)
    {
        const char *t = json_string_value(json_object_get(p, "text"));
        if (t) buf_append_cstr(&st->reasoning, t);
    }
    return true;
}

static bool convert_item(struct items_state *st, const json_t *item, const char *param,
                         struct api_fail *f)
{
    if (!json_is_object(item)) return v_fail_type(f, param, "an object", item);
    const json_t *t = json_object_get(item, "type");
    if (t && !json_is_string(t)) return v_fail_type(f, param, "a string 'type'", t);
    const char *type = t ? json_string_value(t) : "message";
    if (is_type(type, "message")) return message_item(st, item, param, f);
    if (is_type(type, "function_call")) return function_call_item(st, item, param, f);
    if (is_type(type, "function_call_output")) return function_output_item(st, item, param, f);
    if (is_type(type, "reasoning")) return reasoning_item(st, item);
    return api_failf(f, 400, "unsupported_value", param,
                     "'%s' has type '%.40s'; supported items are message, function_call, "
                     "function_call_output and reasoning",
                     param, type);
}

bool responses_items_to_chat(const json_t *items, const char *param, json_t *messages,
                             struct api_fail *f)
{
    struct items_state st = {.messages = messages};
    buf_init(&st.reasoning);
    bool ok = true;
    size_t i;
    const json_t *item;
    json_array_foreach(items, i, item)
    {
        char iparam[64];
        snprintf(iparam, sizeof iparam, "%s[%zu]", param, i);
        if (!(ok = convert_item(&st, item, iparam, f))) break;
    }
    buf_deinit(&st.reasoning);
    return ok;
}

static bool convert_input(const json_t *body, json_t *history, struct api_fail *f)
{
    const json_t *input = json_object_get(body, "input");
    if (!input)
        return api_failf(f, 400, "missing_required_parameter", "input",
                         "Missing required parameter: 'input'.");
    if (json_is_string(input))
        return v_append_new(history, json_pack("{s:s, s:O}", "role", "user", "content", input), f);
    if (!json_is_array(input))
        return v_fail_type(f, "input", "a string or an array of items", input);
    return responses_items_to_chat(input, "input", history, f);
}

/* tool_choice: "none" hides the tools; "required" and {"type":"function","name"} force a call
 * (through the grammar), in chat-completions terms; "auto" and allowed_tools do not. */
static bool convert_tool_choice(const json_t *body, struct responses_chat *out, bool *hidden,
                                struct api_fail *f)
{
    const json_t *choice = json_object_get(body, "tool_choice");
    *hidden = false;
    out->is_parallel = !json_is_false(json_object_get(body, "parallel_tool_calls"));
    if (!choice || json_is_null(choice)) return true;
    const char *s = json_string_value(choice);
    if (s && !is_type(s, "none") && !is_type(s, "auto") && !is_type(s, "required"))
        return api_failf(f, 400, "invalid_value", "tool_choice",
                         "'tool_choice' must be none, auto, required or an object");
    if (!s && !json_is_object(choice))
        return v_fail_type(f, "tool_choice", "a string or an object", choice);
    *hidden = is_type(s, "none");
    if (is_type(s, "required")) {
        out->tool_choice = json_string("required");
        return out->tool_choice || v_fail_nomem(f);
    }
    if (s || !is_type(json_string_value(json_object_get(choice, "type")), "function")) return true;
    const char *name = v_need_string(choice, "name", "tool_choice", f);
    out->tool_choice =
        name ? json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name) : NULL;
    return name && (out->tool_choice || v_fail_nomem(f));
}

/* Function tools (flat: {type, name, description, parameters, strict}) → chat tools. Named
 * and required tool choices are advisory, as in chat completions. */
static bool convert_tools(const json_t *body, struct responses_chat *c, struct api_fail *f)
{
    const json_t *tools = json_object_get(body, "tools");
    json_t **out = &c->tools;
    *out = NULL;
    bool hidden = false;
    if (!convert_tool_choice(body, c, &hidden, f)) return false;
    if (!tools || json_is_null(tools)) return true;
    if (!json_is_array(tools)) return v_fail_type(f, "tools", "an array", tools);
    json_t *arr = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        char param[48];
        snprintf(param, sizeof param, "tools[%zu]", i);
        const char *type = v_need_string(t, "type", param, f);
        const char *name = NULL;
        if (type && !is_type(type, "function"))
            api_failf(f, 400, "unsupported_value", param,
                      "'%s' has type '%.40s'; only function tools are supported", param, type);
        else if (type)
            name = v_need_string(t, "name", param, f);
        json_t *params = json_object_get(t, "parameters");
        json_t *desc = json_object_get(t, "description");
        json_t *fn = name ? json_pack("{s:s}", "name", name) : NULL;
        if (fn && json_is_string(desc)) json_object_set(fn, "description", desc);
        if (fn)
            json_object_set_new(fn, "parameters",
                                json_is_object(params) ? json_incref(params)
                                                       : json_pack("{s:s}", "type", "object"));
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

static bool convert_reasoning(const json_t *body, int *out, struct api_fail *f)
{
    const json_t *r = json_object_get(body, "reasoning");
    *out = -1;
    if (!r || json_is_null(r)) return true;
    if (!json_is_object(r)) return v_fail_type(f, "reasoning", "an object", r);
    const json_t *e = json_object_get(r, "effort");
    if (!e || json_is_null(e)) return true;
    const char *s = json_string_value(e);
    static const char *const on[] = {"low", "medium", "high", "xhigh"};
    if (is_type(s, "none") || is_type(s, "minimal")) {
        *out = 0;
        return true;
    }
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        if (is_type(s, on[i])) {
            *out = 1;
            return true;
        }
    }
    return api_failf(f, 400, "invalid_value", "reasoning.effort",
                     "'reasoning.effort' must be none, minimal, low, medium, high or xhigh");
}

/* The constraint object for structured_from_body: text.format as response_format (the flat
 * json_schema shape), plus llama.cpp's grammar and json_schema fields. NULL: none asked. */
static bool structured_object(const json_t *body, json_t **out, struct api_fail *f)
{
    json_t *fmt = json_object_get(json_object_get(body, "text"), "format");
    static const char *const keys[] = {"grammar", "json_schema"};
    *out = NULL;
    json_t *o = json_object();
    if (!o) return v_fail_nomem(f);
    int rc = 0;
    if (fmt && !json_is_null(fmt) &&
        !is_type(json_string_value(json_object_get(fmt, "type")), "text"))
        rc |= json_object_set(o, "response_format", fmt);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(body, keys[i]);
        if (v) rc |= json_object_set(o, keys[i], v);
    }
    if (rc) {
        json_decref(o);
        return v_fail_nomem(f);
    }
    if (json_object_size(o) == 0)
        json_decref(o);
    else
        *out = o;
    return true;
}

/* Fields this server cannot honour are refused rather than silently ignored. */
static bool check_unsupported(const json_t *body, struct api_fail *f)
{
    const json_t *text = json_object_get(body, "text");
    const json_t *fmt = json_object_get(text, "format");
    const char *type = json_string_value(json_object_get(fmt, "type"));
    if (text && !json_is_null(text) && !json_is_object(text))
        return v_fail_type(f, "text", "an object", text);
    if (fmt && !json_is_null(fmt) && !is_type(type, "text") && !is_type(type, "json_schema") &&
        !is_type(type, "json_object"))
        return api_failf(f, 400, "invalid_value", "text.format.type",
                         "'text.format.type' must be text, json_schema or json_object");
    if (json_is_true(json_object_get(body, "background")))
        return api_failf(f, 400, "unsupported_value", "background",
                         "background responses are not supported");
    const json_t *conv = json_object_get(body, "conversation");
    if (conv && !json_is_null(conv))
        return api_failf(f, 400, "unsupported_value", "conversation",
                         "the Conversations API is not supported; use previous_response_id");
    const json_t *ins = json_object_get(body, "instructions");
    if (ins && !json_is_null(ins) && !json_is_string(ins))
        return v_fail_type(f, "instructions", "a string", ins);
    return true;
}

bool responses_to_chat(const json_t *body, const json_t *previous, struct responses_chat *out,
                       struct api_fail *f)
{
    memset(out, 0, sizeof *out);
    if (!check_unsupported(body, f)) return false;
    out->history = previous ? json_deep_copy(previous) : json_array();
    out->messages = json_array();
    if (!out->history || !out->messages) {
        responses_chat_deinit(out);
        return v_fail_nomem(f);
    }
    const char *ins = json_string_value(json_object_get(body, "instructions"));
    bool ok = convert_input(body, out->history, f) && convert_tools(body, out, f) &&
              structured_object(body, &out->structured, f) &&
              convert_reasoning(body, &out->enable_thinking, f);
    if (ok && ins)
        ok = v_append_new(out->messages, json_pack("{s:s, s:s}", "role", "system", "content", ins),
                          f);
    if (ok && json_array_extend(out->messages, out->history) != 0) ok = v_fail_nomem(f);
    if (!ok) responses_chat_deinit(out);
    return ok;
}

void responses_chat_deinit(struct responses_chat *c)
{
    json_decref(c->messages);
    json_decref(c->history);
    json_decref(c->tools);
    json_decref(c->tool_choice);
    json_decref(c->structured);
    c->messages = c->history = c->tools = c->tool_choice = c->structured = NULL;
}

/* ---- output items ---- */

json_t *responses_message_item(const char *id, const char *status, struct str text)
{
    json_t *content = text.ptr ? json_pack("[{s:s, s:s%, s:[], s:[]}]", "type", "output_text",
                                           "text", text.ptr, text.len, "annotations", "logprobs")
                               : json_array();
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", id, "type", "message", "status", status,
                     "role", "assistant", "content", content);
}

json_t *responses_reasoning_item(const char *id, struct str text)
{
    json_t *content =
        text.ptr ? json_pack("[{s:s, s:s%}]", "type", "reasoning_text", "text", text.ptr, text.len)
                 : json_array();
    return json_pack("{s:s, s:s, s:[], s:o}", "id", id, "type", "reasoning", "summary", "content",
                     content);
}

json_t *responses_function_call_item(const char *id, const char *call_id, const char *name,
                                     const char *arguments, const char *status)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "type", "function_call", "status",
                     status, "call_id", call_id, "name", name, "arguments", arguments);
}

json_t *responses_output_json(const struct responses_output *o)
{
    json_t *out = json_array();
    if (!out) return NULL;
    char id[48];
    int rc = 0;
    if (o->reasoning.len) {
        api_make_id("rs_", id, sizeof id);
        rc |= json_array_append_new(out, responses_reasoning_item(id, o->reasoning));
    }
    if (o->text.len || (o->n_calls == 0 && o->reasoning.len == 0)) {
        api_make_id("msg_", id, sizeof id);
        struct str text = {o->text.len ? o->text.ptr : "", o->text.len};
        rc |= json_array_append_new(
            out, responses_message_item(id, o->is_incomplete ? "incomplete" : "completed", text));
    }
    for (int i = 0; i < o->n_calls; i++) {
        char call_id[48];
        const struct toolcall *tc = &o->calls[i];
        snprintf(call_id, sizeof call_id, "%s", tc->id ? tc->id : "");
        if (!tc->id) api_make_id("call_", call_id, sizeof call_id);
        api_make_id("fc_", id, sizeof id);
        rc |= json_array_append_new(
            out, responses_function_call_item(id, call_id, tc->name, tc->arguments, "completed"));
    }
    if (rc) {
        json_decref(out);
        return NULL;
    }
    return out;
}
