/* api/webui: the embedded chat page — every file served with its type and the security
 * headers, unknown names and --no-webui answered as unknown paths, and the embedded page
 * loading nothing from elsewhere. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/webui/webui.h"
#include "api/webui/webui_assets.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

static const char *header_of(const struct api_response *r, const char *name)
{
    for (int i = 0; i < r->n_headers; i++)
        if (strcmp(r->headers[i].name, name) == 0) return r->headers[i].value;
    return NULL;
}

static void get(const struct api_ctx *ctx, const char *path, const char *param,
                struct api_response *resp)
{
    struct api_request req = {
        .method = "GET",
        .path = path,
        .path_param = {param, strlen(param)},
        .body = "",
    };
    memset(resp, 0, sizeof *resp);
    api_webui(ctx, &req, resp);
}

static bool body_has(const struct api_response *r, const char *needle)
{
    const size_t n = strlen(needle);
    for (size_t i = 0; i + n <= r->body.len; i++)
        if (memcmp(r->body.data + i, needle, n) == 0) return true;
    return false;
}

static void test_root_is_the_page(void **state)
{
    (void)state;
    struct api_ctx ctx = {0};
    struct api_response r;
    get(&ctx, "/", "", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "text/html; charset=utf-8");
    assert_string_equal(header_of(&r, "Content-Security-Policy"), WEBUI_CSP);
    assert_string_equal(header_of(&r, "X-Content-Type-Options"), "nosniff");
    assert_non_null(header_of(&r, "Referrer-Policy"));
    assert_true(body_has(&r, "<script type=\"module\" src=\"/webui/app.js\">"));
    buf_deinit(&r.body);
}

static void test_every_file_served(void **state)
{
    (void)state;
    struct api_ctx ctx = {0};
    size_t n;
    const struct webui_asset *a = webui_assets(&n);
    assert_true(n >= 4); // index.html, app.js, app.css, markdown.js, …
    for (size_t i = 0; i < n; i++) {
        struct api_response r;
        char path[256];
        snprintf(path, sizeof path, "/webui/%s", a[i].name);
        get(&ctx, path, a[i].name, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.content_type, a[i].content_type);
        assert_int_equal(r.body.len, a[i].len);
        assert_memory_equal(r.body.data, a[i].data, a[i].len);
        assert_non_null(header_of(&r, "Content-Security-Policy"));
        // Nothing is fetched from elsewhere: no absolute URL that a browser would load.
        assert_false(body_has(&r, "src=\"http"));
        assert_false(body_has(&r, "href=\"http"));
        assert_false(body_has(&r, "@import"));
        assert_false(body_has(&r, "innerHTML"));
        buf_deinit(&r.body);
    }
}

static void test_unknown_and_disabled_are_404(void **state)
{
    (void)state;
    struct api_ctx ctx = {0};
    struct api_response r;
    const char *bad[] = {"nope.js", "../Makefile", "", "index.html/", "app.js\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        get(&ctx, "/webui/x", bad[i], &r);
        assert_int_equal(r.status, 404);
        assert_string_equal(r.content_type, "application/json");
        assert_true(body_has(&r, "\"not_found\""));
        buf_deinit(&r.body);
    }
    ctx.is_webui_disabled = true;
    get(&ctx, "/", "", &r);
    assert_int_equal(r.status, 404);
    assert_true(body_has(&r, "Invalid URL (GET /)"));
    buf_deinit(&r.body);
    get(&ctx, "/webui/app.js", "app.js", &r);
    assert_int_equal(r.status, 404);
    buf_deinit(&r.body);
}

/* Out of memory while copying a file: a 500 error, nothing leaked, and the next answer whole. */
static void test_allocation_failure(void **state)
{
    (void)state;
    struct api_ctx ctx = {0};
    struct api_response r;
    const int64_t live = mem_live_count();
    mem_fail_after(0);
    get(&ctx, "/", "", &r);
    mem_fail_after(-1);
    assert_int_equal(r.status, 500);
    assert_null(header_of(&r, "Content-Security-Policy"));
    buf_deinit(&r.body);
    assert_int_equal(mem_live_count(), live);
    get(&ctx, "/", "", &r);
    assert_int_equal(r.status, 200);
    buf_deinit(&r.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_is_the_page),
        cmocka_unit_test(test_every_file_served),
        cmocka_unit_test(test_unknown_and_disabled_are_404),
        cmocka_unit_test(test_allocation_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
