/* Instance slots, the scheduler loop and the per-instance workers. */
#include "platform/instances.h"

#include <string.h>

#define WATCH_TICK_MS 10 // how often a running request's cancel flag is looked at

void inst_slot_fail(struct inst_slot *s, int status, const char *msg)
{
    if (s->done != FINISH_NONE) return;
    request_outcome_fail(&s->failure, status, msg);
    s->done = FINISH_ERROR;
}

void inst_slot_finish(struct inst_slot *s, enum finish_reason reason)
{
    if (s->done == FINISH_NONE) s->done = reason;
}

/* Takes the slot's ended request with its outcome and clears the slot. */
static struct request *take_ended(struct inst_slot *sl, struct request_outcome *out)
{
    struct request *r = sl->req;
    *out = sl->failure;
    if (sl->done != FINISH_ERROR) out->reason = sl->done;
    sl->req = NULL;
    sl->done = FINISH_NONE;
    sl->failure = (struct request_outcome){0};
    return r;
}

static int init_common(struct instances *s, void *model, platform_done_fn on_done, void *owner)
{
    memset(s, 0, sizeof *s);
    s->model = model;
    s->on_done = on_done;
    s->owner = owner;
    for (int i = 0; i < INSTANCES_MAX; i++) {
        s->slot[i].set = s;
        s->slot[i].index = i;
    }
    if (mutex_init(&s->mu) != ERR_OK) return ERR_NOMEM;
    if (cond_init(&s->cv) != ERR_OK) {
        mutex_deinit(&s->mu);
        return ERR_NOMEM;
    }
    return ERR_OK;
}

/* ---- scheduled mode ---- */

/* Starts what was submitted; returns whether any instance runs. Waits for a submission (or
 * the stop) when told to. */
static bool take_pending(struct instances *s, bool wait)
{
    struct request *start[INSTANCES_MAX] = {0};
    mutex_lock(&s->mu);
    for (;;) {
        bool any = false;
        for (int i = 0; i < INSTANCES_MAX; i++) {
            start[i] = s->slot[i].pending;
            s->slot[i].pending = NULL;
            any |= start[i] != NULL;
        }
        if (any || !wait || s->is_stopping) break;
        cond_wait(&s->cv, &s->mu);
    }
    mutex_unlock(&s->mu);
    bool active = false;
    for (int i = 0; i < INSTANCES_MAX; i++) {
        struct inst_slot *sl = &s->slot[i];
        if (start[i]) {
            sl->req = start[i];
            sl->done = FINISH_NONE;
            sl->failure = (struct request_outcome){0};
            request_mark_started(sl->req);
            s->sched->start(s->model, i);
        }
        active |= sl->req != NULL;
    }
    return active;
}

static bool is_stopping(struct instances *s)
{
    mutex_lock(&s->mu);
    bool stop = s->is_stopping;
    mutex_unlock(&s->mu);
    return stop;
}

static void *sched_main(void *arg)
{
    struct instances *s = arg;
    bool active = false;
    for (;;) {
        active = take_pending(s, !active);
        if (!active) {
            if (is_stopping(s)) break;
            continue;
        }
        s->sched->step(s->model);
        for (int i = 0; i < INSTANCES_MAX; i++) {
            struct inst_slot *sl = &s->slot[i];
            if (!sl->req || sl->done == FINISH_NONE) continue;
            s->sched->end(s->model, i);
            struct request_outcome o;
            struct request *r = take_ended(sl, &o);
            s->on_done(s->owner, i); // first: see struct request_outcome
            request_deliver(r, &o);
        }
    }
    return NULL;
}

int instances_start_sched(struct instances *s, const struct inst_sched_ops *ops, void *model,
                          platform_done_fn on_done, void *owner)
{
    int rc = init_common(s, model, on_done, owner);
    if (rc != ERR_OK) return rc;
    s->sched = ops;
    rc = thread_start(&s->thread, sched_main, s);
    if (rc != ERR_OK) instances_deinit(s);
    return rc;
}

/* ---- worker mode ---- */

