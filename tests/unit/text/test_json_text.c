/* text/json_text: JSON text whose reals read back exactly in the fewest digits, and floats
 * shown by their shortest decimal. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "text/json_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The compact text of j (consumed). */
static void expect_text(json_t *j, const char *want)
{
    char *text = json_text_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(text);
    assert_string_equal(text, want);
    // and it reads back as the same document
    json_t *back = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_true(json_equal(back, j));
    json_decref(back);
    free(text);
    json_decref(j);
}

static void test_short_reals(void **state)
{
    (void)state;
    expect_text(json_pack("[f, f, f, f, i]", 0.1, 0.7, 37.7749, -2.5e-7, 3),
                "[0.1,0.7,37.7749,-2.5e-7,3]");
    expect_text(json_pack("{s:{s:[f]}}", "a", "b", 1e21), "{\"a\":{\"b\":[1e21]}}");
    json_t *empty = json_array();
    assert_int_equal(json_text_precision(empty), 15);
    json_decref(empty);
}

static void test_exact_when_digits_are_needed(void **state)
{
    (void)state;
    // 0.1 + 0.2 needs 17 digits; 1/3 as well: the whole document then uses 17 so nothing changes
    json_t *j = json_pack("[f, f]", 0.1 + 0.2, 0.1);
    assert_int_equal(json_text_precision(j), 17);
    expect_text(j, "[0.30000000000000004,0.10000000000000001]");
    // a value that needs exactly 16
    const double v = 0.9000000000000001;
    json_t *k = json_pack("[f]", v);
    assert_int_equal(json_text_precision(k), 16);
    json_decref(k);
}

static void test_floats_by_shortest_decimal(void **state)
{
    (void)state;
    assert_true(json_text_float(0.8f) == 0.8);
    assert_true(json_text_float(0.95f) == 0.95);
    assert_true(json_text_float(-1.5f) == -1.5);
    assert_true(json_text_float(0.0f) == 0.0);
    assert_true((float)json_text_float(1.17549435e-38f) == 1.17549435e-38f);
    assert_true(isinf(json_text_float(INFINITY)));
    assert_true(isnan(json_text_float(NAN)));
    // every float reads back as itself through its shortest decimal
    for (uint32_t bits = 0x3f000000u; bits < 0x3f000000u + 100000u; bits += 7) {
        float f;
        memcpy(&f, &bits, sizeof f);
        assert_true((float)json_text_float(f) == f);
    }
    expect_text(json_pack("{s:f, s:f}", "temperature", json_text_float(0.8f), "logprob",
                          json_text_float(-0.123456789f)),
                "{\"temperature\":0.8,\"logprob\":-0.12345679}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_reals),
        cmocka_unit_test(test_exact_when_digits_are_needed),
        cmocka_unit_test(test_floats_by_shortest_decimal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
