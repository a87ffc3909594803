/* text/json_schema: every supported keyword accepts and rejects sample documents, fed through
 * the compiled grammar byte by byte; unsupported keywords fail naming keyword and path. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "text/grammar/gbnf.h"
#include "text/grammar/grammar.h"
#include "text/grammar/json_schema.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!j) print_error("bad test JSON: %s (%s)\n", je.text, text);
    assert_non_null(j);
    return j;
}

static struct gbnf *compile_schema(const char *schema_text)
{
    json_t *schema = load(schema_text);
    struct errmsg e = {{0}};
    struct gbnf *g = NULL;
    int rc = json_schema_compile(schema, &g, &e);
    if (rc != ERR_OK) {
        struct buf b;
        buf_init(&b);
        json_schema_to_gbnf(schema, &b, NULL);
        print_error("schema %s failed: %s\n%s\n", schema_text, e.msg, b.data ? b.data : "");
        buf_deinit(&b);
    }
    json_decref(schema);
    assert_int_equal(rc, ERR_OK);
    return g;
}

static bool doc_matches(const struct gbnf *g, const char *doc)
{
    struct grammar_state *st;
    assert_int_equal(grammar_state_new(g, &st), ERR_OK);
    bool ok = true;
    for (size_t i = 0; doc[i] && ok; i++)
        ok = grammar_state_accept_bytes(st, doc + i, 1) == ERR_OK;
    ok = ok && grammar_state_can_end(st);
    grammar_state_free(st);
    return ok;
}

/* docs: NULL-terminated list, each prefixed '+' (must match) or '-' (must not). */
static void check_docs(const char *schema, const char *const *docs)
{
    struct gbnf *g = compile_schema(schema);
    for (const char *const *d = docs; *d; d++) {
        bool want = (*d)[0] == '+', got = doc_matches(g, *d + 1);
        if (got != want) print_error("schema %s, doc %s: got %d\n", schema, *d + 1, got);
        assert_true(got == want);
    }
    gbnf_free(g);
}

static void expect_fail(const char *schema_text, int code, const char *fragment)
{
    json_t *schema = load(schema_text);
    struct errmsg e = {{0}};
    struct gbnf *g = NULL;
    int rc = json_schema_compile(schema, &g, &e);
    json_decref(schema);
    if (rc != code || !strstr(e.msg, fragment))
        print_error("schema %s: got %d '%s', want %d '%s'\n", schema_text, rc, e.msg, code,
                    fragment);
    assert_int_equal(rc, code);
    assert_null(g);
    assert_non_null(strstr(e.msg, fragment));
}

static void test_primitive_types(void **state)
{
    (void)state;
    check_docs("{\"type\": \"string\"}",
               (const char *[]){"+\"\"", "+\"a b\\n\\u00e9\\\"\"", "+\"\xc3\xa9\"", "-\"a",
                                "-\"\\x\"", "-\"\x01\"", "-12", NULL});
    check_docs("{\"type\": \"number\"}", (const char *[]){"+0", "+-1.5", "+3e10", "+2.25E-3", "-01",
                                                          "-.5", "-1.", "-+1", "-\"1\"", NULL});
    check_docs("{\"type\": \"integer\"}",
               (const char *[]){"+0", "+-42", "+1234567890123456", "-1.0", "-00", "-1e3", NULL});
    check_docs("{\"type\": \"boolean\"}",
               (const char *[]){"+true", "+false", "-null", "-tru", NULL});
    check_docs("{\"type\": \"null\"}", (const char *[]){"+null", "-false", NULL});
    check_docs("{\"type\": [\"string\", \"null\"]}",
               (const char *[]){"+null", "+\"x\"", "-1", NULL});
    check_docs("{}", (const char *[]){"+1", "+{\"a\": [true, null]}", "+\"s\"", "-{", NULL});
    check_docs("true", (const char *[]){"+[]", NULL});
}

