/* Jinja operators with Python semantics: subscripts and slices (strings index by code point),
 * arithmetic, concatenation, comparisons, membership and printf-style % formatting. */
#include "text/jinja/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool is_intlike(struct jv v)
{
    return v.kind == JV_INT || v.kind == JV_BOOL;
}

static int64_t as_int(struct jv v)
{
    return v.kind == JV_INT ? v.u.i : (int64_t)v.u.b;
}

static bool is_num(struct jv v)
{
    return is_intlike(v) || v.kind == JV_FLOAT;
}

static double as_f(struct jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : (double)as_int(v);
}

static bool has_multibyte(struct jv s)
{
    for (size_t i = 0; i < s.u.s.n; i++)
        if ((unsigned char)s.u.s.p[i] >= 0x80) return true;
    return false;
}

/* Code point i of s (0-based, already range-checked) as a slice. */
static struct jv str_char(struct jv s, size_t i)
{
    size_t a = utf8_offset(s.u.s.p, s.u.s.n, i);
    size_t b = utf8_offset(s.u.s.p + a, s.u.s.n - a, 1);
    return jv_str(s.u.s.p + a, b);
}

struct jv jinja_getitem(struct rstate *st, const struct jnode *at, struct jv obj, struct jv key)
{
    if (st->rc != ERR_OK) return jv_undef();
    struct jv out = jv_undef();
    switch (obj.kind) {
    case JV_DICT: {
        const struct jv *v = jd_get(obj.u.d, key);
        if (v) return *v;
        return out;
    }
    case JV_LIST:
    case JV_STR: {
        if (key.kind == JV_STR) {
            char *name = arena_strndup(st->arena, key.u.s.p, key.u.s.n);
            if (!name)
                rs_nomem(st);
            else
                jinja_getattr(st, at, obj, name, &out);
            return out;
        }
        if (!is_intlike(key)) return out;
        int64_t n =
            obj.kind == JV_LIST ? (int64_t)obj.u.l->n : (int64_t)utf8_count(obj.u.s.p, obj.u.s.n);
        int64_t i = as_int(key);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return out;
        return obj.kind == JV_LIST ? obj.u.l->v[i] : str_char(obj, (size_t)i);
    }
    case JV_LOOP:
        if (key.kind == JV_STR) {
            char *name = arena_strndup(st->arena, key.u.s.p, key.u.s.n);
            if (!name)
                rs_nomem(st);
            else
                jinja_getattr(st, at, obj, name, &out);
        }
        return out;
    case JV_UNDEF:
        rs_fail(st, at, ERR_INVALID, "'%.*s' is undefined", (int)obj.u.s.n, obj.u.s.p);
        return out;
    default:
        return out;
    }
}

static bool slice_index(struct rstate *st, const struct jnode *at, struct jv v, int64_t *out)
{
    if (v.kind == JV_NONE) return true;
    if (!is_intlike(v)) {
        rs_fail(st, at, ERR_INVALID, "slice indices must be integers or None");
        return false;
    }
    *out = as_int(v);
    return true;
}

static int64_t clamp_index(int64_t i, int64_t n, int64_t step)
{
    if (i < 0) {
        i += n;
        if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
        i = step < 0 ? n - 1 : n;
    }
    return i;
}

struct jv jinja_slice(struct rstate *st, const struct jnode *at, struct jv obj,
                      const struct jv *parts)
{
    if (obj.kind == JV_UNDEF) {
        rs_fail(st, at, ERR_INVALID, "'%.*s' is undefined", (int)obj.u.s.n, obj.u.s.p);
        return jv_undef();
    }
    if (obj.kind != JV_LIST && obj.kind != JV_STR) return jv_undef();
    bool multibyte = obj.kind == JV_STR && has_multibyte(obj);
    int64_t n = obj.kind == JV_LIST ? (int64_t)obj.u.l->n
                : multibyte         ? (int64_t)utf8_count(obj.u.s.p, obj.u.s.n)
                                    : (int64_t)obj.u.s.n;
    int64_t step = 1, start, stop;
    if (!slice_index(st, at, parts[2], &step)) return jv_undef();
    if (step == 0) {
        rs_fail(st, at, ERR_INVALID, "slice step cannot be zero");
        return jv_undef();
    }
    start = step > 0 ? 0 : n - 1;
    stop = step > 0 ? n : -1;
    bool has_start = parts[0].kind != JV_NONE, has_stop = parts[1].kind != JV_NONE;
    if (!slice_index(st, at, parts[0], &start) || !slice_index(st, at, parts[1], &stop))
        return jv_undef();
    if (has_start) start = clamp_index(start, n, step);
    if (has_stop) stop = clamp_index(stop, n, step);
    if (obj.kind == JV_STR && step == 1 && !multibyte) {
        if (stop < start) stop = start;
        return jv_str(obj.u.s.p + start, (size_t)(stop - start));
    }
    struct jlist *l = jl_new(st, 0);
    if (!l) return jv_undef();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        if (!jl_push(st, l, obj.kind == JV_LIST ? obj.u.l->v[i] : str_char(obj, (size_t)i)))
            return jv_undef();
    if (obj.kind == JV_LIST) {
        l->is_tuple = obj.u.l->is_tuple;
        return jv_list(l);
    }
    size_t total = 0;
    for (size_t i = 0; i < l->n; i++)
        total += l->v[i].u.s.n;
    char *s = arena_alloc(st->arena, total + 1);
    if (!s) {
        rs_nomem(st);
        return jv_undef();
    }
    total = 0;
    for (size_t i = 0; i < l->n; i++) {
        memcpy(s + total, l->v[i].u.s.p, l->v[i].u.s.n);
        total += l->v[i].u.s.n;
    }
    return jv_str(s, total);
}

