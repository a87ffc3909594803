/* The cpu models' scheduler loop. */
#include "platform/cpu_sched.h"

/* Starts what was submitted; returns whether any instance runs. Waits for a submission (or
 * the stop) when told to. */
static bool take_pending(struct cpu_sched *s, bool wait)
{
    struct request *start[CPU_SCHED_MAX_INSTANCES] = {0};
    mutex_lock(&s->mu);
    for (;;) {
        bool any = false;
        for (int i = 0; i < CPU_SCHED_MAX_INSTANCES; i++) {
            start[i] = s->pending[i];
            s->pending[i] = NULL;
            any |= start[i] != NULL;
        }
        if (any || !wait || s->is_stopping) break;
        cond_wait(&s->cv, &s->mu);
    }
    mutex_unlock(&s->mu);
    bool active = false;
    for (int i = 0; i < CPU_SCHED_MAX_INSTANCES; i++) {
        if (start[i]) s->ops->start(s->model, i, start[i]);
        active |= s->ops->is_running(s->model, i);
    }
    return active;
}

static bool is_stopping(struct cpu_sched *s)
{
    mutex_lock(&s->mu);
    bool stop = s->is_stopping;
    mutex_unlock(&s->mu);
    return stop;
}

static void *sched_main(void *arg)
{
    struct cpu_sched *s = arg;
    bool active = false;
    for (;;) {
        active = take_pending(s, !active);
        if (!active) {
            if (is_stopping(s)) break;
            continue;
        }
        s->ops->step(s->model);
        for (int i = 0; i < CPU_SCHED_MAX_INSTANCES; i++) {
            struct request_outcome o;
            struct request *r = s->ops->take_finished(s->model, i, &o);
            if (!r) continue;
            s->on_done(s->owner, i); // first: see struct request_outcome
            request_deliver(r, &o);
        }
    }
    return NULL;
}

int cpu_sched_start(struct cpu_sched *s, const struct cpu_sched_ops *ops, void *model,
                    platform_done_fn on_done, void *owner)
{
    *s = (struct cpu_sched){.ops = ops, .model = model, .on_done = on_done, .owner = owner};
    if (mutex_init(&s->mu) != ERR_OK) return ERR_NOMEM;
    if (cond_init(&s->cv) != ERR_OK) {
        mutex_deinit(&s->mu);
        return ERR_NOMEM;
    }
    int rc = thread_start(&s->thread, sched_main, s);
    if (rc != ERR_OK) {
        cond_deinit(&s->cv);
        mutex_deinit(&s->mu);
    }
    return rc;
}

void cpu_sched_submit(struct cpu_sched *s, int instance, struct request *r)
{
    request_retain(r);
    mutex_lock(&s->mu);
    s->pending[instance] = r;
    cond_signal(&s->cv);
    mutex_unlock(&s->mu);
}

void cpu_sched_stop(struct cpu_sched *s)
{
    mutex_lock(&s->mu);
    s->is_stopping = true;
    cond_signal(&s->cv);
    mutex_unlock(&s->mu);
    thread_join(&s->thread);
}

void cpu_sched_deinit(struct cpu_sched *s)
{
    cond_deinit(&s->cv);
    mutex_deinit(&s->mu);
}
