/* Server-wide generation counters and their Prometheus text exposition (format 0.0.4), with
 * llama.cpp's `llamacpp:` metric names plus llamapi's per-model gauges. Counters are C11
 * atomics, updated by generation sessions from any HTTP thread; the text is built from a
 * snapshot, so formatting is pure and tested alone. Not a general metrics library. */
#ifndef API_METRICS_H
#define API_METRICS_H

#include "platform/request.h"
#include "util/buf.h"

#include <stdatomic.h>
#include <stdint.h>

enum metrics_reject {
    METRICS_REJECT_QUEUE_FULL = 0, // 429: every instance busy and the queue full
    METRICS_REJECT_UNLOADING = 1,  // the model was being unloaded
    METRICS_REJECT_COUNT = 2,
};

/* Lock-free: every field is updated with atomic adds from any thread. Caller storage; zero it
 * with metrics_init(). */
struct metrics {
    atomic_uint_fast64_t prompt_tokens;    // prompt tokens evaluated (cache hits excluded)
    atomic_uint_fast64_t prompt_cached;    // prompt tokens reused from an instance's cache
    atomic_uint_fast64_t prompt_us;        // microseconds spent on prompts
    atomic_uint_fast64_t predicted_tokens; // tokens generated
    atomic_uint_fast64_t predicted_us;     // microseconds spent generating
    atomic_uint_fast64_t n_decode;         // decode steps (one per prompt batch and token)
    atomic_uint_fast64_t n_tokens_max;     // most prompt+generated tokens in one request
    atomic_uint_fast64_t requests;         // requests admitted
    atomic_uint_fast64_t rejected[METRICS_REJECT_COUNT];
};

/* Zeroes every counter. Cannot fail. */
void metrics_init(struct metrics *m);

/* Updates for one request (m may be NULL: nothing happens). Thread-safe; cannot fail. */
void metrics_request_started(struct metrics *m);
void metrics_request_finished(struct metrics *m, const struct request_timings *t);
void metrics_request_rejected(struct metrics *m, enum metrics_reject why);

/* A consistent-enough copy of the counters (each read atomically). */
struct metrics_snapshot {
    uint64_t prompt_tokens, prompt_us, predicted_tokens, predicted_us, n_decode, n_tokens_max;
    uint64_t requests, prompt_cached;
    uint64_t rejected[METRICS_REJECT_COUNT];
    int requests_processing; // instances running a request, all models
    int requests_deferred;   // requests waiting in queues, all models
};

void metrics_snapshot_take(struct metrics *m, struct metrics_snapshot *out);

/* Per-model gauges for the llamapi_* series. */
struct metrics_model {
    const char *id; // model id (escaped on output)
    int queue_depth;
    int n_idle, n_busy; // instances by state
    bool is_loading;
};

/* Appends the exposition text (HELP/TYPE lines, one sample per line) for s and the models.
 * ERR_NOMEM (out holds a prefix then). */
int metrics_format(const struct metrics_snapshot *s, const struct metrics_model *models,
                   int n_models, struct buf *out);

/* Reason label for a rejection ("queue_full", "unloading"). Static; cannot fail. */
const char *metrics_reject_name(enum metrics_reject why);

#endif
