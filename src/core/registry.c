/* Registry as a small array under a mutex: a server holds a handful of models, and ordered
 * iteration (load order) is what /v1/models shows. */
#include "core/registry.h"

#include "core/model.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <string.h>

/* Guarded by mu. */
struct registry {
    struct mutex mu;
    struct model *models[REGISTRY_CAP]; // one reference each
    int n_models;
};

int registry_new(struct registry **out)
{
    struct registry *r = mem_calloc(1, sizeof *r);
    if (!r) return ERR_NOMEM;
    if (mutex_init(&r->mu) != ERR_OK) {
        mem_free(r);
        return ERR_NOMEM;
    }
    *out = r;
    return ERR_OK;
}

void registry_free(struct registry *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_models; i++)
        model_release(r->models[i]);
    mutex_deinit(&r->mu);
    mem_free(r);
}

static int find_locked(const struct registry *r, const char *id)
{
    for (int i = 0; i < r->n_models; i++)
        if (strcmp(model_id(r->models[i]), id) == 0) return i;
    return -1;
}

int registry_add(struct registry *r, struct model *m)
{
    int rc = ERR_OK;
    mutex_lock(&r->mu);
    if (find_locked(r, model_id(m)) >= 0) {
        rc = ERR_EXISTS;
    } else if (r->n_models >= REGISTRY_CAP) {
        rc = ERR_LIMIT;
    } else {
        model_retain(m);
        r->models[r->n_models++] = m;
    }
    mutex_unlock(&r->mu);
    return rc;
}

struct model *registry_take(struct registry *r, const char *id)
{
    struct model *m = NULL;
    mutex_lock(&r->mu);
    int i = find_locked(r, id);
    if (i >= 0) {
        m = r->models[i];
        memmove(&r->models[i], &r->models[i + 1],
                (size_t)(r->n_models - i - 1) * sizeof r->models[0]);
        r->n_models--;
    }
    mutex_unlock(&r->mu);
    return m;
}

struct model *registry_acquire(struct registry *r, const char *id)
{
    struct model *m = NULL;
    mutex_lock(&r->mu);
    int i = find_locked(r, id);
    if (i >= 0) {
        m = r->models[i];
        model_retain(m);
    }
    mutex_unlock(&r->mu);
    return m;
}

int registry_list(struct registry *r, struct model_info *out, int max)
{
    mutex_lock(&r->mu);
    int n = r->n_models;
    for (int i = 0; i < n && i < max; i++)
        model_get_info(r->models[i], &out[i]);
    mutex_unlock(&r->mu);
    return n;
}

int registry_get(struct registry *r, const char *id, struct model_info *out)
{
    struct model *m = registry_acquire(r, id);
    if (!m) return ERR_NOT_FOUND;
    model_get_info(m, out);
    model_release(m);
    return ERR_OK;
}
