/* Internals shared by the Jinja interpreter's files: arena, tokens, AST, values and the
 * render state. Never included from outside src/text/jinja_*.c. */
#ifndef TEXT_JINJA_INTERNAL_H
#define TEXT_JINJA_INTERNAL_H

#include "text/jinja/jinja.h"
#include "util/buf.h"
#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena: bump allocator; everything is freed at once ---- */
struct arena_chunk;
struct arena {
    struct arena_chunk *head; // newest chunk first
    size_t used;              // bytes handed out, all chunks
    size_t max_bytes;         // limit; 0 = none
    bool over_limit;          // an allocation was refused for the limit (not for malloc)
};
void arena_init(struct arena *a, size_t max_bytes);
void arena_deinit(struct arena *a);
/* Zeroed, 16-aligned memory, or NULL (out of memory or over the limit). */
void *arena_alloc(struct arena *a, size_t size);
char *arena_strndup(struct arena *a, const char *s, size_t n);

/* ---- tokens ---- */
enum tok_kind {
    TOK_EOF,
    TOK_TEXT,        // raw text, whitespace control already applied
    TOK_VAR_BEGIN,   // {{
    TOK_VAR_END,     // }}
    TOK_BLOCK_BEGIN, // {%
    TOK_BLOCK_END,   // %}
    TOK_NAME,
    TOK_STRING, // p/n: contents already unescaped (arena)
    TOK_INT,
    TOK_FLOAT,
    TOK_OP, // op: a char, or one of the OP_* below
};
enum {
    OP_EQ = 256, // ==
    OP_NE,       // !=
    OP_LE,       // <=
    OP_GE,       // >=
    OP_FLOORDIV, // //
    OP_POW,      // **
};
struct tok {
    enum tok_kind kind;
    int op; // TOK_OP
    const char *p;
    size_t n;
    int64_t ival;
    double fval;
    int line, col; // 1-based
};
struct tok_list {
    struct tok *v;
    size_t n;
};
/* Tokenizes src with trim_blocks and lstrip_blocks. Tokens and strings live in a. */
int jinja_lex(const char *src, size_t len, struct arena *a, struct tok_list *out,
              struct errmsg *err);

/* ---- values ---- */
enum jv_kind {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_FUNC,
    JV_LOOP,
};
struct jlist;
struct jdict;
struct jfunc;
struct loop_state;
struct jv {
    enum jv_kind kind;
    bool is_safe; // JV_STR: a Markup string (|safe, |escape); '+' escapes the plain operand
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p; // not NUL-terminated; arena, template or context owned
            size_t n;
        } s; // JV_STR; JV_UNDEF: hint for error messages (may be empty)
        struct jlist *l;
        struct jdict *d;
        struct jfunc *fn;
        struct loop_state *loop;
    } u;
};
struct jlist {
    struct jv *v;
    size_t n, cap;
    bool is_tuple; // prints as (a, b)
    bool is_gen;   // a generator from map/select...: tojson refuses it like Python's json
};
struct jdict {
    struct jv *keys, *vals; // insertion order
    size_t n, cap;
    bool is_ns; // namespace(): attributes may be assigned
};

struct jnode;
struct frame;
enum fn_kind {
    FN_MACRO,   // node = N_MACRO, closure = defining frame
    FN_CALLER,  // node = N_CALLBLOCK, closure = frame of the call block
    FN_BUILTIN, // name = global function name
    FN_METHOD,  // self.name(...)
};
struct jfunc {
    enum fn_kind kind;
    const struct jnode *node;
    struct frame *closure;
    const char *name; // NUL-terminated
    struct jv self;
};

struct loop_state {
    struct jlist *items;
    size_t index0;
    size_t depth0;
    struct jv
        last_changed; // loop.changed(): the previous arguments (JV_UNDEF before the first call)
};

