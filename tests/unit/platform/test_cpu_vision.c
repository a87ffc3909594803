/* platform/cpu_vision: finding the projector (given, beside the model, none, several), the
 * width check against the decoder, and the embedding cache by content hash; a Qwen2.5-VL
 * projector's per-image position counts and grids, and its cache with images of different
 * sizes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf_write.h"
#include "engine/mtmd/clip_synth.h"
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

/* A synthetic qwen2.5vl_merger projector (patch 14, 128 wide) in a temp file. */
static void qwen_file(char *path, size_t cap)
{
    struct clip_synth_params p = clip_synth_params_default();
    p.projector = "qwen2.5vl_merger";
    p.image_size = 448;
    p.patch_size = 14;
    p.n_merge = 2;
    p.n_embd = 64;
    p.n_head = 4;
    p.n_layer = 2;
    p.n_ff = 96;
    p.n_wa_pattern = 2;
    p.n_out = 128;
    p.type = "f16";
    p.seed = 7;
    snprintf(path, cap, "/tmp/test_cpu_vision_qv_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct gguf_writer *w = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_synth_build(&p, &w, &e), ERR_OK);
    assert_int_equal(gguf_writer_to_file(w, path, &e), ERR_OK);
    gguf_writer_free(w);
}

static void test_qwen2vl_sizes_and_cache(void **state)
{
    (void)state;
    char path[64];
    qwen_file(path, sizeof path);
    struct cpu_vision *v = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(cpu_vision_load(path, "/nonexistent", 64, 512, &v, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "128 wide"));
    assert_int_equal(cpu_vision_load(path, "/nonexistent", 128, 512, &v, &e), ERR_OK);
    struct platform_model_desc d;
    memset(&d, 0, sizeof d);
    cpu_vision_describe(v, &d);
    assert_true(d.has_vision);
    assert_string_equal(d.projector, "qwen2.5vl_merger");
    assert_int_equal(d.image_tokens, 0); // per image
    assert_string_equal(d.image_begin, "<|vision_start|>");
    assert_string_equal(d.image_end, "<|vision_end|>");
    assert_false(cpu_vision_is_noncausal(v));
    assert_non_null(d.image_tokens_of);
    int n = 0, gw = 0, gh = 0;
    assert_int_equal(d.image_tokens_of(d.image_ctx, 224, 224, &n, &e), ERR_OK);
    assert_int_equal(n, 64);
    // 200x150: 7x5 merged tokens of 28 pixels (196x140)
    assert_int_equal(cpu_vision_image_grid(v, 200, 150, &n, &gw, &gh, &e), ERR_OK);
    assert_int_equal(n, 35);
    assert_int_equal(gw, 7);
    assert_int_equal(gh, 5);
    // over one batch of 512 too: the scheduler feeds such an image in parts
    assert_int_equal(cpu_vision_image_grid(v, 700, 700, &n, &gw, &gh, &e), ERR_OK);
    assert_int_equal(n, 625);
    assert_int_equal(gw, 25);
    // a size the projector cannot take
    assert_int_equal(d.image_tokens_of(d.image_ctx, 70000, 10, &n, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "70000x10"));
    // the cache: images of different sizes, a small entry grown for a larger image
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    enum { W = 56, H = 56 };
    unsigned char px[112 * 84 * 3];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)(i * 13);
    const float *a = NULL, *b = NULL;
    // 56x56 is below the 8-token floor: scaled up to 84x84, 9 tokens
    assert_int_equal(cpu_vision_image_grid(v, W, H, &n, &gw, &gh, &e), ERR_OK);
    assert_int_equal(n, 9);
    struct request_image im = {.n_tok = 9, .rgb = px, .w = W, .h = H};
    for (int k = 0; k < 8; k++) { // fill all 8 entries with small images
        px[0] = (unsigned char)k;
        im.hash = request_image_hash(px, W, H);
        assert_int_equal(cpu_vision_embed(v, tp, &im, &a, &e), ERR_OK);
    }
    float last[16];
    memcpy(last, a, sizeof last);
    // 112x84 (12 tokens) takes the least recently used entry, grown
    struct request_image big = {.n_tok = 12, .rgb = px, .w = 112, .h = 84};
    big.hash = request_image_hash(px, 112, 84);
    assert_int_equal(cpu_vision_embed(v, tp, &big, &b, &e), ERR_OK);
    int64_t n_enc, n_hits;
    cpu_vision_counts(v, &n_enc, &n_hits);
    assert_int_equal(n_enc, 9);
    assert_int_equal(n_hits, 0);
    // the last small image is still cached: same pointer, same values
    px[0] = 7;
    im.hash = request_image_hash(px, W, H);
    assert_int_equal(cpu_vision_embed(v, tp, &im, &b, &e), ERR_OK);
    assert_ptr_equal(a, b);
    assert_memory_equal(b, last, sizeof last);
    cpu_vision_counts(v, &n_enc, &n_hits);
    assert_int_equal(n_hits, 1);
    // a count that is not the image's own
    im.n_tok = 10;
    assert_int_equal(cpu_vision_embed(v, tp, &im, &b, &e), ERR_INVALID);
    threadpool_free(tp);
    cpu_vision_free(v);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2vl_sizes_and_cache),
        cmocka_unit_test(test_projector_found_and_checked),
        cmocka_unit_test(test_repeated_image_is_not_encoded_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
