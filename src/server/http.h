/* The HTTP front end on libmicrohttpd: routing, CORS, API-key checks, the body limit, JSON
 * body parsing, streaming responses and the access log. Connections live on an event loop
 * (the gate's epoll thread until their head arrives, then libmicrohttpd's): an idle or slow
 * connection costs memory, not a thread. Handlers run on worker threads while their
 * connection is suspended. See docs/SERVING.md, "HTTP threading". */
#ifndef SERVER_HTTP_H
#define SERVER_HTTP_H

#include "api/api.h"
#include "server/config.h"
#include "util/err.h"

#define HTTP_BODY_MAX   (64u * 1024u * 1024u) // bytes; larger bodies get 413
#define HTTP_JSON_DEPTH 64                    // nesting limit for request bodies
// libmicrohttpd's memory per connection (request line, headers, buffers); a head larger than
// about half of it is refused with 431. Over 32 KiB the library maps each pool with mmap and
// unmaps it at the close, so memory returns to the system after a wave of connections (a
// malloc'd 32 KiB pool stays with the allocator).
#define HTTP_CONN_POOL_BYTES (36u * 1024u)

struct http_server;

/* Binds config->host:config->port and starts serving. ctx is borrowed and must outlive the
 * server. ERR_IO (bind failed; err says why) or ERR_NOMEM. Caller stops with
 * http_server_stop(). */
int http_server_start(const struct server_config *config, const struct api_ctx *ctx,
                      struct http_server **out, struct errmsg *err);

/* The port actually bound (useful with --port 0 in tests). */
int http_server_port(const struct http_server *s);

/* Stops accepting at once: the listening socket stops listening (new connections are
 * refused); open connections are served on. Idempotent. */
void http_server_quiesce(struct http_server *s);

/* Quiesces, then ends all work: every running or queued request fails with 503
 * (server_shutting_down): whole answers are 503, streams end with an `event: error`; requests
 * that arrive later on open connections are answered 503 too. */
void http_server_begin_shutdown(struct http_server *s);

/* Waits until no handler runs and no answer is being sent, at most timeout_ms. True when
 * that happened. */
bool http_server_wait_idle(struct http_server *s, int timeout_ms);

/* Stops accepting, closes connections, waits for their threads, frees. NULL is a no-op. */
void http_server_stop(struct http_server *s);

/* Checks that body is at most max_depth deep in arrays/objects (strings are skipped, escapes
 * honoured). Cheap pre-check so a hostile body cannot drive the parser deep. */
bool http_json_depth_ok(const char *body, size_t len, int max_depth);

/* Parses a request body as a JSON object. ERR_OK with *out (caller decrefs), or ERR_FORMAT
 * with err saying where parsing failed (line, column, reason), or ERR_LIMIT (too deep). */
int http_parse_json_body(const char *body, size_t len, json_t **out, struct errmsg *err);

#endif
