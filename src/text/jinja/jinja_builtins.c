/* Jinja2 3.1 built-in filters and tests as chat templates use them, with Hugging Face's tojson
 * (json.dumps with ensure_ascii=False, indent, separators, sort_keys). map/select/reject/
 * selectattr/rejectattr/unique/items yield generators in Jinja2; results carry is_gen so
 * tojson refuses them the same way. */
#include "text/jinja/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct jv new_str(struct rstate *st, const char *p, size_t n)
{
    char *s = arena_strndup(st->arena, p ? p : "", n);
    if (!s) {
        rs_nomem(st);
        return jv_undef();
    }
    return jv_str(s, n);
}

/* A NUL-terminated arena copy of a string value, or NULL (error set). */
static const char *cstr_of(struct rstate *st, struct jv s)
{
    char *p = arena_strndup(st->arena, s.u.s.p, s.u.s.n);
    if (!p) rs_nomem(st);
    return p;
}

static bool to_str(struct rstate *st, struct jv v, struct jv *out)
{
    return jv_to_str(st, v, out);
}

static bool arg_bool(const struct jargs *a, size_t i, const char *name, bool dflt)
{
    const struct jv *v = jargs_get(a, i, name);
    return v ? jv_truthy(*v) : dflt;
}

static int64_t arg_int(const struct jargs *a, size_t i, const char *name, int64_t dflt)
{
    const struct jv *v = jargs_get(a, i, name);
    if (v && v->kind == JV_INT) return v->u.i;
    if (v && v->kind == JV_FLOAT) return (int64_t)v->u.f;
    return dflt;
}

static int need_list(struct rstate *st, const struct jnode *at, struct jv in, struct jlist **out)
{
    return jv_iter_list(st, at, in, out) ? ERR_OK : st->rc;
}

/* Item-then-attribute lookup along a dotted path ("function.name", "0"). */
static struct jv attr_path(struct rstate *st, const struct jnode *at, struct jv v, struct jv path)
{
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end && st->rc == ERR_OK) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        char *part = arena_strndup(st->arena, p, n);
        if (!part) {
            rs_nomem(st);
            return jv_undef();
        }
        char *num_end;
        long idx = strtol(part, &num_end, 10);
        if (n > 0 && *num_end == 0)
            v = jinja_getitem(st, at, v, jv_int(idx));
        else if (v.kind == JV_UNDEF)
            return v;
        else
            jinja_getattr(st, at, v, part, &v);
        if (!dot) break;
        p = dot + 1;
    }
    return v;
}

/* ---- sorting ---- */

struct sort_ctx {
    struct rstate *st;
    const struct jnode *at;
    bool casefold;
    bool by_value;  // dictsort by value (pairs)
    int pair_index; // >= 0: compare element i of tuples
    const struct jv *attr;
};

static struct jv sort_key(struct sort_ctx *c, struct jv v)
{
    if (c->pair_index >= 0 && v.kind == JV_LIST && v.u.l->n > (size_t)c->pair_index)
        return v.u.l->v[c->pair_index];
    if (c->attr) return attr_path(c->st, c->at, v, *c->attr);
    return v;
}

static int cmp_values(struct sort_ctx *c, struct jv a, struct jv b)
{
    int r = 0;
    a = sort_key(c, a);
    b = sort_key(c, b);
    if (!jv_compare(a, b, c->casefold, &r))
        rs_fail(c->st, c->at, ERR_INVALID, "'<' not supported between instances of '%s' and '%s'",
                jv_type_name(a), jv_type_name(b));
    return r;
}

