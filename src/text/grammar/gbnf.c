/* GBNF parser and compiler: grammar text -> struct gbnf (rules of alternates of elements), with
 * repetitions expanded into generated rules, character classes normalized to sorted code point
 * ranges, and the checks (undefined rules, left recursion, empty language) done once here.
 * Syntax facts follow llama.cpp's grammars/README.md and its parser's accepted forms. */
#include "text/grammar/gbnf.h"
#include "text/grammar/gbnf_internal.h"

#include "util/mem.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CP_MAX 0x10FFFFu
#define NO_ID  UINT32_MAX

struct evec {
    struct gbnf_elem *v; // n elements, cap allocated
    uint32_t n, cap;
};

struct rule_info {
    const char *name; // borrowed from the source; NULL for generated rules
    size_t name_len;
    bool is_defined;
    size_t first_use; // source offset of the first reference (for "undefined rule" errors)
};

struct parser {
    const char *src;
    size_t len, pos;
    struct errmsg *err;
    struct evec *rules; // n_rules; element vectors under construction
    struct rule_info *info;
    uint32_t n_rules, rules_cap;
    uint32_t *name_hash; // hash_cap slots of rule ids (NO_ID = empty); named rules only
    uint32_t hash_cap;
    struct gbnf_range *ranges;
    uint32_t n_ranges, ranges_cap;
    uint32_t n_elems; // total over all rules, checked against GBNF_N_ELEMS_MAX
    int depth;
};

/* Sets the error message with the line and column of offset at, returns ERR_FORMAT. */
static int fail_at(struct parser *p, size_t at, const char *what)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->src[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)p->src[i] & 0xC0) != 0x80) {
            col++;
        }
    }
    return errmsg_set(p->err, ERR_FORMAT, "grammar line %zu, column %zu: %s", line, col, what);
}

static int fail(struct parser *p, const char *what)
{
    return fail_at(p, p->pos, what);
}

static int peek(const struct parser *p)
{
    return p->pos < p->len ? (unsigned char)p->src[p->pos] : -1;
}

static int peek_at(const struct parser *p, size_t k)
{
    return p->pos + k < p->len ? (unsigned char)p->src[p->pos + k] : -1;
}

static bool is_word_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Skips blanks and comments; newlines too when newline_ok (inside parentheses, after `|`). */
static void skip_space(struct parser *p, bool newline_ok)
{
    for (;;) {
        int c = peek(p);
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->src[p->pos] != '\n' && p->src[p->pos] != '\r')
                p->pos++;
        } else {
            return;
        }
    }
}

