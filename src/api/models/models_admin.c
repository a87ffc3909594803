/* POST /v1/models/load, /v1/models/resize, /v1/models/unload: the LlamaPi management API. */
#define _XOPEN_SOURCE 700 // realpath()
#include "api/handlers.h"

#include "api/errors.h"
#include "api/generation/params.h"
#include "api/validate.h"
#include "core/manager.h"
#include "hub/hub.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INSTANCES_MAX 64

/* Model ids appear in URLs and logs: printable, no spaces, bounded. */
static bool valid_model_id(const char *id, struct api_fail *f, const char *param)
{
    size_t n = strlen(id);
    if (n == 0 || n >= MODEL_ID_CAP)
        return api_failf(f, 400, "invalid_value", param, "'%s' must be 1 to %d bytes", param,
                         MODEL_ID_CAP - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c <= 0x20 || c == 0x7f)
            return api_failf(f, 400, "invalid_value", param,
                             "'%s' must not contain spaces or control characters", param);
    }
    return true;
}

static bool instance_count_arg(const json_t *body, int64_t *n, struct api_fail *f)
{
    const json_t *v = json_object_get(body, "instance_count");
    if (v && json_is_integer(v) && json_integer_value(v) == 0)
        return api_failf(f, 400, "invalid_instance_count", "instance_count",
                         "'instance_count' must be at least 1");
    return v_int(body, "instance_count", "instance_count", 1, INSTANCES_MAX, n, f);
}

/* The 200 of a load or resize; a partial one says why (reason: what stopped the next
 * instance, e.g. the memory budget). */
static json_t *count_reply(const char *verb, const char *id, int64_t requested, int actual,
                           const struct errmsg *why)
{
    char msg[MODEL_ID_CAP + 64];
    const bool is_partial = actual < requested;
    const char *reason = why->msg[0] ? why->msg : "no more instances could be made";
    snprintf(msg, sizeof msg, "model '%s' %s%s", id, is_partial ? "partially " : "", verb);
    json_t *j =
        json_pack("{s:b, s:s, s:I, s:i}", "success", 1, "message", msg, "requested_instance_count",
                  (json_int_t)requested, "actual_instance_count", actual);
    if (j && is_partial) json_object_set_new(j, "reason", json_string(reason));
    return j;
}

static void respond_load_failure(enum load_failure why, const struct errmsg *err,
                                 struct api_response *resp)
{
    switch (why) {
    case LOAD_FAIL_EXISTS:
        api_error(resp, 409, API_TYPE_INVALID_REQUEST, "model_already_exists", "model_id", "%s",
                  err->msg);
        return;
    case LOAD_FAIL_PATH:
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "invalid_model_path", "model_path", "%s",
                  err->msg);
        return;
    case LOAD_FAIL_MMPROJ_PATH:
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "invalid_model_path", "mmproj_path", "%s",
                  err->msg);
        return;
    case LOAD_FAIL_NO_PLATFORM:
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "platform_detection_failed", "model_path",
                  "%s", err->msg);
        return;
    case LOAD_FAIL_UNAVAILABLE:
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "unsupported_platform", "model_path", "%s",
                  err->msg);
        return;
    case LOAD_FAIL_LIMIT:
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "too_many_models", NULL, "%s", err->msg);
        return;
    case LOAD_FAIL_ENGINE:
    case LOAD_FAIL_NONE:
        break;
    }
    api_error(resp, 500, API_TYPE_SERVER, "model_load_failed", NULL, "%s", err->msg);
}

/* `pooling`: how an embedding model pools (none, mean, cls, last, or rank for a reranker); absent or
 * null: the file's. */
static bool pooling_arg(const json_t *body, enum platform_pooling *out, struct api_fail *f)
{
    const char *name = NULL;
    if (!v_string(body, "pooling", "pooling", 16, &name, f)) return false;
    if (!name) return true;
    if (platform_pooling_parse(name, out) != ERR_OK)
        return api_failf(f, 400, "invalid_value", "pooling",
                         "'pooling' must be \"none\", \"mean\", \"cls\", \"last\" or \"rank\"");
    return true;
}

