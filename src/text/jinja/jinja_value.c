/* Jinja values: the scratch arena, lists and insertion-ordered dicts, Python truthiness,
 * equality and ordering, Python str()/repr() text, json.dumps-compatible JSON output, and
 * conversion from jansson. */
#include "text/jinja/jinja_internal.h"
#include "util/checked.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define ARENA_CHUNK 65536

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void arena_init(struct arena *a, size_t max_bytes)
{
    a->head = NULL;
    a->used = 0;
    a->max_bytes = max_bytes;
    a->over_limit = false;
}

void arena_deinit(struct arena *a)
{
    struct arena_chunk *c = a->head;
    while (c) {
        struct arena_chunk *next = c->next;
        mem_free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}

void *arena_alloc(struct arena *a, size_t size)
{
    size_t need;
    if (!size_add(size, 15, &need)) return NULL;
    need &= ~(size_t)15;
    if (need == 0) need = 16;
    if (a->max_bytes && (need > a->max_bytes || a->used > a->max_bytes - need)) {
        a->over_limit = true;
        return NULL;
    }
    struct arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK, total;
        if (!size_add(cap, sizeof *c, &total)) return NULL;
        c = mem_alloc(total);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->used += need;
    memset(p, 0, need);
    return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    size_t total;
    if (!size_add(n, 1, &total)) return NULL;
    char *p = arena_alloc(a, total);
    if (p && n) memcpy(p, s, n);
    return p;
}

/* ---- UTF-8 ---- */

size_t utf8_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t utf8_offset(const char *s, size_t n, size_t idx)
{
    size_t i = 0;
    while (i < n && idx > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
            i++;
        idx--;
    }
    return i;
}

/* ---- containers ---- */

struct jlist *jl_new(struct rstate *st, size_t cap)
{
    struct jlist *l = arena_alloc(st->arena, sizeof *l);
    if (!l) {
        rs_nomem(st);
        return NULL;
    }
    if (cap) {
        size_t bytes;
        if (!size_mul(cap, sizeof *l->v, &bytes) || !(l->v = arena_alloc(st->arena, bytes))) {
            rs_nomem(st);
            return NULL;
        }
        l->cap = cap;
    }
    return l;
}

bool jl_push(struct rstate *st, struct jlist *l, struct jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4, bytes;
        struct jv *nv;
        if (!size_mul(cap, sizeof *nv, &bytes) || !(nv = arena_alloc(st->arena, bytes))) {
            rs_nomem(st);
            return false;
        }
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return true;
}

struct jdict *jd_new(struct rstate *st, size_t cap)
{
    struct jdict *d = arena_alloc(st->arena, sizeof *d);
    if (!d) {
        rs_nomem(st);
        return NULL;
    }
    // Room for cap entries at once: a message of two keys would otherwise take eight slots
    // of keys and of values, and a long conversation's variables the memory limit.
    size_t bytes;
    if (cap &&
        (!size_mul(cap, sizeof *d->keys, &bytes) || !(d->keys = arena_alloc(st->arena, bytes)) ||
         !(d->vals = arena_alloc(st->arena, bytes)))) {
        rs_nomem(st);
        return NULL;
    }
    d->cap = cap;
    return d;
}

struct jv *jd_get(const struct jdict *d, struct jv key)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

struct jv *jd_get_cstr(const struct jdict *d, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++) {
        const struct jv *k = &d->keys[i];
        if (k->kind == JV_STR && k->u.s.n == n && memcmp(k->u.s.p, key, n) == 0) return &d->vals[i];
    }
    return NULL;
}

bool jd_set(struct rstate *st, struct jdict *d, struct jv key, struct jv val)
{
    struct jv *slot = jd_get(d, key);
    if (slot) {
        *slot = val;
        return true;
    }
    return jd_append(st, d, key, val);
}

