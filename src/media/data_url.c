/* RFC 2397 data URL header parsing and base64 payload decoding. */
#include "media/data_url.h"

#include "util/base64.h"
#include "util/mem.h"

#include <string.h>

static bool ascii_ieq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z') x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (unsigned char)(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

/* RFC 9110 tchar: the characters of a token (media type names, parameter names). */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static size_t token_len(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)p[i]))
        i++;
    return i;
}

bool data_url_is(struct str url)
{
    return url.len >= 5 && ascii_ieq(url.ptr, "data:", 5);
}

bool data_url_mime_is(const struct data_url *u, const char *mime)
{
    size_t n = strlen(mime);
    return u->mime.len == n && ascii_ieq(u->mime.ptr, mime, n);
}

/* Checks "type/subtype" in hdr[0..n); returns its length or 0 when malformed. */
static size_t mime_len(const char *hdr, size_t n)
{
    size_t t = token_len(hdr, n);
    if (t == 0 || t >= n || hdr[t] != '/') return 0;
    size_t s = token_len(hdr + t + 1, n - t - 1);
    return s ? t + 1 + s : 0;
}

/* Walks ";attr=value" parameters in p[0..n); the last may be the bare ";base64" flag. */
static int parse_params(const char *p, size_t n, struct data_url *u, struct errmsg *e)
{
    size_t i = 0;
    while (i < n) {
        // p[i] == ';' here: guaranteed by the caller and by the loop below.
        size_t a = i + 1;
        size_t end = a;
        while (end < n && p[end] != ';')
            end++;
        size_t attr = token_len(p + a, end - a);
        if (attr == end - a && attr == 6 && ascii_ieq(p + a, "base64", 6)) {
            if (end != n)
                return errmsg_set(e, ERR_FORMAT, "data URL: ';base64' must be the last parameter");
            u->is_base64 = true;
            u->params.len = i;
            return ERR_OK;
        }
        if (attr == 0 || a + attr >= end || p[a + attr] != '=')
            return errmsg_set(e, ERR_FORMAT, "data URL: malformed parameter '%.*s'",
                              (int)(end - i > 64 ? 64 : end - i), p + i);
        i = end;
    }
    u->params.len = n;
    return ERR_OK;
}

int data_url_parse(struct str url, struct data_url *out, struct errmsg *e)
{
    if (!data_url_is(url))
        return errmsg_set(e, ERR_FORMAT, "not a data URL (expected 'data:' prefix)");
    const char *hdr = url.ptr + 5;
    const char *comma = memchr(hdr, ',', url.len - 5);
    if (!comma) return errmsg_set(e, ERR_FORMAT, "data URL: missing ',' before the data");
    size_t hdr_len = (size_t)(comma - hdr);
    struct data_url u = {.mime = {hdr, 0}};
    if (hdr_len > 0 && hdr[0] != ';') {
        u.mime.len = mime_len(hdr, hdr_len);
        if (u.mime.len == 0 || (u.mime.len < hdr_len && hdr[u.mime.len] != ';'))
            return errmsg_set(e, ERR_FORMAT, "data URL: malformed media type '%.*s'",
                              (int)(hdr_len > 64 ? 64 : hdr_len), hdr);
    }
    u.params.ptr = hdr + u.mime.len;
    int rc = parse_params(u.params.ptr, hdr_len - u.mime.len, &u, e);
    if (rc != ERR_OK) return rc;
    u.data.ptr = comma + 1;
    u.data.len = url.len - 5 - hdr_len - 1;
    *out = u;
    return ERR_OK;
}

int data_url_decode(const struct data_url *u, size_t max_len, unsigned char **out, size_t *out_len,
                    struct errmsg *e)
{
    if (!u->is_base64)
        return errmsg_set(e, ERR_UNSUPPORTED, "data URL must be base64-encoded (';base64,')");
    if (max_len == 0) max_len = DATA_URL_DECODED_MAX;
    struct errmsg inner;
    errmsg_clear(&inner);
    int rc = base64_decode_alloc(u->data.ptr, u->data.len, max_len, BASE64_SKIP_SPACE, out, out_len,
                                 &inner);
    if (rc == ERR_FORMAT) return errmsg_set(e, rc, "data is %s", inner.msg);
    if (rc == ERR_LIMIT) return errmsg_set(e, rc, "data too large: %s", inner.msg);
    if (rc != ERR_OK) return errmsg_set(e, rc, "%s", inner.msg);
    return ERR_OK;
}
