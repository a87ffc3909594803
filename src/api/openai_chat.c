/* POST /v1/chat/completions: validation, prompt, generation, and the JSON or SSE answer in
 * OpenAI's chat completion shapes (plus llama.cpp's `timings`). */
#include "api/openai_chat.h"

#include "api/generation/chat_session.h"
#include "api/errors.h"
#include "api/handlers.h"
#include "api/ids.h"
#include "api/generation/logprobs.h"
#include "api/generation/params.h"
#include "api/generation/sse.h"
#include "util/clock.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Milliseconds to the microsecond: more digits are clock noise, and these print short. */
static double thousandths(double v)
{
    return round(v * 1000.0) / 1000.0;
}

json_t *api_timings_json(struct gen_session *s)
{
    struct request_timings t;
    gen_session_timings(s, &t);
    // As llama-server counts: the first generated token comes from the prompt's last batch,
    // so the generation rate is over predicted_n - 1 decode steps. Rates and per-token times
    // are derived from the milliseconds as shown, so a client recomputing them agrees.
    int n_steps = t.n_predicted > 1 ? t.n_predicted - 1 : 0;
    double p_ms = thousandths(t.prompt_ms), g_ms = thousandths(t.predicted_ms);
    double pps = p_ms > 0 ? 1e3 / p_ms * t.n_prompt : 0;
    double gps = g_ms > 0 ? 1e3 / g_ms * n_steps : 0;
    double ppt = t.n_prompt > 0 ? p_ms / t.n_prompt : 0;
    double gpt = n_steps > 0 ? g_ms / n_steps : 0;
    return json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", t.n_cached,
                     "prompt_n", t.n_prompt, "prompt_ms", p_ms, "prompt_per_token_ms", ppt,
                     "prompt_per_second", pps, "predicted_n", t.n_predicted, "predicted_ms", g_ms,
                     "predicted_per_token_ms", gpt, "predicted_per_second", gps);
}

json_t *api_usage_json(struct gen_session *s)
{
    struct request_timings t;
    gen_session_timings(s, &t);
    int p = gen_session_n_prompt(s), c = gen_session_n_completion(s);
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", p, "completion_tokens", c,
                     "total_tokens", p + c, "prompt_tokens_details", "cached_tokens", t.n_cached);
}

/* Everything the answer needs once the request is accepted. */
struct chat_call {
    struct model *model; // one reference
    struct gen_session *session;
    char id[48];
    int64_t created;
    bool include_usage;
    bool is_role_sent;
    int n_calls_sent;
    struct buf content; // accumulated (non-streaming)
    struct buf reasoning;
    int top_logprobs;     // alternatives per token with logprobs:true; -1 without logprobs
    json_t *logprobs;     // accumulated logprobs.content entries (non-streaming) or NULL
    char fingerprint[48]; // system_fingerprint: "b" + version, as llama-server's "b<build>"
    bool is_verbose;      // answer with __verbose (request "verbose" or --verbose)
    int n_choices;        // n: choices generated one after another (non-streaming)
};

static void chat_call_free(void *p)
{
    struct chat_call *c = p;
    gen_session_end(c->session);
    model_release(c->model);
    buf_deinit(&c->content);
    buf_deinit(&c->reasoning);
    json_decref(c->logprobs);
    mem_free(c);
}

static json_t *tool_call_json(const struct toolcall *tc, int index, bool with_index)
{
    char id[48];
    if (tc->id)
        snprintf(id, sizeof id, "%s", tc->id);
    else
        api_make_id("call_", id, sizeof id);
    json_t *j = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function",
                          "name", tc->name, "arguments", tc->arguments);
    if (j && with_index) json_object_set_new(j, "index", json_integer(index));
    return j;
}

/* This step's tokens as logprobs.content entries, or NULL without logprobs. */
static json_t *step_logprobs(const struct chat_call *c)
{
    if (c->top_logprobs < 0) return NULL;
    int n = 0;
    const struct gen_event *ev = gen_session_events(c->session, &n);
    return api_logprobs_json(model_desc(c->model)->tokenizer, ev, n, c->top_logprobs, false);
}

/* A chunk; logprobs (taken, may be NULL) becomes choices[0].logprobs.content. */
static json_t *chunk_json_lp(const struct chat_call *c, json_t *delta, const char *finish,
                             json_t *logprobs)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:[{s:i, s:o, s:o, s:o}]}", "id", c->id, "object",
                     "chat.completion.chunk", "created", (json_int_t)c->created, "model",
                     model_id(c->model), "system_fingerprint", c->fingerprint, "choices", "index",
                     0, "delta", delta, "logprobs",
                     logprobs ? json_pack("{s:o}", "content", logprobs) : json_null(),
                     "finish_reason", finish ? json_string(finish) : json_null());
}