bool jd_append(struct rstate *st, struct jdict *d, struct jv key, struct jv val)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8, bytes;
        struct jv *nk, *nv;
        if (!size_mul(cap, sizeof *nk, &bytes) || !(nk = arena_alloc(st->arena, bytes)) ||
            !(nv = arena_alloc(st->arena, bytes))) {
            rs_nomem(st);
            return false;
        }
        if (d->n) {
            memcpy(nk, d->keys, d->n * sizeof *nk);
            memcpy(nv, d->vals, d->n * sizeof *nv);
        }
        d->keys = nk;
        d->vals = nv;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    return true;
}

struct jv jv_list(struct jlist *l)
{
    struct jv v = {.kind = JV_LIST, .u.l = l};
    return v;
}

struct jv jv_dict(struct jdict *d)
{
    struct jv v = {.kind = JV_DICT, .u.d = d};
    return v;
}

struct jv jv_cstr(struct rstate *st, const char *s)
{
    (void)st;
    return jv_str(s, strlen(s));
}

/* ---- semantics ---- */

bool jv_truthy(struct jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0.0;
    case JV_STR:
        return v.u.s.n > 0;
    case JV_LIST:
        return v.u.l->n > 0 || v.u.l->is_gen; // a generator object is always true
    case JV_DICT:
        return v.u.d->n > 0 || v.u.d->is_ns;
    default:
        return true;
    }
}

static bool is_num(struct jv v)
{
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}

static double num_f(struct jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}

static int64_t num_i(struct jv v)
{
    return v.kind == JV_INT ? v.u.i : (int64_t)v.u.b;
}

bool jv_equal(struct jv a, struct jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
        return a.u.s.n == b.u.s.n && (a.u.s.n == 0 || memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0);
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            const struct jv *o = jd_get(b.u.d, a.u.d->keys[i]);
            if (!o || !jv_equal(a.u.d->vals[i], *o)) return false;
        }
        return true;
    case JV_FUNC:
        return a.u.fn == b.u.fn;
    case JV_LOOP:
        return a.u.loop == b.u.loop;
    default:
        return false;
    }
}

static int fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static uint32_t utf8_decode(const char *s, size_t n, size_t *i);

/* Python's a.lower() < b.lower(): code points compared after lower-casing. */
static int casefold_cmp(struct jv a, struct jv b)
{
    size_t i = 0, j = 0;
    while (i < a.u.s.n && j < b.u.s.n) {
        int32_t x = utf8proc_tolower((int32_t)utf8_decode(a.u.s.p, a.u.s.n, &i));
        int32_t y = utf8proc_tolower((int32_t)utf8_decode(b.u.s.p, b.u.s.n, &j));
        if (x != y) return x < y ? -1 : 1;
    }
    return i < a.u.s.n ? 1 : j < b.u.s.n ? -1 : 0;
}

bool jv_compare(struct jv a, struct jv b, bool casefold, int *out)
{
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            *out = x < y ? -1 : x > y ? 1 : 0;
        } else {
            int64_t x = num_i(a), y = num_i(b);
            *out = x < y ? -1 : x > y ? 1 : 0;
        }
        return true;
    }
    if (a.kind == JV_STR && b.kind == JV_STR && casefold) {
        *out = casefold_cmp(a, b);
        return true;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        for (size_t i = 0; i < n; i++) {
            int x = (unsigned char)a.u.s.p[i], y = (unsigned char)b.u.s.p[i];
            if (casefold) {
                x = fold((unsigned char)x);
                y = fold((unsigned char)y);
            }
            if (x != y) {
                *out = x < y ? -1 : 1;
                return true;
            }
        }
        *out = a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n ? 1 : 0;
        return true;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_equal(a.u.l->v[i], b.u.l->v[i])) continue;
            return jv_compare(a.u.l->v[i], b.u.l->v[i], casefold, out);
        }
        *out = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
        return true;
    }
    return false;
}

