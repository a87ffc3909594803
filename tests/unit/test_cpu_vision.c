/* platform/cpu_vision: finding the projector (given, beside the model, none, several), the
 * width check against the decoder, and the embedding cache by content hash. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/threadpool.h"
#include "platform/cpu/cpu.h"
#include "platform/cpu/cpu_vision.h"
#include "platform/request.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROJ "../shared/models/mmproj/mmproj-tinygemma3.gguf"

static void test_projector_found_and_checked(void **state)
{
    (void)state;
    if (access(PROJ, R_OK) != 0) skip();
    char cwd[2048], proj[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(proj, sizeof proj, "%s/%s", cwd, PROJ);
    char dir[] = "/tmp/test_cpu_vision_XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct cpu_vision *v = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    // none beside a directory without one, nor for a file
    assert_int_equal(cpu_vision_load(NULL, dir, 128, 512, &v, &e), ERR_OK);
    assert_null(v);
    char link[4200], model[4200], found[4096];
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    FILE *f = fopen(model, "wb");
    fputs("GGUF", f);
    fclose(f);
    snprintf(link, sizeof link, "%s/mmproj-b.gguf", dir);
    assert_int_equal(symlink(proj, link), 0);
    assert_int_equal(cpu_find_mmproj(dir, found, sizeof found), 1);
    char path[4096];
    assert_true(cpu_resolve_gguf(dir, path, sizeof path)); // the projector is not a second model
    assert_non_null(strstr(path, "model.gguf"));
    assert_int_equal(cpu_vision_load(NULL, dir, 128, 512, &v, &e), ERR_OK);
    assert_non_null(v);
    struct platform_model_desc d;
    memset(&d, 0, sizeof d);
    cpu_vision_describe(v, &d);
    assert_true(d.has_vision);
    assert_int_equal(d.image_tokens, 256);
    assert_string_equal(d.image_begin, "<start_of_image>");
    assert_string_equal(d.projector, "gemma3");
    assert_true(cpu_vision_is_noncausal(v));
    cpu_vision_free(v);
    // a second projector: ambiguous
    char link2[4200];
    snprintf(link2, sizeof link2, "%s/mmproj-a.gguf", dir);
    assert_int_equal(symlink(proj, link2), 0);
    assert_int_equal(cpu_find_mmproj(dir, found, sizeof found), 2);
    assert_non_null(strstr(found, "mmproj-a.gguf"));
    v = NULL;
    assert_int_equal(cpu_vision_load(NULL, dir, 128, 512, &v, &e), ERR_INVALID);
    assert_null(v);
    // the width must be the decoder's; the image must fit a batch
    assert_int_equal(cpu_vision_load(proj, dir, 64, 512, &v, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "128 wide"));
    assert_int_equal(cpu_vision_load(proj, dir, 128, 100, &v, &e), ERR_INVALID);
    assert_int_equal(cpu_vision_load("/nonexistent.gguf", dir, 128, 512, &v, &e), ERR_IO);
    // no vision
    memset(&d, 0, sizeof d);
    cpu_vision_describe(NULL, &d);
    assert_false(d.has_vision);
    unlink(link);
    unlink(link2);
    unlink(model);
    rmdir(dir);
}

static void test_repeated_image_is_not_encoded_again(void **state)
{
    (void)state;
    if (access(PROJ, R_OK) != 0) skip();
    struct cpu_vision *v = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(cpu_vision_load(PROJ, "/nonexistent", 128, 512, &v, &e), ERR_OK);
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    enum { W = 20, H = 30 };
    unsigned char px[W * H * 3];
    for (int i = 0; i < W * H * 3; i++)
        px[i] = (unsigned char)(i * 7);
    struct request_image im = {.n_tok = 256, .rgb = px, .w = W, .h = H};
    im.hash = request_image_hash(px, W, H);
    const float *a = NULL, *b = NULL;
    assert_int_equal(cpu_vision_embed(v, tp, &im, &a, &e), ERR_OK);
    float first[8];
    memcpy(first, a, sizeof first);
    assert_int_equal(cpu_vision_embed(v, tp, &im, &b, &e), ERR_OK);
    assert_ptr_equal(a, b);
    int64_t n_enc, n_hits;
    cpu_vision_counts(v, &n_enc, &n_hits);
    assert_int_equal(n_enc, 1);
    assert_int_equal(n_hits, 1);
    // nine other images push it out of the cache (8 kept); it is encoded again, same values
    for (int k = 0; k < 9; k++) {
        px[0] = (unsigned char)(100 + k);
        struct request_image o = im;
        o.hash = request_image_hash(px, W, H);
        assert_int_equal(cpu_vision_embed(v, tp, &o, &b, &e), ERR_OK);
    }
    px[0] = 0;
    assert_int_equal(cpu_vision_embed(v, tp, &im, &b, &e), ERR_OK);
    assert_memory_equal(b, first, sizeof first);
    cpu_vision_counts(v, &n_enc, &n_hits);
    assert_int_equal(n_enc, 11);
    // placeholders differ between images and are never vocabulary ids
    const uint64_t h1 = request_image_hash(px, W, H);
    px[1] ^= 1;
    const uint64_t h2 = request_image_hash(px, W, H);
    assert_true(h1 != h2);
    for (int j = 0; j < 256; j++) {
        assert_true(request_image_token(h1, j) < 0);
        assert_true(request_image_token(h1, j) != request_image_token(h2, j));
    }
    im.n_tok = 10;
    assert_int_equal(cpu_vision_embed(v, tp, &im, &b, &e), ERR_INVALID);
    threadpool_free(tp);
    cpu_vision_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_projector_found_and_checked),
        cmocka_unit_test(test_repeated_image_is_not_encoded_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
