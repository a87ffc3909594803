/* libmicrohttpd glue. Each request gets a conn_state on its first callback; the body is
 * accumulated up to HTTP_BODY_MAX; the handler runs once the body is complete; the completion
 * callback writes the access log line and frees the state. */
#define _GNU_SOURCE // POLLRDHUP: the peer's close, told apart from readable bytes
#include "server/http.h"

#include "api/anthropic.h"
#include "api/client_watch.h"
#include "api/errors.h"
#include "server/auth.h"
#include "server/gate.h"
#include "server/routes.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HTTP_DISCARD_MAX   (16u * 1024u * 1024u) // bytes read and dropped past the limit
#define THREAD_STACK_BYTES (4u * 1024u * 1024u)  // template rendering recurses on this stack
#define WATCH_POLL_MS      20                    // how often waiting connections are checked
#define SHUTDOWN_MESSAGE   "The server is shutting down; retry on another instance or later."

struct conn_state;

/* The connections whose handler is running or whose stream is open: a thread polls their
 * sockets for the peer's close, which libmicrohttpd does not report while our callback holds
 * the connection, and abandons their work. */
struct watcher {
    struct mutex mu;
    struct conn_state **conns; // (n_conns, conns_cap); guarded by mu
    int n_conns;
    int conns_cap;
    bool is_stopping;      // guarded by mu
    bool is_shutting_down; // the server stops: new work fails at once (guarded by mu)
    uint64_t next_id;      // guarded by mu
    struct cond cv_empty;  // signalled when the last watched connection leaves
    struct thread thread;
    bool is_started;
};

struct http_server {
    struct MHD_Daemon *daemon;
    struct gate *gate; // the listening socket and the connections not yet handed over
    atomic_bool is_shutting_down;
    const struct server_config *config; // borrowed
    const struct api_ctx *ctx;          // borrowed
    struct watcher watcher;
};

/* Owned by the connection's thread for the life of one request. */
struct conn_state {
    double start_ms;
    const struct route *route; // NULL until routed
    struct str param;
    struct buf body;
    bool is_responded; // a response was queued early (413, 401, …)
    bool is_too_large; // the body passed HTTP_BODY_MAX; the rest is discarded
    size_t discarded;  // bytes discarded after that
    int status;
    long long bytes_sent;
    char method[16];
    char path[256];             // for the access log (truncated)
    int fd;                     // the connection's socket (watched while the handler works)
    struct client_watch *watch; // the work the handler started; NULL before it runs
    bool is_watched;            // in the watcher's list (guarded by the watcher's mutex)
    uint64_t watch_id;          // unique while watched (a freed state's address may recur)
    bool is_gone;               // the client closed its end (guarded by the watcher's mutex)
};

/* A streaming body in flight: wraps the handler's stream to count bytes for the log. */
struct stream_ctx {
    struct api_stream inner;
    struct conn_state *cs;
};

/* Adds cs to the watched connections. False when out of memory (the request then runs
 * unwatched, as before: its work ends when it ends). */
static bool watcher_add(struct watcher *w, struct conn_state *cs)
{
    mutex_lock(&w->mu);
    if (w->n_conns == w->conns_cap) {
        int cap = w->conns_cap ? w->conns_cap * 2 : 64;
        struct conn_state **grown = mem_realloc(w->conns, (size_t)cap * sizeof *grown);
        if (!grown) {
            mutex_unlock(&w->mu);
            return false;
        }
        w->conns = grown;
        w->conns_cap = cap;
    }
    w->conns[w->n_conns++] = cs;
    cs->is_watched = true;
    cs->watch_id = ++w->next_id;
    if (w->is_shutting_down) client_watch_abandon(cs->watch, 503, SHUTDOWN_MESSAGE);
    mutex_unlock(&w->mu);
    return true;
}

static void watcher_remove(struct watcher *w, struct conn_state *cs)
{
    mutex_lock(&w->mu);
    for (int i = 0; cs->is_watched && i < w->n_conns; i++) {
        if (w->conns[i] != cs) continue;
        w->conns[i] = w->conns[--w->n_conns];
        cs->is_watched = false;
    }
    if (w->n_conns == 0) cond_broadcast(&w->cv_empty);
    mutex_unlock(&w->mu);
}

/* Abandons the work of cs when pfd says its peer closed; cs must still be watched (a
 * connection that ended while the poll ran is skipped). Called with the mutex held. */
