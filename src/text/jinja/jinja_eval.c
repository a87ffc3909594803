/* Jinja evaluator: the public template API, scopes, expressions, statements, macros and the
 * step/depth/memory limits. Semantics follow Jinja2 3.1 with Python operators; errors are
 * sticky in the render state (the first one wins, later evaluation yields Undefined). */
#include "text/jinja/jinja.h"
#include "text/jinja/jinja_internal.h"
#include "util/checked.h"
#include "util/mem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define STEPS_DEFAULT  10000000
#define BYTES_DEFAULT  ((size_t)256 << 20)
#define DEPTH_MAX      600
#define CALL_DEPTH_MAX 80

struct jinja_template {
    struct arena arena; // owns the normalized source, tokens and AST
    struct jnode *root;
};

int rs_fail(struct rstate *st, const struct jnode *at, int rc, const char *fmt, ...)
{
    if (st->rc != ERR_OK) return st->rc;
    st->rc = rc;
    if (!at) at = st->at;
    char msg[ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at)
        errmsg_set(st->err, rc, "line %d col %d: %s", at->line, at->col, msg);
    else
        errmsg_set(st->err, rc, "%s", msg);
    return rc;
}

int rs_nomem(struct rstate *st)
{
    if (st->arena->over_limit)
        return rs_fail(st, NULL, ERR_LIMIT, "template used more than %zu bytes of memory",
                       st->arena->max_bytes);
    return rs_fail(st, NULL, ERR_NOMEM, "out of memory");
}

int rs_out_over(struct rstate *st)
{
    if (st->is_out_over) *st->is_out_over = true;
    return rs_fail(st, NULL, ERR_LIMIT, "template output larger than %zu bytes", st->out_top_max);
}

const struct jv *jargs_get(const struct jargs *a, size_t i, const char *name)
{
    if (i < a->n_pos) return &a->pos[i];
    for (size_t k = 0; name && k < a->n_kw; k++)
        if (strcmp(a->kw_names[k], name) == 0) return &a->kw_vals[k];
    return NULL;
}

static struct jv eval(struct rstate *st, const struct jnode *n);
static void exec_body(struct rstate *st, struct jnode *const *kids, size_t n);

static bool enter(struct rstate *st, const struct jnode *n)
{
    if (st->rc != ERR_OK) return false;
    if (++st->steps > st->max_steps) {
        rs_fail(st, n, ERR_LIMIT, "template exceeded %lld evaluation steps",
                (long long)st->max_steps);
        return false;
    }
    if (st->depth >= DEPTH_MAX) {
        rs_fail(st, n, ERR_LIMIT, "template recursion too deep");
        return false;
    }
    st->depth++;
    return true;
}

/* ---- scopes ---- */

static struct frame *frame_new(struct rstate *st, struct frame *parent)
{
    struct frame *f = arena_alloc(st->arena, sizeof *f);
    if (!f || !(f->vars = jd_new(st, 4))) {
        rs_nomem(st);
        return NULL;
    }
    f->parent = parent;
    return f;
}

static struct jv lookup(struct rstate *st, struct frame *f, const char *name)
{
    for (; f; f = f->parent) {
        const struct jv *v = jd_get_cstr(f->vars, name);
        if (v) return *v;
    }
    if (jinja_global_exists(name)) {
        struct jfunc *fn = arena_alloc(st->arena, sizeof *fn);
        if (!fn) {
            rs_nomem(st);
            return jv_undef();
        }
        fn->kind = FN_BUILTIN;
        fn->name = name;
        struct jv v = {.kind = JV_FUNC, .u.fn = fn};
        return v;
    }
    struct jv u = jv_undef();
    u.u.s.p = name; // hint: the missing name
    u.u.s.n = strlen(name);
    return u;
}

/* ---- output capture (macro bodies, set blocks, filter blocks) ---- */