static json_t *chunk_json(const struct chat_call *c, json_t *delta, const char *finish)
{
    return chunk_json_lp(c, delta, finish, NULL);
}

json_t *api_progress_json(const struct request_progress *p)
{
    return json_pack("{s:i, s:i, s:i, s:I}", "total", p->total, "cache", p->cache, "processed",
                     p->processed, "time_ms", (json_int_t)p->time_ms);
}

static int stream_delta(struct chat_call *c, const struct gen_delta *d, struct buf *out)
{
    int rc = ERR_OK;
    // return_progress: each point on a chunk of its own that opens the assistant's message,
    // as llama-server sends it.
    for (int i = 0; rc == ERR_OK && i < d->n_progress; i++) {
        json_t *j = chunk_json(c, json_pack("{s:s, s:n}", "role", "assistant", "content"), NULL);
        if (j) json_object_set_new(j, "prompt_progress", api_progress_json(&d->progress[i]));
        rc = sse_append_json(out, NULL, j);
    }
    if (d->reasoning.len)
        rc = sse_append_json(
            out, NULL,
            chunk_json(c,
                       json_pack("{s:s%}", "reasoning_content", d->reasoning.ptr, d->reasoning.len),
                       NULL));
    // The step's logprobs ride on its content chunk, or on an empty delta when the text is
    // held back (a possible stop string or tool call) or is reasoning.
    json_t *lp = step_logprobs(c);
    if (rc == ERR_OK && (d->content.len || (lp && json_array_size(lp))))
        rc = sse_append_json(
            out, NULL,
            chunk_json_lp(c, json_pack("{s:s%}", "content", d->content.ptr, d->content.len), NULL,
                          json_incref(lp)));
    json_decref(lp);
    for (int i = 0; rc == ERR_OK && i < d->n_calls; i++) {
        json_t *tc = tool_call_json(&d->calls[i], d->call_index[i], true);
        rc =
            sse_append_json(out, NULL, chunk_json(c, json_pack("{s:[o]}", "tool_calls", tc), NULL));
        c->n_calls_sent++;
    }
    return rc;
}

static void stream_end(struct chat_call *c, const struct gen_delta *d, struct buf *out)
{
    if (!d->finish_reason) {
        sse_append_json(out, "error", api_outcome_error_json(d->error_status, d->error_message));
        return;
    }
    sse_append_json(out, NULL, chunk_json(c, json_object(), d->finish_reason));
    json_t *usage =
        json_pack("{s:s, s:s, s:I, s:s, s:s, s:[], s:o, s:o}", "id", c->id, "object",
                  "chat.completion.chunk", "created", (json_int_t)c->created, "model",
                  model_id(c->model), "system_fingerprint", c->fingerprint, "choices", "usage",
                  api_usage_json(c->session), "timings", api_timings_json(c->session));
    sse_append_json(out, NULL, usage);
    buf_append_cstr(out, "data: [DONE]\n\n");
}

static enum sse_status chat_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct chat_call *c = ctx;
    struct gen_delta d;
    if (!gen_session_next(c->session, timeout_ms, &d)) return SSE_MORE;
    if (stream_delta(c, &d, out) != ERR_OK) return SSE_END;
    if (!d.is_done) return SSE_MORE;
    stream_end(c, &d, out);
    return SSE_END;
}

/* llama-server's __verbose: the prompt as its tokens read (specials included) and the text. */
static json_t *verbose_json(const struct chat_call *c)
{
    int n = 0;
    const int32_t *ids = gen_session_prompt(c->session, &n);
    struct buf prompt;
    buf_init(&prompt);
    tok_decode(model_desc(c->model)->tokenizer, ids, (size_t)n, true, &prompt);
    json_t *j = json_pack("{s:o, s:s%}", "prompt",
                          api_text_json(prompt.data ? prompt.data : "", prompt.len), "content",
                          c->content.data ? c->content.data : "", c->content.len);
    buf_deinit(&prompt);
    return j;
}

static bool start_chat(const struct api_ctx *ctx, json_t *body, struct chat_call *c,
                       struct api_fail *f, bool *stream);

/* Ends the finished session and starts the next choice's with the same request. */
static bool restart_chat(const struct api_ctx *ctx, json_t *body, struct chat_call *c,
                         struct api_fail *f, bool *stream)
{
    gen_session_end(c->session);
    c->session = NULL;
    buf_clear(&c->content);
    buf_clear(&c->reasoning);
    json_decref(c->logprobs);
    c->logprobs = NULL;
    return start_chat(ctx, body, c, f, stream);
}

