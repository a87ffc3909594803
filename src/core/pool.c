/* Pool bookkeeping. Slots are a fixed array (at most 64 instances per model), the queue a
 * ring buffer allocated once, so admission never allocates. */
#include "core/pool.h"

#include "util/mem.h"

#include <string.h>

int pool_init(struct pool *p, int queue_cap)
{
    *p = (struct pool){0};
    if (queue_cap < 0) return ERR_INVALID;
    p->queue = mem_calloc((size_t)queue_cap + 1, sizeof *p->queue);
    if (!p->queue) return ERR_NOMEM;
    if (mutex_init(&p->mu) != ERR_OK) {
        mem_free(p->queue);
        return ERR_NOMEM;
    }
    if (cond_init(&p->cv_idle) != ERR_OK) {
        mutex_deinit(&p->mu);
        mem_free(p->queue);
        return ERR_NOMEM;
    }
    p->queue_cap = queue_cap;
    return ERR_OK;
}

void pool_deinit(struct pool *p)
{
    if (!p->queue) return;
    while (p->queue_len > 0) {
        request_release(p->queue[p->queue_head]);
        p->queue_head = (p->queue_head + 1) % (p->queue_cap + 1);
        p->queue_len--;
    }
    cond_deinit(&p->cv_idle);
    mutex_deinit(&p->mu);
    mem_free(p->queue);
    p->queue = NULL;
}

static struct request *queue_pop_locked(struct pool *p)
{
    if (p->queue_len == 0) return NULL;
    struct request *r = p->queue[p->queue_head];
    p->queue_head = (p->queue_head + 1) % (p->queue_cap + 1);
    p->queue_len--;
    return r;
}

void pool_set_affinity(struct pool *p, pool_affinity_fn fn, void *ctx)
{
    mutex_lock(&p->mu);
    p->affinity = fn;
    p->affinity_ctx = ctx;
    mutex_unlock(&p->mu);
}

/* The idle slot r should run on, or -1 when none is idle. */
static void mark_used_locked(struct pool *p, int slot)
{
    p->last_used[slot] = ++p->use_clock;
}

/* The idle slot with the best affinity; among equal ones the least recently used (then the
 * lowest), so a request that matches no cache goes to an instance holding nothing, or the
 * oldest conversation, rather than evicting the one a client just used. */