static void test_objects(void **state)
{
    (void)state;
    const char *s = "{\"type\": \"object\", \"properties\": {\"b\": {\"type\": \"integer\"}, "
                    "\"a\": {\"type\": \"string\"}, \"c\": {\"type\": \"boolean\"}}, "
                    "\"required\": [\"a\"]}";
    check_docs(s, (const char *[]){"+{\"a\": \"x\"}", "+{\"a\":\"x\",\"b\":1}",
                                   "+{ \"a\" : \"x\", \"b\": 1, \"c\": true }",
                                   "+{\"a\": \"x\", \"c\": false}",
                                   "+{\n  \"a\": \"x\",\n  \"b\": 2\n}",
                                   "-{\"b\": 1, \"a\": \"x\"}", // required first, then schema order
                                   "-{\"a\": \"x\", \"c\": true, \"b\": 1}", "-{}", "-{\"a\": 1}",
                                   "-{\"a\": \"x\", \"d\": 1}", // no additionalProperties: none
                                   "-{\"a\": \"x\", \"a\": \"y\"}",
                                   "-{\"a\": \"x\"     }", // more than one blank
                                   NULL});
    check_docs("{\"type\": \"object\"}",
               (const char *[]){"+{}", "+{\"any\": [1, {\"x\": null}]}", "-[]", NULL});
    check_docs("{\"type\": \"object\", \"additionalProperties\": false}",
               (const char *[]){"+{}", "+{ }", "-{\"a\": 1}", NULL});
    check_docs("{\"properties\": {\"x\": {\"type\": \"null\"}}, \"additionalProperties\": "
               "{\"type\": \"integer\"}}",
               (const char *[]){"+{}", "+{\"x\": null}", "+{\"x\": null, \"y\": 1, \"zz\": 2}",
                                "+{\"y\": 1}", "+{\"xy\": 3}", "+{\"\": 3}", "-{\"y\": \"s\"}",
                                "-{\"x\": 1}", "-{\"y\": 1, \"x\": null}", NULL});
    check_docs("{\"type\": \"object\", \"additionalProperties\": true, \"properties\": "
               "{\"k\": {\"const\": 1}}, \"required\": [\"k\"]}",
               (const char *[]){"+{\"k\": 1}", "+{\"k\": 1, \"o\": [\"v\"]}", "-{\"o\": 1}",
                                "-{\"k\": 1, \"k\": 1}", NULL});
    // required names without a property schema take any value
    check_docs("{\"type\": \"object\", \"required\": [\"z\"]}",
               (const char *[]){"+{\"z\": [1]}", "-{}", NULL});
    // a property whose schema is false must not appear
    check_docs("{\"properties\": {\"a\": false, \"b\": {\"type\": \"null\"}}}",
               (const char *[]){"+{\"b\": null}", "-{\"a\": 1}", NULL});
}

static void test_arrays(void **state)
{
    (void)state;
    check_docs(
        "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}}",
        (const char *[]){"+[]", "+[1]", "+[1, 2,3]", "+[ 1 ]", "-[1,]", "-[\"a\"]", "-[", NULL});
    check_docs("{\"type\": \"array\", \"items\": {\"type\": \"null\"}, \"minItems\": 2, "
               "\"maxItems\": 3}",
               (const char *[]){"-[null]", "+[null, null]", "+[null,null,null]",
                                "-[null, null, null, null]", "-[]", NULL});
    check_docs("{\"type\": \"array\", \"maxItems\": 1}",
               (const char *[]){"+[]", "+[{}]", "-[1, 2]", NULL});
    check_docs("{\"type\": \"array\", \"items\": false}", (const char *[]){"+[]", "-[1]", NULL});
    check_docs(
        "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\"}, {\"type\": "
        "\"number\"}]}",
        (const char *[]){"+[\"a\", 1.5]", "-[\"a\"]", "-[1, \"a\"]", "-[\"a\", 1, 2]", NULL});
    check_docs("{\"type\": \"array\"}", (const char *[]){"+[]", "+[1, \"a\", [null]]", NULL});
    check_docs("{\"type\": \"array\", \"uniqueItems\": false}", (const char *[]){"+[1, 1]", NULL});
    expect_fail("{\"prefixItems\": [{}, {}], \"maxItems\": 1}", ERR_UNSUPPORTED, "prefixItems");
}