static uint32_t name_hash_of(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int grow_rules(struct parser *p)
{
    if (p->n_rules >= GBNF_N_RULES_MAX)
        return errmsg_set(p->err, ERR_LIMIT, "grammar has more than %u rules", GBNF_N_RULES_MAX);
    if (p->n_rules < p->rules_cap) return ERR_OK;
    uint32_t cap = p->rules_cap ? p->rules_cap * 2 : 16;
    struct evec *r = mem_realloc(p->rules, cap * sizeof *r);
    if (!r) return ERR_NOMEM;
    p->rules = r;
    struct rule_info *in = mem_realloc(p->info, cap * sizeof *in);
    if (!in) return ERR_NOMEM;
    p->info = in;
    p->rules_cap = cap;
    return ERR_OK;
}

/* Appends a rule; *id gets its index. name may be NULL (a generated rule). */
static int add_rule(struct parser *p, const char *name, size_t name_len, uint32_t *id)
{
    int rc = grow_rules(p);
    if (rc != ERR_OK) return rc;
    p->rules[p->n_rules] = (struct evec){0};
    p->info[p->n_rules] = (struct rule_info){name, name_len, false, p->pos};
    *id = p->n_rules++;
    return ERR_OK;
}

static int rehash_names(struct parser *p)
{
    uint32_t cap = p->hash_cap ? p->hash_cap * 2 : 64;
    uint32_t *h = mem_alloc(cap * sizeof *h);
    if (!h) return ERR_NOMEM;
    memset(h, 0xFF, cap * sizeof *h);
    for (uint32_t i = 0; i < p->n_rules; i++) {
        if (!p->info[i].name) continue;
        uint32_t k = name_hash_of(p->info[i].name, p->info[i].name_len) & (cap - 1);
        while (h[k] != NO_ID)
            k = (k + 1) & (cap - 1);
        h[k] = i;
    }
    mem_free(p->name_hash);
    p->name_hash = h;
    p->hash_cap = cap;
    return ERR_OK;
}

/* Finds or creates the named rule s[0..n); *id gets its index. */
static int intern_name(struct parser *p, const char *s, size_t n, uint32_t *id)
{
    if (p->hash_cap == 0 || (p->n_rules + 1) * 2 > p->hash_cap) {
        int rc = rehash_names(p);
        if (rc != ERR_OK) return rc;
    }
    uint32_t k = name_hash_of(s, n) & (p->hash_cap - 1);
    while (p->name_hash[k] != NO_ID) {
        const struct rule_info *in = &p->info[p->name_hash[k]];
        if (in->name_len == n && memcmp(in->name, s, n) == 0) {
            *id = p->name_hash[k];
            return ERR_OK;
        }
        k = (k + 1) & (p->hash_cap - 1);
    }
    int rc = add_rule(p, s, n, id);
    if (rc == ERR_OK) p->name_hash[k] = *id;
    return rc;
}

static int emit(struct parser *p, uint32_t rule, uint32_t op, uint32_t a, uint32_t b)
{
    if (p->n_elems >= GBNF_N_ELEMS_MAX)
        return errmsg_set(p->err, ERR_LIMIT, "grammar expands to more than %u elements",
                          GBNF_N_ELEMS_MAX);
    struct evec *e = &p->rules[rule];
    if (e->n == e->cap) {
        uint32_t cap = e->cap ? e->cap * 2 : 8;
        struct gbnf_elem *v = mem_realloc(e->v, cap * sizeof *v);
        if (!v) return ERR_NOMEM;
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = (struct gbnf_elem){op, a, b};
    p->n_elems++;
    return ERR_OK;
}

static int cmp_range(const void *a, const void *b)
{
    const struct gbnf_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges set[0..n) in place (negating it when is_negated), appends it to the range
 * pool and emits one CHARS element. An empty set is legal and matches nothing. */
static int emit_set(struct parser *p, uint32_t rule, struct gbnf_range *set, uint32_t n,
                    bool is_negated)
{
    if (n > 1) qsort(set, n, sizeof *set, cmp_range);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m > 0 && set[i].lo <= set[m - 1].hi + 1) {
            if (set[i].hi > set[m - 1].hi) set[m - 1].hi = set[i].hi;
        } else {
            set[m++] = set[i];
        }
    }
    uint32_t n_out = is_negated ? m + 1 : m; // a complement has at most one range more
    if (p->n_ranges + n_out > p->ranges_cap) {
        uint32_t cap = p->ranges_cap ? p->ranges_cap : 64;
        while (cap < p->n_ranges + n_out)
            cap *= 2;
        struct gbnf_range *r = mem_realloc(p->ranges, (size_t)cap * sizeof *r);
        if (!r) return ERR_NOMEM;
        p->ranges = r;
        p->ranges_cap = cap;
    }
    uint32_t off = p->n_ranges;
    if (!is_negated && m > 0) {
        memcpy(p->ranges + off, set, m * sizeof *set);
        p->n_ranges += m;
    } else if (is_negated) {
        uint32_t next = 0;
        for (uint32_t i = 0; i < m; i++) {
            if (set[i].lo > next)
                p->ranges[p->n_ranges++] = (struct gbnf_range){next, set[i].lo - 1};
            next = set[i].hi + 1;
        }
        if (next <= CP_MAX) p->ranges[p->n_ranges++] = (struct gbnf_range){next, CP_MAX};
    }
    return emit(p, rule, GBNF_OP_CHARS, off, p->n_ranges - off);
}

/* Decodes one UTF-8 code point at p->pos into *cp. */
static int parse_utf8(struct parser *p, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)p->src + p->pos;
    size_t avail = p->len - p->pos;
    uint32_t c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || n > avail) return fail(p, "invalid UTF-8");
    if (n > 1) c &= 0x3Fu >> (n - 1);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return fail(p, "invalid UTF-8");
        c = (c << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_of_len[n] || c > CP_MAX || (c >= 0xD800 && c <= 0xDFFF))
        return fail(p, "invalid UTF-8");
    p->pos += n;
    *cp = c;
    return ERR_OK;
}

