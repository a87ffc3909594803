/* util/base64: RFC 4648 vectors, round trips, the strictness rules and their error offsets. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "util/base64.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

static const char *const rfc_plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
static const char *const rfc_coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                        "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

static int decode_str(const char *s, int flags, char *out, size_t cap, size_t *n, struct errmsg *e)
{
    errmsg_clear(e);
    return base64_decode(s, strlen(s), out, cap, flags, n, e);
}

static void test_rfc4648_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rfc_plain / sizeof *rfc_plain; i++) {
        char enc[16] = {0}, dec[16] = {0};
        size_t n, m;
        assert_int_equal(base64_encoded_len(strlen(rfc_plain[i]), &n), ERR_OK);
        assert_int_equal(n, strlen(rfc_coded[i]));
        base64_encode(rfc_plain[i], strlen(rfc_plain[i]), enc);
        assert_memory_equal(enc, rfc_coded[i], n + 1);
        struct errmsg e;
        assert_int_equal(decode_str(rfc_coded[i], BASE64_STRICT, dec, sizeof dec, &m, &e), ERR_OK);
        assert_int_equal(m, strlen(rfc_plain[i]));
        assert_memory_equal(dec, rfc_plain[i], m);
    }
}

static void test_unpadded_accepted(void **state)
{
    (void)state;
    char dec[16];
    size_t m;
    struct errmsg e;
    assert_int_equal(decode_str("Zm9vYg", 0, dec, sizeof dec, &m, &e), ERR_OK);
    assert_int_equal(m, 4);
    assert_memory_equal(dec, "foob", 4);
    assert_int_equal(decode_str("Zm9vYmE", 0, dec, sizeof dec, &m, &e), ERR_OK);
    assert_int_equal(m, 5);
}

static void test_round_trip_random(void **state)
{
    (void)state;
    srand(1234);
    unsigned char src[600], back[600];
    char enc[800];
    for (size_t len = 0; len < sizeof src; len += 1 + len / 16) {
        for (size_t i = 0; i < len; i++)
            src[i] = (unsigned char)rand();
        size_t n, m;
        assert_int_equal(base64_encoded_len(len, &n), ERR_OK);
        base64_encode(src, len, enc);
        assert_true(base64_decoded_len_max(n) >= len);
        struct errmsg e;
        assert_int_equal(base64_decode(enc, n, back, len, 0, &m, &e), ERR_OK);
        assert_int_equal(m, len);
        assert_memory_equal(back, src, len);
    }
}

static void expect_error(const char *s, int flags, int code, const char *msg_part)
{
    char dec[64];
    size_t m = 999;
    struct errmsg e;
    int rc = decode_str(s, flags, dec, sizeof dec, &m, &e);
    if (rc != code || !strstr(e.msg, msg_part))
        fail_msg("'%s': rc %d msg '%s', want %d '%s'", s, rc, e.msg, code, msg_part);
    assert_int_equal(m, 999); // not written on failure
}

static void test_strict_errors_name_offset(void **state)
{
    (void)state;
    expect_error("Zm9v!mFy", 0, ERR_FORMAT, "offset 4 (character '!')");
    expect_error("Zm9vYmF-", 0, ERR_FORMAT, "offset 7");
    expect_error("Zm9v_mFy", 0, ERR_FORMAT, "offset 4");
    expect_error("Zm9v\x80mFy", 0, ERR_FORMAT, "offset 4 (character 0x80)");
    expect_error("Zm9v YmFy", 0, ERR_FORMAT, "offset 4"); // space without BASE64_SKIP_SPACE
    expect_error("Zm9vY", 0, ERR_FORMAT, "offset 4 (final group of one character");
    expect_error("=", 0, ERR_FORMAT, "offset 0 (unexpected padding");
    expect_error("Zm9v=", 0, ERR_FORMAT, "offset 4 (unexpected padding");
    expect_error("Zg=", 0, ERR_FORMAT, "incomplete padding");
    expect_error("Zg===", 0, ERR_FORMAT, "offset 4 (data after padding");
    expect_error("Zm8==", 0, ERR_FORMAT, "offset 4 (data after padding");
    expect_error("Zg==Zg==", 0, ERR_FORMAT, "offset 4 (data after padding");
    expect_error("Zg=a", 0, ERR_FORMAT, "offset 3 (incomplete padding at 'a')");
    expect_error("Zh==", 0, ERR_FORMAT, "offset 1 (non-zero trailing bits");
    expect_error("Zm9=", 0, ERR_FORMAT, "offset 2 (non-zero trailing bits");
    expect_error("Zh", 0, ERR_FORMAT, "non-zero trailing bits");
}

static void test_whitespace_policy(void **state)
{
    (void)state;
    char dec[16];
    size_t m;
    struct errmsg e;
    assert_int_equal(decode_str(" Zm9v\r\nYm\tFy \n", BASE64_SKIP_SPACE, dec, 16, &m, &e), ERR_OK);
    assert_int_equal(m, 6);
    assert_memory_equal(dec, "foobar", 6);
    assert_int_equal(decode_str("Zg= =\n", BASE64_SKIP_SPACE, dec, 16, &m, &e), ERR_OK);
    assert_int_equal(m, 1);
    expect_error("Zm9v\vYmFy", BASE64_SKIP_SPACE, ERR_FORMAT, "offset 4"); // \v is not space
    expect_error("Zg==\n x", BASE64_SKIP_SPACE, ERR_FORMAT, "offset 6 (data after padding");
}

static void test_output_capacity(void **state)
{
    (void)state;
    char dec[5];
    size_t m;
    struct errmsg e;
    assert_int_equal(decode_str("Zm9vYmFy", 0, dec, 5, &m, &e), ERR_LIMIT);
    assert_non_null(strstr(e.msg, "more than 5 bytes"));
    assert_int_equal(decode_str("Zm9vYmE=", 0, dec, 5, &m, &e), ERR_OK);
    assert_int_equal(decode_str("Zm9vYg==", 0, dec, 3, &m, &e), ERR_LIMIT);
}

static void test_decode_alloc_limit_and_faults(void **state)
{
    (void)state;
    const char *s = "Zm9v YmFy\n";
    unsigned char *p = NULL;
    size_t n = 0;
    struct errmsg e;
    // Six bytes with white space: the bound from the length (9) exceeds 6, the exact count not.
    assert_int_equal(base64_decode_alloc(s, strlen(s), 6, BASE64_SKIP_SPACE, &p, &n, &e), ERR_OK);
    assert_int_equal(n, 6);
    mem_free(p);
    p = NULL;
    assert_int_equal(base64_decode_alloc(s, strlen(s), 5, BASE64_SKIP_SPACE, &p, &n, &e),
                     ERR_LIMIT);
    assert_non_null(strstr(e.msg, "6 bytes, limit is 5"));
    assert_null(p);
    assert_int_equal(base64_decode_alloc("", 0, 0, 0, &p, &n, &e), ERR_OK);
    assert_int_equal(n, 0);
    mem_free(p);
    assert_int_equal(base64_decode_alloc("Zm9v!", 5, 100, 0, &p, &n, &e), ERR_FORMAT);

    int64_t live = mem_live_count();
    mem_fail_after(0);
    p = NULL;
    assert_int_equal(base64_decode_alloc("Zm9v", 4, 100, 0, &p, &n, &e), ERR_NOMEM);
    mem_fail_after(-1);
    assert_null(p);
    assert_int_equal(mem_live_count(), live);
}

static void test_encode_buf_appends(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    assert_int_equal(buf_append_cstr(&b, "x:"), ERR_OK);
    float v[2] = {1.0f, -2.0f}; // little-endian 0000803f 000000c0
    assert_int_equal(base64_encode_buf(&b, v, sizeof v), ERR_OK);
    assert_string_equal(b.data, "x:AACAPwAAAMA=");
    mem_fail_after(0);
    assert_int_equal(base64_encode_buf(&b,
                                       "0123456789012345678901234567890123456789012345678901"
                                       "23456789012345678901234567890123456789",
                                       90),
                     ERR_NOMEM);
    mem_fail_after(-1);
    assert_string_equal(b.data, "x:AACAPwAAAMA=");
    buf_deinit(&b);
    size_t n;
    assert_int_equal(base64_encoded_len(SIZE_MAX, &n), ERR_LIMIT);
    assert_int_equal(base64_decoded_len_max(SIZE_MAX), (SIZE_MAX / 4 + 1) * 3);
    assert_int_equal(base64_decoded_len_max(5), 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_unpadded_accepted),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_strict_errors_name_offset),
        cmocka_unit_test(test_whitespace_policy),
        cmocka_unit_test(test_output_capacity),
        cmocka_unit_test(test_decode_alloc_limit_and_faults),
        cmocka_unit_test(test_encode_buf_appends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