static void test_enum_const_unions(void **state)
{
    (void)state;
    check_docs("{\"enum\": [\"red\", 1, null, {\"a\": [true]}]}",
               (const char *[]){"+\"red\"", "+1", "+null", "+{\"a\":[true]}", "-\"blue\"", "-2",
                                "-{\"a\": [true]}", NULL});
    check_docs("{\"const\": \"he said \\\"hi\\\"\"}",
               (const char *[]){"+\"he said \\\"hi\\\"\"", "-\"he said hi\"", NULL});
    check_docs("{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"array\", \"items\": {\"type\": "
               "\"string\"}}]}",
               (const char *[]){"+3", "+[\"a\"]", "-[3]", "-\"a\"", NULL});
    check_docs("{\"oneOf\": [{\"const\": true}, {\"type\": \"null\"}]}",
               (const char *[]){"+true", "+null", "-false", NULL});
    check_docs(
        "{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": "
        "[\"a\"]}, {\"$ref\": \"#/$defs/b\"}], \"$defs\": {\"b\": {\"type\": \"object\", "
        "\"properties\": {\"b\": {\"type\": \"string\"}}, \"required\": [\"b\"]}}}",
        (const char *[]){"+{\"a\": 1, \"b\": \"x\"}", "-{\"a\": 1}", "-{\"b\": \"x\"}", NULL});
    check_docs("{\"allOf\": [{\"type\": \"string\"}]}", (const char *[]){"+\"s\"", "-1", NULL});
}

static void test_refs(void **state)
{
    (void)state;
    const char *tree = "{\"$ref\": \"#/definitions/node\", \"definitions\": {\"node\": {\"type\": "
                       "\"object\", \"properties\": {\"v\": {\"type\": \"integer\"}, \"kids\": "
                       "{\"type\": \"array\", \"items\": {\"$ref\": \"#/definitions/node\"}}}, "
                       "\"required\": [\"v\"]}}}";
    check_docs(tree,
               (const char *[]){"+{\"v\": 1}", "+{\"v\": 1, \"kids\": [{\"v\": 2, \"kids\": []}]}",
                                "-{\"v\": 1, \"kids\": [{}]}", NULL});
    check_docs("{\"type\": \"object\", \"properties\": {\"self\": {\"$ref\": \"#\"}}}",
               (const char *[]){"+{}", "+{\"self\": {\"self\": {}}}", "-{\"self\": 1}", NULL});
    check_docs("{\"$defs\": {\"a~b\": {\"type\": \"null\"}}, \"$ref\": \"#/$defs/a~0b\"}",
               (const char *[]){"+null", NULL});
    expect_fail("{\"$ref\": \"#/$defs/missing\"}", ERR_INVALID, "cannot resolve");
    expect_fail("{\"$ref\": \"https://example.com/s.json\"}", ERR_UNSUPPORTED, "'$ref' at /");
}

static void test_strings(void **state)
{
    (void)state;
    check_docs("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
               (const char *[]){"-\"a\"", "+\"ab\"", "+\"a\\nb\"", "+\"\xc3\xa9\xc3\xa9\"",
                                "-\"abcd\"", NULL});
    check_docs("{\"type\": \"string\", \"format\": \"date\"}",
               (const char *[]){"+\"2024-02-29\"", "-\"2024-13-01\"", "-\"2024-1-01\"", NULL});
    check_docs(
        "{\"type\": \"string\", \"format\": \"time\"}",
        (const char *[]){"+\"23:59:01Z\"", "+\"10:00:00.123+02:00\"", "-\"24:00:00Z\"", NULL});
    check_docs("{\"type\": \"string\", \"format\": \"date-time\"}",
               (const char *[]){"+\"2024-01-31T12:00:00Z\"", "-\"2024-01-31 12:00:00Z\"", NULL});
    check_docs("{\"type\": \"string\", \"format\": \"uuid\"}",
               (const char *[]){"+\"123e4567-e89b-12d3-a456-426614174000\"",
                                "-\"123e4567e89b12d3a456426614174000\"", NULL});
}

