/* A loaded model: its platform implementation, its instance pool and queue, and its
 * default_params. Reference-counted: the registry holds one reference, each request handler
 * another while it works; the platform model is freed with the last reference. */
#ifndef CORE_MODEL_H
#define CORE_MODEL_H

#include "core/budget.h"
#include "core/pool.h"
#include "core/registry.h"
#include "platform/platform.h"

#include <jansson.h>

struct model;

struct model_params {
    const char *id;
    const char *path; // what the platform claimed
    const struct platform *platform;
    int queue_cap; // request_queue_size
    int n_ctx;     // 0: the model's, capped at 4096
    int n_threads;
    bool force_embedding;
    enum platform_pooling pooling; // embedding models: DEFAULT = the file's
    const char *chat_template;     // overrides the model's (name or source; borrowed, outlives
                                   // the model) or NULL
    const json_t *default_params;  // validated object or NULL (copied)
    struct budget *budget;         // borrowed; outlives the model
    const char *mmproj_path;       // a multimodal projector (copied) or NULL
};

/* Creates a model in state LOADING with no platform model yet. ERR_NOMEM. refs = 1. */
int model_new(const struct model_params *p, struct model **out);

/* Loads the platform model and creates up to n_instances instances within the budget;
 * *n_actual is how many exist (>= 1 on success). ERR_NOMEM when not even one instance fits,
 * or the platform's error (err says why). On success the model is READY; on a partial load
 * (*n_actual < n_instances) err says why no more instances were made. */
int model_load(struct model *m, int n_instances, int *n_actual, struct errmsg *err);

/* Grows or shrinks to n instances (>= 1). Growth may stop early at the budget (*n_actual
 * says); shrinking removes idle instances now and busy ones when their request ends.
 * Serialized with other resizes of the same model. */
int model_resize(struct model *m, int n, int *n_actual, struct errmsg *err);

/* Admits r: runs it on a free instance, queues it, or refuses (FULL/CLOSED). For RUN and
 * QUEUED the pool/platform hold their own references to r. */
enum pool_admit model_submit(struct model *m, struct request *r);

/* A reader whose client left: cancels r if running, or removes it from the queue. */
void model_abandon(struct model *m, struct request *r);

/* Stops the model: closes the queue (queued requests finish with 404-style errors), cancels
 * running requests at their next step and waits until every instance is idle. */
void model_shutdown(struct model *m);

void model_retain(struct model *m);
/* Drops a reference; the last one frees the platform model, releases the budget. */
void model_release(struct model *m);

/* Snapshot of the public facts. Thread-safe. */
void model_get_info(struct model *m, struct model_info *out);
const char *model_id(const struct model *m);
/* Every instance slot's state (POOL_MAX_INSTANCES entries): which instance is busy. */
void model_slot_states(struct model *m, enum pool_slot *out);
/* Platform facts (kind, n_ctx, …); valid once READY. */
const struct platform_model_desc *model_desc(const struct model *m);
/* The platform model (borrowed; valid while the caller holds a reference, once READY). */
struct platform_model *model_impl(const struct model *m);
const struct platform *model_platform(const struct model *m);
/* The validated default_params object (borrowed, immutable) or NULL. */
const json_t *model_default_params(const struct model *m);
bool model_is_ready(struct model *m);
/* True when the model is READY but can run nothing more until it is loaded again (the
 * platform's is_failed: its file changed on disk); why then says so. Thread-safe. */
bool model_is_failed(struct model *m, struct errmsg *why);

/* Waits up to timeout_ms while the model is still loading. True when it is READY; false when
 * the wait timed out (model_is_loading() still true) or the model is gone: its load failed or
 * it is being unloaded. */
bool model_wait_ready(struct model *m, int timeout_ms);
bool model_is_loading(struct model *m);

#endif