static void watcher_check(struct watcher *w, const struct pollfd *pfd, uint64_t id)
{
    if (!(pfd->revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) return;
    for (int i = 0; i < w->n_conns; i++) {
        struct conn_state *cs = w->conns[i];
        if (cs->watch_id != id || cs->is_gone) continue;
        cs->is_gone = true;
        client_watch_abandon(cs->watch, 0, NULL);
    }
}

/* The watcher thread: polls every watched socket for the peer's close (POLLRDHUP: a FIN;
 * readable request bytes are not asked for, so a pipelined request is not mistaken for a
 * close), at most WATCH_POLL_MS apart. */
static void *watcher_main(void *arg)
{
    struct watcher *w = arg;
    struct pollfd *pfds = NULL;
    uint64_t *seen = NULL; // watch ids of the polled connections
    int cap = 0;
    for (;;) {
        mutex_lock(&w->mu);
        if (w->is_stopping) {
            mutex_unlock(&w->mu);
            break;
        }
        if (w->n_conns > cap) {
            struct pollfd *p2 = mem_realloc(pfds, (size_t)w->conns_cap * sizeof *p2);
            if (p2) pfds = p2;
            uint64_t *s2 = mem_realloc(seen, (size_t)w->conns_cap * sizeof *s2);
            if (s2) seen = s2;
            if (p2 && s2) cap = w->conns_cap;
        }
        int n = 0;
        for (int i = 0; i < w->n_conns && n < cap; i++) {
            if (w->conns[i]->is_gone) continue;
            pfds[n] = (struct pollfd){.fd = w->conns[i]->fd, .events = POLLRDHUP};
            seen[n++] = w->conns[i]->watch_id;
        }
        mutex_unlock(&w->mu);
        int ready = poll(pfds, (nfds_t)n, WATCH_POLL_MS);
        if (ready > 0) {
            mutex_lock(&w->mu);
            for (int i = 0; i < n; i++)
                watcher_check(w, &pfds[i], seen[i]);
            mutex_unlock(&w->mu);
            // Each gone connection leaves the poll set; wait before polling the rest again.
            struct timespec tick = {0, WATCH_POLL_MS * 1000000L};
            nanosleep(&tick, NULL);
        }
    }
    mem_free(pfds);
    mem_free(seen);
    return NULL;
}

static int watcher_start(struct watcher *w)
{
    memset(w, 0, sizeof *w);
    if (mutex_init(&w->mu) != ERR_OK) return ERR_NOMEM;
    if (cond_init(&w->cv_empty) != ERR_OK) {
        mutex_deinit(&w->mu);
        return ERR_NOMEM;
    }
    if (thread_start(&w->thread, watcher_main, w) != ERR_OK) {
        cond_deinit(&w->cv_empty);
        mutex_deinit(&w->mu);
        return ERR_NOMEM;
    }
    w->is_started = true;
    return ERR_OK;
}

static void watcher_stop(struct watcher *w)
{
    if (!w->is_started) return;
    mutex_lock(&w->mu);
    w->is_stopping = true;
    mutex_unlock(&w->mu);
    thread_join(&w->thread);
    cond_deinit(&w->cv_empty);
    mutex_deinit(&w->mu);
    mem_free(w->conns);
    w->is_started = false;
}

static void add_cors(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Retry-After");
}

static void free_buffer(void *p)
{
    mem_free(p);
}

static enum MHD_Result queue_buffer(struct MHD_Connection *conn, struct conn_state *cs,
                                    struct api_response *resp)
{
    size_t len = resp->body.len;
    char *data = buf_steal(&resp->body);
    struct MHD_Response *r =
        data ? MHD_create_response_from_buffer_with_free_callback(len, data, free_buffer)
             : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) {
        mem_free(data);
        return MHD_NO;
    }
    if (resp->content_type) MHD_add_response_header(r, "Content-Type", resp->content_type);
    for (int i = 0; i < resp->n_headers; i++)
        MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
    add_cors(r);
    cs->status = resp->status;
    cs->bytes_sent = (long long)len;
    cs->is_responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct stream_ctx *sc = cls;
    long n = sc->inner.read(sc->inner.cls, out, max);
    if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
    sc->cs->bytes_sent += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream_ctx *sc = cls;
    if (sc->inner.free) sc->inner.free(sc->inner.cls);
    mem_free(sc);
}