static int parse_hex(struct parser *p, int n_digits, uint32_t *cp)
{
    uint32_t v = 0;
    for (int i = 0; i < n_digits; i++) {
        int c = peek(p);
        int d = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0)
            return fail(p, n_digits == 2   ? "expected 2 hex digits after \\x"
                           : n_digits == 4 ? "expected 4 hex digits after \\u"
                                           : "expected 8 hex digits after \\U");
        v = (v << 4) | (uint32_t)d;
        p->pos++;
    }
    if (v > CP_MAX) return fail(p, "code point above U+10FFFF");
    *cp = v;
    return ERR_OK;
}

/* One character of a literal or class: an escape or a UTF-8 code point. */
static int parse_char(struct parser *p, uint32_t *cp)
{
    if (peek(p) < 0) return fail(p, "unexpected end of grammar");
    if (peek(p) == 0) return fail(p, "NUL byte in grammar");
    if (peek(p) != '\\') return parse_utf8(p, cp);
    int c = peek_at(p, 1);
    p->pos += 2;
    switch (c) {
    case 'x':
        return parse_hex(p, 2, cp);
    case 'u':
        return parse_hex(p, 4, cp);
    case 'U':
        return parse_hex(p, 8, cp);
    case 't':
        *cp = '\t';
        return ERR_OK;
    case 'r':
        *cp = '\r';
        return ERR_OK;
    case 'n':
        *cp = '\n';
        return ERR_OK;
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
        *cp = (uint32_t)c;
        return ERR_OK;
    default:
        p->pos -= 2;
        return fail(
            p, "unknown escape (expected one of \\n \\t \\r \\\\ \\\" \\[ \\] \\- \\x \\u \\U)");
    }
}

static int parse_literal(struct parser *p, uint32_t rule)
{
    p->pos++; // opening quote
    while (peek(p) != '"') {
        uint32_t cp;
        int rc = parse_char(p, &cp);
        if (rc == ERR_OK) {
            struct gbnf_range r = {cp, cp};
            rc = emit_set(p, rule, &r, 1, false);
        }
        if (rc != ERR_OK) return rc;
    }
    p->pos++;
    return ERR_OK;
}

static int parse_class(struct parser *p, uint32_t rule)
{
    size_t start = p->pos;
    p->pos++; // [
    bool is_negated = peek(p) == '^';
    if (is_negated) p->pos++;
    struct gbnf_range *set = NULL;
    uint32_t n = 0, cap = 0;
    int rc = ERR_OK;
    while (rc == ERR_OK && peek(p) != ']') {
        struct gbnf_range r;
        rc = parse_char(p, &r.lo);
        r.hi = r.lo;
        if (rc == ERR_OK && peek(p) == '-' && peek_at(p, 1) != ']' && peek_at(p, 1) >= 0) {
            p->pos++;
            size_t at = p->pos;
            rc = parse_char(p, &r.hi);
            if (rc == ERR_OK && r.hi < r.lo) rc = fail_at(p, at, "range end below range start");
        }
        if (rc == ERR_OK && n == cap) {
            cap = cap ? cap * 2 : 8;
            struct gbnf_range *s =
                cap < GBNF_N_ELEMS_MAX ? mem_realloc(set, cap * sizeof *s) : NULL;
            if (!s)
                rc = cap < GBNF_N_ELEMS_MAX ? ERR_NOMEM : fail_at(p, start, "class too large");
            else
                set = s;
        }
        if (rc == ERR_OK) set[n++] = r;
    }
    if (rc == ERR_OK) {
        p->pos++;
        rc = emit_set(p, rule, set, n, is_negated);
    }
    mem_free(set);
    return rc;
}

