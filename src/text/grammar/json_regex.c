/* JSON Schema `pattern` subset -> GBNF (see json_regex.h). Each atom becomes a set of code
 * points emitted as one GBNF class plus the escaped JSON forms of the characters that cannot
 * appear raw in a JSON string. */
#include "text/grammar/json_regex.h"

#include "util/mem.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CP_MAX     0x10FFFFu
#define DEPTH_MAX  64
#define REPEAT_MAX 2000 // GBNF_REPEAT_MAX

struct rset {
    uint32_t (*r)[2]; // n inclusive ranges
    size_t n, cap;
};

static int rset_add(struct rset *s, uint32_t lo, uint32_t hi)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        void *p = mem_realloc(s->r, cap * sizeof *s->r);
        if (!p) return ERR_NOMEM;
        s->r = p;
        s->cap = cap;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
    return ERR_OK;
}

static int cmp_rng(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts and merges; complements over all code points when is_negated. */
static int rset_normalize(struct rset *s, bool is_negated)
{
    if (s->n > 1) qsort(s->r, s->n, sizeof *s->r, cmp_rng);
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (m > 0 && s->r[i][0] <= s->r[m - 1][1] + 1) {
            if (s->r[i][1] > s->r[m - 1][1]) s->r[m - 1][1] = s->r[i][1];
        } else {
            s->r[m][0] = s->r[i][0];
            s->r[m][1] = s->r[i][1];
            m++;
        }
    }
    s->n = m;
    if (!is_negated) return ERR_OK;
    struct rset t = {0};
    uint32_t next = 0;
    int rc = ERR_OK;
    for (size_t i = 0; rc == ERR_OK && i < s->n; i++) {
        if (s->r[i][0] > next) rc = rset_add(&t, next, s->r[i][0] - 1);
        next = s->r[i][1] + 1;
    }
    if (rc == ERR_OK && next <= CP_MAX) rc = rset_add(&t, next, CP_MAX);
    mem_free(s->r);
    *s = t;
    return rc;
}

static bool rset_has(const struct rset *s, uint32_t cp)
{
    for (size_t i = 0; i < s->n; i++)
        if (cp >= s->r[i][0] && cp <= s->r[i][1]) return true;
    return false;
}

static int append_cp_escape(struct buf *b, uint32_t cp)
{
    if (cp < 0x100) return buf_printf(b, "\\x%02X", cp);
    if (cp < 0x10000) return buf_printf(b, "\\u%04X", cp);
    return buf_printf(b, "\\U%08X", cp);
}

/* Emits the JSON text of one string character from the value set s: a class of the characters
 * that appear raw, plus the escaped forms of `"`, `\` and the common controls when s has them. */
static int append_json_char_set(struct buf *b, const struct rset *s)
{
    static const uint32_t cuts[][2] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    struct rset raw = {0}; // s without the characters JSON requires escaped
    int rc = ERR_OK;
    for (size_t i = 0; rc == ERR_OK && i < s->n; i++) {
        uint32_t lo = s->r[i][0], hi = s->r[i][1];
        for (size_t k = 0; rc == ERR_OK && k < 3 && lo <= hi; k++) {
            if (hi < cuts[k][0] || lo > cuts[k][1]) continue;
            if (lo < cuts[k][0]) rc = rset_add(&raw, lo, cuts[k][0] - 1);
            lo = cuts[k][1] + 1;
        }
        if (rc == ERR_OK && lo <= hi) rc = rset_add(&raw, lo, hi);
    }
    bool has_alt = raw.n > 0;
    if (rc == ERR_OK) rc = buf_append_cstr(b, raw.n ? "([" : "(");
    for (size_t i = 0; rc == ERR_OK && i < raw.n; i++) {
        rc = append_cp_escape(b, raw.r[i][0]);
        if (rc == ERR_OK && raw.r[i][1] > raw.r[i][0]) rc = buf_append_byte(b, '-');
        if (rc == ERR_OK && raw.r[i][1] > raw.r[i][0]) rc = append_cp_escape(b, raw.r[i][1]);
    }
    if (rc == ERR_OK && raw.n) rc = buf_append_cstr(b, "]");
    mem_free(raw.r);
    static const struct {
        uint32_t cp;
        const char *text;
    } escapes[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\n', "\"\\\\n\""},
                   {'\t', "\"\\\\t\""},   {'\r', "\"\\\\r\""},    {'\f', "\"\\\\f\""},
                   {'\b', "\"\\\\b\""}};
    for (size_t k = 0; rc == ERR_OK && k < sizeof escapes / sizeof *escapes; k++) {
        if (!rset_has(s, escapes[k].cp)) continue;
        rc = buf_printf(b, "%s%s", has_alt ? " | " : "", escapes[k].text);
        has_alt = true;
    }
    for (uint32_t cp = 0; rc == ERR_OK && cp < 0x20; cp++) { // other controls: \u00XX
        if (!rset_has(s, cp) || (cp != 0 && strchr("\n\t\r\f\b", (int)cp))) continue;
        static const char hex[] = "0123456789abcdef";
        char lo = hex[cp & 15];
        if (lo >= 'a')
            rc =
                buf_printf(b, "%s\"\\\\u00%u\" [%c%c]", has_alt ? " | " : "", cp >> 4, lo, lo - 32);
        else
            rc = buf_printf(b, "%s\"\\\\u00%u%c\"", has_alt ? " | " : "", cp >> 4, lo);
        has_alt = true;
    }
    if (rc == ERR_OK && !has_alt)
        rc = buf_append_cstr(b, "[^\\x00-\\U0010FFFF]"); // an empty set: matches nothing
    if (rc == ERR_OK) rc = buf_append_cstr(b, ")");
    return rc;
}

