/* llama.cpp's router behaviour shared with the other endpoints: a request naming a model that
 * is not loaded but exists as NAME.gguf under --models-dir loads it first (autoload). */
#ifndef API_NATIVE_ROUTER_H
#define API_NATIVE_ROUTER_H

#include "api/api.h"

#include <stdbool.h>

/* Loads the model called name from --models-dir (a bare name: no '/', found as NAME.gguf or
 * NAME) with the server's -np and -c, unless autoload is disabled. Blocks until loaded. True
 * when a model with that id is now registered (loaded here or by a concurrent request); false
 * when disabled, not found, or the load failed (logged). Thread-safe. */
bool native_router_autoload(const struct api_ctx *ctx, const char *name);

#endif
