/* The instances of a platform model and the threads that run requests on them: what every
 * platform shares, so none repeats it. Each instance is a slot holding the running request
 * and how it ended; the layer hands a submitted request to its slot, runs it, returns the
 * instance to the core (on_done) before waking the request's reader (see struct
 * request_outcome), and stops everything at unload.
 *
 * Two ways to run, chosen at start:
 *  - scheduled (the cpu engine): one thread drives every running instance of the model in
 *    steps, so their tokens share one batch. The model supplies start/step/end.
 *  - workers (vendor runtimes): each instance is a runtime handle with its own thread that
 *    runs one request at a time through a blocking call. The model supplies init/run/abort/
 *    destroy. A watch thread aborts a run whose request was cancelled (client gone, stop
 *    string, unload, shutdown) or that asked for it (inst_slot_abort), calling the runtime's
 *    abort from outside its callbacks; a handle is reused or destroyed only after its run
 *    returned and no abort on it is in flight.
 * Locks: the layer's mu guards pending requests, instance existence and the abort state; the
 * layer never holds it while calling the model, except that models take it (instances_lock)
 * to change their own per-instance state together with existence. */
#ifndef PLATFORM_INSTANCES_H
#define PLATFORM_INSTANCES_H

#include "platform/platform.h"
#include "util/thread.h"

#include <stdbool.h>

#define INSTANCES_MAX 64

struct instances;

/* One instance. exists changes only while idle, under mu. req/done/failure belong to the
 * thread running the request while req is set. */
struct inst_slot {
    bool exists;
    struct request *req;            // the running request (one reference) or NULL
    enum finish_reason done;        // how it ended; FINISH_NONE while it runs
    struct request_outcome failure; // when done == FINISH_ERROR: what the request is told
    void *handle;                   // workers: the runtime handle from init
    struct instances *set;          // the set it belongs to, and its index there
    int index;
    // Workers, guarded by mu.
    struct request *pending; // handed over, not started yet
    struct thread thread;
    bool has_thread;
    bool is_stopping;   // the worker ends once idle
    bool is_running;    // inside run
    bool want_abort;    // inst_slot_abort was called during this run
    bool is_abort_sent; // the watch thread aborted this run
    bool is_aborting;   // the watch thread is inside abort for this slot
    bool is_retiring;   // removed by its own worker (from on_done): the worker destroys the
                        // handle and ends; its thread is joined when the slot is next used
};

/* Records a failure unless an outcome is already set (the first one sticks). */
void inst_slot_fail(struct inst_slot *s, int status, const char *msg);

/* Ends the slot's run with reason unless an outcome is already set. */
void inst_slot_finish(struct inst_slot *s, enum finish_reason reason);

/* Scheduled mode: the model's per-step work. Called on the scheduler thread. */
struct inst_sched_ops {
    /* Sets up instance i for its new request (slot->req, done FINISH_NONE). May end it at once
     * with inst_slot_fail. */
    void (*start)(void *model, int i);
    /* One step over every running instance; ends requests by setting their slot's done. */
    void (*step)(void *model);
    /* Instance i's request ended (slot->done set): records its results and timings and frees
     * its per-request state. May still turn the outcome into a failure (set done to
     * FINISH_NONE, then inst_slot_fail). */
    void (*end)(void *model, int i);
};

/* Worker mode: the runtime calls. init, destroy: admin thread; run: the instance's worker
 * thread; abort: the watch thread, while run runs on that handle. */
struct inst_worker_ops {
    /* Creates instance i's runtime handle. ERR_* with err saying why. */
    int (*init)(void *model, int i, void **handle, struct errmsg *err);
    /* Runs slot->req on handle until it ends; sets the outcome with inst_slot_finish or
     * inst_slot_fail (left unset: FINISH_STOP, or FINISH_CANCELLED when the request was
     * cancelled) and the request's timings. Must return after abort. */
    void (*run)(void *model, int i, void *handle, struct inst_slot *slot);
    /* Asks the running call on handle to stop soon. Must not block on run. */
    void (*abort)(void *model, void *handle);
    /* Frees the handle (idle: no run in flight). */
    void (*destroy)(void *model, void *handle);
};

struct instances {
    struct mutex mu;
    struct cond cv;
    struct inst_slot slot[INSTANCES_MAX];
    const struct inst_sched_ops *sched; // one of these two is set
    const struct inst_worker_ops *worker;
    void *model;
    platform_done_fn on_done;
    void *owner;
    struct thread thread; // scheduled: the scheduler; workers: the watch thread
    bool is_stopping;
};

/* Starts the scheduler thread over model (ops: static storage). ERR_OK or ERR_NOMEM. */
int instances_start_sched(struct instances *s, const struct inst_sched_ops *ops, void *model,
                          platform_done_fn on_done, void *owner);

/* Starts the watch thread; instances are added with instances_add. ERR_OK or ERR_NOMEM. */
int instances_start_workers(struct instances *s, const struct inst_worker_ops *ops, void *model,
                            platform_done_fn on_done, void *owner);

/* Workers: creates instance i (its handle through init, then its thread). ERR_INVALID (index
 * out of range or in use), the init's error, or ERR_NOMEM. */
int instances_add(struct instances *s, int i, struct errmsg *err);

/* Workers: stops instance i's thread and destroys its handle. The instance is idle, or this
 * is called from its own worker (the core's on_done retiring it after its request): then the
 * worker destroys the handle and ends once on_done returns. */
void instances_remove(struct instances *s, int i);

/* Scheduled mode: the model changes which instances exist under this lock (setting
 * slot[i].exists together with its own state), so the scheduler never sees half an instance. */
void instances_lock(struct instances *s);
void instances_unlock(struct instances *s);

/* Hands r to idle instance i (retains it). */
void instances_submit(struct instances *s, int i, struct request *r);

/* Workers: asks the watch thread to abort the slot's running call (a callback that saw its
 * end: max_tokens, or a cancellation that an earlier abort did not end — a runtime may ignore
 * an abort that arrives before its run started). Each call sends one more abort.
 * Thread-safe; safe from inside a runtime callback. */
void instances_abort(struct instances *s, struct inst_slot *slot);

/* Stops: cancels what still runs, waits for it, joins every thread and (workers) destroys every
 * handle. A request still on a slot is delivered without on_done (the core unloads idle
 * models, so this is a safety net). Scheduled models free their own instances afterwards
 * (slot[i].exists still says which). Then instances_deinit. */
void instances_stop(struct instances *s);

/* Frees the lock after instances_stop. */
void instances_deinit(struct instances *s);

#endif