/* strchr that does not match the terminating NUL: patterns may contain NUL characters. */
static bool is_one_of(char c, const char *set)
{
    return c != '\0' && strchr(set, c) != NULL;
}

struct rx {
    const char *s; // the pattern
    size_t n, i;
    const char *where; // JSON pointer of the schema, for messages
    struct errmsg *err;
    int depth;
};

static int rx_fail(struct rx *x, const char *why)
{
    return errmsg_set(x->err, ERR_UNSUPPORTED,
                      "JSON schema 'pattern' at %s is not supported: %s at offset %zu", x->where,
                      why, x->i);
}

/* Adds the class escape \d \w \s (or its negation when upper case) at x->i + 1. */
static int rx_class_escape(char e, struct rset *s, bool *is_negated_class)
{
    int rc = ERR_OK;
    switch (e) {
    case 'd':
    case 'D':
        rc = rset_add(s, '0', '9');
        break;
    case 'w':
    case 'W':
        rc = rset_add(s, '0', '9');
        if (rc == ERR_OK) rc = rset_add(s, 'a', 'z');
        if (rc == ERR_OK) rc = rset_add(s, 'A', 'Z');
        if (rc == ERR_OK) rc = rset_add(s, '_', '_');
        break;
    default: // s / S
        rc = rset_add(s, ' ', ' ');
        if (rc == ERR_OK) rc = rset_add(s, '\t', '\r');
        break;
    }
    *is_negated_class = e >= 'A' && e <= 'Z';
    return rc;
}

/* A literal escape \n \t \r \f \v \0? or escaped punctuation; *cp = the character, or -1. */
static long rx_literal_escape(char e)
{
    switch (e) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    default:
        break;
    }
    if (is_one_of(e, "\\^$.|?*+()[]{}/-\"'")) return (unsigned char)e;
    return -1;
}

/* Decodes a UTF-8 code point of the pattern at x->i. */
static int rx_cp(struct rx *x, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)x->s + x->i;
    size_t avail = x->n - x->i, len = p[0] < 0x80 ? 1 : p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : 4;
    if (len > avail || (len > 1 && p[0] < 0xC2)) return rx_fail(x, "invalid UTF-8");
    uint32_t v = len == 1 ? p[0] : p[0] & (0x7Fu >> len);
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80) return rx_fail(x, "invalid UTF-8");
        v = v << 6 | (p[k] & 0x3Fu);
    }
    x->i += len;
    *cp = v;
    return ERR_OK;
}

static int rx_set_emit(struct rx *x, struct rset *s, bool is_negated, struct buf *b)
{
    int rc = rset_normalize(s, is_negated);
    if (rc == ERR_OK) rc = append_json_char_set(b, s);
    mem_free(s->r);
    (void)x;
    return rc;
}

