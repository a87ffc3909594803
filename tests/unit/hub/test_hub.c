/* hub/: reference parsing, path safety, split names, the quant choice (llama.cpp's -hf rules),
 * the local listing and removal, SHA-256, and the default folders. No network. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "hub/hub.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_ref_forms(void **state)
{
    (void)state;
    struct hub_ref r;
    struct errmsg e;
    assert_int_equal(hub_ref_parse("org/repo", &r, &e), ERR_OK);
    assert_string_equal(r.repo, "org/repo");
    assert_string_equal(r.quant, "");
    assert_string_equal(r.file, "");
    assert_int_equal(hub_ref_parse("hf://Org-1/Re.po_2:q4_k_m", &r, &e), ERR_OK);
    assert_string_equal(r.repo, "Org-1/Re.po_2");
    assert_string_equal(r.quant, "q4_k_m");
    assert_int_equal(hub_ref_parse("org/repo/sub/dir/model-Q8_0.gguf", &r, &e), ERR_OK);
    assert_string_equal(r.repo, "org/repo");
    assert_string_equal(r.file, "sub/dir/model-Q8_0.gguf");
    assert_int_equal(hub_ref_parse("org/repo:UD-Q4_K_XL", &r, &e), ERR_OK);
    assert_string_equal(r.quant, "UD-Q4_K_XL");
}

static void test_ref_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "repo",
        "org/",
        "/repo",
        "org/repo:",
        "org/repo:Q4 K",
        "org/repo:a/b",
        "../x/y",
        "org/..",
        "org/.hidden",
        "-org/repo",
        "org/re po",
        "org/repo/../../etc/x.gguf",
        "org/repo/a.bin",
        "org/repo//x.gguf",
        "org/repo/./x.gguf",
        "org/repo/.x.gguf",
        "org/repo/x.gguf/",
        "org/a..b",
    };
    for (int i = 0; i < N(bad); i++) {
        struct hub_ref r;
        struct errmsg e;
        errmsg_clear(&e);
        if (hub_ref_parse(bad[i], &r, &e) != ERR_INVALID) fail_msg("accepted '%s'", bad[i]);
        assert_true(e.msg[0] != '\0');
    }
}

static void test_path_safety(void **state)
{
    (void)state;
    static const char *const safe[] = {"a.gguf", "sub/a.gguf", "a/b/c-Q4_K_M.gguf", "ü.gguf"};
    static const char *const unsafe[] = {
        "",        "/etc/passwd", "../a.gguf", "a/../../b", "a//b", "a/",    "./a",
        ".hidden", "a\\..\\b",    "a\nb",      "a/.git/x",  "..",   "a/\x7f"};
    for (int i = 0; i < N(safe); i++)
        if (!hub_path_is_safe(safe[i])) fail_msg("refused '%s'", safe[i]);
    for (int i = 0; i < N(unsafe); i++)
        if (hub_path_is_safe(unsafe[i])) fail_msg("accepted '%s'", unsafe[i]);
    char long_path[HUB_FILE_CAP + 8];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    assert_false(hub_path_is_safe(long_path));
}

static void test_split_info(void **state)
{
    (void)state;
    char prefix[128];
    int index, count;
    hub_split_info("m/Model-Q4_K_M-00002-of-00003.gguf", prefix, sizeof prefix, &index, &count);
    assert_string_equal(prefix, "m/Model-Q4_K_M");
    assert_int_equal(index, 2);
    assert_int_equal(count, 3);
    hub_split_info("Model-Q8_0.gguf", prefix, sizeof prefix, &index, &count);
    assert_string_equal(prefix, "Model-Q8_0");
    assert_int_equal(count, 1);
    hub_split_info("-00001-of-00002.gguf", prefix, sizeof prefix, &index, &count);
    assert_int_equal(count, 1); // no prefix before the split part: not a split name
    hub_split_info("x-0001-of-00002.gguf", prefix, sizeof prefix, &index, &count);
    assert_int_equal(count, 1); // four digits: not a split name
    hub_split_info("x-00001-of-00000.gguf", prefix, sizeof prefix, &index, &count);
    assert_int_equal(count, 1); // no parts, or a part past the count: not a split name
    hub_split_info("x-00003-of-00002.gguf", prefix, sizeof prefix, &index, &count);
    assert_int_equal(count, 1);
    assert_string_equal(prefix, "x-00003-of-00002");
}

static int pick(const char *const *paths, int n, const char *ref_text, struct hub_plan *plan)
{
    struct hub_ref ref;
    struct errmsg e;
    assert_int_equal(hub_ref_parse(ref_text, &ref, &e), ERR_OK);
    errmsg_clear(&e);
    int rc = hub_plan_select(paths, n, &ref, plan, &e);
    if (rc != ERR_OK) assert_true(strstr(e.msg, "GGUF files there") != NULL);
    return rc;
}

static void test_quant_rules(void **state)
{
    (void)state;
    static const char *const files[] = {
        "README.md",
        "Model-F16.gguf",
        "Model-Q8_0.gguf",
        "Model-Q4_K_M.gguf",
        "Model-Q4_K_S.gguf",
        "Model-IQ4_XS.gguf",
        "mmproj-Model-F16.gguf",
        "mmproj-Model-Q8_0.gguf",
        "Model-imatrix.gguf",
    };
    struct hub_plan p;
    assert_int_equal(pick(files, N(files), "o/r", &p), ERR_OK); // default Q4_K_M
    assert_int_equal(p.primary, 3);
    assert_int_equal(p.n_parts, 1);
    assert_int_equal(p.mmproj, 7); // 4 bits: Q8_0 (8) is closer than F16 (16)
    assert_int_equal(pick(files, N(files), "o/r:q8_0", &p), ERR_OK); // any case
    assert_int_equal(p.primary, 2);
    assert_int_equal(p.mmproj, 7);
    assert_int_equal(pick(files, N(files), "o/r:F16", &p), ERR_OK);
    assert_int_equal(p.primary, 1);
    assert_int_equal(p.mmproj, 6);
    assert_int_equal(pick(files, N(files), "o/r:Q4_K", &p), ERR_NOT_FOUND);   // "_" is no boundary
    assert_int_equal(pick(files, N(files), "o/r:mmproj", &p), ERR_NOT_FOUND); // never a model
    assert_int_equal(pick(files, N(files), "o/r:Q3_K_S", &p), ERR_NOT_FOUND);
    assert_int_equal(pick(files, N(files), "o/r/Model-IQ4_XS.gguf", &p), ERR_OK);
    assert_int_equal(p.primary, 5);
    assert_int_equal(pick(files, N(files), "o/r/Nope.gguf", &p), ERR_NOT_FOUND);
    // a file without the extension shares the model's prefix and must not stand in for it
    static const char *const twin[] = {"Model-Q8_0.gguf", "Model-Q8_0"};
    assert_int_equal(pick(twin, N(twin), "o/r:Q8_0", &p), ERR_OK);
    assert_int_equal(p.primary, 0);
}

static void test_default_fallbacks(void **state)
{
    (void)state;
    static const char *const q8[] = {"a-F16.gguf", "a-Q8_0.gguf", "a-Q6_K.gguf"};
    static const char *const other[] = {"mmproj-x.gguf", "a-Q6_K.gguf", "a-Q5_K_M.gguf"};
    static const char *const none[] = {"mmproj-x.gguf", "a.safetensors", "imatrix.gguf"};
    struct hub_plan p;
    assert_int_equal(pick(q8, N(q8), "o/r", &p), ERR_OK); // Q4_K_M missing: Q8_0
    assert_int_equal(p.primary, 1);
    assert_int_equal(p.mmproj, -1);
    assert_int_equal(pick(other, N(other), "o/r", &p), ERR_OK); // then the first model file
    assert_int_equal(p.primary, 1);
    assert_int_equal(p.mmproj, 0);
    assert_int_equal(pick(other, N(other), "o/r:Q8_0", &p), ERR_NOT_FOUND); // a tag: no fallback
    assert_int_equal(pick(none, N(none), "o/r", &p), ERR_NOT_FOUND);
}

static void test_split_models(void **state)
{
    (void)state;
    static const char *const files[] = {
        "Q4_K_M/M-Q4_K_M-00002-of-00003.gguf",
        "Q4_K_M/M-Q4_K_M-00001-of-00003.gguf",
        "Q4_K_M/M-Q4_K_M-00003-of-00003.gguf",
        "M-Q8_0-00001-of-00002.gguf",
        "Q4_K_M/mmproj-F16.gguf",
        "other/mmproj-Q4_K_M.gguf",
    };
    struct hub_plan p;
    assert_int_equal(pick(files, N(files), "o/r", &p), ERR_OK);
    assert_int_equal(p.primary, 1); // the first part, even listed after the second
    assert_int_equal(p.n_parts, 3);
    assert_int_equal(p.parts[0], 1);
    assert_int_equal(p.parts[1], 0);
    assert_int_equal(p.parts[2], 2);
    assert_int_equal(p.mmproj, 4); // beside it, not the closer quant in another folder
    // a later part named by path: the whole set, from its first part
    assert_int_equal(pick(files, N(files), "o/r/Q4_K_M/M-Q4_K_M-00003-of-00003.gguf", &p), ERR_OK);
    assert_int_equal(p.primary, 1);
    // a set missing a part
    struct hub_ref ref;
    struct errmsg e;
    assert_int_equal(hub_ref_parse("o/r:Q8_0", &ref, &e), ERR_OK);
    assert_int_equal(hub_plan_select(files, N(files), &ref, &p, &e), ERR_FORMAT);
    assert_non_null(strstr(e.msg, "misses part 2 of 2"));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_sha256(void **state)
{
    (void)state;
    char path[] = "/tmp/test_hub_sha_XXXXXX", hex[65];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "abc");
    assert_int_equal(hub_sha256_file(path, hex), ERR_OK);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    unlink(path);
    assert_int_equal(hub_sha256_file(path, hex), ERR_IO);
}

/* A models folder with two repositories, one with a split model, a projector and a .part. */
static void make_tree(const char *root)
{
    char p[512];
    static const char *const dirs[] = {"", "/org", "/org/a", "/org/a/sub", "/org/b"};
    for (int i = 0; i < N(dirs); i++) {
        snprintf(p, sizeof p, "%s%s", root, dirs[i]);
        assert_true(mkdir(p, 0755) == 0);
    }
    static const char *const files[] = {"/org/a/A-Q8_0.gguf",
                                        "/org/a/A-Q4_K_M.gguf",
                                        "/org/a/mmproj-A-F16.gguf",
                                        "/org/a/sub/S-Q2_K-00001-of-00002.gguf",
                                        "/org/a/sub/S-Q2_K-00002-of-00002.gguf",
                                        "/org/a/A-F16.gguf.part",
                                        "/org/b/B.gguf",
                                        "/org/b/notes.txt"};
    for (int i = 0; i < N(files); i++) {
        snprintf(p, sizeof p, "%s%s", root, files[i]);
        write_file(p, "x");
    }
}

