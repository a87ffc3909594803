/* The answer of /api/chat and /api/generate: chunks, the final object, whole or streamed. */
#include "api/ollama/call.h"

#include "api/errors.h"
#include "api/generation/chat_session.h"
#include "api/generation/logprobs.h"
#include "api/ollama/convert.h"
#include "api/ollama/ndjson.h"
#include "api/ollama/options.h"
#include "text/reasoning.h"
#include "util/clock.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

struct ollama_call *ollama_call_new(bool is_chat)
{
    struct ollama_call *c = mem_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->is_chat = is_chat;
    c->think = -1;
    c->top_logprobs = -1;
    c->start_ns = clock_now_ns();
    c->loaded_ns = c->start_ns;
    tok_ids_init(&c->answer_ids);
    return c;
}

void ollama_call_free(void *call)
{
    struct ollama_call *c = call;
    if (!c) return;
    gen_session_end(c->session);
    if (c->model) model_release(c->model);
    json_decref(c->body);
    buf_deinit(&c->content);
    buf_deinit(&c->thinking);
    tok_ids_deinit(&c->answer_ids);
    json_decref(c->logprobs);
    mem_free(c);
}

bool ollama_call_params(const struct api_ctx *ctx, struct ollama_call *c, struct api_fail *f)
{
    static const struct params_names names = {"max_tokens", NULL, "stop"};
    const struct platform_model_desc *d = model_desc(c->model);
    return params_merge_base(ctx->gen_defaults, model_default_params(c->model), c->body, &names,
                             d->n_vocab, &c->params, f) &&
           params_llama_extras(c->body, d->n_ctx, &c->params.gen, f);
}

/* keep_alive: a duration string ("5m", "-1") or a number of seconds. Accepted and not
 * applied: models here stay loaded until unloaded (POST /v1/models/unload). */
static bool keep_alive_check(const json_t *body, struct api_fail *f)
{
    const json_t *v = json_object_get(body, "keep_alive");
    if (!v || json_is_null(v) || json_is_string(v) || json_is_number(v)) return true;
    return api_failf(f, 400, "invalid_type", "keep_alive",
                     "keep_alive must be a duration string or a number of seconds, not %s",
                     v_type_name(v));
}

/* logprobs / top_logprobs: Ollama's range and message. The platform computes probabilities
 * only when asked for alternatives, so at least one is asked. */
static bool logprobs_parse(const json_t *req, struct ollama_call *c, struct api_fail *f)
{
    bool want = false;
    int64_t top = 0;
    if (!v_bool(req, "logprobs", "logprobs", &want, f)) return false;
    const json_t *t = json_object_get(req, "top_logprobs");
    if (t && !json_is_null(t) &&
        (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > GEN_MAX_PROBS))
        return api_failf(f, 400, "invalid_value", "top_logprobs",
                         "top_logprobs must be between 0 and %d", GEN_MAX_PROBS);
    if (json_is_integer(t)) top = json_integer_value(t);
    if (!want) return true;
    c->logprobs = json_array();
    if (!c->logprobs) return api_failf(f, 500, NULL, NULL, "out of memory");
    c->top_logprobs = (int)top;
    c->params.gen.n_probs = top > 0 ? (int)top : 1;
    return true;
}

bool ollama_call_begin(const struct api_ctx *ctx, const json_t *req, struct ollama_call *c,
                       bool *is_stream, struct api_fail *f)
{
    const char *name = ollama_request_name(req, f);
    if (!name || !ollama_stream_parse(req, is_stream, f) ||
        !ollama_think_parse(req, &c->think, f) || !keep_alive_check(req, f))
        return false;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->model = ollama_model_acquire(ctx, name, MODEL_KIND_CHAT, f);
    if (!c->model && !c->is_chat && f->code && strcmp(f->code, "wrong_model_type") == 0)
        api_failf(f, 400, "wrong_model_type", "model", "\"%.200s\" does not support generate",
                  name); // Ollama names the route's capability
    if (!c->model) return false;
    c->loaded_ns = clock_now_ns();
    return ollama_options_to_body(req, &c->body, f) &&
           chat_session_precheck(c->model, c->body, f) && ollama_call_params(ctx, c, f) &&
           ollama_think_check(c, f) && logprobs_parse(req, c, f);
}