/* A hub failure as the OpenAI error a load answers with. */
static void respond_hub_failure(enum hub_failure why, const struct errmsg *err,
                                struct api_response *resp)
{
    static const struct {
        int status;
        const char *type, *code;
    } table[] = {
        [HUB_FAIL_NONE] = {500, API_TYPE_SERVER, "model_load_failed"},
        [HUB_FAIL_REF] = {400, API_TYPE_INVALID_REQUEST, "invalid_model_path"},
        [HUB_FAIL_NOT_FOUND] = {404, API_TYPE_NOT_FOUND, "hub_model_not_found"},
        [HUB_FAIL_NO_MATCH] = {404, API_TYPE_NOT_FOUND, "hub_no_matching_file"},
        [HUB_FAIL_AUTH] = {502, API_TYPE_SERVER, "hub_unauthorized"},
        [HUB_FAIL_FORBIDDEN] = {502, API_TYPE_SERVER, "hub_forbidden"},
        [HUB_FAIL_OFFLINE] = {400, API_TYPE_INVALID_REQUEST, "hub_offline"},
        [HUB_FAIL_NETWORK] = {502, API_TYPE_SERVER, "hub_unreachable"},
        [HUB_FAIL_CHECKSUM] = {502, API_TYPE_SERVER, "hub_checksum_mismatch"},
        [HUB_FAIL_DISK_FULL] = {507, API_TYPE_SERVER, "insufficient_storage"},
        [HUB_FAIL_IO] = {500, API_TYPE_SERVER, "model_load_failed"},
    };
    size_t k = (size_t)why < sizeof table / sizeof table[0] ? (size_t)why : 0;
    api_error(resp, table[k].status, table[k].type, table[k].code, "model_path", "%s", err->msg);
}

/* An `hf://org/repo[:QUANT]` model path becomes the cached (or downloaded) file's absolute
 * path in out; false after answering the failure. Blocks this handler while it downloads. */
static bool resolve_hub_path(const struct api_ctx *ctx, const char *path, char *out, size_t out_cap,
                             struct api_response *resp)
{
    struct hub_log_progress progress = {0};
    struct hub_opts o = *ctx->hub;
    o.progress = hub_log_progress;
    o.progress_user = &progress;
    char file[PATH_MAX];
    enum hub_failure why;
    struct errmsg err;
    errmsg_clear(&err);
    if (hub_resolve(&o, path, file, sizeof file, &why, &err) != ERR_OK) {
        respond_hub_failure(why, &err, resp);
        return false;
    }
    int part, n_parts;
    hub_split_info(file, NULL, 0, &part, &n_parts);
    if (n_parts > 1) { // the GGUF reader maps one file; a split model's tensors span several
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "split_model_unsupported", "model_path",
                  "%s is split in %d files (downloaded); models load from one GGUF file: merge "
                  "the parts (llama-gguf-split --merge) and load the merged file",
                  file, n_parts);
        return false;
    }
    if (!realpath(file, out) || strlen(out) >= out_cap) {
        api_error(resp, 500, API_TYPE_SERVER, "model_load_failed", "model_path",
                  "cannot use the downloaded file %s", file);
        return false;
    }
    return true;
}

