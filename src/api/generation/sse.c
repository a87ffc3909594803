/* SSE stream adapter. */
#include "api/generation/sse.h"

#include "api/errors.h"
#include "text/json_text.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

#define SSE_KEEPALIVE_MS 10000

struct sse_stream {
    sse_produce_fn produce;
    sse_free_fn ctx_free;
    void *ctx;
    struct buf pending; // events not yet handed to the HTTP layer
    size_t offset;      // bytes of pending already handed over
    bool is_ended;
};

/* Fills pending from the producer. A step may produce nothing visible (text held back as a
 * possible stop string, part of a UTF-8 character), so the producer is asked again until it
 * gives something, ends, or the stream has been quiet for the keep-alive interval: only then
 * is a comment line sent, so clients see keep-alives on long silences, not between tokens. */
static void fill(struct sse_stream *s)
{
    const double start = clock_now_ms();
    for (;;) {
        const int left = SSE_KEEPALIVE_MS - (int)(clock_now_ms() - start);
        s->is_ended = s->produce(s->ctx, &s->pending, left > 1 ? left : 1) == SSE_END;
        if (s->pending.len > 0 || s->is_ended) return;
        if (clock_now_ms() - start >= SSE_KEEPALIVE_MS) {
            buf_append_cstr(&s->pending, ": keep-alive\n\n");
            return;
        }
    }
}

static long sse_read(void *cls, char *out, size_t max)
{
    struct sse_stream *s = cls;
    while (s->offset >= s->pending.len) {
        if (s->is_ended) return -1;
        buf_clear(&s->pending);
        s->offset = 0;
        fill(s);
    }
    size_t n = s->pending.len - s->offset;
    if (n > max) n = max;
    memcpy(out, s->pending.data + s->offset, n);
    s->offset += n;
    return (long)n;
}

static void sse_free(void *cls)
{
    struct sse_stream *s = cls;
    s->ctx_free(s->ctx);
    buf_deinit(&s->pending);
    mem_free(s);
}

void sse_respond(struct api_response *resp, sse_produce_fn produce, sse_free_fn ctx_free, void *ctx,
                 const char *first)
{
    struct sse_stream *s = mem_calloc(1, sizeof *s);
    if (!s || (first && buf_append_cstr(&s->pending, first) != ERR_OK)) {
        mem_free(s);
        ctx_free(ctx);
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    s->produce = produce;
    s->ctx_free = ctx_free;
    s->ctx = ctx;
    resp->status = 200;
    resp->content_type = "text/event-stream";
    resp->stream = (struct api_stream){.read = sse_read, .free = sse_free, .cls = s};
}

int sse_append_json(struct buf *out, const char *event, json_t *j)
{
    char *text = j ? json_text_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text) return ERR_NOMEM;
    int rc = ERR_OK;
    if (event) rc = buf_printf(out, "event: %s\n", event);
    if (rc == ERR_OK) rc = buf_printf(out, "data: %s\n\n", text);
    free(text);
    return rc;
}
