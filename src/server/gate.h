/* The connection gate: owns the listening sockets and every new connection until its first
 * request head has fully arrived. One thread and one epoll set hold the connections that have
 * sent nothing yet or whose head is still trickling in, so they cost a descriptor and a few
 * bytes, never a thread or an HTTP parser. It
 * - refuses over the global or per-address connection limit out loud: it reads the head when
 *   it comes quickly and answers 503 with Retry-After and an OpenAI error, else closes;
 * - closes at once a connection whose first byte cannot start an HTTP request (a TLS
 *   ClientHello, binary noise), and one whose head is not complete within the header timeout;
 * - answers a head with ambiguous framing (a bad or negative Content-Length, two different
 *   ones, Content-Length with Transfer-Encoding, a chunk size past the body limit) with one
 *   400 and closes, before the HTTP library sees it;
 * - hands every other connection, its head still unread in the socket (only peeked), to the
 *   HTTP library through the handoff callback.
 * Thread-safe where stated. */
#ifndef SERVER_GATE_H
#define SERVER_GATE_H

#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct gate;

/* Takes ownership of fd (a non-blocking connected socket whose head is complete); called on
 * the gate's thread. Returns false when the connection could not be taken (fd is closed by
 * then); the gate then drops it from its counts. */
typedef bool (*gate_handoff_fn)(void *ctx, int fd, const struct sockaddr *addr, socklen_t addr_len);

struct gate_config {
    const char *host;      // addresses to bind, comma-separated (IPv4, IPv6, a hosts name)
    int port;              // 0: any free port
    int max_connections;   // open connections in all (gate + HTTP library); 1 or more
    int max_per_address;   // open connections from one client address; 0: no limit
    int header_timeout_ms; // from accept to a complete request head
    uint64_t body_max;     // a declared body or chunk larger than this is refused here
    gate_handoff_fn handoff;
    void *handoff_ctx; // borrowed
};

/* Binds and listens on every address of c->host (one port for all; a UNIX socket path is
 * refused) and starts the gate's thread; *out is written before the thread starts (a
 * handoff may run at once). ERR_INVALID (a bad address list), ERR_IO (err says why) or
 * ERR_NOMEM, with *out NULL. Caller
 * stops with gate_stop() and frees with gate_free(). */
int gate_start(const struct gate_config *c, struct gate **out, struct errmsg *err);

/* The port bound. */
int gate_port(const struct gate *g);

/* Closes the listening sockets now: new connections are refused by the kernel. Connections
 * already in the gate are closed too. Thread-safe; idempotent. */
void gate_close_listener(struct gate *g);

/* A connection handed over earlier has closed: its counts drop. addr is the client address
 * the handoff got. Thread-safe (called from the HTTP library's thread). */
void gate_connection_closed(struct gate *g, const struct sockaddr *addr);

/* Open connections, gate and handed over (for tests and logs). Thread-safe. */
int gate_open_count(struct gate *g);

/* Closes everything the gate still holds and stops its thread: no handoff happens after it
 * returns. gate_connection_closed still works. NULL is a no-op. */
void gate_stop(struct gate *g);

/* Stops (if still running) and frees. NULL is a no-op. */
void gate_free(struct gate *g);

#endif
