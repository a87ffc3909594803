/* Model selection for every endpoint: names (ids and --alias names), the unnamed default, and
 * the bounded waits while models load. */
#include "api/models/model_select.h"

#include "api/errors.h"
#include "api/native/native_router.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_LISTED 64
#define TICK_MS    10

static void sleep_tick(void)
{
    struct timespec tick = {0, TICK_MS * 1000 * 1000};
    nanosleep(&tick, NULL);
}

static bool is_starting(const struct api_ctx *ctx)
{
    return ctx->is_starting && atomic_load(ctx->is_starting);
}

void api_alias_first(const char *aliases, char *out, size_t cap)
{
    const char *best = NULL;
    size_t best_len = 0;
    for (const char *p = aliases; *p;) {
        size_t n = strcspn(p, ",");
        int cmp = best ? strncmp(p, best, n < best_len ? n : best_len) : -1;
        if (n > 0 && (!best || cmp < 0 || (cmp == 0 && n < best_len))) {
            best = p;
            best_len = n;
        }
        p += n + (p[n] == ',');
    }
    snprintf(out, cap, "%.*s", best ? (int)best_len : 0, best ? best : "");
}

/* The id name stands for: itself, or the first -m model's id when name is one of its
 * comma-separated --alias names. Writes out (cap bytes). */
static void alias_target(const struct api_ctx *ctx, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    const char *aliases = ctx->model_aliases ? ctx->model_aliases : "";
    if (!strchr(aliases, ',')) return;
    size_t len = strlen(name);
    for (const char *p = aliases; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, name, len) == 0) {
            api_alias_first(aliases, out, cap);
            return;
        }
        p += n + (p[n] == ',');
    }
}

/* A JSON array of the comma-separated items of list (empty items skipped), or NULL. */
static json_t *split_list(const char *list)
{
    json_t *a = json_array();
    for (const char *p = list; a && *p;) {
        size_t n = strcspn(p, ",");
        if (n > 0) json_array_append_new(a, json_stringn(p, n));
        p += n + (p[n] == ',');
    }
    return a;
}

void api_model_set_names(const struct api_ctx *ctx, json_t *entry, const char *id)
{
    char first[MODEL_ID_CAP] = "";
    const char *aliases = ctx->model_aliases ? ctx->model_aliases : "";
    if (aliases[0]) api_alias_first(aliases, first, sizeof first);
    bool is_named = first[0] && strcmp(first, id) == 0;
    json_object_set_new(entry, "aliases", split_list(is_named ? aliases : ""));
    json_object_set_new(entry, "tags",
                        split_list(is_named && ctx->model_tags ? ctx->model_tags : ""));
}

/* In single-model mode, the one registered model (a new reference), or NULL when the
 * registry holds another count (models loaded or unloaded since start-up). */
static struct model *only_model(const struct api_ctx *ctx, struct registry *reg)
{
    if (!ctx->is_single_model) return NULL;
    struct model_info info[2];
    return registry_list(reg, info, 2) == 1 ? registry_acquire(reg, info[0].id) : NULL;
}

struct model *api_acquire_model(const struct api_ctx *ctx, const char *name)
{
    struct registry *reg = manager_registry(ctx->manager);
    char id[MODEL_ID_CAP];
    alias_target(ctx, name, id, sizeof id);
    struct model *m = registry_acquire(reg, id);
    // While the -m models load, one of them may not be registered yet: wait for start-up.
    for (int waited = 0; !m && is_starting(ctx) && waited < API_LOADING_WAIT_MS;
         waited += TICK_MS) {
        sleep_tick();
        m = registry_acquire(reg, id);
    }
    // llama-server started with one model answers whatever name a client sends with it.
    return m ? m : only_model(ctx, reg);
}

/* The registry's models, snapshotted into infos (MAX_LISTED); returns how many. */
static int list_models(struct registry *reg, struct model_info *infos)
{
    int n = registry_list(reg, infos, MAX_LISTED);
    return n > MAX_LISTED ? MAX_LISTED : n;
}

