/* POST /v1/embeddings in OpenAI's shape, on the shared embedding core (api/embed.c). */
#include "api/embed.h"
#include "api/errors.h"
#include "api/handlers.h"
#include "api/models/model_select.h"
#include "api/validate.h"

static json_t *response_json(struct model *m, struct request *r, int n_inputs, bool is_base64)
{
    const int d = model_desc(m)->n_embd;
    json_t *data = json_array();
    for (int i = 0; data && i < n_inputs; i++) {
        json_t *vec = embed_vector_json(r->embedding + (size_t)i * d, d, is_base64);
        if (!vec || json_array_append_new(data, json_pack("{s:s, s:o, s:i}", "object", "embedding",
                                                          "embedding", vec, "index", i)) != 0) {
            json_decref(data);
            return NULL;
        }
    }
    return json_pack("{s:s, s:o, s:s, s:{s:i, s:i}}", "object", "list", "data", data, "model",
                     model_id(m), "usage", "prompt_tokens", r->n_prompt, "total_tokens",
                     r->n_prompt);
}

/* A reranker's outputs are scores, not vectors: llama-server would hand out n_embd floats
 * of which only the first is meaningful; we send the client to the rerank endpoint. */
static bool refuse_reranker(const struct model *m, struct api_fail *f)
{
    return api_failf(f, 400, "wrong_model_type", "model",
                     "The model '%s' is a reranker and cannot produce embeddings; use POST "
                     "/v1/rerank",
                     model_id(m));
}

void api_embeddings(const struct api_ctx *ctx, const struct api_request *req,
                    struct api_response *resp)
{
    struct api_fail f = {0};
    struct embed_inputs in = {0};
    bool is_base64 = false, is_truncate = false;
    struct request *r = NULL;
    // As llama-server: `content` instead of `input` asks for its native answer shape.
    if (!json_object_get(req->json, "input") && json_object_get(req->json, "content")) {
        api_native_embeddings(ctx, req, resp);
        return;
    }
    struct model *m = api_resolve_model(ctx, req->json, MODEL_KIND_EMBEDDING, &f);
    if (!m) {
        api_fail_respond(&f, resp);
        return;
    }
    const json_t *input = json_object_get(req->json, "input");
    bool ok = !embed_is_reranker(m) || refuse_reranker(m, &f);
    if (ok && model_desc(m)->is_per_token)
        ok = api_failf(&f, 400, "wrong_model_type", "model",
                       "The model '%s' has pooling 'none' (a vector per token), which is not "
                       "OpenAI-compatible; use POST /embedding or another pooling",
                       model_id(m));
    ok = ok && embed_parse_options(req->json, &is_base64, &is_truncate, &f) &&
         v_require(req->json, "input", "input", &f) &&
         embed_parse_inputs(m, input, "input", is_truncate, &in, &f) && embed_run(m, &in, &r, &f);
    if (ok) {
        json_t *j = response_json(m, r, in.n, is_base64);
        if (j)
            api_respond_json(resp, 200, j);
        else
            api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
    } else {
        api_fail_respond(&f, resp);
    }
    request_release(r);
    embed_inputs_deinit(&in);
    model_release(m);
}
