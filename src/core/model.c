/* Model lifecycle: load, resize, submit, shutdown. Lock order: admin_mu (serializes admin
 * operations of one model) → pool.mu. The platform calls on_done holding none of its locks,
 * and on_done takes only pool.mu before calling back into the platform. */
#include "core/model.h"

#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"

#include <limits.h>
#include <stdio.h>
#include <time.h>
#include <string.h>

/* Immutable after model_load except where noted. */
struct model {
    atomic_int refs;
    char id[MODEL_ID_CAP];
    char path[MODEL_PATH_CAP];
    const struct platform *platform;
    struct platform_model *impl; // set by model_load
    struct platform_model_desc desc;
    struct pool pool;       // own lock
    struct budget *budget;  // borrowed
    json_t *default_params; // owned copy or NULL
    int n_ctx, n_threads;
    bool force_embedding;
    enum platform_pooling pooling;
    const char *chat_template;   // borrowed (outlives the model) or NULL
    char mmproj[MODEL_PATH_CAP]; // the projector given at load, or ""
    int64_t created_unix_s;
    atomic_llong last_used_ns; // monotonic time of the last submit (or of creation)
    atomic_int status;         // enum model_status
    struct mutex admin_mu;     // serializes load/resize/shutdown
};

/* Routing: the instance the request names (id_slot), else the one whose cache holds the
 * longest prefix of its prompt (a multi-turn chat lands where its history is cached). */
static int instance_affinity(void *ctx, int slot, const struct request *r)
{
    struct model *m = ctx;
    if (r->preferred_instance == slot) return INT_MAX;
    if (r->kind != REQUEST_GENERATE || !m->platform->cached_prefix) return 0;
    return m->platform->cached_prefix(m->impl, slot, r->prompt, r->n_prompt);
}

int model_new(const struct model_params *p, struct model **out)
{
    struct model *m = mem_calloc(1, sizeof *m);
    if (!m) return ERR_NOMEM;
    snprintf(m->id, sizeof m->id, "%s", p->id);
    snprintf(m->path, sizeof m->path, "%s", p->path);
    m->platform = p->platform;
    m->budget = p->budget;
    m->n_ctx = p->n_ctx;
    m->n_threads = p->n_threads;
    m->force_embedding = p->force_embedding;
    m->pooling = p->pooling;
    m->chat_template = p->chat_template;
    snprintf(m->mmproj, sizeof m->mmproj, "%s", p->mmproj_path ? p->mmproj_path : "");
    m->created_unix_s = clock_unix_s();
    atomic_init(&m->last_used_ns, clock_now_ns());
    atomic_init(&m->refs, 1);
    atomic_init(&m->status, MODEL_STATUS_LOADING);
    if (p->default_params) {
        m->default_params = json_deep_copy(p->default_params);
        if (!m->default_params) goto out_free;
    }
    if (pool_init(&m->pool, p->queue_cap) != ERR_OK) goto out_free;
    pool_set_affinity(&m->pool, instance_affinity, m);
    if (mutex_init(&m->admin_mu) != ERR_OK) goto out_pool;
    *out = m;
    return ERR_OK;
out_pool:
    pool_deinit(&m->pool);
out_free:
    json_decref(m->default_params);
    mem_free(m);
    return ERR_NOMEM;
}

static void on_instance_done(void *owner, int instance)
{
    struct model *m = owner;
    struct request *next = NULL;
    switch (pool_release(&m->pool, instance, &next)) {
    case POOL_RELEASE_NEXT:
        m->platform->submit(m->impl, instance, next);
        request_release(next); // the queue's reference; the platform holds its own
        break;
    case POOL_RELEASE_RETIRE:
        m->platform->remove_instance(m->impl, instance);
        budget_release(m->budget, m->desc.instance_bytes);
        break;
    case POOL_RELEASE_IDLE:
        break;
    }
}