bool ollama_think_parse(const json_t *body, int *out, struct api_fail *f)
{
    const json_t *v = json_object_get(body, "think");
    *out = -1;
    if (!v || json_is_null(v)) return true;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return true;
    }
    const char *s = json_string_value(v);
    if (s && (strcmp(s, "low") == 0 || strcmp(s, "medium") == 0 || strcmp(s, "high") == 0 ||
              strcmp(s, "max") == 0)) {
        *out = 1; // no effort levels here: thinking is on or off
        return true;
    }
    return api_failf(f, 400, "invalid_value", "think",
                     "invalid think value: must be a boolean or \"high\", \"medium\", \"low\", "
                     "\"max\"");
}

bool ollama_stream_parse(const json_t *body, bool *out, struct api_fail *f)
{
    *out = true;
    const json_t *v = json_object_get(body, "stream");
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v))
        return api_failf(f, 400, "invalid_type", "stream", "stream must be a boolean, not %s",
                         v_type_name(v));
    *out = json_is_true(v);
    return true;
}

bool ollama_think_check(const struct ollama_call *c, struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(c->model);
    if (c->think != 1 || d->reasoning_format != REASONING_FORMAT_NONE) return true;
    return api_failf(f, 400, "invalid_value", "think", "\"%s\" does not support thinking", c->name);
}

/* The fields every line starts with. */
static json_t *line_base(const struct ollama_call *c)
{
    char now[OLLAMA_TIME_CAP];
    ollama_time_now(now);
    return json_pack("{s:s, s:s}", "model", c->name, "created_at", now);
}

/* A chunk with this text, thinking and calls (calls may be NULL), done false. */
static json_t *chunk_json(const struct ollama_call *c, struct str text, struct str thinking,
                          json_t *calls)
{
    json_t *j = line_base(c);
    if (!j) {
        json_decref(calls);
        return NULL;
    }
    json_t *th = thinking.len && c->think != 0 ? json_stringn(thinking.ptr, thinking.len) : NULL;
    if (c->is_chat) {
        json_t *msg = json_pack("{s:s, s:s%}", "role", "assistant", "content",
                                text.ptr ? text.ptr : "", text.len);
        if (msg && th) json_object_set(msg, "thinking", th);
        if (msg && calls) json_object_set(msg, "tool_calls", calls);
        json_object_set_new(j, "message", msg);
    } else {
        json_object_set_new(j, "response", json_stringn(text.ptr ? text.ptr : "", text.len));
        if (th) json_object_set(j, "thinking", th);
        if (calls) json_object_set(j, "tool_calls", calls);
    }
    json_decref(th);
    json_decref(calls);
    json_object_set_new(j, "done", json_false());
    return j;
}

/* Moves the log-probabilities not yet sent onto line j. */
static void attach_logprobs(struct ollama_call *c, json_t *j)
{
    if (!j || json_array_size(c->logprobs) == 0) return;
    json_object_set_new(j, "logprobs", c->logprobs);
    c->logprobs = json_array();
}

static json_t *calls_json(const struct toolcall *calls, const int *index, int n)
{
    if (n == 0) return NULL;
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, ollama_tool_call_json(&calls[i], index ? index[i] : i));
    return a;
}

static const char *done_reason(const char *finish_reason)
{
    // Ollama ends a turn that called tools with "stop", as any other end of turn.
    return finish_reason && strcmp(finish_reason, "length") == 0 ? "length" : "stop";
}

/* The prompt's tokens and the answer's, for generate's `context`. */
static json_t *context_json(const struct ollama_call *c)
{
    int n = 0;
    const int32_t *ids = gen_session_prompt(c->session, &n);
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    for (size_t i = 0; a && i < c->answer_ids.n_ids; i++)
        json_array_append_new(a, json_integer(c->answer_ids.ids[i]));
    return a;
}

/* Adds done, done_reason and the timings to j (a chunk). */
static void finish_fields(struct ollama_call *c, const struct gen_delta *d, json_t *j)
{
    struct request_timings t;
    gen_session_timings(c->session, &t);
    int64_t now = clock_now_ns();
    json_object_set_new(j, "done", json_true());
    json_object_set_new(j, "done_reason", json_string(done_reason(d->finish_reason)));
    json_object_set_new(j, "total_duration", json_integer(now - c->start_ns));
    json_object_set_new(j, "load_duration", json_integer(c->loaded_ns - c->start_ns));
    json_object_set_new(j, "prompt_eval_count", json_integer(gen_session_n_prompt(c->session)));
    json_object_set_new(j, "prompt_eval_duration", json_integer((json_int_t)(t.prompt_ms * 1e6)));
    json_object_set_new(j, "eval_count", json_integer(gen_session_n_completion(c->session)));
    json_object_set_new(j, "eval_duration", json_integer((json_int_t)(t.predicted_ms * 1e6)));
    json_t *ctx = !c->is_chat && c->want_context ? context_json(c) : NULL;
    if (json_array_size(ctx) > 0) // Ollama leaves an empty context out
        json_object_set_new(j, "context", ctx);
    else
        json_decref(ctx);
}

