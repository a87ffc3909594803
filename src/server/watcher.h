/* Watches the connections the HTTP library holds, from one thread:
 * - while a request is being worked on (its handler runs or its answer streams), polls the
 *   socket for the peer's close, which the library does not see while the connection is
 *   suspended, and abandons the request's work (client_watch): a queued request leaves its
 *   queue, a running one stops at its next step;
 * - between requests, enforces deadlines the library's idle timeout (restarted by every
 *   byte) cannot: a request head must be complete within the header timeout of its request
 *   line, a body must arrive at a minimum average rate, and an idle keep-alive connection
 *   must start its next request within the idle timeout. A connection past a deadline is
 *   shut down (the library then sees its end and closes it).
 * Thread-safe: the HTTP library's thread and the handler threads call in. */
#ifndef SERVER_WATCHER_H
#define SERVER_WATCHER_H

#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

struct client_watch;
struct watcher;
struct watched; // one connection

struct watcher_config {
    int header_timeout_ms;    // request line to the end of the head
    int idle_timeout_ms;      // end of one request to the next request line
    int min_body_rate;        // bytes per second, averaged, after a grace of header_timeout_ms
    const char *stop_message; // the 503 message work fails with at shutdown (static)
};

/* Starts the watcher's thread. ERR_OK or ERR_NOMEM. Caller frees with watcher_free(). */
int watcher_new(const struct watcher_config *c, struct watcher **out);

/* Stops the thread and frees. Every connection must have been removed. NULL is a no-op. */
void watcher_free(struct watcher *w);

/* A connection opened on socket fd (its head deadline starts now). NULL when out of memory
 * (the connection is then not watched). Removed with watcher_remove(). */
struct watched *watcher_add(struct watcher *w, int fd);

/* The connection closed; c is freed. NULL is a no-op. */
void watcher_remove(struct watcher *w, struct watched *c);

/* Progress of the current request: its request line arrived; its head is complete (the body
 * begins); n more body bytes arrived. NULL c is a no-op. */
void watcher_request_line(struct watcher *w, struct watched *c);
void watcher_body_begin(struct watcher *w, struct watched *c);
void watcher_body_bytes(struct watcher *w, struct watched *c, uint64_t n);

/* The request's handler starts: from now until watcher_done() the socket is polled for the
 * peer's close, which abandons watch (borrowed until watcher_done; status 0). When the
 * server is shutting down, watch is abandoned at once with 503. NULL c is a no-op. */
void watcher_busy(struct watcher *w, struct watched *c, struct client_watch *watch);

/* The request ended (its answer was sent or the connection failed): no more polling; the
 * keep-alive deadline starts. NULL c is a no-op. */
void watcher_done(struct watcher *w, struct watched *c);

/* Shutdown: every busy connection's work fails with 503 (stop_message), later ones at
 * watcher_busy; idle connections are shut down. */
void watcher_shutdown(struct watcher *w);

/* Waits until no connection is busy, at most timeout_ms. True when none is. */
bool watcher_wait_idle(struct watcher *w, int timeout_ms);

#endif
