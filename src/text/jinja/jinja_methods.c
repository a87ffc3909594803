/* Attribute access and the Python methods templates call on str, dict, list and the loop
 * object, plus the global functions (range, dict, namespace, raise_exception, strftime_now).
 * Mutating list/dict methods are refused like Hugging Face's immutable sandbox does. */
#include "text/jinja/jinja_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

static struct jv alloc_str(struct rstate *st, const char *p, size_t n)
{
    char *s = arena_strndup(st->arena, p ? p : "", n);
    if (!s) {
        rs_nomem(st);
        return jv_undef();
    }
    return jv_str(s, n);
}

static struct jv buf_to_str(struct rstate *st, struct buf *b, int rc)
{
    struct jv v = rc == ERR_OK ? alloc_str(st, b->data, b->len) : jv_undef();
    if (rc != ERR_OK) rs_nomem(st);
    buf_deinit(b);
    return v;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

struct jv jstr_strip(struct jv s, const struct jv *chars, int mode)
{
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n;
    bool use_chars = chars && chars->kind == JV_STR;
#define IS_STRIP(c)                                                                                \
    (use_chars ? memchr(chars->u.s.p, (c), chars->u.s.n) != NULL : is_ws((unsigned char)(c)))
    if (mode & 1)
        while (a < b && IS_STRIP(p[a]))
            a++;
    if (mode & 2)
        while (b > a && IS_STRIP(p[b - 1]))
            b--;
#undef IS_STRIP
    return jv_str(p + a, b - a);
}

static const char *find_sub(const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && memcmp(h + i, n, nn) == 0) return h + i;
    return NULL;
}

struct jv jstr_replace(struct rstate *st, struct jv s, struct jv old, struct jv rep, int64_t count)
{
    struct buf b;
    buf_init(&b);
    int rc = ERR_OK;
    const char *p = s.u.s.p, *end = p + s.u.s.n;
    int64_t done = 0;
    if (old.u.s.n == 0) { // Python inserts rep before every character and at the end
        size_t i = 0;
        while (rc == ERR_OK && (count < 0 || done < count) && i <= s.u.s.n) {
            rc = buf_append(&b, rep.u.s.p, rep.u.s.n);
            done++;
            if (i == s.u.s.n) {
                i++;
                break;
            }
            size_t j = i + 1;
            while (j < s.u.s.n && ((unsigned char)p[j] & 0xC0) == 0x80)
                j++;
            if (rc == ERR_OK) rc = buf_append(&b, p + i, j - i);
            i = j;
        }
        if (rc == ERR_OK && i <= s.u.s.n) rc = buf_append(&b, p + i, s.u.s.n - i);
        return buf_to_str(st, &b, rc);
    }
    while (rc == ERR_OK && p < end) {
        const char *hit = (count < 0 || done < count)
                              ? find_sub(p, (size_t)(end - p), old.u.s.p, old.u.s.n)
                              : NULL;
        if (!hit) {
            rc = buf_append(&b, p, (size_t)(end - p));
            break;
        }
        rc = buf_append(&b, p, (size_t)(hit - p));
        if (rc == ERR_OK) rc = buf_append(&b, rep.u.s.p, rep.u.s.n);
        p = hit + old.u.s.n;
        done++;
    }
    if (b.len == 0 && rc == ERR_OK) buf_append(&b, "", 0);
    return buf_to_str(st, &b, rc);
}

/* mode: 'u' upper, 'l' lower, 't' Python str.title, 'c' capitalize, 'j' Jinja's title. */
struct jv jstr_case(struct rstate *st, struct jv s, int mode)
{
    struct buf b;
    buf_init(&b);
    int rc = buf_reserve(&b, s.u.s.n + 8);
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s.u.s.p;
    utf8proc_ssize_t left = (utf8proc_ssize_t)s.u.s.n;
    bool prev_cased = false, first = true;
    while (left > 0 && rc == ERR_OK) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) { // invalid byte: copy it through
            cp = -1;
            k = 1;
        }
        if (cp >= 0) {
            bool up = mode == 'u' || (mode == 't' && !prev_cased) || (mode == 'c' && first) ||
                      (mode == 'j' && !prev_cased);
            bool cased = utf8proc_toupper(cp) != cp || utf8proc_tolower(cp) != cp;
            if (mode == 'j') // Jinja's title: a word starts after whitespace or -({[<
                cased = !(cp < 0x80 && strchr(" \t\n\r\f\v-({[<", (int)cp));
            int32_t out = up ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            utf8proc_uint8_t enc[4];
            utf8proc_ssize_t m = utf8proc_encode_char(out, enc);
            rc = buf_append(&b, enc, (size_t)m);
            prev_cased = cased;
        } else {
            rc = buf_append(&b, p, 1);
            prev_cased = false;
        }
        first = false;
        p += k;
        left -= k;
    }
    return buf_to_str(st, &b, rc);
}

