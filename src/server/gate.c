/* The connection gate: listening socket, limits, head deadline and framing checks, handoff. */
#define _GNU_SOURCE // accept4, SOCK_NONBLOCK
#include "server/gate.h"

#include "server/framing.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define GATE_PEEK_MAX     16384 // bytes of a head looked at; a longer one goes on unchecked
#define GATE_DRAIN_MS     2000  // how long an answered connection's leftovers are read
#define GATE_REFUSED_MAX  256   // refusals being answered at once; more are closed at once
#define GATE_REFUSED_MS   1000  // a refused connection's head must come this quickly
#define GATE_SWEEP_MS     50    // deadline checks at most this often
#define GATE_ADDR_BUCKETS 1024
#define GATE_LISTEN_MAX   16 // addresses in one --host list

enum pending_state {
    PENDING_HEAD = 0,    // waiting for the complete head (counted against the limits)
    PENDING_REFUSED = 1, // over a limit: waiting for the head to answer 503 (not counted)
    PENDING_DRAIN = 2,   // answered; reading what the client still sends, then close
};

/* A client address as the limits count it: IPv6 bytes, an IPv4 address in its mapped form
 * (::ffff:a.b.c.d), so a client reaching a dual-stack listener and an IPv4 one is one client. */
struct addr_key {
    unsigned char b[16];
};

struct pending {
    int fd;
    enum pending_state state;
    bool is_counted; // holds a place in the limits
    double deadline_ms;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct addr_key key;
    struct pending *prev, *next;
};

struct addr_count {
    struct addr_key key;
    int n;
    struct addr_count *next;
};

struct gate {
    struct gate_config c;
    int listen_fds[GATE_LISTEN_MAX]; // one per --host address; their epoll tags point here
    int n_listen;
    int epoll_fd;
    int wake_fd; // eventfd: stop or close the listener
    int port;
    struct thread thread;
    atomic_bool is_stopping;
    atomic_bool is_listener_closing;
    bool is_listener_closed;       // gate thread only
    bool is_stopped;               // the thread was joined (the stopping caller's)
    double listen_paused_until_ms; // out of descriptors: accepting pauses (gate thread only)

    struct mutex mu; // guards the counts below
    int n_open;
    struct addr_count *buckets[GATE_ADDR_BUCKETS];

    struct pending *pending; // list, gate thread only
    int n_refused;           // PENDING_REFUSED and their drains, gate thread only
    double last_sweep_ms;
};

