/* NDJSON stream adapter. */
#include "api/ollama/ndjson.h"

#include "api/ollama/common.h"
#include "text/json_text.h"
#include "util/err.h"
#include "util/mem.h"

#include <string.h>

#define NDJSON_WAIT_MS 1000 // one wait on the producer; it is asked again until it answers

struct ndjson_stream {
    sse_produce_fn produce;
    sse_free_fn ctx_free;
    void *ctx;
    struct buf pending; // lines not yet handed to the HTTP layer
    size_t offset;      // bytes of pending already handed over
    bool is_ended;
};

int ndjson_append(struct buf *out, json_t *j)
{
    char *text = j ? json_text_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text) return ERR_NOMEM;
    int rc = buf_append_cstr(out, text);
    if (rc == ERR_OK) rc = buf_append_byte(out, '\n');
    ollama_dumps_free(text);
    return rc;
}

static long ndjson_read(void *cls, char *out, size_t max)
{
    struct ndjson_stream *s = cls;
    while (s->offset >= s->pending.len) {
        if (s->is_ended) return -1;
        buf_clear(&s->pending);
        s->offset = 0;
        // A step may produce nothing visible (text held back as a possible stop string):
        // ask again; the reader blocks here, which the HTTP pump expects.
        s->is_ended = s->produce(s->ctx, &s->pending, NDJSON_WAIT_MS) == SSE_END;
    }
    size_t n = s->pending.len - s->offset;
    if (n > max) n = max;
    memcpy(out, s->pending.data + s->offset, n);
    s->offset += n;
    return (long)n;
}

static void ndjson_free(void *cls)
{
    struct ndjson_stream *s = cls;
    s->ctx_free(s->ctx);
    buf_deinit(&s->pending);
    mem_free(s);
}

void ndjson_respond(struct api_response *resp, sse_produce_fn produce, sse_free_fn ctx_free,
                    void *ctx, const char *first)
{
    struct ndjson_stream *s = mem_calloc(1, sizeof *s);
    if (!s || (first && buf_append_cstr(&s->pending, first) != ERR_OK)) {
        if (s) buf_deinit(&s->pending);
        mem_free(s);
        ctx_free(ctx);
        ollama_error(resp, 500, "out of memory");
        return;
    }
    s->produce = produce;
    s->ctx_free = ctx_free;
    s->ctx = ctx;
    resp->status = 200;
    resp->content_type = "application/x-ndjson";
    resp->stream = (struct api_stream){.read = ndjson_read, .free = ndjson_free, .cls = s};
}
