/* POST /v1/responses and /v1/responses/input_tokens: OpenAI's Responses API on the chat
 * machinery, with the response object, the typed stream events (each with a sequence_number)
 * and previous_response_id through the in-memory response store. */
#include "api/generation/chat_session.h"
#include "api/errors.h"
#include "api/handlers.h"
#include "api/ids.h"
#include "api/openai_chat.h"
#include "api/responses/response_store.h"
#include "api/responses/responses_convert.h"
#include "api/responses/responses_stream.h"
#include "api/generation/sse.h"
#include "text/json_text.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

struct resp_call {
    struct model *model; // one reference
    struct gen_session *session;
    json_t *body; // one reference: params.stops and echoed fields
    struct gen_request_params params;
    struct response_store *store; // borrowed (lives as long as the server) or NULL
    bool is_store;
    json_t *history; // the conversation so far, stored with the answer
    char id[48];
    int64_t created_at;
    struct responses_stream stream; // streaming: the event writer
    struct buf text;                // non-streaming: all text
    struct buf reasoning;
};

static void resp_call_free(void *p)
{
    struct resp_call *c = p;
    gen_session_end(c->session);
    if (c->model) model_release(c->model);
    json_decref(c->body);
    json_decref(c->history);
    responses_stream_deinit(&c->stream);
    buf_deinit(&c->text);
    buf_deinit(&c->reasoning);
    mem_free(c);
}

static json_t *echo(const json_t *body, const char *key, json_t *fallback)
{
    json_t *v = json_object_get(body, key);
    if (v && !json_is_null(v)) {
        json_decref(fallback);
        return json_incref(v);
    }
    return fallback;
}

static json_t *usage_json(const struct resp_call *c)
{
    struct request_timings t;
    gen_session_timings(c->session, &t);
    int p = gen_session_n_prompt(c->session), n = gen_session_n_completion(c->session);
    return json_pack("{s:i, s:{s:i}, s:i, s:{s:i}, s:i}", "input_tokens", p, "input_tokens_details",
                     "cached_tokens", t.n_cached, "output_tokens", n, "output_tokens_details",
                     "reasoning_tokens", 0, "total_tokens", p + n);
}

/* The response object. output and usage are consumed (usage NULL: null). */
static json_t *response_json(const struct resp_call *c, const char *status, json_t *output,
                             json_t *usage)
{
    const json_t *b = c->body;
    json_t *incomplete = strcmp(status, "incomplete") == 0
                             ? json_pack("{s:s}", "reason", "max_output_tokens")
                             : json_null();
    json_t *j = json_pack(
        "{s:s, s:s, s:I, s:s, s:s, s:o, s:o, s:n, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
        "s:o, s:b, s:{s:{s:s}}, s:o, s:s, s:o}",
        "id", c->id, "object", "response", "created_at", (json_int_t)c->created_at, "status",
        status, "model", model_id(c->model), "output", output, "usage", usage ? usage : json_null(),
        "error", "incomplete_details", incomplete, "instructions",
        echo(b, "instructions", json_null()), "max_output_tokens",
        echo(b, "max_output_tokens", json_null()), "previous_response_id",
        echo(b, "previous_response_id", json_null()), "parallel_tool_calls",
        echo(b, "parallel_tool_calls", json_true()), "temperature",
        echo(b, "temperature", json_real(json_text_float(c->params.gen.temperature))), "top_p",
        echo(b, "top_p", json_real(json_text_float(c->params.gen.top_p))), "tool_choice",
        echo(b, "tool_choice", json_string("auto")), "tools", echo(b, "tools", json_array()),
        "reasoning", echo(b, "reasoning", json_pack("{s:n, s:n}", "effort", "summary")), "store",
        c->is_store, "text", "format", "type", "text", "metadata",
        echo(b, "metadata", json_object()), "truncation", "disabled", "user",
        echo(b, "user", json_null()));
    return j;
}

static const char *final_status(const struct gen_delta *d)
{
    return strcmp(d->finish_reason, "length") == 0 ? "incomplete" : "completed";
}

/* Appends the answer to the conversation and remembers it under the response id. */
static void store_answer(struct resp_call *c, const json_t *output)
{
    if (!c->is_store || !c->store) return;
    struct api_fail f = {0};
    int rc = responses_items_to_chat(output, "output", c->history, &f)
                 ? response_store_put(c->store, c->id, c->history)
                 : ERR_NOMEM;
    if (rc != ERR_OK) log_warn("response %s not stored: %s", c->id, err_str(rc));
}