static enum MHD_Result queue_stream(struct MHD_Connection *conn, struct conn_state *cs,
                                    struct api_response *resp)
{
    struct stream_ctx *sc = mem_alloc(sizeof *sc);
    if (!sc) {
        if (resp->stream.free) resp->stream.free(resp->stream.cls);
        return MHD_NO;
    }
    sc->inner = resp->stream;
    sc->cs = cs;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                               stream_read, sc, stream_free);
    if (!r) {
        stream_free(sc);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", resp->content_type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    for (int i = 0; i < resp->n_headers; i++)
        MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
    add_cors(r);
    cs->status = resp->status;
    cs->is_responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result queue_api_response(struct MHD_Connection *conn, struct conn_state *cs,
                                          struct api_response *resp)
{
    enum MHD_Result ret =
        resp->stream.read ? queue_stream(conn, cs, resp) : queue_buffer(conn, cs, resp);
    buf_deinit(&resp->body);
    return ret;
}

/* Anthropic's routes answer in Anthropic's error shape, also before their handler runs. */
static bool is_anthropic_path(const char *path)
{
    return strcmp(path, "/v1/messages") == 0 || strncmp(path, "/v1/messages/", 13) == 0;
}

static enum MHD_Result queue_error(struct MHD_Connection *conn, struct conn_state *cs, int status,
                                   const char *type, const char *code, const char *allow,
                                   const char *message)
{
    struct api_response resp = {0};
    if (is_anthropic_path(cs->path))
        api_respond_json(&resp, status,
                         anthropic_error_json(anthropic_error_type(status), message));
    else
        api_error(&resp, status, type, code, NULL, "%s", message);
    if (allow) api_response_add_header(&resp, "Allow", allow);
    return queue_api_response(conn, cs, &resp);
}

/* A request that arrived on an open connection while the server stops. */
static enum MHD_Result queue_shutting_down(struct MHD_Connection *conn, struct conn_state *cs)
{
    struct api_response resp = {0};
    if (is_anthropic_path(cs->path))
        api_respond_json(&resp, 503,
                         anthropic_error_json(anthropic_error_type(503), SHUTDOWN_MESSAGE));
    else
        api_error(&resp, 503, API_TYPE_UNAVAILABLE, API_CODE_SHUTTING_DOWN, NULL, "%s",
                  SHUTDOWN_MESSAGE);
    api_response_add_header(&resp, "Retry-After", "1");
    api_response_add_header(&resp, "Connection", "close");
    return queue_api_response(conn, cs, &resp);
}

static enum MHD_Result queue_too_large(struct MHD_Connection *conn, struct conn_state *cs)
{
    char msg[128];
    snprintf(msg, sizeof msg, "Request body is larger than the limit of %u bytes", HTTP_BODY_MAX);
    return queue_error(conn, cs, 413, API_TYPE_INVALID_REQUEST, "request_too_large", NULL, msg);
}

static enum MHD_Result queue_preflight(struct MHD_Connection *conn, struct conn_state *cs)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    const char *req_headers =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    add_cors(r);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            req_headers ? req_headers
                                        : "Authorization, Content-Type, x-api-key, "
                                          "anthropic-version, anthropic-beta");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    cs->status = 204;
    cs->is_responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, 204, r);
    MHD_destroy_response(r);
    return ret;
}

