/* text/gbnf + text/grammar: parsing (valid and invalid grammars, error positions, limits),
 * byte-level matching with UTF-8 split across calls, token masks against a brute-force check,
 * end-of-generation handling, and allocation-failure loops. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf/gguf.h"
#include "text/grammar/gbnf.h"
#include "text/grammar/grammar.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

static struct gbnf *compile_ok(const char *src)
{
    struct gbnf *g = NULL;
    struct errmsg e = {{0}};
    int rc = gbnf_compile(src, strlen(src), &g, &e);
    if (rc != ERR_OK) print_error("grammar failed: %s (%s)\n", e.msg, src);
    assert_int_equal(rc, ERR_OK);
    return g;
}

/* Whether the whole input matches: accepted byte by byte (or all at once) and can end. */
static bool matches_g(const struct gbnf *g, const char *input, bool bytewise)
{
    struct grammar_state *st;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    size_t n = strlen(input);
    bool ok = true;
    if (bytewise) {
        for (size_t i = 0; i < n && ok; i++)
            ok = grammar_state_accept_bytes(st, input + i, 1) == ERR_OK;
    } else {
        ok = grammar_state_accept_bytes(st, input, n) == ERR_OK;
    }
    ok = ok && grammar_state_can_end(st);
    grammar_state_free(st);
    return ok;
}

static bool matches(const char *grammar, const char *input)
{
    struct gbnf *g = compile_ok(grammar);
    bool a = matches_g(g, input, false), b = matches_g(g, input, true);
    assert_true(a == b);
    gbnf_free(g);
    return a;
}

static int compile_err(const char *src, char *msg, size_t cap)
{
    struct gbnf *g = NULL;
    struct errmsg e = {{0}};
    int rc = gbnf_compile(src, strlen(src), &g, &e);
    assert_int_not_equal(rc, ERR_OK);
    assert_null(g);
    snprintf(msg, cap, "%s", e.msg);
    return rc;
}

static void expect_error(const char *src, int code, const char *fragment)
{
    char msg[ERRMSG_CAP];
    int rc = compile_err(src, msg, sizeof msg);
    if (rc != code || !strstr(msg, fragment))
        print_error("grammar %s: got %d '%s', want %d '%s'\n", src, rc, msg, code, fragment);
    assert_int_equal(rc, code);
    assert_non_null(strstr(msg, fragment));
}

static void test_literals_and_alternation(void **state)
{
    (void)state;
    const char *g = "root ::= \"yes\" | \"no\" | \"maybe\" \"!\"\n";
    assert_true(matches(g, "yes"));
    assert_true(matches(g, "no"));
    assert_true(matches(g, "maybe!"));
    assert_false(matches(g, "maybe"));
    assert_false(matches(g, "ye"));
    assert_false(matches(g, "yess"));
    assert_false(matches(g, ""));
    assert_true(matches("root ::= \"\"\n", ""));
    assert_true(matches("root ::= | \"a\"", ""));
    assert_true(matches("root ::= | \"a\"", "a"));
}

static void test_escapes(void **state)
{
    (void)state;
    assert_true(matches("root ::= \"a\\nb\\t\\\\\\\"\\r\"", "a\nb\t\\\"\r"));
    assert_true(matches("root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9f\x98\x80"));
    assert_true(matches("root ::= [\\[\\]\\-]+", "[-]"));
    assert_true(matches("root ::= \"\\xff\"", "\xc3\xbf")); // \x is a code point, not a byte
}

static void test_classes_and_any(void **state)
{
    (void)state;
    const char *g = "root ::= [a-cx] [^0-9a-z] . [\xe3\x81\x81-\xe3\x82\x9f]";
    assert_true(matches(g, "bQ!\xe3\x81\x82"));
    assert_true(matches(g, "x_\xf0\x9f\x98\x80\xe3\x82\x9f"));
    assert_false(matches(g, "dQ!\xe3\x81\x82"));
    assert_false(matches(g, "b5!\xe3\x81\x82"));
    assert_false(matches(g, "bQ!\xe3\x82\xa0")); // one past the range
    assert_true(matches("root ::= [a-]", "-"));
    assert_true(matches("root ::= [^\\n]+ \"\\n\"", "hello world\n"));
    assert_false(matches("root ::= [^\\n]+ \"\\n\"", "hello\nworld\n"));
}

