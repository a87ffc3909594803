/* The work one HTTP request started, so the server can end it when nobody waits for it any
 * more: the client closed its connection, or the server is shutting down. The HTTP layer
 * creates a watch per request and binds it to the thread that runs the handler; handlers
 * report every request they submit (client_watch_track), without knowing about connections.
 * Thread-safe: the HTTP layer may abandon a watch from another thread while its handler
 * runs. */
#ifndef API_CLIENT_WATCH_H
#define API_CLIENT_WATCH_H

#include "util/err.h"

#include <stdbool.h>

struct model;
struct request;
struct client_watch;

/* ERR_OK with *out, or ERR_NOMEM. Caller frees with client_watch_free(). */
int client_watch_new(struct client_watch **out);

/* Drops the references the watch holds. NULL is a no-op. The watch must not be bound to a
 * thread any more. */
void client_watch_free(struct client_watch *w);

/* Binds w (borrowed; NULL unbinds) to the calling thread: requests this thread submits are
 * tracked by it until the next bind. */
void client_watch_bind(struct client_watch *w);

/* Records that the calling thread submitted r to m (admitted: running or queued); retains
 * both. When the thread's watch was already abandoned, r is abandoned at once. No watch
 * bound, or out of memory: r is simply not tracked. */
void client_watch_track(struct model *m, struct request *r);

/* Ends every tracked request, and any tracked later: status 0 cancels them (the client is
 * gone: a queued one leaves its queue, a running one stops at its next step); a status >= 400
 * fails them with that status and message (their readers wake at once with it). The first
 * call decides; later calls are ignored. */
void client_watch_abandon(struct client_watch *w, int status, const char *msg);

/* True once client_watch_abandon was called on the calling thread's watch. */
bool client_watch_is_abandoned(void);

#endif
