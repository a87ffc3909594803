/* Newline-delimited JSON streams (application/x-ndjson), as Ollama streams its answers: one
 * compact JSON object per line, nothing else on the wire — no keep-alive lines, since
 * Ollama's clients parse every line as JSON. */
#ifndef API_OLLAMA_NDJSON_H
#define API_OLLAMA_NDJSON_H

#include "api/api.h"
#include "api/generation/sse.h"

/* Appends j as one compact line ending in '\n' and decrefs j. ERR_NOMEM (also when j is
 * NULL: building it failed). */
int ndjson_append(struct buf *out, json_t *j);

/* Makes resp a 200 application/x-ndjson stream driven by produce (the SSE producer contract:
 * append complete lines, SSE_END once the last is appended). Takes ownership of ctx (freed
 * with ctx_free, also when the client leaves). first, when not NULL, is sent at once. On
 * allocation failure ctx is freed and resp becomes a 500 in Ollama's error shape. */
void ndjson_respond(struct api_response *resp, sse_produce_fn produce, sse_free_fn ctx_free,
                    void *ctx, const char *first);

#endif