/* Runs one request on slot i; called and returns without mu. */
static void run_one(struct instances *s, int i, struct request *r)
{
    struct inst_slot *sl = &s->slot[i];
    request_mark_started(r);
    if (atomic_load(&r->is_cancelled))
        inst_slot_finish(sl, FINISH_CANCELLED);
    else
        s->worker->run(s->model, i, sl->handle, sl);
    mutex_lock(&s->mu);
    sl->is_running = false;
    while (sl->is_aborting) // the handle is not ours again until its abort returned
        cond_wait(&s->cv, &s->mu);
    mutex_unlock(&s->mu);
    if (sl->done == FINISH_NONE)
        sl->done = atomic_load(&r->is_cancelled) ? FINISH_CANCELLED : FINISH_STOP;
    struct request_outcome o;
    take_ended(sl, &o);
    s->on_done(s->owner, i); // first: see struct request_outcome
    request_deliver(r, &o);
}

static void *worker_main(void *arg)
{
    struct inst_slot *sl = arg;
    struct instances *s = sl->set;
    mutex_lock(&s->mu);
    for (;;) {
        while (!sl->pending && !sl->is_stopping)
            cond_wait(&s->cv, &s->mu);
        if (!sl->pending) break;
        struct request *r = sl->pending;
        sl->pending = NULL;
        if (sl->is_stopping) request_cancel(r);
        sl->req = r;
        sl->done = FINISH_NONE;
        sl->failure = (struct request_outcome){0};
        sl->want_abort = sl->is_stopping;
        sl->is_abort_sent = false;
        sl->is_running = true;
        cond_broadcast(&s->cv); // the watch thread looks after running slots
        mutex_unlock(&s->mu);
        run_one(s, sl->index, r);
        mutex_lock(&s->mu);
    }
    // Removed from inside its own on_done (the core retiring a busy instance): the handle is
    // ours to destroy; the thread is joined by whoever next stops or reuses the slot.
    void *h = NULL;
    if (sl->is_retiring) {
        h = sl->handle;
        sl->handle = NULL;
    }
    mutex_unlock(&s->mu);
    if (h) s->worker->destroy(s->model, h);
    return NULL;
}

/* Aborts every running call whose request was cancelled or that asked for it. Called and
 * returns with mu held; returns whether any call runs. */
static bool watch_pass(struct instances *s)
{
    bool any = false;
    for (int i = 0; i < INSTANCES_MAX; i++) {
        struct inst_slot *sl = &s->slot[i];
        if (!sl->is_running) continue;
        any = true;
        if (sl->is_abort_sent) continue;
        if (!sl->want_abort && !atomic_load(&sl->req->is_cancelled)) continue;
        sl->is_abort_sent = true;
        sl->is_aborting = true;
        void *h = sl->handle;
        mutex_unlock(&s->mu);
        s->worker->abort(s->model, h);
        mutex_lock(&s->mu);
        sl->is_aborting = false;
        cond_broadcast(&s->cv);
    }
    return any;
}

static void *watch_main(void *arg)
{
    struct instances *s = arg;
    mutex_lock(&s->mu);
    for (;;) {
        bool any = watch_pass(s);
        if (!any && s->is_stopping) break;
        if (any)
            cond_wait_ms(&s->cv, &s->mu, WATCH_TICK_MS);
        else
            cond_wait(&s->cv, &s->mu);
    }
    mutex_unlock(&s->mu);
    return NULL;
}

int instances_start_workers(struct instances *s, const struct inst_worker_ops *ops, void *model,
                            platform_done_fn on_done, void *owner)
{
    int rc = init_common(s, model, on_done, owner);
    if (rc != ERR_OK) return rc;
    s->worker = ops;
    rc = thread_start(&s->thread, watch_main, s);
    if (rc != ERR_OK) instances_deinit(s);
    return rc;
}

int instances_add(struct instances *s, int i, struct errmsg *err)
{
    if (i < 0 || i >= INSTANCES_MAX || !s->worker)
        return errmsg_set(err, ERR_INVALID, "instance index %d out of range", i);
    struct inst_slot *sl = &s->slot[i];
    mutex_lock(&s->mu);
    bool is_used = sl->exists || (sl->has_thread && !sl->is_retiring);
    bool has_retired = sl->has_thread && sl->is_retiring;
    mutex_unlock(&s->mu);
    if (is_used) return errmsg_set(err, ERR_INVALID, "instance %d already exists", i);
    if (has_retired) { // the slot's last worker removed itself: it ends on its own
        thread_join(&sl->thread);
        mutex_lock(&s->mu);
        sl->has_thread = sl->is_retiring = sl->is_stopping = false;
        mutex_unlock(&s->mu);
    }
    void *h = NULL;
    int rc = s->worker->init(s->model, i, &h, err);
    if (rc != ERR_OK) return rc;
    mutex_lock(&s->mu);
    sl->handle = h;
    sl->is_stopping = false;
    rc = thread_start(&sl->thread, worker_main, sl);
    if (rc == ERR_OK) {
        sl->has_thread = true;
        sl->exists = true;
    } else {
        sl->handle = NULL;
    }
    mutex_unlock(&s->mu);
    if (rc != ERR_OK) {
        s->worker->destroy(s->model, h);
        return errmsg_set(err, ERR_NOMEM, "cannot start the thread of instance %d", i);
    }
    return ERR_OK;
}

