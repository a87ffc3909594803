/* media/data_url: RFC 2397 header parsing and base64 payload decoding. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media/data_url.h"
#include "util/err.h"
#include "util/mem.h"

#include "media_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_data_url_parse(void **state)
{
    (void)state;
    struct data_url u;
    struct errmsg e;
    assert_int_equal(data_url_parse(str_from_cstr("data:image/png;base64,AAAA"), &u, &e), ERR_OK);
    assert_true(data_url_mime_is(&u, "image/png"));
    assert_true(u.is_base64);
    assert_int_equal(u.params.len, 0);
    assert_true(str_eq_cstr(u.data, "AAAA"));

    assert_int_equal(data_url_parse(str_from_cstr("DATA:Image/PNG;name=a.png;BASE64,"), &u, &e),
                     ERR_OK);
    assert_true(data_url_mime_is(&u, "image/png"));
    assert_true(u.is_base64);
    assert_true(str_eq_cstr(u.params, ";name=a.png"));
    assert_int_equal(u.data.len, 0);

    assert_int_equal(data_url_parse(str_from_cstr("data:,hello,world"), &u, &e), ERR_OK);
    assert_int_equal(u.mime.len, 0);
    assert_false(u.is_base64);
    assert_true(str_eq_cstr(u.data, "hello,world"));

    assert_int_equal(data_url_parse(str_from_cstr("data:;base64,Zg=="), &u, &e), ERR_OK);
    assert_int_equal(u.mime.len, 0);
    assert_true(u.is_base64);

    assert_int_equal(data_url_parse(str_from_cstr("data:text/plain;charset=US-ASCII,hi"), &u, &e),
                     ERR_OK);
    assert_false(u.is_base64);
    assert_true(str_eq_cstr(u.params, ";charset=US-ASCII"));
}

static void test_data_url_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *url, *msg;
    } cases[] = {
        {"image/png;base64,AAAA", "expected 'data:'"},
        {"data:image/png;base64", "missing ','"},
        {"data:image,AAAA", "malformed media type 'image'"},
        {"data:image/,AAAA", "malformed media type"},
        {"data:im age/png,AAAA", "malformed media type"},
        {"data:image/png x;base64,AAAA", "malformed media type"},
        {"data:image/png;base64;a=b,AAAA", "';base64' must be the last"},
        {"data:image/png;foo,AAAA", "malformed parameter ';foo'"},
        {"data:image/png;=x;base64,AAAA", "malformed parameter"},
        {"data:image/png;;base64,AAAA", "malformed parameter"},
        {"", "expected 'data:'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct data_url u;
        struct errmsg e;
        errmsg_clear(&e);
        int rc = data_url_parse(str_from_cstr(cases[i].url), &u, &e);
        if (rc != ERR_FORMAT || !strstr(e.msg, cases[i].msg))
            fail_msg("'%s': rc %d '%s'", cases[i].url, rc, e.msg);
    }
}

static void test_data_url_decode(void **state)
{
    (void)state;
    struct data_url u;
    struct errmsg e;
    unsigned char *p = NULL;
    size_t n = 0;
    assert_int_equal(data_url_parse(str_from_cstr("data:image/png;base64,Zm9v\r\nYmFy"), &u, &e),
                     ERR_OK);
    assert_int_equal(data_url_decode(&u, 0, &p, &n, &e), ERR_OK);
    assert_int_equal(n, 6);
    assert_memory_equal(p, "foobar", 6);
    mem_free(p);
    assert_int_equal(data_url_decode(&u, 5, &p, &n, &e), ERR_LIMIT);
    assert_msg_has(&e, "data too large");

    // Offset 17 of the data part: the brief's example message, verbatim.
    assert_int_equal(
        data_url_parse(str_from_cstr("data:image/png;base64,AAAAAAAAAAAAAAAAA!AA"), &u, &e),
        ERR_OK);
    assert_int_equal(data_url_decode(&u, 0, &p, &n, &e), ERR_FORMAT);
    assert_msg_has(&e, "data is not valid base64 at offset 17");

    assert_int_equal(data_url_parse(str_from_cstr("data:image/png,%89PNG"), &u, &e), ERR_OK);
    assert_int_equal(data_url_decode(&u, 0, &p, &n, &e), ERR_UNSUPPORTED);
    assert_msg_has(&e, "must be base64");

    FAULT_LOOP((data_url_parse(str_from_cstr("data:a/b;base64,Zm9v"), &u, &e),
                data_url_decode(&u, 0, &p, &n, &e)),
               mem_free(p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_url_parse),
        cmocka_unit_test(test_data_url_parse_errors),
        cmocka_unit_test(test_data_url_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