static struct jv capture(struct rstate *st, struct jnode *const *kids, size_t n)
{
    struct buf tmp, *saved = st->out;
    buf_init(&tmp);
    st->out = &tmp;
    exec_body(st, kids, n);
    st->out = saved;
    struct jv r = jv_str("", 0);
    if (tmp.len) {
        char *s = arena_strndup(st->arena, tmp.data, tmp.len);
        if (s)
            r = jv_str(s, tmp.len);
        else
            rs_nomem(st);
    }
    buf_deinit(&tmp);
    return r;
}

/* Output counts against the memory limit too, so a loop cannot grow it without bound. */
static void out_check(struct rstate *st, int rc)
{
    if (rc != ERR_OK)
        rs_nomem(st);
    else if (st->out == st->out_top && st->out->len > st->out_top_max)
        rs_out_over(st);
    else if (st->out->len > st->arena->max_bytes)
        rs_fail(st, NULL, ERR_LIMIT, "template output larger than %zu bytes", st->arena->max_bytes);
}

static void out_write(struct rstate *st, struct jv v)
{
    if (st->rc != ERR_OK) return;
    // A long string is not copied past the caller's bound only to be refused: one byte over
    // it is written, so the caller sees the excess, and the render stops.
    if (v.kind == JV_STR && st->out == st->out_top && st->out->len <= st->out_top_max &&
        v.u.s.n > st->out_top_max - st->out->len) {
        size_t room = st->out_top_max - st->out->len + 1;
        out_check(st, buf_append(st->out, v.u.s.p, room));
        return;
    }
    out_check(st, jv_write_str(st->out, v));
}

/* ---- calls ---- */

struct argv {
    struct jv pos[32];
    struct jv kw_vals[16];
    const char *kw_names[16];
    struct jargs a;
};

static void eval_args(struct rstate *st, struct jnode *const *kids, size_t n, struct argv *av)
{
    memset(&av->a, 0, sizeof av->a);
    size_t np = 0, nk = 0;
    for (size_t i = 0; i < n && st->rc == ERR_OK; i++) {
        if (kids[i]->kind == N_KW) {
            if (nk == 16) {
                rs_fail(st, kids[i], ERR_LIMIT, "too many keyword arguments");
                return;
            }
            av->kw_names[nk] = kids[i]->s;
            av->kw_vals[nk++] = eval(st, kids[i]->a);
        } else {
            if (np == 32) {
                rs_fail(st, kids[i], ERR_LIMIT, "too many arguments");
                return;
            }
            av->pos[np++] = eval(st, kids[i]);
        }
    }
    av->a.pos = av->pos;
    av->a.n_pos = np;
    av->a.kw_vals = av->kw_vals;
    av->a.kw_names = av->kw_names;
    av->a.n_kw = nk;
}

static bool bind(struct rstate *st, struct frame *f, const char *name, struct jv v)
{
    return jd_set(st, f->vars, jv_cstr(st, name), v);
}

static bool param_named(const struct jnode *m, const char *name)
{
    for (size_t i = 0; i < m->n_kids2; i++)
        if (strcmp(m->kids2[i]->s, name) == 0) return true;
    return false;
}

/* Binds macro parameters (positional, keyword, default), varargs, kwargs and caller. */
static bool bind_params(struct rstate *st, struct frame *f, const struct jnode *m,
                        const struct jargs *args)
{
    struct frame *saved = st->frame;
    st->frame = f; // defaults see earlier parameters
    for (size_t i = 0; i < m->n_kids2 && st->rc == ERR_OK; i++) {
        const struct jnode *p = m->kids2[i];
        const struct jv *v = jargs_get(args, i, p->s);
        struct jv val = v ? *v : p->kind == N_KW ? eval(st, p->a) : jv_undef();
        if (!v && p->kind != N_KW) {
            val.u.s.p = p->s;
            val.u.s.n = strlen(p->s);
        }
        bind(st, f, p->s, val);
    }
    st->frame = saved;
    struct jlist *varargs = jl_new(st, 0);
    struct jdict *kwargs = jd_new(st, 0);
    if (!varargs || !kwargs) return false;
    varargs->is_tuple = true;
    for (size_t i = m->n_kids2; i < args->n_pos; i++)
        jl_push(st, varargs, args->pos[i]);
    for (size_t k = 0; k < args->n_kw; k++) {
        if (strcmp(args->kw_names[k], "caller") == 0)
            bind(st, f, "caller", args->kw_vals[k]);
        else if (!param_named(m, args->kw_names[k]))
            jd_set(st, kwargs, jv_cstr(st, args->kw_names[k]), args->kw_vals[k]);
    }
    bind(st, f, "varargs", jv_list(varargs));
    bind(st, f, "kwargs", jv_dict(kwargs));
    return st->rc == ERR_OK;
}

