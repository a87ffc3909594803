/* CORS origin policy: which Origin a response allows, from --cors-origins. */
#include "server/cors.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

bool cors_origin_is_localhost(const char *origin)
{
    const char *p = strstr(origin, "://");
    if (!p) return false;
    p += 3;
    size_t auth_len = strcspn(p, "/?#");
    const char *at = memchr(p, '@', auth_len); // userinfo: the host follows the last '@'
    for (const char *q = at; q; q = memchr(q + 1, '@', auth_len - (size_t)(q + 1 - p)))
        at = q;
    if (at) {
        auth_len -= (size_t)(at + 1 - p);
        p = at + 1;
    }
    size_t host_len;
    if (*p == '[') {
        const char *close = memchr(p, ']', auth_len);
        if (!close) return false;
        host_len = (size_t)(close + 1 - p);
    } else {
        const char *colon = memchr(p, ':', auth_len);
        host_len = colon ? (size_t)(colon - p) : auth_len;
    }
    return (host_len == 9 && strncasecmp(p, "localhost", 9) == 0) ||
           (host_len == 9 && strncmp(p, "127.0.0.1", 9) == 0) ||
           (host_len == 5 && strncmp(p, "[::1]", 5) == 0);
}

/* True when the comma-separated list holds origin exactly (items may have spaces around). */
static bool list_has(const char *list, const char *origin)
{
    size_t len = strlen(origin);
    for (const char *p = list; *p;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, ",");
        size_t k = n;
        while (k > 0 && p[k - 1] == ' ')
            k--;
        if (k == len && strncmp(p, origin, len) == 0) return true;
        p += n + (p[n] == ',');
    }
    return false;
}

static bool copy_out(const char *v, char *out, size_t cap)
{
    if (strlen(v) >= cap) return false;
    memcpy(out, v, strlen(v) + 1);
    return true;
}

bool cors_allow_origin(const char *origins, bool is_credentials, const char *origin, char *out,
                       size_t cap)
{
    bool has_origin = origin && origin[0];
    if (strcmp(origins, "*") == 0)
        return copy_out(is_credentials && has_origin ? origin : "*", out, cap);
    if (!has_origin) return false;
    if (strcmp(origins, "localhost") == 0)
        return cors_origin_is_localhost(origin) && copy_out(origin, out, cap);
    return list_has(origins, origin) && copy_out(origin, out, cap);
}
