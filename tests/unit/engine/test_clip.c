/* engine/mtmd/clip: the shared tiny Gemma 3 projector against the reference implementation's
 * image embeddings (tests/data/mtmd/, from scripts/gen-mtmd-goldens.sh), the resampler's
 * properties, refused files and allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media_fixtures.h"

#include "engine/gguf/gguf_write.h"
#include "engine/mtmd/clip.h"
#include "engine/mtmd/clip_prep.h"
#include "engine/mtmd/clip_synth.h"
#include "engine/threadpool.h"
#include "media/image.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROJ "../shared/models/mmproj/mmproj-tinygemma3.gguf"
#define DATA "tests/data/mtmd/"

/* Our embeddings of one test image and the reference's (DATA <emb>.emb), compared token by
 * token. */
static void compare_image_to(struct clip_model *c, struct threadpool *tp, const char *name,
                             const char *emb)
{
    const struct clip_info *in = clip_get_info(c);
    char path[128];
    snprintf(path, sizeof path, DATA "%s.png", name);
    uint32_t w, h;
    unsigned char *rgb = fx_load_png(path, &w, &h);
    float *pix = malloc(sizeof(float) * 3 * (size_t)in->image_size * (size_t)in->image_size);
    const size_t n_out = (size_t)in->n_out_tokens * (size_t)in->n_out_embd;
    float *out = malloc(sizeof(float) * n_out);
    assert_int_equal(clip_preprocess(c, rgb, w, h, pix), ERR_OK);
    assert_int_equal(clip_encode(c, tp, pix, out), ERR_OK);
    snprintf(path, sizeof path, DATA "%s.emb", emb);
    size_t len;
    int32_t *ref = fx_read_file(path, &len);
    assert_non_null(ref);
    assert_int_equal(ref[0], in->n_out_tokens);
    assert_int_equal(ref[1], in->n_out_embd);
    assert_int_equal(len, 8 + n_out * sizeof(float));
    const float *r = (const float *)(ref + 2);
    double max_diff = 0.0, max_ref = 0.0, min_cos = 1.0;
    for (int t = 0; t < in->n_out_tokens; t++) {
        double dot = 0.0, na = 0.0, nb = 0.0;
        for (int i = 0; i < in->n_out_embd; i++) {
            const size_t k = (size_t)t * in->n_out_embd + i;
            const double d = fabs((double)out[k] - r[k]);
            if (d > max_diff) max_diff = d;
            if (fabs(r[k]) > max_ref) max_ref = fabs(r[k]);
            dot += (double)out[k] * r[k];
            na += (double)out[k] * out[k];
            nb += (double)r[k] * r[k];
        }
        const double cs = dot / sqrt(na * nb);
        if (cs < min_cos) min_cos = cs;
    }
    printf("%s: max |ours - reference| %.3g (largest value %.3g), lowest cosine %.7f\n", emb,
           max_diff, max_ref, min_cos);
    assert_true(min_cos > 0.9999);
    assert_true(max_diff < 0.01 * max_ref);
    free(ref);
    free(out);
    free(pix);
    mem_free(rgb);
}

static void compare_image(struct clip_model *c, struct threadpool *tp, const char *name)
{
    compare_image_to(c, tp, name, name);
}

/* A projector written by clip_synth (in memory, as mmproj-synth writes it for the goldens)
 * with pooling and Q8_0 blocks, against the reference's embeddings of c.png. */
