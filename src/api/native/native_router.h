/* llama.cpp's router behaviour shared with the other endpoints: a request naming a model that
 * is not loaded but exists as NAME.gguf under --models-dir loads it first (autoload). */
#ifndef API_NATIVE_ROUTER_H
#define API_NATIVE_ROUTER_H

#include "api/api.h"
#include "api/validate.h"

#include <stdbool.h>

/* For a request naming a model that is not registered: loads NAME from --models-dir (a bare
 * name: no '/', found as NAME.gguf or NAME) with the server's -np and -c, unless autoload is
 * disabled, and returns a reference to it (loaded here or by a concurrent request). NULL
 * with f filled: 404 model_not_found (disabled, not found), 503 models_busy (--models-max
 * models are loaded and all are busy: retry later), 500 model_load_failed (the file does not
 * load; logged). Blocks while loading. Thread-safe. */
struct model *native_router_autoload(const struct api_ctx *ctx, const char *name,
                                     struct api_fail *f);

#endif
