/* POST /v1/chat/completions pieces shared with the endpoints built on the same machinery. */
#ifndef API_OPENAI_CHAT_H
#define API_OPENAI_CHAT_H

#include "api/api.h"
#include "api/generate.h"
#include "api/validate.h"
#include "core/manager.h"

/* How long a request for a model that is still loading waits for it. */
#define API_LOADING_WAIT_MS 120000

/* A reference to the model named name, or NULL. While start-up models are still loading, a
 * name not registered yet is waited for (bounded). */
struct model *api_acquire_model(const struct api_ctx *ctx, const char *name);

/* Waits (bounded) for m to finish loading. True when it is ready; else f is filled: 503
 * model_loading when it is still loading, 404 model_not_found when its load failed or it was
 * unloaded meanwhile (the request holds a reference to a model that is gone). */
bool api_model_wait_ready(struct model *m, struct api_fail *f);

/* Resolves the request's model ("model", or "model_id") to a ready model of the wanted kind.
 * NULL with f filled: 400 missing/invalid, 404 model_not_found, 400 wrong_model_type,
 * 503 model_loading. The caller releases the reference. */
struct model *api_resolve_model(const struct api_ctx *ctx, const json_t *body, enum model_kind kind,
                                struct api_fail *f);

/* llama.cpp's `timings` object for a finished session. */
json_t *api_timings_json(struct gen_session *s);

/* OpenAI `usage` for a finished session (prompt_tokens_details.cached_tokens included). */
json_t *api_usage_json(struct gen_session *s);

#endif