static void test_patterns(void **state)
{
    (void)state;
    check_docs("{\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-\\\\d{3,4}$\"}",
               (const char *[]){"+\"AB-123\"", "+\"XY-1234\"", "-\"AB-12\"", "-\"ab-123\"",
                                "-\"AB-12345\"", NULL});
    check_docs("{\"pattern\": \"^(cat|dog)s?(?:!)*$\"}",
               (const char *[]){"+\"cat\"", "+\"dogs!!\"", "-\"cow\"", "-\"cats?\"", NULL});
    check_docs(
        "{\"pattern\": \"^[^a-z\\\\\\\\]+\\\\.$\"}", // ^[^a-z\\]+\.$
        (const char *[]){"+\"AB.\"", "+\"\\\"\\n.\"", "-\"a.\"", "-\"\\\\.\"", "-\"A\"", NULL});
    check_docs("{\"pattern\": \"b+\"}", // unanchored: anything around it
               (const char *[]){"+\"abc\"", "+\"b\"", "-\"ac\"", NULL});
    check_docs(
        "{\"pattern\": \"^\\\\w\\\\s.$\"}",
        (const char *[]){"+\"_ x\"", "+\"a\\tb\"", "+\"a\\nb\"", "-\"a \\n\"", "-\"- x\"", NULL});
    check_docs("{\"pattern\": \"^\\u007f\\u0001\\u0000\\u001f$\"}", // JSON escapes what it must
               (const char *[]){"+\"\x7f\\u0001\\u0000\\u001F\"", "+\"\x7f\\u0001\\u0000\\u001f\"",
                                "-\"\x7f\x01\\u0000\\u001f\"", NULL});
    expect_fail("{\"pattern\": \"^(a*)*$\"}", ERR_UNSUPPORTED, "cannot be used as a grammar");
    expect_fail("{\"pattern\": \"^[^\\\\s\\\\S]$\"}", ERR_UNSUPPORTED, "can match nothing");
    expect_fail("{\"pattern\": \"^a(?=b)$\"}", ERR_UNSUPPORTED, "pattern");
    expect_fail("{\"pattern\": \"^a\\\\bc$\"}", ERR_UNSUPPORTED, "unsupported escape");
    expect_fail("{\"pattern\": \"^a$b$\"}", ERR_UNSUPPORTED, "anchor");
    expect_fail("{\"pattern\": \"^(a$\"}", ERR_UNSUPPORTED, "unbalanced");
}

static void test_integer_bounds(void **state)
{
    (void)state;
    check_docs("{\"type\": \"integer\", \"minimum\": 7, \"maximum\": 123}",
               (const char *[]){"+7", "+9", "+10", "+99", "+100", "+119", "+123", "-6", "-0",
                                "-124", "-130", "-200", "-007", "--7", NULL});
    check_docs("{\"type\": \"integer\", \"minimum\": -15, \"exclusiveMaximum\": 5}",
               (const char *[]){"+-15", "+-9", "+0", "+4", "-5", "--16", "--0", NULL});
    check_docs("{\"type\": \"integer\", \"exclusiveMinimum\": 99}",
               (const char *[]){"-99", "+100", "+123456", "-12", NULL});
    check_docs("{\"type\": \"integer\", \"maximum\": -3}",
               (const char *[]){"+-3", "+-1000", "--2", "-0", "-3", NULL});
    check_docs("{\"type\": \"integer\", \"minimum\": 0}",
               (const char *[]){"+0", "+5", "+9999", "--1", NULL});
    check_docs("{\"type\": \"integer\", \"minimum\": 1.5, \"maximum\": 2.5}",
               (const char *[]){"+2", "-1", "-3", NULL});
    // exhaustive against the arithmetic on a small window
    struct gbnf *g =
        compile_schema("{\"type\": \"integer\", \"minimum\": -123, \"maximum\": 1005}");
    for (int v = -1500; v <= 1500; v++) {
        char doc[16];
        snprintf(doc, sizeof doc, "%d", v);
        assert_true(doc_matches(g, doc) == (v >= -123 && v <= 1005));
    }
    gbnf_free(g);
    expect_fail("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", ERR_INVALID, "minimum");
}

