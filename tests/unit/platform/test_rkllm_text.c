/* platform/rockchip/rkllm_text: callback text joined into whole characters for both runtime
 * behaviours — NORMAL carrying only the rest of a character held from WAITING, and NORMAL
 * sending held bytes again (all of them, or only the split character) — with a character the
 * runtime gave up on dropped and nothing doubled. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "platform/rockchip/rkllm_text.h"

#include "util/err.h"

#include <string.h>

struct step {
    const char *text;
    bool is_waiting;
};

/* Feeds steps through one held buffer and returns what came out (static, NUL-terminated). */
static const char *feed(const struct step *steps, size_t n)
{
    static char result[256];
    struct buf held, out;
    buf_init(&held);
    buf_init(&out);
    for (size_t i = 0; i < n; i++) {
        const char *t = steps[i].text;
        assert_int_equal(rkllm_text_take(&held, t, t ? strlen(t) : 0, steps[i].is_waiting, &out),
                         ERR_OK);
    }
    assert_true(out.len < sizeof result);
    memcpy(result, out.data ? out.data : "", out.len);
    result[out.len] = '\0';
    buf_deinit(&held);
    buf_deinit(&out);
    return result;
}

#define FEED(...)                                                                                  \
    feed((const struct step[]){__VA_ARGS__},                                                       \
         sizeof((const struct step[]){__VA_ARGS__}) / sizeof(struct step))

static void rest_only_is_prepended(void **state)
{
    (void)state;
    assert_string_equal(FEED({"caf", false}, {"\xC3", true}, {"\xA9 ok", false}), "café ok");
    // Two WAITINGs in a row, each with the next byte only.
    assert_string_equal(FEED({"\xE2", true}, {"\x82", true}, {"\xAC!", false}), "€!");
}

static void a_resend_of_every_held_byte_is_not_doubled(void **state)
{
    (void)state;
    assert_string_equal(FEED({"Hi ", false}, {"caf\xC3", true}, {"caf\xC3\xA9 ", false}),
                        "Hi café ");
    // WAITINGs that re-send too, then the whole character.
    assert_string_equal(FEED({"\xE2", true}, {"\xE2\x82", true}, {"\xE2\x82\xAC", false}), "€");
}

static void a_resend_of_the_split_character_keeps_whole_ones(void **state)
{
    (void)state;
    // The held whole characters ("x") are not repeated; the split one is.
    assert_string_equal(FEED({"x\xF0\x9F", true}, {"\xF0\x9F\x98\x80", false}), "x😀");
}

static void an_abandoned_character_is_dropped(void **state)
{
    (void)state;
    assert_string_equal(FEED({"ab\xC3", true}, {"cd", false}), "abcd");
    // A held text of whole characters stays unless all of it is sent again.
    assert_string_equal(FEED({"ab", true}, {"b c", false}), "abb c");
    assert_string_equal(FEED({"ab", true}, {"ab c", false}), "ab c");
}

static void empty_texts_and_finish(void **state)
{
    (void)state;
    assert_string_equal(FEED({"caf\xC3", true}, {NULL, false}), "caf\xC3");
    assert_string_equal(FEED({"", true}, {"", false}, {"a", false}), "a");
}

static void incomplete_tail(void **state)
{
    (void)state;
    assert_int_equal(rkllm_text_incomplete_tail((const unsigned char *)"ab", 2), 0);
    assert_int_equal(rkllm_text_incomplete_tail((const unsigned char *)"a\xC3", 2), 1);
    assert_int_equal(rkllm_text_incomplete_tail((const unsigned char *)"\xE2\x82", 2), 2);
    assert_int_equal(rkllm_text_incomplete_tail((const unsigned char *)"\xE2\x82\xAC", 3), 0);
    assert_int_equal(rkllm_text_incomplete_tail((const unsigned char *)"\xF0\x9F\x98", 3), 3);
    assert_int_equal(rkllm_text_incomplete_tail((const unsigned char *)"", 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rest_only_is_prepended),
        cmocka_unit_test(a_resend_of_every_held_byte_is_not_doubled),
        cmocka_unit_test(a_resend_of_the_split_character_keeps_whole_ones),
        cmocka_unit_test(an_abandoned_character_is_dropped),
        cmocka_unit_test(empty_texts_and_finish),
        cmocka_unit_test(incomplete_tail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
