/* Strict HTTP/1.1 request framing (RFC 9112), checked on a raw head before the HTTP library
 * parses it, so an ambiguous request is refused with one clean 400 instead of whatever the
 * library would make of it (libmicrohttpd 0.9.75 answers a negative or overflowing
 * Content-Length with its status line and headers twice, waits out the idle timeout on a
 * chunk size of 2^64-1, and accepts Content-Length together with Transfer-Encoding, which
 * lets a request be smuggled past a proxy that reads the other one). */
#ifndef SERVER_FRAMING_H
#define SERVER_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Checks the framing of a complete request head (head_len bytes, ending with the blank line)
 * and of any chunk-size lines among the `extra` bytes already received after it. True when
 * acceptable; false with reason (static text) when the request must be refused with 400. */
bool framing_head_ok(const char *head, size_t head_len, const char *extra, size_t extra_len,
                     uint64_t body_max, const char **reason);

#endif
