/* text/stopstr: recorded texts fed under every chunking (all 2- and 3-piece splits and byte by
 * byte) must emit the same text and report the same stop; UTF-8 boundaries; limits. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "text/stopstr.h"
#include "util/buf.h"
#include "util/mem.h"

#include <stdbool.h>
#include <string.h>

struct stop_case {
    const char *text;
    const char *stops[4];
    int n_stops;
    const char *want; // everything emitted, flush included
    int want_index;
};

static const struct stop_case cases[] = {
    {"Hello STOP world", {"</s>", "STOP"}, 2, "Hello ", 1},
    {"no stop here at all", {"###", "User:"}, 2, "no stop here at all", -1},
    {"ends with a partial ST", {"STOP"}, 1, "ends with a partial ST", -1},
    {"Answer: 42\nUser: next", {"\nUser:"}, 1, "Answer: 42", 0},
    {"xabc", {"xabc", "ab"}, 2, "x", 1}, // the match that ends first wins
    {"abc!", {"bc", "abc"}, 2, "", 1},   // same end: the one that starts first
    {"aaab tail", {"aab"}, 1, "a", 0},   // self-overlapping pattern
    {"one <|im_end|> two", {"<|im_end|>", "<|im_start|>"}, 2, "one ", 0},
    {"Größe: 日本語テキスト終わり", {"テキスト"}, 1, "Größe: 日本語", 0},
    {"日本語の文", {"本語X"}, 1, "日本語の文", -1},
    {"STOP at once", {"STOP"}, 1, "", 0},
    {"<<<<", {"<<<<<"}, 1, "<<<<", -1},
};

/* Emitted pieces must never end inside a UTF-8 code point. */
static void assert_utf8_complete(struct str s)
{
    if (s.len == 0) return;
    size_t i = s.len;
    while (i > 0 && ((unsigned char)s.ptr[i - 1] & 0xC0) == 0x80)
        i--;
    assert_true(i > 0);
    unsigned char c = (unsigned char)s.ptr[i - 1];
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    assert_int_equal(s.len - (i - 1), need);
}

/* Feeds text split at the given cut points and checks the outcome. */
static void run_split(const struct stop_case *c, const size_t *cuts, int n_cuts)
{
    struct stopstr *m = NULL;
    assert_int_equal(stopstr_new(c->stops, c->n_stops, &m, NULL), ERR_OK);
    struct buf got;
    buf_init(&got);
    assert_int_equal(buf_append(&got, "", 0), ERR_OK);
    size_t len = strlen(c->text), prev = 0;
    int index = -1;
    for (int k = 0; k <= n_cuts; k++) {
        size_t end = k < n_cuts ? cuts[k] : len;
        struct stopstr_result r;
        assert_int_equal(stopstr_feed(m, c->text + prev, end - prev, &r), ERR_OK);
        assert_utf8_complete(r.emit);
        assert_int_equal(buf_append(&got, r.emit.ptr, r.emit.len), ERR_OK);
        if (r.stop_index >= 0) {
            assert_int_equal(index, -1); // reported once
            index = r.stop_index;
        }
        prev = end;
    }
    struct str tail;
    assert_int_equal(stopstr_flush(m, &tail), ERR_OK);
    assert_int_equal(buf_append(&got, tail.ptr, tail.len), ERR_OK);
    if (strcmp(got.data, c->want) != 0)
        fail_msg("text \"%s\" cut %d times: got \"%s\", want \"%s\"", c->text, n_cuts, got.data,
                 c->want);
    assert_int_equal(index, c->want_index);
    assert_int_equal(stopstr_matched(m), c->want_index);
    assert_int_equal(stopstr_is_stopped(m), c->want_index >= 0);
    buf_deinit(&got);
    stopstr_free(m);
}