static int rx_class(struct rx *x, struct buf *b)
{
    struct rset s = {0};
    bool is_negated = false;
    x->i++; // [
    if (x->i < x->n && x->s[x->i] == '^') {
        is_negated = true;
        x->i++;
    }
    int rc = ERR_OK;
    bool first = true;
    while (rc == ERR_OK && (x->i >= x->n || x->s[x->i] != ']' || first)) {
        first = false;
        if (x->i >= x->n) {
            rc = rx_fail(x, "unterminated class");
            break;
        }
        uint32_t lo;
        if (x->s[x->i] == '\\' && x->i + 1 < x->n) {
            char e = x->s[x->i + 1];
            if (is_one_of(e, "dDwWsS")) {
                bool neg;
                struct rset sub = {0};
                rc = rx_class_escape(e, &sub, &neg);
                if (rc == ERR_OK) rc = rset_normalize(&sub, neg);
                for (size_t k = 0; rc == ERR_OK && k < sub.n; k++)
                    rc = rset_add(&s, sub.r[k][0], sub.r[k][1]);
                mem_free(sub.r);
                x->i += 2;
                continue;
            }
            long v = rx_literal_escape(e);
            if (v < 0) {
                rc = rx_fail(x, "unsupported escape in class");
                break;
            }
            lo = (uint32_t)v;
            x->i += 2;
        } else {
            rc = rx_cp(x, &lo);
            if (rc != ERR_OK) break;
        }
        uint32_t hi = lo;
        if (x->i + 1 < x->n && x->s[x->i] == '-' && x->s[x->i + 1] != ']') {
            x->i++;
            if (x->s[x->i] == '\\' && x->i + 1 < x->n && rx_literal_escape(x->s[x->i + 1]) >= 0) {
                hi = (uint32_t)rx_literal_escape(x->s[x->i + 1]);
                x->i += 2;
            } else {
                rc = rx_cp(x, &hi);
            }
            if (rc == ERR_OK && hi < lo) rc = rx_fail(x, "reversed range in class");
        }
        if (rc == ERR_OK) rc = rset_add(&s, lo, hi);
    }
    if (rc != ERR_OK) {
        mem_free(s.r);
        return rc;
    }
    x->i++; // ]
    return rx_set_emit(x, &s, is_negated, b);
}

static int rx_alternation(struct rx *x, struct buf *b);

/* One atom: group, class, `.`, escape or literal character. */
static int rx_atom(struct rx *x, struct buf *b)
{
    char ch = x->s[x->i];
    if (ch == '(') {
        if (++x->depth > DEPTH_MAX) return rx_fail(x, "groups nested too deep");
        x->i++;
        if (x->i + 1 < x->n && x->s[x->i] == '?') {
            if (x->s[x->i + 1] != ':') return rx_fail(x, "only (?:...) groups are supported");
            x->i += 2;
        }
        int rc = buf_append_cstr(b, "(");
        if (rc == ERR_OK) rc = rx_alternation(x, b);
        if (rc == ERR_OK && (x->i >= x->n || x->s[x->i] != ')'))
            return rx_fail(x, "unbalanced parentheses");
        x->i++;
        x->depth--;
        return rc == ERR_OK ? buf_append_cstr(b, ")") : rc;
    }
    if (ch == '[') return rx_class(x, b);
    struct rset s = {0};
    int rc = ERR_OK;
    bool is_negated = false;
    if (ch == '.') {
        x->i++;
        rc = rset_add(&s, '\n', '\n');
        is_negated = true;
    } else if (ch == '\\') {
        if (x->i + 1 >= x->n) return rx_fail(x, "trailing backslash");
        char e = x->s[x->i + 1];
        if (is_one_of(e, "dDwWsS")) {
            rc = rx_class_escape(e, &s, &is_negated);
        } else {
            long v = rx_literal_escape(e);
            if (v < 0) return rx_fail(x, "unsupported escape");
            rc = rset_add(&s, (uint32_t)v, (uint32_t)v);
        }
        x->i += 2;
    } else if (is_one_of(ch, "*+?{")) {
        return rx_fail(x, "nothing to repeat");
    } else if (ch == '^' || ch == '$') {
        return rx_fail(x, "anchor inside the pattern");
    } else {
        uint32_t cp;
        rc = rx_cp(x, &cp);
        if (rc == ERR_OK) rc = rset_add(&s, cp, cp);
    }
    if (rc != ERR_OK) {
        mem_free(s.r);
        return rc;
    }
    return rx_set_emit(x, &s, is_negated, b);
}

