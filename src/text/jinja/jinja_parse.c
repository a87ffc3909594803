/* Jinja parser: tokens to an AST, with Jinja2 3.1's expression precedence (condexpr < or <
 * and < not < compare < + - < ~ < * / // % < ** < unary < postfix/filters/tests). Unknown tags
 * are syntax errors, as in Jinja2. */
#include "text/jinja/jinja_internal.h"

#include <string.h>

#define PARSE_DEPTH_MAX 200

struct parser {
    const struct tok *t;
    size_t n, i;
    struct arena *arena;
    struct errmsg *err;
    int rc;
    int depth;
};

struct nvec {
    struct jnode **v;
    size_t n, cap;
};

static const struct tok *cur(struct parser *ps)
{
    return &ps->t[ps->i < ps->n ? ps->i : ps->n - 1];
}

static const struct tok *peek(struct parser *ps, size_t k)
{
    size_t j = ps->i + k;
    return &ps->t[j < ps->n ? j : ps->n - 1];
}

static void advance(struct parser *ps)
{
    if (ps->i + 1 < ps->n) ps->i++;
}

static struct jnode *fail(struct parser *ps, const struct tok *at, const char *what)
{
    if (ps->rc == ERR_OK) {
        ps->rc = ERR_FORMAT;
        const char *kind = at->kind == TOK_EOF ? "end of template" : NULL;
        if (kind)
            errmsg_set(ps->err, ERR_FORMAT, "line %d col %d: %s (at %s)", at->line, at->col, what,
                       kind);
        else
            errmsg_set(ps->err, ERR_FORMAT, "line %d col %d: %s (at '%.*s')", at->line, at->col,
                       what, (int)(at->n > 40 ? 40 : at->n), at->p);
    }
    return NULL;
}

static struct jnode *nomem(struct parser *ps)
{
    if (ps->rc == ERR_OK) {
        ps->rc = ERR_NOMEM;
        errmsg_set(ps->err, ERR_NOMEM, "out of memory");
    }
    return NULL;
}

