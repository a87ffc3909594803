/* Jinja2 3.1 tests (defined, string, mapping, ...) and the numeric and miscellaneous filters,
 * plus the filter/test dispatch. Unknown filters and tests fail at run time, as Jinja2 does
 * for names it cannot resolve. */
#include "text/jinja/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static struct jv mk_str(struct rstate *st, const char *p, size_t n)
{
    char *s = arena_strndup(st->arena, p ? p : "", n);
    if (!s) {
        rs_nomem(st);
        return jv_undef();
    }
    return jv_str(s, n);
}

static bool is_intlike(struct jv v)
{
    return v.kind == JV_INT || v.kind == JV_BOOL;
}

static double num(struct jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}

static int f_first_last(struct rstate *st, const struct jnode *at, struct jv in, bool last,
                        struct jv *out)
{
    struct jlist *l;
    if (!jv_iter_list(st, at, in, &l)) return st->rc;
    *out = l->n ? l->v[last ? l->n - 1 : 0] : jv_undef();
    return ERR_OK;
}

static int f_first(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    (void)a;
    return f_first_last(st, at, in, false, out);
}

static int f_last(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                  struct jv *out)
{
    (void)a;
    return f_first_last(st, at, in, true, out);
}

static int f_reverse(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                     struct jv *out)
{
    (void)a;
    struct jlist *l, *r;
    if (!jv_iter_list(st, at, in, &l) || !(r = jl_new(st, l->n))) return st->rc;
    for (size_t i = l->n; i > 0; i--)
        jl_push(st, r, l->v[i - 1]);
    if (in.kind != JV_STR) { // reversed() is an iterator in Jinja2
        r->is_gen = true;
        *out = jv_list(r);
        return st->rc;
    }
    struct jv empty = jv_str("", 0);
    *out = jstr_join(st, r, empty);
    return st->rc;
}

static int f_int(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                 struct jv *out)
{
    if (in.kind == JV_UNDEF) // Undefined refuses numeric conversion
        return rs_fail(st, at, ERR_INVALID, "'%.*s' is undefined", (int)in.u.s.n, in.u.s.p);
    const struct jv *dflt = jargs_get(a, 0, "default");
    int64_t base = 10;
    const struct jv *b = jargs_get(a, 1, "base");
    if (b && b->kind == JV_INT) base = b->u.i;
    *out = dflt ? *dflt : jv_int(0);
    if (is_intlike(in)) {
        *out = jv_int(in.kind == JV_INT ? in.u.i : in.u.b);
    } else if (in.kind == JV_FLOAT && isfinite(in.u.f) && fabs(in.u.f) < 9.2e18) {
        *out = jv_int((int64_t)in.u.f);
    } else if (in.kind == JV_STR) {
        char *s = arena_alloc(st->arena, in.u.s.n + 1), *end;
        if (!s) return rs_nomem(st);
        size_t k = 0;
        for (size_t i = 0; i < in.u.s.n; i++) // Python allows 1_000
            if (in.u.s.p[i] != '_' || i == 0 || i + 1 == in.u.s.n) s[k++] = in.u.s.p[i];
        long long v = strtoll(s, &end, (int)(base >= 2 && base <= 36 ? base : 10));
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != s && *end == 0) {
            *out = jv_int(v);
        } else {
            double d = strtod(s, &end);
            if (end != s && *end == 0 && isfinite(d) && fabs(d) < 9.2e18) *out = jv_int((int64_t)d);
        }
    }
    return st->rc;
}

static int f_float(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    if (in.kind == JV_UNDEF) // Undefined refuses numeric conversion
        return rs_fail(st, at, ERR_INVALID, "'%.*s' is undefined", (int)in.u.s.n, in.u.s.p);
    const struct jv *dflt = jargs_get(a, 0, "default");
    *out = dflt ? *dflt : jv_float(0.0);
    if (in.kind == JV_INT || in.kind == JV_BOOL || in.kind == JV_FLOAT) {
        *out = jv_float(num(in));
    } else if (in.kind == JV_STR) {
        char *s = arena_strndup(st->arena, in.u.s.p, in.u.s.n), *end;
        if (!s) return rs_nomem(st);
        double d = strtod(s, &end);
        if (end != s && *end == 0) *out = jv_float(d);
    }
    return st->rc;
}

