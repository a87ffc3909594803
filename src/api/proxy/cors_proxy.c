/* /cors-proxy: URL parsing, one HTTP/1.1 exchange with the target (RFC 9112: request with
 * Connection: close, answer framed by chunked encoding, Content-Length or the close), and the
 * relayed answer. */
#include "api/proxy/cors_proxy.h"

#include "api/errors.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#define PROXY_CONNECT_MS   10000
#define PROXY_IO_MS        60000
#define PROXY_ANSWER_MAX   (64u << 20) // bytes of a target's answer, head included
#define PROXY_HEADER_PFX   "x-llama-server-proxy-header-"
#define PROXY_DISABLED_MSG "this feature is disabled (start the server with --ui-mcp-proxy)"

/* ---- URL ---- */

static bool is_clean(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f) return false;
    return true;
}

/* host[:port] or [v6][:port] of an authority into t. */
static int parse_authority(const char *a, size_t n, struct cors_proxy_target *t, struct errmsg *err)
{
    const char *host = a, *port = NULL;
    size_t host_len = n;
    if (n && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close) return errmsg_set(err, ERR_INVALID, "invalid target URL: unclosed '['");
        host = a + 1;
        host_len = (size_t)(close - host);
        size_t rest = n - (size_t)(close + 1 - a);
        if (rest && close[1] != ':')
            return errmsg_set(err, ERR_INVALID, "invalid target URL: bad host");
        if (rest) port = close + 2;
    } else {
        const char *colon = memchr(a, ':', n);
        if (colon) host_len = (size_t)(colon - a), port = colon + 1;
    }
    if (host_len == 0) return errmsg_set(err, ERR_INVALID, "invalid target URL: missing host");
    if (host_len >= sizeof t->host || !is_clean(host, host_len))
        return errmsg_set(err, ERR_INVALID, "invalid target URL: bad host");
    memcpy(t->host, host, host_len);
    t->host[host_len] = 0;
    if (!port) {
        snprintf(t->port, sizeof t->port, "%s", t->is_https ? "443" : "80");
        return ERR_OK;
    }
    size_t port_len = n - (size_t)(port - a);
    long v = 0;
    for (size_t i = 0; i < port_len; i++) {
        if (port[i] < '0' || port[i] > '9' || v > 65535)
            return errmsg_set(err, ERR_INVALID, "invalid target URL: bad port");
        v = v * 10 + (port[i] - '0');
    }
    if (port_len == 0 || v < 1 || v > 65535)
        return errmsg_set(err, ERR_INVALID, "invalid target URL: bad port");
    snprintf(t->port, sizeof t->port, "%ld", v);
    return ERR_OK;
}

int cors_proxy_parse_url(const char *url, struct cors_proxy_target *t, struct errmsg *err)
{
    struct cors_proxy_target out = {0};
    const char *rest = NULL;
    if (strncasecmp(url, "http://", 7) == 0) {
        rest = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        rest = url + 8;
        out.is_https = true;
    } else {
        const char *colon = strstr(url, "://");
        int n = colon ? (int)(colon - url) : 0;
        return errmsg_set(err, ERR_INVALID,
                          "unsupported URL scheme in target URL: '%.*s' (http or https only)",
                          n > 16 ? 16 : n, url);
    }
    size_t auth_len = strcspn(rest, "/?#");
    if (memchr(rest, '@', auth_len))
        return errmsg_set(err, ERR_INVALID, "authentication in target URL is not supported");
    int rc = parse_authority(rest, auth_len, &out, err);
    if (rc != ERR_OK) return rc;
    const char *path = rest + auth_len;
    size_t path_len = strcspn(path, "#");
    bool needs_slash = path_len == 0 || path[0] == '?';
    if (path_len + 1 >= sizeof out.path)
        return errmsg_set(err, ERR_INVALID, "invalid target URL: the path is too long");
    if (!is_clean(path, path_len))
        return errmsg_set(err, ERR_INVALID, "invalid target URL: spaces or control bytes");
    snprintf(out.path, sizeof out.path, "%s%.*s", needs_slash ? "/" : "", (int)path_len, path);
    *t = out;
    return ERR_OK;
}