struct jv jstr_join(struct rstate *st, const struct jlist *l, struct jv sep)
{
    struct buf b;
    buf_init(&b);
    int rc = buf_reserve(&b, 16);
    for (size_t i = 0; i < l->n && rc == ERR_OK; i++) {
        if (i > 0) rc = buf_append(&b, sep.u.s.p, sep.u.s.n);
        if (rc == ERR_OK) rc = jv_write_str(&b, l->v[i]);
    }
    return buf_to_str(st, &b, rc);
}

static void list_reverse(struct jlist *l)
{
    for (size_t i = 0; i < l->n / 2; i++) {
        struct jv t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
}

/* str.split()/rsplit() without a separator: runs of whitespace, no empty pieces; after
 * maxsplit splits the rest is one piece, whitespace on its far side kept. */
static struct jv split_ws(struct rstate *st, struct jv s, int64_t maxsplit, bool from_right)
{
    struct jlist *l = jl_new(st, 0);
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n;
    int64_t done = 0;
    while (l && a < b) {
        if (!from_right) {
            while (a < b && is_ws((unsigned char)p[a]))
                a++;
        } else {
            while (b > a && is_ws((unsigned char)p[b - 1]))
                b--;
        }
        if (a >= b) break;
        bool last = maxsplit >= 0 && done >= maxsplit;
        size_t e = from_right ? b : a;
        if (!from_right) {
            e = last ? b : e;
            while (!last && e < b && !is_ws((unsigned char)p[e]))
                e++;
            jl_push(st, l, jv_str(p + a, e - a));
            a = last ? b : e;
        } else {
            e = last ? a : e;
            while (!last && e > a && !is_ws((unsigned char)p[e - 1]))
                e--;
            jl_push(st, l, jv_str(p + e, b - e));
            b = last ? a : e;
        }
        done++;
    }
    if (l && from_right) list_reverse(l);
    return l ? jv_list(l) : jv_undef();
}

static const char *find_last(const char *h, size_t hn, const char *n, size_t nn)
{
    for (size_t i = hn; i >= nn && i > 0; i--)
        if (memcmp(h + i - nn, n, nn) == 0) return h + i - nn;
    return NULL;
}

/* str.split(sep)/rsplit(sep): exact separator, empty pieces kept. */
static struct jv split_sep(struct rstate *st, struct jv s, struct jv sep, int64_t maxsplit,
                           bool from_right)
{
    struct jlist *l = jl_new(st, 0);
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n, sn = sep.u.s.n;
    for (int64_t done = 0; l; done++) {
        bool more = maxsplit < 0 || done < maxsplit;
        const char *hit = !more        ? NULL
                          : from_right ? find_last(p + a, b - a, sep.u.s.p, sn)
                                       : find_sub(p + a, b - a, sep.u.s.p, sn);
        if (!hit) {
            jl_push(st, l, jv_str(p + a, b - a));
            break;
        }
        size_t h = (size_t)(hit - p);
        if (from_right) {
            jl_push(st, l, jv_str(p + h + sn, b - h - sn));
            b = h;
        } else {
            jl_push(st, l, jv_str(p + a, h - a));
            a = h + sn;
        }
    }
    if (l && from_right) list_reverse(l);
    return l ? jv_list(l) : jv_undef();
}

/* Python str.split / rsplit. sep NULL or None: runs of whitespace. */
static struct jv split(struct rstate *st, const struct jnode *at, struct jv s, const struct jv *sep,
                       int64_t maxsplit, bool from_right)
{
    if (!sep || sep->kind == JV_NONE) return split_ws(st, s, maxsplit, from_right);
    if (sep->kind != JV_STR || sep->u.s.n == 0) {
        rs_fail(st, at, ERR_INVALID, "empty or non-string separator");
        return jv_undef();
    }
    return split_sep(st, s, *sep, maxsplit, from_right);
}

static bool affix_match(struct jv s, struct jv affix, bool at_end)
{
    if (affix.kind != JV_STR || affix.u.s.n > s.u.s.n) return false;
    const char *p = at_end ? s.u.s.p + s.u.s.n - affix.u.s.n : s.u.s.p;
    return memcmp(p, affix.u.s.p, affix.u.s.n) == 0;
}

static bool affix_any(struct jv s, struct jv arg, bool at_end)
{
    if (arg.kind == JV_LIST) {
        for (size_t i = 0; i < arg.u.l->n; i++)
            if (affix_match(s, arg.u.l->v[i], at_end)) return true;
        return false;
    }
    return affix_match(s, arg, at_end);
}

/* str.format: {} {0} {name} and {{ }}; format specs after ':' are ignored except as text. */
static struct jv str_format(struct rstate *st, const struct jnode *at, struct jv s,
                            const struct jargs *args)
{
    struct buf b;
    buf_init(&b);
    int rc = buf_reserve(&b, s.u.s.n);
    size_t auto_idx = 0;
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    for (size_t i = 0; i < n && rc == ERR_OK; i++) {
        if ((p[i] == '{' || p[i] == '}') && i + 1 < n && p[i + 1] == p[i]) {
            rc = buf_append_byte(&b, p[i++]);
            continue;
        }
        if (p[i] != '{') {
            rc = buf_append_byte(&b, p[i]);
            continue;
        }
        const char *close = memchr(p + i, '}', n - i);
        if (!close) {
            buf_deinit(&b);
            rs_fail(st, at, ERR_INVALID, "Single '{' encountered in format string");
            return jv_undef();
        }
        size_t fl = (size_t)(close - (p + i + 1));
        const char *colon = memchr(p + i + 1, ':', fl);
        if (colon) fl = (size_t)(colon - (p + i + 1));
        const struct jv *v = NULL;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(fl < 63 ? fl : 63), p + i + 1);
        if (fl == 0)
            v = jargs_get(args, auto_idx++, NULL);
        else if (name[0] >= '0' && name[0] <= '9')
            v = jargs_get(args, (size_t)strtoul(name, NULL, 10), NULL);
        else
            v = jargs_get(args, SIZE_MAX, name);
        if (!v) {
            buf_deinit(&b);
            rs_fail(st, at, ERR_INVALID, "format: missing argument '%s'", name);
            return jv_undef();
        }
        rc = jv_write_str(&b, *v);
        i = (size_t)(close - p);
    }
    return buf_to_str(st, &b, rc);
}