static void test_repetitions(void **state)
{
    (void)state;
    assert_true(matches("root ::= \"a\"*", ""));
    assert_true(matches("root ::= \"a\"*", "aaaa"));
    assert_false(matches("root ::= \"a\"+", ""));
    assert_true(matches("root ::= \"ab\"+", "ababab"));
    assert_false(matches("root ::= \"ab\"+", "aba"));
    assert_true(matches("root ::= \"a\"? \"b\"", "b"));
    assert_true(matches("root ::= \"a\"? \"b\"", "ab"));
    assert_false(matches("root ::= \"a\"? \"b\"", "aab"));
    const char *g =
        "root ::= [0-9]{2,4} \"-\" [a-z]{3} \"-\" \"x\"{2,} \"-\" (\"ab\" | \"c\"){0,2}";
    assert_true(matches(g, "12-abc-xx-"));
    assert_true(matches(g, "1234-abc-xxxxx-abc"));
    assert_false(matches(g, "1-abc-xx-"));
    assert_false(matches(g, "12345-abc-xx-"));
    assert_false(matches(g, "12-ab-xx-"));
    assert_false(matches(g, "12-abc-x-"));
    assert_false(matches(g, "12-abc-xx-ccc"));
    assert_true(matches("root ::= \"a\"{0}", ""));
    assert_true(matches("root ::= \"\"* \"\"{3} \"b\"", "b"));
    assert_false(matches("root ::= \"a\"{0}", "a"));
}

static void test_rules_groups_comments(void **state)
{
    (void)state;
    const char *g = "# a list\n"
                    "root ::= (\n"
                    "    item   # first\n"
                    "    (\", \" item)*\n"
                    ")\n"
                    "item ::= \"x\" |\n"
                    "         num\r\n"
                    "num ::= [1-9] [0-9]*\n";
    assert_true(matches(g, "x"));
    assert_true(matches(g, "x, 12, x, 3"));
    assert_false(matches(g, "x,12"));
    assert_false(matches(g, "012"));
    // right recursion and nesting
    const char *paren = "root ::= \"(\" root \")\" | \"\"\n";
    assert_true(matches(paren, "((()))"));
    assert_false(matches(paren, "(()"));
}

static void test_syntax_errors_have_positions(void **state)
{
    (void)state;
    expect_error("root ::= \"a\"\nfoo ::= bar baz", ERR_FORMAT, "undefined rule 'bar'");
    expect_error("root ::= \"a\"\nfoo ::= bar baz", ERR_FORMAT, "line 2, column 9");
    expect_error("root ::= \"abc", ERR_FORMAT, "unexpected end");
    expect_error("root := \"a\"", ERR_FORMAT, "line 1, column 6: expected '::='");
    expect_error("root ::= [a-", ERR_FORMAT, "unexpected end");
    expect_error("root ::= \"\\q\"", ERR_FORMAT, "line 1, column 11: unknown escape");
    expect_error("root ::= \"\\x4\"", ERR_FORMAT, "hex digits");
    expect_error("root ::= * \"a\"", ERR_FORMAT, "line 1, column 10: expected an item");
    expect_error("root ::= (\"a\"", ERR_FORMAT, "unclosed '('");
    expect_error("root ::= \"a\")", ERR_FORMAT, "unmatched ')'");
    expect_error("root ::= \"a\"{3,1}", ERR_FORMAT, "maximum below minimum");
    expect_error("root ::= \"a\"{x}", ERR_FORMAT, "expected an integer");
    expect_error("root ::= [z-a]", ERR_FORMAT, "range end below range start");
    expect_error("root ::= \"a\"\n  ::= \"b\"", ERR_FORMAT,
                 "line 2, column 3: expected a rule name");
    expect_error("foo ::= \"a\"\n", ERR_FORMAT, "no 'root' rule");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", ERR_FORMAT,
                 "line 2, column 1: rule defined twice");
    expect_error("root ::= \"\xff\"", ERR_FORMAT, "invalid UTF-8");
    expect_error("root ::= <think>", ERR_UNSUPPORTED, "token");
    expect_error("", ERR_FORMAT, "no 'root'");
    char nul[] = "root ::= \"a\0\"";
    struct gbnf *g = NULL;
    assert_int_equal(gbnf_compile(nul, sizeof nul - 1, &g, NULL), ERR_FORMAT);
}