const char *jv_type_name(struct jv v)
{
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int",      "float",
                                        "str",       "list",     "dict", "function", "LoopContext"};
    if (v.kind == JV_LIST && v.u.l->is_tuple) return "tuple";
    if (v.kind == JV_LIST && v.u.l->is_gen) return "generator";
    if (v.kind == JV_DICT && v.u.d->is_ns) return "Namespace";
    return names[v.kind];
}

/* ---- text ---- */

void py_float_repr(double f, char *out, size_t cap)
{
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    // e is [-]d[.ddd]e[+-]XX: collect the digits and the exponent
    char dig[24];
    size_t nd = 0;
    const char *q = e;
    bool neg = *q == '-';
    if (neg) q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < sizeof dig - 1) dig[nd++] = *q;
    dig[nd] = 0;
    int exp = *q == 'e' ? atoi(q + 1) : 0;
    while (nd > 1 && dig[nd - 1] == '0')
        dig[--nd] = 0;
    size_t k = 0;
    char o[64];
    if (neg) o[k++] = '-';
    if (exp < -4 || exp >= 16) {
        o[k++] = dig[0];
        if (nd > 1) {
            o[k++] = '.';
            for (size_t i = 1; i < nd; i++)
                o[k++] = dig[i];
        }
        k += (size_t)snprintf(o + k, sizeof o - k, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    } else if (exp < 0) {
        o[k++] = '0';
        o[k++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            o[k++] = '0';
        for (size_t i = 0; i < nd; i++)
            o[k++] = dig[i];
    } else {
        for (int i = 0; i <= exp; i++)
            o[k++] = (size_t)i < nd ? dig[i] : '0';
        o[k++] = '.';
        if ((size_t)exp + 1 < nd) {
            for (size_t i = (size_t)exp + 1; i < nd; i++)
                o[k++] = dig[i];
        } else {
            o[k++] = '0';
        }
    }
    o[k] = 0;
    snprintf(out, cap, "%s", o);
}

static int write_py_str_repr(struct buf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    int rc = buf_append_byte(b, q);
    for (size_t i = 0; i < n && rc == ERR_OK; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == (unsigned char)q) {
            char esc[2] = {'\\', (char)c};
            rc = buf_append(b, esc, 2);
        } else if (c == '\n') {
            rc = buf_append(b, "\\n", 2);
        } else if (c == '\r') {
            rc = buf_append(b, "\\r", 2);
        } else if (c == '\t') {
            rc = buf_append(b, "\\t", 2);
        } else if (c < 0x20 || c == 0x7f) {
            rc = buf_printf(b, "\\x%02x", c);
        } else {
            rc = buf_append_byte(b, (char)c);
        }
    }
    return rc == ERR_OK ? buf_append_byte(b, q) : rc;
}

static int write_scalar(struct buf *b, struct jv v)
{
    char tmp[64];
    switch (v.kind) {
    case JV_UNDEF:
        return ERR_OK;
    case JV_NONE:
        return buf_append_cstr(b, "None");
    case JV_BOOL:
        return buf_append_cstr(b, v.u.b ? "True" : "False");
    case JV_INT:
        return buf_printf(b, "%lld", (long long)v.u.i);
    case JV_FLOAT:
        py_float_repr(v.u.f, tmp, sizeof tmp);
        return buf_append_cstr(b, tmp);
    case JV_STR:
        return buf_append(b, v.u.s.p, v.u.s.n);
    case JV_FUNC:
        return buf_append_cstr(b, "<function>");
    default:
        return buf_append_cstr(b, "<LoopContext>");
    }
}