static int parse_uint(struct parser *p, uint32_t *v)
{
    if (peek(p) < '0' || peek(p) > '9') return fail(p, "expected an integer");
    uint64_t x = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        x = x * 10 + (uint64_t)(peek(p) - '0');
        if (x > GBNF_REPEAT_MAX)
            return errmsg_set(p->err, ERR_LIMIT, "repetition count above %d", GBNF_REPEAT_MAX);
        p->pos++;
    }
    *v = (uint32_t)x;
    return ERR_OK;
}

/* `{m}`, `{m,}` or `{m,n}`; *max = NO_ID for no upper bound. */
static int parse_braces(struct parser *p, bool is_nested, uint32_t *min, uint32_t *max)
{
    p->pos++;
    skip_space(p, is_nested);
    int rc = parse_uint(p, min);
    if (rc != ERR_OK) return rc;
    skip_space(p, is_nested);
    *max = *min;
    if (peek(p) == ',') {
        p->pos++;
        skip_space(p, is_nested);
        *max = NO_ID;
        if (peek(p) >= '0' && peek(p) <= '9') {
            rc = parse_uint(p, max);
            if (rc != ERR_OK) return rc;
            if (*max < *min) return fail(p, "repetition maximum below minimum");
            skip_space(p, is_nested);
        }
    }
    if (peek(p) != '}') return fail(p, "expected '}' or ','");
    p->pos++;
    return ERR_OK;
}

/* Replaces the symbol rules[rule].v[start..] by min copies of itself followed by up to max-min
 * optional copies (max = NO_ID: any number), through generated rules as llama.cpp does, so
 * `x{0,N}` nests instead of forming N independent optionals. */
static int repeat_symbol(struct parser *p, uint32_t rule, uint32_t start, uint32_t min,
                         uint32_t max)
{
    uint32_t n_sym = p->rules[rule].n - start;
    if (n_sym == 0) return ERR_OK; // `""*` and the like: repeating nothing is nothing
    struct gbnf_elem *sym = mem_alloc(n_sym * sizeof *sym);
    if (!sym) return ERR_NOMEM;
    memcpy(sym, p->rules[rule].v + start, n_sym * sizeof *sym);
    p->rules[rule].n = start;
    p->n_elems -= n_sym;
    int rc = ERR_OK;
    for (uint32_t i = 0; rc == ERR_OK && i < min; i++)
        for (uint32_t k = 0; rc == ERR_OK && k < n_sym; k++)
            rc = emit(p, rule, sym[k].op, sym[k].a, sym[k].b);
    uint32_t n_opt = max == NO_ID ? 1 : max - min;
    uint32_t last = NO_ID;
    for (uint32_t i = 0; rc == ERR_OK && i < n_opt; i++) {
        uint32_t r;
        rc = add_rule(p, NULL, 0, &r);
        for (uint32_t k = 0; rc == ERR_OK && k < n_sym; k++)
            rc = emit(p, r, sym[k].op, sym[k].a, sym[k].b);
        uint32_t tail = max == NO_ID ? r : last; // x* is `r ::= x r | ε`
        if (rc == ERR_OK && tail != NO_ID) rc = emit(p, r, GBNF_OP_REF, tail, 0);
        if (rc == ERR_OK) rc = emit(p, r, GBNF_OP_ALT, 0, 0);
        if (rc == ERR_OK) rc = emit(p, r, GBNF_OP_END, 0, 0);
        last = r;
    }
    if (rc == ERR_OK && last != NO_ID) rc = emit(p, rule, GBNF_OP_REF, last, 0);
    mem_free(sym);
    return rc;
}