static void test_semantic_errors(void **state)
{
    (void)state;
    expect_error("root ::= root \"a\" | \"b\"", ERR_FORMAT, "'root' is left-recursive");
    expect_error("root ::= a\na ::= b \"x\"\nb ::= c | \"y\"\nc ::= a", ERR_FORMAT,
                 "left-recursive");
    // left recursion hidden behind a nullable prefix
    expect_error("root ::= e root \"a\" | \"b\"\ne ::= \"\" | \"c\"", ERR_FORMAT, "left-recursive");
    expect_error("root ::= (\"a\"?)*", ERR_FORMAT, "left-recursive");
    // languages without any string
    expect_error("root ::= [^\\x00-\\U0010FFFF]", ERR_FORMAT, "'root' can match nothing");
    expect_error("root ::= \"a\" root", ERR_FORMAT, "can match nothing");
    expect_error("root ::= x\nx ::= y \"a\"\ny ::= x \"b\"", ERR_FORMAT, "left-recursive");
    // right recursion with a way out is fine
    struct gbnf *g = compile_ok("root ::= \"a\" root | \"b\"");
    gbnf_free(g);
}

static void test_limits(void **state)
{
    (void)state;
    expect_error("root ::= \"a\"{2001}", ERR_LIMIT, "repetition");
    struct buf b;
    buf_init(&b);
    assert_int_equal(buf_append_cstr(&b, "root ::= "), ERR_OK);
    for (int i = 0; i < 200; i++)
        assert_int_equal(buf_append_byte(&b, '('), ERR_OK);
    assert_int_equal(buf_append_cstr(&b, "\"a\""), ERR_OK);
    for (int i = 0; i < 200; i++)
        assert_int_equal(buf_append_byte(&b, ')'), ERR_OK);
    struct gbnf *g = NULL;
    assert_int_equal(gbnf_compile(b.data, b.len, &g, NULL), ERR_LIMIT);
    buf_deinit(&b);
    // nested large repetitions stay within the element limit or fail with ERR_LIMIT
    const char *big = "root ::= ((\"ab\"{2000}){2000}){2000}";
    int rc = gbnf_compile(big, strlen(big), &g, NULL);
    assert_true(rc == ERR_OK || rc == ERR_LIMIT);
    gbnf_free(g);
    // an exploding expansion is refused, not looped on
    g = compile_ok("root ::= x{0,2000} \"b\"\nx ::= \"a\" | \"\" | \"a\"");
    struct grammar_state *st;
    rc = grammar_state_new(g, &st);
    assert_true(rc == ERR_OK || rc == ERR_LIMIT);
    if (rc == ERR_OK) {
        rc = grammar_state_accept_bytes(st, "aaab", 4);
        assert_true(rc == ERR_OK || rc == ERR_LIMIT);
        grammar_state_free(st);
    }
    gbnf_free(g);
}

static void test_utf8_split_and_state_unchanged_on_reject(void **state)
{
    (void)state;
    struct gbnf *g =
        compile_ok("root ::= \"\xc3\xa9\" [\xe4\xb8\x80-\xe9\xbe\xa5]+ \"\xf0\x9f\x98\x80\"");
    struct grammar_state *st;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    assert_int_equal(grammar_state_accept_bytes(st, "\xc3", 1), ERR_OK);
    assert_false(grammar_state_can_end(st));
    assert_int_equal(grammar_state_accept_bytes(st, "\xa9\xe4", 2), ERR_OK);
    assert_int_equal(grammar_state_accept_bytes(st, "\xb8", 1), ERR_OK);
    assert_int_equal(grammar_state_accept_bytes(st, "\x80\xe5\xad", 3), ERR_OK);
    // a CJK prefix below the range start is refused before its last byte
    struct grammar_state *c;
    assert_int_equal(grammar_state_clone(st, &c), ERR_OK);
    assert_int_equal(grammar_state_accept_bytes(c, "\x97\xe4", 2), ERR_OK);
    assert_int_equal(grammar_state_accept_bytes(c, "\xb7", 1), ERR_INVALID); // U+4Dxx
    assert_int_equal(grammar_state_accept_bytes(c, "\xe3", 1), ERR_INVALID); // U+3xxx
    assert_int_equal(grammar_state_accept_bytes(c, "\xb8\x80", 2), ERR_OK);
    grammar_state_free(c);
    assert_int_equal(grammar_state_accept_bytes(st, "\x97", 1), ERR_OK);
    // rejected bytes leave the state where it was
    assert_int_equal(grammar_state_accept_bytes(st, "\xf0\x9f\x98\x81", 4), ERR_INVALID);
    assert_int_equal(grammar_state_accept_bytes(st, "\x80", 1), ERR_INVALID); // stray continuation
    assert_int_equal(grammar_state_accept_bytes(st, "\xf0\x9f\x98", 3), ERR_OK);
    assert_false(grammar_state_can_end(st));
    assert_int_equal(grammar_state_accept_bytes(st, "\x80", 1), ERR_OK);
    assert_true(grammar_state_can_end(st));
    assert_true(grammar_state_is_done(st));
    grammar_state_free(st);
    gbnf_free(g);
    // malformed UTF-8 never matches, even against `.`
    g = compile_ok("root ::= .*");
    assert_true(matches_g(g, "ok \xc3\xa9", false));
    assert_false(matches_g(g, "\xc0\xaf", false));         // overlong
    assert_false(matches_g(g, "\xed\xa0\x80", false));     // surrogate
    assert_false(matches_g(g, "\xf4\x90\x80\x80", false)); // above U+10FFFF
    assert_false(matches_g(g, "\xe3\x81", false));         // incomplete at the end
    gbnf_free(g);
}