static int call_macro(struct rstate *st, const struct jfunc *fn, const struct jargs *args,
                      struct jv *out)
{
    const struct jnode *m = fn->node;
    if (st->call_depth >= CALL_DEPTH_MAX)
        return rs_fail(st, m, ERR_LIMIT, "macro recursion deeper than %d", CALL_DEPTH_MAX);
    struct frame *f = frame_new(st, fn->closure);
    if (!f) return st->rc;
    if (fn->kind == FN_CALLER) {
        for (size_t i = 0; i < m->n_kids2; i++) {
            const struct jv *v = jargs_get(args, i, m->kids2[i]->s);
            bind(st, f, m->kids2[i]->s, v ? *v : jv_undef());
        }
    } else if (!bind_params(st, f, m, args)) {
        return st->rc;
    }
    struct frame *saved = st->frame;
    enum ctl saved_ctl = st->ctl;
    st->frame = f;
    st->call_depth++;
    *out = capture(st, m->kids, m->n_kids);
    st->call_depth--;
    st->frame = saved;
    st->ctl = saved_ctl;
    return st->rc;
}

int jinja_call_value(struct rstate *st, const struct jnode *at, struct jv fn,
                     const struct jargs *args, struct jv *out)
{
    if (fn.kind == JV_UNDEF)
        return rs_fail(st, at, ERR_INVALID, "'%.*s' is undefined", (int)fn.u.s.n, fn.u.s.p);
    if (fn.kind != JV_FUNC)
        return rs_fail(st, at, ERR_INVALID, "'%s' object is not callable", jv_type_name(fn));
    switch (fn.u.fn->kind) {
    case FN_MACRO:
    case FN_CALLER:
        return call_macro(st, fn.u.fn, args, out);
    case FN_BUILTIN:
        return jinja_call_global(st, at, fn.u.fn->name, args, out);
    default:
        return jinja_call_method(st, at, fn.u.fn, args, out);
    }
}

/* ---- expressions ---- */

static struct jv eval_slice(struct rstate *st, const struct jnode *n)
{
    struct jv obj = eval(st, n->a);
    struct jv parts[3] = {jv_none(), jv_none(), jv_none()};
    const struct jnode *src[3] = {n->b, n->c, n->d};
    for (int i = 0; i < 3; i++)
        if (src[i]) parts[i] = eval(st, src[i]);
    return st->rc == ERR_OK ? jinja_slice(st, n, obj, parts) : jv_undef();
}

static struct jv eval_seq(struct rstate *st, const struct jnode *n)
{
    if (n->kind == N_DICT) {
        struct jdict *d = jd_new(st, n->n_kids / 2);
        if (!d) return jv_undef();
        for (size_t i = 0; i + 1 < n->n_kids && st->rc == ERR_OK; i += 2) {
            struct jv k = eval(st, n->kids[i]);
            jd_set(st, d, k, eval(st, n->kids[i + 1]));
        }
        return jv_dict(d);
    }
    struct jlist *l = jl_new(st, n->n_kids);
    if (!l) return jv_undef();
    l->is_tuple = n->kind == N_TUPLE;
    for (size_t i = 0; i < n->n_kids && st->rc == ERR_OK; i++)
        jl_push(st, l, eval(st, n->kids[i]));
    return jv_list(l);
}

static struct jv eval_filter(struct rstate *st, const struct jnode *n)
{
    struct jv in = n->a ? eval(st, n->a) : st->pipe ? *st->pipe : jv_undef();
    struct argv av;
    eval_args(st, n->kids, n->n_kids, &av);
    struct jv out = jv_undef();
    if (st->rc == ERR_OK) jinja_filter_apply(st, n, n->s, in, &av.a, &out);
    return out;
}