struct jv jinja_unary(struct rstate *st, const struct jnode *at, struct jv v)
{
    if (at->op == '!') return jv_bool(!jv_truthy(v));
    if (v.kind == JV_FLOAT) return at->op == '-' ? jv_float(-v.u.f) : v;
    if (is_intlike(v)) {
        int64_t i = as_int(v);
        if (at->op == '-' && i == INT64_MIN) return jv_float(-(double)i);
        return jv_int(at->op == '-' ? -i : i);
    }
    rs_fail(st, at, ERR_INVALID, "bad operand type for unary %c: '%s'", at->op, jv_type_name(v));
    return jv_undef();
}

static struct jv concat_str(struct rstate *st, struct jv a, struct jv b)
{
    if (b.u.s.n == 0) return a;
    if (a.u.s.n == 0) return b;
    // A prompt's pieces are joined before they are written: one longer than the caller can
    // take is refused here, before the copy (a long message would be copied once per join).
    if (st->is_out_bounded && a.u.s.n + b.u.s.n > st->out_top_max) {
        rs_out_over(st);
        return jv_undef();
    }
    char *s = arena_alloc(st->arena, a.u.s.n + b.u.s.n + 1);
    if (!s) {
        rs_nomem(st);
        return jv_undef();
    }
    memcpy(s, a.u.s.p, a.u.s.n);
    memcpy(s + a.u.s.n, b.u.s.p, b.u.s.n);
    return jv_str(s, a.u.s.n + b.u.s.n);
}

static struct jv repeat(struct rstate *st, struct jv seq, int64_t times)
{
    if (times < 0) times = 0;
    // An empty sequence repeated is empty however large times is: without this, '' * 10**17
    // loops 10**17 times copying nothing (the size limit below cannot catch it).
    const size_t len = seq.kind == JV_STR ? seq.u.s.n : seq.u.l->n;
    if (len == 0) times = 0;
    if (seq.kind == JV_STR) {
        if (seq.u.s.n && (uint64_t)times >
                             (st->arena->max_bytes ? st->arena->max_bytes : SIZE_MAX) / seq.u.s.n) {
            rs_fail(st, NULL, ERR_LIMIT, "string repetition too large");
            return jv_undef();
        }
        size_t n = seq.u.s.n * (size_t)times;
        char *s = arena_alloc(st->arena, n + 1);
        if (!s) {
            rs_nomem(st);
            return jv_undef();
        }
        for (int64_t i = 0; i < times; i++)
            memcpy(s + (size_t)i * seq.u.s.n, seq.u.s.p, seq.u.s.n);
        return jv_str(s, n);
    }
    struct jlist *l = jl_new(st, 0);
    for (int64_t i = 0; l && i < times && st->rc == ERR_OK; i++)
        for (size_t k = 0; k < seq.u.l->n; k++)
            jl_push(st, l, seq.u.l->v[k]);
    return l ? jv_list(l) : jv_undef();
}

