/* POST /v1/completions: OpenAI's legacy text completions (prompt string, token array or a
 * one-element array of either; max_tokens; stream as `text_completion` chunks ending in
 * [DONE]; usage) on the native generation call, plus llama.cpp's `timings`. */
#include "api/handlers.h"

#include "api/errors.h"
#include "api/ids.h"
#include "api/native/native_internal.h"
#include "api/openai_chat.h"
#include "api/generation/sse.h"
#include "util/clock.h"
#include "util/mem.h"

#include <string.h>

/* Code points in a UTF-8 string (continuation bytes are not counted). */
static int n_chars(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* The legacy logprobs object {tokens, token_logprobs, top_logprobs:[{token: logprob}],
 * text_offset} for entries in llama.cpp's shape ({token, logprob, top_logprobs}); offsets
 * count characters of the completion text and continue across stream chunks. */
static json_t *legacy_logprobs_json(struct native_call *c, const json_t *entries)
{
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    json_t *j = json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps,
                          "top_logprobs", tops, "text_offset", offs);
    size_t i, k;
    const json_t *e, *alt;
    json_array_foreach(entries, i, e)
    {
        const char *tok = json_string_value(json_object_get(e, "token"));
        json_t *top = json_object();
        json_array_foreach(json_object_get(e, "top_logprobs"), k, alt)
        {
            if ((int)k >= c->oai_logprobs) break;
            // Keyed by text: tokens with the same text (or bytes shown as U+FFFD) keep the
            // most likely one, which comes first.
            const char *key = json_string_value(json_object_get(alt, "token"));
            if (key && !json_object_get(top, key))
                json_object_set(top, key, json_object_get(alt, "logprob"));
        }
        json_array_append_new(tokens, json_string(tok ? tok : ""));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer(c->oai_text_offset));
        c->oai_text_offset += tok ? n_chars(tok) : 0;
    }
    return j;
}

static json_t *choice_json(struct native_call *c, struct str text, const char *finish,
                           const json_t *entries)
{
    json_t *lp = c->oai_logprobs >= 0 && entries ? legacy_logprobs_json(c, entries) : json_null();
    return json_pack("{s:s%, s:i, s:o, s:o}", "text", text.ptr, text.len, "index", 0, "logprobs",
                     lp, "finish_reason", finish ? json_string(finish) : json_null());
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
        api_outcome_error(resp, d.error_status, d.error_message);
        return;
    }
    struct str text = {c->content.data ? c->content.data : "", c->content.len};
    json_t *j =
        completion_json(c, json_pack("[o]", choice_json(c, text, d.finish_reason, c->probs)));
    add_usage(c, j);
    api_respond_json(resp, 200, j);
}

static enum sse_status oai_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct native_call *c = ctx;
    struct gen_delta d;
    if (!native_call_step(c, timeout_ms, &d)) return SSE_MORE;
    bool has_probs = c->oai_logprobs >= 0 && json_array_size(c->step_probs) > 0;
    for (int i = 0; i < d.n_progress; i++) { // return_progress: an empty chunk per point
        struct str empty = {"", 0};
        json_t *j = completion_json(c, json_pack("[o]", choice_json(c, empty, NULL, NULL)));
        if (j) json_object_set_new(j, "prompt_progress", api_progress_json(&d.progress[i]));
        if (sse_append_json(out, NULL, j) != ERR_OK) return SSE_END;
    }
    if ((d.content.len || has_probs) &&
        sse_append_json(out, NULL,
                        completion_json(c, json_pack("[o]", choice_json(c, d.content, NULL,
                                                                        c->step_probs)))) != ERR_OK)
        return SSE_END;
    if (!d.is_done) return SSE_MORE;
    if (!d.finish_reason) {
        sse_append_json(out, "error", api_outcome_error_json(d.error_status, d.error_message));
        return SSE_END;
    }
    struct str empty = {"", 0};
    sse_append_json(
        out, NULL,
        completion_json(c, json_pack("[o]", choice_json(c, empty, d.finish_reason, NULL))));
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
    int64_t n = 1, best_of = 1;
    bool echo = false;
    const char *suffix = NULL;
    const json_t *so = json_object_get(body, "stream_options");
    if (!v_int(body, "n", "n", 1, 1, &n, f) ||
        !v_int(body, "best_of", "best_of", 1, 1, &best_of, f) ||
        !v_bool(body, "echo", "echo", &echo, f) ||
        !v_string(body, "suffix", "suffix", 1 << 20, &suffix, f))
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

/* `logprobs`: 0–5 alternatives per token (OpenAI's range), or null/absent for none. Asks the
 * platform for at least one so the chosen token's log-probability is computed. */
static bool parse_logprobs(const json_t *body, struct native_call *c, struct api_fail *f)
{
    int64_t n = -1;
    c->oai_logprobs = -1;
    const json_t *v = json_object_get(body, "logprobs");
    if (!v || json_is_null(v)) return true;
    if (!v_int(body, "logprobs", "logprobs", 0, 5, &n, f)) return false;
    c->oai_logprobs = (int)n;
    c->np.p.gen.n_probs = n > 0 ? (int)n : 1;
    return true;
}

void api_completions(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    static const struct params_names names = {"max_tokens", NULL, "stop"};
    struct api_fail f = {0};
    struct model *m = NULL;
    m = api_resolve_model(ctx, req->json, MODEL_KIND_CHAT, &f);
    if (m && model_desc(m)->is_text_io) { // no tokenizer of ours: prompts are chat only
        api_failf(&f, 400, "unsupported_platform", "model",
                  "The model '%s' runs on the %s platform, which serves chat messages only "
                  "(/v1/chat/completions, /v1/messages, /v1/responses).",
                  model_id(m), model_platform(m)->id);
        model_release(m);
        m = NULL;
    }
    struct native_call *c = m ? native_call_new(m) : NULL;
    if (m && !c) api_failf(&f, 500, NULL, NULL, "out of memory");
    struct native_tokenizer t;
    bool ok = c && check_unsupported(req->json, &f) &&
              native_params_parse(ctx, c->model, req->json, &names, &c->np, &f) &&
              parse_logprobs(req->json, c, &f) &&
              v_bool(json_object_get(req->json, "stream_options"), "include_usage",
                     "stream_options.include_usage", &c->include_usage, &f);
    if (ok) {
        native_tokenizer_of(c->model, &t);
        ok = native_prompt_parse(json_object_get(req->json, "prompt"), "prompt", &t, true, true,
                                 &c->prompt, &f) == ERR_OK &&
             native_call_start(ctx, c, &f) == ERR_OK;
    }
    if (!ok) {
        api_fail_respond(&f, resp);
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