static struct jv eval_test(struct rstate *st, const struct jnode *n)
{
    struct jv in = eval(st, n->a);
    struct argv av;
    eval_args(st, n->kids, n->n_kids, &av);
    bool r = false;
    if (st->rc == ERR_OK) jinja_test_apply(st, n, n->s, in, &av.a, &r);
    return jv_bool(r != n->flag);
}

static struct jv eval_call(struct rstate *st, const struct jnode *n)
{
    struct jv fn = eval(st, n->a);
    struct argv av;
    eval_args(st, n->kids, n->n_kids, &av);
    struct jv out = jv_undef();
    if (st->rc == ERR_OK) jinja_call_value(st, n, fn, &av.a, &out);
    return out;
}

static struct jv eval_inner(struct rstate *st, const struct jnode *n)
{
    struct jv a, out = jv_undef();
    switch (n->kind) {
    case N_LIT:
        return n->lit;
    case N_NAME:
        return lookup(st, st->frame, n->s);
    case N_LIST:
    case N_TUPLE:
    case N_DICT:
        return eval_seq(st, n);
    case N_GETATTR:
        a = eval(st, n->a);
        if (st->rc == ERR_OK) jinja_getattr(st, n, a, n->s, &out);
        return out;
    case N_GETITEM:
        a = eval(st, n->a);
        return jinja_getitem(st, n, a, eval(st, n->b));
    case N_SLICE:
        return eval_slice(st, n);
    case N_CALL:
        return eval_call(st, n);
    case N_FILTER:
        return eval_filter(st, n);
    case N_TEST:
        return eval_test(st, n);
    case N_UNARY:
        return jinja_unary(st, n, eval(st, n->a));
    case N_BINARY:
        if (n->op == 'a' || n->op == 'o') {
            a = eval(st, n->a);
            if (jv_truthy(a) == (n->op == 'o')) return a;
            return eval(st, n->b);
        }
        a = eval(st, n->a);
        return jinja_binop(st, n, n->op, a, eval(st, n->b));
    case N_COND:
        if (jv_truthy(eval(st, n->a))) return eval(st, n->b);
        return n->c ? eval(st, n->c) : jv_undef();
    default:
        rs_fail(st, n, ERR_INVALID, "statement used as an expression");
        return jv_undef();
    }
}

static struct jv eval(struct rstate *st, const struct jnode *n)
{
    if (!enter(st, n)) return jv_undef();
    const struct jnode *saved = st->at;
    st->at = n;
    struct jv v = eval_inner(st, n);
    st->at = saved;
    st->depth--;
    return st->rc == ERR_OK ? v : jv_undef();
}

/* ---- statements ---- */

static void assign(struct rstate *st, const struct jnode *target, struct jv v)
{
    if (target->kind == N_NAME) {
        bind(st, st->frame, target->s, v);
    } else if (target->kind == N_GETATTR) {
        struct jv ns = lookup(st, st->frame, target->a->s);
        if (ns.kind != JV_DICT || !ns.u.d->is_ns) {
            rs_fail(st, target, ERR_INVALID, "cannot assign attribute on non-namespace object");
            return;
        }
        jd_set(st, ns.u.d, jv_cstr(st, target->s), v);
    } else {
        struct jlist *l = NULL;
        if (!jv_iter_list(st, target, v, &l)) return;
        if (l->n != target->n_kids) {
            rs_fail(st, target, ERR_INVALID, "cannot unpack %zu values into %zu names", l->n,
                    target->n_kids);
            return;
        }
        for (size_t i = 0; i < l->n; i++)
            assign(st, target->kids[i], l->v[i]);
    }
}