/* Keeps the step's answer tokens (for `context`) and log-probabilities. */
static void keep_step(struct ollama_call *c)
{
    if (!c->want_context && !c->logprobs) return;
    int n = 0;
    const struct gen_event *ev = gen_session_events(c->session, &n);
    for (int i = 0; c->want_context && i < n; i++)
        if (ev[i].token >= 0) tok_ids_push(&c->answer_ids, ev[i].token);
    if (!c->logprobs || n == 0) return;
    json_t *lp = api_logprobs_json(model_desc(c->model)->tokenizer, ev, n, c->top_logprobs, false);
    if (lp) json_array_extend(c->logprobs, lp);
    json_decref(lp);
}

static json_t *error_line(const struct gen_delta *d)
{
    return api_error_ollama_json(d->error_message[0] ? d->error_message : "generation failed");
}

/* ---- streamed ---- */

static enum sse_status stream_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct ollama_call *c = ctx;
    struct gen_delta d;
    if (!gen_session_next(c->session, timeout_ms, &d)) return SSE_MORE;
    keep_step(c);
    bool has_text = d.content.len || (d.reasoning.len && c->think != 0);
    if (has_text || d.n_calls) {
        json_t *calls = calls_json(d.calls, d.call_index, d.n_calls);
        json_t *line = chunk_json(c, d.content, d.reasoning, calls);
        attach_logprobs(c, line);
        if (ndjson_append(out, line) != ERR_OK) return SSE_END;
    }
    if (!d.is_done) return SSE_MORE;
    if (!d.finish_reason) {
        ndjson_append(out, error_line(&d));
        return SSE_END;
    }
    json_t *last = chunk_json(c, (struct str){"", 0}, (struct str){"", 0}, NULL);
    attach_logprobs(c, last); // tokens held back until the end (a stop string's start)
    if (last) finish_fields(c, &d, last);
    ndjson_append(out, last);
    return SSE_END;
}

/* ---- whole ---- */

static void respond_whole(struct ollama_call *c, struct api_response *resp)
{
    struct gen_delta d;
    do {
        gen_session_next(c->session, -1, &d);
        keep_step(c);
        buf_append(&c->content, d.content.ptr, d.content.len);
        buf_append(&c->thinking, d.reasoning.ptr, d.reasoning.len);
    } while (!d.is_done);
    if (!d.finish_reason) {
        int status = d.error_status ? d.error_status : 500;
        api_respond_json(resp, status, error_line(&d));
        if (status == 429 || status == 503) api_response_add_header(resp, "Retry-After", "1");
        return;
    }
    int n_calls = 0;
    const struct toolcall *calls = gen_session_calls(c->session, &n_calls);
    json_t *j = chunk_json(c, (struct str){c->content.data, c->content.len},
                           (struct str){c->thinking.data, c->thinking.len},
                           calls_json(calls, NULL, n_calls));
    attach_logprobs(c, j);
    if (j) finish_fields(c, &d, j);
    api_respond_json(resp, 200, j);
}

void ollama_call_respond(struct ollama_call *c, bool is_stream, struct api_response *resp)
{
    if (is_stream) {
        ndjson_respond(resp, stream_produce, ollama_call_free, c, NULL);
        return;
    }
    respond_whole(c, resp);
    ollama_call_free(c);
}

void ollama_respond_empty(const struct ollama_call *c, const char *reason,
                          struct api_response *resp)
{
    json_t *j = line_base(c);
    if (j && c->is_chat)
        json_object_set_new(j, "message",
                            json_pack("{s:s, s:s}", "role", "assistant", "content", ""));
    else if (j)
        json_object_set_new(j, "response", json_string(""));
    if (j) {
        json_object_set_new(j, "done", json_true());
        json_object_set_new(j, "done_reason", json_string(reason));
    }
    api_respond_json(resp, 200, j);
}