struct model *api_acquire_unnamed(const struct api_ctx *ctx,
                                  bool (*prefer)(const struct platform_model_desc *d),
                                  bool any_ready, struct api_fail *f)
{
    struct registry *reg = manager_registry(ctx->manager);
    struct model_info *infos = mem_calloc(MAX_LISTED, sizeof *infos);
    if (!infos) return api_failf(f, 500, NULL, NULL, "out of memory"), NULL;
    int n = list_models(reg, infos);
    // Start-up registers the -m models one by one: an unnamed request waits for the first.
    for (int waited = 0; n == 0 && is_starting(ctx) && waited < API_LOADING_WAIT_MS;
         waited += TICK_MS) {
        sleep_tick();
        n = list_models(reg, infos);
    }
    int pick = 0;
    while (pick < n && (infos[pick].status != MODEL_STATUS_READY || !prefer(&infos[pick].desc)))
        pick++;
    for (int i = 0; pick == n && any_ready && i < n; i++)
        if (infos[i].status == MODEL_STATUS_READY) pick = i;
    if (pick == n) pick = 0;
    struct model *m = n > 0 ? registry_acquire(reg, infos[pick].id) : NULL;
    mem_free(infos);
    if (!m)
        api_failf(f, 404, "model_not_found", "model",
                  "No model is loaded (start with -m FILE or POST /models/load)");
    return m;
}

bool api_model_wait_ready(struct model *m, struct api_fail *f)
{
    struct errmsg why;
    errmsg_clear(&why);
    if (model_wait_ready(m, API_LOADING_WAIT_MS)) {
        if (!model_is_failed(m, &why)) return true;
        api_failf(f, 500, API_CODE_MODEL_FILE_CHANGED, "model", "%s", why.msg);
        f->type = API_TYPE_SERVER;
        return false;
    }
    if (model_is_loading(m)) {
        api_failf(f, 503, "model_loading", "model", "The model '%s' is still loading", model_id(m));
        f->type = API_TYPE_UNAVAILABLE;
    } else {
        api_failf(f, 404, "model_not_found", "model",
                  "The model '%s' was unloaded or failed to load", model_id(m));
    }
    return false;
}

static bool is_chat(const struct platform_model_desc *d)
{
    return d->kind == MODEL_KIND_CHAT;
}

static bool is_embedding(const struct platform_model_desc *d)
{
    return d->kind == MODEL_KIND_EMBEDDING;
}

struct model *api_resolve_model(const struct api_ctx *ctx, const json_t *body, enum model_kind kind,
                                struct api_fail *f)
{
    const char *name = NULL;
    const char *key = json_object_get(body, "model") ? "model" : "model_id";
    if (!json_is_null(json_object_get(body, key)) && !v_string(body, key, "model", 1024, &name, f))
        return NULL;
    struct model *m = NULL;
    if (!name) {
        m = api_acquire_unnamed(ctx, kind == MODEL_KIND_CHAT ? is_chat : is_embedding, false, f);
        if (!m) return NULL;
        name = model_id(m);
    } else if (!(m = api_acquire_model(ctx, name)) && !(m = native_router_autoload(ctx, name, f))) {
        return NULL;
    }
    // A request for a model that is still loading waits for it (bounded), as llama-server's
    // clients expect while a start-up model loads.
    bool is_ready = api_model_wait_ready(m, f); // else f is filled
    if (is_ready && (model_desc(m)->kind != kind)) {
        api_failf(f, 400, "wrong_model_type", "model",
                  "The model '%s' is a%s model and cannot serve this endpoint", model_id(m),
                  model_desc(m)->kind == MODEL_KIND_EMBEDDING ? "n embedding" : " chat");
    } else if (is_ready) {
        return m;
    }
    model_release(m);
    return NULL;
}