static struct jnode *node(struct parser *ps, enum node_kind kind, const struct tok *at)
{
    struct jnode *n = arena_alloc(ps->arena, sizeof *n);
    if (!n) return nomem(ps);
    n->kind = kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

static bool nvec_push(struct parser *ps, struct nvec *v, struct jnode *n)
{
    if (!n) return false;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        struct jnode **nv = arena_alloc(ps->arena, cap * sizeof *nv);
        if (!nv) {
            nomem(ps);
            return false;
        }
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = n;
    return true;
}

static bool is_op(const struct tok *t, int op)
{
    return t->kind == TOK_OP && t->op == op;
}

static bool is_name(const struct tok *t, const char *name)
{
    return t->kind == TOK_NAME && t->n == strlen(name) && memcmp(t->p, name, t->n) == 0;
}

static bool expect_op(struct parser *ps, int op, const char *what)
{
    if (!is_op(cur(ps), op)) {
        fail(ps, cur(ps), what);
        return false;
    }
    advance(ps);
    return true;
}

static const char *tok_cstr(struct parser *ps, const struct tok *t)
{
    char *s = arena_strndup(ps->arena, t->p, t->n);
    if (!s) nomem(ps);
    return s;
}

static struct jnode *parse_expr(struct parser *ps);
static struct jnode *parse_or(struct parser *ps);
static struct jnode *parse_unary(struct parser *ps, bool with_filter);
static struct jnode *parse_primary(struct parser *ps);
static struct jnode *parse_postfix(struct parser *ps, struct jnode *n);

/* ( args ) with keyword arguments as N_KW; the current token is '('. */
static bool parse_call_args(struct parser *ps, struct jnode *call)
{
    struct nvec args = {0};
    advance(ps);
    while (!is_op(cur(ps), ')')) {
        if (args.n > 0 && !expect_op(ps, ',', "expected ',' or ')'")) return false;
        if (is_op(cur(ps), ')')) break;
        struct jnode *arg;
        if (cur(ps)->kind == TOK_NAME && is_op(peek(ps, 1), '=')) {
            arg = node(ps, N_KW, cur(ps));
            if (!arg || !(arg->s = tok_cstr(ps, cur(ps)))) return false;
            advance(ps);
            advance(ps);
            arg->a = parse_expr(ps);
            if (!arg->a) return false;
        } else {
            arg = parse_expr(ps);
        }
        if (!nvec_push(ps, &args, arg)) return false;
    }
    advance(ps);
    call->kids = args.v;
    call->n_kids = args.n;
    return true;
}

static struct jnode *parse_filter(struct parser *ps, struct jnode *input)
{
    advance(ps); // '|'
    const struct tok *nt = cur(ps);
    if (nt->kind != TOK_NAME) return fail(ps, nt, "expected filter name");
    struct jnode *f = node(ps, N_FILTER, nt);
    if (!f || !(f->s = tok_cstr(ps, nt))) return NULL;
    advance(ps);
    f->a = input;
    if (is_op(cur(ps), '(') && !parse_call_args(ps, f)) return NULL;
    return f;
}

static struct jnode *parse_test(struct parser *ps, struct jnode *input)
{
    advance(ps); // 'is'
    struct jnode *t = node(ps, N_TEST, cur(ps));
    if (!t) return NULL;
    if (is_name(cur(ps), "not")) {
        t->flag = true;
        advance(ps);
    }
    const struct tok *nt = cur(ps);
    if (nt->kind != TOK_NAME) return fail(ps, nt, "expected test name");
    if (!(t->s = tok_cstr(ps, nt))) return NULL;
    advance(ps);
    t->a = input;
    const struct tok *c = cur(ps);
    if (is_op(c, '(')) {
        if (!parse_call_args(ps, t)) return NULL;
    } else if ((c->kind == TOK_NAME || c->kind == TOK_STRING || c->kind == TOK_INT ||
                c->kind == TOK_FLOAT || is_op(c, '[') || is_op(c, '{')) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        struct jnode *arg = parse_primary(ps);
        if (arg) arg = parse_postfix(ps, arg);
        if (!arg) return NULL;
        t->kids = arena_alloc(ps->arena, sizeof *t->kids);
        if (!t->kids) return nomem(ps);
        t->kids[0] = arg;
        t->n_kids = 1;
    }
    return t;
}

static struct jnode *parse_subscript(struct parser *ps, struct jnode *obj)
{
    const struct tok *at = cur(ps);
    advance(ps); // '['
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int n_colon = 0;
    for (;;) {
        if (is_op(cur(ps), ']')) break;
        if (is_op(cur(ps), ':')) {
            if (++n_colon > 2) return fail(ps, cur(ps), "bad slice");
            advance(ps);
            continue;
        }
        if (parts[n_colon]) return fail(ps, cur(ps), "expected ']'");
        if (!(parts[n_colon] = parse_expr(ps))) return NULL;
    }
    advance(ps);
    struct jnode *n = node(ps, n_colon ? N_SLICE : N_GETITEM, at);
    if (!n) return NULL;
    if (!n_colon && !parts[0]) return fail(ps, at, "empty subscript");
    n->a = obj;
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    return n;
}

static struct jnode *parse_postfix(struct parser *ps, struct jnode *n)
{
    while (n) {
        const struct tok *t = cur(ps);
        if (is_op(t, '.')) {
            advance(ps);
            const struct tok *nt = cur(ps);
            if (nt->kind == TOK_INT) {
                struct jnode *g = node(ps, N_GETITEM, nt);
                struct jnode *k = node(ps, N_LIT, nt);
                if (!g || !k) return NULL;
                k->lit = jv_int(nt->ival);
                g->a = n;
                g->b = k;
                n = g;
            } else if (nt->kind == TOK_NAME) {
                struct jnode *g = node(ps, N_GETATTR, nt);
                if (!g || !(g->s = tok_cstr(ps, nt))) return NULL;
                g->a = n;
                n = g;
            } else {
                return fail(ps, nt, "expected attribute name");
            }
            advance(ps);
        } else if (is_op(t, '[')) {
            n = parse_subscript(ps, n);
        } else if (is_op(t, '(')) {
            struct jnode *c = node(ps, N_CALL, t);
            if (!c) return NULL;
            c->a = n;
            if (!parse_call_args(ps, c)) return NULL;
            n = c;
        } else {
            break;
        }
    }
    return n;
}

static struct jnode *parse_filter_expr(struct parser *ps, struct jnode *n)
{
    while (n) {
        if (is_op(cur(ps), '|'))
            n = parse_filter(ps, n);
        else if (is_name(cur(ps), "is"))
            n = parse_test(ps, n);
        else if (is_op(cur(ps), '('))
            n = parse_postfix(ps, n);
        else
            break;
    }
    return n;
}

/* [a, b], (a, b) and {k: v}; the current token is the opener. */
static struct jnode *parse_seq(struct parser *ps, enum node_kind kind, int close)
{
    const struct tok *at = cur(ps);
    advance(ps);
    struct nvec items = {0};
    bool trailing_comma = false;
    while (!is_op(cur(ps), close)) {
        if (items.n > 0 && !expect_op(ps, ',', "expected ','")) return NULL;
        if (is_op(cur(ps), close)) {
            trailing_comma = true;
            break;
        }
        if (!nvec_push(ps, &items, parse_expr(ps))) return NULL;
        if (kind == N_DICT) {
            if (!expect_op(ps, ':', "expected ':' in dict literal")) return NULL;
            if (!nvec_push(ps, &items, parse_expr(ps))) return NULL;
        }
    }
    advance(ps);
    if (kind == N_TUPLE && items.n == 1 && !trailing_comma) return items.v[0]; // plain parentheses
    struct jnode *n = node(ps, kind, at);
    if (!n) return NULL;
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

static struct jnode *parse_primary(struct parser *ps)
{
    const struct tok *t = cur(ps);
    struct jnode *n;
    if (t->kind == TOK_NAME) {
        n = node(ps, N_LIT, t);
        if (!n) return NULL;
        if (is_name(t, "true") || is_name(t, "True"))
            n->lit = jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False"))
            n->lit = jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None"))
            n->lit = jv_none();
        else if (!(n->s = tok_cstr(ps, t)))
            return NULL;
        else
            n->kind = N_NAME;
        advance(ps);
        return n;
    }
    if (t->kind == TOK_STRING) {
        n = node(ps, N_LIT, t);
        if (!n) return NULL;
        size_t len = 0;
        size_t j = ps->i;
        for (; j < ps->n && ps->t[j].kind == TOK_STRING; j++)
            len += ps->t[j].n; // adjacent literals concatenate
        char *s = arena_alloc(ps->arena, len + 1);
        if (!s) return nomem(ps);
        len = 0;
        for (; ps->i < j; ps->i++) {
            memcpy(s + len, ps->t[ps->i].p, ps->t[ps->i].n);
            len += ps->t[ps->i].n;
        }
        n->lit = jv_str(s, len);
        return n;
    }
    if (t->kind == TOK_INT || t->kind == TOK_FLOAT) {
        n = node(ps, N_LIT, t);
        if (!n) return NULL;
        n->lit = t->kind == TOK_INT ? jv_int(t->ival) : jv_float(t->fval);
        advance(ps);
        return n;
    }
    if (is_op(t, '(')) return parse_seq(ps, N_TUPLE, ')');
    if (is_op(t, '[')) return parse_seq(ps, N_LIST, ']');
    if (is_op(t, '{')) return parse_seq(ps, N_DICT, '}');
    return fail(ps, t, "unexpected token in expression");
}

static struct jnode *parse_unary(struct parser *ps, bool with_filter)
{
    if (++ps->depth > PARSE_DEPTH_MAX) {
        if (ps->rc == ERR_OK) {
            ps->rc = ERR_LIMIT;
            errmsg_set(ps->err, ERR_LIMIT, "line %d col %d: expression nested too deeply",
                       cur(ps)->line, cur(ps)->col);
        }
        return NULL;
    }
    const struct tok *t = cur(ps);
    struct jnode *n;
    if (is_op(t, '-') || is_op(t, '+')) {
        advance(ps);
        n = node(ps, N_UNARY, t);
        if (n) {
            n->op = t->op;
            n->a = parse_unary(ps, false);
            if (!n->a) n = NULL;
        }
    } else {
        n = parse_primary(ps);
    }
    n = parse_postfix(ps, n);
    if (with_filter) n = parse_filter_expr(ps, n);
    ps->depth--;
    return n;
}

static struct jnode *binary(struct parser *ps, const struct tok *at, int op, struct jnode *a,
                            struct jnode *b)
{
    if (!a || !b) return NULL;
    struct jnode *n = node(ps, N_BINARY, at);
    if (!n) return NULL;
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct jnode *parse_pow(struct parser *ps)
{
    struct jnode *n = parse_unary(ps, true);
    while (n && is_op(cur(ps), OP_POW)) {
        const struct tok *t = cur(ps);
        advance(ps);
        n = binary(ps, t, OP_POW, n, parse_unary(ps, true));
    }
    return n;
}

static struct jnode *parse_math2(struct parser *ps)
{
    struct jnode *n = parse_pow(ps);
    while (n && (is_op(cur(ps), '*') || is_op(cur(ps), '/') || is_op(cur(ps), OP_FLOORDIV) ||
                 is_op(cur(ps), '%'))) {
        const struct tok *t = cur(ps);
        advance(ps);
        n = binary(ps, t, t->op, n, parse_pow(ps));
    }
    return n;
}

static struct jnode *parse_concat(struct parser *ps)
{
    struct jnode *n = parse_math2(ps);
    while (n && is_op(cur(ps), '~')) {
        const struct tok *t = cur(ps);
        advance(ps);
        n = binary(ps, t, '~', n, parse_math2(ps));
    }
    return n;
}

static struct jnode *parse_math1(struct parser *ps)
{
    struct jnode *n = parse_concat(ps);
    while (n && (is_op(cur(ps), '+') || is_op(cur(ps), '-'))) {
        const struct tok *t = cur(ps);
        advance(ps);
        n = binary(ps, t, t->op, n, parse_concat(ps));
    }
    return n;
}

static int compare_op(struct parser *ps)
{
    const struct tok *t = cur(ps);
    if (t->kind == TOK_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LE ||
                              t->op == OP_GE || t->op == '<' || t->op == '>'))
        return t->op;
    if (is_name(t, "in")) return 'i';
    if (is_name(t, "not") && is_name(peek(ps, 1), "in")) return 'n';
    return 0;
}

/* Chained comparisons (a < b < c) become (a < b) and (b < c), evaluating b twice; templates
 * only chain over plain names and literals. */
static struct jnode *parse_compare(struct parser *ps)
{
    struct jnode *n = parse_math1(ps);
    struct jnode *prev_rhs = NULL;
    int op;
    while (n && (op = compare_op(ps)) != 0) {
        const struct tok *t = cur(ps);
        advance(ps);
        if (op == 'n') advance(ps);
        struct jnode *rhs = parse_math1(ps);
        if (prev_rhs)
            n = binary(ps, t, 'a', n, binary(ps, t, op, prev_rhs, rhs));
        else
            n = binary(ps, t, op, n, rhs);
        prev_rhs = rhs;
    }
    return n;
}

static struct jnode *parse_not(struct parser *ps)
{
    if (is_name(cur(ps), "not")) {
        const struct tok *t = cur(ps);
        advance(ps);
        struct jnode *n = node(ps, N_UNARY, t);
        if (!n) return NULL;
        n->op = '!';
        n->a = parse_not(ps);
        return n->a ? n : NULL;
    }
    return parse_compare(ps);
}

static struct jnode *parse_and(struct parser *ps)
{
    struct jnode *n = parse_not(ps);
    while (n && is_name(cur(ps), "and")) {
        const struct tok *t = cur(ps);
        advance(ps);
        n = binary(ps, t, 'a', n, parse_not(ps));
    }
    return n;
}

static struct jnode *parse_or(struct parser *ps)
{
    struct jnode *n = parse_and(ps);
    while (n && is_name(cur(ps), "or")) {
        const struct tok *t = cur(ps);
        advance(ps);
        n = binary(ps, t, 'o', n, parse_and(ps));
    }
    return n;
}

static struct jnode *parse_expr(struct parser *ps)
{
    struct jnode *n = parse_or(ps);
    while (n && is_name(cur(ps), "if")) {
        const struct tok *t = cur(ps);
        advance(ps);
        struct jnode *c = node(ps, N_COND, t);
        if (!c) return NULL;
        c->b = n;
        if (!(c->a = parse_or(ps))) return NULL;
        if (is_name(cur(ps), "else")) {
            advance(ps);
            if (!(c->c = parse_expr(ps))) return NULL;
        }
        n = c;
    }
    return n;
}

/* expr [, expr ...]: a bare comma list is a tuple ({{ a, b }}, set x = 1, 2). */
static struct jnode *parse_tuple_expr(struct parser *ps, bool with_cond)
{
    const struct tok *at = cur(ps);
    struct jnode *first = with_cond ? parse_expr(ps) : parse_or(ps);
    if (!first || !is_op(cur(ps), ',')) return first;
    struct nvec items = {0};
    nvec_push(ps, &items, first);
    while (is_op(cur(ps), ',')) {
        advance(ps);
        if (cur(ps)->kind == TOK_BLOCK_END || cur(ps)->kind == TOK_VAR_END) break;
        if (!nvec_push(ps, &items, with_cond ? parse_expr(ps) : parse_or(ps))) return NULL;
    }
    struct jnode *n = node(ps, N_TUPLE, at);
    if (!n) return NULL;
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

/* Assignment target: name, name.attr, or a, b (tuple of names). */
static struct jnode *parse_target(struct parser *ps, bool allow_attr)
{
    const struct tok *at = cur(ps);
    struct nvec items = {0};
    do {
        if (items.n > 0) advance(ps);
        const struct tok *t = cur(ps);
        if (t->kind != TOK_NAME) return fail(ps, t, "expected a name to assign to");
        struct jnode *n = node(ps, N_NAME, t);
        if (!n || !(n->s = tok_cstr(ps, t))) return NULL;
        advance(ps);
        if (allow_attr && is_op(cur(ps), '.') && peek(ps, 1)->kind == TOK_NAME) {
            advance(ps);
            struct jnode *g = node(ps, N_GETATTR, cur(ps));
            if (!g || !(g->s = tok_cstr(ps, cur(ps)))) return NULL;
            g->a = n;
            n = g;
            advance(ps);
        }
        if (!nvec_push(ps, &items, n)) return NULL;
    } while (is_op(cur(ps), ','));
    if (items.n == 1) return items.v[0];
    struct jnode *n = node(ps, N_TUPLE, at);
    if (!n) return NULL;
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

/* ---- statements ---- */

static bool parse_body(struct parser *ps, const char *const *ends, struct nvec *out);

static bool expect_block_end(struct parser *ps)
{
    if (cur(ps)->kind != TOK_BLOCK_END) {
        fail(ps, cur(ps), "expected end of block tag");
        return false;
    }
    advance(ps);
    return true;
}

static bool at_name(struct parser *ps, const char *const *names)
{
    for (; *names; names++)
        if (is_name(cur(ps), *names)) return true;
    return false;
}

static struct jnode *parse_if(struct parser *ps, const struct tok *at)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const end_only[] = {"endif", NULL};
    struct jnode *n = node(ps, N_IF, at);
    if (!n || !(n->a = parse_tuple_expr(ps, true)) || !expect_block_end(ps)) return NULL;
    struct nvec body = {0}, els = {0};
    if (!parse_body(ps, ends, &body)) return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    const struct tok *t = cur(ps);
    advance(ps);
    if (is_name(t, "elif")) {
        struct jnode *e = parse_if(ps, t);
        if (!nvec_push(ps, &els, e)) return NULL;
    } else if (is_name(t, "else")) {
        if (!expect_block_end(ps) || !parse_body(ps, end_only, &els)) return NULL;
        advance(ps);
        if (!expect_block_end(ps)) return NULL;
    } else if (!expect_block_end(ps)) {
        return NULL;
    }
    n->kids2 = els.v;
    n->n_kids2 = els.n;
    return n;
}

static struct jnode *parse_for(struct parser *ps, const struct tok *at)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    static const char *const end_only[] = {"endfor", NULL};
    struct jnode *n = node(ps, N_FOR, at);
    if (!n || !(n->a = parse_target(ps, false))) return NULL;
    if (!is_name(cur(ps), "in")) return fail(ps, cur(ps), "expected 'in'");
    advance(ps);
    if (!(n->b = parse_tuple_expr(ps, false))) return NULL;
    if (is_name(cur(ps), "if")) {
        advance(ps);
        if (!(n->c = parse_expr(ps))) return NULL;
    }
    if (is_name(cur(ps), "recursive"))
        return fail(ps, cur(ps), "recursive loops are not supported");
    if (!expect_block_end(ps)) return NULL;
    struct nvec body = {0}, els = {0};
    if (!parse_body(ps, ends, &body)) return NULL;
    if (is_name(cur(ps), "else")) {
        advance(ps);
        if (!expect_block_end(ps) || !parse_body(ps, end_only, &els)) return NULL;
    }
    advance(ps);
    if (!expect_block_end(ps)) return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    n->kids2 = els.v;
    n->n_kids2 = els.n;
    return n;
}

static struct jnode *parse_set(struct parser *ps, const struct tok *at)
{
    static const char *const ends[] = {"endset", NULL};
    struct jnode *target = parse_target(ps, true);
    if (!target) return NULL;
    if (is_op(cur(ps), '=')) {
        advance(ps);
        struct jnode *n = node(ps, N_SET, at);
        if (!n || !(n->b = parse_tuple_expr(ps, true)) || !expect_block_end(ps)) return NULL;
        n->a = target;
        return n;
    }
    struct jnode *n = node(ps, N_SETBLOCK, at);
    if (!n) return NULL;
    n->a = target;
    while (is_op(cur(ps), '|'))
        if (!(n->c = parse_filter(ps, n->c))) return NULL;
    struct nvec body = {0};
    if (!expect_block_end(ps) || !parse_body(ps, ends, &body)) return NULL;
    advance(ps);
    if (!expect_block_end(ps)) return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    return n;
}

/* (a, b=default, ...) for macro and call-block parameters. */
static bool parse_params(struct parser *ps, struct jnode *n)
{
    struct nvec params = {0};
    if (!is_op(cur(ps), '(')) return true;
    advance(ps);
    while (!is_op(cur(ps), ')')) {
        if (params.n > 0 && !expect_op(ps, ',', "expected ',' or ')'")) return false;
        const struct tok *t = cur(ps);
        if (t->kind != TOK_NAME) {
            fail(ps, t, "expected parameter name");
            return false;
        }
        struct jnode *p = node(ps, N_NAME, t);
        if (!p || !(p->s = tok_cstr(ps, t))) return false;
        advance(ps);
        if (is_op(cur(ps), '=')) {
            advance(ps);
            p->kind = N_KW;
            if (!(p->a = parse_expr(ps))) return false;
        }
        if (!nvec_push(ps, &params, p)) return false;
    }
    advance(ps);
    n->kids2 = params.v;
    n->n_kids2 = params.n;
    return true;
}

static struct jnode *parse_macro(struct parser *ps, const struct tok *at)
{
    static const char *const ends[] = {"endmacro", NULL};
    struct jnode *n = node(ps, N_MACRO, at);
    if (!n) return NULL;
    if (cur(ps)->kind != TOK_NAME) return fail(ps, cur(ps), "expected macro name");
    if (!(n->s = tok_cstr(ps, cur(ps)))) return NULL;
    advance(ps);
    struct nvec body = {0};
    if (!parse_params(ps, n) || !expect_block_end(ps) || !parse_body(ps, ends, &body)) return NULL;
    advance(ps);
    if (cur(ps)->kind == TOK_NAME) advance(ps); // {% endmacro name %}
    if (!expect_block_end(ps)) return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    return n;
}

static struct jnode *parse_call_block(struct parser *ps, const struct tok *at)
{
    static const char *const ends[] = {"endcall", NULL};
    struct jnode *n = node(ps, N_CALLBLOCK, at);
    if (!n || !parse_params(ps, n)) return NULL;
    if (!(n->a = parse_expr(ps))) return NULL;
    if (n->a->kind != N_CALL) return fail(ps, cur(ps), "expected a call");
    struct nvec body = {0};
    if (!expect_block_end(ps) || !parse_body(ps, ends, &body)) return NULL;
    advance(ps);
    if (!expect_block_end(ps)) return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    return n;
}

static struct jnode *parse_filter_block(struct parser *ps, const struct tok *at)
{
    static const char *const ends[] = {"endfilter", NULL};
    struct jnode *n = node(ps, N_FILTERBLOCK, at);
    if (!n) return NULL;
    struct jnode *chain = NULL;
    do {
        ps->i--; // parse_filter skips one token ('|' or the tag name)
        if (!(chain = parse_filter(ps, chain))) return NULL;
    } while (is_op(cur(ps), '|') && (advance(ps), true));
    n->a = chain;
    struct nvec body = {0};
    if (!expect_block_end(ps) || !parse_body(ps, ends, &body)) return NULL;
    advance(ps);
    if (!expect_block_end(ps)) return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    return n;
}

/* {% generation %}..{% endgeneration %}: Hugging Face's marker of the assistant's tokens (for
 * training masks; LFM2.5's template uses it). It renders its body unchanged, so it becomes an
 * if whose condition is the literal true. */
static struct jnode *parse_generation_block(struct parser *ps, const struct tok *at)
{
    static const char *const ends[] = {"endgeneration", NULL};
    struct jnode *n = node(ps, N_IF, at), *yes = node(ps, N_LIT, at);
    if (!n || !yes) return NULL;
    yes->lit = jv_bool(true);
    n->a = yes;
    struct nvec body = {0};
    if (!expect_block_end(ps) || !parse_body(ps, ends, &body)) return NULL;
    advance(ps);
    if (!expect_block_end(ps)) return NULL;
    n->kids = body.v;
    n->n_kids = body.n;
    return n;
}

/* The current token follows {%. */
static struct jnode *parse_statement(struct parser *ps)
{
    const struct tok *t = cur(ps);
    if (t->kind != TOK_NAME) return fail(ps, t, "expected a tag name");
    advance(ps);
    if (is_name(t, "if")) return parse_if(ps, t);
    if (is_name(t, "for")) return parse_for(ps, t);
    if (is_name(t, "set")) return parse_set(ps, t);
    if (is_name(t, "macro")) return parse_macro(ps, t);
    if (is_name(t, "call")) return parse_call_block(ps, t);
    if (is_name(t, "filter")) return parse_filter_block(ps, t);
    if (is_name(t, "generation")) return parse_generation_block(ps, t);
    if (is_name(t, "break") || is_name(t, "continue")) {
        struct jnode *n = node(ps, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        return n && expect_block_end(ps) ? n : NULL;
    }
    return fail(ps, t, "unknown tag");
}

/* Statements until EOF (ends == NULL) or a {% tag %} named in ends; leaves the cursor on that
 * tag's name. */
static bool parse_body(struct parser *ps, const char *const *ends, struct nvec *out)
{
    if (++ps->depth > PARSE_DEPTH_MAX) {
        if (ps->rc == ERR_OK) {
            ps->rc = ERR_LIMIT;
            errmsg_set(ps->err, ERR_LIMIT, "line %d col %d: blocks nested too deeply",
                       cur(ps)->line, cur(ps)->col);
        }
        return false;
    }
    for (;;) {
        const struct tok *t = cur(ps);
        struct jnode *n = NULL;
        if (t->kind == TOK_EOF) {
            if (ends) {
                fail(ps, t, "unexpected end of template, missing end tag");
                return false;
            }
            break;
        }
        if (t->kind == TOK_TEXT) {
            n = node(ps, N_TEXT, t);
            if (n) {
                n->s = t->p;
                n->s_len = t->n;
            }
            advance(ps);
        } else if (t->kind == TOK_VAR_BEGIN) {
            advance(ps);
            n = node(ps, N_OUTPUT, t);
            if (n && !(n->a = parse_tuple_expr(ps, true))) n = NULL;
            if (n && cur(ps)->kind != TOK_VAR_END) n = fail(ps, cur(ps), "expected '}}'");
            advance(ps);
        } else if (t->kind == TOK_BLOCK_BEGIN) {
            advance(ps);
            if (ends && at_name(ps, ends)) break;
            n = parse_statement(ps);
        } else {
            n = fail(ps, t, "unexpected token");
        }
        if (!nvec_push(ps, out, n)) return false;
    }
    ps->depth--;
    return true;
}

int jinja_parse(const struct tok_list *toks, struct arena *a, struct jnode **root,
                struct errmsg *err)
{
    struct parser ps = {.t = toks->v, .n = toks->n, .arena = a, .err = err};
    struct nvec body = {0};
    struct jnode *r = node(&ps, N_IF, &toks->v[0]);
    if (r && parse_body(&ps, NULL, &body)) {
        r->kids = body.v;
        r->n_kids = body.n;
        *root = r;
    }
    return ps.rc;
}
