/* llama.cpp's router endpoints: GET /models (loaded models and the GGUFs under --models-dir,
 * each with status loaded/loading/unloaded), POST /models/load {model} and POST
 * /models/unload {model}, mapped onto the model manager. */
#include "api/native/native_router.h"

#include "api/handlers.h"

#include "api/errors.h"
#include "api/models/model_select.h"
#include "api/validate.h"
#include "core/manager.h"
#include "util/log.h"
#include "util/mem.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#define MAX_LISTED 64
#define MAX_FILES  256

static const char *status_value(enum model_status s)
{
    switch (s) {
    case MODEL_STATUS_READY:
        return "loaded";
    case MODEL_STATUS_LOADING:
        return "loading";
    case MODEL_STATUS_FAILED:
        return "failed";
    case MODEL_STATUS_UNLOADING:
        break;
    }
    return "unloading";
}

static json_t *entry_json(const char *id, const char *path, const char *status)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:{s:s}, s:{s:[s], s:[s]}}", "id", id, "object", "model",
                     "owned_by", "llamapi", "path", path, "status", "value", status, "architecture",
                     "input_modalities", "text", "output_modalities", "text");
}

static bool ends_with_gguf(const char *name, size_t *stem_len)
{
    size_t n = strlen(name);
    *stem_len = n > 5 ? n - 5 : 0;
    return n > 5 && strcmp(name + n - 5, ".gguf") == 0;
}

static bool is_listed(const struct model_info *infos, int n, const char *id, const char *path)
{
    for (int i = 0; i < n; i++)
        if (strcmp(infos[i].id, id) == 0 || strcmp(infos[i].path, path) == 0) return true;
    return false;
}