static const char REFUSE_503[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                 "Content-Type: application/json\r\n"
                                 "Retry-After: 1\r\n"
                                 "Access-Control-Allow-Origin: *\r\n"
                                 "Connection: close\r\n";
static const char REFUSE_503_BODY[] =
    "{\"error\":{\"message\":\"Too many open connections (from this address or in all); retry "
    "shortly.\",\"type\":\"unavailable_error\",\"param\":null,\"code\":\"too_many_connections\"}}";
static const char BAD_400[] = "HTTP/1.1 400 Bad Request\r\n"
                              "Content-Type: application/json\r\n"
                              "Access-Control-Allow-Origin: *\r\n"
                              "Connection: close\r\n";

/* ---- counts ---- */

/* The key of an IPv4 or IPv6 socket address: false for another family. */
static bool addr_key_of(const struct sockaddr *sa, struct addr_key *k)
{
    memset(k, 0, sizeof *k);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        k->b[10] = k->b[11] = 0xff;
        memcpy(k->b + 12, &in->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        memcpy(k->b, &in6->sin6_addr, 16);
        return true;
    }
    return false;
}

static bool addr_key_eq(const struct addr_key *a, const struct addr_key *b)
{
    return memcmp(a->b, b->b, sizeof a->b) == 0;
}

static struct addr_count **bucket_of(struct gate *g, const struct addr_key *k)
{
    uint32_t h = 2166136261u; // FNV-1a
    for (size_t i = 0; i < sizeof k->b; i++)
        h = (h ^ k->b[i]) * 16777619u;
    return &g->buckets[h % GATE_ADDR_BUCKETS];
}

/* Takes a place for the address within the limits: true, or false when over one. */
static bool count_take(struct gate *g, const struct addr_key *k)
{
    bool is_ok = false;
    mutex_lock(&g->mu);
    struct addr_count **b = bucket_of(g, k), *e = *b;
    while (e && !addr_key_eq(&e->key, k))
        e = e->next;
    bool is_per_ok = g->c.max_per_address <= 0 || !e || e->n < g->c.max_per_address;
    if (g->n_open < g->c.max_connections && is_per_ok) {
        if (!e && (e = mem_calloc(1, sizeof *e))) {
            e->key = *k;
            e->next = *b;
            *b = e;
        }
        if (e) {
            e->n++;
            g->n_open++;
            is_ok = true;
        }
    }
    mutex_unlock(&g->mu);
    return is_ok;
}

static void count_drop(struct gate *g, const struct addr_key *k)
{
    mutex_lock(&g->mu);
    struct addr_count **link = bucket_of(g, k);
    while (*link && !addr_key_eq(&(*link)->key, k))
        link = &(*link)->next;
    if (*link) {
        g->n_open--;
        if (--(*link)->n == 0) {
            struct addr_count *gone = *link;
            *link = gone->next;
            mem_free(gone);
        }
    }
    mutex_unlock(&g->mu);
}

void gate_connection_closed(struct gate *g, const struct sockaddr *addr)
{
    struct addr_key k;
    if (addr && addr_key_of(addr, &k)) count_drop(g, &k);
}

int gate_open_count(struct gate *g)
{
    mutex_lock(&g->mu);
    int n = g->n_open;
    mutex_unlock(&g->mu);
    return n;
}

/* Length of the head up to and including its blank line, or 0 when it has not all arrived.
 * Leading empty lines (allowed before a request line) are part of it. */
static size_t head_length(const char *buf, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (buf[i] != '\n') continue;
        if (i == 0) continue;
        if (buf[i + 1] == '\n') return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

/* ---- connections ---- */

static void list_remove(struct gate *g, struct pending *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        g->pending = p->next;
    if (p->next) p->next->prev = p->prev;
}

static void pending_close(struct gate *g, struct pending *p)
{
    list_remove(g, p);
    close(p->fd); // leaves the epoll set with it
    if (p->is_counted) count_drop(g, &p->key);
    if (p->state != PENDING_HEAD) g->n_refused--;
    mem_free(p);
}

/* Sends a short canned answer, stops writing and reads what is left before closing, so the
 * answer is not lost to a reset caused by unread input. */
static void answer_and_drain(struct gate *g, struct pending *p, const char *head, const char *body)
{
    char out[1024];
    int n = snprintf(out, sizeof out, "%sContent-Length: %zu\r\n\r\n%s", head, strlen(body), body);
    if (n > 0)
        (void)!send(p->fd, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1, MSG_NOSIGNAL);
    shutdown(p->fd, SHUT_WR);
    if (p->is_counted) {
        count_drop(g, &p->key);
        p->is_counted = false;
    }
    if (p->state == PENDING_HEAD) g->n_refused++;
    p->state = PENDING_DRAIN;
    p->deadline_ms = clock_now_ms() + GATE_DRAIN_MS;
}

static void answer_bad_framing(struct gate *g, struct pending *p, const char *reason)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"error\":{\"message\":\"Malformed request framing: %s.\",\"type\":"
             "\"invalid_request_error\",\"param\":null,\"code\":\"bad_request\"}}",
             reason);
    answer_and_drain(g, p, BAD_400, body);
}

static void drain(struct gate *g, struct pending *p)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(p->fd, buf, sizeof buf, 0);
        if (n > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        pending_close(g, p);
        return;
    }
}

static void hand_over(struct gate *g, struct pending *p)
{
    list_remove(g, p);
    epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, p->fd, NULL);
    if (!g->c.handoff(g->c.handoff_ctx, p->fd, (const struct sockaddr *)&p->addr, p->addr_len))
        count_drop(g, &p->key);
    mem_free(p);
}