/* Runs the session to its end: choice number index, or NULL with resp holding the error. */
static json_t *whole_choice(struct chat_call *c, int index, struct api_response *resp)
{
    struct gen_delta d;
    do {
        gen_session_next(c->session, -1, &d);
        buf_append(&c->content, d.content.ptr, d.content.len);
        buf_append(&c->reasoning, d.reasoning.ptr, d.reasoning.len);
        json_t *lp = step_logprobs(c);
        if (lp && c->logprobs) json_array_extend(c->logprobs, lp);
        json_decref(lp);
    } while (!d.is_done);
    if (!d.finish_reason) {
        api_outcome_error(resp, d.error_status, d.error_message);
        return NULL;
    }
    int n_calls;
    const struct toolcall *calls = gen_session_calls(c->session, &n_calls);
    json_t *tool_calls = json_array();
    for (int i = 0; i < n_calls; i++)
        json_array_append_new(tool_calls, tool_call_json(&calls[i], i, false));
    json_t *msg =
        json_pack("{s:s, s:s%, s:o}", "role", "assistant", "content",
                  c->content.data ? c->content.data : "", c->content.len, "tool_calls", tool_calls);
    if (msg && n_calls > 0 && c->content.len == 0) json_object_set_new(msg, "content", json_null());
    if (msg && c->reasoning.len)
        json_object_set_new(msg, "reasoning_content",
                            json_stringn(c->reasoning.data, c->reasoning.len));
    json_t *logprobs = c->logprobs ? json_pack("{s:O}", "content", c->logprobs) : json_null();
    return json_pack("{s:i, s:o, s:o, s:s}", "index", index, "message", msg, "logprobs", logprobs,
                     "finish_reason", d.finish_reason);
}

/* The whole answer: n choices, generated one after another on the same request (llama-server
 * runs them as parallel tasks; the answers are the same), usage counting all of them. */
static void respond_whole(const struct api_ctx *ctx, json_t *body, struct chat_call *c,
                          struct api_response *resp)
{
    json_t *choices = json_array();
    json_t *usage = NULL, *timings = NULL, *verbose = NULL;
    int n_completion = 0;
    bool stream = false;
    for (int i = 0; choices && i < c->n_choices; i++) {
        struct api_fail f = {0};
        if (i > 0 && !restart_chat(ctx, body, c, &f, &stream)) {
            api_fail_respond(&f, resp);
            break;
        }
        json_t *choice = whole_choice(c, i, resp);
        if (!choice) break;
        json_array_append_new(choices, choice);
        n_completion += gen_session_n_completion(c->session);
        if (i == 0) {
            usage = api_usage_json(c->session);
            timings = api_timings_json(c->session);
            verbose = c->is_verbose ? verbose_json(c) : NULL;
        }
    }
    if (!choices || (int)json_array_size(choices) < c->n_choices) {
        json_decref(choices);
        json_decref(usage);
        json_decref(timings);
        json_decref(verbose);
        if (!choices) api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    int n_prompt = (int)json_integer_value(json_object_get(usage, "prompt_tokens"));
    json_object_set_new(usage, "completion_tokens", json_integer(n_completion));
    json_object_set_new(usage, "total_tokens", json_integer(n_prompt + n_completion));
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o, s:o}", "id", c->id, "object",
                          "chat.completion", "created", (json_int_t)c->created, "model",
                          model_id(c->model), "system_fingerprint", c->fingerprint, "choices",
                          choices, "usage", usage, "timings", timings);
    if (j && verbose)
        json_object_set_new(j, "__verbose", verbose);
    else
        json_decref(verbose);
    api_respond_json(resp, 200, j);
}

/* A tool_choice object must name a function that tools declares. */
static bool choice_names_a_tool(const json_t *choice, const json_t *tools, struct api_fail *f)
{
    const json_t *fn = json_object_get(choice, "function");
    const char *name = json_string_value(json_object_get(fn, "name"));
    if (!name)
        return api_failf(f, 400, "invalid_value", "tool_choice",
                         "'tool_choice.function.name' must be a string naming one of 'tools'");
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *tn = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (tn && strcmp(tn, name) == 0) return true;
    }
    return api_failf(f, 400, "invalid_value", "tool_choice",
                     "'tool_choice' names the function '%.128s', which is not in 'tools'", name);
}

