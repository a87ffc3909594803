/* Model management: resolves paths, picks the platform, loads / resizes / unloads named
 * models in the registry under one memory budget. Operations on one model are serialized by
 * the model; different models proceed independently. */
#ifndef CORE_MANAGER_H
#define CORE_MANAGER_H

#include "core/budget.h"
#include "core/model.h"
#include "core/registry.h"

#include <jansson.h>

struct manager_config {
    char models_dir[MODEL_PATH_CAP]; // where bare names resolve
    int default_queue_size;          // request_queue_size when a load does not say
    int n_threads;                   // 0: thread_default_count()
    int n_ctx_max;                   // cap on per-instance context (0: 4096 default cap)
    uint64_t memory_limit;           // bytes; 0: 75% of available memory
    int models_max;                  // > 0: a load beyond this many models first unloads the
                                     // least recently used idle one (--models-max)
    const char *chat_template;       // every model's template instead of its own: a built-in
                                     // name or Jinja source (borrowed; outlives the manager)
};

/* Why a load failed, so the API can pick the status and code. */
enum load_failure {
    LOAD_FAIL_NONE = 0,
    LOAD_FAIL_EXISTS,      // 409 model_already_exists
    LOAD_FAIL_PATH,        // 400: missing, unreadable or outside the allowed places
    LOAD_FAIL_MMPROJ_PATH, // 400: the same for mmproj_path
    LOAD_FAIL_NO_PLATFORM, // 400 platform_detection_failed
    LOAD_FAIL_UNAVAILABLE, // 400 unsupported_platform
    LOAD_FAIL_ENGINE,      // 500: the platform could not load it
    LOAD_FAIL_LIMIT,       // 400 too_many_models: the registry is full, or --models-max
                           // models are loaded and none is idle
};

struct manager_load {
    const char *id;
    const char *path; // as the user gave it
    int n_instances;  // >= 1
    int queue_size;   // -1: the default
    int n_ctx;        // 0: model default within the cap
    bool force_embedding;
    enum platform_pooling pooling; // embedding models: DEFAULT = the file's
    const json_t *default_params;  // validated, or NULL
    const char *mmproj_path;       // a multimodal projector as the user gave it (resolved like
                                   // path), or NULL: the one beside the model, if any
};

struct manager;

int manager_new(const struct manager_config *c, struct manager **out);
/* Shuts every model down and frees. NULL is a no-op. */
void manager_free(struct manager *m);

/* Unloads every model (manager_unload each): running requests are cancelled and end with an
 * error, the call returns once every model is idle and gone. For shutdown, before the HTTP
 * server waits for its connections, so no connection waits out a long generation. */
void manager_unload_all(struct manager *m);

struct registry *manager_registry(struct manager *m);

/* Loads a model (first evicting the least recently used idle model when models_max are
 * loaded). ERR_OK with *n_actual (>= 1; < n_instances is a partial load, and err then says
 * why), or an error with *why and err saying what went wrong. */
int manager_load(struct manager *m, const struct manager_load *args, int *n_actual,
                 enum load_failure *why, struct errmsg *err);

/* Resizes. ERR_NOT_FOUND, ERR_BUSY (still loading), or ERR_OK with *n_actual. */
int manager_resize(struct manager *m, const char *id, int n_instances, int *n_actual,
                   struct errmsg *err);

/* Unloads: new requests see 404 at once, queued ones end with an error, running ones are
 * cancelled at their next step; returns when the model is idle. ERR_OK or ERR_NOT_FOUND. */
int manager_unload(struct manager *m, const char *id);

/* Resolves a user-given path: absolute paths as given, bare names and relative paths under
 * models_dir (".." components refused). ERR_OK with out, ERR_INVALID (err says why: also a
 * FIFO, socket or device, which a load would block on or misread) or ERR_NOT_FOUND. */
int manager_resolve_path(const struct manager *m, const char *given, char *out, size_t cap,
                         struct errmsg *err);

#endif