/* Stable merge sort (Python's sort is stable). */
static void merge_sort(struct sort_ctx *c, struct jv *v, struct jv *tmp, size_t n)
{
    if (n < 2 || c->st->rc != ERR_OK) return;
    size_t h = n / 2;
    merge_sort(c, v, tmp, h);
    merge_sort(c, v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_values(c, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static struct jlist *sorted_copy(struct sort_ctx *c, const struct jlist *src, bool reverse)
{
    struct jlist *l = jl_new(c->st, src->n);
    struct jv *tmp = arena_alloc(c->st->arena, (src->n + 1) * sizeof *tmp);
    if (!l || !tmp) {
        rs_nomem(c->st);
        return NULL;
    }
    for (size_t i = 0; i < src->n; i++)
        jl_push(c->st, l, src->v[i]);
    if (reverse) // sorted(reverse=True) keeps equal items in original order
        for (size_t i = 0; i < l->n / 2; i++) {
            struct jv t = l->v[i];
            l->v[i] = l->v[l->n - 1 - i];
            l->v[l->n - 1 - i] = t;
        }
    merge_sort(c, l->v, tmp, l->n);
    if (reverse)
        for (size_t i = 0; i < l->n / 2; i++) {
            struct jv t = l->v[i];
            l->v[i] = l->v[l->n - 1 - i];
            l->v[l->n - 1 - i] = t;
        }
    return l;
}

/* ---- filters ---- */

static int f_tojson(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    (void)at;
    const struct jv *ind = jargs_get(a, 0, "indent"), *seps = jargs_get(a, SIZE_MAX, "separators");
    int indent = ind && ind->kind == JV_INT ? (int)(ind->u.i < 0    ? 0
                                                    : ind->u.i > 64 ? 64
                                                                    : ind->u.i)
                                            : -1;
    char item_sep[16] = ", ", key_sep[16] = ": ";
    if (indent >= 0) snprintf(item_sep, sizeof item_sep, ",");
    if (seps && seps->kind == JV_LIST && seps->u.l->n == 2 && seps->u.l->v[0].kind == JV_STR &&
        seps->u.l->v[1].kind == JV_STR) {
        snprintf(item_sep, sizeof item_sep, "%.*s", (int)seps->u.l->v[0].u.s.n,
                 seps->u.l->v[0].u.s.p);
        snprintf(key_sep, sizeof key_sep, "%.*s", (int)seps->u.l->v[1].u.s.n,
                 seps->u.l->v[1].u.s.p);
    }
    struct buf b;
    buf_init(&b);
    struct json_fmt fmt = {.indent = indent, .item_sep = item_sep, .key_sep = key_sep};
    fmt.sort_keys = arg_bool(a, SIZE_MAX, "sort_keys", false);
    fmt.ensure_ascii = arg_bool(a, SIZE_MAX, "ensure_ascii", false);
    int rc = jv_write_json(st, &b, in, &fmt, 0);
    if (rc == ERR_OK)
        *out = new_str(st, b.data, b.len);
    else if (st->rc == ERR_OK)
        rs_nomem(st);
    buf_deinit(&b);
    return st->rc;
}

static int f_trim(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                  struct jv *out)
{
    (void)at;
    struct jv s;
    if (to_str(st, in, &s)) *out = jstr_strip(s, jargs_get(a, 0, "chars"), 3);
    return st->rc;
}

static int f_replace(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                     struct jv *out)
{
    struct jv s, o, n;
    const struct jv *old = jargs_get(a, 0, "old"), *rep = jargs_get(a, 1, "new");
    if (!old || !rep) return rs_fail(st, at, ERR_INVALID, "replace() needs old and new");
    if (to_str(st, in, &s) && to_str(st, *old, &o) && to_str(st, *rep, &n))
        *out = jstr_replace(st, s, o, n, arg_int(a, 2, "count", -1));
    return st->rc;
}

static int f_string(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    (void)at;
    (void)a;
    to_str(st, in, out);
    return st->rc;
}

static int f_length(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    (void)a;
    switch (in.kind) {
    case JV_STR:
        *out = jv_int((int64_t)utf8_count(in.u.s.p, in.u.s.n));
        return ERR_OK;
    case JV_LIST:
        if (in.u.l->is_gen) break;
        *out = jv_int((int64_t)in.u.l->n);
        return ERR_OK;
    case JV_DICT:
        *out = jv_int((int64_t)in.u.d->n);
        return ERR_OK;
    case JV_UNDEF:
        *out = jv_int(0);
        return ERR_OK;
    default:
        break;
    }
    return rs_fail(st, at, ERR_INVALID, "object of type '%s' has no len()", jv_type_name(in));
}

static int f_case(struct rstate *st, const struct jnode *at, struct jv in, int mode, struct jv *out)
{
    (void)at;
    struct jv s;
    if (to_str(st, in, &s)) *out = jstr_case(st, s, mode);
    return st->rc;
}

static int f_lower(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    (void)a;
    return f_case(st, at, in, 'l', out);
}

static int f_upper(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    (void)a;
    return f_case(st, at, in, 'u', out);
}

static int f_capitalize(struct rstate *st, const struct jnode *at, struct jv in,
                        const struct jargs *a, struct jv *out)
{
    (void)a;
    return f_case(st, at, in, 'c', out);
}

/* Jinja's title: words start after runs of whitespace, '-', '(', '{', '[' or '<'. */
static int f_title(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    (void)a;
    return f_case(st, at, in, 'j', out);
}

static int f_default(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                     struct jv *out)
{
    (void)st;
    (void)at;
    const struct jv *dflt = jargs_get(a, 0, "default_value");
    bool boolean = arg_bool(a, 1, "boolean", false);
    if (in.kind == JV_UNDEF || (boolean && !jv_truthy(in)))
        *out = dflt ? *dflt : jv_str("", 0);
    else
        *out = in;
    return ERR_OK;
}

static int f_join(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                  struct jv *out)
{
    struct jlist *l;
    const struct jv *sep = jargs_get(a, 0, "d"), *attr = jargs_get(a, 1, "attribute");
    struct jv s = jv_str("", 0);
    if (need_list(st, at, in, &l) != ERR_OK || (sep && !to_str(st, *sep, &s))) return st->rc;
    if (attr && attr->kind == JV_STR) {
        struct jlist *m = jl_new(st, l->n);
        for (size_t i = 0; m && i < l->n; i++)
            jl_push(st, m, attr_path(st, at, l->v[i], *attr));
        l = m;
    }
    if (l) *out = jstr_join(st, l, s);
    return st->rc;
}

static int f_list(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                  struct jv *out)
{
    (void)a;
    struct jlist *l, *copy;
    if (need_list(st, at, in, &l) != ERR_OK || !(copy = jl_new(st, l->n))) return st->rc;
    for (size_t i = 0; i < l->n; i++)
        jl_push(st, copy, l->v[i]);
    *out = jv_list(copy);
    return st->rc;
}

/* select/reject/selectattr/rejectattr: keep items whose (attribute's) test result == want. */
static int select_common(struct rstate *st, const struct jnode *at, struct jv in,
                         const struct jargs *a, bool with_attr, bool want, struct jv *out)
{
    struct jlist *l, *r;
    size_t first = with_attr ? 1 : 0;
    const struct jv *attr = with_attr ? jargs_get(a, 0, NULL) : NULL;
    if (with_attr && (!attr || attr->kind != JV_STR))
        return rs_fail(st, at, ERR_INVALID, "selectattr/rejectattr need an attribute name");
    const struct jv *test_arg = jargs_get(a, first, NULL);
    const char *test = test_arg && test_arg->kind == JV_STR ? cstr_of(st, *test_arg) : NULL;
    if (test_arg && test_arg->kind == JV_STR && !test) return st->rc;
    if (test && !jinja_test_exists(test))
        return rs_fail(st, at, ERR_INVALID, "No test named '%s'", test);
    struct jargs targs = {0};
    if (test && a->n_pos > first + 1) {
        targs.pos = a->pos + first + 1;
        targs.n_pos = a->n_pos - first - 1;
    }
    if (!jv_truthy(in)) // Jinja2 yields nothing for a falsy input (None included)
        in = jv_undef();
    if (need_list(st, at, in, &l) != ERR_OK || !(r = jl_new(st, 0))) return st->rc;
    for (size_t i = 0; i < l->n && st->rc == ERR_OK; i++) {
        struct jv v = attr ? attr_path(st, at, l->v[i], *attr) : l->v[i];
        bool ok = jv_truthy(v);
        if (test) jinja_test_apply(st, at, test, v, &targs, &ok);
        if (ok == want) jl_push(st, r, l->v[i]);
    }
    r->is_gen = true;
    *out = jv_list(r);
    return st->rc;
}

static int f_select(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    return select_common(st, at, in, a, false, true, out);
}

static int f_reject(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    return select_common(st, at, in, a, false, false, out);
}

static int f_selectattr(struct rstate *st, const struct jnode *at, struct jv in,
                        const struct jargs *a, struct jv *out)
{
    return select_common(st, at, in, a, true, true, out);
}

static int f_rejectattr(struct rstate *st, const struct jnode *at, struct jv in,
                        const struct jargs *a, struct jv *out)
{
    return select_common(st, at, in, a, true, false, out);
}

static int f_map(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                 struct jv *out)
{
    struct jlist *l, *r;
    const struct jv *attr = jargs_get(a, SIZE_MAX, "attribute");
    const struct jv *dflt = jargs_get(a, SIZE_MAX, "default");
    const struct jv *name_arg = jargs_get(a, 0, NULL);
    const char *name =
        !attr && name_arg && name_arg->kind == JV_STR ? cstr_of(st, *name_arg) : NULL;
    if (!attr && !name)
        return st->rc != ERR_OK
                   ? st->rc
                   : rs_fail(st, at, ERR_INVALID, "map: expected a filter name or attribute=");
    if (!jv_truthy(in)) // Jinja2 yields nothing for a falsy input (None included)
        in = jv_undef();
    if (need_list(st, at, in, &l) != ERR_OK || !(r = jl_new(st, l->n))) return st->rc;
    struct jargs fargs = {0};
    if (!attr && a->n_pos > 1) {
        fargs.pos = a->pos + 1;
        fargs.n_pos = a->n_pos - 1;
    }
    for (size_t i = 0; i < l->n && st->rc == ERR_OK; i++) {
        struct jv v = jv_undef();
        if (attr && attr->kind == JV_STR) {
            v = attr_path(st, at, l->v[i], *attr);
            if (v.kind == JV_UNDEF && dflt) v = *dflt;
        } else if (!attr) {
            jinja_filter_apply(st, at, name, l->v[i], &fargs, &v);
        }
        jl_push(st, r, v);
    }
    r->is_gen = true;
    *out = jv_list(r);
    return st->rc;
}

static int f_items(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                   struct jv *out)
{
    (void)a;
    struct jlist *r = jl_new(st, 0);
    if (!r) return st->rc;
    r->is_gen = true;
    if (in.kind == JV_UNDEF) {
        *out = jv_list(r);
        return ERR_OK;
    }
    if (in.kind != JV_DICT)
        return rs_fail(st, at, ERR_INVALID, "Can only get item pairs from a mapping.");
    for (size_t i = 0; i < in.u.d->n; i++) {
        struct jlist *pair = jl_new(st, 2);
        if (!pair) return st->rc;
        pair->is_tuple = true;
        jl_push(st, pair, in.u.d->keys[i]);
        jl_push(st, pair, in.u.d->vals[i]);
        jl_push(st, r, jv_list(pair));
    }
    *out = jv_list(r);
    return st->rc;
}

static int f_dictsort(struct rstate *st, const struct jnode *at, struct jv in,
                      const struct jargs *a, struct jv *out)
{
    struct jv items;
    if (in.kind != JV_DICT) // dictsort calls value.items()
        return rs_fail(st, at, ERR_INVALID, "dictsort: expected a mapping, not %s",
                       jv_type_name(in));
    if (f_items(st, at, in, a, &items) != ERR_OK) return st->rc;
    const struct jv *by = jargs_get(a, 1, "by");
    struct sort_ctx c = {.st = st, .at = at, .casefold = !arg_bool(a, 0, "case_sensitive", false)};
    c.pair_index = by && by->kind == JV_STR && by->u.s.n == 5 && !memcmp(by->u.s.p, "value", 5);
    struct jlist *l = sorted_copy(&c, items.u.l, arg_bool(a, 2, "reverse", false));
    if (l) *out = jv_list(l);
    return st->rc;
}

static int f_sort(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                  struct jv *out)
{
    struct jlist *l;
    if (need_list(st, at, in, &l) != ERR_OK) return st->rc;
    const struct jv *attr = jargs_get(a, 2, "attribute");
    struct sort_ctx c = {.st = st, .at = at, .pair_index = -1};
    c.casefold = !arg_bool(a, 1, "case_sensitive", false);
    c.attr = attr && attr->kind == JV_STR ? attr : NULL;
    struct jlist *r = sorted_copy(&c, l, arg_bool(a, 0, "reverse", false));
    if (r) *out = jv_list(r);
    return st->rc;
}

static int f_unique(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    struct jlist *l, *r, *keys;
    bool casefold = !arg_bool(a, 0, "case_sensitive", false);
    const struct jv *attr = jargs_get(a, 1, "attribute");
    if (need_list(st, at, in, &l) != ERR_OK || !(r = jl_new(st, 0)) || !(keys = jl_new(st, 0)))
        return st->rc;
    for (size_t i = 0; i < l->n && st->rc == ERR_OK; i++) {
        struct jv k = attr && attr->kind == JV_STR ? attr_path(st, at, l->v[i], *attr) : l->v[i];
        if ((k.kind == JV_LIST && !k.u.l->is_tuple) || k.kind == JV_DICT)
            return rs_fail(st, at, ERR_INVALID, "unhashable type: '%s'", jv_type_name(k));
        if (casefold && k.kind == JV_STR) k = jstr_case(st, k, 'l');
        bool seen = false;
        for (size_t j = 0; j < keys->n && !seen; j++)
            seen = jv_equal(keys->v[j], k);
        if (!seen) {
            jl_push(st, keys, k);
            jl_push(st, r, l->v[i]);
        }
    }
    r->is_gen = true;
    *out = jv_list(r);
    return st->rc;
}

static int f_indent(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                    struct jv *out)
{
    (void)at;
    struct jv s, pad = jv_str("    ", 4);
    const struct jv *w = jargs_get(a, 0, "width");
    bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
    if (in.kind != JV_STR) // Jinja2 appends "\n" to the value, which only strings allow
        return rs_fail(st, at, ERR_INVALID, "indent: expected a string, not %s", jv_type_name(in));
    s = in;
    if (w && w->kind == JV_STR) {
        pad = *w;
    } else if (w && w->kind == JV_INT) {
        int64_t n = w->u.i < 0 ? 0 : w->u.i > 256 ? 256 : w->u.i;
        char *p = arena_alloc(st->arena, (size_t)n + 1);
        if (!p) return rs_nomem(st);
        memset(p, ' ', (size_t)n);
        pad = jv_str(p, (size_t)n);
    }
    struct buf b;
    buf_init(&b);
    int rc = buf_reserve(&b, s.u.s.n + 16);
    if (first && rc == ERR_OK) rc = buf_append(&b, pad.u.s.p, pad.u.s.n);
    // (s + "\n").splitlines(), as Jinja2 splits it, so a trailing newline survives
    s = jinja_binop(st, at, '~', s, jv_str("\n", 1));
    size_t i = 0;
    bool first_line = true;
    while (i < s.u.s.n && rc == ERR_OK) {
        size_t e = i;
        while (e < s.u.s.n && s.u.s.p[e] != '\n' && s.u.s.p[e] != '\r')
            e++;
        size_t line_len = e - i;
        if (!first_line) {
            rc = buf_append_byte(&b, '\n');
            if (rc == ERR_OK && (blank || line_len > 0)) rc = buf_append(&b, pad.u.s.p, pad.u.s.n);
        }
        if (rc == ERR_OK) rc = buf_append(&b, s.u.s.p + i, line_len);
        first_line = false;
        if (e < s.u.s.n && s.u.s.p[e] == '\r' && e + 1 < s.u.s.n && s.u.s.p[e + 1] == '\n') e++;
        i = e + 1;
    }
    if (rc == ERR_OK)
        *out = new_str(st, b.data, b.len);
    else
        rs_nomem(st);
    buf_deinit(&b);
    return st->rc;
}

static int f_safe(struct rstate *st, const struct jnode *at, struct jv in, const struct jargs *a,
                  struct jv *out)
{
    (void)at;
    (void)a;
    if (!jv_to_str(st, in, out)) return st->rc;
    out->is_safe = true;
    return ERR_OK;
}

static const struct {
    const char *name;
    jinja_filter_fn fn;
} text_filters[] = {
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"replace", f_replace},
    {"string", f_string},
    {"length", f_length},
    {"count", f_length},
    {"lower", f_lower},
    {"upper", f_upper},
    {"capitalize", f_capitalize},
    {"title", f_title},
    {"default", f_default},
    {"d", f_default},
    {"join", f_join},
    {"list", f_list},
    {"select", f_select},
    {"reject", f_reject},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"map", f_map},
    {"items", f_items},
    {"dictsort", f_dictsort},
    {"sort", f_sort},
    {"unique", f_unique},
    {"indent", f_indent},
    {"safe", f_safe},
};

jinja_filter_fn jinja_filter_find_text(const char *name)
{
    for (size_t i = 0; i < sizeof text_filters / sizeof text_filters[0]; i++)
        if (!strcmp(text_filters[i].name, name)) return text_filters[i].fn;
    return NULL;
}

struct jv jinja_attr_path(struct rstate *st, const struct jnode *at, struct jv v, struct jv path)
{
    return attr_path(st, at, v, path);
}