/* tools / tool_choice. Returns the tools to show the template (NULL when none or hidden by
 * tool_choice "none"). "required" and a named function are honoured as far as the model
 * follows the prompt (advisory until constrained decoding enforces them). */
static bool parse_tools(json_t *body, json_t **tools_out, struct api_fail *f)
{
    json_t *tools = json_object_get(body, "tools");
    json_t *choice = json_object_get(body, "tool_choice");
    *tools_out = NULL;
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return api_failf(f, 400, "invalid_type", "tools",
                         "Invalid type for 'tools': expected an array, but got %s.",
                         v_type_name(tools));
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        const json_t *fn = json_object_get(t, "function");
        const json_t *type = json_object_get(t, "type");
        char tparam[40];
        snprintf(tparam, sizeof tparam, "tools[%zu].type", i);
        if (type && !json_is_string(type))
            return api_failf(f, 400, "invalid_type", tparam,
                             "Invalid type for '%s': expected a string, but got %s.", tparam,
                             v_type_name(type));
        if (type && strcmp(json_string_value(type), "function") != 0)
            return api_failf(f, 400, "invalid_value", tparam,
                             "'%s' must be \"function\" (the only tool type), not '%.64s'", tparam,
                             json_string_value(type));
        if (!json_is_object(t) || !json_is_object(fn) ||
            !json_is_string(json_object_get(fn, "name"))) {
            char param[32];
            snprintf(param, sizeof param, "tools[%zu]", i);
            return api_failf(f, 400, "invalid_value", param,
                             "'%s' must be {\"type\":\"function\",\"function\":{\"name\":…}}",
                             param);
        }
    }
    bool hidden = false;
    if (choice && !json_is_null(choice)) {
        const char *s = json_string_value(choice);
        if (s && strcmp(s, "none") == 0)
            hidden = true;
        else if (s && strcmp(s, "auto") != 0 && strcmp(s, "required") != 0)
            return api_failf(f, 400, "invalid_value", "tool_choice",
                             "'tool_choice' must be none, auto, required or a function object");
        else if (!s && !json_is_object(choice))
            return api_failf(f, 400, "invalid_type", "tool_choice",
                             "Invalid type for 'tool_choice': expected a string or an object, "
                             "but got %s.",
                             v_type_name(choice));
    }
    if (json_is_object(choice) && !choice_names_a_tool(choice, tools, f)) return false;
    if (json_array_size(tools) > 0 && !hidden) *tools_out = tools;
    return true;
}

/* logprobs / top_logprobs (0–20, only with logprobs:true, as OpenAI requires). The platform
 * computes log-probabilities only when asked for alternatives, so at least one is asked. */
static bool parse_logprobs(json_t *body, struct chat_call *c, struct gen_params *g,
                           struct api_fail *f)
{
    bool want = false;
    int64_t top = 0;
    if (!v_bool(body, "logprobs", "logprobs", &want, f) ||
        !v_int(body, "top_logprobs", "top_logprobs", 0, 20, &top, f))
        return false;
    const json_t *top_j = json_object_get(body, "top_logprobs");
    if (!want && top_j && !json_is_null(top_j))
        return api_failf(f, 400, "invalid_value", "top_logprobs",
                         "'top_logprobs' requires 'logprobs' to be true.");
    c->top_logprobs = want ? (int)top : -1;
    if (!want) return true;
    c->logprobs = json_array();
    if (!c->logprobs) return api_failf(f, 500, NULL, NULL, "out of memory");
    g->n_probs = top > 0 ? (int)top : 1;
    return true;
}

/* llama-server's extensions that its chat endpoint honours too: n_predict (when neither
 * max_tokens nor max_completion_tokens is given; < 0 no limit), mirostat*, ignore_eos,
 * repeat_last_n. */
static bool chat_llama_extras(const json_t *body, int n_ctx, struct gen_params *g,
                              struct api_fail *f)
{
    int64_t n_predict = 0;
    if (!v_int(body, "n_predict", "n_predict", -1, INT32_MAX, &n_predict, f) ||
        !params_llama_extras(body, n_ctx, g, f))
        return false;
    bool has_max =
        json_object_get(body, "max_tokens") || json_object_get(body, "max_completion_tokens");
    if (json_object_get(body, "n_predict") && !has_max)
        g->max_tokens = n_predict < 0 ? -1 : n_predict == 0 ? 1 : (int)n_predict;
    return true;
}

#define CHAT_MAX_CHOICES 16 // n: answers per request