static int f_round(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    const struct jv *p = jargs_get(a, 0, "precision"), *m = jargs_get(a, 1, "method");
    if (in.kind != JV_INT && in.kind != JV_FLOAT && in.kind != JV_BOOL)
        return rs_fail(st, at, ERR_INVALID, "round: a number is required");
    int64_t prec = p && p->kind == JV_INT ? p->u.i : 0;

    if (prec > 15) prec = 15;
    if (prec < -15) prec = -15;
    double scale = pow(10.0, (double)prec), x = num(in) * scale;
    const char *method = m && m->kind == JV_STR ? m->u.s.p : "common";
    if (!strncmp(method, "ceil", 4) || !strncmp(method, "floor", 5)) {
        *out = jv_float((method[0] == 'c' ? ceil(x) : floor(x)) / scale);
        return ERR_OK;
    }
    if (in.kind != JV_FLOAT) { // Python's round() keeps ints ints (ties to even)
        *out = prec >= 0 ? jv_int(in.kind == JV_INT ? in.u.i : in.u.b)
                         : jv_int((int64_t)(nearbyint(x) / scale));
        return ERR_OK;
    }
    if (prec < 0 || !isfinite(num(in))) {
        *out = jv_float(nearbyint(x) / scale);
        return ERR_OK;
    }
    // Python's round() is correctly rounded with ties to even, like printf's %.*f
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%.*f", (int)prec, num(in));
    *out = jv_float(strtod(tmp, NULL));
    return ERR_OK;
}

static int f_abs(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                 struct jv *out)
{
    (void)a;
    if (in.kind == JV_FLOAT)
        *out = jv_float(fabs(in.u.f));
    else if (is_intlike(in) && !(in.kind == JV_INT && in.u.i == INT64_MIN))
        *out = jv_int(in.kind == JV_INT ? llabs(in.u.i) : in.u.b);
    else
        return rs_fail(st, at, ERR_INVALID, "bad operand type for abs(): '%s'", jv_type_name(in));
    return ERR_OK;
}

static int f_sum(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                 struct jv *out)
{
    struct jlist *l;
    const struct jv *attr = jargs_get(a, 0, "attribute"), *start = jargs_get(a, 1, "start");
    if (!jv_iter_list(st, at, in, &l)) return st->rc;
    struct jv acc = start ? *start : jv_int(0);
    for (size_t i = 0; i < l->n && st->rc == ERR_OK; i++) {
        struct jv v =
            attr && attr->kind == JV_STR ? jinja_attr_path(st, at, l->v[i], *attr) : l->v[i];
        acc = jinja_binop(st, at, '+', acc, v);
    }
    *out = acc;
    return st->rc;
}

static int f_minmax(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    bool is_max, struct jv *out)
{
    struct jlist *l;
    bool casefold =
        !(jargs_get(a, 0, "case_sensitive") && jv_truthy(*jargs_get(a, 0, "case_sensitive")));
    const struct jv *attr = jargs_get(a, 1, "attribute");
    if (!jv_iter_list(st, at, in, &l)) return st->rc;
    *out = jv_undef();
    struct jv best_key = jv_undef();
    for (size_t i = 0; i < l->n; i++) {
        struct jv k =
            attr && attr->kind == JV_STR ? jinja_attr_path(st, at, l->v[i], *attr) : l->v[i];
        int c = 0;
        if (i > 0 && !jv_compare(k, best_key, casefold, &c))
            return rs_fail(st, at, ERR_INVALID, "values cannot be compared");
        if (i == 0 || (is_max ? c > 0 : c < 0)) {
            best_key = k;
            *out = l->v[i];
        }
    }
    return st->rc;
}

static int f_min(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                 struct jv *out)
{
    return f_minmax(st, at, in, a, false, out);
}

static int f_max(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                 struct jv *out)
{
    return f_minmax(st, at, in, a, true, out);
}