/* New bytes on a connection still in the gate (edge-triggered: every arrival is reported). */
static void on_readable(struct gate *g, struct pending *p, uint32_t events)
{
    if (p->state == PENDING_DRAIN) {
        drain(g, p);
        return;
    }
    static char buf[GATE_PEEK_MAX]; // gate thread only
    ssize_t n = recv(p->fd, buf, sizeof buf, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
        pending_close(g, p);
        return;
    }
    // A request starts with a method (upper-case letters), perhaps after empty lines.
    char first = buf[0];
    if (!(first >= 'A' && first <= 'Z') && first != '\r' && first != '\n') {
        pending_close(g, p);
        return;
    }
    size_t head_len = head_length(buf, (size_t)n);
    if (!head_len && (size_t)n < sizeof buf) {
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) pending_close(g, p); // ended early
        return;
    }
    if (p->state == PENDING_REFUSED) {
        answer_and_drain(g, p, REFUSE_503, REFUSE_503_BODY);
        drain(g, p);
        return;
    }
    const char *reason = NULL;
    if (head_len && !framing_head_ok(buf, head_len, buf + head_len, (size_t)n - head_len,
                                     g->c.body_max, &reason)) {
        answer_bad_framing(g, p, reason);
        drain(g, p);
        return;
    }
    hand_over(g, p); // a head longer than the peek goes on for the HTTP library to refuse
}

/* Stops (or resumes) watching every listener: out of descriptors, the backlogs wait. */
static void listeners_watch(struct gate *g, bool is_on)
{
    for (int i = 0; i < g->n_listen; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &g->listen_fds[i]};
        epoll_ctl(g->epoll_fd, is_on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, g->listen_fds[i], &ev);
    }
}

/* Index of the listener an epoll tag names, or -1. */
static int listener_of(const struct gate *g, const void *tag)
{
    for (int i = 0; i < g->n_listen; i++)
        if (tag == &g->listen_fds[i]) return i;
    return -1;
}

/* Puts an accepted connection in the gate; closes it when it cannot be held. */
static void pending_add(struct gate *g, int fd, const struct sockaddr_storage *addr,
                        socklen_t addr_len)
{
    struct addr_key key;
    if (!addr_key_of((const struct sockaddr *)addr, &key)) {
        close(fd);
        return;
    }
    bool is_counted = count_take(g, &key);
    struct pending *p = NULL;
    if (is_counted || g->n_refused < GATE_REFUSED_MAX) p = mem_calloc(1, sizeof *p);
    if (!p) {
        if (is_counted) count_drop(g, &key);
        close(fd);
        return;
    }
    *p = (struct pending){.fd = fd,
                          .state = is_counted ? PENDING_HEAD : PENDING_REFUSED,
                          .is_counted = is_counted,
                          .addr = *addr,
                          .addr_len = addr_len,
                          .key = key};
    p->deadline_ms = clock_now_ms() + (is_counted ? g->c.header_timeout_ms : GATE_REFUSED_MS);
    if (!is_counted) g->n_refused++;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = p};
    if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        if (!is_counted) g->n_refused--;
        if (is_counted) count_drop(g, &key);
        close(fd);
        mem_free(p);
        return;
    }
    p->next = g->pending;
    if (g->pending) g->pending->prev = p;
    g->pending = p;
}

static void on_accept(struct gate *g, int listen_fd)
{
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd = accept4(listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // Out of descriptors: the backlogs wait (and overflow) until some close.
                listeners_watch(g, false);
                g->listen_paused_until_ms = clock_now_ms() + 100;
                log_warn("out of file descriptors: accepting pauses for 100 ms");
            }
            return;
        }
        pending_add(g, fd, &addr, len);
    }
}

/* Closes what passed its deadline; resumes accepting after a pause. */
static void sweep(struct gate *g)
{
    double now = clock_now_ms();
    if (now - g->last_sweep_ms < GATE_SWEEP_MS) return;
    g->last_sweep_ms = now;
    for (struct pending *p = g->pending, *next; p; p = next) {
        next = p->next;
        if (now >= p->deadline_ms) pending_close(g, p);
    }
    if (g->listen_paused_until_ms > 0 && now >= g->listen_paused_until_ms &&
        !g->is_listener_closed) {
        listeners_watch(g, true);
        g->listen_paused_until_ms = 0;
    }
}

