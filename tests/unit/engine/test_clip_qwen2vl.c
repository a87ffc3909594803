/* engine/mtmd/clip_qwen2vl: a synthetic Qwen2.5-VL projector (written by clip_synth as
 * mmproj-synth writes it for the goldens) against the reference implementation's image
 * embeddings (tests/data/mtmd/q*.emb from scripts/gen-mtmd-goldens.sh): a square image over
 * four attention windows and a non-square one resized with partial windows; the resize rule,
 * thread-count invariance, refused files and allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media_fixtures.h"

#include "engine/gguf/gguf_write.h"
#include "engine/mtmd/clip_qwen2vl.h"
#include "engine/mtmd/clip_synth.h"
#include "engine/threadpool.h"
#include "media/image.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA "tests/data/mtmd/"

/* Keep in step with scripts/gen-mtmd-goldens.sh's mmproj-synth options for qv.gguf. */
static struct clip_synth_params synth_params(void)
{
    struct clip_synth_params p = clip_synth_params_default();
    p.projector = "qwen2.5vl_merger";
    p.image_size = 448;
    p.patch_size = 14;
    p.n_merge = 2;
    p.n_embd = 64;
    p.n_head = 4;
    p.n_layer = 4;
    p.n_ff = 96;
    p.n_wa_pattern = 2;
    p.n_out = 128;
    p.type = "f16";
    p.seed = 7;
    return p;
}

static void *synth_file(const struct clip_synth_params *p, size_t *len)
{
    struct gguf_writer *w = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_synth_build(p, &w, &e), ERR_OK);
    void *data = NULL;
    assert_int_equal(gguf_writer_to_memory(w, &data, len), ERR_OK);
    gguf_writer_free(w);
    return data;
}

/* Encodes DATA name.png; *n_tok set; caller frees the result with free(). */
static float *encode_png(const struct clip_qwen2vl *q, struct threadpool *tp, const char *name,
                         int *n_tok)
{
    char path[128];
    snprintf(path, sizeof path, DATA "%s.png", name);
    uint32_t w, h, rw, rh;
    unsigned char *rgb = fx_load_png(path, &w, &h);
    assert_int_equal(clip_qwen2vl_image_size(q, w, h, &rw, &rh, n_tok), ERR_OK);
    float *pix = malloc(sizeof(float) * 3 * rw * rh);
    float *out = malloc(sizeof(float) * (size_t)*n_tok * clip_qwen2vl_get_info(q)->n_out_embd);
    assert_int_equal(clip_qwen2vl_preprocess(q, rgb, w, h, pix), ERR_OK);
    assert_int_equal(clip_qwen2vl_encode(q, tp, pix, rw, rh, out), ERR_OK);
    free(pix);
    mem_free(rgb);
    return out;
}