static void test_every_two_and_three_piece_split(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct stop_case *c = &cases[k];
        size_t len = strlen(c->text);
        run_split(c, NULL, 0);
        for (size_t i = 0; i <= len; i++) {
            size_t cut1[1] = {i};
            run_split(c, cut1, 1);
            for (size_t j = i; j <= len; j++) {
                size_t cut2[2] = {i, j};
                run_split(c, cut2, 2);
            }
        }
    }
}

static void test_byte_by_byte(void **state)
{
    (void)state;
    size_t cuts[128];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t len = strlen(cases[k].text);
        assert_true(len < 128);
        for (size_t i = 0; i < len; i++)
            cuts[i] = i + 1;
        run_split(&cases[k], cuts, (int)len);
    }
}

static uint64_t rng_next(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* Reference: the first position where some stop string ends (then the earliest start). */
static void reference(const char *text, const char *const *stops, int n_stops, size_t *emit_len,
                      int *index)
{
    size_t len = strlen(text);
    *emit_len = len;
    *index = -1;
    for (size_t end = 1; end <= len && *index < 0; end++) {
        for (int i = 0; i < n_stops; i++) {
            size_t n = strlen(stops[i]);
            if (n && n <= end && memcmp(text + end - n, stops[i], n) == 0 &&
                (*index < 0 || end - n < *emit_len)) {
                *index = i;
                *emit_len = end - n;
            }
        }
    }
}

/* Random texts over a small alphabet (so stop strings overlap and recur) with random stop sets
 * and chunkings agree with the reference. */
static void test_random_against_reference(void **state)
{
    (void)state;
    static const char *alpha[] = {"a", "b", "ab", "é", "日", " ", "\n"};
    uint64_t x = 7;
    char text[64], stop_buf[4][16];
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = 0;
        for (int k = (int)(rng_next(&x) % 20); k > 0; k--) {
            const char *f = alpha[rng_next(&x) % 7];
            memcpy(text + len, f, strlen(f));
            len += strlen(f);
        }
        text[len] = '\0';
        int n_stops = 1 + (int)(rng_next(&x) % 4);
        const char *stops[4];
        for (int i = 0; i < n_stops; i++) {
            size_t sl = 0;
            for (int k = 1 + (int)(rng_next(&x) % 3); k > 0; k--) {
                const char *f = alpha[rng_next(&x) % 7];
                memcpy(stop_buf[i] + sl, f, strlen(f));
                sl += strlen(f);
            }
            stop_buf[i][sl] = '\0';
            stops[i] = stop_buf[i];
        }
        size_t want_len;
        int want_index;
        reference(text, stops, n_stops, &want_len, &want_index);
        char want[64];
        memcpy(want, text, want_len);
        want[want_len] = '\0';
        struct stop_case c = {
            text,
            {stops[0], stops[n_stops > 1], stops[n_stops > 2 ? 2 : 0], stops[n_stops > 3 ? 3 : 0]},
            n_stops,
            want,
            want_index};
        size_t cuts[4];
        int n_cuts = (int)(rng_next(&x) % 4);
        for (int i = 0; i < n_cuts; i++)
            cuts[i] = (i ? cuts[i - 1] : 0) + (len ? rng_next(&x) % (len + 1) : 0) / 2;
        for (int i = 0; i < n_cuts; i++)
            cuts[i] = cuts[i] > len ? len : cuts[i];
        run_split(&c, cuts, n_cuts);
    }
}

