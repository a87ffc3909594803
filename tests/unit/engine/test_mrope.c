/* engine M-RoPE (qwen2vl): the rotary positions of an image's merged tokens and the position
 * advance after it against hand-computed values, the angles the decoder turns each section's
 * pairs by, a cache truncation after an image giving back the rotary position a cold
 * sequence has (so a reused prompt prefix continues exactly), and an image fed in two parts
 * keeping its positions. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf_write.h"
#include "engine/gguf/synth.h"
#include "engine/model/model.h"
#include "engine/model/model_arch.h"
#include "engine/model/model_internal.h"
#include "engine/threadpool.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_positions_by_hand(void **state)
{
    (void)state;
    int32_t p[3 * 8];
    // a 3-wide, 2-high image whose first token takes rotary position 5
    model_mrope_positions(5, 6, 3, 0, p);
    const int32_t want[] = {5, 5, 5, 5, 5, 6, 5, 5, 7, 5, 6, 5, 5, 6, 6, 5, 6, 7};
    assert_memory_equal(p, want, sizeof want);
    assert_int_equal(model_mrope_next(5, 6, 3, 2), 8); // by the longer side, not 6 tokens
    // a tall one: 2 wide, 4 high
    model_mrope_positions(10, 8, 2, 0, p);
    const int32_t tall[] = {10, 10, 10, 10, 10, 11, 10, 11, 10, 10, 11, 11,
                            10, 12, 10, 10, 12, 11, 10, 13, 10, 10, 13, 11};
    assert_memory_equal(p, tall, sizeof tall);
    assert_int_equal(model_mrope_next(10, 8, 2, 4), 14);
    // the second part of the tall one (grid indices 5..7) keeps the image's base
    model_mrope_positions(10, 3, 2, 5, p);
    assert_memory_equal(p, tall + 15, 9 * sizeof *p);
    // text counts on in every section
    model_mrope_positions(8, 2, 0, 0, p);
    const int32_t text[] = {8, 8, 8, 9, 9, 9};
    assert_memory_equal(p, text, sizeof text);
    assert_int_equal(model_mrope_next(8, 2, 0, 0), 10);
}

struct fix {
    char path[64];
    struct engine_model *m;
    struct threadpool *tp;
    float *embd; // (6, n_embd) image embeddings
};

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);
    struct synth_params p = synth_params_default();
    p.arch = "qwen2vl";
    p.n_layer = 2;
    p.n_embd = 128;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 256;
    p.n_vocab = synth_builtin_vocab_size("qwen2vl");
    p.n_ctx = 256;
    p.type = "f32";
    p.seed = 3;
    snprintf(f->path, sizeof f->path, "/tmp/test_mrope_XXXXXX");
    int fd = mkstemp(f->path);
    if (fd < 0) return -1;
    close(fd);
    struct gguf_writer *w;
    struct errmsg err = {{0}};
    if (synth_build(&p, &w, &err) != ERR_OK || gguf_writer_to_file(w, f->path, &err) != ERR_OK)
        return -1;
    gguf_writer_free(w);
    if (engine_model_load(f->path, &f->m, &err) != ERR_OK) return -1;
    if (threadpool_new(1, &f->tp) != ERR_OK) return -1;
    f->embd = mem_alloc(6 * 128 * sizeof *f->embd);
    uint32_t x = 12345;
    for (int i = 0; i < 6 * 128; i++) {
        x = x * 1664525u + 1013904223u;
        f->embd[i] = ((float)(x >> 8) / (float)(1u << 24) - 0.5f) * 0.2f;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    mem_free(f->embd);
    threadpool_free(f->tp);
    engine_model_free(f->m);
    unlink(f->path);
    free(f);
    return 0;
}

static const int32_t text_a[] = {1, 290, 261, 262};
static const int32_t text_b[] = {17, 99};

static void decode(struct fix *f, struct engine_seq *s, const int32_t *tok, const float *embd,
                   int n, int gw, int gh)
{
    struct engine_batch_item it = {
        .seq = s, .tokens = tok, .embd = embd, .n_tokens = n, .grid_w = gw, .grid_h = gh};
    struct errmsg err = {{0}};
    if (engine_decode(f->m, f->tp, &it, 1, &err) != ERR_OK) fail_msg("decode: %s", err.msg);
}

/* text, a 3x2 image, text: the logits after it. */
static void image_prompt(struct fix *f, struct engine_seq *s, int gw, int gh, float *out)
{
    engine_seq_truncate(s, 0);
    decode(f, s, text_a, NULL, 4, 0, 0);
    decode(f, s, NULL, f->embd, 6, gw, gh);
    decode(f, s, text_b, NULL, 2, 0, 0);
    memcpy(out, engine_seq_logits(s), (size_t)f->m->info.n_vocab * sizeof *out);
}

