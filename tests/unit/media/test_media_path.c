/* media/media_path: confinement to the media root in a temporary tree with ".." and a symlink
 * escape, non-regular files, size limits, %-escapes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media/media_path.h"
#include "util/err.h"
#include "util/mem.h"

#include "media_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOT_FOUND "no such file in the media path"

static int read_url(const struct media_path *mp, const char *url, size_t max, struct blob *out,
                    struct errmsg *e)
{
    unsigned char *p = NULL;
    size_t n = 0;
    errmsg_clear(e);
    int rc = media_path_read(mp, str_from_cstr(url), max, &p, &n, e);
    if (rc == ERR_OK) {
        out->p = malloc(n + 1);
        memcpy(out->p, p, n);
        out->p[n] = '\0';
        out->len = n;
        mem_free(p);
    }
    return rc;
}

static void expect_read(const struct media_path *mp, const char *url, int code, const char *want)
{
    struct blob b = {0};
    struct errmsg e;
    int rc = read_url(mp, url, 0, &b, &e);
    if (rc != code) fail_msg("%s: rc %d '%s', want %d", url, rc, e.msg, code);
    if (rc == ERR_OK && strcmp((char *)b.p, want) != 0)
        fail_msg("%s: read '%s', want '%s'", url, b.p, want);
    if (rc != ERR_OK && !strstr(e.msg, want))
        fail_msg("%s: message '%s' lacks '%s'", url, e.msg, want);
    fx_blob_free(&b);
}

static void test_media_path_confinement(void **state)
{
    (void)state;
    struct tree t;
    fx_tree_make(&t);
    struct media_path mp, off;
    struct errmsg e;
    media_path_init_disabled(&off);
    expect_read(&off, "file://a.png", ERR_UNSUPPORTED, "local file URLs are disabled");
    expect_read(NULL, "file://a.png", ERR_UNSUPPORTED, "disabled");
    assert_int_equal(media_path_init(&mp, t.root, &e), ERR_OK);

    expect_read(&mp, "file://a.png", ERR_OK, "A-PNG");
    expect_read(&mp, "FILE://sub/b.bin", ERR_OK, "BBB");
    expect_read(&mp, "file://sub/../a.png", ERR_OK, "A-PNG");
    expect_read(&mp, "file://inlink", ERR_OK, "A-PNG");
    expect_read(&mp, "file://a%20b%25.txt", ERR_OK, "SPACE");
    expect_read(&mp, "file://a%2Epng", ERR_OK, "A-PNG");
    snprintf(t.path, sizeof t.path, "file://%s/sub/b.bin", t.root);
    expect_read(&mp, t.path, ERR_OK, "BBB");

    expect_read(&mp, "file://../outside/secret", ERR_NOT_FOUND, NOT_FOUND);
    expect_read(&mp, "file://sub/../../outside/secret", ERR_NOT_FOUND, NOT_FOUND);
    expect_read(&mp, "file://escape", ERR_NOT_FOUND, NOT_FOUND);
    expect_read(&mp, "file://%2E%2E/outside/secret", ERR_NOT_FOUND, NOT_FOUND);
    snprintf(t.path, sizeof t.path, "file://%s/outside/secret", t.base);
    expect_read(&mp, t.path, ERR_NOT_FOUND, NOT_FOUND);
    snprintf(t.path, sizeof t.path, "file://%s2/c", t.root); // ".../root2/c": prefix trap
    expect_read(&mp, t.path, ERR_NOT_FOUND, NOT_FOUND);
    snprintf(t.path, sizeof t.path, "file://%s", t.root);
    expect_read(&mp, t.path, ERR_NOT_FOUND, NOT_FOUND); // the root itself
    expect_read(&mp, "file:///etc/passwd", ERR_NOT_FOUND, NOT_FOUND);

    expect_read(&mp, "file://missing.png", ERR_NOT_FOUND, "'file://missing.png': " NOT_FOUND);
    expect_read(&mp, "file://sub/missing/x", ERR_NOT_FOUND, NOT_FOUND);
    // An existing file outside and a missing one get the same answer: no existence oracle.
    expect_read(&mp, "file:///etc/passwd", ERR_NOT_FOUND, "'file:///etc/passwd': " NOT_FOUND);
    expect_read(&mp, "file:///etc/no-such-file", ERR_NOT_FOUND,
                "'file:///etc/no-such-file': " NOT_FOUND);
    expect_read(&mp, "file:///root/.no-such/x", ERR_NOT_FOUND,
                "'file:///root/.no-such/x': " NOT_FOUND);
    expect_read(&mp, "file://fifo", ERR_INVALID, "not a regular file");
    expect_read(&mp, "file://sub", ERR_INVALID, "not a regular file");
    expect_read(&mp, "file://a.png?x=1", ERR_INVALID, "query, fragment");
    expect_read(&mp, "file://a.png%00.jpg", ERR_INVALID, "bad %-escape");
    expect_read(&mp, "file://a.png%2", ERR_INVALID, "bad %-escape");
    expect_read(&mp, "file://", ERR_INVALID, "names no file");
    expect_read(&mp, "/abs/a.png", ERR_INVALID, "not a file:// URL");

    struct blob b = {0};
    assert_int_equal(read_url(&mp, "file://big", 15, &b, &e), ERR_LIMIT);
    assert_msg_has(&e, "file too large (16 bytes, limit 15)");
    assert_int_equal(read_url(&mp, "file://big", 16, &b, &e), ERR_OK);
    assert_int_equal(b.len, 16);
    fx_blob_free(&b);

    unsigned char *p = NULL;
    size_t n;
    FAULT_LOOP(media_path_read(&mp, str_from_cstr("file://sub/b.bin"), 0, &p, &n, &e), mem_free(p));
    media_path_deinit(&mp);
    media_path_deinit(&mp); // idempotent

    assert_int_equal(media_path_init(&mp, "/nonexistent/llamapi", &e), ERR_NOT_FOUND);
    snprintf(t.path, sizeof t.path, "%s/a.png", t.root);
    assert_int_equal(media_path_init(&mp, t.path, &e), ERR_INVALID);
    assert_msg_has(&e, "not a directory");
    assert_int_equal(media_path_init(&mp, "", &e), ERR_INVALID);
    assert_null(mp.root);
    // A root given through a symlink and with "..": stored resolved, confinement still holds.
    snprintf(t.path, sizeof t.path, "%s/root/sub/..", t.base);
    assert_int_equal(media_path_init(&mp, t.path, &e), ERR_OK);
    assert_string_equal(mp.root + strlen(mp.root) - 5, "/root");
    expect_read(&mp, "file://escape", ERR_NOT_FOUND, NOT_FOUND);
    media_path_deinit(&mp);
    fx_tree_remove(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_media_path_confinement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
