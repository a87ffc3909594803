/* Connection watcher: peer-close polling for busy connections, deadlines for the others. */
#define _GNU_SOURCE // POLLRDHUP: the peer's close, told apart from readable bytes
#include "server/watcher.h"

#include "api/client_watch.h"
#include "util/clock.h"
#include "util/mem.h"
#include "util/thread.h"

#include <poll.h>
#include <sys/socket.h>

#define WATCH_POLL_MS  20  // how often busy sockets are checked for the peer's close
#define WATCH_SWEEP_MS 100 // how often deadlines are checked

enum phase {
    PHASE_HEAD = 0, // waiting for the request head to complete
    PHASE_BODY = 1, // receiving the body
    PHASE_BUSY = 2, // handler running or answer being sent
    PHASE_IDLE = 3, // between requests (keep-alive)
};

/* Guarded by the watcher's mutex. */
struct watched {
    int fd;
    enum phase phase;
    double deadline_ms;   // PHASE_HEAD, PHASE_IDLE
    double body_start_ms; // PHASE_BODY
    uint64_t body_bytes;
    struct client_watch *watch; // PHASE_BUSY: borrowed
    uint64_t busy_ticket;       // PHASE_BUSY: which busy period, unique in the watcher
    bool is_gone;               // the peer closed while busy; its work was abandoned
    bool is_shut;               // shut down for a deadline
    struct watched *prev, *next;
};

struct watcher {
    struct watcher_config c;
    struct mutex mu;
    struct cond cv_idle; // signalled when the last busy connection is done
    struct watched *head;
    int n_busy;
    uint64_t next_ticket; // busy periods numbered from 1, never reused
    bool is_stopping;
    bool is_shutting_down;
    double last_sweep_ms;
    struct thread thread;
};

struct watched *watcher_add(struct watcher *w, int fd)
{
    struct watched *c = mem_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->phase = PHASE_HEAD;
    c->deadline_ms = clock_now_ms() + w->c.header_timeout_ms;
    mutex_lock(&w->mu);
    c->next = w->head;
    if (w->head) w->head->prev = c;
    w->head = c;
    mutex_unlock(&w->mu);
    return c;
}

static void set_done_locked(struct watcher *w, struct watched *c)
{
    if (c->phase != PHASE_BUSY) return;
    c->watch = NULL;
    if (--w->n_busy == 0) cond_broadcast(&w->cv_idle);
}

