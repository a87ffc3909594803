/* GET /health: the HTTP server is up (plain text "ok", so load balancers and curl read it as
 * is). GET /health?model=ID: whether that model is loaded and ready — 200, or 503 with
 * Retry-After while it loads or when it is not loaded — a per-model readiness probe for a
 * proxy or an orchestrator. */
#include "api/handlers.h"

#include "api/errors.h"
#include "api/models/model_select.h"
#include "api/validate.h"

#include <string.h>

/* True when the comma-separated list holds name. */
static bool list_has(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0) return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* The model named name without waiting: its id or one of the first -m model's --alias names.
 * Unlike requests, a one-model server does not answer for any other name: behind a balancer
 * the probe says whether this server has that model. NULL when absent. */
static struct model *find_model(const struct api_ctx *ctx, const char *name)
{
    struct registry *reg = manager_registry(ctx->manager);
    struct model *m = registry_acquire(reg, name);
    if (m || !ctx->model_aliases || !list_has(ctx->model_aliases, name)) return m;
    char id[MODEL_ID_CAP];
    api_alias_first(ctx->model_aliases, id, sizeof id);
    return registry_acquire(reg, id);
}

static void model_health(const struct api_ctx *ctx, const char *name, struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = find_model(ctx, name);
    if (!m) {
        api_failf(&f, 503, "model_not_found", "model", "model '%s' is not loaded", name);
        f.type = API_TYPE_UNAVAILABLE;
        api_fail_respond(&f, resp);
        return;
    }
    if (!model_is_ready(m)) {
        api_failf(&f, 503, "model_loading", "model", "model '%s' is loading", name);
        f.type = API_TYPE_UNAVAILABLE;
        model_release(m);
        api_fail_respond(&f, resp);
        return;
    }
    json_t *j = json_pack("{s:s, s:s}", "status", "ok", "model", model_id(m));
    model_release(m);
    api_respond_result(resp, j, true, &f);
}

void api_health(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp)
{
    const char *name = req->query ? req->query(req->conn, "model") : NULL;
    if (name && *name) {
        model_health(ctx, name, resp);
        return;
    }
    api_respond_text(resp, 200, "text/plain; charset=utf-8", "ok");
}