static void close_everything(struct gate *g)
{
    if (!g->is_listener_closed) {
        for (int i = 0; i < g->n_listen; i++)
            close(g->listen_fds[i]);
        g->is_listener_closed = true;
    }
    while (g->pending)
        pending_close(g, g->pending);
}

static void *gate_main(void *arg)
{
    struct gate *g = arg;
    struct epoll_event events[256];
    while (!atomic_load(&g->is_stopping)) {
        int n = epoll_wait(g->epoll_fd, events, 256, GATE_SWEEP_MS);
        for (int i = 0; i < n; i++) {
            void *tag = events[i].data.ptr;
            int li = listener_of(g, tag);
            if (li >= 0) {
                if (!atomic_load(&g->is_listener_closing)) on_accept(g, g->listen_fds[li]);
            } else if (tag == &g->wake_fd) {
                uint64_t v;
                (void)!read(g->wake_fd, &v, sizeof v);
            } else {
                on_readable(g, tag, events[i].events);
            }
        }
        // Ended before the loop looks at the others, so no event names a freed connection.
        if (atomic_load(&g->is_listener_closing) && !g->is_listener_closed) {
            close_everything(g);
            continue;
        }
        sweep(g);
    }
    close_everything(g);
    return NULL;
}

/* Binds and listens on one address (a numeric IPv4 or IPv6 address, optionally in brackets,
 * or a name /etc/hosts resolves) at port; is_v6_only keeps "::" off IPv4 when other addresses
 * are listed, as llama-server does. */
static int listen_one(const char *host, int port, bool is_v6_only, int *fd_out, int *port_out,
                      struct errmsg *err)
{
    char name[256];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof name) return errmsg_set(err, ERR_INVALID, "--host: empty address");
    memcpy(name, host, n);
    name[n] = 0;
    if (n > 5 && strcmp(name + n - 5, ".sock") == 0)
        return errmsg_set(err, ERR_INVALID,
                          "--host: '%s': UNIX socket paths are not supported; give IP addresses",
                          name);
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(name, service, &hints, &res);
    if (gai != 0)
        return errmsg_set(err, ERR_INVALID, "--host: '%s' is not an address (%s)", name,
                          gai_strerror(gai));
    int e = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) { // the first that binds, as httplib
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6 && is_v6_only)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        struct sockaddr_storage bound;
        socklen_t len = sizeof bound;
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0 ||
            getsockname(fd, (struct sockaddr *)&bound, &len) != 0) {
            e = errno;
            close(fd);
            continue;
        }
        freeaddrinfo(res);
        *fd_out = fd;
        *port_out = bound.ss_family == AF_INET6
                        ? ntohs(((struct sockaddr_in6 *)(void *)&bound)->sin6_port)
                        : ntohs(((struct sockaddr_in *)(void *)&bound)->sin_port);
        return ERR_OK;
    }
    freeaddrinfo(res);
    return errmsg_set(err, ERR_IO, "cannot listen on %s:%d: %s", name, port,
                      e ? strerror(e) : "no IPv4 or IPv6 address");
}

/* Binds every address of the comma-separated list on one port: with port 0 the first picks a
 * free port and the others take the same. Any failure closes what was bound. */
