/* The scheduler thread of a cpu model (generation or embedding): submit hands a request to an
 * idle instance through `pending`; each turn the thread starts what was handed over, runs one
 * step over every running instance (the model's batch), and ends the requests that finished —
 * returning each instance to the core (on_done) before waking its reader (see
 * struct request_outcome). The model supplies the per-instance work through cpu_sched_ops. */
#ifndef PLATFORM_CPU_SCHED_H
#define PLATFORM_CPU_SCHED_H

#include "platform/platform.h"
#include "util/thread.h"

#define CPU_SCHED_MAX_INSTANCES 64

struct cpu_sched_ops {
    /* Starts r on idle instance i; the instance owns the reference it is given. */
    void (*start)(void *model, int instance, struct request *r);
    /* Whether instance i runs a request. */
    bool (*is_running)(const void *model, int instance);
    /* One step over every running instance. */
    void (*step)(void *model);
    /* When instance i's request ended: ends it there, fills *out and returns it (the
     * instance's reference); else NULL. */
    struct request *(*take_finished)(void *model, int instance, struct request_outcome *out);
};

struct cpu_sched {
    struct mutex mu; // guards pending and is_stopping; models also take it to change which
                     // instances exist, so the thread never sees half an instance
    struct cond cv;
    struct request *pending[CPU_SCHED_MAX_INSTANCES];
    bool is_stopping;
    struct thread thread;
    const struct cpu_sched_ops *ops;
    void *model;
    platform_done_fn on_done;
    void *owner;
};

/* Starts the thread over model with ops (static storage). ERR_OK or ERR_NOMEM. */
int cpu_sched_start(struct cpu_sched *s, const struct cpu_sched_ops *ops, void *model,
                    platform_done_fn on_done, void *owner);

/* Hands r to idle instance i (retains it); it starts at the thread's next turn. */
void cpu_sched_submit(struct cpu_sched *s, int instance, struct request *r);

/* Stops and joins the thread; requests still running stay where they are. The lock stays
 * usable until cpu_sched_deinit. */
void cpu_sched_stop(struct cpu_sched *s);

/* Frees the lock after cpu_sched_stop. */
void cpu_sched_deinit(struct cpu_sched *s);

#endif