static void test_holds_back_only_possible_prefixes(void **state)
{
    (void)state;
    const char *stops[] = {"STOP"};
    struct stopstr *m = NULL;
    assert_int_equal(stopstr_new(stops, 1, &m, NULL), ERR_OK);
    struct stopstr_result r;
    assert_int_equal(stopstr_feed(m, "the ST", 6, &r), ERR_OK);
    assert_int_equal(r.emit.len, 4); // "the "
    assert_memory_equal(r.emit.ptr, "the ", 4);
    assert_int_equal(stopstr_feed(m, "ART", 3, &r), ERR_OK);
    assert_int_equal(r.emit.len, 5); // "START" cannot begin STOP any more
    assert_memory_equal(r.emit.ptr, "START", 5);
    assert_int_equal(stopstr_feed(m, " S", 2, &r), ERR_OK);
    assert_int_equal(r.emit.len, 1);
    assert_int_equal(stopstr_feed(m, "TOP and more", 12, &r), ERR_OK);
    assert_int_equal(r.emit.len, 0);
    assert_int_equal(r.stop_index, 0);
    // Stopped: nothing more comes out.
    assert_int_equal(stopstr_feed(m, "x", 1, &r), ERR_OK);
    assert_int_equal(r.emit.len, 0);
    assert_int_equal(r.stop_index, -1);
    struct str tail;
    assert_int_equal(stopstr_flush(m, &tail), ERR_OK);
    assert_int_equal(tail.len, 0);
    stopstr_free(m);
}

static void test_no_stops_passes_through_but_keeps_utf8_whole(void **state)
{
    (void)state;
    const char *stops[] = {"", ""};
    struct stopstr *m = NULL;
    assert_int_equal(stopstr_new(stops, 2, &m, NULL), ERR_OK);
    struct stopstr_result r;
    const char *t = "a\xc3\xa9"; // "aé"
    assert_int_equal(stopstr_feed(m, t, 2, &r), ERR_OK);
    assert_int_equal(r.emit.len, 1);
    assert_int_equal(stopstr_feed(m, t + 2, 1, &r), ERR_OK);
    assert_int_equal(r.emit.len, 2);
    assert_memory_equal(r.emit.ptr, "\xc3\xa9", 2);
    stopstr_free(m);
}

static void test_limits_and_invalid(void **state)
{
    (void)state;
    struct stopstr *m = NULL;
    struct errmsg e;
    const char *many[STOPSTR_MAX_STOPS + 1];
    for (int i = 0; i <= STOPSTR_MAX_STOPS; i++)
        many[i] = "x";
    assert_int_equal(stopstr_new(many, STOPSTR_MAX_STOPS + 1, &m, &e), ERR_LIMIT);
    assert_non_null(strstr(e.msg, "16"));
    assert_int_equal(stopstr_new(many, STOPSTR_MAX_STOPS, &m, &e), ERR_OK);
    stopstr_free(m);
    m = NULL;
    char longs[STOPSTR_MAX_LEN + 2];
    memset(longs, 'a', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    const char *one[] = {longs};
    assert_int_equal(stopstr_new(one, 1, &m, &e), ERR_LIMIT);
    const char *bad[] = {"ok", "\xc3("};
    assert_int_equal(stopstr_new(bad, 2, &m, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "UTF-8"));
    assert_int_equal(stopstr_new(bad, -1, &m, NULL), ERR_INVALID);
    assert_null(m);
    stopstr_free(NULL);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    const char *stops[] = {"END", "###"};
    int64_t live = mem_live_count();
    for (int64_t n = 0; n < 8; n++) {
        struct stopstr *m = NULL;
        mem_fail_after(n);
        int rc = stopstr_new(stops, 2, &m, NULL);
        if (rc == ERR_OK) {
            struct stopstr_result r;
            rc = stopstr_feed(m, "some text END", 13, &r);
            if (rc != ERR_OK) {
                assert_int_equal(rc, ERR_NOMEM);
                mem_fail_after(-1);
                assert_int_equal(stopstr_feed(m, "x", 1, &r), ERR_NOMEM); // sticky
            } else {
                assert_int_equal(r.stop_index, 0);
            }
            stopstr_free(m);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
        }
        mem_fail_after(-1);
        assert_int_equal(mem_live_count(), live);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_two_and_three_piece_split),
        cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_holds_back_only_possible_prefixes),
        cmocka_unit_test(test_no_stops_passes_through_but_keeps_utf8_whole),
        cmocka_unit_test(test_limits_and_invalid),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