/* ---- the exchange ---- */

/* Waits until fd is ready for events or the deadline passes: true when ready. */
static bool wait_fd(int fd, short events, double deadline_ms)
{
    for (;;) {
        double left = deadline_ms - clock_now_ms();
        if (left <= 0) return false;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left + 1);
        if (n > 0) return true;
        if (n < 0 && errno != EINTR) return false;
    }
}

static int connect_target(const struct cors_proxy_target *t, int *fd_out, struct errmsg *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(t->host, t->port, &hints, &res);
    if (gai != 0)
        return errmsg_set(err, ERR_IO, "cannot resolve '%s': %s", t->host, gai_strerror(gai));
    int e = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        int soe = 0;
        socklen_t len = sizeof soe;
        bool is_ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        if (!is_ok && errno == EINPROGRESS &&
            wait_fd(fd, POLLOUT, clock_now_ms() + PROXY_CONNECT_MS) &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soe, &len) == 0)
            is_ok = soe == 0;
        if (is_ok) {
            freeaddrinfo(res);
            *fd_out = fd;
            return ERR_OK;
        }
        e = soe ? soe : errno;
        close(fd);
    }
    freeaddrinfo(res);
    return errmsg_set(err, ERR_IO, "cannot connect to %s:%s: %s", t->host, t->port,
                      e ? strerror(e) : "timed out");
}

static int send_all(int fd, const char *p, size_t n, struct errmsg *err)
{
    double deadline = clock_now_ms() + PROXY_IO_MS;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w, n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(fd, POLLOUT, deadline))
                return errmsg_set(err, ERR_TIMEOUT, "the target did not take the request");
        } else {
            return errmsg_set(err, ERR_IO, "sending to the target: %s", strerror(errno));
        }
    }
    return ERR_OK;
}

/* Reads until the target closes (the request said Connection: close). */
static int recv_all(int fd, struct buf *out, struct errmsg *err)
{
    char chunk[16384];
    for (;;) {
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r == 0) return ERR_OK;
        if (r > 0) {
            if (out->len + (size_t)r > PROXY_ANSWER_MAX)
                return errmsg_set(err, ERR_LIMIT, "the target's answer is over %u bytes",
                                  PROXY_ANSWER_MAX);
            if (buf_append(out, chunk, (size_t)r) != ERR_OK) return ERR_NOMEM;
        } else if (errno == EAGAIN || errno == EINTR) {
            if (!wait_fd(fd, POLLIN, clock_now_ms() + PROXY_IO_MS))
                return errmsg_set(err, ERR_TIMEOUT, "the target sent nothing for %d s",
                                  PROXY_IO_MS / 1000);
        } else {
            return errmsg_set(err, ERR_IO, "reading from the target: %s", strerror(errno));
        }
    }
}

/* ---- the request ---- */

struct forward {
    struct buf *out;
    int rc;
};

/* Forwards x-llama-server-proxy-header-NAME as NAME, except what framing or the connection
 * owns here (and Accept-Encoding: the answer is relayed without its encoding header). */
static void forward_header(void *arg, const char *name, const char *value)
{
    static const char *const skip[] = {
        "host", "content-length", "transfer-encoding", "connection",     "keep-alive", "upgrade",
        "te",   "trailer",        "proxy-connection",  "accept-encoding"};
    struct forward *f = arg;
    size_t pfx = sizeof PROXY_HEADER_PFX - 1;
    if (strncasecmp(name, PROXY_HEADER_PFX, pfx) != 0 || !name[pfx]) return;
    const char *real = name + pfx;
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strcasecmp(real, skip[i]) == 0) return;
    if (strpbrk(real, "\r\n: ") || strpbrk(value, "\r\n")) return;
    if (f->rc == ERR_OK) f->rc = buf_printf(f->out, "%s: %s\r\n", real, value);
}