static int f_escape(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    (void)at;
    (void)a;
    struct jv s;
    if (in.kind == JV_STR && in.is_safe) {
        *out = in;
        return ERR_OK;
    }
    if (!jv_to_str(st, in, &s)) return st->rc;
    struct buf b;
    buf_init(&b);
    int rc = buf_reserve(&b, s.u.s.n + 1);
    for (size_t i = 0; i < s.u.s.n && rc == ERR_OK; i++) {
        char c = s.u.s.p[i];
        const char *e = c == '&'    ? "&amp;"
                        : c == '<'  ? "&lt;"
                        : c == '>'  ? "&gt;"
                        : c == '"'  ? "&#34;"
                        : c == '\'' ? "&#39;"
                                    : NULL;
        rc = e ? buf_append_cstr(&b, e) : buf_append_byte(&b, c);
    }
    *out = rc == ERR_OK ? mk_str(st, b.data, b.len) : jv_undef();
    if (rc != ERR_OK) rs_nomem(st);
    out->is_safe = out->kind == JV_STR;
    buf_deinit(&b);
    return st->rc;
}

static int f_wordcount(struct rstate *st, const struct jnode *at, struct jv in,
                       const struct jargs *a, struct jv *out)
{
    (void)at;
    (void)a;
    struct jv s;
    if (!jv_to_str(st, in, &s)) return st->rc;
    int64_t n = 0;
    bool in_word = false;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s.u.s.p;
    utf8proc_ssize_t left = (utf8proc_ssize_t)s.u.s.n;
    while (left > 0) { // words are runs of \w: letters, numbers and '_'
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) {
            k = 1;
            cp = -1;
        }
        int cat = cp >= 0 ? (int)utf8proc_category(cp) : 0;
        bool w = cp == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                 (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
        n += w && !in_word;
        in_word = w;
        p += k;
        left -= k;
    }
    *out = jv_int(n);
    return ERR_OK;
}

static int f_batch(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    struct jlist *l, *r, *cur = NULL;
    int64_t size = 0;
    const struct jv *sz = jargs_get(a, 0, "linecount"), *fill = jargs_get(a, 1, "fill_with");
    if (sz && sz->kind == JV_INT) size = sz->u.i;
    if (size <= 0) return rs_fail(st, at, ERR_INVALID, "batch: size must be positive");
    if (!jv_iter_list(st, at, in, &l) || !(r = jl_new(st, 0))) return st->rc;
    for (size_t i = 0; i < l->n; i++) {
        if (!cur || (int64_t)cur->n == size) {
            if (!(cur = jl_new(st, 0)) || !jl_push(st, r, jv_list(cur))) return st->rc;
        }
        jl_push(st, cur, l->v[i]);
    }
    while (fill && cur && (int64_t)cur->n < size)
        jl_push(st, cur, *fill);
    r->is_gen = true;
    *out = jv_list(r);
    return st->rc;
}

static int f_center(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    (void)at;
    struct jv s;
    int64_t w = 80;
    const struct jv *wv = jargs_get(a, 0, "width");
    if (wv && wv->kind == JV_INT) w = wv->u.i > 10000 ? 10000 : wv->u.i;
    if (!jv_to_str(st, in, &s)) return st->rc;
    int64_t len = (int64_t)utf8_count(s.u.s.p, s.u.s.n);
    if (w <= len) {
        *out = s;
        return ERR_OK;
    }
    // Python: left = pad // 2 + (pad & width & 1)
    int64_t pad = w - len, left = pad / 2 + (pad & w & 1);
    char *p = arena_alloc(st->arena, s.u.s.n + (size_t)pad + 1);
    if (!p) return rs_nomem(st);
    memset(p, ' ', s.u.s.n + (size_t)pad);
    memcpy(p + left, s.u.s.p, s.u.s.n);
    *out = jv_str(p, s.u.s.n + (size_t)pad);
    return ERR_OK;
}