void watcher_remove(struct watcher *w, struct watched *c)
{
    if (!c) return;
    mutex_lock(&w->mu);
    set_done_locked(w, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->head = c->next;
    if (c->next) c->next->prev = c->prev;
    mutex_unlock(&w->mu);
    mem_free(c);
}

void watcher_request_line(struct watcher *w, struct watched *c)
{
    if (!c) return;
    mutex_lock(&w->mu);
    if (c->phase == PHASE_IDLE) { // a later request on a kept-alive connection
        c->phase = PHASE_HEAD;
        c->deadline_ms = clock_now_ms() + w->c.header_timeout_ms;
    }
    mutex_unlock(&w->mu);
}

void watcher_body_begin(struct watcher *w, struct watched *c)
{
    if (!c) return;
    mutex_lock(&w->mu);
    c->phase = PHASE_BODY;
    c->body_start_ms = clock_now_ms();
    c->body_bytes = 0;
    mutex_unlock(&w->mu);
}

void watcher_body_bytes(struct watcher *w, struct watched *c, uint64_t n)
{
    if (!c) return;
    mutex_lock(&w->mu);
    c->body_bytes += n;
    mutex_unlock(&w->mu);
}

void watcher_busy(struct watcher *w, struct watched *c, struct client_watch *watch)
{
    if (!c) return;
    mutex_lock(&w->mu);
    if (c->phase != PHASE_BUSY) w->n_busy++;
    c->phase = PHASE_BUSY;
    c->watch = watch;
    c->busy_ticket = ++w->next_ticket;
    c->is_gone = false;
    if (w->is_shutting_down && watch) client_watch_abandon(watch, 503, w->c.stop_message);
    mutex_unlock(&w->mu);
}

void watcher_done(struct watcher *w, struct watched *c)
{
    if (!c) return;
    mutex_lock(&w->mu);
    set_done_locked(w, c);
    c->phase = PHASE_IDLE;
    c->deadline_ms = clock_now_ms() + w->c.idle_timeout_ms;
    mutex_unlock(&w->mu);
}

void watcher_shutdown(struct watcher *w)
{
    mutex_lock(&w->mu);
    w->is_shutting_down = true;
    for (struct watched *c = w->head; c; c = c->next) {
        if (c->phase == PHASE_BUSY && c->watch)
            client_watch_abandon(c->watch, 503, w->c.stop_message);
        else if (c->phase == PHASE_IDLE)
            shutdown(c->fd, SHUT_RDWR); // an idle keep-alive connection: nothing to answer
    }
    mutex_unlock(&w->mu);
}

bool watcher_wait_idle(struct watcher *w, int timeout_ms)
{
    const double deadline = clock_now_ms() + timeout_ms;
    mutex_lock(&w->mu);
    while (w->n_busy > 0) {
        double left = deadline - clock_now_ms();
        if (left <= 0) break;
        cond_wait_ms(&w->cv_idle, &w->mu, (int64_t)left + 1);
    }
    bool is_idle = w->n_busy == 0;
    mutex_unlock(&w->mu);
    return is_idle;
}

/* Is c past a deadline? Called with the mutex held. */
static bool is_overdue(const struct watcher *w, const struct watched *c, double now)
{
    switch (c->phase) {
    case PHASE_HEAD:
    case PHASE_IDLE:
        return now >= c->deadline_ms;
    case PHASE_BODY: {
        // A grace of one header timeout, then the average rate must hold.
        double allowed_ms = w->c.header_timeout_ms;
        if (w->c.min_body_rate > 0)
            allowed_ms += 1000.0 * (double)c->body_bytes / w->c.min_body_rate;
        else
            allowed_ms = 1e300;
        return now - c->body_start_ms >= allowed_ms;
    }
    case PHASE_BUSY:
        return false;
    }
    return false;
}

static void sweep_locked(struct watcher *w)
{
    double now = clock_now_ms();
    if (now - w->last_sweep_ms < WATCH_SWEEP_MS) return;
    w->last_sweep_ms = now;
    for (struct watched *c = w->head; c; c = c->next) {
        if (c->is_shut || !is_overdue(w, c, now)) continue;
        c->is_shut = true;
        shutdown(c->fd, SHUT_RDWR); // the library sees the end and closes the connection
    }
}

/* What was polled: each socket with the busy period it was collected for. The poll runs
 * unlocked, so by the time its answer is read the connection may have ended and a new one
 * been allocated at the same address (on the same descriptor number) and become busy: the
 * answer belongs to the ticket, never to the pointer. */
struct poll_set {
    struct pollfd *fds;
    uint64_t *tickets;
    int cap;
};

/* The busy sockets to poll, copied under the mutex. */
static int collect_locked(struct watcher *w, struct poll_set *ps)
{
    int n = 0;
    for (struct watched *c = w->head; c; c = c->next) {
        if (c->phase != PHASE_BUSY || c->is_gone || !c->watch) continue;
        if (n == ps->cap) {
            int cap = ps->cap ? ps->cap * 2 : 64;
            struct pollfd *f = mem_realloc(ps->fds, (size_t)cap * sizeof *f);
            if (f) ps->fds = f;
            uint64_t *k = mem_realloc(ps->tickets, (size_t)cap * sizeof *k);
            if (k) ps->tickets = k;
            if (!f || !k) break;
            ps->cap = cap;
        }
        ps->fds[n] = (struct pollfd){.fd = c->fd, .events = POLLRDHUP};
        ps->tickets[n++] = c->busy_ticket;
    }
    return n;
}

/* Abandons the work of connections whose peer closed during the busy period that was
 * polled; one that ended (or started another request) while the poll ran has another ticket
 * by now and is left alone. Called with the mutex held. */
static void handle_closed_locked(struct watcher *w, const struct poll_set *ps, int n)
{
    for (int i = 0; i < n; i++) {
        if (!(ps->fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
        for (struct watched *c = w->head; c; c = c->next) {
            if (c->busy_ticket != ps->tickets[i] || c->phase != PHASE_BUSY || c->is_gone ||
                !c->watch)
                continue;
            c->is_gone = true;
            client_watch_abandon(c->watch, 0, NULL);
        }
    }
}

static void *watcher_main(void *arg)
{
    struct watcher *w = arg;
    struct poll_set ps = {0};
    for (;;) {
        mutex_lock(&w->mu);
        if (w->is_stopping) {
            mutex_unlock(&w->mu);
            break;
        }
        sweep_locked(w);
        int n = collect_locked(w, &ps);
        mutex_unlock(&w->mu);
        int ready = poll(ps.fds, (nfds_t)n, WATCH_POLL_MS);
        if (ready <= 0) continue;
        mutex_lock(&w->mu);
        handle_closed_locked(w, &ps, n); // the gone ones leave the set: no busy loop
        mutex_unlock(&w->mu);
    }
    mem_free(ps.fds);
    mem_free(ps.tickets);
    return NULL;
}

int watcher_new(const struct watcher_config *c, struct watcher **out)
{
    struct watcher *w = mem_calloc(1, sizeof *w);
    if (!w) return ERR_NOMEM;
    w->c = *c;
    if (mutex_init(&w->mu) != ERR_OK) goto out_free;
    if (cond_init(&w->cv_idle) != ERR_OK) goto out_mutex;
    if (thread_start(&w->thread, watcher_main, w) != ERR_OK) goto out_cond;
    *out = w;
    return ERR_OK;
out_cond:
    cond_deinit(&w->cv_idle);
out_mutex:
    mutex_deinit(&w->mu);
out_free:
    mem_free(w);
    return ERR_NOMEM;
}

void watcher_free(struct watcher *w)
{
    if (!w) return;
    mutex_lock(&w->mu);
    w->is_stopping = true;
    mutex_unlock(&w->mu);
    thread_join(&w->thread);
    cond_deinit(&w->cv_idle);
    mutex_deinit(&w->mu);
    mem_free(w);
}