static int build_request(const struct api_request *req, const struct cors_proxy_target *t,
                         struct buf *out)
{
    bool is_post = strcmp(req->method, "POST") == 0;
    bool is_v6 = strchr(t->host, ':') != NULL;
    bool is_default_port = strcmp(t->port, t->is_https ? "443" : "80") == 0;
    int rc =
        buf_printf(out, "%s %s HTTP/1.1\r\nHost: %s%s%s%s%s\r\nConnection: close\r\n",
                   is_post ? "POST" : "GET", t->path, is_v6 ? "[" : "", t->host, is_v6 ? "]" : "",
                   is_default_port ? "" : ":", is_default_port ? "" : t->port);
    struct forward f = {.out = out, .rc = rc};
    if (rc == ERR_OK && req->headers) req->headers(req->conn, forward_header, &f);
    rc = f.rc;
    if (rc == ERR_OK && is_post) rc = buf_printf(out, "Content-Length: %zu\r\n", req->body_len);
    if (rc == ERR_OK) rc = buf_append_cstr(out, "\r\n");
    if (rc == ERR_OK && is_post) rc = buf_append(out, req->body, req->body_len);
    return rc;
}

/* ---- the answer ---- */

struct answer {
    int status;
    const char *head_end; // first body byte
    const char *end;
    bool is_chunked;
    long long content_length; // -1: up to the close
};

/* The value of header name in the head [p, end), or NULL; *len its length. */
static const char *head_value(const char *p, const char *end, const char *name, size_t *len)
{
    size_t n = strlen(name);
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) break;
        if ((size_t)(eol - p) > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *len = (size_t)(ve - v);
            return v;
        }
        p = eol + 1;
    }
    return NULL;
}

static int parse_answer(const char *data, size_t n, struct answer *a, struct errmsg *err)
{
    const char *end = data + n;
    const char *head_end = NULL;
    for (const char *p = data; p + 3 < end && !head_end; p++)
        if (p[0] == '\r' && p[1] == '\n' && p[2] == '\r' && p[3] == '\n') head_end = p + 4;
    int status = 0;
    if (!head_end || sscanf(data, "HTTP/1.%*1[01] %3d", &status) != 1 || status < 100 ||
        status > 599)
        return errmsg_set(err, ERR_FORMAT, "the target's answer is not HTTP/1.x");
    *a = (struct answer){.status = status, .head_end = head_end, .end = end, .content_length = -1};
    size_t len = 0;
    const char *te = head_value(data, head_end, "Transfer-Encoding", &len);
    a->is_chunked = te && len >= 7 && strncasecmp(te + len - 7, "chunked", 7) == 0;
    const char *cl = head_value(data, head_end, "Content-Length", &len);
    if (cl && !a->is_chunked) {
        char num[24];
        snprintf(num, sizeof num, "%.*s", (int)(len < 23 ? len : 23), cl);
        char *stop = NULL;
        long long v = strtoll(num, &stop, 10);
        if (stop == num || *stop || v < 0)
            return errmsg_set(err, ERR_FORMAT, "the target sent a bad Content-Length");
        a->content_length = v;
    }
    return ERR_OK;
}

/* Decodes a chunked body [p, end) into out. */
static int dechunk(const char *p, const char *end, struct buf *out, struct errmsg *err)
{
    for (;;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) return errmsg_set(err, ERR_FORMAT, "the target's chunked answer is cut short");
        char *stop = NULL;
        unsigned long long size = strtoull(p, &stop, 16);
        if (stop == p) return errmsg_set(err, ERR_FORMAT, "the target sent a bad chunk size");
        p = eol + 1;
        if (size == 0) return ERR_OK; // trailers are dropped
        if (size > (unsigned long long)(end - p))
            return errmsg_set(err, ERR_FORMAT, "the target's chunked answer is cut short");
        if (buf_append(out, p, (size_t)size) != ERR_OK) return ERR_NOMEM;
        p += size;
        if (p < end && *p == '\r') p++;
        if (p < end && *p == '\n') p++;
    }
}