static int parse_alternates(struct parser *p, uint32_t rule, bool is_nested);

static int parse_group(struct parser *p, uint32_t rule)
{
    size_t open = p->pos;
    if (p->depth >= GBNF_NEST_DEPTH_MAX)
        return errmsg_set(p->err, ERR_LIMIT, "parentheses nested deeper than %d",
                          GBNF_NEST_DEPTH_MAX);
    p->pos++;
    skip_space(p, true);
    uint32_t sub;
    int rc = add_rule(p, NULL, 0, &sub);
    if (rc != ERR_OK) return rc;
    p->depth++;
    rc = parse_alternates(p, sub, true);
    p->depth--;
    if (rc != ERR_OK) return rc;
    if (peek(p) != ')')
        return peek(p) < 0 ? fail_at(p, open, "unclosed '('") : fail(p, "expected ')'");
    p->pos++;
    return emit(p, rule, GBNF_OP_REF, sub, 0);
}

static int parse_reference(struct parser *p, uint32_t rule)
{
    size_t start = p->pos;
    while (is_word_char(peek(p)))
        p->pos++;
    uint32_t id;
    int rc = intern_name(p, p->src + start, p->pos - start, &id);
    if (rc != ERR_OK) return rc;
    if (p->info[id].first_use > start) p->info[id].first_use = start;
    return emit(p, rule, GBNF_OP_REF, id, 0);
}

/* A postfix operator applied to the symbol starting at sym_start (NO_ID: none yet). */
static int parse_postfix(struct parser *p, uint32_t rule, uint32_t sym_start, bool is_nested)
{
    int c = peek(p);
    if (sym_start == NO_ID) return fail(p, "expected an item before '*', '+', '?' or '{'");
    uint32_t min = 0, max = NO_ID;
    if (c == '{') {
        int rc = parse_braces(p, is_nested, &min, &max);
        if (rc != ERR_OK) return rc;
    } else {
        p->pos++;
        min = c == '+';
        max = c == '?' ? 1 : NO_ID;
    }
    return repeat_symbol(p, rule, sym_start, min, max);
}

/* Elements until `|`, `)`, a newline outside parentheses, or the end. */
static int parse_sequence(struct parser *p, uint32_t rule, bool is_nested)
{
    uint32_t sym_start = NO_ID;
    for (;;) {
        int c = peek(p), rc;
        uint32_t here = p->rules[rule].n;
        if (c == '"') {
            rc = parse_literal(p, rule);
        } else if (c == '[') {
            rc = parse_class(p, rule);
        } else if (c == '.') {
            p->pos++;
            struct gbnf_range any = {0, CP_MAX};
            rc = emit_set(p, rule, &any, 1, false);
        } else if (c == '(') {
            rc = parse_group(p, rule);
        } else if (is_word_char(c)) {
            rc = parse_reference(p, rule);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            rc = parse_postfix(p, rule, sym_start, is_nested);
            here = NO_ID; // a repeated item cannot be repeated again without parentheses
        } else if (c == '<' || c == '!') {
            return errmsg_set(p->err, ERR_UNSUPPORTED,
                              "grammar token references are not supported");
        } else {
            return ERR_OK;
        }
        if (rc != ERR_OK) return rc;
        sym_start = here;
        skip_space(p, is_nested);
    }
}

