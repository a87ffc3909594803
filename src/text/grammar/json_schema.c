/* JSON Schema -> GBNF. Each schema becomes one named rule whose body refers to primitive rules
 * (emitted once) and to the rules of its sub-schemas; $ref targets get one rule each, named
 * before their body is built, so recursive schemas work. Language choices follow llama.cpp's
 * common/json-schema-to-grammar.cpp (whitespace rule, property order, number shapes). */
#include "text/grammar/json_schema.h"
#include "text/grammar/json_regex.h"
#include "text/json_text.h"

#include "util/mem.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX    64
#define PATH_CAP     256
#define REPEAT_MAX   2000 // GBNF_REPEAT_MAX
#define NAME_HINT    32   // bytes of a schema path kept in a rule name
#define N_PRIMITIVES 14
#define CANCEL_EVERY 256 // schemas between polls of the caller's cancellation

enum prim {
    PRIM_SPACE,
    PRIM_CHAR,
    PRIM_STRING,
    PRIM_INTEGRAL,
    PRIM_DECIMAL,
    PRIM_NUMBER,
    PRIM_INTEGER,
    PRIM_BOOLEAN,
    PRIM_NULL,
    PRIM_VALUE, // value, object and array, which refer to each other
    PRIM_DATE,
    PRIM_TIME,
    PRIM_DATE_TIME,
    PRIM_UUID,
};

/* Primitive rules: name, body, and the primitives the body refers to (bitmask). The whitespace
 * rule and number shapes are llama.cpp's. */