static const char *const json_gbnf =
    "root ::= object\n"
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static void test_json_grammar(void **state)
{
    (void)state;
    struct gbnf *g = compile_ok(json_gbnf);
    assert_true(
        matches_g(g, "{\"a\": [1, 2.5e3, \"x\\n\\u00e9\", {\"b\": null}], \"c\": true}", true));
    assert_true(matches_g(g, "{}", false));
    assert_false(matches_g(g, "{\"a\": [1, 2,]}", false));
    assert_false(matches_g(g, "[]", false));
    assert_false(matches_g(g, "{\"a\": 01}", false));
    assert_false(matches_g(g, "{\"a\":\"\x01\"}", false));
    gbnf_free(g);
}

struct test_vocab {
    char **piece;
    size_t *len;
    size_t n, cap;
};

static void vocab_add(struct test_vocab *v, const char *bytes, size_t len)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 1024;
        v->piece = realloc(v->piece, v->cap * sizeof *v->piece);
        v->len = realloc(v->len, v->cap * sizeof *v->len);
        assert_non_null(v->piece);
        assert_non_null(v->len);
    }
    v->piece[v->n] = malloc(len + 1);
    assert_non_null(v->piece[v->n]);
    if (len) memcpy(v->piece[v->n], bytes, len);
    v->len[v->n++] = len;
}

static void vocab_release(struct test_vocab *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->piece[i]);
    free(v->piece);
    free(v->len);
}

/* A vocabulary with every byte, common JSON fragments, UTF-8 pieces cut at every point, and
 * random strings over a JSON-ish alphabet. Token 0 is EOG, token 1 a control token. */
static void vocab_make(struct test_vocab *v, unsigned seed)
{
    memset(v, 0, sizeof *v);
    vocab_add(v, "</s>", 4);
    vocab_add(v, "", 0);
    for (int b = 1; b < 256; b++) {
        char c = (char)b;
        vocab_add(v, &c, 1);
    }
    static const char *frags[] = {
        "{\"",      "\":",         "\": ", "\", \"", "true",     "false",
        "null",     "}",           "},",   "[{",     "]}",       " \"",
        "\\u00",    "\\n",         "12",   "-3.5e",  "\xc3\xa9", "\xe4\xb8\xad\xe6",
        "\x96\x87", "\x9f\x98\x80"};
    for (size_t i = 0; i < sizeof frags / sizeof *frags; i++)
        vocab_add(v, frags[i], strlen(frags[i]));
    vocab_add(v, "true", 4); // duplicate piece
    srand(seed);
    static const char alpha[] = "{}[]\":, \n\\abtrue01-.e\xc3\xa9\xe4";
    for (int i = 0; i < 600; i++) {
        char s[8];
        size_t n = 1 + (size_t)(rand() % 7);
        for (size_t k = 0; k < n; k++)
            s[k] = alpha[rand() % (int)(sizeof alpha - 1)];
        vocab_add(v, s, n);
    }
}

static struct grammar_vocab *vocab_build(const struct test_vocab *v)
{
    int32_t eog = 0;
    struct grammar_vocab_params p = {(const char *const *)v->piece, v->len, v->n, &eog, 1};
    struct grammar_vocab *gv = NULL;
    assert_int_equal(grammar_vocab_new(&p, &gv), ERR_OK);
    return gv;
}

/* Compares the mask with cloning the state and feeding each token's bytes. */
static void check_mask(struct grammar_state *st, const struct grammar_vocab *gv,
                       const struct test_vocab *v)
{
    size_t words = grammar_vocab_mask_words(gv);
    uint32_t *mask = calloc(words, sizeof *mask);
    assert_non_null(mask);
    assert_int_equal(grammar_mask(st, gv, mask), ERR_OK);
    for (size_t i = 0; i < v->n; i++) {
        bool want;
        if (i == 0) {
            want = grammar_state_can_end(st);
        } else if (v->len[i] == 0) {
            want = false;
        } else {
            struct grammar_state *c;
            assert_int_equal(grammar_state_clone(st, &c), ERR_OK);
            want = grammar_state_accept_bytes(c, v->piece[i], v->len[i]) == ERR_OK;
            grammar_state_free(c);
        }
        bool got = mask[i / 32] >> (i % 32) & 1;
        if (got != want)
            print_error("token %zu (len %zu): mask %d, brute force %d\n", i, v->len[i], got, want);
        assert_true(got == want);
        bool allows;
        assert_int_equal(grammar_state_allows_token(st, gv, (int32_t)i, &allows), ERR_OK);
        assert_true(allows == want);
    }
    free(mask);
}