static const char *header_lookup(void *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static const char *query_lookup(void *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

static bool content_length_too_large(struct MHD_Connection *conn)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (!cl) return false;
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    return end != cl && n > HTTP_BODY_MAX;
}

/* First callback of a request: route, authenticate, check the declared size. Queues an early
 * response when the request cannot proceed. */
static enum MHD_Result begin_request(struct http_server *s, struct MHD_Connection *conn,
                                     struct conn_state *cs, const char *url, const char *method)
{
    if (strcmp(method, "OPTIONS") == 0) return queue_preflight(conn, cs);
    size_t n_routes;
    const struct route *table = routes_table(&n_routes);
    char allow[128];
    enum route_match m =
        route_find(table, n_routes, method, url, &cs->route, &cs->param, allow, sizeof allow);
    bool is_public = m == ROUTE_MATCH_OK && cs->route->is_public;
    if (!is_public && !auth_request_allowed(s->config->api_keys, s->config->n_api_keys,
                                            header_lookup(conn, "Authorization"),
                                            header_lookup(conn, "x-api-key"))) {
        cs->route = NULL;
        return queue_error(conn, cs, 401, API_TYPE_AUTHENTICATION, "invalid_api_key", NULL,
                           "Invalid or missing API key. Send 'Authorization: Bearer <key>'.");
    }
    char msg[512];
    if (m == ROUTE_MATCH_NO_PATH) {
        snprintf(msg, sizeof msg, "Invalid URL (%s %.400s)", method, url);
        return queue_error(conn, cs, 404, API_TYPE_INVALID_REQUEST, "not_found", NULL, msg);
    }
    if (m == ROUTE_MATCH_BAD_METHOD) {
        snprintf(msg, sizeof msg, "Method %s is not allowed for %.300s (allowed: %s)", method, url,
                 allow);
        return queue_error(conn, cs, 405, API_TYPE_INVALID_REQUEST, "method_not_allowed", allow,
                           msg);
    }
    if (content_length_too_large(conn)) return queue_too_large(conn, cs);
    return MHD_YES;
}

/* Creates the request's watch, binds it to this thread for the handler, and puts the
 * connection under the watcher. Without memory for either the request runs unwatched. */
static void watch_begin(struct http_server *s, struct MHD_Connection *conn, struct conn_state *cs)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || client_watch_new(&cs->watch) != ERR_OK) return;
    cs->fd = ci->connect_fd;
    client_watch_bind(cs->watch);
    watcher_add(&s->watcher, cs);
}