static int rx_uint(struct rx *x, unsigned *v)
{
    if (x->i >= x->n || x->s[x->i] < '0' || x->s[x->i] > '9')
        return rx_fail(x, "expected a number in braces");
    unsigned long n = 0;
    while (x->i < x->n && x->s[x->i] >= '0' && x->s[x->i] <= '9') {
        n = n * 10 + (unsigned long)(x->s[x->i++] - '0');
        if (n > REPEAT_MAX) return rx_fail(x, "repetition count above 2000");
    }
    *v = (unsigned)n;
    return ERR_OK;
}

/* A quantifier after an atom, appended in GBNF syntax. */
static int rx_quantifier(struct rx *x, struct buf *b)
{
    char ch = x->s[x->i];
    int rc = ERR_OK;
    if (ch == '?' || ch == '*' || ch == '+') {
        x->i++;
        rc = buf_append_byte(b, ch);
    } else {
        x->i++;
        unsigned lo, hi;
        rc = rx_uint(x, &lo);
        if (rc != ERR_OK) return rc;
        hi = lo;
        bool is_open = false;
        if (x->i < x->n && x->s[x->i] == ',') {
            x->i++;
            is_open = x->i < x->n && x->s[x->i] == '}';
            if (!is_open) {
                rc = rx_uint(x, &hi);
                if (rc != ERR_OK) return rc;
                if (hi < lo) return rx_fail(x, "repetition maximum below minimum");
            }
        }
        if (x->i >= x->n || x->s[x->i] != '}') return rx_fail(x, "unterminated braces");
        x->i++;
        rc = is_open ? buf_printf(b, "{%u,}", lo) : buf_printf(b, "{%u,%u}", lo, hi);
    }
    if (rc == ERR_OK && x->i < x->n && x->s[x->i] == '?') x->i++; // lazy: the same language
    if (rc == ERR_OK && x->i < x->n && is_one_of(x->s[x->i], "*+?{"))
        return rx_fail(x, "nested quantifier");
    return rc;
}

static bool rx_at_end(const struct rx *x)
{
    return x->i >= x->n || x->s[x->i] == '|' || x->s[x->i] == ')' ||
           (x->s[x->i] == '$' && x->i + 1 == x->n);
}

static int rx_alternation(struct rx *x, struct buf *b)
{
    int rc = ERR_OK;
    for (;;) {
        int n_atoms = 0;
        while (rc == ERR_OK && !rx_at_end(x)) {
            rc = buf_append_cstr(b, n_atoms++ ? " (" : "(");
            if (rc == ERR_OK) rc = rx_atom(x, b);
            if (rc == ERR_OK) rc = buf_append_cstr(b, ")");
            if (rc == ERR_OK && x->i < x->n && is_one_of(x->s[x->i], "*+?{"))
                rc = rx_quantifier(x, b);
        }
        if (rc != ERR_OK) return rc;
        if (n_atoms == 0) rc = buf_append_cstr(b, "\"\"");
        if (rc != ERR_OK || x->i >= x->n || x->s[x->i] != '|') return rc;
        x->i++;
        rc = buf_append_cstr(b, " | ");
    }
}

int json_regex_to_gbnf(const char *pattern, size_t len, const char *any_char_rule,
                       const char *where, struct buf *out, struct errmsg *err)
{
    struct rx x = {pattern, len, 0, where, err, 0};
    bool is_anchored_start = x.n > 0 && pattern[0] == '^';
    bool is_anchored_end =
        x.n > 0 && pattern[x.n - 1] == '$' && (x.n < 2 || pattern[x.n - 2] != '\\');
    if (is_anchored_start) x.i++;
    int rc = buf_append_cstr(out, "\"\\\"\" ");
    if (rc == ERR_OK && !is_anchored_start) rc = buf_printf(out, "%s* ", any_char_rule);
    if (rc == ERR_OK) rc = buf_append_cstr(out, "(");
    if (rc == ERR_OK) rc = rx_alternation(&x, out);
    if (rc == ERR_OK && x.i < x.n && pattern[x.i] == ')')
        return rx_fail(&x, "unbalanced parentheses");
    if (rc == ERR_OK && is_anchored_end) x.i++;
    if (rc == ERR_OK && x.i != x.n) return rx_fail(&x, "unexpected character");
    if (rc == ERR_OK) rc = buf_append_cstr(out, ")");
    if (rc == ERR_OK && !is_anchored_end) rc = buf_printf(out, " %s*", any_char_rule);
    if (rc == ERR_OK) rc = buf_append_cstr(out, " \"\\\"\"");
    return rc;
}