static void test_mask_matches_brute_force(void **state)
{
    (void)state;
    struct test_vocab v;
    vocab_make(&v, 7);
    struct grammar_vocab *gv = vocab_build(&v);
    assert_int_equal(grammar_vocab_n_tokens(gv), v.n);
    struct gbnf *g = compile_ok(json_gbnf);
    struct grammar_state *st;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    // walk through a document, token by token, checking the mask before each piece
    static const char *steps[] = {"{\"", "k\xc3", "\xa9",     "\": ",    "[tr",        "ue, -3.5e",
                                  "1",   ", \"",  "\xe4\xb8", "\xad\"]", ", \"b\":{}", "}"};
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        check_mask(st, gv, &v);
        assert_int_equal(grammar_state_accept_bytes(st, steps[i], strlen(steps[i])), ERR_OK);
    }
    check_mask(st, gv, &v);
    assert_true(grammar_state_can_end(st));
    grammar_state_free(st);
    gbnf_free(g);
    grammar_vocab_free(gv);
    vocab_release(&v);
}

/* A grammar whose positions hold thousands of stacks: masks end, with a result or ERR_LIMIT,
 * within the per-call work budget. */
static void test_pathological_grammar_is_bounded(void **state)
{
    (void)state;
    struct test_vocab v;
    vocab_make(&v, 13);
    struct grammar_vocab *gv = vocab_build(&v);
    uint32_t *mask = calloc(grammar_vocab_mask_words(gv), sizeof *mask);
    assert_non_null(mask);
    struct gbnf *g = compile_ok("root ::= x{0,1500} \"b\"\nx ::= \"a\" | \"aa\" | [a-z] | \"\"");
    struct grammar_state *st = NULL;
    int rc = grammar_state_new(g, &st);
    int n_limit = rc == ERR_LIMIT;
    for (int i = 0; rc == ERR_OK && i < 3; i++) {
        rc = grammar_mask(st, gv, mask);
        n_limit += rc == ERR_LIMIT;
        if (rc == ERR_OK) rc = grammar_state_accept_bytes(st, "a", 1);
        n_limit += rc == ERR_LIMIT;
    }
    assert_true(rc == ERR_OK || rc == ERR_LIMIT);
    grammar_state_free(st);
    gbnf_free(g);
    free(mask);
    grammar_vocab_free(gv);
    vocab_release(&v);
    (void)n_limit;
}

/* Code points in different classes of the stack tops lead to different states. */
static void test_mask_code_point_classes(void **state)
{
    (void)state;
    struct test_vocab v;
    vocab_make(&v, 9);
    static const char *extra[] = {"\xc3\xa9"
                                  "1",
                                  "\xe4\xb8\xad"
                                  "2",
                                  "\xe4\xb8\xad"
                                  "3",
                                  "\xe6\x96\x87"
                                  "3",
                                  "\xc3\xa9"
                                  "3",
                                  "\xf0\x9f\x98\x80"
                                  "3",
                                  "\xe4\xb8",
                                  "\xc3"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++)
        vocab_add(&v, extra[i], strlen(extra[i]));
    struct grammar_vocab *gv = vocab_build(&v);
    struct gbnf *g = compile_ok("root ::= ( [\\u00e0-\\u00ff] \"1\" | [\\u4e00-\\u4e2f] \"2\" | "
                                "[^\\x00-\\x7f] \"3\" | [a-z] )*");
    struct grammar_state *st;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    static const char *steps[] = {"\xc3\xa9"
                                  "1",
                                  "a",
                                  "\xe4\xb8",
                                  "\xad",
                                  "2",
                                  "\xe6\x96\x87",
                                  "3",
                                  "\xf0\x9f\x98\x80",
                                  "3",
                                  "\xc3\xa9",
                                  "3"};
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        check_mask(st, gv, &v);
        assert_int_equal(grammar_state_accept_bytes(st, steps[i], strlen(steps[i])), ERR_OK);
    }
    check_mask(st, gv, &v);
    assert_int_equal(grammar_state_accept_bytes(st,
                                                "\xe6\x96\x87"
                                                "2",
                                                4),
                     ERR_INVALID);
    grammar_state_free(st);
    gbnf_free(g);
    grammar_vocab_free(gv);
    vocab_release(&v);
}

