/* libmicrohttpd glue on an event loop. The gate (server/gate.c) accepts connections and
 * hands each over once its first request head has arrived; libmicrohttpd's one epoll thread
 * then reads heads and bodies and writes answers for every connection, so an idle or slow
 * connection costs memory, not a thread. A request whose body is complete is suspended and
 * its handler runs on a worker thread (server/workers.c), which may block on generation; when
 * it is done the connection is resumed and the loop sends the answer. A streamed answer is
 * produced by its worker into a pump buffer that the loop drains; while the buffer is empty
 * the connection is suspended, and the worker resumes it when bytes arrive. The watcher
 * (server/watcher.c) polls suspended connections for the client's close, which the loop does
 * not see then, and enforces the header, body-rate and keep-alive deadlines. */
#include "server/http.h"

#include "api/client_watch.h"
#include "api/errors.h"
#include "server/auth.h"
#include "server/gate.h"
#include "server/cors.h"
#include "server/routes.h"
#include "server/watcher.h"
#include "server/workers.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTTP_DISCARD_MAX   (16u * 1024u * 1024u) // bytes read and dropped past the limit
#define THREAD_STACK_BYTES (4u * 1024u * 1024u)  // template rendering recurses on this stack
#define PUMP_HIGH_BYTES    (64u * 1024u)         // a stream's worker waits past this backlog
#define MHD_OVER_LIMIT     64 // the library's own limit sits above the gate's, never reached
#define SHUTDOWN_MESSAGE   "The server is shutting down; retry on another instance or later."

struct http_server {
    struct MHD_Daemon *daemon;
    struct gate *gate;
    struct watcher *watcher;
    struct workers *workers;
    const struct server_config *config; // borrowed
    const struct api_ctx *ctx;          // borrowed
    atomic_bool is_shutting_down;
};

struct pump;

/* One request, from its first callback to its completion. The event loop's thread owns it,
 * except while its handler runs on a worker: the connection is suspended then, so the loop
 * does not touch it until the worker resumes it. */
struct conn_state {
    struct http_server *s;
    struct MHD_Connection *conn;
    struct watched *watched;            // the connection's watcher entry (borrowed; may be NULL)
    const char *url;                    // libmicrohttpd's, valid until completion
    const char *method;                 // likewise
    const struct server_config *config; // borrowed (the server's)
    double start_ms;
    const struct route *route; // NULL until routed
    enum api_family family;    // the path's API family: the shape of every error it gets
    struct str param;
    struct buf body;
    bool is_responded;          // a response was queued early (413, 401, …)
    bool is_too_large;          // the body passed HTTP_BODY_MAX; the rest is discarded
    size_t discarded;           // bytes discarded after that
    bool is_dispatched;         // the handler was handed to a worker
    bool is_ready;              // the handler is done: resp (or pump) holds the answer
    struct api_response resp;   // the handler's answer (a stream's goes into pump)
    struct pump *pump;          // a streamed answer's buffer, or NULL
    struct client_watch *watch; // the work the handler started (may be NULL: out of memory)
    int status;
    long long bytes_sent;
    char method_log[16];
    char path[256]; // for the access log (truncated)
};

/* on_uri's mark for a request whose raw path holds a control byte (on_uri is the only place
 * that sees the path before libmicrohttpd decodes it); on_request answers 400 for it. */
static char bad_path_mark;

/* A streamed answer between its worker (producer: runs the handler's stream) and the event
 * loop (consumer: libmicrohttpd's content reader). Reference-counted: one each. */
struct pump {
    struct mutex mu;
    struct cond cv; // room in out, or the consumer left
    struct buf out; // bytes not yet handed to the loop, from offset
    size_t offset;
    bool is_ended;         // the stream ended (after out drains)
    bool is_suspended;     // the consumer suspended the connection waiting for bytes
    bool is_consumer_gone; // the response was destroyed: the connection ended
    atomic_int refs;
    struct MHD_Connection *conn;
    struct conn_state *cs; // for byte counts; touched by the consumer only
    struct api_stream inner;
};