/* Stops slot i's worker (its run is aborted) and returns its handle; the caller destroys it
 * (NULL: there is none, or the worker destroys it itself). Called by the worker itself (the
 * core retiring its instance from on_done), it only marks the slot: the worker ends after this
 * request and destroys its handle (a thread cannot join itself). */
static void *stop_worker(struct instances *s, int i)
{
    struct inst_slot *sl = &s->slot[i];
    mutex_lock(&s->mu);
    bool has_thread = sl->has_thread;
    if (has_thread && pthread_equal(pthread_self(), sl->thread.handle)) {
        sl->is_stopping = true;
        sl->is_retiring = true;
        sl->exists = false;
        mutex_unlock(&s->mu);
        return NULL;
    }
    sl->is_stopping = true;
    if (sl->is_running) sl->want_abort = true;
    cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
    if (has_thread) thread_join(&sl->thread);
    mutex_lock(&s->mu);
    void *h = sl->handle;
    sl->handle = NULL;
    sl->has_thread = false;
    sl->exists = false;
    sl->is_stopping = false;
    sl->is_retiring = false;
    mutex_unlock(&s->mu);
    return h;
}

void instances_remove(struct instances *s, int i)
{
    if (!s->worker || i < 0 || i >= INSTANCES_MAX) return;
    void *h = stop_worker(s, i);
    if (h) s->worker->destroy(s->model, h);
}

void instances_lock(struct instances *s)
{
    mutex_lock(&s->mu);
}

void instances_unlock(struct instances *s)
{
    mutex_unlock(&s->mu);
}

void instances_submit(struct instances *s, int i, struct request *r)
{
    request_retain(r);
    mutex_lock(&s->mu);
    s->slot[i].pending = r;
    cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
}

void instances_abort(struct instances *s, struct inst_slot *slot)
{
    mutex_lock(&s->mu);
    slot->want_abort = true;
    slot->is_abort_sent = false; // again: an abort that came before the run took hold is lost
    cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
}

static void stop_sched(struct instances *s)
{
    mutex_lock(&s->mu);
    s->is_stopping = true;
    cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
    thread_join(&s->thread);
    for (int i = 0; i < INSTANCES_MAX; i++) {
        struct inst_slot *sl = &s->slot[i];
        struct request_outcome o;
        if (sl->req) { // cannot happen: the core unloads idle models only
            inst_slot_finish(sl, FINISH_CANCELLED);
            s->sched->end(s->model, i);
            struct request *r = take_ended(sl, &o);
            request_deliver(r, &o);
        }
        if (sl->pending) {
            o = (struct request_outcome){.reason = FINISH_CANCELLED};
            request_deliver(sl->pending, &o);
            sl->pending = NULL;
        }
    }
}

static void stop_workers(struct instances *s)
{
    // Every worker is told first, so their runs are aborted together, then each is joined.
    mutex_lock(&s->mu);
    for (int i = 0; i < INSTANCES_MAX; i++) {
        struct inst_slot *sl = &s->slot[i];
        if (!sl->has_thread) continue;
        sl->is_stopping = true;
        if (sl->is_running) sl->want_abort = true;
    }
    cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
    for (int i = 0; i < INSTANCES_MAX; i++) {
        void *h = stop_worker(s, i);
        if (h) s->worker->destroy(s->model, h);
    }
    mutex_lock(&s->mu);
    s->is_stopping = true;
    cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
    thread_join(&s->thread);
}

void instances_stop(struct instances *s)
{
    if (s->sched)
        stop_sched(s);
    else if (s->worker)
        stop_workers(s);
}

void instances_deinit(struct instances *s)
{
    cond_deinit(&s->cv);
    mutex_deinit(&s->mu);
}