void api_models_load(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    struct api_fail f = {0};
    const json_t *body = req->json;
    const char *id = NULL, *path = NULL, *mmproj = NULL;
    int64_t n_instances = 1, queue = -1, n_ctx = 0;
    json_t *dp = json_object_get(body, "default_params");
    bool ok = v_require(body, "model_id", "model_id", &f) &&
              v_string(body, "model_id", "model_id", MODEL_ID_CAP, &id, &f) &&
              valid_model_id(id, &f, "model_id") &&
              v_require(body, "model_path", "model_path", &f) &&
              v_string(body, "model_path", "model_path", MODEL_PATH_CAP - 1, &path, &f) &&
              v_string(body, "mmproj_path", "mmproj_path", MODEL_PATH_CAP - 1, &mmproj, &f) &&
              instance_count_arg(body, &n_instances, &f) &&
              v_int(body, "request_queue_size", "request_queue_size", 0, 100000, &queue, &f) &&
              (!dp || json_is_null(dp) || params_validate_defaults(dp, &f));
    if (ok && dp && json_is_object(dp))
        ok =
            v_int(dp, "max_context_len", "default_params.max_context_len", 16, 1 << 20, &n_ctx, &f);
    bool embedding = false;
    enum platform_pooling pooling = PLATFORM_POOLING_DEFAULT;
    ok = ok && v_bool(body, "embedding", "embedding", &embedding, &f) &&
         pooling_arg(body, &pooling, &f);
    if (!ok) {
        api_fail_respond(&f, resp);
        return;
    }
    char hub_file[PATH_MAX];
    if (strncmp(path, HUB_URL_PREFIX, strlen(HUB_URL_PREFIX)) == 0) {
        if (!ctx->hub) {
            api_error(resp, 400, API_TYPE_INVALID_REQUEST, "invalid_model_path", "model_path",
                      "hub models are not available here");
            return;
        }
        if (!resolve_hub_path(ctx, path, hub_file, sizeof hub_file, resp)) return;
        path = hub_file;
    }
    struct manager_load args = {
        .id = id,
        .path = path,
        .n_instances = (int)n_instances,
        .queue_size = (int)queue,
        .n_ctx = (int)n_ctx,
        .force_embedding = embedding || pooling == PLATFORM_POOLING_RANK, // as --reranking
        .pooling = pooling,
        .default_params = json_is_object(dp) ? dp : NULL,
        .mmproj_path = mmproj && mmproj[0] ? mmproj : NULL,
    };
    int actual = 0;
    enum load_failure why;
    struct errmsg err;
    errmsg_clear(&err);
    if (manager_load(ctx->manager, &args, &actual, &why, &err) != ERR_OK) {
        respond_load_failure(why, &err, resp);
        return;
    }
    api_respond_json(resp, 200, count_reply("loaded", id, n_instances, actual, &err));
}

void api_models_resize(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp)
{
    struct api_fail f = {0};
    const char *id = NULL;
    int64_t n = 0;
    if (!v_require(req->json, "model_id", "model_id", &f) ||
        !v_string(req->json, "model_id", "model_id", MODEL_ID_CAP, &id, &f) ||
        !v_require(req->json, "instance_count", "instance_count", &f) ||
        !instance_count_arg(req->json, &n, &f)) {
        api_fail_respond(&f, resp);
        return;
    }
    int actual = 0;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = manager_resize(ctx->manager, id, (int)n, &actual, &err);
    if (rc == ERR_NOT_FOUND) {
        api_error(resp, 404, API_TYPE_INVALID_REQUEST, "model_not_found", "model_id",
                  "The model '%s' does not exist", id);
        return;
    }
    if (rc != ERR_OK) {
        api_error(resp, rc == ERR_BUSY ? 409 : 500,
                  rc == ERR_BUSY ? API_TYPE_INVALID_REQUEST : API_TYPE_SERVER,
                  rc == ERR_BUSY ? "model_not_ready" : "resize_failed", "model_id", "%s", err.msg);
        return;
    }
    api_respond_json(resp, 200, count_reply("resized", id, n, actual, &err));
}

void api_models_unload(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp)
{
    struct api_fail f = {0};
    const char *id = NULL;
    if (!v_require(req->json, "model_id", "model_id", &f) ||
        !v_string(req->json, "model_id", "model_id", MODEL_ID_CAP, &id, &f)) {
        api_fail_respond(&f, resp);
        return;
    }
    if (manager_unload(ctx->manager, id) != ERR_OK) {
        api_error(resp, 404, API_TYPE_INVALID_REQUEST, "model_not_found", "model_id",
                  "The model '%s' does not exist", id);
        return;
    }
    char msg[MODEL_ID_CAP + 32];
    snprintf(msg, sizeof msg, "model '%s' unloaded", id);
    api_respond_json(resp, 200, json_pack("{s:b, s:s}", "success", 1, "message", msg));
}