/* The --cors-origins policy (server/cors.h) applied to this request's Origin. */
static void add_cors(struct MHD_Response *r, const struct server_config *config,
                     struct MHD_Connection *conn)
{
    char allow[512];
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (cors_allow_origin(config->cors_origins, !config->is_cors_no_credentials, origin, allow,
                          sizeof allow))
        MHD_add_response_header(r, "Access-Control-Allow-Origin", allow);
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
    add_cors(r, cs->config, conn);
    cs->status = resp->status;
    cs->bytes_sent = (long long)len;
    cs->is_responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

static void pump_release(struct pump *p)
{
    if (atomic_fetch_sub(&p->refs, 1) != 1) return;
    buf_deinit(&p->out);
    cond_deinit(&p->cv);
    mutex_deinit(&p->mu);
    mem_free(p);
}

/* A pump for cs's stream with two references (worker and consumer), or NULL. */
static struct pump *pump_new(struct conn_state *cs)
{
    struct pump *p = mem_calloc(1, sizeof *p);
    if (!p) return NULL;
    if (mutex_init(&p->mu) != ERR_OK) {
        mem_free(p);
        return NULL;
    }
    if (cond_init(&p->cv) != ERR_OK) {
        mutex_deinit(&p->mu);
        mem_free(p);
        return NULL;
    }
    atomic_init(&p->refs, 2);
    p->conn = cs->conn;
    p->cs = cs;
    p->inner = cs->resp.stream;
    return p;
}

/* The worker's side: runs the stream into the buffer until it ends or the connection does,
 * then frees the stream. A suspended consumer is resumed when bytes (or the end) arrive; the
 * connection cannot have ended while suspended, so resuming it is safe. */
static void pump_run(struct pump *p)
{
    static _Thread_local char chunk[16 * 1024];
    for (;;) {
        mutex_lock(&p->mu);
        while (!p->is_consumer_gone && p->out.len - p->offset >= PUMP_HIGH_BYTES)
            cond_wait(&p->cv, &p->mu);
        bool is_gone = p->is_consumer_gone;
        mutex_unlock(&p->mu);
        if (is_gone) break;
        long n = p->inner.read(p->inner.cls, chunk, sizeof chunk);
        mutex_lock(&p->mu);
        if (n > 0 && buf_append(&p->out, chunk, (size_t)n) != ERR_OK) n = -1; // cut short
        if (n < 0) p->is_ended = true;
        if (n != 0 && p->is_suspended && !p->is_consumer_gone) {
            p->is_suspended = false;
            MHD_resume_connection(p->conn);
        }
        mutex_unlock(&p->mu);
        if (n < 0) break;
    }
    if (p->inner.free) p->inner.free(p->inner.cls);
}

/* The loop's side (libmicrohttpd content reader): hands over what is buffered; with nothing
 * buffered it suspends the connection (returning 0 would make the loop spin). */
static ssize_t pump_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct pump *p = cls;
    mutex_lock(&p->mu);
    size_t avail = p->out.len - p->offset;
    if (avail > 0) {
        size_t n = avail < max ? avail : max;
        memcpy(out, p->out.data + p->offset, n);
        p->offset += n;
        if (p->offset == p->out.len) {
            buf_clear(&p->out);
            p->offset = 0;
        }
        cond_signal(&p->cv);
        mutex_unlock(&p->mu);
        p->cs->bytes_sent += (long long)n;
        return (ssize_t)n;
    }
    if (p->is_ended) {
        mutex_unlock(&p->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    p->is_suspended = true;
    MHD_suspend_connection(p->conn);
    mutex_unlock(&p->mu);
    return 0;
}

/* The response was destroyed (the connection is done with it): the worker stops. */
static void pump_consumer_gone(void *cls)
{
    struct pump *p = cls;
    mutex_lock(&p->mu);
    p->is_consumer_gone = true;
    cond_broadcast(&p->cv);
    mutex_unlock(&p->mu);
    pump_release(p);
}

static enum MHD_Result queue_pump(struct MHD_Connection *conn, struct conn_state *cs)
{
    struct pump *p = cs->pump;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                               pump_read, p, pump_consumer_gone);
    if (!r) {
        pump_consumer_gone(p);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", cs->resp.content_type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    for (int i = 0; i < cs->resp.n_headers; i++)
        MHD_add_response_header(r, cs->resp.headers[i].name, cs->resp.headers[i].value);
    add_cors(r, cs->config, conn);
    cs->status = cs->resp.status;
    cs->is_responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)cs->resp.status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Queues a whole answer (frees its body). */
static enum MHD_Result queue_api_response(struct MHD_Connection *conn, struct conn_state *cs,
                                          struct api_response *resp)
{
    enum MHD_Result ret = queue_buffer(conn, cs, resp);
    buf_deinit(&resp->body);
    return ret;
}

static enum MHD_Result queue_error(struct MHD_Connection *conn, struct conn_state *cs, int status,
                                   const char *type, const char *code, const char *allow,
                                   const char *message)
{
    struct api_response resp = {0};
    api_error_for(&resp, cs->family, status, type, code, message);
    if (allow) api_response_add_header(&resp, "Allow", allow);
    return queue_api_response(conn, cs, &resp);
}

/* A request that arrived on an open connection while the server stops. */
static enum MHD_Result queue_shutting_down(struct MHD_Connection *conn, struct conn_state *cs)
{
    struct api_response resp = {0};
    api_error_for(&resp, cs->family, 503, API_TYPE_UNAVAILABLE, API_CODE_SHUTTING_DOWN,
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
    // As llama-server answers a preflight: 200, its configured methods, headers, credentials.
    add_cors(r, cs->config, conn);
    MHD_add_response_header(r, "Access-Control-Allow-Credentials",
                            cs->config->is_cors_no_credentials ? "false" : "true");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", cs->config->cors_methods);
    MHD_add_response_header(r, "Access-Control-Allow-Headers", cs->config->cors_headers);
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    cs->status = 200;
    cs->is_responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

struct header_visit {
    api_header_visit_fn visit;
    void *arg;
};

static enum MHD_Result visit_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    struct header_visit *v = cls;
    if (key) v->visit(v->arg, key, value ? value : "");
    return MHD_YES;
}

static void headers_each(void *conn, api_header_visit_fn visit, void *arg)
{
    struct header_visit v = {visit, arg};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, visit_header, &v);
}

static const char *header_lookup(void *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static const char *query_lookup(void *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

struct header_count {
    const char *name;
    int n;
};

static enum MHD_Result count_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    (void)value;
    struct header_count *c = cls;
    if (key && strcasecmp(key, c->name) == 0) c->n++;
    return MHD_YES;
}

/* How many times the request carries header name (any letter case). */
static int header_count(struct MHD_Connection *conn, const char *name)
{
    struct header_count c = {name, 0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_one, &c);
    return c.n;
}

/* True when the query sets name to a non-empty value (name may be NULL: false). */
static bool has_query(struct MHD_Connection *conn, const char *name)
{
    const char *v = name ? query_lookup(conn, name) : NULL;
    return v && *v;
}

static bool content_length_too_large(struct MHD_Connection *conn)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (!cl) return false;
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    return end != cl && n > HTTP_BODY_MAX;
}

/* Content-Length with Transfer-Encoding on a later request of a kept-alive connection (the
 * gate checks the first head of each connection; libmicrohttpd would use the chunked body and
 * ignore the length, which a proxy in front may read the other way). Closes after the 400. */
static enum MHD_Result queue_bad_framing(struct MHD_Connection *conn, struct conn_state *cs)
{
    struct api_response resp = {0};
    api_error_for(&resp, cs->family, 400, API_TYPE_INVALID_REQUEST, "bad_request",
                  "Malformed request framing: both Content-Length and Transfer-Encoding.");
    api_response_add_header(&resp, "Connection", "close");
    return queue_api_response(conn, cs, &resp);
}

/* The family whose error shape the path's answers take, known before any check runs (a 503
 * while stopping, a 401 and a 404 are shaped as the handler's own errors would be). */
static enum api_family server_route_family(const char *path)
{
    size_t n_routes;
    const struct route *table = routes_table(&n_routes);
    return route_family(table, n_routes, path);
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
    bool is_public = m == ROUTE_MATCH_OK && cs->route->is_public &&
                     !has_query(conn, route_private_query(cs->route));
    if (s->config->n_api_keys > 0 &&
        (header_count(conn, "Authorization") > 1 || header_count(conn, "x-api-key") > 1)) {
        // Which of two keys counts is a guess a proxy in front may make the other way.
        cs->route = NULL;
        return queue_error(conn, cs, 400, API_TYPE_INVALID_REQUEST, "duplicate_header", NULL,
                           "The request has more than one Authorization or x-api-key header.");
    }
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
    if (header_lookup(conn, "Transfer-Encoding") && header_lookup(conn, "Content-Length"))
        return queue_bad_framing(conn, cs);
    return MHD_YES;
}

/* Parses the body (JSON routes) and runs the route's handler into cs->resp. Runs on a
 * worker with cs->watch bound to the thread. */
static void run_handler(struct http_server *s, struct conn_state *cs)
{
    struct api_request req = {
        .method = cs->method,
        .path = cs->url,
        .path_param = cs->param,
        .body = cs->body.data ? cs->body.data : "",
        .body_len = cs->body.len,
        .header = header_lookup,
        .headers = headers_each,
        .query = query_lookup,
        .conn = cs->conn,
    };
    struct api_response *resp = &cs->resp;
    memset(resp, 0, sizeof *resp);
    resp->status = 500;
    if (cs->route->body == ROUTE_BODY_JSON) {
        struct errmsg err;
        errmsg_clear(&err);
        if (http_parse_json_body(req.body, req.body_len, &req.json, &err) != ERR_OK) {
            api_error_for(resp, cs->family, 400, API_TYPE_INVALID_REQUEST, "invalid_json", err.msg);
            return;
        }
    }
    cs->route->handler(s->ctx, &req, resp);
    json_decref(req.json);
    buf_deinit(&cs->body); // the handler is done with the raw body
}

/* A worker's job: the handler, then (for a stream) the pump. cs belongs to the loop again
 * once the connection is resumed, so nothing here touches it after that. */
static void handler_job(void *arg)
{
    struct conn_state *cs = arg;
    client_watch_bind(cs->watch);
    run_handler(cs->s, cs);
    client_watch_bind(NULL);
    struct pump *p = NULL;
    if (cs->resp.stream.read) {
        p = pump_new(cs);
        if (!p) {
            if (cs->resp.stream.free) cs->resp.stream.free(cs->resp.stream.cls);
            memset(&cs->resp, 0, sizeof cs->resp);
            api_error_for(&cs->resp, cs->family, 500, API_TYPE_SERVER, NULL, "out of memory");
        }
    }
    cs->pump = p;
    cs->is_ready = true;
    MHD_resume_connection(cs->conn);
    if (p) {
        pump_run(p);
        pump_release(p);
    }
}

/* The body is complete: suspends the connection and hands the handler to a worker. */
static enum MHD_Result dispatch(struct http_server *s, struct MHD_Connection *conn,
                                struct conn_state *cs)
{
    cs->is_dispatched = true;
    // The public route (/health, which never blocks) answers on the loop: a liveness probe
    // must not wait for a worker, nor for two thread hand-overs on a loaded machine.
    if (cs->route->is_public && cs->route->body == ROUTE_BODY_NONE) {
        run_handler(s, cs);
        if (cs->resp.stream.free) cs->resp.stream.free(cs->resp.stream.cls);
        return queue_api_response(conn, cs, &cs->resp);
    }
    if (client_watch_new(&cs->watch) != ERR_OK) cs->watch = NULL;
    watcher_busy(s->watcher, cs->watched, cs->watch);
    // Suspended before the worker may resume it.
    MHD_suspend_connection(conn);
    if (workers_submit(s->workers, handler_job, cs) != ERR_OK) {
        api_error_for(&cs->resp, cs->family, 503, API_TYPE_UNAVAILABLE, "server_busy",
                      "No thread is free to run the request; retry shortly.");
        api_response_add_header(&cs->resp, "Retry-After", "1");
        cs->is_ready = true;
        MHD_resume_connection(conn);
    }
    return MHD_YES;
}

static struct watched *watched_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct http_server *s = cls;
    const bool is_bad_path = *con_cls == &bad_path_mark;
    struct conn_state *cs = is_bad_path ? NULL : *con_cls;
    if (!cs) {
        *con_cls = NULL;
        cs = mem_calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        cs->s = s;
        cs->conn = conn;
        cs->url = url;
        cs->method = method;
        cs->watched = watched_of(conn);
        cs->config = s->config;
        cs->start_ms = clock_now_ms();
        snprintf(cs->method_log, sizeof cs->method_log, "%s", method);
        snprintf(cs->path, sizeof cs->path, "%s", url);
        cs->family = server_route_family(url);
        *con_cls = cs;
        watcher_body_begin(s->watcher, cs->watched);
        if (atomic_load(&s->is_shutting_down)) return queue_shutting_down(conn, cs);
        if (is_bad_path)
            return queue_error(conn, cs, 400, API_TYPE_INVALID_REQUEST, "invalid_path", NULL,
                               "The request path holds a control character (e.g. %00).");
        return begin_request(s, conn, cs, url, method);
    }
    if (cs->is_ready) {
        cs->is_ready = false;
        return cs->pump ? queue_pump(conn, cs) : queue_api_response(conn, cs, &cs->resp);
    }
    if (cs->is_responded) { // an early response was queued; discard whatever else arrives
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        watcher_body_bytes(s->watcher, cs->watched, n);
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
    if (cs->is_dispatched) return MHD_YES; // not called while suspended; a guard only
    return dispatch(s, conn, cs);
}

static void log_access(const struct http_server *s, const struct conn_state *cs,
                       struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char addr[64] = "-";
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, addr,
                  sizeof addr);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, addr,
                  sizeof addr);
    double ms = clock_now_ms() - cs->start_ms;
    if (s->config->log_format == LOG_FORMAT_JSON)
        log_line("{\"type\":\"access\",\"client\":\"%s\",\"method\":\"%s\",\"path\":\"%s\","
                 "\"status\":%d,\"bytes\":%lld,\"ms\":%.1f}",
                 addr, cs->method_log, cs->path, cs->status, cs->bytes_sent, ms);
    else
        log_line("%s \"%s %s\" %d %lld %.1fms", addr, cs->method_log, cs->path, cs->status,
                 cs->bytes_sent, ms);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct http_server *s = cls;
    struct conn_state *cs = *con_cls == &bad_path_mark ? NULL : *con_cls;
    if (!cs) {
        watcher_done(s->watcher, watched_of(conn));
        return;
    }
    log_access(s, cs, conn);
    // Nobody waits for the work any more (a no-op for work that finished).
    if (cs->watch) client_watch_abandon(cs->watch, 0, NULL);
    watcher_done(s->watcher, cs->watched);
    client_watch_free(cs->watch);
    if (cs->is_ready) { // an answer never queued (the connection ended first)
        if (cs->pump) pump_consumer_gone(cs->pump);
        buf_deinit(&cs->resp.body);
    }
    buf_deinit(&cs->body);
    mem_free(cs);
    *con_cls = NULL;
}