/* Adds instances until there are `target` or memory runs out. Caller holds admin_mu. */
static void grow_locked(struct model *m, int target, struct errmsg *err)
{
    while (pool_instance_count(&m->pool) < target) {
        if (!budget_reserve(m->budget, m->desc.instance_bytes)) {
            // Rounded up, in KiB below a MiB: an embedding model's instance can be that small.
            uint64_t b = m->desc.instance_bytes, mib = (b >> 20) + ((b & 0xFFFFF) != 0);
            if (b >= (1u << 20))
                errmsg_set(err, ERR_NOMEM, "memory budget exhausted: an instance needs %llu MiB",
                           (unsigned long long)mib);
            else
                errmsg_set(err, ERR_NOMEM, "memory budget exhausted: an instance needs %llu KiB",
                           (unsigned long long)((b >> 10) + ((b & 0x3FF) != 0)));
            return;
        }
        int slot = pool_reserve_slot(&m->pool);
        if (slot < 0 || m->platform->add_instance(m->impl, slot, err) != ERR_OK) {
            if (slot < 0)
                errmsg_set(err, ERR_LIMIT, "at most %d instances per model", POOL_MAX_INSTANCES);
            budget_release(m->budget, m->desc.instance_bytes);
            return;
        }
        struct request *next = pool_commit_slot(&m->pool, slot);
        if (next) {
            m->platform->submit(m->impl, slot, next);
            request_release(next);
        }
    }
}

int model_load(struct model *m, int n_instances, int *n_actual, struct errmsg *err)
{
    mutex_lock(&m->admin_mu);
    struct platform_load_args args = {
        .path = m->path,
        .n_ctx = m->n_ctx,
        .n_threads = m->n_threads,
        .force_embedding = m->force_embedding,
        .pooling = m->pooling,
        .chat_template = m->chat_template,
        .mmproj_path = m->mmproj[0] ? m->mmproj : NULL,
        .on_done = on_instance_done,
        .owner = m,
    };
    int rc = m->platform->load(&args, &m->impl, err);
    if (rc == ERR_OK) {
        m->platform->describe(m->impl, &m->desc);
        platform_desc_detect_formats(&m->desc);
        struct errmsg grow_err;
        errmsg_clear(&grow_err);
        grow_locked(m, n_instances, &grow_err);
        *n_actual = pool_instance_count(&m->pool);
        if (*n_actual == 0) {
            rc = errmsg_set(err, ERR_NOMEM, "cannot create an instance: %s", grow_err.msg);
        } else {
            if (*n_actual < n_instances) {
                log_warn("model '%s': %d of %d instances (%s)", m->id, *n_actual, n_instances,
                         grow_err.msg);
                errmsg_set(err, ERR_NOMEM, "%s", grow_err.msg); // the partial load's reason
            }
            atomic_store(&m->status, MODEL_STATUS_READY);
        }
    }
    // A failed model never becomes ready: requests that found it while it loaded stop
    // waiting now instead of at their timeout.
    if (rc != ERR_OK) atomic_store(&m->status, MODEL_STATUS_UNLOADING);
    mutex_unlock(&m->admin_mu);
    return rc;
}

int model_resize(struct model *m, int n, int *n_actual, struct errmsg *err)
{
    int rc = ERR_OK;
    mutex_lock(&m->admin_mu);
    if (atomic_load(&m->status) != MODEL_STATUS_READY) {
        rc = errmsg_set(err, ERR_BUSY, "model '%s' is not ready", m->id);
    } else if (n >= pool_instance_count(&m->pool)) {
        grow_locked(m, n, err);
    } else {
        int removed[POOL_MAX_INSTANCES];
        int n_removed = pool_shrink(&m->pool, n, removed);
        for (int i = 0; i < n_removed; i++) {
            m->platform->remove_instance(m->impl, removed[i]);
            budget_release(m->budget, m->desc.instance_bytes);
        }
    }
    *n_actual = pool_instance_count(&m->pool);
    mutex_unlock(&m->admin_mu);
    return rc;
}