static void test_image_angles(void **state)
{
    struct fix *f = *state;
    const struct engine_model *m = f->m;
    assert_true(m->feat.is_mrope);
    // gguf-synth's qwen2vl split of 16 pairs: [4, 6, 6, 0]
    assert_int_equal(m->feat.mrope[0], 4);
    assert_int_equal(m->feat.mrope[1], 6);
    assert_int_equal(m->feat.mrope[2], 6);
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(f->m, 64, &s), ERR_OK);
    decode(f, s, text_a, NULL, 4, 0, 0);
    decode(f, s, NULL, f->embd, 6, 3, 2);
    assert_int_equal(engine_seq_pos(s), 10);
    assert_int_equal(s->rope_pos, 4 + 3);
    // the angles of that decode: token 4 is (y 1, x 1) of the image at base 4, so pairs 0..3
    // turn by 4, pairs 4..9 by 5 (row), pairs 10..15 by 5 (column); token 2 is (0, 2)
    const int half = m->n_rot / 2, stride = half + 1;
    const float ts = powf(m->rope_base, -2.0f / (float)m->n_rot);
    const int pos[6][3] = {{4, 4, 4}, {4, 4, 5}, {4, 4, 6}, {4, 5, 4}, {4, 5, 5}, {4, 5, 6}};
    for (int t = 0; t < 6; t++) {
        float th[3] = {(float)pos[t][0], (float)pos[t][1], (float)pos[t][2]};
        for (int i = 0; i < half; i++) {
            const int sec = i < 4 ? 0 : i < 10 ? 1 : 2;
            assert_float_equal(m->sc.rope_cos[(size_t)t * stride + i], cosf(th[sec]), 1e-6);
            assert_float_equal(m->sc.rope_sin[(size_t)t * stride + i], sinf(th[sec]), 1e-6);
            for (int k = 0; k < 3; k++)
                th[k] *= ts;
        }
    }
    // text after the image counts on from 7 in every section
    decode(f, s, text_b, NULL, 2, 0, 0);
    assert_int_equal(s->rope_pos, 9);
    for (int t = 0; t < 2; t++) {
        float th = (float)(7 + t);
        for (int i = 0; i < half; i++, th *= ts)
            assert_float_equal(m->sc.rope_cos[(size_t)t * stride + i], cosf(th), 1e-6);
    }
    engine_seq_free(s);
}

static void test_truncate_after_image(void **state)
{
    struct fix *f = *state;
    const size_t nv = (size_t)f->m->info.n_vocab;
    float *cold = mem_alloc(nv * sizeof *cold), *other = mem_alloc(nv * sizeof *other);
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(f->m, 64, &s), ERR_OK);
    image_prompt(f, s, 3, 2, cold);
    // cut back to just after the image (a reused prefix) and continue: the same logits
    engine_seq_truncate(s, 10);
    assert_int_equal(s->rope_pos, 7);
    decode(f, s, text_b, NULL, 2, 0, 0);
    assert_memory_equal(engine_seq_logits(s), cold, nv * sizeof *cold);
    engine_seq_truncate(s, 4); // before the image: positions are rows again
    assert_int_equal(s->rope_pos, 4);
    engine_seq_truncate(s, 0);
    assert_int_equal(s->rope_pos, 0);
    // the positions matter: the same embeddings as a 6x1 grid, or as text positions, differ
    image_prompt(f, s, 6, 1, other);
    assert_true(memcmp(other, cold, nv * sizeof *cold) != 0);
    image_prompt(f, s, 0, 0, other);
    assert_true(memcmp(other, cold, nv * sizeof *cold) != 0);
    // the image fed in two parts (4 tokens, then 2 from grid index 4): the same rotary
    // positions, so the same logits up to the summation order of the split products
    engine_seq_truncate(s, 0);
    decode(f, s, text_a, NULL, 4, 0, 0);
    struct engine_batch_item part = {
        .seq = s, .embd = f->embd, .n_tokens = 4, .grid_w = 3, .grid_h = 2};
    struct errmsg err = {{0}};
    assert_int_equal(engine_decode(f->m, f->tp, &part, 1, &err), ERR_OK);
    assert_int_equal(s->rope_pos, 7);
    part.embd = f->embd + 4 * 128;
    part.n_tokens = 2;
    part.grid_first = 4;
    assert_int_equal(engine_decode(f->m, f->tp, &part, 1, &err), ERR_OK);
    assert_int_equal(s->rope_pos, 7);
    const int32_t want4[] = {4, 5, 5, 4, 5, 6}; // grid (1, 1) and (1, 2) at base 4
    assert_memory_equal(f->m->sc.tok_rpos, want4, sizeof want4);
    decode(f, s, text_b, NULL, 2, 0, 0);
    const float *split = engine_seq_logits(s);
    float worst = 0.0f, top = 0.0f;
    for (size_t i = 0; i < nv; i++) {
        worst = fmaxf(worst, fabsf(split[i] - cold[i]));
        top = fmaxf(top, fabsf(cold[i]));
    }
    assert_true(worst <= 1e-4f * top);
    // a grid that does not hold the item's tokens is refused before anything changes
    struct engine_batch_item it = {
        .seq = s, .embd = f->embd, .n_tokens = 6, .grid_w = 2, .grid_h = 2};
    const int before = engine_seq_pos(s);
    assert_int_equal(engine_decode(f->m, f->tp, &it, 1, &err), ERR_INVALID);
    assert_non_null(strstr(err.msg, "6 tokens from index 0 do not fit a 2x2 grid"));
    it.grid_w = 3;
    it.grid_first = 1;
    assert_int_equal(engine_decode(f->m, f->tp, &it, 1, &err), ERR_INVALID);
    it.grid_first = -1;
    assert_int_equal(engine_decode(f->m, f->tp, &it, 1, &err), ERR_INVALID);
    it.grid_first = 0;
    it.grid_h = 0;
    assert_int_equal(engine_decode(f->m, f->tp, &it, 1, &err), ERR_INVALID);
    assert_int_equal(engine_seq_pos(s), before);
    engine_seq_free(s);
    mem_free(cold);
    mem_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_positions_by_hand),
        cmocka_unit_test(test_image_angles),
        cmocka_unit_test(test_truncate_after_image),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