static enum MHD_Result run_handler(struct http_server *s, struct MHD_Connection *conn,
                                   struct conn_state *cs, const char *url, const char *method)
{
    struct api_request req = {
        .method = method,
        .path = url,
        .path_param = cs->param,
        .body = cs->body.data ? cs->body.data : "",
        .body_len = cs->body.len,
        .header = header_lookup,
        .query = query_lookup,
        .conn = conn,
    };
    if (cs->route->body == ROUTE_BODY_JSON) {
        struct errmsg err;
        errmsg_clear(&err);
        if (http_parse_json_body(req.body, req.body_len, &req.json, &err) != ERR_OK)
            return queue_error(conn, cs, 400, API_TYPE_INVALID_REQUEST, "invalid_json", NULL,
                               err.msg);
    }
    struct api_response resp = {0};
    resp.status = 500;
    watch_begin(s, conn, cs);
    cs->route->handler(s->ctx, &req, &resp);
    client_watch_bind(NULL);
    json_decref(req.json);
    buf_deinit(&cs->body); // the handler is done with the raw body
    return queue_api_response(conn, cs, &resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct http_server *s = cls;
    struct conn_state *cs = *con_cls;
    if (!cs) {
        cs = mem_calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        cs->start_ms = clock_now_ms();
        snprintf(cs->method, sizeof cs->method, "%s", method);
        snprintf(cs->path, sizeof cs->path, "%s", url);
        *con_cls = cs;
        if (atomic_load(&s->is_shutting_down)) return queue_shutting_down(conn, cs);
        return begin_request(s, conn, cs, url, method);
    }
    if (cs->is_responded) { // an early response was queued; discard whatever else arrives
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (!cs->is_too_large && cs->body.len + n > HTTP_BODY_MAX) {
            cs->is_too_large = true;
            buf_deinit(&cs->body);
        }
        if (cs->is_too_large) {
            /* Keep reading (and dropping) a bounded amount so the 413 reaches the client:
             * closing with unread input makes TCP reset the connection and lose it. */
            cs->discarded += n;
            return cs->discarded > HTTP_DISCARD_MAX ? queue_too_large(conn, cs) : MHD_YES;
        }
        if (buf_append(&cs->body, upload_data, n) != ERR_OK)
            return queue_error(conn, cs, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return MHD_YES;
    }
    if (cs->is_too_large) return queue_too_large(conn, cs);
    return run_handler(s, conn, cs, url, method);
}

static void log_access(const struct http_server *s, const struct conn_state *cs,
                       struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char addr[64] = "-";
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET) {
        const unsigned char *b =
            (const unsigned char *)&((const struct sockaddr_in *)(const void *)ci->client_addr)
                ->sin_addr;
        snprintf(addr, sizeof addr, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
    }
    double ms = clock_now_ms() - cs->start_ms;
    if (s->config->log_format == LOG_FORMAT_JSON)
        log_line("{\"type\":\"access\",\"client\":\"%s\",\"method\":\"%s\",\"path\":\"%s\","
                 "\"status\":%d,\"bytes\":%lld,\"ms\":%.1f}",
                 addr, cs->method, cs->path, cs->status, cs->bytes_sent, ms);
    else
        log_line("%s \"%s %s\" %d %lld %.1fms", addr, cs->method, cs->path, cs->status,
                 cs->bytes_sent, ms);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct http_server *s = cls;
    struct conn_state *cs = *con_cls;
    if (!cs) return;
    log_access(s, cs, conn);
    watcher_remove(&s->watcher, cs);
    client_watch_free(cs->watch);
    buf_deinit(&cs->body);
    mem_free(cs);
    *con_cls = NULL;
}

/* Connection end: the gate's counts drop. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)socket_context;
    struct http_server *s = cls;
    if (code != MHD_CONNECTION_NOTIFY_CLOSED) return;
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ai) gate_connection_closed(s->gate, ai->client_addr);
}

/* The gate's handoff: the library takes the socket (and closes it on failure). */
static bool hand_to_library(void *ctx, int fd, const struct sockaddr *addr, socklen_t len)
{
    struct http_server *s = ctx;
    return MHD_add_connection(s->daemon, fd, addr, len) == MHD_YES;
}

int http_server_start(const struct server_config *config, const struct api_ctx *ctx,
                      struct http_server **out, struct errmsg *err)
{
    struct http_server *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->config = config;
    s->ctx = ctx;
    atomic_init(&s->is_shutting_down, false);
    if (watcher_start(&s->watcher) != ERR_OK) {
        mem_free(s);
        return ERR_NOMEM;
    }
    // The gate accepts and counts; the library's own limit sits above the gate's.
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    s->daemon =
        MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)config->max_connections + 64, MHD_OPTION_CONNECTION_TIMEOUT,
                         (unsigned)config->timeout_s, MHD_OPTION_THREAD_STACK_SIZE,
                         (size_t)THREAD_STACK_BYTES, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                         MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    const struct gate_config gc = {
        .host = config->host,
        .port = config->port,
        .max_connections = config->max_connections,
        .max_per_address = config->max_connections_per_ip,
        .header_timeout_ms = config->header_timeout_s * 1000,
        .body_max = HTTP_BODY_MAX,
        .handoff = hand_to_library,
        .handoff_ctx = s,
    };
    int rc = s->daemon ? gate_start(&gc, &s->gate, err)
                       : errmsg_set(err, ERR_IO, "cannot start the HTTP server");
    if (rc != ERR_OK) {
        if (s->daemon) MHD_stop_daemon(s->daemon);
        watcher_stop(&s->watcher);
        mem_free(s);
        return rc;
    }
    *out = s;
    return ERR_OK;
}

int http_server_port(const struct http_server *s)
{
    return gate_port(s->gate);
}

void http_server_quiesce(struct http_server *s)
{
    gate_close_listener(s->gate);
}

void http_server_begin_shutdown(struct http_server *s)
{
    http_server_quiesce(s);
    atomic_store(&s->is_shutting_down, true);
    struct watcher *w = &s->watcher;
    mutex_lock(&w->mu);
    w->is_shutting_down = true;
    for (int i = 0; i < w->n_conns; i++)
        client_watch_abandon(w->conns[i]->watch, 503, SHUTDOWN_MESSAGE);
    mutex_unlock(&w->mu);
}

bool http_server_wait_idle(struct http_server *s, int timeout_ms)
{
    struct watcher *w = &s->watcher;
    const double deadline = clock_now_ms() + timeout_ms;
    mutex_lock(&w->mu);
    while (w->n_conns > 0) {
        double left = deadline - clock_now_ms();
        if (left <= 0) break;
        cond_wait_ms(&w->cv_empty, &w->mu, (int64_t)left + 1);
    }
    bool is_idle = w->n_conns == 0;
    mutex_unlock(&w->mu);
    return is_idle;
}

void http_server_stop(struct http_server *s)
{
    if (!s) return;
    gate_stop(s->gate); // no handoff after this; its counts stay valid for the closes below
    MHD_stop_daemon(s->daemon);
    watcher_stop(&s->watcher);
    gate_free(s->gate);
    mem_free(s);
}
