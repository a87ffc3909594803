/* An instance pool with a bounded FIFO queue: which instance runs which request, who waits,
 * and who is refused. Pure bookkeeping (no platform calls), so it is tested deterministically;
 * the model layer performs the actions the results ask for. Thread-safe (own mutex). */
#ifndef CORE_POOL_H
#define CORE_POOL_H

#include "platform/request.h"
#include "util/thread.h"

#include <stdbool.h>
#include <stdint.h>

#define POOL_MAX_INSTANCES 64

enum pool_slot {
    POOL_SLOT_EMPTY = 0,    // no instance
    POOL_SLOT_IDLE = 1,     // instance ready
    POOL_SLOT_BUSY = 2,     // running a request
    POOL_SLOT_RETIRING = 3, // busy, removed when its request ends
};

enum pool_admit {
    POOL_ADMIT_RUN = 0,    // *instance is reserved for the request: dispatch it now
    POOL_ADMIT_QUEUED = 1, // waiting; dispatched by a later pool_release
    POOL_ADMIT_FULL = 2,   // queue full: refuse (429)
    POOL_ADMIT_CLOSED = 3, // the pool is closed (model unloading)
};

enum pool_release_result {
    POOL_RELEASE_IDLE = 0,   // the instance is idle now
    POOL_RELEASE_NEXT = 1,   // *next (a queued request) now owns the instance: dispatch it
    POOL_RELEASE_RETIRE = 2, // the instance was retired: remove it from the platform
};

/* How well the idle instance `slot` suits r: higher wins, ties go to the lowest slot. Called
 * with the pool's mutex held, so it must not call back into the pool. */
typedef int (*pool_affinity_fn)(void *ctx, int slot, const struct request *r);

/* Guarded by mu. */
struct pool {
    struct mutex mu;
    struct cond cv_idle; // signalled when a slot stops being busy
    enum pool_slot slots[POOL_MAX_INSTANCES];
    struct request *running[POOL_MAX_INSTANCES]; // borrowed: the platform holds a reference
                                                 // until it releases the slot
    struct request **queue;                      // ring buffer of queue_cap retained requests
    int queue_cap;
    int queue_head;
    int queue_len;
    bool is_closed;
    pool_affinity_fn affinity; // NULL: every idle slot scores the same
    void *affinity_ctx;
    uint64_t last_used[POOL_MAX_INSTANCES]; // use_clock when the slot last got a request; 0:
                                            // never since its instance was created
    uint64_t use_clock;
};

/* ERR_OK or ERR_NOMEM. queue_cap may be 0 (no waiting: busy means 429). */
int pool_init(struct pool *p, int queue_cap);
/* Releases queued requests still held (there should be none after pool_close). */
void pool_deinit(struct pool *p);

/* Routes admitted requests by fn (set before the first admit). */
void pool_set_affinity(struct pool *p, pool_affinity_fn fn, void *ctx);

/* Reserves an empty slot for a new instance: its index, or -1 when all are used. The slot
 * stays EMPTY until pool_commit_slot (so a failed platform add leaves nothing behind). */
int pool_reserve_slot(struct pool *p);
/* Makes a reserved slot an idle instance and, when a request waits, hands it to that
 * request: returns it (the caller dispatches it on that slot) or NULL. */
struct request *pool_commit_slot(struct pool *p, int slot);

/* Admits a request: a free instance (RUN, *instance set, r->instance set; the idle one the
 * affinity function scores highest), a queue place (QUEUED; the pool retains r), FULL or
 * CLOSED. */
enum pool_admit pool_admit(struct pool *p, struct request *r, int *instance);

/* The request on instance ended. See enum pool_release_result. */
enum pool_release_result pool_release(struct pool *p, int instance, struct request **next);

/* Shrinks to target instances: idle ones are removed at once (their indices written to
 * removed, returned count), busy ones marked RETIRING. Cannot fail. */
int pool_shrink(struct pool *p, int target, int *removed);

/* Removes a queued request that gave up waiting (client gone). True when it was still
 * queued (the pool's reference is released). */
bool pool_remove_queued(struct pool *p, struct request *r);

/* Closes the pool: later admits get CLOSED. Moves the queued requests (still retained) to
 * out (up to max; the queue never holds more than its cap) and returns their count. */
int pool_close(struct pool *p, struct request **out, int max);

/* Ends every running request with FINISH_ERROR, status and msg (its reader wakes now) and
 * asks it to stop at its next step. */
void pool_fail_running(struct pool *p, int status, const char *msg);

/* Waits until no slot is BUSY or RETIRING. */
void pool_wait_idle(struct pool *p);

/* Counts: instances that exist (idle + busy, not retiring), and requests waiting. */
int pool_instance_count(struct pool *p);
int pool_queue_depth(struct pool *p);
int pool_busy_count(struct pool *p);

/* The state of every slot (POOL_MAX_INSTANCES entries), copied under the lock. */
void pool_slot_states(struct pool *p, enum pool_slot *out);

#endif