static int parse_alternates(struct parser *p, uint32_t rule, bool is_nested)
{
    int rc = parse_sequence(p, rule, is_nested);
    while (rc == ERR_OK && peek(p) == '|') {
        p->pos++;
        skip_space(p, true);
        rc = emit(p, rule, GBNF_OP_ALT, 0, 0);
        if (rc == ERR_OK) rc = parse_sequence(p, rule, is_nested);
    }
    if (rc == ERR_OK) rc = emit(p, rule, GBNF_OP_END, 0, 0);
    return rc;
}

static int parse_rule(struct parser *p)
{
    size_t start = p->pos;
    if (!is_word_char(peek(p))) return fail(p, "expected a rule name");
    while (is_word_char(peek(p)))
        p->pos++;
    uint32_t id;
    int rc = intern_name(p, p->src + start, p->pos - start, &id);
    if (rc != ERR_OK) return rc;
    if (p->info[id].is_defined) return fail_at(p, start, "rule defined twice");
    p->info[id].is_defined = true;
    skip_space(p, false);
    if (p->pos + 3 > p->len || memcmp(p->src + p->pos, "::=", 3) != 0)
        return fail(p, "expected '::='");
    p->pos += 3;
    skip_space(p, true);
    rc = parse_alternates(p, id, false);
    if (rc != ERR_OK) return rc;
    if (peek(p) == '\r') p->pos++;
    if (peek(p) == '\n')
        p->pos++;
    else if (peek(p) >= 0)
        return fail(p, peek(p) == ')' ? "unmatched ')'" : "expected a newline or end of grammar");
    skip_space(p, true);
    return ERR_OK;
}

/* Flattens the per-rule vectors into one gbnf. Takes the ranges pool from p. */
static int flatten(struct parser *p, struct gbnf **out)
{
    struct gbnf *g = mem_calloc(1, sizeof *g);
    if (!g) return ERR_NOMEM;
    g->elems = mem_alloc((p->n_elems ? p->n_elems : 1) * sizeof *g->elems);
    g->rule_start = mem_alloc(p->n_rules * sizeof *g->rule_start);
    if (!g->elems || !g->rule_start) {
        gbnf_free(g);
        return ERR_NOMEM;
    }
    for (uint32_t r = 0; r < p->n_rules; r++) {
        g->rule_start[r] = g->n_elems;
        memcpy(g->elems + g->n_elems, p->rules[r].v, p->rules[r].n * sizeof *g->elems);
        g->n_elems += p->rules[r].n;
    }
    g->n_rules = p->n_rules;
    g->ranges = p->ranges;
    g->n_ranges = p->n_ranges;
    p->ranges = NULL;
    *out = g;
    return ERR_OK;
}

/* Marks the rules that derive some string all of whose elements satisfy a property: with
 * chars_ok = false that is "derives the empty string" (nullable), with chars_ok = true "derives
 * any string at all" (productive; a CHARS element qualifies when its set is non-empty).
 * Worklist over alternates, linear in the grammar size. */
