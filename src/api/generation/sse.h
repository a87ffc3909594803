/* Server-sent events on top of api_stream: a producer callback fills a buffer with complete
 * events; the stream hands them to the HTTP layer and sends a comment line as keep-alive when
 * the producer has nothing for a while, so idle timeouts do not cut long prompts. */
#ifndef API_SSE_H
#define API_SSE_H

#include "api/api.h"

enum sse_status {
    SSE_MORE = 0, // call again
    SSE_END = 1,  // the stream is complete once the buffer is drained
};

/* Appends zero or more complete events to out, waiting at most about timeout_ms. */
typedef enum sse_status (*sse_produce_fn)(void *ctx, struct buf *out, int timeout_ms);
/* Frees ctx; runs once, also when the client disconnects mid-stream. */
typedef void (*sse_free_fn)(void *ctx);

/* Makes resp a text/event-stream response driven by produce (takes ownership of ctx, freed
 * with ctx_free). first, when not NULL, is sent at once (so headers leave before the first
 * token). On allocation failure ctx is freed and resp becomes a 500. */
void sse_respond(struct api_response *resp, sse_produce_fn produce, sse_free_fn ctx_free, void *ctx,
                 const char *first);

/* Appends `data: <json>\n\n` (compact) — or with an `event: <name>` line first — and decrefs
 * j. ERR_NOMEM. */
int sse_append_json(struct buf *out, const char *event, json_t *j);

#endif