static void test_eog_and_tokens(void **state)
{
    (void)state;
    struct test_vocab v;
    vocab_make(&v, 3);
    struct grammar_vocab *gv = vocab_build(&v);
    struct gbnf *g = compile_ok("root ::= \"true\" | \"tr\"");
    struct grammar_state *st;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    assert_int_equal(grammar_state_accept_token(st, gv, 0), ERR_INVALID); // cannot end yet
    assert_int_equal(grammar_state_accept_token(st, gv, 1), ERR_INVALID); // control token
    assert_int_equal(grammar_state_accept_token(st, gv, -1), ERR_INVALID);
    assert_int_equal(grammar_state_accept_token(st, gv, (int32_t)v.n), ERR_INVALID);
    assert_int_equal(grammar_state_accept_token(st, gv, 't' + 1),
                     ERR_OK); // byte token ids are byte + 1
    assert_int_equal(grammar_state_accept_token(st, gv, 'r' + 1), ERR_OK);
    uint32_t *mask = calloc(grammar_vocab_mask_words(gv), sizeof *mask);
    assert_non_null(mask);
    assert_int_equal(grammar_mask(st, gv, mask), ERR_OK);
    assert_true(mask[0] & 1); // "tr" is complete: EOG allowed
    assert_true(mask[('u' + 1) / 32] >> (('u' + 1) % 32) & 1);
    assert_false(mask[('x' + 1) / 32] >> (('x' + 1) % 32) & 1);
    float logits[300];
    for (int i = 0; i < 300; i++)
        logits[i] = 1.0f;
    grammar_mask_apply(mask, 300, logits);
    assert_true(logits[0] == 1.0f && logits['u' + 1] == 1.0f);
    assert_true(logits['x' + 1] < -1e30f && logits[1] < -1e30f);
    assert_int_equal(grammar_state_accept_token(st, gv, 0), ERR_OK);
    free(mask);
    grammar_state_free(st);
    gbnf_free(g);
    int32_t bad = 99999;
    struct grammar_vocab_params p = {(const char *const *)v.piece, v.len, v.n, &bad, 1};
    struct grammar_vocab *gv2 = NULL;
    assert_int_equal(grammar_vocab_new(&p, &gv2), ERR_INVALID);
    grammar_vocab_free(gv);
    vocab_release(&v);
}

static void test_compile_alloc_failures(void **state)
{
    (void)state;
    int64_t live = mem_live_count();
    int n_fail = 0;
    for (int64_t n = 0;; n++) {
        struct gbnf *g = NULL;
        mem_fail_after(n);
        int rc = gbnf_compile(json_gbnf, strlen(json_gbnf), &g, NULL);
        mem_fail_after(-1);
        gbnf_free(g);
        if (mem_live_count() != live)
            print_error("leak after failing allocation %lld (rc %d)\n", (long long)n, rc);
        assert_int_equal(mem_live_count(), live);
        if (rc == ERR_OK) break;
        assert_int_equal(rc, ERR_NOMEM);
        n_fail++;
    }
    assert_true(n_fail > 10);
    // the matcher and the mask too
    struct test_vocab v;
    vocab_make(&v, 5);
    struct gbnf *g = compile_ok(json_gbnf);
    for (int64_t n = 0;; n++) {
        struct grammar_vocab *gv = NULL;
        struct grammar_state *st = NULL;
        int32_t eog = 0;
        struct grammar_vocab_params p = {(const char *const *)v.piece, v.len, v.n, &eog, 1};
        uint32_t mask[64];
        mem_fail_after(n);
        int rc = grammar_vocab_new(&p, &gv);
        if (rc == ERR_OK) rc = grammar_state_new(g, &st);
        if (rc == ERR_OK) rc = grammar_state_accept_bytes(st, "{\"a\": [1, \"\xc3", 12);
        if (rc == ERR_OK) rc = grammar_mask(st, gv, mask);
        mem_fail_after(-1);
        grammar_state_free(st);
        grammar_vocab_free(gv);
        assert_int_equal(mem_live_count(), live + 4); // g
        if (rc == ERR_OK) break;
        assert_int_equal(rc, ERR_NOMEM);
    }
    gbnf_free(g);
    vocab_release(&v);
}

/* GPT-2's byte-level BPE alphabet: printable Latin-1 bytes stand for themselves, the others
 * for U+0100 upwards in byte order. Returns the byte of code point cp, or -1. */
