/* api/proxy/cors_proxy: which target URLs the proxy takes and how it splits them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/proxy/cors_proxy.h"

#include <string.h>

static void test_urls_taken(void **state)
{
    (void)state;
    static const struct {
        const char *url, *host, *port, *path;
        bool is_https;
    } cases[] = {
        {"http://127.0.0.1:8080/x?y=1#frag", "127.0.0.1", "8080", "/x?y=1", false},
        {"http://example.com", "example.com", "80", "/", false},
        {"HTTP://example.com?q=1", "example.com", "80", "/?q=1", false},
        {"https://[::1]/p", "::1", "443", "/p", true},
        {"http://[::1]:9/", "::1", "9", "/", false},
        {"http://h:00081/a/b", "h", "81", "/a/b", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cors_proxy_target t;
        struct errmsg err = {0};
        assert_int_equal(cors_proxy_parse_url(cases[i].url, &t, &err), ERR_OK);
        assert_string_equal(t.host, cases[i].host);
        assert_string_equal(t.port, cases[i].port);
        assert_string_equal(t.path, cases[i].path);
        assert_int_equal(t.is_https, cases[i].is_https);
    }
}

static void test_urls_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "ftp://example.com/",  "file:///etc/passwd", "gopher://h/",
        "javascript:alert(1)", "http://user:pw@h/",  "http://user@h/",
        "http:///path",        "http://:80/",        "http://h:0/",
        "http://h:99999/",     "http://h:8x/",       "http://h:/",
        "http://h/a b",        "http://h/a\r\nX: y", "http://[::1/",
        "http://[::1]x/",      "http://h\t/",        "",
        "example.com/x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cors_proxy_target t = {.port = "keep"};
        struct errmsg err = {0};
        assert_int_equal(cors_proxy_parse_url(bad[i], &t, &err), ERR_INVALID);
        assert_true(err.msg[0] != 0);
        assert_string_equal(t.port, "keep"); // untouched on failure
    }
    char long_url[6000] = "http://h/";
    memset(long_url + 9, 'a', sizeof long_url - 10);
    struct cors_proxy_target t;
    struct errmsg err = {0};
    assert_int_equal(cors_proxy_parse_url(long_url, &t, &err), ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls_taken),
        cmocka_unit_test(test_urls_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