/* The target's body into resp, its status and Content-Type too. */
static int relay(const struct answer *a, const char *head, struct api_response *resp,
                 struct errmsg *err)
{
    int rc = ERR_OK;
    size_t avail = (size_t)(a->end - a->head_end);
    bool has_body = a->status >= 200 && a->status != 204 && a->status != 304;
    if (has_body && a->is_chunked) {
        rc = dechunk(a->head_end, a->end, &resp->body, err);
    } else if (has_body) {
        size_t n = a->content_length >= 0 && (unsigned long long)a->content_length < avail
                       ? (size_t)a->content_length
                       : avail;
        rc = buf_append(&resp->body, a->head_end, n);
    }
    if (rc != ERR_OK) return rc;
    resp->status = a->status;
    resp->content_type = NULL;
    size_t len = 0;
    const char *ct = head_value(head, a->head_end, "Content-Type", &len);
    char value[128];
    if (ct && len < sizeof value) {
        memcpy(value, ct, len);
        value[len] = 0;
        api_response_add_header(resp, "Content-Type", value);
    }
    return ERR_OK;
}

/* ---- the handler ---- */

static int exchange(const struct api_request *req, const struct cors_proxy_target *t,
                    struct buf *answer, struct errmsg *err)
{
    struct buf out;
    buf_init(&out);
    int rc = build_request(req, t, &out);
    int fd = -1;
    if (rc == ERR_OK) rc = connect_target(t, &fd, err);
    if (rc == ERR_OK) rc = send_all(fd, out.data, out.len, err);
    if (rc == ERR_OK) rc = recv_all(fd, answer, err);
    if (fd >= 0) close(fd);
    buf_deinit(&out);
    return rc;
}

void api_cors_proxy(const struct api_ctx *ctx, const struct api_request *req,
                    struct api_response *resp)
{
    if (!ctx->is_cors_proxy_enabled) {
        api_error(resp, 403, "feature_disabled", "feature_disabled", NULL, PROXY_DISABLED_MSG);
        return;
    }
    const char *url = req->query ? req->query(req->conn, "url") : NULL;
    struct cors_proxy_target t;
    struct errmsg err;
    errmsg_clear(&err);
    if (!url || !url[0]) {
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "invalid_value", "url",
                  "the query parameter 'url' (the target's http URL) is required");
        return;
    }
    if (cors_proxy_parse_url(url, &t, &err) != ERR_OK) {
        api_error(resp, 400, API_TYPE_INVALID_REQUEST, "invalid_value", "url", "%s", err.msg);
        return;
    }
    if (t.is_https) {
        api_error(resp, 501, API_TYPE_NOT_IMPLEMENTED, "not_implemented", "url",
                  "https targets are not supported: this server has no TLS client");
        return;
    }
    log_info("cors-proxy: %s http://%s:%s%s", req->method, t.host, t.port, t.path);
    struct buf answer;
    buf_init(&answer);
    struct answer a = {0};
    int rc = exchange(req, &t, &answer, &err);
    if (rc == ERR_OK) rc = parse_answer(answer.data ? answer.data : "", answer.len, &a, &err);
    if (rc == ERR_OK) rc = relay(&a, answer.data, resp, &err);
    if (rc == ERR_NOMEM) {
        buf_clear(&resp->body);
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
    } else if (rc != ERR_OK) {
        buf_clear(&resp->body);
        api_error(resp, rc == ERR_TIMEOUT ? 504 : 502, API_TYPE_SERVER, "bad_gateway", NULL,
                  "cors-proxy: %s", err.msg);
    }
    buf_deinit(&answer);
}