/* Connection start and end: the watcher's entry, the gate's counts. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? watcher_add(s->watcher, ci->connect_fd) : NULL;
        return;
    }
    watcher_remove(s->watcher, *socket_context);
    *socket_context = NULL;
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ai) gate_connection_closed(s->gate, ai->client_addr);
}

/* A request line arrived (the first of a kept-alive connection's next request starts its
 * header deadline). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct http_server *s = cls;
    watcher_request_line(s->watcher, watched_of(conn));
    return route_path_has_control(uri) ? &bad_path_mark : NULL;
}

/* The gate's handoff: the library takes the socket (and closes it on failure). */
static bool hand_to_library(void *ctx, int fd, const struct sockaddr *addr, socklen_t len)
{
    struct http_server *s = ctx;
    return MHD_add_connection(s->daemon, fd, addr, len) == MHD_YES;
}

static int start_daemon(struct http_server *s, struct errmsg *err)
{
    const struct server_config *c = s->config;
    unsigned flags = MHD_USE_NO_LISTEN_SOCKET | MHD_USE_EPOLL_INTERNAL_THREAD |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)c->max_connections + MHD_OVER_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)c->timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_POOL_BYTES,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_END);
    if (!s->daemon) return errmsg_set(err, ERR_IO, "cannot start the HTTP event loop");
    return ERR_OK;
}

