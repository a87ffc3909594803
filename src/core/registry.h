/* The model registry: id → loaded model (reference-counted). Guarded by its own mutex; readers
 * take a reference (registry_acquire) or a snapshot of the public facts (struct model_info),
 * so no registry lock is held while a request runs or a response is written. */
#ifndef CORE_REGISTRY_H
#define CORE_REGISTRY_H

#include "platform/platform.h"

#include <stdbool.h>
#include <stdint.h>

#define MODEL_ID_CAP   256
#define MODEL_PATH_CAP 4096
#define REGISTRY_CAP   64

enum model_status {
    MODEL_STATUS_LOADING = 0,
    MODEL_STATUS_READY = 1,
    MODEL_STATUS_UNLOADING = 2,
    MODEL_STATUS_FAILED = 3, // loaded, but can run nothing until loaded again (its file
                             // changed on disk): model_info.failure says why. Reported by
                             // model_get_info only; the model itself stays READY inside.
};

/* A copy of a model's public facts at one moment. */
struct model_info {
    char id[MODEL_ID_CAP];
    char path[MODEL_PATH_CAP];
    const char *platform_id; // static string of the platform
    enum model_status status;
    int64_t created_unix_s;
    int64_t last_used_ns;            // monotonic clock of its last request (or of its load)
    int instance_count;              // instances in the pool (not retiring)
    int queue_depth;                 // requests waiting
    int busy_count;                  // instances running a request
    struct platform_model_desc desc; // zero while loading
    char failure[ERRMSG_CAP];        // MODEL_STATUS_FAILED: why; else ""
};

struct model;
struct registry;

/* Creates an empty registry. ERR_OK or ERR_NOMEM; caller frees with registry_free(), which
 * releases the references still held. */
int registry_new(struct registry **out);
void registry_free(struct registry *r);

/* Adds m under its id, taking a new reference. ERR_EXISTS when the id is taken, ERR_LIMIT
 * when REGISTRY_CAP models are registered. */
int registry_add(struct registry *r, struct model *m);

/* Removes the model with this id and hands the registry's reference to the caller (NULL when
 * absent). */
struct model *registry_take(struct registry *r, const char *id);

/* A new reference to the model with this id, or NULL. Caller releases with model_release(). */
struct model *registry_acquire(struct registry *r, const char *id);

/* Snapshots up to max entries in load order; returns the total count. */
int registry_list(struct registry *r, struct model_info *out, int max);

/* Snapshot of one entry. ERR_OK or ERR_NOT_FOUND. */
int registry_get(struct registry *r, const char *id, struct model_info *out);

#endif