static void exec_for(struct rstate *st, const struct jnode *n)
{
    struct jlist *items = NULL;
    if (!jv_iter_list(st, n->b, eval(st, n->b), &items)) return;
    struct frame *saved = st->frame, *f = frame_new(st, st->frame);
    if (!f) return;
    st->frame = f;
    if (n->c) { // for x in y if cond: filter first, so loop.length counts kept items
        struct jlist *kept = jl_new(st, items->n);
        for (size_t i = 0; kept && i < items->n && st->rc == ERR_OK; i++) {
            assign(st, n->a, items->v[i]);
            if (jv_truthy(eval(st, n->c))) jl_push(st, kept, items->v[i]);
        }
        items = kept;
    }
    struct loop_state *ls = arena_alloc(st->arena, sizeof *ls);
    if (!ls || !items) {
        rs_nomem(st);
        st->frame = saved;
        return;
    }
    ls->items = items;
    struct jv lv = {.kind = JV_LOOP, .u.loop = ls};
    for (size_t i = 0; i < items->n && st->rc == ERR_OK; i++) {
        // Jinja2 gives every iteration a fresh scope: a set in one is not seen by the next
        if (i > 0 && !(st->frame = f = frame_new(st, saved))) break;
        ls->index0 = i;
        bind(st, f, "loop", lv);
        assign(st, n->a, items->v[i]);
        exec_body(st, n->kids, n->n_kids);
        if (st->ctl == CTL_BREAK) {
            st->ctl = CTL_NONE;
            break;
        }
        st->ctl = CTL_NONE;
    }
    st->frame = saved;
    if (items->n == 0) exec_body(st, n->kids2, n->n_kids2);
}

/* {% set x %}...{% endset %} and {% filter f %}...{% endfilter %}: render the body, pipe it
 * through the optional filter chain, then assign or print it. */
static void exec_captured(struct rstate *st, const struct jnode *n)
{
    struct frame *saved = st->frame,
                 *inner = frame_new(st, st->frame); // the body has its own scope
    if (!inner) return;
    st->frame = inner;
    struct jv v = capture(st, n->kids, n->n_kids);
    st->frame = saved;
    const struct jnode *chain = n->kind == N_SETBLOCK ? n->c : n->a;
    if (chain && st->rc == ERR_OK) {
        const struct jv *saved_pipe = st->pipe;
        st->pipe = &v;
        v = eval(st, chain);
        st->pipe = saved_pipe;
    }
    if (st->rc != ERR_OK) return;
    if (n->kind == N_SETBLOCK)
        assign(st, n->a, v);
    else
        out_write(st, v);
}

/* {% macro %} binds a function; {% call %} calls its expression with caller= bound to the body. */
static void exec_define(struct rstate *st, const struct jnode *n)
{
    struct jfunc *fn = arena_alloc(st->arena, sizeof *fn);
    if (!fn) {
        rs_nomem(st);
        return;
    }
    fn->kind = n->kind == N_MACRO ? FN_MACRO : FN_CALLER;
    fn->node = n;
    fn->closure = st->frame;
    fn->name = n->kind == N_MACRO ? n->s : "caller";
    struct jv fv = {.kind = JV_FUNC, .u.fn = fn};
    if (n->kind == N_MACRO) {
        bind(st, st->frame, n->s, fv);
        return;
    }
    const struct jnode *call = n->a;
    struct argv av;
    eval_args(st, call->kids, call->n_kids, &av);
    if (av.a.n_kw >= 16) {
        rs_fail(st, call, ERR_LIMIT, "too many keyword arguments");
        return;
    }
    av.kw_names[av.a.n_kw] = "caller";
    av.kw_vals[av.a.n_kw++] = fv;
    struct jv callee = eval(st, call->a), out = jv_undef();
    if (st->rc == ERR_OK) jinja_call_value(st, call, callee, &av.a, &out);
    out_write(st, out);
}

static void exec_stmt(struct rstate *st, const struct jnode *n)
{
    struct jv v;
    switch (n->kind) {
    case N_TEXT:
        out_check(st, buf_append(st->out, n->s, n->s_len));
        break;
    case N_OUTPUT:
        out_write(st, eval(st, n->a));
        break;
    case N_IF:
        if (jv_truthy(eval(st, n->a)))
            exec_body(st, n->kids, n->n_kids);
        else
            exec_body(st, n->kids2, n->n_kids2);
        break;
    case N_FOR:
        exec_for(st, n);
        break;
    case N_SET:
        v = eval(st, n->b);
        if (st->rc == ERR_OK) assign(st, n->a, v);
        break;
    case N_SETBLOCK:
    case N_FILTERBLOCK:
        exec_captured(st, n);
        break;
    case N_MACRO:
    case N_CALLBLOCK:
        exec_define(st, n);
        break;
    case N_BREAK:
        st->ctl = CTL_BREAK;
        break;
    case N_CONTINUE:
        st->ctl = CTL_CONTINUE;
        break;
    default:
        rs_fail(st, n, ERR_INVALID, "expression used as a statement");
    }
}

