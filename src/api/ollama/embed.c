/* POST /api/embed (inputs → L2-normalized vectors, Ollama's `embeddings` shape) and the older
 * POST /api/embeddings (one prompt → `embedding`), on the shared embedding request. */
#include "api/ollama/handlers.h"

#include "api/embed.h"
#include "api/ollama/common.h"
#include "util/clock.h"

#include <math.h>
#include <string.h>

/* One vector, cut to dims (0: all) and normalized again when cut, as Ollama's dimensions
 * option shortens an embedding. */
static json_t *vector_json(const float *v, int n, int dims)
{
    int k = dims > 0 && dims < n ? dims : n;
    double norm = 0;
    for (int i = 0; i < k; i++)
        norm += (double)v[i] * v[i];
    double scale = k < n && norm > 0 ? 1.0 / sqrt(norm) : 1.0;
    json_t *a = json_array();
    for (int i = 0; a && i < k; i++)
        json_array_append_new(a, json_real(v[i] * scale));
    return a;
}

/* The embedding model named by the request, refusing what has no single vector per input. */
static struct model *embed_model(const struct api_ctx *ctx, const json_t *body, struct api_fail *f)
{
    const char *name = ollama_request_name(body, f);
    struct model *m = name ? ollama_model_acquire(ctx, name, MODEL_KIND_EMBEDDING, f) : NULL;
    if (!m) return NULL;
    if (embed_is_reranker(m) || model_desc(m)->is_per_token) {
        api_failf(f, 400, "wrong_model_type", "model",
                  "\"%.200s\" does not support embeddings (it is a %s)", name,
                  embed_is_reranker(m) ? "reranker" : "model with a vector per token");
        model_release(m);
        return NULL;
    }
    return m;
}

/* An empty input list (Ollama answers it with no vectors) or a non-empty one. */
static bool is_empty_input(const json_t *input)
{
    return !input || json_is_null(input) || (json_is_array(input) && json_array_size(input) == 0) ||
           (json_is_string(input) && json_string_length(input) == 0);
}

void api_ollama_embed(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp)
{
    const int64_t start = clock_now_ns();
    struct api_fail f = {0};
    struct embed_inputs in = {0};
    struct request *r = NULL;
    bool is_truncate = true; // Ollama's default: inputs longer than the context are cut
    int64_t dims = 0;
    struct model *m = embed_model(ctx, req->json, &f);
    const int64_t loaded = clock_now_ns();
    const json_t *input = json_object_get(req->json, "input");
    bool ok = m && v_bool(req->json, "truncate", "truncate", &is_truncate, &f) &&
              v_int(req->json, "dimensions", "dimensions", 0, INT32_MAX, &dims, &f);
    if (ok && dims > model_desc(m)->n_embd)
        ok = api_failf(&f, 400, "invalid_value", "dimensions",
                       "dimensions must be at most the model's embedding length (%d)",
                       model_desc(m)->n_embd);
    json_t *embeddings = NULL;
    if (ok && is_empty_input(input)) {
        embeddings = json_array();
    } else if (ok && embed_parse_inputs(m, input, "input", is_truncate, &in, &f) &&
               embed_run(m, &in, &r, &f)) {
        const int d = model_desc(m)->n_embd;
        embeddings = json_array();
        for (int i = 0; embeddings && i < in.n; i++)
            json_array_append_new(embeddings,
                                  vector_json(r->embedding + (size_t)i * d, d, (int)dims));
    }
    if (embeddings) {
        json_t *j = json_pack(
            "{s:s, s:o, s:I, s:I, s:i}", "model", ollama_request_name(req->json, &f), "embeddings",
            embeddings, "total_duration", (json_int_t)(clock_now_ns() - start), "load_duration",
            (json_int_t)(loaded - start), "prompt_eval_count", r ? r->n_prompt : 0);
        api_respond_json(resp, 200, j);
    } else {
        if (!f.status) api_failf(&f, 500, NULL, NULL, "out of memory");
        ollama_fail_respond(&f, resp);
    }
    request_release(r);
    embed_inputs_deinit(&in);
    if (m) model_release(m);
}

void api_ollama_embeddings(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp)
{
    struct api_fail f = {0};
    struct embed_inputs in = {0};
    struct request *r = NULL;
    const char *prompt = "";
    struct model *m = embed_model(ctx, req->json, &f);
    bool ok = m && v_string(req->json, "prompt", "prompt", 1u << 26, &prompt, &f);
    json_t *vec = NULL;
    if (ok && !prompt[0]) {
        vec = json_array(); // as Ollama: no prompt, no vector
    } else if (ok) {
        json_t *input = json_string(prompt);
        // The old route cut nothing: an input over the context is an error.
        if (input && embed_parse_inputs(m, input, "prompt", false, &in, &f) &&
            embed_run(m, &in, &r, &f))
            vec = vector_json(r->embedding, model_desc(m)->n_embd, 0);
        json_decref(input);
    }
    if (vec) {
        api_respond_json(resp, 200, json_pack("{s:o}", "embedding", vec));
    } else {
        if (!f.status) api_failf(&f, 500, NULL, NULL, "out of memory");
        ollama_fail_respond(&f, resp);
    }
    request_release(r);
    embed_inputs_deinit(&in);
    if (m) model_release(m);
}
