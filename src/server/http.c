/* libmicrohttpd glue. Each request gets a conn_state on its first callback; the body is
 * accumulated up to HTTP_BODY_MAX; the handler runs once the body is complete; the completion
 * callback writes the access log line and frees the state. */
#include "server/http.h"

#include "api/anthropic.h"
#include "api/errors.h"
#include "server/auth.h"
#include "server/cors.h"
#include "server/routes.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_DISCARD_MAX   (16u * 1024u * 1024u) // bytes read and dropped past the limit
#define THREAD_STACK_BYTES (4u * 1024u * 1024u)  // template rendering recurses on this stack

struct http_server {
    struct MHD_Daemon *daemon;
    const struct server_config *config; // borrowed
    const struct api_ctx *ctx;          // borrowed
};

/* Owned by the connection's thread for the life of one request. */
struct conn_state {
    const struct server_config *config; // borrowed (the server's)
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
    char path[256]; // for the access log (truncated)
};

/* A streaming body in flight: wraps the handler's stream to count bytes for the log. */
struct stream_ctx {
    struct api_stream inner;
    struct conn_state *cs;
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
    add_cors(r, cs->config, conn);
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
    cs->route->handler(s->ctx, &req, &resp);
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
        cs->config = s->config;
        cs->start_ms = clock_now_ms();
        snprintf(cs->method, sizeof cs->method, "%s", method);
        snprintf(cs->path, sizeof cs->path, "%s", url);
        *con_cls = cs;
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
    buf_deinit(&cs->body);
    mem_free(cs);
    *con_cls = NULL;
}

int http_server_start(const struct server_config *config, const struct api_ctx *ctx,
                      struct http_server **out, struct errmsg *err)
{
    struct http_server *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->config = config;
    s->ctx = ctx;
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)config->port);
    if (inet_pton(AF_INET, config->host, &addr.sin_addr) != 1) {
        mem_free(s);
        return errmsg_set(err, ERR_INVALID, "--host: '%s' is not an IPv4 address", config->host);
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC;
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)config->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)config->max_connections_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)config->timeout_s, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)THREAD_STACK_BYTES, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    if (!s->daemon) {
        mem_free(s);
        return errmsg_set(err, ERR_IO, "cannot listen on %s:%d (address in use or not local?)",
                          config->host, config->port);
    }
    *out = s;
    return ERR_OK;
}

int http_server_port(const struct http_server *s)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return di ? di->port : 0;
}

void http_server_stop(struct http_server *s)
{
    if (!s) return;
    MHD_quiesce_daemon(s->daemon);
    MHD_stop_daemon(s->daemon);
    mem_free(s);
}