static int pick_idle_locked(struct pool *p, const struct request *r)
{
    int best = -1, best_score = 0;
    for (int i = 0; i < POOL_MAX_INSTANCES; i++) {
        if (p->slots[i] != POOL_SLOT_IDLE) continue;
        int score = p->affinity ? p->affinity(p->affinity_ctx, i, r) : 0;
        if (best < 0 || score > best_score ||
            (score == best_score && p->last_used[i] < p->last_used[best])) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

int pool_reserve_slot(struct pool *p)
{
    // Reservation needs no state: EMPTY slots are only filled by pool_commit_slot, and the
    // model layer serializes resizes, so the first EMPTY slot stays free until committed.
    mutex_lock(&p->mu);
    int slot = -1;
    for (int i = 0; i < POOL_MAX_INSTANCES && slot < 0; i++)
        if (p->slots[i] == POOL_SLOT_EMPTY) slot = i;
    mutex_unlock(&p->mu);
    return slot;
}

struct request *pool_commit_slot(struct pool *p, int slot)
{
    mutex_lock(&p->mu);
    struct request *next = p->is_closed ? NULL : queue_pop_locked(p);
    p->slots[slot] = next ? POOL_SLOT_BUSY : POOL_SLOT_IDLE;
    p->running[slot] = next;
    p->last_used[slot] = 0; // a new instance: nothing cached
    if (next) {
        next->instance = slot;
        mark_used_locked(p, slot);
    }
    mutex_unlock(&p->mu);
    return next;
}

enum pool_admit pool_admit(struct pool *p, struct request *r, int *instance)
{
    enum pool_admit result = POOL_ADMIT_FULL;
    mutex_lock(&p->mu);
    if (p->is_closed) {
        result = POOL_ADMIT_CLOSED;
        goto out;
    }
    int i = pick_idle_locked(p, r);
    if (i >= 0) {
        p->slots[i] = POOL_SLOT_BUSY;
        p->running[i] = r;
        r->instance = i;
        mark_used_locked(p, i);
        *instance = i;
        result = POOL_ADMIT_RUN;
        goto out;
    }
    if (p->queue_len < p->queue_cap) {
        request_retain(r);
        p->queue[(p->queue_head + p->queue_len) % (p->queue_cap + 1)] = r;
        p->queue_len++;
        result = POOL_ADMIT_QUEUED;
    }
out:
    mutex_unlock(&p->mu);
    return result;
}

enum pool_release_result pool_release(struct pool *p, int instance, struct request **next)
{
    enum pool_release_result result = POOL_RELEASE_IDLE;
    *next = NULL;
    mutex_lock(&p->mu);
    p->running[instance] = NULL;
    if (p->slots[instance] == POOL_SLOT_RETIRING) {
        p->slots[instance] = POOL_SLOT_EMPTY;
        result = POOL_RELEASE_RETIRE;
    } else if (!p->is_closed && (*next = queue_pop_locked(p)) != NULL) {
        (*next)->instance = instance;
        p->running[instance] = *next;
        mark_used_locked(p, instance);
        result = POOL_RELEASE_NEXT;
    } else {
        p->slots[instance] = POOL_SLOT_IDLE;
    }
    cond_broadcast(&p->cv_idle);
    mutex_unlock(&p->mu);
    return result;
}

int pool_shrink(struct pool *p, int target, int *removed)
{
    int n_removed = 0;
    mutex_lock(&p->mu);
    int live = 0;
    for (int i = 0; i < POOL_MAX_INSTANCES; i++)
        live += p->slots[i] == POOL_SLOT_IDLE || p->slots[i] == POOL_SLOT_BUSY;
    // Idle instances go first (from the top), then busy ones are marked to retire.
    for (int i = POOL_MAX_INSTANCES - 1; i >= 0 && live > target; i--) {
        if (p->slots[i] == POOL_SLOT_IDLE) {
            p->slots[i] = POOL_SLOT_EMPTY;
            removed[n_removed++] = i;
            live--;
        }
    }
    for (int i = POOL_MAX_INSTANCES - 1; i >= 0 && live > target; i--) {
        if (p->slots[i] == POOL_SLOT_BUSY) {
            p->slots[i] = POOL_SLOT_RETIRING;
            live--;
        }
    }
    mutex_unlock(&p->mu);
    return n_removed;
}

bool pool_remove_queued(struct pool *p, struct request *r)
{
    bool found = false;
    mutex_lock(&p->mu);
    int cap = p->queue_cap + 1;
    for (int k = 0; k < p->queue_len && !found; k++) {
        if (p->queue[(p->queue_head + k) % cap] != r) continue;
        for (int j = k; j < p->queue_len - 1; j++)
            p->queue[(p->queue_head + j) % cap] = p->queue[(p->queue_head + j + 1) % cap];
        p->queue_len--;
        found = true;
    }
    mutex_unlock(&p->mu);
    if (found) request_release(r);
    return found;
}

int pool_close(struct pool *p, struct request **out, int max)
{
    int n = 0;
    mutex_lock(&p->mu);
    p->is_closed = true;
    struct request *r;
    while (n < max && (r = queue_pop_locked(p)) != NULL)
        out[n++] = r;
    mutex_unlock(&p->mu);
    return n;
}

void pool_fail_running(struct pool *p, int status, const char *msg)
{
    mutex_lock(&p->mu);
    for (int i = 0; i < POOL_MAX_INSTANCES; i++) {
        if (!p->running[i]) continue;
        request_finish(p->running[i], FINISH_ERROR, status, msg);
        request_cancel(p->running[i]);
    }
    mutex_unlock(&p->mu);
}

static bool any_busy_locked(const struct pool *p)
{
    for (int i = 0; i < POOL_MAX_INSTANCES; i++)
        if (p->slots[i] == POOL_SLOT_BUSY || p->slots[i] == POOL_SLOT_RETIRING) return true;
    return false;
}

void pool_wait_idle(struct pool *p)
{
    mutex_lock(&p->mu);
    while (any_busy_locked(p))
        cond_wait(&p->cv_idle, &p->mu);
    mutex_unlock(&p->mu);
}

static int count_locked(const struct pool *p, enum pool_slot a, enum pool_slot b)
{
    int n = 0;
    for (int i = 0; i < POOL_MAX_INSTANCES; i++)
        n += p->slots[i] == a || p->slots[i] == b;
    return n;
}

int pool_instance_count(struct pool *p)
{
    mutex_lock(&p->mu);
    int n = count_locked(p, POOL_SLOT_IDLE, POOL_SLOT_BUSY);
    mutex_unlock(&p->mu);
    return n;
}

int pool_busy_count(struct pool *p)
{
    mutex_lock(&p->mu);
    int n = count_locked(p, POOL_SLOT_BUSY, POOL_SLOT_RETIRING);
    mutex_unlock(&p->mu);
    return n;
}

int pool_queue_depth(struct pool *p)
{
    mutex_lock(&p->mu);
    int n = p->queue_len;
    mutex_unlock(&p->mu);
    return n;
}

void pool_slot_states(struct pool *p, enum pool_slot *out)
{
    mutex_lock(&p->mu);
    memcpy(out, p->slots, sizeof p->slots);
    mutex_unlock(&p->mu);
}