enum pool_admit model_submit(struct model *m, struct request *r)
{
    if (atomic_load(&m->status) != MODEL_STATUS_READY) return POOL_ADMIT_CLOSED;
    int instance = -1;
    atomic_store(&m->last_used_ns, clock_now_ns());
    enum pool_admit a = pool_admit(&m->pool, r, &instance);
    if (a == POOL_ADMIT_RUN) m->platform->submit(m->impl, instance, r);
    return a;
}

void model_abandon(struct model *m, struct request *r)
{
    if (pool_remove_queued(&m->pool, r))
        request_finish(r, FINISH_CANCELLED, 0, "client disconnected");
    else
        request_cancel(r);
}

void model_shutdown(struct model *m)
{
    mutex_lock(&m->admin_mu);
    atomic_store(&m->status, MODEL_STATUS_UNLOADING);
    struct request *queued[1024];
    int n;
    char msg[MODEL_ID_CAP + 64];
    snprintf(msg, sizeof msg, "model '%s' was unloaded", m->id);
    while ((n = pool_close(&m->pool, queued, 1024)) > 0) {
        for (int i = 0; i < n; i++) {
            request_finish(queued[i], FINISH_ERROR, 404, msg);
            request_release(queued[i]);
        }
    }
    // Running requests get the same answer as queued ones, not a bare cancellation.
    pool_fail_running(&m->pool, 404, msg);
    pool_wait_idle(&m->pool);
    mutex_unlock(&m->admin_mu);
}

void model_retain(struct model *m)
{
    atomic_fetch_add(&m->refs, 1);
}

void model_release(struct model *m)
{
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    if (m->impl) {
        int n = pool_instance_count(&m->pool);
        m->platform->unload(m->impl);
        budget_release(m->budget, (uint64_t)n * m->desc.instance_bytes);
    }
    pool_deinit(&m->pool);
    mutex_deinit(&m->admin_mu);
    json_decref(m->default_params);
    mem_free(m);
}

void model_get_info(struct model *m, struct model_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", m->id);
    snprintf(out->path, sizeof out->path, "%s", m->path);
    out->platform_id = m->platform->id;
    out->status = (enum model_status)atomic_load(&m->status);
    out->created_unix_s = m->created_unix_s;
    out->last_used_ns = atomic_load(&m->last_used_ns);
    out->instance_count = pool_instance_count(&m->pool);
    out->queue_depth = pool_queue_depth(&m->pool);
    out->busy_count = pool_busy_count(&m->pool);
    if (out->status != MODEL_STATUS_LOADING) out->desc = m->desc;
    struct errmsg why;
    errmsg_clear(&why);
    if (model_is_failed(m, &why)) {
        out->status = MODEL_STATUS_FAILED;
        snprintf(out->failure, sizeof out->failure, "%s", why.msg);
    }
}

bool model_is_failed(struct model *m, struct errmsg *why)
{
    if (!m->platform->is_failed || atomic_load(&m->status) != MODEL_STATUS_READY) return false;
    return m->platform->is_failed(m->impl, why);
}

void model_slot_states(struct model *m, enum pool_slot *out)
{
    pool_slot_states(&m->pool, out);
}

const char *model_id(const struct model *m)
{
    return m->id;
}

const struct platform_model_desc *model_desc(const struct model *m)
{
    return &m->desc;
}

struct platform_model *model_impl(const struct model *m)
{
    return m->impl;
}

const struct platform *model_platform(const struct model *m)
{
    return m->platform;
}

const json_t *model_default_params(const struct model *m)
{
    return m->default_params;
}

bool model_is_ready(struct model *m)
{
    return atomic_load(&m->status) == MODEL_STATUS_READY;
}

bool model_is_loading(struct model *m)
{
    return atomic_load(&m->status) == MODEL_STATUS_LOADING;
}

bool model_wait_ready(struct model *m, int timeout_ms)
{
    // Loads are rare and take seconds: a short poll is simpler than a condition variable
    // every status change would have to signal.
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int waited = 0; atomic_load(&m->status) == MODEL_STATUS_LOADING && waited < timeout_ms;
         waited += 10)
        nanosleep(&tick, NULL);
    return atomic_load(&m->status) == MODEL_STATUS_READY;
}
