/* llama.cpp's POST /embedding and /embeddings: the inputs in `content` (or `input`), the
 * model optional (the first embedding model), and the answer a bare array
 * [{index, embedding: [[…]]}] — one row per input for pooled models, normalized as
 * `embd_normalize` asks; with pooling none one unnormalized row per token, as the reference
 * gives them. */
#include "api/handlers.h"

#include "api/embed.h"
#include "api/errors.h"
#include "api/native/native_internal.h"
#include "util/mem.h"

#include <math.h>
#include <string.h>

/* Rescales a unit-length (L2) vector to llama.cpp's embd_normalize: 0 max-abs into the int16
 * range, 1 taxicab, 2 euclidean (as is), p > 2 the p-norm. Every one is a pure rescaling,
 * so it can start from the L2-normalized vector. */
static void renormalize(float *v, int n, int p)
{
    if (p == 2) return;
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        const double a = fabs((double)v[i]);
        if (p == 0)
            s = a > s ? a : s;
        else
            s += p == 1 ? a : pow(a, p);
    }
    if (p == 0) s /= 32760.0;
    if (p > 1) s = pow(s, 1.0 / p);
    const double k = s > 0.0 ? 1.0 / s : 0.0;
    for (int i = 0; i < n; i++)
        v[i] = (float)(v[i] * k);
}

/* Pooling none: each input's token vectors as they are (the reference ignores embd_normalize). */
static json_t *per_token_response(struct model *m, struct request *r, const struct embed_inputs *in)
{
    const int d = model_desc(m)->n_embd;
    json_t *a = json_array();
    for (int i = 0, off = 0; a && i < in->n; off += in->lens[i], i++) {
        json_t *rows = json_array();
        for (int t = 0; rows && t < in->lens[i]; t++) {
            json_t *v = embed_vector_json(r->embedding + (size_t)(off + t) * d, d, false);
            if (!v || json_array_append_new(rows, v) != 0) {
                json_decref(rows);
                rows = NULL;
            }
        }
        if (!rows ||
            json_array_append_new(a, json_pack("{s:i, s:o}", "index", i, "embedding", rows)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

static json_t *native_response(struct model *m, struct request *r, int n_inputs, int norm)
{
    const int d = model_desc(m)->n_embd;
    float *v = mem_alloc((size_t)d * sizeof *v);
    json_t *a = v ? json_array() : NULL;
    for (int i = 0; a && i < n_inputs; i++) {
        memcpy(v, r->embedding + (size_t)i * d, (size_t)d * sizeof *v);
        renormalize(v, d, norm);
        json_t *row = embed_vector_json(v, d, false);
        if (!row || json_array_append_new(
                        a, json_pack("{s:i, s:[o]}", "index", i, "embedding", row)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    mem_free(v);
    return a;
}

static bool parse_normalize(const json_t *body, bool is_per_token, int64_t *norm,
                            struct api_fail *f)
{
    *norm = 2;
    if (!v_int(body, "embd_normalize", "embd_normalize", -1, 64, norm, f)) return false;
    if (*norm == -1 && !is_per_token)
        return api_failf(f, 400, "unsupported_value", "embd_normalize",
                         "embd_normalize -1 (no normalization) is not supported: vectors are "
                         "pooled and L2-normalized by the platform");
    return true;
}

/* Per-token answers grow with every token (n_embd floats each, ~20 bytes of JSON per float):
 * a request of 2048 full-context inputs would need gigabytes. One request holds at most this
 * many tokens in total when the model answers per token. */
#define PER_TOKEN_MAX_TOKENS 16384

static bool per_token_within_limit(const struct model *m, const struct embed_inputs *in,
                                   const char *field, struct api_fail *f)
{
    if (!model_desc(m)->is_per_token || in->ids.n_ids <= PER_TOKEN_MAX_TOKENS) return true;
    return api_failf(f, 400, "invalid_value", field,
                     "The inputs have %zu tokens; a model that answers per token takes at most %d "
                     "per request.",
                     in->ids.n_ids, PER_TOKEN_MAX_TOKENS);
}

void api_native_embeddings(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp)
{
    struct api_fail f = {0};
    const json_t *body = req->json;
    const char *field = json_object_get(body, "input") ? "input" : "content";
    struct model *m = native_model_acquire(ctx, req, body, MODEL_KIND_EMBEDDING, &f);
    struct embed_inputs in = {0};
    struct request *r = NULL;
    bool is_base64 = false, is_truncate = false;
    int64_t norm = 2;
    bool ok = m && (!embed_is_reranker(m) ||
                    api_failf(&f, 400, "wrong_model_type", "model",
                              "The model '%s' is a reranker and cannot produce embeddings; "
                              "use POST /rerank",
                              model_id(m)));
    ok = ok && embed_parse_options(body, &is_base64, &is_truncate, &f) &&
         parse_normalize(body, model_desc(m)->is_per_token, &norm, &f);
    if (ok && !json_object_get(body, field))
        ok = api_failf(&f, 400, "missing_required_parameter", "content",
                       "\"input\" or \"content\" must be provided");
    ok = ok && embed_parse_inputs(m, json_object_get(body, field), field, is_truncate, &in, &f) &&
         per_token_within_limit(m, &in, field, &f) && embed_run(m, &in, &r, &f);
    json_t *j = !ok                           ? NULL
                : model_desc(m)->is_per_token ? per_token_response(m, r, &in)
                                              : native_response(m, r, in.n, (int)norm);
    api_respond_result(resp, j, ok, &f);
    request_release(r);
    embed_inputs_deinit(&in);
    model_release(m);
}
