/* GGUF file change detection (see gguf_watch.h). */
#include "engine/gguf/gguf_watch.h"

#include "util/checked.h"
#include "util/mem.h"
#include "util/thread.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK_BYTES (64 * 1024)

/* fd, spans and n_spans are immutable after new; the rest is guarded by mu. */
struct gguf_watch {
    int fd;
    struct gguf_watch_span *spans; // n_spans
    int64_t n_spans;
    struct mutex mu;
    uint8_t *chunk;       // CHUNK_BYTES of read buffer
    struct stat st;       // size and times when last seen unchanged
    uint64_t fingerprint; // of the spans at load
    bool is_changed;
};

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Reads the spans back from the file. ERR_OK, or ERR_IO when a span is no longer there. */
static int fingerprint(struct gguf_watch *w, uint64_t *out)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < w->n_spans; i++) {
        uint64_t off = w->spans[i].off, left = w->spans[i].len;
        while (left > 0) {
            size_t n = left < CHUNK_BYTES ? (size_t)left : CHUNK_BYTES;
            if (off > (uint64_t)INT64_MAX) return ERR_IO;
            ssize_t got = pread(w->fd, w->chunk, n, (off_t)off);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) return ERR_IO; // shorter than at load
            h = fnv1a(h, w->chunk, (size_t)got);
            off += (uint64_t)got;
            left -= (uint64_t)got;
        }
    }
    *out = h;
    return ERR_OK;
}

int gguf_watch_new(int fd, const struct gguf_watch_span *spans, int64_t n_spans,
                   struct gguf_watch **out)
{
    size_t bytes;
    struct gguf_watch *w = mem_calloc(1, sizeof *w);
    if (!w || n_spans < 1 || !size_mul((size_t)n_spans, sizeof *spans, &bytes)) goto out_close;
    w->fd = fd;
    w->n_spans = n_spans;
    w->spans = mem_alloc(bytes);
    w->chunk = mem_alloc(CHUNK_BYTES);
    if (!w->spans || !w->chunk || mutex_init(&w->mu) != ERR_OK) goto out_free;
    memcpy(w->spans, spans, bytes);
    if (fstat(fd, &w->st) != 0 || fingerprint(w, &w->fingerprint) != ERR_OK) {
        mutex_deinit(&w->mu);
        mem_free(w->chunk);
        mem_free(w->spans);
        mem_free(w);
        close(fd);
        return ERR_IO;
    }
    *out = w;
    return ERR_OK;
out_free:
    mem_free(w->chunk);
    mem_free(w->spans);
out_close:
    mem_free(w);
    close(fd);
    return ERR_NOMEM;
}

void gguf_watch_free(struct gguf_watch *w)
{
    if (!w) return;
    close(w->fd);
    mutex_deinit(&w->mu);
    mem_free(w->chunk);
    mem_free(w->spans);
    mem_free(w);
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Called with mu held. */
static bool check_locked(struct gguf_watch *w)
{
    struct stat st;
    if (fstat(w->fd, &st) != 0) return false; // cannot tell: keep serving what is mapped
    if (st.st_size != w->st.st_size) return true;
    if (same_time(&st.st_mtim, &w->st.st_mtim) && same_time(&st.st_ctim, &w->st.st_ctim))
        return false;
    uint64_t h;
    if (fingerprint(w, &h) != ERR_OK || h != w->fingerprint) return true;
    w->st = st; // touched, not rewritten: no need to read it again
    return false;
}

bool gguf_watch_is_changed(struct gguf_watch *w)
{
    mutex_lock(&w->mu);
    if (!w->is_changed) w->is_changed = check_locked(w);
    bool is_changed = w->is_changed;
    mutex_unlock(&w->mu);
    return is_changed;
}