static void test_synthetic_pooling_matches_reference(void **state)
{
    (void)state;
    struct clip_synth_params p = clip_synth_params_default();
    p.image_size = 48;
    p.patch_size = 4;
    p.n_merge = 2;
    p.n_embd = 96;
    p.n_head = 3;
    p.n_layer = 3;
    p.n_ff = 256;
    p.n_out = 128;
    p.type = "q8_0";
    p.seed = 5;
    struct gguf_writer *w = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_synth_build(&p, &w, &e), ERR_OK);
    void *data = NULL;
    size_t len = 0;
    assert_int_equal(gguf_writer_to_memory(w, &data, &len), ERR_OK);
    gguf_writer_free(w);
    struct clip_model *c = NULL;
    assert_int_equal(clip_load_memory(data, len, &c, &e), ERR_OK);
    assert_int_equal(clip_get_info(c)->n_out_tokens, 36); // 12 x 12 patches pooled 2 x 2
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    compare_image_to(c, tp, "c", "syn-pool-c");
    threadpool_free(tp);
    clip_free(c);
    mem_free(data);
    p.n_merge = 5; // does not divide 12
    assert_int_equal(clip_synth_build(&p, &w, &e), ERR_INVALID);
}

static void test_embeddings_match_reference(void **state)
{
    (void)state;
    if (access(PROJ, R_OK) != 0) {
        printf("skipped: %s is absent\n", PROJ);
        skip();
    }
    struct clip_model *c = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_load(PROJ, &c, &e), ERR_OK);
    const struct clip_info *in = clip_get_info(c);
    assert_string_equal(in->projector_name, "gemma3");
    assert_int_equal(in->image_size, 32);
    assert_int_equal(in->n_out_tokens, 256);
    assert_int_equal(in->n_out_embd, 128);
    for (int nt = 1; nt <= 2; nt++) {
        struct threadpool *tp = NULL;
        assert_int_equal(threadpool_new(nt, &tp), ERR_OK);
        compare_image(c, tp, "a");
        compare_image(c, tp, "b");
        compare_image(c, tp, "c"); // 48 x 20: resized and padded
        threadpool_free(tp);
    }
    clip_free(c);
}

static void test_same_image_same_embeddings_any_threads(void **state)
{
    (void)state;
    if (access(PROJ, R_OK) != 0) skip();
    struct clip_model *c = NULL;
    struct errmsg e;
    assert_int_equal(clip_load(PROJ, &c, &e), ERR_OK);
    const struct clip_info *in = clip_get_info(c);
    uint32_t w, h;
    unsigned char *rgb = fx_load_png(DATA "b.png", &w, &h);
    float pix[3 * 32 * 32];
    const size_t n = (size_t)in->n_out_tokens * (size_t)in->n_out_embd;
    float *o1 = malloc(n * sizeof(float)), *o2 = malloc(n * sizeof(float));
    struct threadpool *t1 = NULL, *t2 = NULL;
    assert_int_equal(threadpool_new(1, &t1), ERR_OK);
    assert_int_equal(threadpool_new(3, &t2), ERR_OK);
    assert_int_equal(clip_preprocess(c, rgb, w, h, pix), ERR_OK);
    assert_int_equal(clip_encode(c, t1, pix, o1), ERR_OK);
    assert_int_equal(clip_encode(c, t2, pix, o2), ERR_OK);
    assert_memory_equal(o1, o2, n * sizeof(float));
    threadpool_free(t1);
    threadpool_free(t2);
    free(o1);
    free(o2);
    mem_free(rgb);
    clip_free(c);
}

static void test_resize_properties(void **state)
{
    (void)state;
    // a flat colour stays flat at any size; the same size is a copy
    enum { SW = 37, SH = 11 };
    uint8_t src[SW * SH * 3], dst[64 * 64 * 3];
    for (int i = 0; i < SW * SH; i++) {
        src[i * 3] = 200;
        src[i * 3 + 1] = 17;
        src[i * 3 + 2] = 99;
    }
    const uint32_t sizes[][2] = {{5, 3}, {64, 64}, {37, 40}, {1, 1}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        assert_int_equal(clip_prep_resize(src, SW, SH, dst, sizes[k][0], sizes[k][1]), ERR_OK);
        for (uint32_t i = 0; i < sizes[k][0] * sizes[k][1]; i++) {
            assert_int_equal(dst[i * 3], 200);
            assert_int_equal(dst[i * 3 + 1], 17);
            assert_int_equal(dst[i * 3 + 2], 99);
        }
    }
    // fitting 37 x 11 into 32: 32 x 10 (ceil of 9.5) centred, black rows above and below
    assert_int_equal(clip_prep_fit(src, SW, SH, 32, dst), ERR_OK);
    assert_int_equal(dst[0], 0);                      // row 0 is padding
    assert_int_equal(dst[(11 * 32 + 0) * 3], 200);    // row 11 is image
    assert_int_equal(dst[(31 * 32 + 31) * 3 + 1], 0); // last row padding
    assert_int_equal(clip_prep_resize(src, 0, SH, dst, 4, 4), ERR_INVALID);
    assert_int_equal(clip_prep_fit(src, SW, SH, 0, dst), ERR_INVALID);
}