static double py_fmod(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

static struct jv arith(struct rstate *st, const struct jnode *at, int op, struct jv a, struct jv b)
{
    bool ints = is_intlike(a) && is_intlike(b);
    int64_t x = ints ? as_int(a) : 0, y = ints ? as_int(b) : 0, r;
    double fx = as_f(a), fy = as_f(b);
    switch (op) {
    case '+':
        if (ints && !__builtin_add_overflow(x, y, &r)) return jv_int(r);
        return jv_float(fx + fy);
    case '-':
        if (ints && !__builtin_sub_overflow(x, y, &r)) return jv_int(r);
        return jv_float(fx - fy);
    case '*':
        if (ints && !__builtin_mul_overflow(x, y, &r)) return jv_int(r);
        return jv_float(fx * fy);
    case '/':
        if (fy == 0) break;
        return jv_float(fx / fy);
    case OP_FLOORDIV:
    case '%':
        if (ints ? y == 0 : fy == 0) break;
        if (ints && !(x == INT64_MIN && y == -1)) {
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            return jv_int(op == '%' ? m : q);
        }
        return op == '%' ? jv_float(py_fmod(fx, fy)) : jv_float(floor(fx / fy));
    case OP_POW:
        if (ints && y >= 0) {
            int64_t acc = 1;
            bool overflow = false;
            for (int64_t i = 0; i < y && !overflow; i++)
                overflow = __builtin_mul_overflow(acc, x, &acc);
            if (!overflow) return jv_int(acc);
        }
        return jv_float(pow(fx, fy));
    }
    rs_fail(st, at, ERR_INVALID, "division by zero");
    return jv_undef();
}

static bool contains(struct rstate *st, const struct jnode *at, struct jv item, struct jv seq)
{
    switch (seq.kind) {
    case JV_STR:
        if (item.kind != JV_STR) {
            rs_fail(st, at, ERR_INVALID, "'in <string>' requires string as left operand, not %s",
                    jv_type_name(item));
            return false;
        }
        if (item.u.s.n == 0) return true;
        for (size_t i = 0; i + item.u.s.n <= seq.u.s.n; i++)
            if (memcmp(seq.u.s.p + i, item.u.s.p, item.u.s.n) == 0) return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (jv_equal(item, seq.u.l->v[i])) return true;
        return false;
    case JV_DICT:
        if ((item.kind == JV_LIST && !item.u.l->is_tuple) || item.kind == JV_DICT) {
            rs_fail(st, at, ERR_INVALID, "unhashable type: '%s'", jv_type_name(item));
            return false;
        }
        return jd_get(seq.u.d, item) != NULL;
    case JV_UNDEF:
        return false;
    default:
        rs_fail(st, at, ERR_INVALID, "argument of type '%s' is not iterable", jv_type_name(seq));
        return false;
    }
}

static const char *op_name(int op)
{
    switch (op) {
    case OP_FLOORDIV:
        return "//";
    case OP_POW:
        return "**";
    case OP_LE:
        return "<=";
    case OP_GE:
        return ">=";
    case '<':
        return "<";
    case '>':
        return ">";
    case '-':
        return "-";
    case '*':
        return "*";
    case '/':
        return "/";
    case '%':
        return "%";
    default:
        return "+";
    }
}

struct jv jinja_binop(struct rstate *st, const struct jnode *at, int op, struct jv a, struct jv b)
{
    if (st->rc != ERR_OK) return jv_undef();
    int c;
    switch (op) {
    case '~': {
        struct jv sa, sb;
        if (!jv_to_str(st, a, &sa) || !jv_to_str(st, b, &sb)) return jv_undef();
        return concat_str(st, sa, sb);
    }
    case OP_EQ:
        return jv_bool(jv_equal(a, b));
    case OP_NE:
        return jv_bool(!jv_equal(a, b));
    case 'i':
        return jv_bool(contains(st, at, a, b));
    case 'n':
        return jv_bool(!contains(st, at, a, b));
    case '<':
    case '>':
    case OP_LE:
    case OP_GE:
        if (!jv_compare(a, b, false, &c)) {
            rs_fail(st, at, ERR_INVALID, "'%s' not supported between instances of '%s' and '%s'",
                    op_name(op), jv_type_name(a), jv_type_name(b));
            return jv_undef();
        }
        return jv_bool(op == '<' ? c < 0 : op == '>' ? c > 0 : op == OP_LE ? c <= 0 : c >= 0);
    default:
        break;
    }
    if (a.kind == JV_UNDEF || b.kind == JV_UNDEF) {
        struct jv u = a.kind == JV_UNDEF ? a : b;
        rs_fail(st, at, ERR_INVALID, "'%.*s' is undefined", (int)u.u.s.n, u.u.s.p);
        return jv_undef();
    }
    if (is_num(a) && is_num(b)) return arith(st, at, op, a, b);
    if (op == '+' && a.kind == JV_STR && b.kind == JV_STR) {
        if (a.is_safe != b.is_safe) return jinja_markup_add(st, at, a, b);
        struct jv r = concat_str(st, a, b);
        r.is_safe = a.is_safe;
        return r;
    }
    if (op == '+' && a.kind == JV_LIST && b.kind == JV_LIST) {
        struct jlist *l = jl_new(st, a.u.l->n + b.u.l->n);
        for (size_t i = 0; l && i < a.u.l->n; i++)
            jl_push(st, l, a.u.l->v[i]);
        for (size_t i = 0; l && i < b.u.l->n; i++)
            jl_push(st, l, b.u.l->v[i]);
        return l ? jv_list(l) : jv_undef();
    }
    if (op == '*' && (a.kind == JV_STR || a.kind == JV_LIST) && is_intlike(b))
        return repeat(st, a, as_int(b));
    if (op == '*' && (b.kind == JV_STR || b.kind == JV_LIST) && is_intlike(a))
        return repeat(st, b, as_int(a));
    if (op == '%' && a.kind == JV_STR) return jinja_percent_format(st, at, a, b);
    if (op == '+' && a.kind == JV_STR)
        rs_fail(st, at, ERR_INVALID, "can only concatenate str (not \"%s\") to str",
                jv_type_name(b));
    else
        rs_fail(st, at, ERR_INVALID, "unsupported operand type(s) for %s: '%s' and '%s'",
                op_name(op), jv_type_name(a), jv_type_name(b));
    return jv_undef();
}

/* One % conversion: flags, width, precision and the type letter. */
/* The format is assembled from a spec checked against a fixed character set. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static int percent_one(struct rstate *st, struct buf *b, const char *spec, size_t spec_len,
                       char conv, struct jv v)
{
    char f[32];
    if (spec_len > 20) spec_len = 20;
    for (size_t i = 0; i < spec_len; i++) { // width and precision: at most 3 digits each
        size_t run = 0;
        while (i < spec_len && spec[i] >= '0' && spec[i] <= '9') {
            run++;
            i++;
        }
        if (run > 3) return rs_fail(st, NULL, ERR_LIMIT, "%% format width or precision too large");
    }
    if (conv == 's' || conv == 'r') {
        struct buf tmp;
        buf_init(&tmp);
        int rc = conv == 'r' ? jv_write_repr(&tmp, v) : jv_write_str(&tmp, v);
        snprintf(f, sizeof f, "%%%.*ss", (int)spec_len, spec);
        if (rc == ERR_OK) rc = buf_printf(b, f, tmp.data ? tmp.data : "");
        buf_deinit(&tmp);
        return rc;
    }
    if (!is_num(v))
        return rs_fail(st, NULL, ERR_INVALID, "%%%c format: a number is required, not %s", conv,
                       jv_type_name(v));
    if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
        int64_t i = v.kind == JV_FLOAT ? (int64_t)v.u.f : as_int(v);
        snprintf(f, sizeof f, "%%%.*sll%c", (int)spec_len, spec, conv == 'i' ? 'd' : conv);
        return buf_printf(b, f, (long long)i);
    }
    snprintf(f, sizeof f, "%%%.*s%c", (int)spec_len, spec, conv);
    return buf_printf(b, f, as_f(v));
}
#pragma GCC diagnostic pop

struct jv jinja_percent_format(struct rstate *st, const struct jnode *at, struct jv fmt,
                               struct jv args)
{
    bool is_tuple = args.kind == JV_LIST && args.u.l->is_tuple;
    size_t n_args = is_tuple ? args.u.l->n : 1, used = 0;
    struct buf b;
    buf_init(&b);
    const char *s = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    int rc = ERR_OK;
    for (size_t i = 0; i < n && rc == ERR_OK; i++) {
        if (s[i] != '%') {
            rc = buf_append_byte(&b, s[i]);
            continue;
        }
        size_t j = i + 1;
        while (j < n && strchr("-+ #0123456789.", s[j]))
            j++;
        if (j >= n || !strchr("sdifrxXoeEgG%", s[j])) {
            rc = rs_fail(st, at, ERR_INVALID, "unsupported format character");
            break;
        }
        if (s[j] == '%') {
            rc = buf_append_byte(&b, '%');
        } else if (used >= n_args) {
            rc = rs_fail(st, at, ERR_INVALID, "not enough arguments for format string");
        } else {
            struct jv v = is_tuple ? args.u.l->v[used] : args;
            used++;
            rc = percent_one(st, &b, s + i + 1, j - i - 1, s[j], v);
        }
        i = j;
    }
    // a list or dict argument may go unused, as Python treats it like a mapping
    bool mapping_like = (args.kind == JV_LIST && !is_tuple) || args.kind == JV_DICT;
    if (rc == ERR_OK && used < n_args && !(mapping_like && used == 0))
        rc = rs_fail(st, at, ERR_INVALID, "not all arguments converted during string formatting");
    struct jv out = jv_undef();
    if (rc == ERR_OK) {
        char *p = arena_strndup(st->arena, b.data ? b.data : "", b.len);
        if (p)
            out = jv_str(p, b.len);
        else
            rs_nomem(st);
    } else if (st->rc == ERR_OK) {
        rs_nomem(st);
    }
    buf_deinit(&b);
    return out;
}