static void test_number_bounds(void **state)
{
    (void)state;
    static const struct {
        const char *schema;
        double lo, hi;
    } cases[] = {
        {"{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}", 0, 1},
        {"{\"type\": \"number\", \"minimum\": -3, \"maximum\": 12}", -3, 12},
        {"{\"type\": \"number\", \"minimum\": -20, \"maximum\": -2}", -20, -2},
        {"{\"type\": \"number\", \"minimum\": 5}", 5, 1e300},
        {"{\"type\": \"number\", \"maximum\": -1}", -1e300, -1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct gbnf *g = compile_schema(cases[k].schema);
        for (int q = -100; q <= 100; q++) { // quarters from -25 to 25
            char doc[32];
            double x = q / 4.0;
            snprintf(doc, sizeof doc, q % 4 ? "%.2f" : "%.0f", x);
            bool want = x >= cases[k].lo && x <= cases[k].hi;
            if (doc_matches(g, doc) != want) print_error("%s: %s\n", cases[k].schema, doc);
            assert_true(doc_matches(g, doc) == want);
        }
        gbnf_free(g);
    }
    check_docs("{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}",
               (const char *[]){"+1.000", "+0.999", "+0", "-1.001", "-1e0", "-01", NULL});
    expect_fail("{\"type\": \"number\", \"exclusiveMinimum\": 0}", ERR_UNSUPPORTED,
                "'exclusiveMinimum' at /");
}

static void test_unsupported_keywords_name_path(void **state)
{
    (void)state;
    expect_fail(
        "{\"type\": \"object\", \"properties\": {\"a\": {\"not\": {\"type\": \"string\"}}}}",
        ERR_UNSUPPORTED, "'not' at /properties/a");
    expect_fail("{\"if\": {}, \"then\": {}}", ERR_UNSUPPORTED, "'if' at /");
    expect_fail("{\"type\": \"object\", \"patternProperties\": {\"^x\": {}}}", ERR_UNSUPPORTED,
                "patternProperties");
    expect_fail("{\"type\": \"array\", \"items\": {\"type\": \"integer\", \"multipleOf\": 2}}",
                ERR_UNSUPPORTED, "'multipleOf' at /items");
    expect_fail("{\"type\": \"array\", \"uniqueItems\": true}", ERR_UNSUPPORTED, "uniqueItems");
    expect_fail("{\"type\": \"string\", \"format\": \"hostname\"}", ERR_UNSUPPORTED, "hostname");
    expect_fail("{\"type\": \"number\", \"minimum\": 0.5}", ERR_UNSUPPORTED, "non-integer");
    expect_fail("{\"anyOf\": [{\"type\": \"string\"}, {\"minProperties\": 1}]}", ERR_UNSUPPORTED,
                "'minProperties' at /anyOf/1");
    expect_fail("{\"$defs\": {\"x\": {\"uniqueItems\": true}}, \"$ref\": \"#/$defs/x\"}",
                ERR_UNSUPPORTED, "at /$defs/x");
    expect_fail("{\"$ref\": \"#/$defs/x\", \"type\": \"string\", \"$defs\": {\"x\": {}}}",
                ERR_UNSUPPORTED, "'type' at / is not supported: together with '$ref'");
    expect_fail("{\"type\": \"array\", \"maxItems\": 5000}", ERR_UNSUPPORTED, "maxItems");
    expect_fail("{\"allOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}]}", ERR_UNSUPPORTED,
                "allOf");
    expect_fail("{\"type\": \"strin\"}", ERR_INVALID, "unknown type");
    expect_fail("{\"type\": \"object\", \"properties\": []}", ERR_INVALID, "properties");
    expect_fail("{\"enum\": []}", ERR_INVALID, "enum");
    expect_fail("false", ERR_INVALID, "false");
    expect_fail("3", ERR_INVALID, "must be an object");
    // annotations are ignored
    check_docs("{\"title\": \"T\", \"description\": \"d\", \"$schema\": \"x\", \"$id\": \"y\", "
               "\"default\": 1, \"examples\": [1], \"type\": \"integer\"}",
               (const char *[]){"+1", NULL});
}

static void test_limits(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    for (int i = 0; i < 100; i++)
        assert_int_equal(buf_append_cstr(&b, "{\"type\": \"array\", \"items\": "), ERR_OK);
    assert_int_equal(buf_append_cstr(&b, "{}"), ERR_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(buf_append_byte(&b, '}'), ERR_OK);
    expect_fail(b.data, ERR_LIMIT, "deeper");
    buf_deinit(&b);
}

static void test_any_object(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    assert_int_equal(json_schema_any_object_gbnf(&b), ERR_OK);
    struct gbnf *g = NULL;
    assert_int_equal(gbnf_compile(b.data, b.len, &g, NULL), ERR_OK);
    assert_true(doc_matches(g, "{\"a\": [1, {\"b\": \"c\"}], \"d\": -2.5e3}"));
    assert_true(doc_matches(g, "{}"));
    assert_false(doc_matches(g, "[]"));
    assert_false(doc_matches(g, "\"x\""));
    assert_false(doc_matches(g, "{\"a\": 1,}"));
    gbnf_free(g);
    buf_deinit(&b);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    json_t *schema = load("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", "
                          "\"pattern\": \"^[a-c]+$\"}, \"b\": {\"$ref\": \"#/$defs/i\"}}, "
                          "\"additionalProperties\": {\"type\": \"integer\", \"minimum\": 3}, "
                          "\"$defs\": {\"i\": {\"type\": \"array\", \"maxItems\": 2}}}");
    int64_t live = mem_live_count();
    for (int64_t n = 0;; n++) {
        struct gbnf *g = NULL;
        mem_fail_after(n);
        int rc = json_schema_compile(schema, &g, NULL);
        mem_fail_after(-1);
        gbnf_free(g);
        assert_int_equal(mem_live_count(), live);
        if (rc == ERR_OK) break;
        assert_int_equal(rc, ERR_NOMEM);
    }
    json_decref(schema);
}

/* A schema of n properties, all required, each a $ref to a def of its own, with additional
 * properties allowed (so the key rule spells every name out). */
static json_t *wide_schema(int n)
{
    json_t *props = json_object(), *req = json_array(), *defs = json_object();
    for (int i = 0; i < n; i++) {
        char name[32], ref[48];
        snprintf(name, sizeof name, "p%d", i);
        snprintf(ref, sizeof ref, "#/$defs/d%d", i);
        json_object_set_new(props, name, json_pack("{s:s}", "$ref", ref));
        json_array_append_new(req, json_string(name));
        snprintf(name, sizeof name, "d%d", i);
        json_object_set_new(defs, name, json_pack("{s:s}", "type", "integer"));
    }
    return json_pack("{s:s, s:o, s:o, s:o, s:b}", "type", "object", "properties", props, "required",
                     req, "$defs", defs, "additionalProperties", 1);
}

static double convert_cpu_s(int n, size_t *len)
{
    json_t *schema = wide_schema(n);
    struct buf b;
    buf_init(&b);
    struct errmsg e = {{0}};
    clock_t t0 = clock();
    int rc = json_schema_to_gbnf(schema, &b, &e);
    if (rc != ERR_OK) print_error("%d properties: %s\n", n, e.msg);
    assert_int_equal(rc, ERR_OK);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    *len = b.len;
    buf_deinit(&b);
    json_decref(schema);
    return s;
}

/* Required names, $refs and the not-a-declared-name key rule used to scan every name for
 * each name: 4n properties must cost about 4x n (process CPU time, so a busy machine does not
 * matter), far from the 16x of a quadratic conversion. */
static void test_wide_objects_are_linear(void **state)
{
    (void)state;
    size_t len_n, len_4n;
    convert_cpu_s(500, &len_n); // warm the allocator
    double t_n = convert_cpu_s(2500, &len_n), t_4n = convert_cpu_s(10000, &len_4n);
    print_message("figure: schema conversion CPU 2500 props %.3f s, 10000 props %.3f s\n", t_n,
                  t_4n);
    assert_true(len_4n > 3 * len_n && len_4n < 5 * len_n);
    assert_true(t_4n < 8 * t_n + 0.1);
    // the key rule still refuses exactly the declared names
    check_docs("{\"type\": \"object\", \"properties\": {\"ab\": {\"type\": \"string\"}, \"a\": {}, "
               "\"b\": {}, \"abc\": {}}, "
               "\"required\": [\"b\", \"b\"], \"additionalProperties\": {\"type\": \"integer\"}}",
               (const char *[]){"+{\"b\": 1}", "+{\"b\": 1, \"abd\": 2}", "+{\"b\": 1, \"c\": 2}",
                                "+{\"b\": 1, \"a\": 1}", "+{\"b\": 1, \"ab\": \"x\"}",
                                "-{\"b\": 1, \"ab\": 2}", "-{\"b\": 1, \"b\": 2}", "-{}", NULL});
    // a required name missing from properties is added once, however often it is listed
    check_docs("{\"type\": \"object\", \"required\": [\"x\", \"x\"]}",
               (const char *[]){"+{\"x\": 1}", "-{\"x\": 1, \"x\": 2}", NULL});
}

static int n_polls;
static bool cancel_after_two(void)
{
    return ++n_polls > 2;
}

/* A conversion polls its caller and stops with ERR_CANCELLED. */
static void test_cancel(void **state)
{
    (void)state;
    json_t *schema = wide_schema(5000);
    struct buf b;
    buf_init(&b);
    struct errmsg e = {{0}};
    n_polls = 0;
    assert_int_equal(json_schema_to_gbnf_cancel(schema, cancel_after_two, &b, &e), ERR_CANCELLED);
    assert_int_equal(n_polls, 3);
    assert_non_null(strstr(e.msg, "cancelled"));
    buf_clear(&b);
    assert_int_equal(json_schema_to_gbnf_cancel(schema, NULL, &b, &e), ERR_OK);
    buf_deinit(&b);
    json_decref(schema);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primitive_types),
        cmocka_unit_test(test_objects),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_enum_const_unions),
        cmocka_unit_test(test_refs),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_integer_bounds),
        cmocka_unit_test(test_number_bounds),
        cmocka_unit_test(test_unsupported_keywords_name_path),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_any_object),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_wide_objects_are_linear),
        cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