static int write_clip(const char *path, const char *type, const char *proj_type)
{
    struct gguf_writer *w = NULL;
    int rc = gguf_writer_new(&w);
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "general.architecture", "clip");
    if (rc == ERR_OK && type) rc = gguf_writer_add_str(w, "general.type", type);
    if (rc == ERR_OK) rc = gguf_writer_add_bool(w, "clip.has_vision_encoder", true);
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "clip.projector_type", proj_type);
    struct errmsg e;
    if (rc == ERR_OK) rc = gguf_writer_to_file(w, path, &e);
    gguf_writer_free(w);
    return rc;
}

static void test_refused_files(void **state)
{
    (void)state;
    char path[] = "/tmp/test_clip_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct clip_model *c = NULL;
    struct errmsg e;
    assert_int_equal(write_clip(path, "clip-vision", "qwen25vl_unknown"), ERR_OK);
    errmsg_clear(&e);
    assert_int_equal(clip_load(path, &c, &e), ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "qwen25vl_unknown"));
    assert_int_equal(write_clip(path, "clip-audio", "gemma3"), ERR_OK);
    assert_int_equal(clip_load(path, &c, &e), ERR_UNSUPPORTED);
    assert_int_equal(write_clip(path, "model", "gemma3"), ERR_OK);
    assert_int_equal(clip_load(path, &c, &e), ERR_FORMAT);
    assert_int_equal(write_clip(path, "clip-vision", "gemma3"), ERR_OK);
    errmsg_clear(&e);
    assert_int_equal(clip_load(path, &c, &e), ERR_FORMAT); // no image_size and no tensors
    assert_non_null(strstr(e.msg, "clip.vision.image_size"));
    assert_null(c);
    if (access(PROJ, R_OK) == 0) { // every truncation of the real file is refused
        size_t len;
        unsigned char *p = fx_read_file(PROJ, &len);
        for (size_t n = 0; n < len; n += len / 61 + 1) {
            FILE *f = fopen(path, "wb");
            assert_int_equal(fwrite(p, 1, n, f), n);
            fclose(f);
            assert_int_not_equal(clip_load(path, &c, &e), ERR_OK);
        }
        free(p);
    }
    unlink(path);
}

static void test_load_fault_injection(void **state)
{
    (void)state;
    if (access(PROJ, R_OK) != 0) skip();
    int64_t live = mem_live_count();
    for (int n = 0;; n++) {
        struct clip_model *c = NULL;
        struct errmsg e;
        mem_fail_after(n);
        int rc = clip_load(PROJ, &c, &e);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            clip_free(c);
            break;
        }
        assert_int_equal(rc, ERR_NOMEM);
        assert_int_equal(mem_live_count(), live);
    }
    assert_int_equal(mem_live_count(), live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embeddings_match_reference),
        cmocka_unit_test(test_synthetic_pooling_matches_reference),
        cmocka_unit_test(test_same_image_same_embeddings_any_threads),
        cmocka_unit_test(test_resize_properties),
        cmocka_unit_test(test_refused_files),
        cmocka_unit_test(test_load_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