/* Chat's failures in this API's names: structured-output failures name response_format
 * (json_schema nested), which here is the flat text.format; a prompt over the context names
 * messages, which here is input. */
static void rename_chat_param(struct api_fail *f)
{
    if (strcmp(f->param, "messages") == 0) {
        snprintf(f->param, sizeof f->param, "input");
        return;
    }
    static const char *const prefixes[] = {"response_format.json_schema", "response_format"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(f->param, prefixes[i], n) != 0) continue;
        char rest[sizeof f->param];
        snprintf(rest, sizeof rest, "%s", f->param + n);
        snprintf(f->param, sizeof f->param, "text.format%.100s", rest);
        return;
    }
}

/* Validates the request, builds the conversation and starts generation. */
static bool start_response(const struct api_ctx *ctx, json_t *body, struct resp_call *c,
                           bool *stream, struct api_fail *f)
{
    static const struct params_names names = {"max_output_tokens", NULL, "stop"};
    c->model = api_resolve_model(ctx, body, MODEL_KIND_CHAT, f);
    if (!c->model) return false;
    c->body = json_incref(body);
    c->store = ctx->responses;
    c->is_store = true;
    const char *prev_id = NULL;
    bool parallel = true;
    const json_t *meta = json_object_get(body, "metadata");
    if (!v_bool(body, "stream", "stream", stream, f) ||
        !v_bool(body, "store", "store", &c->is_store, f) ||
        !v_bool(body, "parallel_tool_calls", "parallel_tool_calls", &parallel, f) ||
        !v_string(body, "previous_response_id", "previous_response_id", 63, &prev_id, f) ||
        !params_merge_base(ctx->gen_defaults, model_default_params(c->model), body, &names,
                           model_desc(c->model)->n_vocab, &c->params, f))
        return false;
    if (meta && !json_is_null(meta) && !json_is_object(meta))
        return api_failf(f, 400, "invalid_type", "metadata",
                         "Invalid type for 'metadata': expected an object, but got %s.",
                         v_type_name(meta));
    json_t *previous = NULL;
    if (prev_id &&
        !(previous = ctx->responses ? response_store_get(ctx->responses, prev_id) : NULL))
        return api_failf(f, 400, "previous_response_not_found", "previous_response_id",
                         "Previous response with id '%s' not found (the server keeps the last "
                         "%d stored responses in memory).",
                         prev_id, RESPONSE_STORE_MAX);
    struct responses_chat chat;
    bool ok = responses_to_chat(body, previous, &chat, f);
    json_decref(previous);
    if (!ok) return false;
    c->history = json_incref(chat.history);
    struct chat_session_args a = {
        .model = c->model,
        .media_path = ctx->media_path,
        .messages = chat.messages,
        .tools = chat.tools,
        .params = &c->params,
        .enable_thinking =
            chat.enable_thinking >= 0 ? chat.enable_thinking : c->params.enable_thinking,
        .structured = chat.structured,
        .tool_choice = chat.tool_choice,
        .is_parallel = chat.is_parallel,
        .metrics = ctx->metrics,
    };
    int n_prompt = 0;
    int rc = chat_session_start(&a, &c->session, &n_prompt, f);
    responses_chat_deinit(&chat);
    rename_chat_param(f);
    return rc == ERR_OK;
}

static void respond_whole(struct resp_call *c, struct api_response *resp)
{
    struct gen_delta d;
    do {
        gen_session_next(c->session, -1, &d);
        buf_append(&c->text, d.content.ptr, d.content.len);
        buf_append(&c->reasoning, d.reasoning.ptr, d.reasoning.len);
    } while (!d.is_done);
    if (!d.finish_reason) {
        api_outcome_error(resp, d.error_status, d.error_message);
        return;
    }
    struct responses_output o = {
        .reasoning = {c->reasoning.data, c->reasoning.len},
        .text = {c->text.data, c->text.len},
    };
    o.calls = gen_session_calls(c->session, &o.n_calls);
    o.is_incomplete = strcmp(final_status(&d), "incomplete") == 0;
    json_t *output = responses_output_json(&o);
    if (output) store_answer(c, output);
    api_respond_json(resp, 200, response_json(c, final_status(&d), output, usage_json(c)));
}