static int mark_rules(const struct gbnf *g, bool chars_ok, bool *mark)
{
    uint32_t n = g->n_elems, nr = g->n_rules;
    uint32_t *pending = mem_calloc(n, sizeof *pending); // per alternate start: unmet elements
    uint32_t *alt_rule = mem_alloc(n * sizeof *alt_rule);
    uint32_t *occ_head = mem_alloc(nr * sizeof *occ_head); // per rule: REF elements naming it
    uint32_t *occ_next = mem_alloc(n * sizeof *occ_next);
    uint32_t *alt_of = mem_alloc(n * sizeof *alt_of);
    uint32_t *queue = mem_alloc(nr * sizeof *queue);
    int rc = ERR_NOMEM;
    if (!pending || !alt_rule || !occ_head || !occ_next || !alt_of || !queue) goto out_free;
    memset(occ_head, 0xFF, nr * sizeof *occ_head);
    memset(mark, 0, nr * sizeof *mark);
    uint32_t n_queue = 0;
    for (uint32_t r = 0; r < nr; r++) {
        uint32_t alt = g->rule_start[r];
        bool is_dead = false;
        for (uint32_t i = alt;; i++) {
            const struct gbnf_elem *e = &g->elems[i];
            alt_of[i] = alt;
            if (e->op == GBNF_OP_REF) {
                pending[alt]++;
                occ_next[i] = occ_head[e->a];
                occ_head[e->a] = i;
            } else if (e->op == GBNF_OP_CHARS) {
                is_dead |= !(chars_ok && e->b > 0);
            } else {
                alt_rule[alt] = r;
                if (is_dead)
                    pending[alt] = UINT32_MAX; // can never be satisfied
                else if (pending[alt] == 0 && !mark[r])
                    mark[r] = true, queue[n_queue++] = r;
                if (e->op == GBNF_OP_END) break;
                alt = i + 1;
                is_dead = false;
            }
        }
    }
    while (n_queue > 0) {
        uint32_t r = queue[--n_queue];
        for (uint32_t i = occ_head[r]; i != NO_ID; i = occ_next[i]) {
            uint32_t alt = alt_of[i];
            if (pending[alt] == UINT32_MAX || --pending[alt] > 0 || mark[alt_rule[alt]]) continue;
            mark[alt_rule[alt]] = true;
            queue[n_queue++] = alt_rule[alt];
        }
    }
    rc = ERR_OK;
out_free:
    mem_free(pending);
    mem_free(alt_rule);
    mem_free(occ_head);
    mem_free(occ_next);
    mem_free(alt_of);
    mem_free(queue);
    return rc;
}

/* Finds a cycle in the "can start with" relation between rules (left recursion), which the
 * matcher's expansion could never finish. Iterative DFS; *cycle_rule gets a rule on the cycle
 * or NO_ID. */
static int find_left_recursion(const struct gbnf *g, const bool *nullable, uint32_t *cycle_rule)
{
    uint32_t nr = g->n_rules;
    uint8_t *color = mem_calloc(nr, 1); // 0 new, 1 on the DFS path, 2 done
    uint32_t *stack_rule = mem_alloc(nr * sizeof *stack_rule);
    uint32_t *stack_pos = mem_alloc(nr * sizeof *stack_pos); // next element to look at
    uint8_t *stack_skip = mem_alloc(nr); // 1 while the rest of the alternate is not a left corner
    int rc = ERR_NOMEM;
    *cycle_rule = NO_ID;
    if (!color || !stack_rule || !stack_pos || !stack_skip) goto out_free;
    for (uint32_t r0 = 0; r0 < nr && *cycle_rule == NO_ID; r0++) {
        if (color[r0]) continue;
        uint32_t sp = 0;
        stack_rule[sp] = r0, stack_pos[sp] = g->rule_start[r0], stack_skip[sp++] = 0;
        color[r0] = 1;
        while (sp > 0 && *cycle_rule == NO_ID) {
            uint32_t top = sp - 1;
            const struct gbnf_elem *e = &g->elems[stack_pos[top]++];
            if (e->op == GBNF_OP_END) {
                color[stack_rule[top]] = 2;
                sp--;
            } else if (e->op == GBNF_OP_ALT) {
                stack_skip[top] = 0;
            } else if (stack_skip[top]) {
                continue;
            } else if (e->op == GBNF_OP_CHARS) {
                stack_skip[top] = 1;
            } else {
                stack_skip[top] = !nullable[e->a];
                if (color[e->a] == 1)
                    *cycle_rule = e->a;
                else if (color[e->a] == 0) {
                    color[e->a] = 1;
                    stack_rule[sp] = e->a, stack_pos[sp] = g->rule_start[e->a];
                    stack_skip[sp++] = 0;
                }
            }
        }
    }
    rc = ERR_OK;
out_free:
    mem_free(color);
    mem_free(stack_rule);
    mem_free(stack_pos);
    mem_free(stack_skip);
    return rc;
}