static void compare(const struct clip_qwen2vl *q, struct threadpool *tp, const char *name,
                    int want_tok)
{
    const int n_embd = clip_qwen2vl_get_info(q)->n_out_embd;
    int n_tok = 0;
    float *out = encode_png(q, tp, name, &n_tok);
    assert_int_equal(n_tok, want_tok);
    char path[128];
    snprintf(path, sizeof path, DATA "%s.emb", name);
    size_t len;
    int32_t *ref = fx_read_file(path, &len);
    assert_non_null(ref);
    assert_int_equal(ref[0], n_tok);
    assert_int_equal(ref[1], n_embd);
    assert_int_equal(len, 8 + (size_t)n_tok * n_embd * sizeof(float));
    const float *r = (const float *)(ref + 2);
    double max_diff = 0.0, max_ref = 0.0, min_cos = 1.0;
    for (int t = 0; t < n_tok; t++) {
        double dot = 0.0, na = 0.0, nb = 0.0;
        for (int i = 0; i < n_embd; i++) {
            const size_t k = (size_t)t * n_embd + i;
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
    printf("%s: %d tokens, max |ours - reference| %.3g (largest value %.3g), lowest cosine "
           "%.7f\n",
           name, n_tok, max_diff, max_ref, min_cos);
    assert_true(min_cos > 0.9999);
    assert_true(max_diff < 0.01 * max_ref);
    free(ref);
    free(out);
}

static void test_embeddings_match_reference(void **state)
{
    (void)state;
    const struct clip_synth_params p = synth_params();
    size_t len;
    void *data = synth_file(&p, &len);
    struct clip_qwen2vl *q = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_qwen2vl_load_memory(data, len, &q, &e), ERR_OK);
    assert_int_equal(clip_qwen2vl_get_info(q)->n_out_embd, 128);
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    compare(q, tp, "qa", 64); // 224 x 224: 16 x 16 patches, four 8 x 8 windows
    compare(q, tp, "qz", 35); // 196 x 140 as is: 14 x 10 patches, partial windows
    compare(q, tp, "qb", 35); // 200 x 150 -> 196 x 140: 14 x 10 patches
    threadpool_free(tp);
    clip_qwen2vl_free(q);
    mem_free(data);
}

static void test_image_size_rule(void **state)
{
    (void)state;
    const struct clip_synth_params p = synth_params();
    size_t len;
    void *data = synth_file(&p, &len);
    struct clip_qwen2vl *q = NULL;
    struct errmsg e;
    assert_int_equal(clip_qwen2vl_load_memory(data, len, &q, &e), ERR_OK);
    uint32_t rw, rh;
    int n;
    assert_int_equal(clip_qwen2vl_image_size(q, 200, 150, &rw, &rh, &n), ERR_OK);
    assert_int_equal(rw, 196);
    assert_int_equal(rh, 140);
    // tiny: scaled up to at least 8 tokens' pixels (8 * 28 * 28), aspect kept
    assert_int_equal(clip_qwen2vl_image_size(q, 10, 10, &rw, &rh, &n), ERR_OK);
    assert_true((int64_t)rw * rh >= clip_qwen2vl_get_info(q)->min_px);
    assert_int_equal(rw, rh);
    // huge and thin: scaled down under 4096 tokens, each side at least 28
    assert_int_equal(clip_qwen2vl_image_size(q, 60000, 3, &rw, &rh, &n), ERR_OK);
    assert_true((int64_t)rw * rh <= clip_qwen2vl_get_info(q)->max_px);
    assert_int_equal(rh, 28);
    assert_true(n <= 4096);
    assert_int_equal(clip_qwen2vl_image_size(q, 0, 5, &rw, &rh, &n), ERR_INVALID);
    assert_int_equal(clip_qwen2vl_image_size(q, 70000, 5, &rw, &rh, &n), ERR_INVALID);
    assert_int_equal(clip_qwen2vl_encode(q, NULL, NULL, 30, 28, NULL), ERR_INVALID);
    clip_qwen2vl_free(q);
    mem_free(data);
}

static void test_same_image_any_threads(void **state)
{
    (void)state;
    const struct clip_synth_params p = synth_params();
    size_t len;
    void *data = synth_file(&p, &len);
    struct clip_qwen2vl *q = NULL;
    struct errmsg e;
    assert_int_equal(clip_qwen2vl_load_memory(data, len, &q, &e), ERR_OK);
    struct threadpool *t1 = NULL, *t3 = NULL;
    assert_int_equal(threadpool_new(1, &t1), ERR_OK);
    assert_int_equal(threadpool_new(3, &t3), ERR_OK);
    int n1, n3;
    float *o1 = encode_png(q, t1, "qb", &n1);
    float *o3 = encode_png(q, t3, "qb", &n3);
    assert_int_equal(n1, n3);
    assert_memory_equal(o1, o3, sizeof(float) * (size_t)n1 * 128);
    free(o1);
    free(o3);
    threadpool_free(t1);
    threadpool_free(t3);
    clip_qwen2vl_free(q);
    mem_free(data);
}

static void test_refused_files(void **state)
{
    (void)state;
    struct clip_synth_params p = synth_params();
    struct clip_qwen2vl *q = NULL;
    struct errmsg e;
    size_t len;
    p.projector = "gemma3";
    p.image_size = 28;
    p.n_merge = 1;
    void *data = synth_file(&p, &len);
    assert_int_equal(clip_qwen2vl_load_memory(data, len, &q, &e), ERR_UNSUPPORTED);
    mem_free(data);
    p = synth_params();
    data = synth_file(&p, &len);
    // a truncated file is refused by the GGUF reader, never read past its end
    assert_int_not_equal(clip_qwen2vl_load_memory(data, len / 2, &q, &e), ERR_OK);
    mem_free(data);
    p.n_merge = 3; // the merger is 2 x 2
    struct gguf_writer *w = NULL;
    assert_int_equal(clip_synth_build(&p, &w, &e), ERR_INVALID);
}

static void test_load_fault_injection(void **state)
{
    (void)state;
    const struct clip_synth_params p = synth_params();
    size_t len;
    void *data = synth_file(&p, &len);
    int64_t live = mem_live_count();
    for (int n = 0;; n++) {
        struct clip_qwen2vl *q = NULL;
        struct errmsg e;
        mem_fail_after(n);
        int rc = clip_qwen2vl_load_memory(data, len, &q, &e);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            clip_qwen2vl_free(q);
            break;
        }
        assert_int_equal(rc, ERR_NOMEM);
        assert_int_equal(mem_live_count(), live);
    }
    assert_int_equal(mem_live_count(), live);
    mem_free(data);
}

/* Every allocation of preprocessing and encoding failed in turn: ERR_NOMEM, nothing leaked. */
static void test_encode_fault_injection(void **state)
{
    (void)state;
    const struct clip_synth_params p = synth_params();
    size_t len;
    void *data = synth_file(&p, &len);
    struct clip_qwen2vl *q = NULL;
    struct errmsg e;
    assert_int_equal(clip_qwen2vl_load_memory(data, len, &q, &e), ERR_OK);
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(1, &tp), ERR_OK);
    uint8_t rgb[30 * 20 * 3];
    for (size_t i = 0; i < sizeof rgb; i++)
        rgb[i] = (uint8_t)(i * 7);
    uint32_t rw, rh;
    int n_tok;
    assert_int_equal(clip_qwen2vl_image_size(q, 30, 20, &rw, &rh, &n_tok), ERR_OK);
    float *pix = malloc(sizeof(float) * 3 * rw * rh);
    float *out = malloc(sizeof(float) * (size_t)n_tok * 128);
    const int64_t live = mem_live_count();
    for (int n = 0;; n++) {
        mem_fail_after(n);
        int rc = clip_qwen2vl_preprocess(q, rgb, 30, 20, pix);
        if (rc == ERR_OK) rc = clip_qwen2vl_encode(q, tp, pix, rw, rh, out);
        mem_fail_after(-1);
        assert_int_equal(mem_live_count(), live);
        if (rc == ERR_OK) break;
        assert_int_equal(rc, ERR_NOMEM);
    }
    free(pix);
    free(out);
    threadpool_free(tp);
    clip_qwen2vl_free(q);
    mem_free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embeddings_match_reference),
        cmocka_unit_test(test_image_size_rule),
        cmocka_unit_test(test_same_image_any_threads),
        cmocka_unit_test(test_refused_files),
        cmocka_unit_test(test_load_fault_injection),
        cmocka_unit_test(test_encode_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