static int gpt2_byte(uint32_t cp)
{
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool is_self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (is_self ? (uint32_t)b == cp : (uint32_t)next++ == cp) return b;
    }
    return -1;
}

/* The qwen2 vocabulary from ../shared, decoded to raw bytes; false when absent. */
static bool load_qwen2(struct test_vocab *v, int32_t *eog)
{
    struct gguf *g;
    memset(v, 0, sizeof *v);
    if (gguf_open("../shared/models/vocab/ggml-vocab-qwen2.gguf", &g, NULL) != ERR_OK) return false;
    enum gguf_value_type t;
    int64_t n = 0;
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", &t, &n), ERR_OK);
    int map[512];
    for (uint32_t cp = 0; cp < 512; cp++)
        map[cp] = gpt2_byte(cp);
    *eog = -1;
    for (int64_t i = 0; i < n; i++) {
        struct str s;
        int64_t type = 1;
        assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s), ERR_OK);
        gguf_get_arr_i64(g, "tokenizer.ggml.token_type", i, &type);
        char buf[1024];
        size_t o = 0;
        for (size_t k = 0; k < s.len && o < sizeof buf;) {
            unsigned char c = (unsigned char)s.ptr[k];
            uint32_t cp = c;
            size_t w = 1;
            if (c >= 0xC0 && c < 0xE0 && k + 1 < s.len)
                cp = (uint32_t)(c & 0x1F) << 6 | ((unsigned char)s.ptr[k + 1] & 0x3F), w = 2;
            int b = cp < 512 ? map[cp] : -1;
            if (b < 0)
                for (size_t q = 0; q < w && o < sizeof buf; q++)
                    buf[o++] = s.ptr[k + q];
            else
                buf[o++] = (char)b;
            k += w;
        }
        if (type == 3 && s.len == 10 && !memcmp(s.ptr, "<|im_end|>", 10)) *eog = (int32_t)i;
        vocab_add(v, buf, type == 3 ? 0 : o);
    }
    gguf_close(g);
    return *eog >= 0;
}

/* On the real 152k-token vocabulary: the trie mask agrees with stepping each token's bytes
 * through the same state, and with a fresh clone for a sample of tokens. */
static void test_mask_on_qwen2_vocab(void **state)
{
    (void)state;
    struct test_vocab v;
    int32_t eog;
    if (!load_qwen2(&v, &eog)) {
        vocab_release(&v);
        printf("skip: ../shared/models/vocab/ggml-vocab-qwen2.gguf not available\n");
        skip();
    }
    struct grammar_vocab_params p = {(const char *const *)v.piece, v.len, v.n, &eog, 1};
    struct grammar_vocab *gv;
    assert_int_equal(grammar_vocab_new(&p, &gv), ERR_OK);
    struct gbnf *g = compile_ok(json_gbnf);
    struct grammar_state *st;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    uint32_t *mask = calloc(grammar_vocab_mask_words(gv), sizeof *mask);
    assert_non_null(mask);
    static const char *steps[] = {"{\"",       "na\xe4\xb8", "\xad\": [", "1",
                                  "2, \"\xc3", "\xa9",       "\"]}"};
    size_t n_allowed = 0;
    for (size_t i = 0; i <= sizeof steps / sizeof *steps; i++) {
        assert_int_equal(grammar_mask(st, gv, mask), ERR_OK);
        for (size_t id = 0; id < v.n; id++) {
            bool got = mask[id / 32] >> (id % 32) & 1, want;
            assert_int_equal(grammar_state_allows_token(st, gv, (int32_t)id, &want), ERR_OK);
            if (got != want)
                print_error("step %zu token %zu: mask %d, allows %d\n", i, id, got, want);
            assert_true(got == want);
            n_allowed += got;
            if (id % 397 == 0 && v.len[id] > 0) { // an independent check on a sample
                struct grammar_state *c;
                assert_int_equal(grammar_state_clone(st, &c), ERR_OK);
                assert_true(got ==
                            (grammar_state_accept_bytes(c, v.piece[id], v.len[id]) == ERR_OK));
                grammar_state_free(c);
            }
        }
        if (i < sizeof steps / sizeof *steps)
            assert_int_equal(grammar_state_accept_bytes(st, steps[i], strlen(steps[i])), ERR_OK);
    }
    assert_true(mask[eog / 32] >> (eog % 32) & 1); // the document is complete
    assert_true(n_allowed > 100000);
    free(mask);
    grammar_state_free(st);
    gbnf_free(g);
    grammar_vocab_free(gv);
    vocab_release(&v);
}

