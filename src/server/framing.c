/* Request framing checks on a raw head. */
#include "server/framing.h"

#include <string.h>
#include <strings.h>

static bool is_tchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return len == strlen(want) && strncasecmp(name, want, len) == 0;
}

/* value without surrounding spaces and tabs */
static void trim(const char **v, size_t *len)
{
    while (*len && (**v == ' ' || **v == '\t'))
        (*v)++, (*len)--;
    while (*len && ((*v)[*len - 1] == ' ' || (*v)[*len - 1] == '\t'))
        (*len)--;
}

/* A Content-Length value: 1 to 18 digits and nothing else (so it cannot overflow). */
static bool parse_length(const char *v, size_t len, uint64_t *out)
{
    if (len == 0 || len > 18) return false;
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') return false;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    *out = n;
    return true;
}

struct framing {
    int n_length; // Content-Length headers
    uint64_t length;
    bool has_te;
    bool is_chunked;
};

/* One header line (without its line ending). False with *reason when it is refused. */
static bool check_header(const char *line, size_t len, struct framing *f, const char **reason)
{
    if (len && (line[0] == ' ' || line[0] == '\t'))
        return *reason = "a folded header line (obsolete line folding)", false;
    const char *colon = memchr(line, ':', len);
    if (!colon) return *reason = "a header line without a colon", false;
    size_t name_len = (size_t)(colon - line);
    for (size_t i = 0; i < name_len; i++)
        if (!is_tchar(line[i])) return *reason = "an invalid header name", false;
    if (name_len == 0) return *reason = "an empty header name", false;
    const char *v = colon + 1;
    size_t v_len = len - name_len - 1;
    trim(&v, &v_len);
    if (name_is(line, name_len, "content-length")) {
        uint64_t n;
        if (!parse_length(v, v_len, &n))
            return *reason = "Content-Length is not a non-negative decimal number", false;
        if (f->n_length++ > 0) return *reason = "more than one Content-Length", false;
        f->length = n;
    } else if (name_is(line, name_len, "transfer-encoding")) {
        if (f->has_te) return *reason = "more than one Transfer-Encoding", false;
        f->has_te = true;
        f->is_chunked = name_is(v, v_len, "chunked");
        if (!f->is_chunked) return *reason = "a Transfer-Encoding other than chunked", false;
    }
    return true;
}

/* Chunk-size lines among the bytes after the head, as far as they have arrived. */
static bool check_chunks(const char *p, size_t len, uint64_t body_max, const char **reason)
{
    size_t at = 0;
    uint64_t total = 0;
    while (at < len) {
        uint64_t size = 0;
        int n_digits = 0;
        for (; at < len; at++, n_digits++) {
            char ch = p[at];
            int d = ch >= '0' && ch <= '9'   ? ch - '0'
                    : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                    : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                             : -1;
            if (d < 0) break;
            if (n_digits >= 15) return *reason = "a chunk size too large", false;
            size = size * 16 + (uint64_t)d;
        }
        if (at == len) return true; // the line has not fully arrived
        if (n_digits == 0) return *reason = "a chunk size that is not hexadecimal", false;
        total += size;
        if (size > body_max || total > body_max)
            return *reason = "a chunk size past the body limit", false;
        const char *eol = memchr(p + at, '\n', len - at);
        if (!eol) return true;
        at = (size_t)(eol - p) + 1;
        if (size == 0) return true; // the last chunk; trailers follow
        if (len - at < size + 2) return true;
        at += size + 2; // the data and its CRLF
    }
    return true;
}

bool framing_head_ok(const char *head, size_t head_len, const char *extra, size_t extra_len,
                     uint64_t body_max, const char **reason)
{
    struct framing f = {0};
    const char *p = head, *end = head + head_len;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) return *reason = "no request line", false;
    p = eol + 1; // the request line is the HTTP library's to judge
    while (p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((eol ? eol : end) - p);
        if (len && p[len - 1] == '\r') len--;
        if (len == 0) break; // the blank line
        if (!check_header(p, len, &f, reason)) return false;
        p = eol ? eol + 1 : end;
    }
    if (f.has_te && f.n_length) return *reason = "both Content-Length and Transfer-Encoding", false;
    if (f.is_chunked && extra_len) return check_chunks(extra, extra_len, body_max, reason);
    return true;
}
