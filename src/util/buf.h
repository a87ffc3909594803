/* Growable byte buffer. Always NUL-terminated after a successful append, so data can be used
 * as a C string when it holds text. */
#ifndef UTIL_BUF_H
#define UTIL_BUF_H

#include <stddef.h>

struct buf {
    char *data; // owned; NULL until the first append
    size_t len; // bytes used, excluding the terminating NUL
    size_t cap; // bytes allocated
};

/* buf_init zeroes; buf_deinit frees (a no-op on a zeroed buf). */
void buf_init(struct buf *b);
void buf_deinit(struct buf *b);

/* Ensures room for extra more bytes (plus the NUL). ERR_NOMEM or ERR_LIMIT on overflow. */
int buf_reserve(struct buf *b, size_t extra);

/* Append bytes / a C string / one byte / formatted text. Return ERR_OK or ERR_NOMEM; on
 * failure the buffer is unchanged. */
int buf_append(struct buf *b, const void *data, size_t len);
int buf_append_cstr(struct buf *b, const char *s);
int buf_append_byte(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Empties the buffer, keeping its storage. */
void buf_clear(struct buf *b);

/* Hands the bytes to the caller (who frees them with mem_free()) and re-zeroes the buffer.
 * Returns NULL if nothing was ever appended. */
char *buf_steal(struct buf *b);

#endif