/* stream, stream_options, n (more than one only whole), verbose. */
static bool parse_flags(const struct api_ctx *ctx, json_t *body, bool *stream, struct chat_call *c,
                        struct api_fail *f)
{
    int64_t n = 1;
    bool *include_usage = &c->include_usage;
    const json_t *so = json_object_get(body, "stream_options");
    if (!v_bool(body, "stream", "stream", stream, f) ||
        !v_int(body, "n", "n", 1, CHAT_MAX_CHOICES, &n, f) ||
        !v_bool(body, "verbose", "verbose", &c->is_verbose, f))
        return false;
    if (n > 1 && *stream)
        return api_failf(f, 400, "unsupported_value", "n",
                         "'n' above 1 is answered whole only; send stream false");
    c->n_choices = (int)n;
    c->is_verbose = c->is_verbose || ctx->is_verbose;
    if (so && !json_is_null(so) && !json_is_object(so))
        return api_failf(f, 400, "invalid_type", "stream_options",
                         "Invalid type for 'stream_options': expected an object, but got %s.",
                         v_type_name(so));
    return v_bool(so, "include_usage", "stream_options.include_usage", include_usage, f);
}

/* Validates the request's own fields, then renders, tokenizes and starts generation through
 * chat_session_start (shared with the Anthropic and Responses endpoints). */
static bool start_chat(const struct api_ctx *ctx, json_t *body, struct chat_call *c,
                       struct api_fail *f, bool *stream)
{
    struct gen_request_params p;
    static const struct params_names names = {"max_tokens", "max_completion_tokens", "stop"};
    json_t *tools = NULL;
    bool parallel = true;
    bool add_gen = true, is_continue = false;
    if (!v_bool(body, "add_generation_prompt", "add_generation_prompt", &add_gen, f) ||
        !v_bool(body, "continue_final_message", "continue_final_message", &is_continue, f))
        return false;
    if (add_gen && is_continue && json_object_get(body, "add_generation_prompt"))
        return api_failf(f, 400, "invalid_value", "continue_final_message",
                         "'continue_final_message' and 'add_generation_prompt' cannot both be "
                         "true");
    if (!chat_session_precheck(c->model, body, f) || !parse_flags(ctx, body, stream, c, f) ||
        !params_merge_base(ctx->gen_defaults, model_default_params(c->model), body, &names,
                           model_desc(c->model)->n_vocab, &p, f) ||
        !chat_llama_extras(body, model_desc(c->model)->n_ctx, &p.gen, f) ||
        !parse_logprobs(body, c, &p.gen, f) || !parse_tools(body, &tools, f) ||
        !v_bool(body, "parallel_tool_calls", "parallel_tool_calls", &parallel, f))
        return false;
    const json_t *kwargs = json_object_get(body, "chat_template_kwargs");
    struct chat_session_args a = {
        .model = c->model,
        .messages = json_object_get(body, "messages"),
        .tools = tools,
        .params = &p,
        .enable_thinking = p.enable_thinking,
        .template_kwargs = json_is_object(kwargs) ? kwargs : NULL,
        .media_path = ctx->media_path,
        .structured = body,
        // also without tools, so that a forced call with none to call is refused
        .tool_choice = json_object_get(body, "tool_choice"),
        .is_parallel = parallel,
        .metrics = ctx->metrics,
        .is_prefill = true, // llama-server's default (--prefill-assistant)
    };
    int n_prompt;
    return chat_session_start(&a, &c->session, &n_prompt, f) == ERR_OK;
}

void api_chat_completions(const struct api_ctx *ctx, const struct api_request *req,
                          struct api_response *resp)
{
    struct api_fail f = {0};
    struct chat_call *c = mem_calloc(1, sizeof *c);
    if (!c) {
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    c->model = api_resolve_model(ctx, req->json, MODEL_KIND_CHAT, &f);
    bool stream = false;
    if (!c->model || !start_chat(ctx, req->json, c, &f, &stream)) {
        api_fail_respond(&f, resp);
        chat_call_free(c);
        return;
    }
    chat_session_add_warning(c->session, resp); // what the runtime will not apply
    api_make_id("chatcmpl-", c->id, sizeof c->id);
    c->created = clock_unix_s();
    snprintf(c->fingerprint, sizeof c->fingerprint, "b%s-llamapi",
             ctx->version ? ctx->version : "dev");
    if (!stream) {
        respond_whole(ctx, req->json, c, resp);
        chat_call_free(c);
        return;
    }
    struct buf first;
    buf_init(&first);
    sse_append_json(&first, NULL,
                    chunk_json(c, json_pack("{s:s, s:n}", "role", "assistant", "content"), NULL));
    sse_respond(resp, chat_produce, chat_call_free, c, first.data);
    buf_deinit(&first);
}