static int f_truncate(struct rstate *st, const struct jnode *at, struct jv in,
                      const struct jargs *a, struct jv *out)
{
    struct jv s, end = jv_str("...", 3);
    int64_t length = 255, leeway = 5;
    const struct jv *lv = jargs_get(a, 0, "length"), *ev = jargs_get(a, 2, "end");
    const struct jv *lw = jargs_get(a, 3, "leeway");
    bool killwords = jargs_get(a, 1, "killwords") && jv_truthy(*jargs_get(a, 1, "killwords"));
    if (lv && lv->kind == JV_INT) length = lv->u.i;
    if (ev && ev->kind == JV_STR) end = *ev;
    if (lw && lw->kind == JV_INT) leeway = lw->u.i;
    if (in.kind != JV_STR) { // Jinja2 takes len() of the value and slices it as a string
        bool sized = in.kind == JV_LIST || in.kind == JV_DICT;
        int64_t n = sized ? (int64_t)(in.kind == JV_LIST ? in.u.l->n : in.u.d->n) : 0;
        if (!sized || n > length + leeway)
            return rs_fail(st, at, ERR_INVALID, "truncate: expected a string, not %s",
                           jv_type_name(in));
        *out = in;
        return ERR_OK;
    }
    s = in;
    int64_t n = (int64_t)utf8_count(s.u.s.p, s.u.s.n), keep = length - (int64_t)end.u.s.n;
    if (n <= length + leeway) {
        *out = s;
        return ERR_OK;
    }
    if (keep < 0) keep = 0;
    size_t cut = utf8_offset(s.u.s.p, s.u.s.n, (size_t)keep);
    if (!killwords) { // drop the last partial word: rsplit(" ", 1)[0]
        size_t sp = cut;
        while (sp > 0 && s.u.s.p[sp - 1] != ' ')
            sp--;
        if (sp > 0) cut = sp - 1;
    }
    char *p = arena_alloc(st->arena, cut + end.u.s.n + 1);
    if (!p) return rs_nomem(st);
    memcpy(p, s.u.s.p, cut);
    memcpy(p + cut, end.u.s.p, end.u.s.n);
    *out = jv_str(p, cut + end.u.s.n);
    return ERR_OK;
}

static int f_format(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    struct jv s;
    struct jlist *args = jl_new(st, a->n_pos);
    if (!args || !jv_to_str(st, in, &s)) return st->rc;
    args->is_tuple = true;
    for (size_t i = 0; i < a->n_pos; i++)
        jl_push(st, args, a->pos[i]);
    *out = jinja_percent_format(st, at, s, jv_list(args));
    return st->rc;
}

struct jv jinja_markup_add(struct rstate *st, const struct jnode *at, struct jv a, struct jv b)
{
    struct jv ea = a, eb = b;
    if (!a.is_safe) f_escape(st, at, a, NULL, &ea);
    if (!b.is_safe) f_escape(st, at, b, NULL, &eb);
    struct jv r = jinja_binop(st, at, '~', ea, eb);
    r.is_safe = r.kind == JV_STR;
    return r;
}

/* Markup.striptags(): drop comments and tags, unescape the basic entities, collapse whitespace. */
static int f_striptags(struct rstate *st, const struct jnode *at, struct jv in,
                       const struct jargs *a, struct jv *out)
{
    (void)at;
    (void)a;
    static const char *const ents[][2] = {{"&amp;", "&"},   {"&lt;", "<"},   {"&gt;", ">"},
                                          {"&quot;", "\""}, {"&#34;", "\""}, {"&#39;", "'"}};
    struct jv s;
    if (!jv_to_str(st, in, &s)) return st->rc;
    struct buf b;
    buf_init(&b);
    int rc = buf_reserve(&b, s.u.s.n + 1);
    const char *p = s.u.s.p, *end = p + s.u.s.n;
    bool space = false;
    while (p < end && rc == ERR_OK) {
        const char *close = NULL;
        if (*p == '<' && end - p >= 4 && !memcmp(p, "<!--", 4)) {
            for (const char *q = p + 4; q + 3 <= end && !close; q++)
                if (!memcmp(q, "-->", 3)) close = q + 2;
        } else if (*p == '<') {
            close = memchr(p, '>', (size_t)(end - p));
        }
        if (close) {
            p = close + 1;
            continue;
        }
        char c = *p;
        size_t len = 1;
        for (size_t i = 0; c == '&' && i < sizeof ents / sizeof ents[0]; i++) {
            size_t n = strlen(ents[i][0]);
            if ((size_t)(end - p) >= n && !memcmp(p, ents[i][0], n)) {
                c = ents[i][1][0];
                len = n;
            }
        }
        p += len;
        if (c == ' ' || (c >= '\t' && c <= '\r')) {
            space = b.len > 0;
            continue;
        }
        if (space) rc = buf_append_byte(&b, ' ');
        space = false;
        if (rc == ERR_OK) rc = buf_append_byte(&b, c);
    }
    *out = rc == ERR_OK ? mk_str(st, b.data, b.len) : jv_undef();
    if (rc != ERR_OK) rs_nomem(st);
    buf_deinit(&b);
    return st->rc;
}