static void test_local_list_and_remove(void **state)
{
    (void)state;
    char root[] = "/tmp/test_hub_XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_int_equal(rmdir(root), 0);
    make_tree(root);
    struct hub_listing l = {0};
    assert_int_equal(hub_local_list(root, false, &l), ERR_OK);
    assert_int_equal(l.n, 6); // the .gguf files, sorted
    assert_string_equal(l.entries[0].path, "org/a/A-Q4_K_M.gguf");
    assert_string_equal(l.entries[5].path, "org/b/B.gguf");
    hub_listing_free(&l);
    assert_int_equal(hub_local_list(root, true, &l), ERR_OK);
    assert_int_equal(l.n, 7);
    hub_listing_free(&l);
    for (int64_t k = 0;; k++) { // every allocation failure is a clean ERR_NOMEM
        mem_fail_after(k);
        int rc = hub_local_list(root, true, &l);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            hub_listing_free(&l);
            break;
        }
        assert_int_equal(rc, ERR_NOMEM);
    }
    int n = 0;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(hub_remove(root, "org/a:Q2_K", &n, &e), ERR_OK);
    assert_int_equal(n, 2); // both parts; the projector stays beside the other models
    assert_int_equal(hub_remove(root, "org/a/A-Q8_0.gguf", &n, &e), ERR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(hub_remove(root, "org/a:Q4_K_M", &n, &e), ERR_OK);
    assert_int_equal(n, 2); // the last model, then its projector
    char p[512];
    snprintf(p, sizeof p, "%s/org/a/A-F16.gguf.part", root);
    assert_int_equal(access(p, F_OK), 0); // an unfinished download of no chosen file stays
    assert_int_equal(hub_remove(root, "org/a", &n, &e), ERR_OK);
    assert_int_equal(n, 1);
    snprintf(p, sizeof p, "%s/org/a", root);
    assert_int_equal(access(p, F_OK), -1); // emptied folders are gone
    assert_int_equal(hub_remove(root, "org/a", &n, &e), ERR_NOT_FOUND);
    assert_int_equal(hub_remove(root, "../x", &n, &e), ERR_INVALID);
    assert_int_equal(hub_remove(root, "org/b", &n, &e), ERR_OK);
    snprintf(p, sizeof p, "%s/org/b/notes.txt", root);
    assert_int_equal(unlink(p), 0); // what is not a model is never deleted
    snprintf(p, sizeof p, "%s/org/b", root);
    assert_int_equal(rmdir(p), 0);
    snprintf(p, sizeof p, "%s/org", root);
    assert_int_equal(rmdir(p), 0);
    assert_int_equal(rmdir(root), 0);
}

static void test_defaults(void **state)
{
    (void)state;
    char out[256];
    setenv("LLAMAPI_HUB_URL", "http://127.0.0.1:9/hub//", 1);
    hub_default_url(out, sizeof out);
    assert_string_equal(out, "http://127.0.0.1:9/hub");
    unsetenv("LLAMAPI_HUB_URL");
    unsetenv("MODEL_ENDPOINT");
    unsetenv("HF_ENDPOINT");
    hub_default_url(out, sizeof out);
    assert_string_equal(out, "https://huggingface.co");
    if (geteuid() == 0) {
        hub_default_models_dir(out, sizeof out);
        assert_string_equal(out, "/var/lib/llamapi/models");
    } else {
        setenv("XDG_CACHE_HOME", "/x/cache", 1);
        hub_default_models_dir(out, sizeof out);
        assert_string_equal(out, "/x/cache/llamapi/models");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_forms),
        cmocka_unit_test(test_ref_refused),
        cmocka_unit_test(test_path_safety),
        cmocka_unit_test(test_split_info),
        cmocka_unit_test(test_quant_rules),
        cmocka_unit_test(test_default_fallbacks),
        cmocka_unit_test(test_split_models),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_local_list_and_remove),
        cmocka_unit_test(test_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
