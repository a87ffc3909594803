/* Log-probability JSON shared by the native and OpenAI endpoints. */
#include "api/generation/logprobs.h"

#include "api/native/native_prompt.h"
#include "text/json_text.h"
#include "util/buf.h"

#include <math.h>

json_t *api_text_json(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len);
    if (j) return j;
    struct buf b;
    buf_init(&b);
    j = native_utf8_sanitize(s, len, &b) == ERR_OK ? json_stringn(b.data ? b.data : "", b.len)
                                                   : NULL;
    buf_deinit(&b);
    return j;
}

static json_t *bytes_json(struct str piece)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < piece.len; i++)
        json_array_append_new(a, json_integer((unsigned char)piece.ptr[i]));
    return a;
}

/* An entry: token, bytes and its logprob, or (is_prob: llama-server's post-sampling shape) its
 * probability as "prob". */
static json_t *entry_json(const struct tokenizer *tok, int32_t id, float logprob, bool with_id,
                          bool is_prob)
{
    struct str piece = tok_piece(tok, id);
    // JSON has no -Infinity: a banned token reports a very large negative number instead.
    double v = is_prob             ? json_text_float(expf(logprob))
               : isfinite(logprob) ? json_text_float(logprob)
                                   : -1e30;
    json_t *e = json_pack("{s:o, s:o, s:f}", "token", api_text_json(piece.ptr, piece.len), "bytes",
                          bytes_json(piece), is_prob ? "prob" : "logprob", v);
    if (e && with_id && json_object_set_new(e, "id", json_integer(id)) != 0) {
        json_decref(e);
        return NULL;
    }
    return e;
}

json_t *api_logprobs_json(const struct tokenizer *tok, const struct gen_event *ev, int n,
                          int max_top, bool with_ids)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        int n_top = ev[i].n_probs < GEN_MAX_PROBS ? ev[i].n_probs : GEN_MAX_PROBS;
        if (max_top >= 0 && n_top > max_top) n_top = max_top;
        bool is_prob = ev[i].is_post && with_ids; // llama.cpp's shape only
        json_t *e = entry_json(tok, ev[i].token, ev[i].logprob, with_ids, is_prob);
        json_t *top = json_array();
        for (int k = 0; top && k < n_top; k++) {
            json_t *alt =
                entry_json(tok, ev[i].top[k].token, ev[i].top[k].logprob, with_ids, is_prob);
            if (!alt || json_array_append_new(top, alt) != 0) {
                json_decref(top);
                top = NULL;
            }
        }
        if (!e || !top ||
            json_object_set_new(e, is_prob ? "top_probs" : "top_logprobs", top) != 0 ||
            json_array_append_new(a, e) != 0) {
            json_decref(e);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}