/* Mutated grammars and random input: every outcome is an error code or a working state. */
static void test_mutations_never_crash(void **state)
{
    (void)state;
    static const char alphabet[] = "\"[]()|*+?{},.^-\\#\n ::=axroot0123456789";
    struct test_vocab v;
    vocab_make(&v, 11);
    struct grammar_vocab *gv = vocab_build(&v);
    uint32_t *mask = calloc(grammar_vocab_mask_words(gv), sizeof *mask);
    assert_non_null(mask);
    size_t n_src = strlen(json_gbnf);
    char *src = malloc(n_src + 1);
    assert_non_null(src);
    srand(42);
    int n_ok = 0;
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(src, json_gbnf, n_src + 1);
        size_t len = n_src;
        for (int m = 0; m < 1 + iter % 4; m++) {
            size_t at = (size_t)rand() % len;
            if (rand() % 3 == 0 && len > 1) // delete a byte
                memmove(src + at, src + at + 1, len-- - at);
            else
                src[at] = rand() % 8 ? alphabet[rand() % (int)(sizeof alphabet - 1)]
                                     : (char)(rand() % 256);
        }
        struct gbnf *g = NULL;
        struct errmsg e = {{0}};
        int rc = gbnf_compile(src, len, &g, &e);
        if (rc != ERR_OK) {
            assert_true(rc == ERR_FORMAT || rc == ERR_LIMIT || rc == ERR_UNSUPPORTED);
            assert_true(e.msg[0] != '\0');
            continue;
        }
        n_ok++;
        struct grammar_state *st;
        rc = grammar_state_new(g, &st);
        if (rc == ERR_OK) {
            for (int k = 0; k < 20; k++) {
                char in[4];
                for (int b = 0; b < 4; b++)
                    in[b] = alphabet[rand() % (int)(sizeof alphabet - 1)];
                rc = grammar_state_accept_bytes(st, in, 1 + (size_t)(rand() % 4));
                assert_true(rc == ERR_OK || rc == ERR_INVALID || rc == ERR_LIMIT);
            }
            rc = grammar_mask(st, gv, mask);
            assert_true(rc == ERR_OK || rc == ERR_LIMIT);
            grammar_state_free(st);
        } else {
            assert_int_equal(rc, ERR_LIMIT);
        }
        gbnf_free(g);
    }
    assert_true(n_ok > 100); // the loop did exercise the matcher
    free(src);
    free(mask);
    grammar_vocab_free(gv);
    vocab_release(&v);
}

/* A lead byte and a continuation that can only form a surrogate (ED A0..BF) must be refused
 * at the continuation: no byte could complete it, and accepting it left sampling with no
 * allowed token. */
static void test_surrogate_prefix_rejected(void **state)
{
    (void)state;
    const char src[] = "root ::= \"\\\"\" [^\"]* \"\\\"\"";
    struct gbnf *g = NULL;
    struct errmsg err;
    assert_int_equal(gbnf_compile(src, sizeof src - 1, &g, &err), ERR_OK);
    struct grammar_state *st = NULL;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    assert_int_equal(grammar_state_accept_bytes(st, "\"\xed", 2), ERR_OK); // U+D000..U+D7FF ok
    assert_int_equal(grammar_state_accept_bytes(st, "\xa5", 1), ERR_INVALID);
    assert_int_equal(grammar_state_accept_bytes(st, "\x9f\xbf", 2), ERR_OK); // U+D7FF
    assert_int_equal(grammar_state_accept_bytes(st, "\xed\xa0\x80", 3), ERR_INVALID);
    assert_int_equal(grammar_state_accept_bytes(st, "\"", 1), ERR_OK);
    assert_true(grammar_state_can_end(st));
    grammar_state_free(st);
    gbnf_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_surrogate_prefix_rejected),
        cmocka_unit_test(test_literals_and_alternation),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_classes_and_any),
        cmocka_unit_test(test_repetitions),
        cmocka_unit_test(test_rules_groups_comments),
        cmocka_unit_test(test_syntax_errors_have_positions),
        cmocka_unit_test(test_semantic_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_pathological_grammar_is_bounded),
        cmocka_unit_test(test_utf8_split_and_state_unchanged_on_reject),
        cmocka_unit_test(test_json_grammar),
        cmocka_unit_test(test_mask_matches_brute_force),
        cmocka_unit_test(test_mask_code_point_classes),
        cmocka_unit_test(test_eog_and_tokens),
        cmocka_unit_test(test_mask_on_qwen2_vocab),
        cmocka_unit_test(test_compile_alloc_failures),
        cmocka_unit_test(test_mutations_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