static int f_attr(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                  struct jv *out)
{
    const struct jv *name = jargs_get(a, 0, "name");
    if (!name || name->kind != JV_STR) return rs_fail(st, at, ERR_INVALID, "attr: expected a name");
    char *n = arena_strndup(st->arena, name->u.s.p, name->u.s.n);
    if (!n) return rs_nomem(st);
    if (in.kind == JV_DICT && !in.u.d->is_ns) { // attribute lookup only: keys are not attributes
        *out = jv_undef();
        return ERR_OK;
    }
    return jinja_getattr(st, at, in, n, out);
}

static const struct {
    const char *name;
    jinja_filter_fn fn;
} misc_filters[] = {
    {"striptags", f_striptags},
    {"attr", f_attr},
    {"first", f_first},
    {"last", f_last},
    {"reverse", f_reverse},
    {"int", f_int},
    {"float", f_float},
    {"round", f_round},
    {"abs", f_abs},
    {"sum", f_sum},
    {"min", f_min},
    {"max", f_max},
    {"e", f_escape},
    {"escape", f_escape},
    {"wordcount", f_wordcount},
    {"batch", f_batch},
    {"center", f_center},
    {"truncate", f_truncate},
    {"format", f_format},
};

static jinja_filter_fn find_filter(const char *name)
{
    for (size_t i = 0; i < sizeof misc_filters / sizeof misc_filters[0]; i++)
        if (!strcmp(misc_filters[i].name, name)) return misc_filters[i].fn;
    return jinja_filter_find_text(name);
}

bool jinja_filter_exists(const char *name)
{
    return find_filter(name) != NULL;
}

int jinja_filter_apply(struct rstate *st, const struct jnode *at, const char *name, struct jv in,
                       const struct jargs *args, struct jv *out)
{
    jinja_filter_fn fn = find_filter(name);
    if (!fn) return rs_fail(st, at, ERR_INVALID, "No filter named '%s' found.", name);
    *out = jv_undef();
    return fn(st, at, in, args, out);
}

/* ---- tests ---- */

static const char *const test_names[] = {
    "defined", "undefined", "none",        "boolean",     "false",    "true",     "integer",
    "float",   "number",    "string",      "mapping",     "iterable", "sequence", "callable",
    "odd",     "even",      "divisibleby", "eq",          "equalto",  "==",       "ne",
    "!=",      "lt",        "<",           "le",          "<=",       "gt",       ">",
    "ge",      ">=",        "lessthan",    "greaterthan", "in",       "sameas",   "lower",
    "upper",   "escaped",   "filter",      "test",        NULL};

bool jinja_test_exists(const char *name)
{
    for (const char *const *p = test_names; *p; p++)
        if (!strcmp(*p, name)) return true;
    return false;
}

/* Python str.isupper()/islower(): every cased character has that case, and there is one. */
static bool str_all(struct jv v, bool upper)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)v.u.s.p;
    utf8proc_ssize_t left = (utf8proc_ssize_t)v.u.s.n;
    bool cased = false;
    while (left > 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) {
            k = 1;
            cp = 0;
        }
        bool is_upper = utf8proc_tolower(cp) != cp, is_lower = utf8proc_toupper(cp) != cp;
        if ((upper && is_lower) || (!upper && is_upper)) return false;
        cased = cased || is_upper || is_lower;
        p += k;
        left -= k;
    }
    return cased;
}

