/* Which model serves a request: a name (an id or one of the first -m model's --alias names),
 * or, when the request names none, the first fitting model — waiting while start-up models
 * load. Every endpoint resolves its model here. */
#ifndef API_MODEL_SELECT_H
#define API_MODEL_SELECT_H

#include "api/api.h"
#include "api/validate.h"
#include "core/manager.h"

/* How long a request for a model that is still loading waits for it. */
#define API_LOADING_WAIT_MS 120000

/* A reference to the model named name (its id, or one of --alias's names for the first -m
 * model), or NULL. While start-up models are still loading, a name not registered yet is
 * waited for (bounded). In single-model mode (one -m, the registry holding just it) any other
 * name gets that model, as llama-server serves it. The caller releases with model_release(). */
struct model *api_acquire_model(const struct api_ctx *ctx, const char *name);

/* The model a request that names none gets, acquired: the first ready model for which
 * prefer() is true, else (any_ready) the first ready model, else the first model (which may
 * still be loading). While start-up models load and none is registered yet, waits for one.
 * NULL with f filled (404 model_not_found) when no model is loaded. */
struct model *api_acquire_unnamed(const struct api_ctx *ctx,
                                  bool (*prefer)(const struct platform_model_desc *d),
                                  bool any_ready, struct api_fail *f);

/* The model id a comma-separated --alias list gives: the name first in byte order, as
 * llama-server picks it (a single name is itself). Cannot fail; truncates to cap - 1 bytes. */
void api_alias_first(const char *aliases, char *out, size_t cap);

/* Sets entry's "aliases" and "tags" arrays for the model with this id: --alias's names and
 * --tags's tags for the first -m model, empty arrays for the others. Allocation failures
 * leave the fields out. */
void api_model_set_names(const struct api_ctx *ctx, json_t *entry, const char *id);

/* Waits (bounded) for m to finish loading. True when it is ready; else f is filled: 503
 * model_loading when it is still loading, 404 model_not_found when its load failed or it was
 * unloaded meanwhile (the request holds a reference to a model that is gone). */
bool api_model_wait_ready(struct model *m, struct api_fail *f);

/* Resolves the request's model ("model", or "model_id") to a ready model of the wanted kind.
 * A body without the field (or with null) gets the first model of that kind, as llama-server
 * serves unnamed requests. NULL with f filled: 400 invalid type, 404 model_not_found, 400
 * wrong_model_type, 503 model_loading. The caller releases the reference. */
struct model *api_resolve_model(const struct api_ctx *ctx, const json_t *body, enum model_kind kind,
                                struct api_fail *f);

#endif
