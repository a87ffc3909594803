/* server/framing.c: the strict request-framing checks the gate runs on a raw head. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "server/framing.h"

#include <string.h>

#define BODY_MAX (64u * 1024u * 1024u)

/* Splits raw at its blank line and runs the check; *reason is set on refusal. */
static bool check(const char *raw, const char **reason)
{
    const char *end = strstr(raw, "\r\n\r\n");
    assert_non_null(end);
    size_t head_len = (size_t)(end - raw) + 4;
    *reason = NULL;
    return framing_head_ok(raw, head_len, raw + head_len, strlen(raw) - head_len, BODY_MAX, reason);
}

static void test_accepted(void **state)
{
    (void)state;
    const char *reason;
    assert_true(check("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &reason));
    assert_true(check("POST /v1/x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", &reason));
    assert_true(check("POST /v1/x HTTP/1.1\r\ncontent-length:  0 \r\n\r\n", &reason));
    assert_true(check(
        "POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", &reason));
    // A chunk line not fully arrived yet is not judged.
    assert_true(check("POST /v1/x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n1000", &reason));
    // The largest body that fits, as one chunk.
    assert_true(
        check("POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4000000\r\n", &reason));
    assert_null(reason);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1180591620717411303424\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4000001\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n4000000\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nno colon here\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
        "GET / HTTP/1.1\r\n: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *reason;
        if (check(bad[i], &reason)) fail_msg("accepted: %s", bad[i]);
        assert_non_null(reason);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