/* Comparison-style tests: eq, ne, lt, le, gt, ge, in, sameas. */
static int test_compare(struct rstate *st, const struct jnode *at, const char *name, struct jv in,
                        struct jv arg, bool *out)
{
    int op = !strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")      ? OP_EQ
             : !strcmp(name, "ne") || !strcmp(name, "!=")                                ? OP_NE
             : !strcmp(name, "lt") || !strcmp(name, "<") || !strcmp(name, "lessthan")    ? '<'
             : !strcmp(name, "le") || !strcmp(name, "<=")                                ? OP_LE
             : !strcmp(name, "gt") || !strcmp(name, ">") || !strcmp(name, "greaterthan") ? '>'
             : !strcmp(name, "ge") || !strcmp(name, ">=")                                ? OP_GE
             : !strcmp(name, "in")                                                       ? 'i'
                                                                                         : 's';
    if (op == 's') {
        *out = (in.kind == arg.kind && (in.kind == JV_NONE || in.kind == JV_UNDEF ||
                                        (in.kind == JV_BOOL && in.u.b == arg.u.b))) ||
               ((in.kind == JV_LIST || in.kind == JV_DICT) && in.kind == arg.kind &&
                in.u.l == arg.u.l) ||
               (in.kind == JV_INT && arg.kind == JV_INT && in.u.i == arg.u.i);
        return ERR_OK;
    }
    struct jv r = jinja_binop(st, at, op, in, arg);
    *out = jv_truthy(r);
    return st->rc;
}

/* Flat dispatch over test names (one branch each, like a switch). */
int jinja_test_apply(struct rstate *st, const struct jnode *at, const char *name, struct jv in,
                     const struct jargs *args, bool *out)
{
    const struct jv *arg = jargs_get(args, 0, NULL);
    enum jv_kind k = in.kind;
    if (!jinja_test_exists(name))
        return rs_fail(st, at, ERR_INVALID, "No test named '%s' found.", name);
    if (!strcmp(name, "defined"))
        *out = k != JV_UNDEF;
    else if (!strcmp(name, "undefined"))
        *out = k == JV_UNDEF;
    else if (!strcmp(name, "none"))
        *out = k == JV_NONE;
    else if (!strcmp(name, "boolean"))
        *out = k == JV_BOOL;
    else if (!strcmp(name, "false"))
        *out = k == JV_BOOL && !in.u.b;
    else if (!strcmp(name, "true"))
        *out = k == JV_BOOL && in.u.b;
    else if (!strcmp(name, "integer"))
        *out = k == JV_INT;
    else if (!strcmp(name, "float"))
        *out = k == JV_FLOAT;
    else if (!strcmp(name, "number"))
        *out = k == JV_INT || k == JV_FLOAT || k == JV_BOOL;
    else if (!strcmp(name, "string"))
        *out = k == JV_STR;
    else if (!strcmp(name, "mapping"))
        *out = k == JV_DICT && !in.u.d->is_ns;
    else if (!strcmp(name, "iterable"))
        *out = k == JV_STR || k == JV_LIST || (k == JV_DICT && !in.u.d->is_ns) || k == JV_UNDEF;
    else if (!strcmp(name, "sequence"))
        *out = k == JV_STR || (k == JV_LIST && !in.u.l->is_gen) ||
               (k == JV_DICT && !in.u.d->is_ns) || k == JV_UNDEF;
    else if (!strcmp(name, "callable"))
        *out = k == JV_FUNC || k == JV_UNDEF; // Undefined defines __call__ (which raises)
    else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (!is_intlike(in) && k != JV_FLOAT)
            return rs_fail(st, at, ERR_INVALID, "%s test needs a number", name);
        struct jv m = jinja_binop(st, at, '%', in, jv_int(2)); // Python: value % 2 == 1 (or 0)
        *out = jv_equal(m, jv_int(name[0] == 'o' ? 1 : 0));
    } else if (!strcmp(name, "divisibleby")) {
        if (!arg) return rs_fail(st, at, ERR_INVALID, "divisibleby needs an argument");
        struct jv m = jinja_binop(st, at, '%', in, *arg); // Python: value % num == 0
        *out = jv_equal(m, jv_int(0));
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        struct jv text; // Jinja2 tests str(value)
        if (!jv_to_str(st, in, &text)) return st->rc;
        *out = str_all(text, name[0] == 'u');
    } else if (!strcmp(name, "escaped"))
        *out = false;
    else if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        const char *s = k == JV_STR ? arena_strndup(st->arena, in.u.s.p, in.u.s.n) : NULL;
        if (k == JV_STR && !s) return rs_nomem(st);
        *out = s && (name[0] == 'f' ? jinja_filter_exists(s) : jinja_test_exists(s));
    } else if (!arg)
        return rs_fail(st, at, ERR_INVALID, "test '%s' needs an argument", name);
    else
        return test_compare(st, at, name, in, *arg, out);
    return ERR_OK;
}