/* ---- streaming ---- */

static int stream_delta(struct resp_call *c, const struct gen_delta *d, struct buf *out)
{
    struct responses_output o = {
        .reasoning = d->reasoning, .text = d->content, .calls = d->calls, .n_calls = d->n_calls};
    return responses_stream_delta(&c->stream, &o, out);
}

static void stream_end(struct resp_call *c, const struct gen_delta *d, struct buf *out)
{
    if (!d->finish_reason) {
        const char *code = api_outcome_code(d->error_status, d->error_message);
        if (!code || d->error_status == 404 || d->error_status == 503)
            code = d->error_status == 429 ? "rate_limit_exceeded" : "server_error";
        responses_stream_event(
            &c->stream, "error",
            json_pack("{s:s, s:s, s:n}", "code", code, "message", d->error_message, "param"), out);
        return;
    }
    const char *status = final_status(d);
    c->stream.is_incomplete = strcmp(status, "incomplete") == 0;
    if (responses_stream_close(&c->stream, out) != ERR_OK) return;
    store_answer(c, c->stream.output);
    responses_stream_event(
        &c->stream, strcmp(status, "completed") == 0 ? "response.completed" : "response.incomplete",
        json_pack("{s:o}", "response",
                  response_json(c, status, json_incref(c->stream.output), usage_json(c))),
        out);
}

static enum sse_status responses_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct resp_call *c = ctx;
    struct gen_delta d;
    if (!gen_session_next(c->session, timeout_ms, &d)) return SSE_MORE;
    if (stream_delta(c, &d, out) != ERR_OK) return SSE_END;
    if (!d.is_done) return SSE_MORE;
    stream_end(c, &d, out);
    return SSE_END;
}

static void respond_stream(struct resp_call *c, struct api_response *resp)
{
    struct buf first;
    buf_init(&first);
    int rc = responses_stream_init(&c->stream);
    if (rc == ERR_OK)
        rc = responses_stream_event(
            &c->stream, "response.created",
            json_pack("{s:o}", "response", response_json(c, "in_progress", json_array(), NULL)),
            &first);
    if (rc == ERR_OK)
        rc = responses_stream_event(
            &c->stream, "response.in_progress",
            json_pack("{s:o}", "response", response_json(c, "in_progress", json_array(), NULL)),
            &first);
    if (rc != ERR_OK) {
        buf_deinit(&first);
        resp_call_free(c);
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    sse_respond(resp, responses_produce, resp_call_free, c, first.data);
    buf_deinit(&first);
}

void api_responses_create(const struct api_ctx *ctx, const struct api_request *req,
                          struct api_response *resp)
{
    struct api_fail f = {0};
    struct resp_call *c = mem_calloc(1, sizeof *c);
    if (!c) {
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    bool stream = false;
    if (!start_response(ctx, req->json, c, &stream, &f)) {
        api_fail_respond(&f, resp);
        resp_call_free(c);
        return;
    }
    chat_session_add_warning(c->session, resp); // what the runtime will not apply
    api_make_id("resp_", c->id, sizeof c->id);
    c->created_at = clock_unix_s();
    if (stream) {
        respond_stream(c, resp);
        return;
    }
    respond_whole(c, resp);
    resp_call_free(c);
}

void api_responses_input_tokens(const struct api_ctx *ctx, const struct api_request *req,
                                struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = api_resolve_model(ctx, req->json, MODEL_KIND_CHAT, &f);
    const char *prev_id = NULL;
    json_t *previous = NULL;
    struct responses_chat chat = {0};
    int n = 0;
    bool ok =
        m && v_string(req->json, "previous_response_id", "previous_response_id", 63, &prev_id, &f);
    if (ok && prev_id &&
        !(previous = ctx->responses ? response_store_get(ctx->responses, prev_id) : NULL))
        ok = api_failf(&f, 400, "previous_response_not_found", "previous_response_id",
                       "Previous response with id '%s' not found.", prev_id);
    ok = ok && responses_to_chat(req->json, previous, &chat, &f);
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
        api_respond_json(
            resp, 200,
            json_pack("{s:s, s:i}", "object", "response.input_tokens", "input_tokens", n));
    else
        api_fail_respond(&f, resp);
    responses_chat_deinit(&chat);
    json_decref(previous);
    if (m) model_release(m);
}