int http_server_start(const struct server_config *config, const struct api_ctx *ctx,
                      struct http_server **out, struct errmsg *err)
{
    struct http_server *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->config = config;
    s->ctx = ctx;
    atomic_init(&s->is_shutting_down, false);
    const struct watcher_config wc = {
        .header_timeout_ms = config->header_timeout_s * 1000,
        .idle_timeout_ms = config->timeout_s * 1000,
        .min_body_rate = config->min_body_rate,
        .stop_message = SHUTDOWN_MESSAGE,
    };
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
    int rc = watcher_new(&wc, &s->watcher);
    if (rc == ERR_OK) rc = workers_new(config->max_connections, THREAD_STACK_BYTES, &s->workers);
    if (rc == ERR_OK) rc = start_daemon(s, err);
    if (rc == ERR_OK) rc = gate_start(&gc, &s->gate, err);
    if (rc != ERR_OK) {
        if (s->daemon) MHD_stop_daemon(s->daemon);
        workers_stop(s->workers);
        watcher_free(s->watcher);
        mem_free(s);
        if (rc == ERR_NOMEM && !err->msg[0]) errmsg_set(err, ERR_NOMEM, "out of memory");
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
    watcher_shutdown(s->watcher);
}

bool http_server_wait_idle(struct http_server *s, int timeout_ms)
{
    return watcher_wait_idle(s->watcher, timeout_ms);
}

void http_server_stop(struct http_server *s)
{
    if (!s) return;
    gate_stop(s->gate); // no more handoffs; its counts stay valid for the closes below
    MHD_stop_daemon(s->daemon);
    workers_stop(s->workers); // the streams' workers end once their connections did
    watcher_free(s->watcher);
    gate_free(s->gate);
    mem_free(s);
}