static const struct {
    const char *name, *body;
    unsigned deps;
} prims[N_PRIMITIVES] = {
    [PRIM_SPACE] = {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", 0},
    [PRIM_CHAR] = {"char",
                   "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})", 0},
    [PRIM_STRING] = {"string", "\"\\\"\" char* \"\\\"\"", 1u << PRIM_CHAR},
    [PRIM_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [PRIM_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [PRIM_NUMBER] = {"number",
                     "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)?",
                     1u << PRIM_INTEGRAL | 1u << PRIM_DECIMAL},
    [PRIM_INTEGER] = {"integer", "\"-\"? integral-part", 1u << PRIM_INTEGRAL},
    [PRIM_BOOLEAN] = {"boolean", "\"true\" | \"false\"", 0},
    [PRIM_NULL] = {"null", "\"null\"", 0},
    [PRIM_VALUE] = {"value",
                    "object | array | string | number | boolean | null\n"
                    "object ::= \"{\" space ( string space \":\" space value "
                    "(\",\" space string space \":\" space value)* )? space \"}\"\n"
                    "array ::= \"[\" space ( value (\",\" space value)* )? space \"]\"",
                    1u << PRIM_SPACE | 1u << PRIM_STRING | 1u << PRIM_NUMBER | 1u << PRIM_BOOLEAN |
                        1u << PRIM_NULL},
    [PRIM_DATE] = {"date",
                   "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] "
                   "[0-9] | \"3\" [0-1] )",
                   0},
    [PRIM_TIME] = {"time",
                   "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" "
                   "[0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" "
                   "[0-5] [0-9] )",
                   0},
    [PRIM_DATE_TIME] = {"date-time", "date \"T\" time", 1u << PRIM_DATE | 1u << PRIM_TIME},
    [PRIM_UUID] = {"uuid",
                   "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                   "[0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}",
                   0},
};

/* jansson's object iteration takes a non-const pointer but does not modify the object. */
struct ref_rule {
    char *ref;  // the $ref string (owned)
    char *name; // its rule name (owned)
};

struct conv {
    const json_t *root;
    struct buf *out;
    struct errmsg *err;
    bool (*is_cancelled)(void); // polled every CANCEL_EVERY schemas; NULL: never
    unsigned n_visits;          // schemas visited, for that poll
    unsigned prims_done;        // bitmask of primitives already emitted
    unsigned n_rules;           // for unique generated names
    struct ref_rule *refs;
    size_t n_refs, refs_cap;
    json_t *ref_index;   // $ref string -> its index in refs, so a lookup is not a scan
    char path[PATH_CAP]; // JSON pointer of the schema being converted
    size_t path_len;
    int depth;
};

static int add_prim(struct conv *c, enum prim p)
{
    if (c->prims_done & (1u << p)) return ERR_OK;
    c->prims_done |= 1u << p;
    for (int d = 0; d < N_PRIMITIVES; d++) {
        if (prims[p].deps & (1u << d)) {
            int rc = add_prim(c, (enum prim)d);
            if (rc != ERR_OK) return rc;
        }
    }
    return buf_printf(c->out, "%s ::= %s\n", prims[p].name, prims[p].body);
}

/* Appends "/seg" (escaped as a JSON pointer) to the path; returns the old length for pop. */
static size_t path_push(struct conv *c, const char *seg)
{
    size_t old = c->path_len;
    char *p = c->path;
    size_t n = c->path_len;
    if (n + 1 < PATH_CAP) p[n++] = '/';
    for (const char *s = seg; *s && n + 3 < PATH_CAP; s++) {
        if (*s == '~' || *s == '/') {
            p[n++] = '~';
            p[n++] = *s == '~' ? '0' : '1';
        } else {
            p[n++] = *s;
        }
    }
    p[n] = '\0';
    c->path_len = n;
    return old;
}

static size_t path_push_index(struct conv *c, size_t i)
{
    char seg[24];
    snprintf(seg, sizeof seg, "%zu", i);
    return path_push(c, seg);
}

static void path_pop(struct conv *c, size_t old)
{
    c->path_len = old;
    c->path[old] = '\0';
}

static const char *path_str(const struct conv *c)
{
    return c->path_len ? c->path : "/";
}

static int fail_unsupported(struct conv *c, const char *keyword, const char *why)
{
    return errmsg_set(c->err, ERR_UNSUPPORTED,
                      "JSON schema keyword '%s' at %s is not supported%s%s", keyword, path_str(c),
                      why ? ": " : "", why ? why : "");
}

static int fail_invalid(struct conv *c, const char *keyword, const char *why)
{
    return errmsg_set(c->err, ERR_INVALID, "JSON schema '%s' at %s: %s", keyword, path_str(c), why);
}

/* A fresh rule name derived from the schema path: letters, digits and '-' only. */
static void new_rule_name(struct conv *c, char *name, size_t cap)
{
    char hint[NAME_HINT + 1];
    size_t n = 0;
    const char *src = c->path_len > NAME_HINT ? c->path + c->path_len - NAME_HINT : c->path;
    for (const char *s = src; *s && n < NAME_HINT; s++) {
        char ch = *s;
        bool is_word =
            (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (is_word)
            hint[n++] = ch;
        else if (n > 0 && hint[n - 1] != '-')
            hint[n++] = '-';
    }
    while (n > 0 && hint[n - 1] == '-')
        n--;
    hint[n] = '\0';
    snprintf(name, cap, "%s%sr%u", hint, n ? "-" : "", ++c->n_rules);
}

#define RULE_NAME_CAP (NAME_HINT + 16)

/* Emits `name ::= body`. */
static int emit_rule(struct conv *c, const char *name, const struct buf *body)
{
    int rc = buf_printf(c->out, "%s ::= %s\n", name, body->len ? body->data : "");
    if (rc == ERR_OK && c->out->len > GBNF_SRC_LEN_MAX)
        return errmsg_set(c->err, ERR_LIMIT, "grammar for the JSON schema is too large");
    return rc;
}

/* Appends a GBNF literal matching exactly the bytes s[0..n). */
static int append_literal(struct buf *b, const char *s, size_t n)
{
    int rc = buf_append_byte(b, '"');
    for (size_t i = 0; rc == ERR_OK && i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            rc = buf_printf(b, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7F)
            rc = buf_printf(b, "\\x%02X", ch);
        else
            rc = buf_append_byte(b, (char)ch);
    }
    if (rc == ERR_OK) rc = buf_append_byte(b, '"');
    return rc;
}

/* A literal of the compact JSON text of v (for const and enum). */
static int append_json_literal(struct buf *b, const json_t *v)
{
    char *text = json_text_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) return ERR_NOMEM;
    int rc = append_literal(b, text, strlen(text));
    free(text); // allocated by jansson
    return rc;
}

static int visit(struct conv *c, const json_t *schema, char *name_out);

/* Visits schema as the child reached by keyword (and index, or -1), restoring the path. */
static int visit_child(struct conv *c, const json_t *schema, const char *keyword, long index,
                       char *name_out)
{
    size_t old = path_push(c, keyword);
    if (index >= 0) path_push_index(c, (size_t)index);
    int rc = visit(c, schema, name_out);
    path_pop(c, old);
    return rc;
}

static bool is_in(const char *key, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(key, *list)) return true;
    return false;
}

static const char *const annotations[] = {
    "title",           "description", "$schema",     "$id",       "$anchor",    "$comment",
    "default",         "examples",    "readOnly",    "writeOnly", "deprecated", "contentMediaType",
    "contentEncoding", "$defs",       "definitions", NULL};

static const char *const unsupported[] = {"not",
                                          "if",
                                          "then",
                                          "else",
                                          "patternProperties",
                                          "uniqueItems",
                                          "multipleOf",
                                          "minProperties",
                                          "maxProperties",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "dependencies",
                                          "propertyNames",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "unevaluatedProperties",
                                          "unevaluatedItems",
                                          "additionalItems",
                                          "$dynamicRef",
                                          "$recursiveRef",
                                          "$dynamicAnchor",
                                          "$recursiveAnchor",
                                          NULL};

/* Rejects the first keyword of schema that constrains and that no supported path handles. */
static int check_keywords(struct conv *c, const json_t *schema)
{
    const char *key;
    const json_t *v;
    json_object_foreach(json_unconst(schema), key, v)
    {
        bool is_noop = !strcmp(key, "uniqueItems") && json_is_false(v);
        if (!is_noop && is_in(key, unsupported)) return fail_unsupported(c, key, NULL);
    }
    return ERR_OK;
}

/* ---- strings ---- */

/* `"` (pattern) `"` for a string schema with a pattern. */
static int string_pattern_body(struct conv *c, const json_t *pattern, struct buf *b)
{
    int rc = add_prim(c, PRIM_CHAR);
    return rc == ERR_OK
               ? json_regex_to_gbnf(json_string_value(pattern), json_string_length(pattern), "char",
                                    path_str(c), b, c->err)
               : rc;
}

/* Reads a non-negative integer keyword (minLength, minItems, ...); *v = -1 when absent. */
static int get_count(struct conv *c, const json_t *schema, const char *key, long *v)
{
    const json_t *j = json_object_get(schema, key);
    *v = -1;
    if (!j) return ERR_OK;
    double d = json_is_integer(j) ? (double)json_integer_value(j) : json_real_value(j);
    if (!json_is_number(j) || d < 0 || d != floor(d))
        return fail_invalid(c, key, "must be a non-negative integer");
    if (d > REPEAT_MAX) return fail_unsupported(c, key, "values above 2000");
    *v = (long)d;
    return ERR_OK;
}

/* item{min,max} joined by sep (NULL: nothing), as GBNF; max < 0 means unbounded. */
static int append_repetition(struct buf *b, const char *item, long min, long max, const char *sep)
{
    if (max == 0) return buf_append_cstr(b, "\"\"");
    if (!sep) {
        if (max < 0) return buf_printf(b, "%s{%ld,}", item, min);
        return buf_printf(b, "%s{%ld,%ld}", item, min, max);
    }
    long rmin = min > 0 ? min - 1 : 0, rmax = max < 0 ? -1 : max - 1;
    int rc = buf_printf(b, "%s%s (%s %s)", min == 0 ? "(" : "", item, sep, item);
    if (rc == ERR_OK)
        rc = rmax < 0 ? buf_printf(b, "{%ld,}", rmin) : buf_printf(b, "{%ld,%ld}", rmin, rmax);
    if (rc == ERR_OK && min == 0) rc = buf_append_cstr(b, ")?");
    return rc;
}

static int string_body(struct conv *c, const json_t *schema, struct buf *b)
{
    const json_t *pattern = json_object_get(schema, "pattern");
    const json_t *format = json_object_get(schema, "format");
    long min, max;
    int rc = get_count(c, schema, "minLength", &min);
    if (rc == ERR_OK) rc = get_count(c, schema, "maxLength", &max);
    if (rc != ERR_OK) return rc;
    bool has_len = min > 0 || max >= 0;
    if (pattern) {
        if (!json_is_string(pattern)) return fail_invalid(c, "pattern", "must be a string");
        if (has_len || format)
            return fail_unsupported(c, "pattern", "together with minLength, maxLength or format");
        return string_pattern_body(c, pattern, b);
    }
    if (format) {
        const char *f = json_string_value(format);
        enum prim p = !f                        ? PRIM_NULL
                      : !strcmp(f, "date")      ? PRIM_DATE
                      : !strcmp(f, "time")      ? PRIM_TIME
                      : !strcmp(f, "date-time") ? PRIM_DATE_TIME
                      : !strcmp(f, "uuid")      ? PRIM_UUID
                                                : PRIM_NULL;
        if (!f) return fail_invalid(c, "format", "must be a string");
        if (strlen(f) != json_string_length(format)) p = PRIM_NULL; // a NUL inside
        if (p == PRIM_NULL)
            return errmsg_set(c->err, ERR_UNSUPPORTED,
                              "JSON schema 'format' \"%.64s\" at %s is not supported", f,
                              path_str(c));
        if (has_len) return fail_unsupported(c, "format", "together with minLength or maxLength");
        rc = add_prim(c, p);
        return rc == ERR_OK ? buf_printf(b, "\"\\\"\" %s \"\\\"\"", prims[p].name) : rc;
    }
    if (!has_len) {
        rc = add_prim(c, PRIM_STRING);
        return rc == ERR_OK ? buf_append_cstr(b, "string") : rc;
    }
    if (max >= 0 && min > max) return fail_invalid(c, "minLength", "greater than maxLength");
    rc = add_prim(c, PRIM_CHAR);
    if (rc == ERR_OK) rc = buf_append_cstr(b, "\"\\\"\" ");
    if (rc == ERR_OK) rc = append_repetition(b, "char", min < 0 ? 0 : min, max, NULL);
    if (rc == ERR_OK) rc = buf_append_cstr(b, " \"\\\"\"");
    return rc;
}

/* ---- integers ---- */

/* Decimal digits of [a, b] with a, b of equal length n given as strings: alternatives. */
static int append_same_len(struct buf *b, const char *a, const char *z, size_t n)
{
    size_t p = 0;
    while (p < n && a[p] == z[p])
        p++;
    int rc = ERR_OK;
    if (p > 0) rc = buf_printf(b, "\"%.*s\" ", (int)p, a);
    if (rc != ERR_OK || p == n) return rc;
    size_t m = n - p - 1; // digits after the first differing one
    bool a_zeros = strspn(a + p + 1, "0") == m, z_nines = strspn(z + p + 1, "9") == m;
    char lo = a[p], hi = z[p];
    rc = buf_append_cstr(b, "(");
    bool has_alt = false;
    if (rc == ERR_OK && !a_zeros) {
        char nines[24];
        memset(nines, '9', m);
        rc = buf_printf(b, "\"%c\" (", lo);
        if (rc == ERR_OK) rc = append_same_len(b, a + p + 1, nines, m);
        if (rc == ERR_OK) rc = buf_append_cstr(b, ")");
        lo++;
        has_alt = true;
    }
    char mid_hi = z_nines ? hi : (char)(hi - 1);
    if (rc == ERR_OK && lo <= mid_hi) {
        rc = buf_printf(b, "%s[%c-%c]", has_alt ? " | " : "", lo, mid_hi);
        if (rc == ERR_OK && m > 0) rc = buf_printf(b, " [0-9]{%zu}", m);
        has_alt = true;
    }
    if (rc == ERR_OK && !z_nines) {
        char zeros[24];
        memset(zeros, '0', m);
        rc = buf_printf(b, "%s\"%c\" (", has_alt ? " | " : "", hi);
        if (rc == ERR_OK) rc = append_same_len(b, zeros, z + p + 1, m);
        if (rc == ERR_OK) rc = buf_append_cstr(b, ")");
    }
    return rc == ERR_OK ? buf_append_cstr(b, ")") : rc;
}

/* Decimal texts of [lo, hi] (hi = UINT64_MAX: unbounded, up to 16 digits as llama.cpp's
 * integral part), without leading zeros. */
static int append_uint_range(struct buf *b, uint64_t lo, uint64_t hi, bool has_hi)
{
    char a[24], z[24];
    int la = snprintf(a, sizeof a, "%llu", (unsigned long long)lo);
    int lz = has_hi ? snprintf(z, sizeof z, "%llu", (unsigned long long)hi) : 16;
    int rc = buf_append_cstr(b, "(");
    for (int len = la; rc == ERR_OK && len <= lz; len++) {
        char from[24], to[24];
        if (len == la)
            memcpy(from, a, (size_t)la + 1);
        else
            snprintf(from, sizeof from, "1%0*d", len - 1, 0);
        if (has_hi && len == lz)
            memcpy(to, z, (size_t)lz + 1);
        else
            memset(to, '9', (size_t)len), to[len] = '\0';
        rc = buf_append_cstr(b, len == la ? "" : " | ");
        if (rc == ERR_OK) rc = append_same_len(b, from, to, (size_t)len);
    }
    return rc == ERR_OK ? buf_append_cstr(b, ")") : rc;
}

/* Reads a bound: *has = whether present, *v = the integer it implies for an integer value. */
static int get_int_bound(struct conv *c, const json_t *schema, bool is_min, bool *has, int64_t *v)
{
    const char *key = is_min ? "minimum" : "maximum";
    const char *xkey = is_min ? "exclusiveMinimum" : "exclusiveMaximum";
    const json_t *j = json_object_get(schema, key), *x = json_object_get(schema, xkey);
    *has = false;
    bool is_exclusive = false;
    if (x && json_is_boolean(x)) { // draft 4: a flag on minimum/maximum
        is_exclusive = json_is_true(x);
    } else if (x) {
        if (!json_is_number(x)) return fail_invalid(c, xkey, "must be a number");
        if (j &&
            json_number_value(j) * (is_min ? 1 : -1) > json_number_value(x) * (is_min ? 1 : -1))
            x = NULL; // the inclusive bound is the tighter one
        else
            j = x, is_exclusive = true;
    }
    if (!j) return ERR_OK;
    if (!json_is_number(j)) return fail_invalid(c, key, "must be a number");
    double d = json_number_value(j);
    double r =
        is_min ? (is_exclusive ? floor(d) + 1 : ceil(d)) : (is_exclusive ? ceil(d) - 1 : floor(d));
    if (!(r > -9.2e18 && r < 9.2e18))
        return fail_unsupported(c, key, "bounds beyond 64-bit integers");
    *has = true;
    *v = (int64_t)r;
    return ERR_OK;
}

static int integer_body(struct conv *c, const json_t *schema, struct buf *b)
{
    bool has_lo, has_hi;
    int64_t lo = 0, hi = 0;
    int rc = get_int_bound(c, schema, true, &has_lo, &lo);
    if (rc == ERR_OK) rc = get_int_bound(c, schema, false, &has_hi, &hi);
    if (rc != ERR_OK) return rc;
    if (!has_lo && !has_hi) {
        rc = add_prim(c, PRIM_INTEGER);
        return rc == ERR_OK ? buf_append_cstr(b, "integer") : rc;
    }
    if (has_lo && has_hi && lo > hi)
        return fail_invalid(c, "minimum", "no integer lies between minimum and maximum");
    bool has_neg = !has_lo || lo < 0, has_pos = !has_hi || hi >= 0;
    if (has_neg) { // "-" then |x| in [max(1, -hi), -lo]
        uint64_t alo = has_hi && hi < 0 ? (uint64_t)(-(hi + 1)) + 1 : 1;
        uint64_t ahi = has_lo ? (uint64_t)(-(lo + 1)) + 1 : 0;
        rc = buf_append_cstr(b, "\"-\" ");
        if (rc == ERR_OK) rc = append_uint_range(b, alo, ahi, has_lo);
    }
    if (rc == ERR_OK && has_pos) {
        rc = buf_append_cstr(b, has_neg ? " | " : "");
        if (rc == ERR_OK)
            rc = append_uint_range(b, has_lo && lo > 0 ? (uint64_t)lo : 0,
                                   has_hi ? (uint64_t)hi : 0, has_hi);
    }
    return rc;
}

/* An inclusive integral bound on a number (the only kind number_body expresses). */
static int get_num_bound(struct conv *c, const json_t *schema, bool is_min, bool *has, int64_t *v)
{
    const char *key = is_min ? "minimum" : "maximum";
    const char *xkey = is_min ? "exclusiveMinimum" : "exclusiveMaximum";
    const json_t *j = json_object_get(schema, key), *x = json_object_get(schema, xkey);
    *has = false;
    if (x && !json_is_false(x))
        return fail_unsupported(c, xkey, "exclusive bounds on non-integer numbers");
    if (!j) return ERR_OK;
    if (!json_is_number(j)) return fail_invalid(c, key, "must be a number");
    double d = json_number_value(j);
    if (d != floor(d) || !(d > -9.2e18 && d < 9.2e18))
        return fail_unsupported(c, key, "non-integral bounds on non-integer numbers");
    *has = true;
    *v = (int64_t)d;
    return ERR_OK;
}

/* Magnitudes I.f with I in [from, to] (to_inclusive false: to - 1) and any fraction, or I = to
 * with a zero fraction: the numbers in [from, to]. has_to false: I in [from, inf). */
static int append_magnitude(struct buf *b, uint64_t from, uint64_t to, bool has_to)
{
    static const char frac[] = " (\".\" decimal-part)?", zero[] = " (\".\" \"0\"{1,16})?";
    if (!has_to) {
        int rc = append_uint_range(b, from, 0, false);
        return rc == ERR_OK ? buf_append_cstr(b, frac) : rc;
    }
    int rc = buf_append_cstr(b, "(");
    if (rc == ERR_OK && to > from) {
        rc = append_uint_range(b, from, to - 1, true);
        if (rc == ERR_OK) rc = buf_printf(b, "%s | ", frac);
    }
    if (rc == ERR_OK) rc = buf_printf(b, "\"%llu\"%s)", (unsigned long long)to, zero);
    return rc;
}

/* number with integral inclusive minimum/maximum: no exponent then; the integral part decides
 * the bound, and at the bound itself only a zero fraction is allowed. */
static int number_body(struct conv *c, const json_t *schema, struct buf *b)
{
    bool has_lo, has_hi;
    int64_t lo = 0, hi = 0;
    int rc = get_num_bound(c, schema, true, &has_lo, &lo);
    if (rc == ERR_OK) rc = get_num_bound(c, schema, false, &has_hi, &hi);
    if (rc != ERR_OK) return rc;
    if (!has_lo && !has_hi) {
        rc = add_prim(c, PRIM_NUMBER);
        return rc == ERR_OK ? buf_append_cstr(b, "number") : rc;
    }
    if (has_lo && has_hi && lo > hi) return fail_invalid(c, "minimum", "greater than maximum");
    rc = add_prim(c, PRIM_DECIMAL);
    bool has_neg = !has_lo || lo < 0, has_pos = !has_hi || hi >= 0;
    if (rc == ERR_OK && has_neg) { // -(I.f) <= hi means I >= -hi; >= lo means I.f <= -lo
        uint64_t from = has_hi && hi < 0 ? (uint64_t)(-(hi + 1)) + 1 : 0;
        uint64_t to = has_lo ? (uint64_t)(-(lo + 1)) + 1 : 0;
        rc = buf_append_cstr(b, "\"-\" ");
        if (rc == ERR_OK) rc = append_magnitude(b, from, to, has_lo);
    }
    if (rc == ERR_OK && has_pos) {
        rc = buf_append_cstr(b, has_neg ? " | " : "");
        if (rc == ERR_OK)
            rc = append_magnitude(b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi ? (uint64_t)hi : 0,
                                  has_hi);
    }
    return rc;
}

/* ---- objects and arrays ---- */

struct prop {
    const char *name;
    const json_t *schema;
    bool is_required;
    char rule[RULE_NAME_CAP]; // its key-value rule
};

#define NOT_NAMES_DEPTH_MAX 510 // bytes of a declared name the key rule spells out

/* A JSON string key that is none of names[lo, hi) (sorted, sharing their first depth bytes;
 * they need no JSON escaping): a trie of the names where every node may leave the trie through
 * any other character. Each node scans only its own range, so the work is linear in the
 * names' total length. */
static int append_not_names(struct buf *b, const char *const *names, size_t lo, size_t hi,
                            size_t depth)
{
    if (depth > NOT_NAMES_DEPTH_MAX) return ERR_LIMIT;
    bool is_end = false;
    int rc = buf_append_cstr(b, "(");
    char seen[256] = {0};
    bool first = true;
    for (size_t i = lo; rc == ERR_OK && i < hi;) {
        const char *s = names[i];
        if (s[depth] == '\0') { // sorted: the name that ends here comes first
            is_end = true;
            i++;
            continue;
        }
        unsigned char ch = (unsigned char)s[depth];
        size_t j = i + 1;
        while (j < hi && (unsigned char)names[j][depth] == ch)
            j++;
        seen[ch] = 1;
        rc = buf_append_cstr(b, first ? "" : " | ");
        if (rc == ERR_OK) rc = append_literal(b, s + depth, 1);
        if (rc == ERR_OK) rc = buf_append_cstr(b, " ");
        if (rc == ERR_OK) rc = append_not_names(b, names, i, j, depth + 1);
        first = false;
        i = j;
    }
    if (rc != ERR_OK) return rc;
    // leave the trie: any character that is no child (non-ASCII bytes of names are matched
    // per byte above, so excluding their lead byte as a code point is conservative)
    rc = buf_append_cstr(b, first ? "[^\"\\\\\\x7F\\x00-\\x1F" : " | [^\"\\\\\\x7F\\x00-\\x1F");
    for (int ch = 0x20; rc == ERR_OK && ch < 0x80; ch++)
        if (seen[ch]) rc = buf_printf(b, "\\x%02X", ch);
    if (rc == ERR_OK)
        rc = buf_append_cstr(b, "] char* | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) char*)");
    if (rc == ERR_OK && !is_end) rc = buf_append_cstr(b, "?");
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The not-a-declared-name key rule over props' names, sorted for append_not_names. */
static int append_not_prop_names(struct buf *b, const struct prop *props, size_t n)
{
    const char **names = mem_alloc((n ? n : 1) * sizeof *names);
    if (!names) return ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        names[i] = props[i].name;
    qsort(names, n, sizeof *names, cmp_name);
    int rc = append_not_names(b, names, 0, n, 0);
    mem_free(names);
    return rc;
}

static bool names_are_plain(const struct prop *props, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (const unsigned char *s = (const unsigned char *)props[i].name; *s; s++)
            if (*s < 0x20 || *s == '"' || *s == '\\' || *s >= 0x7F) return false;
    return n > 0;
}

/* The key-value rule of additional properties: key (not a declared name) then value. */
static int additional_kv(struct conv *c, const json_t *addl, const struct prop *props, size_t n,
                         char *rule)
{
    char value[RULE_NAME_CAP];
    int rc = ERR_OK;
    if (json_is_true(addl) || (json_is_object(addl) && json_object_size(addl) == 0)) {
        rc = add_prim(c, PRIM_VALUE);
        snprintf(value, sizeof value, "value");
    } else {
        rc = visit_child(c, addl, "additionalProperties", -1, value);
    }
    struct buf body;
    buf_init(&body);
    if (rc == ERR_OK) rc = add_prim(c, PRIM_STRING);
    if (rc == ERR_OK && names_are_plain(props, n)) {
        rc = buf_append_cstr(&body, "\"\\\"\" ");
        if (rc == ERR_OK) rc = append_not_prop_names(&body, props, n);
        if (rc == ERR_OK) rc = buf_append_cstr(&body, " \"\\\"\"");
    } else if (rc == ERR_OK) {
        rc = buf_append_cstr(&body, "string");
    }
    if (rc == ERR_OK) rc = buf_printf(&body, " space \":\" space %s", value);
    new_rule_name(c, rule, RULE_NAME_CAP);
    if (rc == ERR_OK) rc = emit_rule(c, rule, &body);
    buf_deinit(&body);
    return rc;
}

/* rest[k] ::= ("," space opt[k])? rest[k+1] (`*` for the additional-properties entry), for
 * k = n-1 down to 1: what may follow once opt[k-1] was the first optional property present. */
static int optional_rests(struct conv *c, char (*opt)[RULE_NAME_CAP], const bool *is_star, size_t n,
                          char (*rest)[RULE_NAME_CAP])
{
    struct buf body;
    buf_init(&body);
    int rc = ERR_OK;
    for (size_t k = n - 1; rc == ERR_OK && k >= 1; k--) {
        buf_clear(&body);
        rc = buf_printf(&body, "(\",\" space %s)%s%s%s", opt[k], is_star[k] ? "*" : "?",
                        k + 1 < n ? " " : "", k + 1 < n ? rest[k + 1] : "");
        new_rule_name(c, rest[k], RULE_NAME_CAP);
        if (rc == ERR_OK) rc = emit_rule(c, rest[k], &body);
    }
    buf_deinit(&body);
    return rc;
}

/* `{` required kvs in order, then any in-order subset of the optional ones (additional
 * properties last, repeatable), `}`: llama.cpp's object shape. */
static int object_layout(struct conv *c, struct prop *props, size_t n, const char *addl_rule,
                         struct buf *b)
{
    size_t n_opt = 0, n_req = 0;
    char(*opt)[RULE_NAME_CAP] = mem_alloc((n + 1) * sizeof *opt);
    bool *is_star = mem_calloc(n + 1, sizeof *is_star);
    char(*rest)[RULE_NAME_CAP] = mem_alloc((n + 1) * sizeof *rest);
    int rc = opt && is_star && rest ? buf_append_cstr(b, "\"{\" space") : ERR_NOMEM;
    for (size_t i = 0; rc == ERR_OK && i < n; i++) {
        if (props[i].is_required)
            rc = buf_printf(b, "%s %s", n_req++ ? " \",\" space" : "", props[i].rule);
        else
            snprintf(opt[n_opt++], RULE_NAME_CAP, "%s", props[i].rule);
    }
    if (rc == ERR_OK && addl_rule) {
        is_star[n_opt] = true;
        snprintf(opt[n_opt++], RULE_NAME_CAP, "%s", addl_rule);
    }
    if (rc == ERR_OK && n_opt > 1) rc = optional_rests(c, opt, is_star, n_opt, rest);
    if (rc == ERR_OK && n_opt > 0) {
        rc = buf_append_cstr(b, n_req ? " (\",\" space (" : " (");
        for (size_t k = 0; rc == ERR_OK && k < n_opt; k++) {
            rc =
                buf_printf(b, "%s%s%s", k ? " | " : "", opt[k], is_star[k] ? " (\",\" space " : "");
            if (rc == ERR_OK && is_star[k]) rc = buf_printf(b, "%s)*", opt[k]);
            if (rc == ERR_OK && k + 1 < n_opt) rc = buf_printf(b, " %s", rest[k + 1]);
        }
        if (rc == ERR_OK) rc = buf_append_cstr(b, n_req ? "))?" : ")?");
    }
    if (rc == ERR_OK) rc = buf_append_cstr(b, " space \"}\"");
    mem_free(opt);
    mem_free(is_star);
    mem_free(rest);
    return rc;
}

/* The kv rule of one property: its JSON-encoded name, `:`, its value. */
static int property_kv(struct conv *c, struct prop *p)
{
    char value[RULE_NAME_CAP];
    size_t old = path_push(c, "properties");
    path_push(c, p->name);
    int rc = visit(c, p->schema, value);
    struct buf body;
    buf_init(&body);
    json_t *name = rc == ERR_OK ? json_string(p->name) : NULL;
    if (rc == ERR_OK && !name) rc = ERR_NOMEM;
    if (rc == ERR_OK) rc = append_json_literal(&body, name);
    json_decref(name);
    if (rc == ERR_OK) rc = buf_printf(&body, " space \":\" space %s", value);
    new_rule_name(c, p->rule, RULE_NAME_CAP);
    if (rc == ERR_OK) rc = emit_rule(c, p->rule, &body);
    buf_deinit(&body);
    path_pop(c, old);
    return rc;
}

/* The required names as a set (a JSON object, so a lookup is a hash, not a scan of the
 * array: schemas with tens of thousands of properties stay linear). ERR_INVALID for a
 * non-string entry. */
static int required_set(struct conv *c, const json_t *required, json_t **out)
{
    json_t *set = json_object();
    if (!set) return ERR_NOMEM;
    size_t i;
    const json_t *v;
    json_array_foreach(required, i, v)
    {
        if (!json_is_string(v)) {
            json_decref(set);
            return fail_invalid(c, "required", "must be an array of strings");
        }
        if (json_object_set(set, json_string_value(v), json_true()) != 0) {
            json_decref(set);
            return ERR_NOMEM;
        }
    }
    *out = set;
    return ERR_OK;
}

/* Collects properties (schema order), then required names missing from properties (any
 * value), each once. props has room for both. */
static int collect_props(struct conv *c, const json_t *properties, const json_t *required,
                         struct prop *props, size_t *n_out)
{
    size_t n = 0, i;
    const char *key;
    const json_t *v;
    json_t *req_set = NULL;
    int rc = required_set(c, required, &req_set);
    if (rc != ERR_OK) return rc;
    json_object_foreach(json_unconst(properties), key, v)
    {
        bool req = json_object_get(req_set, key) != NULL;
        if (json_is_false(v)) { // the property must not appear
            if (req) {
                json_decref(req_set);
                return fail_invalid(c, "required", "names a property whose schema is false");
            }
            continue;
        }
        props[n++] = (struct prop){.name = key, .schema = v, .is_required = req};
    }
    json_array_foreach(required, i, v)
    {
        const char *name = json_string_value(v);
        // the set entry is dropped once the name is placed, so a repeated name is added once
        if (properties && json_object_get(properties, name)) continue;
        if (!json_object_get(req_set, name)) continue;
        json_object_del(req_set, name);
        props[n++] = (struct prop){.name = name, .schema = json_true(), .is_required = true};
    }
    json_decref(req_set);
    *n_out = n;
    return ERR_OK;
}

static int object_body(struct conv *c, const json_t *schema, struct buf *b)
{
    const json_t *properties = json_object_get(schema, "properties");
    const json_t *required = json_object_get(schema, "required");
    const json_t *addl = json_object_get(schema, "additionalProperties");
    if (properties && !json_is_object(properties))
        return fail_invalid(c, "properties", "must be an object");
    if (required && !json_is_array(required))
        return fail_invalid(c, "required", "must be an array of strings");
    if (addl && !json_is_object(addl) && !json_is_boolean(addl))
        return fail_invalid(c, "additionalProperties", "must be a boolean or a schema");
    bool is_addl_any =
        !addl || json_is_true(addl) || (json_is_object(addl) && json_object_size(addl) == 0);
    if (json_object_size(properties) == 0 && json_array_size(required) == 0 && is_addl_any) {
        int rc = add_prim(c, PRIM_VALUE);
        return rc == ERR_OK ? buf_append_cstr(b, "object") : rc;
    }
    size_t cap = json_object_size(properties) + json_array_size(required) + 1, n = 0;
    struct prop *props = mem_calloc(cap, sizeof *props);
    if (!props) return ERR_NOMEM;
    int rc = add_prim(c, PRIM_SPACE);
    if (rc == ERR_OK) rc = collect_props(c, properties, required, props, &n);
    for (size_t i = 0; rc == ERR_OK && i < n; i++)
        rc = property_kv(c, &props[i]);
    char addl_rule[RULE_NAME_CAP];
    bool has_addl = addl && !json_is_false(addl);
    if (rc == ERR_OK && has_addl) rc = additional_kv(c, addl, props, n, addl_rule);
    if (rc == ERR_OK) rc = object_layout(c, props, n, has_addl ? addl_rule : NULL, b);
    mem_free(props);
    return rc;
}

static int array_body(struct conv *c, const json_t *schema, struct buf *b)
{
    const json_t *prefix = json_object_get(schema, "prefixItems");
    const json_t *items = json_object_get(schema, "items");
    const char *prefix_key = "prefixItems";
    if (!prefix && json_is_array(items)) { // the draft-4 tuple form
        prefix = items;
        prefix_key = "items";
        items = NULL;
    }
    int rc = add_prim(c, PRIM_SPACE);
    if (rc == ERR_OK && prefix) { // an exact tuple, as llama.cpp
        if (!json_is_array(prefix))
            return fail_invalid(c, "prefixItems", "must be an array of schemas");
        if (items && !json_is_false(items))
            return fail_unsupported(c, "items", "together with prefixItems");
        long min, max;
        rc = get_count(c, schema, "minItems", &min);
        if (rc == ERR_OK) rc = get_count(c, schema, "maxItems", &max);
        if (rc != ERR_OK) return rc;
        if ((size_t)(min < 0 ? 0 : min) > json_array_size(prefix) ||
            (max >= 0 && (size_t)max < json_array_size(prefix)))
            return fail_unsupported(c, "prefixItems",
                                    "a tuple length other than minItems..maxItems allows");
        rc = buf_append_cstr(b, "\"[\" space");
        size_t i;
        const json_t *v;
        json_array_foreach(prefix, i, v)
        {
            char name[RULE_NAME_CAP];
            if (rc == ERR_OK) rc = visit_child(c, v, prefix_key, (long)i, name);
            if (rc == ERR_OK) rc = buf_printf(b, "%s %s", i ? " \",\" space" : "", name);
        }
        return rc == ERR_OK ? buf_append_cstr(b, " space \"]\"") : rc;
    }
    long min, max;
    if (rc == ERR_OK) rc = get_count(c, schema, "minItems", &min);
    if (rc == ERR_OK) rc = get_count(c, schema, "maxItems", &max);
    if (rc != ERR_OK) return rc;
    if (max >= 0 && min > max) return fail_invalid(c, "minItems", "greater than maxItems");
    char item[RULE_NAME_CAP] = "value";
    if (items && json_is_false(items)) {
        max = 0;
    } else if (items && !json_is_true(items) &&
               !(json_is_object(items) && json_object_size(items) == 0)) {
        rc = visit_child(c, items, "items", -1, item);
    } else {
        rc = add_prim(c, PRIM_VALUE);
    }
    if (rc == ERR_OK && max == 0 && min > 0)
        return fail_invalid(c, "minItems", "items is false but minItems is positive");
    if (rc == ERR_OK) rc = buf_append_cstr(b, "\"[\" space ");
    if (rc == ERR_OK) rc = append_repetition(b, item, min < 0 ? 0 : min, max, "\",\" space");
    if (rc == ERR_OK) rc = buf_append_cstr(b, " space \"]\"");
    return rc;
}

static bool has_any_key(const json_t *schema, const char *const *keys)
{
    for (; *keys; keys++)
        if (json_object_get(schema, *keys)) return true;
    return false;
}

static const char *const bound_keys[] = {"minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum", NULL};

static int type_body(struct conv *c, const json_t *schema, const char *type, struct buf *b)
{
    enum prim p;
    if (!strcmp(type, "object")) return object_body(c, schema, b);
    if (!strcmp(type, "array")) return array_body(c, schema, b);
    if (!strcmp(type, "string")) return string_body(c, schema, b);
    if (!strcmp(type, "integer")) return integer_body(c, schema, b);
    if (!strcmp(type, "number")) return number_body(c, schema, b);
    if (!strcmp(type, "boolean")) {
        p = PRIM_BOOLEAN;
    } else if (!strcmp(type, "null")) {
        p = PRIM_NULL;
    } else {
        return errmsg_set(c->err, ERR_INVALID, "JSON schema 'type' at %s: unknown type \"%.64s\"",
                          path_str(c), type);
    }
    int rc = add_prim(c, p);
    return rc == ERR_OK ? buf_append_cstr(b, prims[p].name) : rc;
}

static const char *const object_keys[] = {"properties", "required", "additionalProperties", NULL};
static const char *const array_keys[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
static const char *const string_keys[] = {"minLength", "maxLength", "pattern", "format", NULL};

static int typed_body(struct conv *c, const json_t *schema, struct buf *b)
{
    const json_t *type = json_object_get(schema, "type");
    if (json_is_string(type)) return type_body(c, schema, json_string_value(type), b);
    if (json_is_array(type)) {
        if (json_array_size(type) == 0) return fail_invalid(c, "type", "must not be empty");
        size_t i;
        const json_t *t;
        int rc = buf_append_cstr(b, "(");
        json_array_foreach(type, i, t)
        {
            if (!json_is_string(t))
                return fail_invalid(c, "type", "must be a string or an array of strings");
            if (rc == ERR_OK) rc = buf_append_cstr(b, i ? " | " : "");
            if (rc == ERR_OK) rc = type_body(c, schema, json_string_value(t), b);
        }
        return rc == ERR_OK ? buf_append_cstr(b, ")") : rc;
    }
    if (type) return fail_invalid(c, "type", "must be a string or an array of strings");
    // no type: infer it from the keywords present, else any value
    if (has_any_key(schema, object_keys)) return object_body(c, schema, b);
    if (has_any_key(schema, array_keys)) return array_body(c, schema, b);
    if (has_any_key(schema, string_keys)) return string_body(c, schema, b);
    if (has_any_key(schema, bound_keys))
        return integer_body(c, schema, b) == ERR_OK
                   ? fail_unsupported(c, "minimum", "bounds without a type")
                   : ERR_UNSUPPORTED;
    int rc = add_prim(c, PRIM_VALUE);
    return rc == ERR_OK ? buf_append_cstr(b, "value") : rc;
}

/* The target of a local $ref ("#", "#/a/b~1c"), or NULL. */
static const json_t *resolve_pointer(const json_t *root, const char *ref)
{
    const json_t *cur = root;
    const char *p = ref + 1;
    while (cur && *p == '/') {
        char seg[256];
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = *++p == '0' ? '~' : '/';
            if (n + 1 >= sizeof seg) return NULL;
            seg[n++] = ch;
        }
        seg[n] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_get(cur, seg);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long i = strtoul(seg, &end, 10);
            cur = n && *end == '\0' ? json_array_get(cur, i) : NULL;
        } else {
            cur = NULL;
        }
    }
    return *p ? NULL : cur;
}

/* The rule of a $ref: one per distinct reference, named before its body is built so that
 * recursive references terminate. */
static int ref_rule(struct conv *c, const char *ref, char *name_out)
{
    const json_t *known = json_object_get(c->ref_index, ref);
    if (known) {
        snprintf(name_out, RULE_NAME_CAP, "%s", c->refs[json_integer_value(known)].name);
        return ERR_OK;
    }
    if (ref[0] != '#')
        return fail_unsupported(c, "$ref", "only references into the same document (#...)");
    const json_t *target = resolve_pointer(c->root, ref);
    if (!target)
        return errmsg_set(c->err, ERR_INVALID,
                          "JSON schema '$ref' at %s: cannot resolve \"%.128s\"", path_str(c), ref);
    if (c->n_refs == c->refs_cap) {
        size_t cap = c->refs_cap ? c->refs_cap * 2 : 8;
        struct ref_rule *r = mem_realloc(c->refs, cap * sizeof *r);
        if (!r) return ERR_NOMEM;
        c->refs = r;
        c->refs_cap = cap;
    }
    struct ref_rule *r = &c->refs[c->n_refs];
    r->ref = mem_strdup(ref);
    r->name = mem_alloc(RULE_NAME_CAP);
    if (!c->ref_index) c->ref_index = json_object();
    if (!r->ref || !r->name || !c->ref_index ||
        json_object_set_new(c->ref_index, ref, json_integer((json_int_t)c->n_refs)) != 0) {
        mem_free(r->ref);
        mem_free(r->name);
        return ERR_NOMEM;
    }
    c->n_refs++;
    char saved[PATH_CAP];
    size_t saved_len = c->path_len;
    memcpy(saved, c->path, saved_len + 1);
    snprintf(c->path, PATH_CAP, "%s", ref + 1);
    c->path_len = strlen(c->path);
    new_rule_name(c, r->name, RULE_NAME_CAP);
    snprintf(name_out, RULE_NAME_CAP, "%s", r->name);
    char inner[RULE_NAME_CAP];
    int rc = visit(c, target, inner);
    memcpy(c->path, saved, saved_len + 1);
    c->path_len = saved_len;
    if (rc != ERR_OK) return rc;
    return buf_printf(c->out, "%s ::= %s\n", name_out, inner);
}

/* anyOf / oneOf: the union of the alternatives. */
static int union_body(struct conv *c, const json_t *list, const char *key, struct buf *b)
{
    if (!json_is_array(list) || json_array_size(list) == 0)
        return fail_invalid(c, key, "must be a non-empty array of schemas");
    size_t i;
    const json_t *v;
    int rc = buf_append_cstr(b, "(");
    json_array_foreach(list, i, v)
    {
        char name[RULE_NAME_CAP];
        if (rc == ERR_OK) rc = visit_child(c, v, key, (long)i, name);
        if (rc == ERR_OK) rc = buf_printf(b, "%s%s", i ? " | " : "", name);
    }
    return rc == ERR_OK ? buf_append_cstr(b, ")") : rc;
}

/* Adds one allOf component's properties and required names to the merged object. */
static int merge_component(struct conv *c, const json_t *comp, json_t *props, json_t *req, int hops)
{
    const json_t *ref = json_object_get(comp, "$ref");
    if (json_is_string(ref)) {
        const char *r = json_string_value(ref);
        const json_t *target = r[0] == '#' ? resolve_pointer(c->root, r) : NULL;
        if (!target || hops > DEPTH_MAX)
            return fail_unsupported(c, "allOf", "a $ref that does not resolve to an object schema");
        return merge_component(c, target, props, req, hops + 1);
    }
    const json_t *type = json_object_get(comp, "type");
    bool is_object =
        json_is_object(comp) && (json_is_string(type) ? !strcmp(json_string_value(type), "object")
                                                      : !type && has_any_key(comp, object_keys));
    if (!is_object || json_object_get(comp, "allOf") || json_object_get(comp, "anyOf") ||
        json_object_get(comp, "oneOf"))
        return fail_unsupported(c, "allOf", "only object schemas can be merged");
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(comp, "properties"), key, v)
    {
        if (!json_object_get(props, key) && json_object_set(props, key, v) != 0) return ERR_NOMEM;
    }
    size_t i;
    json_array_foreach(json_object_get(comp, "required"), i, v)
    {
        if (json_array_append(req, v) != 0) return ERR_NOMEM;
    }
    return ERR_OK;
}

/* allOf: object components are merged (properties of the first that declares them, the union
 * of required; no additional properties); a single component stands for itself. */
static int all_of_body(struct conv *c, const json_t *schema, const json_t *list, struct buf *b)
{
    if (!json_is_array(list) || json_array_size(list) == 0)
        return fail_invalid(c, "allOf", "must be a non-empty array of schemas");
    if (json_array_size(list) == 1 && !has_any_key(schema, object_keys)) {
        char name[RULE_NAME_CAP];
        int rc = visit_child(c, json_array_get(list, 0), "allOf", 0, name);
        return rc == ERR_OK ? buf_append_cstr(b, name) : rc;
    }
    json_t *merged = json_pack("{s:s, s:{}, s:[]}", "type", "object", "properties", "required");
    if (!merged) return ERR_NOMEM;
    json_t *props = json_object_get(merged, "properties"),
           *req = json_object_get(merged, "required");
    int rc = ERR_OK;
    if (has_any_key(schema, object_keys)) rc = merge_component(c, schema, props, req, 0);
    size_t i;
    const json_t *v;
    json_array_foreach(list, i, v)
    {
        size_t old = path_push(c, "allOf");
        path_push_index(c, i);
        if (rc == ERR_OK) rc = merge_component(c, v, props, req, 0);
        path_pop(c, old);
    }
    if (rc == ERR_OK) rc = object_body(c, merged, b);
    json_decref(merged);
    return rc;
}

static const char *const combinators[] = {"$ref", "anyOf", "oneOf", "allOf", "enum", "const", NULL};

/* Rejects constraining keywords next to $ref / anyOf / oneOf / enum / const, which this
 * converter would otherwise drop (allOf merges its object siblings). */
static int check_alone(struct conv *c, const json_t *schema, const char *keyword)
{
    const char *key;
    const json_t *v;
    json_object_foreach(json_unconst(schema), key, v)
    {
        if (!strcmp(key, keyword) || is_in(key, annotations)) continue;
        bool is_type_ok =
            !strcmp(key, "type") && (!strcmp(keyword, "enum") || !strcmp(keyword, "const"));
        if (is_type_ok) continue; // values are concrete already
        if (is_in(key, combinators) || is_in(key, object_keys) || is_in(key, array_keys) ||
            is_in(key, string_keys) || is_in(key, bound_keys) || !strcmp(key, "type")) {
            char why[96];
            snprintf(why, sizeof why, "together with '%s'", keyword);
            return fail_unsupported(c, key, why);
        }
    }
    return ERR_OK;
}

static int schema_body(struct conv *c, const json_t *schema, struct buf *b)
{
    const json_t *v;
    int rc = check_keywords(c, schema);
    for (const char *const *k = combinators; rc == ERR_OK && *k; k++) {
        if (!(v = json_object_get(schema, *k))) continue;
        if (strcmp(*k, "allOf") != 0) rc = check_alone(c, schema, *k);
        if (rc != ERR_OK) return rc;
        if (!strcmp(*k, "$ref")) {
            char name[RULE_NAME_CAP];
            if (!json_is_string(v)) return fail_invalid(c, "$ref", "must be a string");
            rc = ref_rule(c, json_string_value(v), name);
            return rc == ERR_OK ? buf_append_cstr(b, name) : rc;
        }
        if (!strcmp(*k, "anyOf") || !strcmp(*k, "oneOf")) return union_body(c, v, *k, b);
        if (!strcmp(*k, "allOf")) return all_of_body(c, schema, v, b);
        if (!strcmp(*k, "const")) return append_json_literal(b, v);
        if (!json_is_array(v) || json_array_size(v) == 0)
            return fail_invalid(c, "enum", "must be a non-empty array");
        size_t i;
        const json_t *e;
        rc = buf_append_cstr(b, "(");
        json_array_foreach(v, i, e)
        {
            if (rc == ERR_OK) rc = buf_append_cstr(b, i ? " | " : "");
            if (rc == ERR_OK) rc = append_json_literal(b, e);
        }
        return rc == ERR_OK ? buf_append_cstr(b, ")") : rc;
    }
    return rc == ERR_OK ? typed_body(c, schema, b) : rc;
}

static int visit(struct conv *c, const json_t *schema, char *name_out)
{
    if (json_is_true(schema)) {
        snprintf(name_out, RULE_NAME_CAP, "value");
        return add_prim(c, PRIM_VALUE);
    }
    if (json_is_false(schema))
        return errmsg_set(c->err, ERR_INVALID, "JSON schema at %s is false: no value is valid",
                          path_str(c));
    if (!json_is_object(schema))
        return errmsg_set(c->err, ERR_INVALID, "JSON schema at %s must be an object or a boolean",
                          path_str(c));
    if (c->depth >= DEPTH_MAX)
        return errmsg_set(c->err, ERR_LIMIT, "JSON schema at %s nests deeper than %d", path_str(c),
                          DEPTH_MAX);
    if (c->is_cancelled && ++c->n_visits % CANCEL_EVERY == 0 && c->is_cancelled())
        return errmsg_set(c->err, ERR_CANCELLED, "the schema conversion was cancelled");
    c->depth++;
    struct buf body;
    buf_init(&body);
    int rc = schema_body(c, schema, &body);
    new_rule_name(c, name_out, RULE_NAME_CAP);
    if (rc == ERR_OK) rc = emit_rule(c, name_out, &body);
    buf_deinit(&body);
    c->depth--;
    return rc;
}

int json_schema_to_gbnf(const json_t *schema, struct buf *out, struct errmsg *err)
{
    return json_schema_to_gbnf_cancel(schema, NULL, out, err);
}

int json_schema_to_gbnf_cancel(const json_t *schema, bool (*is_cancelled)(void), struct buf *out,
                               struct errmsg *err)
{
    struct conv c = {.root = schema, .out = out, .err = err, .is_cancelled = is_cancelled};
    char name[RULE_NAME_CAP];
    int rc = visit(&c, schema, name);
    if (rc == ERR_OK) rc = buf_printf(out, "root ::= %s\n", name);
    for (size_t i = 0; i < c.n_refs; i++) {
        mem_free(c.refs[i].ref);
        mem_free(c.refs[i].name);
    }
    mem_free(c.refs);
    json_decref(c.ref_index);
    if (rc == ERR_NOMEM) errmsg_set(err, ERR_NOMEM, "out of memory converting the JSON schema");
    return rc;
}

int json_schema_any_object_gbnf(struct buf *out)
{
    struct conv c = {.out = out};
    int rc = add_prim(&c, PRIM_VALUE);
    return rc == ERR_OK ? buf_append_cstr(out, "root ::= object\n") : rc;
}

int json_schema_compile(const json_t *schema, struct gbnf **out, struct errmsg *err)
{
    struct buf text;
    buf_init(&text);
    int rc = json_schema_to_gbnf(schema, &text, err);
    if (rc == ERR_OK) rc = gbnf_compile(text.data, text.len, out, err);
    if (rc == ERR_FORMAT && err) {
        // the converter's own text is well-formed; what gbnf rejects is the language: a schema
        // that accepts no value, or a pattern nesting nullable repetitions ((a*)*)
        char why[ERRMSG_CAP];
        snprintf(why, sizeof why, "%s", err->msg);
        errmsg_set(err, ERR_UNSUPPORTED, "JSON schema cannot be used as a grammar: %s", why);
    }
    if (rc == ERR_FORMAT) rc = ERR_UNSUPPORTED;
    buf_deinit(&text);
    return rc;
}
