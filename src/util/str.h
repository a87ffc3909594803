/* Borrowed byte slices. A struct str never owns its bytes and is not NUL-terminated. */
#ifndef UTIL_STR_H
#define UTIL_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct str {
    const char *ptr; // borrowed; valid as long as the owner of the bytes says
    size_t len;      // bytes
};

static inline struct str str_from_cstr(const char *s)
{
    struct str r = {s, s ? strlen(s) : 0};
    return r;
}

static inline bool str_eq_cstr(struct str a, const char *b)
{
    size_t n = strlen(b);
    return a.len == n && (n == 0 || memcmp(a.ptr, b, n) == 0);
}

static inline bool str_has_prefix(struct str a, const char *prefix)
{
    size_t n = strlen(prefix);
    return a.len >= n && memcmp(a.ptr, prefix, n) == 0;
}

#endif