/* GGUF files directly under dir that no loaded model uses, as unloaded entries. */
static void append_unloaded(const char *dir, const struct model_info *infos, int n, json_t *data)
{
    DIR *d = dir && *dir ? opendir(dir) : NULL;
    if (!d) return;
    struct dirent *e;
    int n_files = 0;
    while ((e = readdir(d)) != NULL && n_files < MAX_FILES) {
        size_t stem;
        if (e->d_name[0] == '.' || !ends_with_gguf(e->d_name, &stem) || stem >= MODEL_ID_CAP)
            continue;
        char id[MODEL_ID_CAP], path[MODEL_PATH_CAP];
        snprintf(id, sizeof id, "%.*s", (int)stem, e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (is_listed(infos, n, id, path)) continue;
        json_array_append_new(data, entry_json(id, path, "unloaded"));
        n_files++;
    }
    closedir(d);
}

void api_router_models(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp)
{
    (void)req;
    struct model_info *infos = mem_calloc(MAX_LISTED, sizeof *infos);
    json_t *data = json_array();
    if (!infos || !data) {
        mem_free(infos);
        json_decref(data);
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    int n = registry_list(manager_registry(ctx->manager), infos, MAX_LISTED);
    if (n > MAX_LISTED) n = MAX_LISTED;
    for (int i = 0; i < n; i++) {
        json_t *e = entry_json(infos[i].id, infos[i].path, status_value(infos[i].status));
        if (e) api_model_set_names(ctx, e, infos[i].id);
        json_array_append_new(data, e);
    }
    append_unloaded(ctx->models_dir, infos, n, data);
    mem_free(infos);
    api_respond_json(resp, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

/* The model's id: the name without a trailing ".gguf" and without directories. */
static void id_of(const char *name, char *id, size_t cap)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t stem;
    if (ends_with_gguf(base, &stem))
        snprintf(id, cap, "%.*s", (int)stem, base);
    else
        snprintf(id, cap, "%s", base);
}

static bool model_arg(const struct api_request *req, const char **name, struct api_fail *f)
{
    return v_require(req->json, "model", "model", f) &&
           v_string(req->json, "model", "model", MODEL_ID_CAP - 1, name, f) &&
           (**name || api_failf(f, 400, "invalid_value", "model", "'model' is empty"));
}

/* Resolves NAME, or NAME.gguf, under --models-dir. */
static int resolve(const struct api_ctx *ctx, const char *name, char *path, struct errmsg *err)
{
    int rc = manager_resolve_path(ctx->manager, name, path, MODEL_PATH_CAP, err);
    if (rc != ERR_NOT_FOUND) return rc;
    char with_ext[MODEL_ID_CAP + 8];
    snprintf(with_ext, sizeof with_ext, "%s.gguf", name);
    return manager_resolve_path(ctx->manager, with_ext, path, MODEL_PATH_CAP, err);
}

/* Loads the file at path as model id with the server's -np and -c. */
static int load_as(const struct api_ctx *ctx, const char *id, const char *path,
                   enum load_failure *why, struct errmsg *err)
{
    struct manager_load args = {
        .id = id,
        .path = path,
        .n_instances = ctx->load_instances > 0 ? ctx->load_instances : 1,
        .queue_size = -1,
        .n_ctx = ctx->load_n_ctx,
    };
    int actual = 0;
    *why = LOAD_FAIL_NONE;
    return manager_load(ctx->manager, &args, &actual, why, err);
}

void api_router_load(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    struct api_fail f = {0};
    const char *name = NULL;
    if (!model_arg(req, &name, &f)) {
        api_fail_respond(&f, resp);
        return;
    }
    char id[MODEL_ID_CAP];
    id_of(name, id, sizeof id);
    char *path = mem_alloc(MODEL_PATH_CAP);
    struct errmsg err;
    errmsg_clear(&err);
    int rc = path ? resolve(ctx, name, path, &err) : ERR_NOMEM;
    if (rc != ERR_OK) {
        api_error(resp, rc == ERR_NOMEM ? 500 : 404,
                  rc == ERR_NOMEM ? API_TYPE_SERVER : API_TYPE_INVALID_REQUEST,
                  rc == ERR_NOMEM ? NULL : "model_not_found", "model",
                  "No model '%s' under the models directory%s%s", name, err.msg[0] ? ": " : "",
                  err.msg);
        mem_free(path);
        return;
    }
    enum load_failure why;
    rc = load_as(ctx, id, path, &why, &err);
    mem_free(path);
    if (rc != ERR_OK && why == LOAD_FAIL_EXISTS)
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "model_already_loaded", "model",
                  "model '%s' is already loaded", id);
    else if (rc != ERR_OK)
        api_error(resp, why == LOAD_FAIL_ENGINE || why == LOAD_FAIL_NONE ? 500 : 400,
                  why == LOAD_FAIL_ENGINE || why == LOAD_FAIL_NONE ? API_TYPE_SERVER
                                                                   : API_TYPE_INVALID_REQUEST,
                  "model_load_failed", "model", "%s", err.msg);
    else
        api_respond_json(resp, 200, json_pack("{s:b}", "success", 1));
}

static struct model *not_found(const char *name, struct api_fail *f)
{
    api_failf(f, 404, "model_not_found", "model", "The model '%s' does not exist", name);
    return NULL;
}

struct model *native_router_autoload(const struct api_ctx *ctx, const char *name,
                                     struct api_fail *f)
{
    size_t stem;
    if (ctx->is_autoload_disabled || !ctx->models_dir || !name || !*name || strchr(name, '/') ||
        ends_with_gguf(name, &stem) || strlen(name) >= MODEL_ID_CAP)
        return not_found(name ? name : "", f);
    char *path = mem_alloc(MODEL_PATH_CAP);
    struct errmsg err;
    errmsg_clear(&err);
    if (!path || resolve(ctx, name, path, &err) != ERR_OK) {
        mem_free(path);
        return not_found(name, f);
    }
    enum load_failure why;
    int rc = load_as(ctx, name, path, &why, &err);
    mem_free(path);
    if (rc == ERR_OK) log_info("autoloaded model '%s'", name);
    if (rc == ERR_OK || why == LOAD_FAIL_EXISTS) {
        struct model *m = registry_acquire(manager_registry(ctx->manager), name);
        return m ? m : not_found(name, f); // unloaded again in between
    }
    log_warn("autoload of '%s' failed: %s", name, err.msg);
    if (why == LOAD_FAIL_LIMIT) {
        api_failf(f, 503, "models_busy", "model", "Cannot load '%s' now: %s", name, err.msg);
        f->type = API_TYPE_UNAVAILABLE;
        return NULL;
    }
    api_failf(f, 500, "model_load_failed", "model", "Cannot load '%s': %s", name, err.msg);
    f->type = API_TYPE_SERVER;
    return NULL;
}

void api_router_unload(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp)
{
    struct api_fail f = {0};
    const char *name = NULL;
    if (!model_arg(req, &name, &f)) {
        api_fail_respond(&f, resp);
        return;
    }
    if (manager_unload(ctx->manager, name) != ERR_OK) {
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "model_not_loaded", "model",
                  "model '%s' is not loaded", name);
        return;
    }
    api_respond_json(resp, 200, json_pack("{s:b}", "success", 1));
}
