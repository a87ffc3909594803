/* GET /v1/models and GET /v1/models/{id}: OpenAI's model objects, extended with the fields a
 * llamapi client uses (platform, instances, path, kind, status, queue). */
#include "api/handlers.h"

#include "api/errors.h"
#include "api/models/model_select.h"
#include "core/manager.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define MAX_LISTED 64

static const char *status_name(enum model_status s)
{
    switch (s) {
    case MODEL_STATUS_LOADING:
        return "loading";
    case MODEL_STATUS_READY:
        return "ready";
    case MODEL_STATUS_UNLOADING:
        return "unloading";
    case MODEL_STATUS_FAILED:
        return "failed";
    }
    return "unknown";
}

/* llama.cpp's per-model `meta`, which its clients read for context size and vocabulary. */
static json_t *meta_json(const struct platform_model_desc *d)
{
    return json_pack("{s:i, s:i, s:i, s:i, s:I, s:I}", "vocab_type", 0, "n_vocab", d->n_vocab,
                     "n_ctx_train", d->n_ctx_train, "n_embd", d->n_embd, "n_params",
                     (json_int_t)d->n_params, "size", (json_int_t)d->file_size);
}

static json_t *model_json(const struct api_ctx *ctx, const struct model_info *m)
{
    char owner[64];
    snprintf(owner, sizeof owner, "llamapi/%s", m->platform_id);
    bool is_loading = m->status == MODEL_STATUS_LOADING;
    json_t *j =
        json_pack("{s:s, s:s, s:I, s:s, s:s, s:i, s:s, s:s, s:s, s:i}", "id", m->id, "object",
                  "model", "created", (json_int_t)m->created_unix_s, "owned_by", owner, "platform",
                  m->platform_id, "instance_count", m->instance_count, "model_path", m->path,
                  "model_kind", m->desc.kind == MODEL_KIND_EMBEDDING ? "embedding" : "chat",
                  "status", status_name(m->status), "queue", m->queue_depth);
    if (j && m->failure[0]) json_object_set_new(j, "failure", json_string(m->failure));
    if (j && !is_loading) {
        if (m->desc.description[0])
            json_object_set_new(j, "description", json_string(m->desc.description));
        json_object_set_new(j, "n_ctx", json_integer(m->desc.n_ctx));
        json_object_set_new(j, "meta", meta_json(&m->desc));
        json_object_set_new(
            j, "modalities",
            json_pack("{s:b, s:b}", "vision", m->desc.has_vision, "audio", m->desc.has_audio));
        if (m->desc.projector[0])
            json_object_set_new(j, "projector", json_string(m->desc.projector));
    }
    if (j) api_model_set_names(ctx, j, m->id);
    return j;
}

void api_models_list(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    (void)req;
    struct model_info *infos = mem_calloc(MAX_LISTED, sizeof *infos);
    if (!infos) {
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    int n = registry_list(manager_registry(ctx->manager), infos, MAX_LISTED);
    json_t *data = json_array();
    for (int i = 0; data && i < n && i < MAX_LISTED; i++) {
        if (json_array_append_new(data, model_json(ctx, &infos[i])) != 0) {
            json_decref(data);
            data = NULL;
        }
    }
    mem_free(infos);
    api_respond_json(resp, 200,
                     data ? json_pack("{s:s, s:o}", "object", "list", "data", data) : NULL);
}

void api_models_get(const struct api_ctx *ctx, const struct api_request *req,
                    struct api_response *resp)
{
    char id[MODEL_ID_CAP];
    if (req->path_param.len >= sizeof id) {
        api_error(resp, 404, API_TYPE_INVALID_REQUEST, "model_not_found", "model",
                  "model id is too long (%zu bytes; at most %zu)", req->path_param.len,
                  sizeof id - 1);
        return;
    }
    memcpy(id, req->path_param.ptr, req->path_param.len);
    id[req->path_param.len] = '\0';
    struct model_info info;
    if (registry_get(manager_registry(ctx->manager), id, &info) != 0) {
        api_error(resp, 404, API_TYPE_INVALID_REQUEST, "model_not_found", "model",
                  "The model '%s' does not exist", id);
        return;
    }
    api_respond_json(resp, 200, model_json(ctx, &info));
}