int jv_write_repr(struct buf *b, struct jv v)
{
    int rc = ERR_OK;
    if (v.kind == JV_STR) return write_py_str_repr(b, v.u.s.p, v.u.s.n);
    if (v.kind == JV_LIST) {
        const struct jlist *l = v.u.l;
        rc = buf_append_byte(b, l->is_tuple ? '(' : '[');
        for (size_t i = 0; i < l->n && rc == ERR_OK; i++) {
            if (i > 0) rc = buf_append(b, ", ", 2);
            if (rc == ERR_OK) rc = jv_write_repr(b, l->v[i]);
        }
        if (rc == ERR_OK && l->is_tuple && l->n == 1) rc = buf_append_byte(b, ',');
        return rc == ERR_OK ? buf_append_byte(b, l->is_tuple ? ')' : ']') : rc;
    }
    if (v.kind == JV_DICT) {
        const struct jdict *d = v.u.d;
        if (d->is_ns) rc = buf_append_cstr(b, "<Namespace ");
        rc = rc == ERR_OK ? buf_append_byte(b, '{') : rc;
        for (size_t i = 0; i < d->n && rc == ERR_OK; i++) {
            if (i > 0) rc = buf_append(b, ", ", 2);
            if (rc == ERR_OK) rc = jv_write_repr(b, d->keys[i]);
            if (rc == ERR_OK) rc = buf_append(b, ": ", 2);
            if (rc == ERR_OK) rc = jv_write_repr(b, d->vals[i]);
        }
        rc = rc == ERR_OK ? buf_append_byte(b, '}') : rc;
        return rc == ERR_OK && d->is_ns ? buf_append_byte(b, '>') : rc;
    }
    if (v.kind == JV_UNDEF) return buf_append_cstr(b, "Undefined");
    return write_scalar(b, v);
}

int jv_write_str(struct buf *b, struct jv v)
{
    if (v.kind == JV_LIST || v.kind == JV_DICT) return jv_write_repr(b, v);
    return write_scalar(b, v);
}

bool jv_to_str(struct rstate *st, struct jv v, struct jv *out)
{
    if (v.kind == JV_STR) {
        *out = v;
        return true;
    }
    struct buf b;
    buf_init(&b);
    int rc = jv_write_str(&b, v);
    char *s = rc == ERR_OK ? arena_strndup(st->arena, b.data ? b.data : "", b.len) : NULL;
    size_t n = b.len;
    buf_deinit(&b);
    if (!s) {
        rs_nomem(st);
        return false;
    }
    *out = jv_str(s, n);
    return true;
}

/* ---- JSON ---- */

/* One code point at *i (advanced past it); invalid bytes decode as themselves. */
static uint32_t utf8_decode(const char *s, size_t n, size_t *i)
{
    unsigned char c = (unsigned char)s[*i];
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    uint32_t cp = len == 1 ? c : c & (0x3Fu >> (len - 1));
    if (*i + (size_t)len > n) {
        (*i)++;
        return c;
    }
    for (int k = 1; k < len; k++) {
        unsigned char cc = (unsigned char)s[*i + (size_t)k];
        if ((cc & 0xC0) != 0x80) {
            (*i)++;
            return c;
        }
        cp = (cp << 6) | (cc & 0x3F);
    }
    *i += (size_t)len;
    return cp;
}

/* A JSON string; ascii: escape everything outside ' '..'~' as \uXXXX (surrogate pairs). */
static int write_json_str(struct buf *b, const char *s, size_t n, bool ascii)
{
    int rc = buf_append_byte(b, '"');
    size_t run = 0; // start of the pending unescaped run
    for (size_t i = 0; i < n && rc == ERR_OK; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && (!ascii || c < 0x7f)) continue;
        if (ascii && c >= 0x7f) {
            rc = buf_append(b, s + run, i - run);
            size_t k = i;
            uint32_t cp = utf8_decode(s, n, &k);
            if (rc == ERR_OK && cp >= 0x10000)
                rc = buf_printf(b, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                                0xDC00 + ((cp - 0x10000) & 0x3FF));
            else if (rc == ERR_OK)
                rc = buf_printf(b, "\\u%04x", cp);
            i = k - 1;
            run = k;
            continue;
        }
        rc = buf_append(b, s + run, i - run);
        run = i + 1;
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                                      : NULL;
        if (rc == ERR_OK) rc = esc ? buf_append_cstr(b, esc) : buf_printf(b, "\\u%04x", c);
    }
    if (rc == ERR_OK) rc = buf_append(b, s + run, n - run);
    return rc == ERR_OK ? buf_append_byte(b, '"') : rc;
}