static inline struct jv jv_undef(void)
{
    struct jv v = {.kind = JV_UNDEF};
    return v;
}
static inline struct jv jv_none(void)
{
    struct jv v = {.kind = JV_NONE};
    return v;
}
static inline struct jv jv_bool(bool b)
{
    struct jv v = {.kind = JV_BOOL, .u.b = b};
    return v;
}
static inline struct jv jv_int(int64_t i)
{
    struct jv v = {.kind = JV_INT, .u.i = i};
    return v;
}
static inline struct jv jv_float(double f)
{
    struct jv v = {.kind = JV_FLOAT, .u.f = f};
    return v;
}
static inline struct jv jv_str(const char *p, size_t n)
{
    struct jv v = {.kind = JV_STR};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

/* ---- AST ---- */
enum node_kind {
    // expressions
    N_LIT,     // lit
    N_NAME,    // s
    N_LIST,    // kids
    N_TUPLE,   // kids
    N_DICT,    // kids = key, value, key, value...
    N_GETATTR, // a . s
    N_GETITEM, // a [ b ]
    N_SLICE,   // a [ b : c : d ] (each of b c d may be NULL)
    N_CALL,    // a ( kids ), keyword args are N_KW
    N_KW,      // s = a
    N_FILTER,  // a | s ( kids ); a NULL inside a filter block
    N_TEST,    // a is [not] s ( kids ); flag = negated
    N_UNARY,   // op a: '-', '+', '!' (not)
    N_BINARY,  // a op b; op: + - * / % ~ OP_* '<' '>' 'a'(and) 'o'(or) 'i'(in) 'n'(not in)
    N_COND,    // b if a else c (c may be NULL)
    // statements
    N_TEXT,        // s
    N_OUTPUT,      // {{ a }}
    N_IF,          // if a: kids else kids2
    N_FOR,         // for a(target) in b [if c]: kids else kids2
    N_SET,         // set a(target) = b
    N_SETBLOCK,    // set a(target) [| c(filter)]: kids
    N_MACRO,       // macro s(kids2: N_NAME or N_KW with default): kids
    N_CALLBLOCK,   // call(kids2 params) a(call expr): kids
    N_FILTERBLOCK, // filter a(filter chain, innermost input NULL): kids
    N_BREAK,
    N_CONTINUE,
};
struct jnode {
    enum node_kind kind;
    int op;
    bool flag;
    int line, col;
    const char *s; // NUL-terminated (arena)
    size_t s_len;
    struct jv lit;
    struct jnode *a, *b, *c, *d;
    struct jnode **kids;
    size_t n_kids;
    struct jnode **kids2;
    size_t n_kids2;
};
/* Parses tokens into a statement list (root: N_IF-free list in kids of a synthetic node). */
int jinja_parse(const struct tok_list *toks, struct arena *a, struct jnode **root,
                struct errmsg *err);

/* ---- render state ---- */
struct frame {
    struct frame *parent;
    struct jdict *vars;
};
enum ctl { CTL_NONE, CTL_BREAK, CTL_CONTINUE };
struct rstate {
    struct arena *arena;
    struct buf *out;     // current output (macro bodies redirect it)
    struct buf *out_top; // the caller's buffer
    size_t out_top_max;  // bytes out_top may reach before ERR_LIMIT
    bool is_out_bounded; // out_top_max is the caller's: no string may grow past it either
    bool *is_out_over;   // the caller's flag for a stop at out_top_max, or NULL
    struct frame *top;   // template-level frame
    struct frame *frame; // current scope
    int rc;              // sticky: first error
    struct errmsg *err;  // message for rc
    enum ctl ctl;        // pending break/continue
    int64_t steps, max_steps;
    int depth;      // eval/exec recursion
    int call_depth; // macro calls
    struct tm now;
    const struct jnode *at; // node being evaluated, for error positions
    const struct jv *pipe;  // input of the innermost filter in a filter block / set block
};

/* Records the first error (sticky) with "line L col C: " + message; returns rc. */
int rs_fail(struct rstate *st, const struct jnode *at, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int rs_nomem(struct rstate *st);
/* Records that the output (or a string on its way there) passed the caller's bound. */
int rs_out_over(struct rstate *st);

/* Arguments to a call, filter, test or method. */
struct jargs {
    const struct jv *pos;
    size_t n_pos;
    const struct jv *kw_vals;
    const char *const *kw_names;
    size_t n_kw;
};
/* Argument i by position, else by keyword name; NULL when absent. */
const struct jv *jargs_get(const struct jargs *a, size_t i, const char *name);

/* ---- value helpers (jinja_value.c) ---- */
bool jv_truthy(struct jv v);
bool jv_equal(struct jv a, struct jv b);
/* <0, 0, >0; false when the types cannot be ordered. */
bool jv_compare(struct jv a, struct jv b, bool casefold, int *out);
const char *jv_type_name(struct jv v);
struct jlist *jl_new(struct rstate *st, size_t cap);
bool jl_push(struct rstate *st, struct jlist *l, struct jv v);
struct jdict *jd_new(struct rstate *st, size_t cap);
/* Pointer to the value for key, or NULL. */
struct jv *jd_get(const struct jdict *d, struct jv key);
struct jv *jd_get_cstr(const struct jdict *d, const char *key);
bool jd_set(struct rstate *st, struct jdict *d, struct jv key, struct jv val);
/* Adds key, which the caller knows is not in d yet (no lookup). */
bool jd_append(struct rstate *st, struct jdict *d, struct jv key, struct jv val);
struct jv jv_list(struct jlist *l);
struct jv jv_dict(struct jdict *d);
struct jv jv_cstr(struct rstate *st, const char *s);
/* Appends str(v) (Python str: repr inside containers) to b. */
int jv_write_str(struct buf *b, struct jv v);
int jv_write_repr(struct buf *b, struct jv v);
void py_float_repr(double f, char *out, size_t cap);
/* str(v) as an arena string. */
bool jv_to_str(struct rstate *st, struct jv v, struct jv *out);
/* json.dumps options. */
struct json_fmt {
    int indent;           // < 0: one line
    const char *item_sep; // ", " (or "," with indent)
    const char *key_sep;  // ": "
    bool sort_keys;
    bool ensure_ascii; // escape non-ASCII as \uXXXX
};
/* JSON text like Python json.dumps. */
int jv_write_json(struct rstate *st, struct buf *b, struct jv v, const struct json_fmt *fmt,
                  int depth);
bool jv_from_json(struct rstate *st, const json_t *j, struct jv *out, int depth);
/* Iterable as a list (dict: keys, string: characters); false (error set) if not iterable. */
bool jv_iter_list(struct rstate *st, const struct jnode *at, struct jv v, struct jlist **out);
/* UTF-8 code points in s. */
size_t utf8_count(const char *s, size_t n);
/* Byte offset of code point idx (clamped to n). */
size_t utf8_offset(const char *s, size_t n, size_t idx);

/* ---- operators (jinja_ops.c): Python semantics; errors set st->rc and give Undefined ---- */
struct jv jinja_getitem(struct rstate *st, const struct jnode *at, struct jv obj, struct jv key);
/* parts: start, stop, step (None when absent). */
struct jv jinja_slice(struct rstate *st, const struct jnode *at, struct jv obj,
                      const struct jv *parts);
struct jv jinja_unary(struct rstate *st, const struct jnode *at, struct jv v);
struct jv jinja_binop(struct rstate *st, const struct jnode *at, int op, struct jv a, struct jv b);
/* Python str % args. */
struct jv jinja_percent_format(struct rstate *st, const struct jnode *at, struct jv fmt,
                               struct jv args);

/* ---- string primitives (jinja_methods.c) ---- */
/* mode: 1 left, 2 right, 3 both; chars NULL or None = whitespace. Returns a slice of s. */
struct jv jstr_strip(struct jv s, const struct jv *chars, int mode);
struct jv jstr_replace(struct rstate *st, struct jv s, struct jv old, struct jv rep, int64_t count);
/* mode: 'u' upper, 'l' lower, 't' Python title, 'c' capitalize, 'j' Jinja's title filter. */
struct jv jstr_case(struct rstate *st, struct jv s, int mode);
/* str(item) joined with sep. */
struct jv jstr_join(struct rstate *st, const struct jlist *l, struct jv sep);

/* ---- builtins (jinja_builtins.c, jinja_methods.c) ---- */
typedef int (*jinja_filter_fn)(struct rstate *st, const struct jnode *at, struct jv in,
                               const struct jargs *a, struct jv *out);
/* The string/list filters of jinja_builtins.c, or NULL. */
jinja_filter_fn jinja_filter_find_text(const char *name);
/* Item-then-attribute lookup along a dotted path, as Jinja's attribute= arguments do. */
struct jv jinja_attr_path(struct rstate *st, const struct jnode *at, struct jv v, struct jv path);
bool jinja_filter_exists(const char *name);
/* Markup + str: the plain operand is HTML-escaped, the result is Markup. */
struct jv jinja_markup_add(struct rstate *st, const struct jnode *at, struct jv a, struct jv b);
bool jinja_test_exists(const char *name);
int jinja_filter_apply(struct rstate *st, const struct jnode *at, const char *name, struct jv in,
                       const struct jargs *args, struct jv *out);
int jinja_test_apply(struct rstate *st, const struct jnode *at, const char *name, struct jv in,
                     const struct jargs *args, bool *out);
/* Attribute lookup on a value (methods, dict keys, loop fields). */
int jinja_getattr(struct rstate *st, const struct jnode *at, struct jv obj, const char *name,
                  struct jv *out);
int jinja_call_method(struct rstate *st, const struct jnode *at, const struct jfunc *fn,
                      const struct jargs *args, struct jv *out);
int jinja_call_global(struct rstate *st, const struct jnode *at, const char *name,
                      const struct jargs *args, struct jv *out);
bool jinja_global_exists(const char *name);
/* Calls any callable value (evaluator). */
int jinja_call_value(struct rstate *st, const struct jnode *at, struct jv fn,
                     const struct jargs *args, struct jv *out);

#endif