static int64_t int_arg(const struct jargs *a, size_t i, const char *name, int64_t dflt)
{
    const struct jv *v = jargs_get(a, i, name);
    if (v && v->kind == JV_INT) return v->u.i;
    return dflt;
}

static bool str_arg(struct rstate *st, const struct jnode *at, const struct jargs *a, size_t i,
                    const char *name, struct jv *out)
{
    const struct jv *v = jargs_get(a, i, name);
    if (!v || v->kind != JV_STR) {
        rs_fail(st, at, ERR_INVALID, "%s: expected a string argument", name);
        return false;
    }
    *out = *v;
    return true;
}

static struct jv str_method(struct rstate *st, const struct jnode *at, struct jv s, const char *m,
                            const struct jargs *a)
{
    struct jv x, y;
    const struct jv *arg0 = jargs_get(a, 0, NULL);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
        return jstr_strip(s, jargs_get(a, 0, "chars"), m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
    if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
        return split(st, at, s, jargs_get(a, 0, "sep"), int_arg(a, 1, "maxsplit", -1), m[0] == 'r');
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (!arg0) {
            rs_fail(st, at, ERR_INVALID, "%s takes at least 1 argument", m);
            return jv_undef();
        }
        return jv_bool(affix_any(s, *arg0, m[0] == 'e'));
    }
    if (!strcmp(m, "replace")) {
        if (!str_arg(st, at, a, 0, "old", &x) || !str_arg(st, at, a, 1, "new", &y))
            return jv_undef();
        return jstr_replace(st, s, x, y, int_arg(a, 2, "count", -1));
    }
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") ||
        !strcmp(m, "capitalize"))
        return jstr_case(st, s, m[0] == 'u' ? 'u' : m[0] == 'l' ? 'l' : m[0] == 't' ? 't' : 'c');
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "count")) {
        if (!str_arg(st, at, a, 0, "sub", &x)) return jv_undef();
        int64_t count = 0, pos = -1;
        for (size_t i = 0; i + x.u.s.n <= s.u.s.n;) {
            if (memcmp(s.u.s.p + i, x.u.s.p, x.u.s.n) == 0) {
                if (pos < 0 || m[0] == 'r') pos = (int64_t)utf8_count(s.u.s.p, i);
                count++;
                i += x.u.s.n ? x.u.s.n : 1;
                if (m[0] != 'r' && m[0] != 'c') break;
            } else {
                i++;
            }
        }
        if (m[0] == 'c') return jv_int(count);
        if (m[0] == 'i' && pos < 0) rs_fail(st, at, ERR_INVALID, "substring not found");
        return jv_int(pos);
    }
    if (!strcmp(m, "format")) return str_format(st, at, s, a);
    if (!strcmp(m, "join")) {
        struct jlist *l;
        if (!arg0 || !jv_iter_list(st, at, *arg0, &l)) return jv_undef();
        return jstr_join(st, l, s);
    }
    if (!strcmp(m, "splitlines")) {
        struct jlist *l = jl_new(st, 0);
        size_t i = 0;
        while (l && i < s.u.s.n) {
            size_t e = i;
            while (e < s.u.s.n && s.u.s.p[e] != '\n' && s.u.s.p[e] != '\r')
                e++;
            jl_push(st, l, jv_str(s.u.s.p + i, e - i));
            if (e < s.u.s.n && s.u.s.p[e] == '\r' && e + 1 < s.u.s.n && s.u.s.p[e + 1] == '\n') e++;
            i = e + 1;
        }
        return l ? jv_list(l) : jv_undef();
    }
    bool all = s.u.s.n > 0;
    for (size_t i = 0; i < s.u.s.n; i++) {
        unsigned char c = (unsigned char)s.u.s.p[i];
        bool ok = !strcmp(m, "isdigit")   ? (c >= '0' && c <= '9')
                  : !strcmp(m, "isspace") ? is_ws(c)
                  : !strcmp(m, "isalpha") ? ((c | 32) >= 'a' && (c | 32) <= 'z')
                  : !strcmp(m, "isupper") ? !(c >= 'a' && c <= 'z')
                  : !strcmp(m, "islower")
                      ? !(c >= 'A' && c <= 'Z')
                      : ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9');
        all = all && ok;
    }
    return jv_bool(all);
}

