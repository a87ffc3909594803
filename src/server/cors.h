/* The CORS policy llama-server applies (--cors-origins, --cors-methods, --cors-headers,
 * --cors-credentials), as pure functions of the configuration and the request's Origin, so
 * the HTTP glue only copies their answers into headers. Follows the Fetch standard's CORS
 * protocol (https://fetch.spec.whatwg.org/#http-cors-protocol). */
#ifndef SERVER_CORS_H
#define SERVER_CORS_H

#include <stdbool.h>
#include <stddef.h>

/* The Access-Control-Allow-Origin value for a request with this Origin (NULL: none sent):
 * - origins "*": the request's Origin when there is one and credentials are allowed
 *   (browsers refuse "*" with credentials), else "*";
 * - "localhost": the Origin when its host is localhost, 127.0.0.1 or ::1 (any scheme or port),
 *   else none;
 * - a comma-separated list of origins: the Origin when it is one of them, else none.
 * Writes out (cap bytes) and returns true when a header is to be sent; false otherwise.
 * Cannot fail; an Origin longer than cap - 1 bytes is not reflected. */
bool cors_allow_origin(const char *origins, bool is_credentials, const char *origin, char *out,
                       size_t cap);

/* True when origin's host (scheme://[userinfo@]host[:port]…) is a loopback name: localhost,
 * 127.0.0.1 or [::1]. */
bool cors_origin_is_localhost(const char *origin);

#endif