static int json_newline(struct buf *b, int indent, int level)
{
    if (indent < 0) return ERR_OK;
    int rc = buf_append_byte(b, '\n');
    for (int i = 0; i < indent * level && rc == ERR_OK; i++)
        rc = buf_append_byte(b, ' ');
    return rc;
}

/* A dict key as json.dumps converts it; false for keys it rejects. */
static bool json_key(struct rstate *st, struct jv k, struct jv *out)
{
    if (k.kind == JV_STR) {
        *out = k;
        return true;
    }
    if (k.kind == JV_BOOL) {
        *out = jv_cstr(st, k.u.b ? "true" : "false");
        return true;
    }
    if (k.kind == JV_NONE) {
        *out = jv_cstr(st, "null");
        return true;
    }
    if (k.kind == JV_INT || k.kind == JV_FLOAT) return jv_to_str(st, k, out);
    return false;
}

static int json_dict(struct rstate *st, struct buf *b, const struct jdict *d,
                     const struct json_fmt *fmt, int depth)
{
    int indent = fmt->indent;
    bool sort_keys = fmt->sort_keys;
    if (d->n == 0) return buf_append_cstr(b, "{}");
    size_t *order = arena_alloc(st->arena, d->n * sizeof *order);
    struct jv *keys = arena_alloc(st->arena, d->n * sizeof *keys);
    if (!order || !keys) return rs_nomem(st);
    for (size_t i = 0; i < d->n; i++) {
        order[i] = i;
        if (!json_key(st, d->keys[i], &keys[i]))
            return rs_fail(st, NULL, ERR_INVALID, "keys must be str, int, float, bool or None");
    }
    for (size_t i = 1; sort_keys && i < d->n; i++) { // insertion sort: dicts are small
        for (size_t j = i; j > 0; j--) {
            int c = 0;
            jv_compare(keys[order[j - 1]], keys[order[j]], false, &c);
            if (c <= 0) break;
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    }
    int rc = buf_append_byte(b, '{');
    for (size_t i = 0; i < d->n && rc == ERR_OK; i++) {
        if (i > 0) rc = buf_append_cstr(b, fmt->item_sep);
        if (rc == ERR_OK) rc = json_newline(b, indent, depth + 1);
        if (rc == ERR_OK)
            rc = write_json_str(b, keys[order[i]].u.s.p, keys[order[i]].u.s.n, fmt->ensure_ascii);
        if (rc == ERR_OK) rc = buf_append_cstr(b, fmt->key_sep);
        if (rc == ERR_OK) rc = jv_write_json(st, b, d->vals[order[i]], fmt, depth + 1);
    }
    if (rc == ERR_OK) rc = json_newline(b, indent, depth);
    return rc == ERR_OK ? buf_append_byte(b, '}') : rc;
}

int jv_write_json(struct rstate *st, struct buf *b, struct jv v, const struct json_fmt *fmt,
                  int depth)
{
    int indent = fmt->indent;
    char tmp[64];
    if (depth > 200) return rs_fail(st, NULL, ERR_LIMIT, "tojson: value nested too deeply");
    switch (v.kind) {
    case JV_NONE:
        return buf_append_cstr(b, "null");
    case JV_BOOL:
        return buf_append_cstr(b, v.u.b ? "true" : "false");
    case JV_INT:
        return buf_printf(b, "%lld", (long long)v.u.i);
    case JV_FLOAT:
        if (isnan(v.u.f)) return buf_append_cstr(b, "NaN");
        if (isinf(v.u.f)) return buf_append_cstr(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        py_float_repr(v.u.f, tmp, sizeof tmp);
        return buf_append_cstr(b, tmp);
    case JV_STR:
        return write_json_str(b, v.u.s.p, v.u.s.n, fmt->ensure_ascii);
    case JV_LIST: {
        if (v.u.l->is_gen) break;
        if (v.u.l->n == 0) return buf_append_cstr(b, "[]");
        int rc = buf_append_byte(b, '[');
        for (size_t i = 0; i < v.u.l->n && rc == ERR_OK; i++) {
            if (i > 0) rc = buf_append_cstr(b, fmt->item_sep);
            if (rc == ERR_OK) rc = json_newline(b, indent, depth + 1);
            if (rc == ERR_OK) rc = jv_write_json(st, b, v.u.l->v[i], fmt, depth + 1);
        }
        if (rc == ERR_OK) rc = json_newline(b, indent, depth);
        return rc == ERR_OK ? buf_append_byte(b, ']') : rc;
    }
    case JV_DICT:
        if (v.u.d->is_ns) break;
        return json_dict(st, b, v.u.d, fmt, depth);
    default:
        break;
    }
    return rs_fail(st, NULL, ERR_INVALID, "Object of type %s is not JSON serializable",
                   jv_type_name(v));
}

bool jv_from_json(struct rstate *st, const json_t *j, struct jv *out, int depth)
{
    if (depth > 200) {
        rs_fail(st, NULL, ERR_LIMIT, "context nested too deeply");
        return false;
    }
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        struct jdict *d = jd_new(st, json_object_size(j));
        const char *key;
        json_t *val;
        if (!d) return false;
        json_object_foreach((json_t *)(uintptr_t)j, key, val)
        {
            struct jv v;
            // a jansson object holds each key once, so no lookup: one per key made a wide
            // object (a tool schema's properties) quadratic
            if (!jv_from_json(st, val, &v, depth + 1) || !jd_append(st, d, jv_cstr(st, key), v))
                return false;
        }
        *out = jv_dict(d);
        return true;
    }
    case JSON_ARRAY: {
        struct jlist *l = jl_new(st, json_array_size(j));
        if (!l) return false;
        for (size_t i = 0; i < json_array_size(j); i++) {
            struct jv v;
            if (!jv_from_json(st, json_array_get(j, i), &v, depth + 1) || !jl_push(st, l, v))
                return false;
        }
        *out = jv_list(l);
        return true;
    }
    case JSON_STRING:
        *out = jv_str(json_string_value(j), json_string_length(j));
        return true;
    case JSON_INTEGER:
        *out = jv_int((int64_t)json_integer_value(j));
        return true;
    case JSON_REAL:
        *out = jv_float(json_real_value(j));
        return true;
    case JSON_TRUE:
    case JSON_FALSE:
        *out = jv_bool(json_is_true(j));
        return true;
    default:
        *out = jv_none();
        return true;
    }
}

bool jv_iter_list(struct rstate *st, const struct jnode *at, struct jv v, struct jlist **out)
{
    struct jlist *l;
    switch (v.kind) {
    case JV_LIST:
        *out = v.u.l;
        return true;
    case JV_UNDEF:
        return (*out = jl_new(st, 0)) != NULL;
    case JV_DICT:
        if (v.u.d->is_ns) break;
        if (!(l = jl_new(st, v.u.d->n))) return false;
        for (size_t i = 0; i < v.u.d->n; i++)
            jl_push(st, l, v.u.d->keys[i]);
        *out = l;
        return true;
    case JV_STR:
        if (!(l = jl_new(st, v.u.s.n))) return false;
        for (size_t i = 0; i < v.u.s.n;) {
            size_t j = i + 1;
            while (j < v.u.s.n && ((unsigned char)v.u.s.p[j] & 0xC0) == 0x80)
                j++;
            jl_push(st, l, jv_str(v.u.s.p + i, j - i));
            i = j;
        }
        *out = l;
        return true;
    default:
        break;
    }
    rs_fail(st, at, ERR_INVALID, "'%s' object is not iterable", jv_type_name(v));
    return false;
}