static int listen_all(struct gate *g, const struct gate_config *c, struct errmsg *err)
{
    int n_hosts = 1;
    for (const char *q = c->host; *q; q++)
        n_hosts += *q == ',';
    char item[256];
    int port = c->port, rc = ERR_OK;
    for (const char *q = c->host; rc == ERR_OK && *q;) {
        const char *end = strchr(q, ',');
        size_t len = end ? (size_t)(end - q) : strlen(q);
        const char *next = end ? end + 1 : q + len;
        while (len && (*q == ' ' || *q == '\t'))
            q++, len--;
        while (len && (q[len - 1] == ' ' || q[len - 1] == '\t'))
            len--;
        if (len >= sizeof item) {
            rc = errmsg_set(err, ERR_INVALID, "--host: an address is too long");
        } else if (len > 0 && g->n_listen == GATE_LISTEN_MAX) {
            rc = errmsg_set(err, ERR_INVALID, "--host: more than %d addresses", GATE_LISTEN_MAX);
        } else if (len > 0) {
            memcpy(item, q, len);
            item[len] = 0;
            int fd = -1;
            rc = listen_one(item, port, n_hosts > 1, &fd, &port, err);
            if (rc == ERR_OK) g->listen_fds[g->n_listen++] = fd;
        }
        q = next;
    }
    if (rc == ERR_OK && g->n_listen == 0)
        rc = errmsg_set(err, ERR_INVALID, "--host requires at least one address");
    if (rc != ERR_OK) {
        for (int i = 0; i < g->n_listen; i++)
            close(g->listen_fds[i]);
        g->n_listen = 0;
        return rc;
    }
    g->port = port;
    return ERR_OK;
}

int gate_start(const struct gate_config *c, struct gate **out, struct errmsg *err)
{
    *out = NULL;
    struct gate *g = mem_calloc(1, sizeof *g);
    if (!g) return ERR_NOMEM;
    g->c = *c;
    g->epoll_fd = g->wake_fd = -1;
    atomic_init(&g->is_stopping, false);
    atomic_init(&g->is_listener_closing, false);
    int rc = listen_all(g, c, err);
    if (rc != ERR_OK) {
        mem_free(g);
        return rc;
    }
    g->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    g->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &g->wake_fd};
    bool is_ok = g->epoll_fd >= 0 && g->wake_fd >= 0 &&
                 epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->wake_fd, &wev) == 0;
    for (int i = 0; is_ok && i < g->n_listen; i++) {
        struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &g->listen_fds[i]};
        is_ok = epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->listen_fds[i], &lev) == 0;
    }
    if (!is_ok || mutex_init(&g->mu) != ERR_OK) {
        rc = errmsg_set(err, ERR_IO, "epoll: %s", strerror(errno));
    } else {
        // Stored before the thread runs: a connection it hands over at once may reach
        // gate_connection_closed through the caller's copy of the pointer.
        *out = g;
        if (thread_start(&g->thread, gate_main, g) != ERR_OK) {
            mutex_deinit(&g->mu);
            rc = errmsg_set(err, ERR_NOMEM, "cannot start the connection thread");
        }
    }
    if (rc != ERR_OK) {
        *out = NULL;
        if (g->wake_fd >= 0) close(g->wake_fd);
        if (g->epoll_fd >= 0) close(g->epoll_fd);
        for (int i = 0; i < g->n_listen; i++)
            close(g->listen_fds[i]);
        mem_free(g);
        return rc;
    }
    return ERR_OK;
}

int gate_port(const struct gate *g)
{
    return g->port;
}

static void wake(struct gate *g)
{
    uint64_t one = 1;
    (void)!write(g->wake_fd, &one, sizeof one);
}

void gate_close_listener(struct gate *g)
{
    if (atomic_exchange(&g->is_listener_closing, true)) return;
    // Stops listening now (the kernel refuses new connections and resets the backlog); the
    // gate's thread closes the descriptor, which it may be polling.
    for (int i = 0; i < g->n_listen; i++)
        shutdown(g->listen_fds[i], SHUT_RDWR);
    wake(g);
}

void gate_stop(struct gate *g)
{
    if (!g || g->is_stopped) return;
    atomic_store(&g->is_stopping, true);
    wake(g);
    thread_join(&g->thread);
    g->is_stopped = true;
}

void gate_free(struct gate *g)
{
    if (!g) return;
    gate_stop(g);
    close(g->wake_fd);
    close(g->epoll_fd);
    for (int i = 0; i < GATE_ADDR_BUCKETS; i++) {
        for (struct addr_count *e = g->buckets[i], *next; e; e = next) {
            next = e->next;
            mem_free(e);
        }
    }
    mutex_deinit(&g->mu);
    mem_free(g);
}
