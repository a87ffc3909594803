/* Growable buffer with doubling growth and checked sizes. */
#include "util/buf.h"

#include "util/checked.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void buf_init(struct buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void buf_deinit(struct buf *b)
{
    mem_free(b->data);
    buf_init(b);
}

int buf_reserve(struct buf *b, size_t extra)
{
    size_t need;
    if (!size_add(b->len, extra, &need) || !size_add(need, 1, &need)) return ERR_LIMIT;
    if (need <= b->cap) return ERR_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (!size_mul(cap, 2, &cap)) return ERR_LIMIT;
    }
    char *p = mem_realloc(b->data, cap);
    if (!p) return ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return ERR_OK;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
    int rc = buf_reserve(b, len);
    if (rc != ERR_OK) return rc;
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return ERR_OK;
}

int buf_append_cstr(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_append_byte(struct buf *b, char c)
{
    return buf_append(b, &c, 1);
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return ERR_INVALID;
    int rc = buf_reserve(b, (size_t)n);
    if (rc != ERR_OK) return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return ERR_OK;
}

void buf_clear(struct buf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

char *buf_steal(struct buf *b)
{
    char *p = b->data;
    buf_init(b);
    return p;
}