static const char *const str_methods[] = {
    "strip",   "lstrip",  "rstrip",  "split",   "rsplit",     "startswith", "endswith",
    "replace", "upper",   "lower",   "title",   "capitalize", "find",       "rfind",
    "index",   "count",   "format",  "join",    "splitlines", "isdigit",    "isspace",
    "isalpha", "isupper", "islower", "isalnum", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", NULL};
static const char *const list_methods[] = {"index", "count", NULL};
static const char *const unsafe_methods[] = {"append", "extend",  "insert",     "pop",
                                             "remove", "reverse", "sort",       "clear",
                                             "update", "popitem", "setdefault", NULL};

static bool in_set(const char *const *set, const char *name)
{
    for (; *set; set++)
        if (!strcmp(*set, name)) return true;
    return false;
}

static int bound(struct rstate *st, struct jv self, const char *name, struct jv *out)
{
    struct jfunc *fn = arena_alloc(st->arena, sizeof *fn);
    if (!fn) return rs_nomem(st);
    fn->kind = FN_METHOD;
    fn->name = name;
    fn->self = self;
    out->kind = JV_FUNC;
    out->u.fn = fn;
    return ERR_OK;
}

static int loop_attr(struct rstate *st, struct jv obj, const char *name, struct jv *out)
{
    const struct loop_state *ls = obj.u.loop;
    int64_t i = (int64_t)ls->index0, n = (int64_t)ls->items->n;
    *out = jv_undef();
    if (!strcmp(name, "index"))
        *out = jv_int(i + 1);
    else if (!strcmp(name, "index0"))
        *out = jv_int(i);
    else if (!strcmp(name, "first"))
        *out = jv_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = jv_bool(i == n - 1);
    else if (!strcmp(name, "length"))
        *out = jv_int(n);
    else if (!strcmp(name, "revindex"))
        *out = jv_int(n - i);
    else if (!strcmp(name, "revindex0"))
        *out = jv_int(n - i - 1);
    else if (!strcmp(name, "previtem") && i > 0)
        *out = ls->items->v[i - 1];
    else if (!strcmp(name, "nextitem") && i + 1 < n)
        *out = ls->items->v[i + 1];
    else if (!strcmp(name, "depth"))
        *out = jv_int((int64_t)ls->depth0 + 1);
    else if (!strcmp(name, "depth0"))
        *out = jv_int((int64_t)ls->depth0);
    else if (!strcmp(name, "cycle") || !strcmp(name, "changed"))
        return bound(st, obj, name[0] == 'c' && name[1] == 'y' ? "cycle" : "changed", out);
    return ERR_OK;
}

int jinja_getattr(struct rstate *st, const struct jnode *at, struct jv obj, const char *name,
                  struct jv *out)
{
    *out = jv_undef();
    out->u.s.p = name;
    out->u.s.n = strlen(name);
    switch (obj.kind) {
    case JV_UNDEF:
        return rs_fail(st, at, ERR_INVALID, "'%.*s' is undefined (reading attribute '%s')",
                       (int)obj.u.s.n, obj.u.s.p, name);
    case JV_DICT: {
        if (!obj.u.d->is_ns && in_set(dict_methods, name)) return bound(st, obj, name, out);
        if (!obj.u.d->is_ns && in_set(unsafe_methods, name)) break;
        const struct jv *v = jd_get_cstr(obj.u.d, name);
        if (v) *out = *v;
        return ERR_OK;
    }
    case JV_LIST:
        if (in_set(list_methods, name)) return bound(st, obj, name, out);
        if (in_set(unsafe_methods, name)) break;
        return ERR_OK;
    case JV_STR:
        if (in_set(str_methods, name)) return bound(st, obj, name, out);
        return ERR_OK;
    case JV_LOOP:
        return loop_attr(st, obj, name, out);
    default:
        return ERR_OK;
    }
    return rs_fail(st, at, ERR_INVALID, "access to attribute '%s' of '%s' object is unsafe", name,
                   jv_type_name(obj));
}

static struct jv dict_method(struct rstate *st, struct jv self, const char *m,
                             const struct jargs *a)
{
    const struct jdict *d = self.u.d;
    if (!strcmp(m, "get")) {
        const struct jv *k = jargs_get(a, 0, "key"), *dflt = jargs_get(a, 1, "default");
        const struct jv *v = k ? jd_get(d, *k) : NULL;
        return v ? *v : dflt ? *dflt : jv_none();
    }
    struct jlist *l = jl_new(st, d->n);
    for (size_t i = 0; l && i < d->n; i++) {
        if (m[0] == 'k') {
            jl_push(st, l, d->keys[i]);
        } else if (m[0] == 'v') {
            jl_push(st, l, d->vals[i]);
        } else {
            struct jlist *pair = jl_new(st, 2);
            if (!pair) return jv_undef();
            pair->is_tuple = true;
            jl_push(st, pair, d->keys[i]);
            jl_push(st, pair, d->vals[i]);
            jl_push(st, l, jv_list(pair));
        }
    }
    return l ? jv_list(l) : jv_undef();
}

int jinja_call_method(struct rstate *st, const struct jnode *at, const struct jfunc *fn,
                      const struct jargs *args, struct jv *out)
{
    struct jv self = fn->self;
    const struct jv *arg0 = jargs_get(args, 0, NULL);
    *out = jv_undef();
    if (self.kind == JV_STR) {
        *out = str_method(st, at, self, fn->name, args);
    } else if (self.kind == JV_DICT) {
        *out = dict_method(st, self, fn->name, args);
    } else if (self.kind == JV_LOOP && !strcmp(fn->name, "changed")) {
        struct jlist *now = jl_new(st, args->n_pos);
        for (size_t i = 0; now && i < args->n_pos; i++)
            jl_push(st, now, args->pos[i]);
        if (!now) return st->rc;
        struct jv nv = jv_list(now);
        struct loop_state *ls = self.u.loop;
        *out = jv_bool(ls->last_changed.kind == JV_UNDEF || !jv_equal(ls->last_changed, nv));
        ls->last_changed = nv;
    } else if (self.kind == JV_LOOP) {
        if (args->n_pos == 0) return rs_fail(st, at, ERR_INVALID, "no items for cycling given");
        *out = args->pos[self.u.loop->index0 % args->n_pos];
    } else if (self.kind == JV_LIST && arg0) {
        int64_t count = 0, pos = -1;
        for (size_t i = 0; i < self.u.l->n; i++) {
            if (jv_equal(self.u.l->v[i], *arg0)) {
                count++;
                if (pos < 0) pos = (int64_t)i;
            }
        }
        if (!strcmp(fn->name, "index") && pos < 0)
            return rs_fail(st, at, ERR_INVALID, "value is not in list");
        *out = jv_int(!strcmp(fn->name, "count") ? count : pos);
    } else {
        return rs_fail(st, at, ERR_INVALID, "bad call to %s()", fn->name);
    }
    return st->rc;
}

/* ---- globals ---- */

static const char *const globals[] = {"range",           "dict",         "namespace",
                                      "raise_exception", "strftime_now", NULL};

bool jinja_global_exists(const char *name)
{
    return in_set(globals, name);
}

static int call_range(struct rstate *st, const struct jnode *at, const struct jargs *a,
                      struct jv *out)
{
    int64_t v[3] = {0, 0, 1};
    if (a->n_pos < 1 || a->n_pos > 3)
        return rs_fail(st, at, ERR_INVALID, "range expected 1 to 3 arguments");
    for (size_t i = 0; i < a->n_pos; i++) {
        if (a->pos[i].kind != JV_INT && a->pos[i].kind != JV_BOOL)
            return rs_fail(st, at, ERR_INVALID, "range: integer arguments expected");
        v[a->n_pos == 1 ? 1 : i] = a->pos[i].kind == JV_INT ? a->pos[i].u.i : a->pos[i].u.b;
    }
    if (v[2] == 0) return rs_fail(st, at, ERR_INVALID, "range() arg 3 must not be zero");
    struct jlist *l = jl_new(st, 0);
    for (int64_t i = v[0]; l && (v[2] > 0 ? i < v[1] : i > v[1]); i += v[2]) {
        if (l->n >= 1000000) return rs_fail(st, at, ERR_LIMIT, "range too large");
        if (!jl_push(st, l, jv_int(i))) return st->rc;
    }
    if (l) *out = jv_list(l);
    return st->rc;
}

/* The format is assembled from a spec checked against a fixed character set. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
int jinja_call_global(struct rstate *st, const struct jnode *at, const char *name,
                      const struct jargs *args, struct jv *out)
{
    const struct jv *arg0 = jargs_get(args, 0, NULL);
    *out = jv_undef();
    if (!strcmp(name, "range")) return call_range(st, at, args, out);
    if (!strcmp(name, "raise_exception")) {
        if (st->rc != ERR_OK) return st->rc;
        struct buf b;
        buf_init(&b);
        if (arg0) jv_write_str(&b, *arg0);
        st->rc = ERR_INVALID;
        errmsg_set(st->err, ERR_INVALID, "%s", b.data ? b.data : "");
        buf_deinit(&b);
        return st->rc;
    }
    if (!strcmp(name, "strftime_now")) {
        char tmp[256];
        if (!arg0 || arg0->kind != JV_STR)
            return rs_fail(st, at, ERR_INVALID, "strftime_now expects a format string");
        char *fmt = arena_strndup(st->arena, arg0->u.s.p, arg0->u.s.n);
        size_t n = fmt ? strftime(tmp, sizeof tmp, fmt, &st->now) : 0;
        *out = alloc_str(st, tmp, n);
        return st->rc;
    }
    // dict(...) and namespace(...): from an optional mapping plus keyword arguments
    struct jdict *d = jd_new(st, args->n_kw);
    if (!d) return st->rc;
    d->is_ns = !strcmp(name, "namespace");
    if (arg0 && arg0->kind == JV_DICT)
        for (size_t i = 0; i < arg0->u.d->n; i++)
            jd_set(st, d, arg0->u.d->keys[i], arg0->u.d->vals[i]);
    for (size_t k = 0; k < args->n_kw; k++)
        jd_set(st, d, jv_cstr(st, args->kw_names[k]), args->kw_vals[k]);
    *out = jv_dict(d);
    return st->rc;
}
#pragma GCC diagnostic pop
