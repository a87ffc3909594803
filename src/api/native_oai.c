/* POST /v1/completions: OpenAI's legacy text completions (prompt string, token array or a
 * one-element array of either; max_tokens; stream as `text_completion` chunks ending in
 * [DONE]; usage) on the native generation call, plus llama.cpp's `timings`. */
#include "api/handlers.h"

#include "api/errors.h"
#include "api/ids.h"
#include "api/native_internal.h"
#include "api/openai_chat.h"
#include "api/sse.h"
#include "util/clock.h"
#include "util/mem.h"

#include <string.h>

static json_t *choice_json(struct str text, const char *finish)
{
    return json_pack("{s:s%, s:i, s:n, s:o}", "text", text.ptr, text.len, "index", 0, "logprobs",
                     "finish_reason", finish ? json_string(finish) : json_null());
}

static json_t *completion_json(const struct native_call *c, json_t *choices)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:o, s:s}", "id", c->id, "object", "text_completion",
                     "created", (json_int_t)c->created, "model", model_id(c->model), "choices",
                     choices, "system_fingerprint", "llamapi");
}

static json_t *usage_json(struct native_call *c)
{
    if (c->session) return api_usage_json(c->session);
    int p = (int)c->prompt.n_ids;
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", p, "completion_tokens", 0,
                     "total_tokens", p, "prompt_tokens_details", "cached_tokens", 0);
}

static void add_usage(struct native_call *c, json_t *j)
{
    if (!j) return;
    json_object_set_new(j, "usage", usage_json(c));
    if (c->session) json_object_set_new(j, "timings", api_timings_json(c->session));
}

static void respond_whole(struct native_call *c, struct api_response *resp)
{
    struct gen_delta d;
    do {
        native_call_step(c, -1, &d);
    } while (!d.is_done);
    if (!d.finish_reason) {
        api_error(resp, d.error_status ? d.error_status : 500,
                  d.error_status >= 500 ? API_TYPE_SERVER : API_TYPE_INVALID_REQUEST, NULL, NULL,
                  "%s", d.error_message);
        return;
    }
    struct str text = {c->content.data ? c->content.data : "", c->content.len};
    json_t *j = completion_json(c, json_pack("[o]", choice_json(text, d.finish_reason)));
    add_usage(c, j);
    api_respond_json(resp, 200, j);
}

static enum sse_status oai_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct native_call *c = ctx;
    struct gen_delta d;
    if (!native_call_step(c, timeout_ms, &d)) return SSE_MORE;
    if (d.content.len &&
        sse_append_json(out, NULL,
                        completion_json(c, json_pack("[o]", choice_json(d.content, NULL)))) !=
            ERR_OK)
        return SSE_END;
    if (!d.is_done) return SSE_MORE;
    if (!d.finish_reason) {
        sse_append_json(
            out, "error",
            api_error_json(d.error_status >= 500 ? API_TYPE_SERVER : API_TYPE_INVALID_REQUEST, NULL,
                           NULL, d.error_message));
        return SSE_END;
    }
    struct str empty = {"", 0};
    sse_append_json(out, NULL,
                    completion_json(c, json_pack("[o]", choice_json(empty, d.finish_reason))));
    if (c->include_usage) {
        json_t *u = completion_json(c, json_array());
        add_usage(c, u);
        sse_append_json(out, NULL, u);
    }
    buf_append_cstr(out, "data: [DONE]\n\n");
    return SSE_END;
}

/* Fields of the legacy API this server cannot honour, refused rather than ignored. */
static bool check_unsupported(const json_t *body, struct api_fail *f)
{
    int64_t n = 1, best_of = 1, logprobs = 0;
    bool echo = false;
    const char *suffix = NULL;
    const json_t *so = json_object_get(body, "stream_options");
    if (!v_int(body, "n", "n", 1, 1, &n, f) ||
        !v_int(body, "best_of", "best_of", 1, 1, &best_of, f) ||
        !v_bool(body, "echo", "echo", &echo, f) ||
        !v_string(body, "suffix", "suffix", 1 << 20, &suffix, f))
        return false;
    if (json_is_integer(json_object_get(body, "logprobs")) &&
        !v_int(body, "logprobs", "logprobs", 0, 0, &logprobs, f))
        return false;
    if (echo) return api_failf(f, 400, "unsupported_value", "echo", "'echo' is not supported");
    if (suffix && *suffix)
        return api_failf(f, 400, "unsupported_value", "suffix",
                         "'suffix' is not supported; use POST /infill");
    if (so && !json_is_null(so) && !json_is_object(so))
        return api_failf(f, 400, "invalid_type", "stream_options",
                         "Invalid type for 'stream_options': expected an object, but got %s.",
                         v_type_name(so));
    return true;
}

void api_completions(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    static const struct params_names names = {"max_tokens", NULL, "stop"};
    struct api_fail f = {0};
    struct model *m = NULL;
    if (v_require(req->json, "model", "model", &f))
        m = api_resolve_model(ctx, req->json, MODEL_KIND_CHAT, &f);
    struct native_call *c = m ? native_call_new(m) : NULL;
    if (m && !c) api_failf(&f, 500, NULL, NULL, "out of memory");
    struct native_tokenizer t;
    bool ok = c && check_unsupported(req->json, &f) &&
              native_params_parse(ctx, c->model, req->json, &names, &c->np, &f) &&
              v_bool(json_object_get(req->json, "stream_options"), "include_usage",
                     "stream_options.include_usage", &c->include_usage, &f);
    if (ok) {
        native_tokenizer_of(c->model, &t);
        ok = native_prompt_parse(json_object_get(req->json, "prompt"), "prompt", &t, true, true,
                                 &c->prompt, &f) == ERR_OK &&
             native_call_start(ctx, c, &f) == ERR_OK;
    }
    if (!ok) {
        api_fail_respond_retry(&f, resp);
        native_call_free(c);
        return;
    }
    api_make_id("cmpl-", c->id, sizeof c->id);
    c->created = clock_unix_s();
    c->is_oai = true;
    if (!c->np.is_stream) {
        respond_whole(c, resp);
        native_call_free(c);
        return;
    }
    sse_respond(resp, oai_produce, native_call_free, c, NULL);
}