/* Names a rule for messages: its own name, or that it was generated. */
static void rule_label(const struct parser *p, uint32_t r, char *out, size_t cap)
{
    const struct rule_info *in = &p->info[r];
    if (in->name) {
        int n = in->name_len > 64 ? 64 : (int)in->name_len;
        snprintf(out, cap, "'%.*s'", n, in->name);
    } else {
        snprintf(out, cap, "(a group or repetition)");
    }
}

static int check_grammar(struct parser *p, const struct gbnf *g)
{
    char label[80];
    bool *mark = mem_alloc(g->n_rules * sizeof *mark);
    if (!mark) return ERR_NOMEM;
    int rc = mark_rules(g, false, mark);
    uint32_t cycle = NO_ID;
    if (rc == ERR_OK) rc = find_left_recursion(g, mark, &cycle);
    if (rc == ERR_OK && cycle != NO_ID) {
        rule_label(p, cycle, label, sizeof label);
        rc = errmsg_set(p->err, ERR_FORMAT, "grammar rule %s is left-recursive", label);
    }
    if (rc == ERR_OK) rc = mark_rules(g, true, mark);
    if (rc == ERR_OK && !mark[g->root])
        rc = errmsg_set(p->err, ERR_FORMAT, "grammar rule 'root' can match nothing");
    mem_free(mark);
    return rc;
}

static int parse_all(struct parser *p)
{
    skip_space(p, true);
    while (p->pos < p->len) {
        int rc = parse_rule(p);
        if (rc != ERR_OK) return rc;
    }
    for (uint32_t r = 0; r < p->n_rules; r++) {
        if (p->info[r].name && !p->info[r].is_defined) {
            char what[128];
            int n = p->info[r].name_len > 64 ? 64 : (int)p->info[r].name_len;
            snprintf(what, sizeof what, "undefined rule '%.*s'", n, p->info[r].name);
            return fail_at(p, p->info[r].first_use, what);
        }
    }
    return ERR_OK;
}

int gbnf_compile(const char *src, size_t len, struct gbnf **out, struct errmsg *err)
{
    if (len > GBNF_SRC_LEN_MAX)
        return errmsg_set(err, ERR_LIMIT, "grammar longer than %u bytes", GBNF_SRC_LEN_MAX);
    struct parser p = {.src = src, .len = len, .err = err};
    struct gbnf *g = NULL;
    int rc = parse_all(&p);
    uint32_t root = NO_ID;
    if (rc == ERR_OK) {
        static const char root_name[] = "root";
        for (uint32_t r = 0; r < p.n_rules && root == NO_ID; r++)
            if (p.info[r].name && p.info[r].name_len == 4 && !memcmp(p.info[r].name, root_name, 4))
                root = r;
        if (root == NO_ID) rc = errmsg_set(err, ERR_FORMAT, "grammar has no 'root' rule");
    }
    if (rc == ERR_OK) rc = flatten(&p, &g);
    if (rc == ERR_OK) {
        g->root = root;
        rc = check_grammar(&p, g);
    }
    for (uint32_t r = 0; r < p.n_rules; r++)
        mem_free(p.rules[r].v);
    mem_free(p.rules);
    mem_free(p.info);
    mem_free(p.name_hash);
    mem_free(p.ranges);
    if (rc != ERR_OK) {
        gbnf_free(g);
        if (rc == ERR_NOMEM) errmsg_set(err, ERR_NOMEM, "out of memory compiling grammar");
        return rc;
    }
    *out = g;
    return ERR_OK;
}

void gbnf_free(struct gbnf *g)
{
    if (!g) return;
    mem_free(g->elems);
    mem_free(g->rule_start);
    mem_free(g->ranges);
    mem_free(g);
}

size_t gbnf_n_rules(const struct gbnf *g)
{
    return g->n_rules;
}