static void exec_body(struct rstate *st, struct jnode *const *kids, size_t n)
{
    for (size_t i = 0; i < n && st->ctl == CTL_NONE; i++) {
        if (!enter(st, kids[i])) return;
        const struct jnode *saved = st->at;
        st->at = kids[i];
        exec_stmt(st, kids[i]);
        st->at = saved;
        st->depth--;
    }
}

/* ---- public API ---- */

/* Jinja2 turns \r\n and \r into \n and drops one trailing newline (keep_trailing_newline=False). */
static char *normalize(struct arena *a, const char *src, size_t len, size_t *out_len)
{
    char *s = arena_alloc(a, len + 1);
    if (!s) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k > 0 && s[k - 1] == '\n') k--;
    s[k] = 0;
    *out_len = k;
    return s;
}

int jinja_template_new(const char *src, size_t len, struct jinja_template **out, struct errmsg *err)
{
    struct jinja_template *t = mem_calloc(1, sizeof *t);
    if (!t) return errmsg_set(err, ERR_NOMEM, "out of memory");
    arena_init(&t->arena, 0);
    size_t n;
    struct tok_list toks;
    char *s = normalize(&t->arena, src ? src : "", src ? len : 0, &n);
    int rc = s ? jinja_lex(s, n, &t->arena, &toks, err) : ERR_NOMEM;
    if (rc == ERR_OK) rc = jinja_parse(&toks, &t->arena, &t->root, err);
    if (rc != ERR_OK) {
        if (rc == ERR_NOMEM) errmsg_set(err, ERR_NOMEM, "out of memory");
        jinja_template_free(t);
        return rc;
    }
    *out = t;
    return ERR_OK;
}

void jinja_template_free(struct jinja_template *t)
{
    if (!t) return;
    arena_deinit(&t->arena);
    mem_free(t);
}

int jinja_template_render(const struct jinja_template *t, const json_t *context, struct buf *out,
                          struct errmsg *err)
{
    return jinja_template_render_opts(t, context, NULL, out, err);
}

int jinja_template_render_opts(const struct jinja_template *t, const json_t *context,
                               const struct jinja_render_opts *opts, struct buf *out,
                               struct errmsg *err)
{
    if (!t || !out) return errmsg_set(err, ERR_INVALID, "no template or output buffer");
    struct arena arena;
    arena_init(&arena, opts && opts->max_bytes ? opts->max_bytes : BYTES_DEFAULT);
    struct rstate st = {.arena = &arena, .out = out, .out_top = out, .err = err};
    st.is_out_bounded = opts && opts->max_out_bytes;
    st.out_top_max = st.is_out_bounded ? opts->max_out_bytes : arena.max_bytes;
    st.is_out_over = opts ? opts->is_out_over : NULL;
    st.max_steps = opts && opts->max_steps > 0 ? opts->max_steps : STEPS_DEFAULT;
    if (opts && opts->now) {
        st.now = *opts->now;
    } else {
        time_t now = time(NULL);
        localtime_r(&now, &st.now);
    }
    errmsg_clear(err);
    struct frame *globals = frame_new(&st, NULL);
    if (globals && context && json_is_object(context)) {
        struct jv ctx;
        if (jv_from_json(&st, context, &ctx, 0)) globals->vars = ctx.u.d;
    }
    st.top = globals ? frame_new(&st, globals) : NULL;
    st.frame = st.top;
    if (st.rc == ERR_OK) exec_body(&st, t->root->kids, t->root->n_kids);
    arena_deinit(&arena);
    return st.rc;
}
