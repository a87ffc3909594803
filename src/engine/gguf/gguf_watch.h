/* Whether the file behind an open GGUF still holds what was loaded. The reader maps the file
 * and the engine reads tensor data through that mapping at every step, so a rewrite in place
 * (cp over it, a download of a newer revision into the same name, rsync --inplace) would feed
 * the model a mix of old and new bytes. The watch keeps the file's descriptor (so it looks at
 * the mapped inode, not whatever the path names now: a rename over the path is harmless),
 * and compares size, times and a fingerprint of the header, the tensor index and the first
 * bytes of every tensor with what they were at load. Not a checksum of the whole file: a
 * rewrite that keeps all of those and changes only the middle of a tensor goes unnoticed. */
#ifndef ENGINE_GGUF_WATCH_H
#define ENGINE_GGUF_WATCH_H

#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

/* A byte range of the file that goes into the fingerprint. */
struct gguf_watch_span {
    uint64_t off, len;
};

struct gguf_watch;

/* Starts watching the file open as fd over spans (copied; n_spans >= 1). Takes ownership of
 * fd, also on failure. ERR_OK, ERR_NOMEM, ERR_IO (the file cannot be read back). Caller frees
 * with gguf_watch_free(). */
int gguf_watch_new(int fd, const struct gguf_watch_span *spans, int64_t n_spans,
                   struct gguf_watch **out);

/* Closes the descriptor and frees. NULL is a no-op. */
void gguf_watch_free(struct gguf_watch *w);

/* True once the file was seen changed: another size, or other times together with another
 * fingerprint (times alone, as after touch or chmod, are not a change). Sticky. One fstat
 * per call; the fingerprint is read again only when the times moved. Thread-safe. */
bool gguf_watch_is_changed(struct gguf_watch *w);

#endif
