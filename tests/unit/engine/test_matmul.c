/* engine/matmul: the tiled, thread-split product equals a plain loop over vec_dot for every
 * batch size and thread count, is bit-identical across runs, is batch-invariant in its default
 * orders (a token's outputs do not depend on the tokens beside it), and input conversion
 * validates. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/kernels.h"
#include "engine/matmul.h"
#include "engine/quants/quants.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdbool.h>
#include <string.h>

static const uint32_t types[] = {QUANT_F32,  QUANT_F16,  QUANT_BF16, QUANT_Q8_0, QUANT_Q4_0,
                                 QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1, QUANT_Q2_K, QUANT_Q3_K,
                                 QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
#define N_TYPES (sizeof types / sizeof types[0])

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static float rng_float(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) & 0xffffff) / 8388608.0f - 1.0f;
}

struct problem {
    uint32_t type;
    int64_t n_in, n_out, n_tok;
    uint8_t *w;  // n_out rows
    float *xf;   // n_tok x n_in floats
    uint8_t *xq; // n_tok rows in the dot type
    size_t w_row, x_row;
    enum matmul_rule rule;
};

static void problem_make(struct problem *p, uint32_t type, int64_t n_in, int64_t n_out,
                         int64_t n_tok)
{
    const struct quant_traits *tr = quant_traits_of(type);
    p->rule = MATMUL_RULE_PROMPT;
    p->type = type;
    p->n_in = n_in;
    p->n_out = n_out;
    p->n_tok = n_tok;
    assert_int_equal(quant_row_bytes(type, n_in, &p->w_row), ERR_OK);
    p->x_row = matmul_input_row_bytes(type, n_in);
    assert_true(p->x_row > 0);
    p->w = mem_alloc(p->w_row * (size_t)n_out);
    p->xf = mem_alloc(sizeof(float) * (size_t)(n_in * n_tok));
    p->xq = mem_alloc(p->x_row * (size_t)n_tok);
    float *row = mem_alloc(sizeof(float) * (size_t)n_in);
    assert_true(p->w && p->xf && p->xq && row);
    for (int64_t r = 0; r < n_out; r++) {
        for (int64_t i = 0; i < n_in; i++)
            row[i] = rng_float();
        tr->from_float(row, p->w + (size_t)r * p->w_row, n_in);
    }
    for (int64_t i = 0; i < n_in * n_tok; i++)
        p->xf[i] = rng_float() * 2.0f;
    mem_free(row);
}

static void problem_free(struct problem *p)
{
    mem_free(p->w);
    mem_free(p->xf);
    mem_free(p->xq);
}

static void run_split(const struct problem *p, float *y, int nth)
{
    struct matmul_args a = {.w = p->w,
                            .w_type = p->type,
                            .n_in = p->n_in,
                            .n_out = p->n_out,
                            .x = p->xq,
                            .x_row_bytes = p->x_row,
                            .n_tok = p->n_tok,
                            .y = y,
                            .rule = p->rule};
    for (int ith = nth - 1; ith >= 0; ith--) // order must not matter
        matmul_run(&a, ith, nth);
}

/* One output at a time: the single dot, or the 1x1 tile in the product's summation order. */
static void naive(const struct problem *p, float *y)
{
    const struct quant_traits *tr = quant_traits_of(p->type);
    const int order = matmul_order(p->type, p->n_in, p->n_out, p->n_tok, p->rule);
    for (int64_t t = 0; t < p->n_tok; t++)
        for (int64_t r = 0; r < p->n_out; r++) {
            const uint8_t *w = p->w + (size_t)r * p->w_row, *x = p->xq + (size_t)t * p->x_row;
            float *out = &y[t * p->n_out + r];
            if (!tr->vec_dot_tile) {
                tr->vec_dot(p->n_in, out, w, x);
                continue;
            }
            struct quant_tile one = {
                .n = p->n_in, .x = w, .y = x, .s = out, .n_rows = 1, .n_cols = 1, .order = order};
            tr->vec_dot_tile(&one);
        }
}

/* The reference rule follows the reference's kernel choice: float weights use its single-row
 * dot for one token or shapes its batched kernel refuses, Q4_0 its 8-row interleaved kernels.
 * The prompt and sampled rules depend on the weights alone, never on the number of tokens. */
static void test_matmul_order(void **state)
{
    (void)state;
    assert_int_equal(matmul_order(QUANT_F32, 64, 64, 1, MATMUL_RULE_REFERENCE), QUANT_ORDER_VEC);
    assert_int_equal(matmul_order(QUANT_F32, 64, 64, 2, MATMUL_RULE_REFERENCE), QUANT_ORDER_LANES);
    assert_int_equal(matmul_order(QUANT_F16, 172, 64, 5, MATMUL_RULE_REFERENCE), QUANT_ORDER_VEC);
    assert_int_equal(matmul_order(QUANT_F16, 64, 6, 5, MATMUL_RULE_REFERENCE), QUANT_ORDER_VEC);
    assert_int_equal(matmul_order(QUANT_F16, 64, 8, 5, MATMUL_RULE_REFERENCE), QUANT_ORDER_LANES);
    assert_int_equal(matmul_order(QUANT_Q4_0, 64, 64, 1, MATMUL_RULE_REFERENCE),
                     QUANT_ORDER_BLOCKS);
    assert_int_equal(matmul_order(QUANT_Q4_0, 64, 64, 9, MATMUL_RULE_REFERENCE),
                     QUANT_ORDER_BLOCKS);
    assert_int_equal(matmul_order(QUANT_Q4_0, 64, 172, 1, MATMUL_RULE_REFERENCE),
                     QUANT_ORDER_LANES);
    assert_int_equal(matmul_order(QUANT_Q8_0, 64, 64, 1, MATMUL_RULE_REFERENCE), QUANT_ORDER_LANES);
    // BF16 has the reference's two orders only with the vdpbf16ps kernels (BF16 activations)
    if (quant_traits_of(QUANT_BF16)->dot_type == QUANT_BF16) {
        assert_int_equal(matmul_order(QUANT_BF16, 64, 64, 1, MATMUL_RULE_REFERENCE),
                         QUANT_ORDER_VEC);
        assert_int_equal(matmul_order(QUANT_BF16, 64, 64, 2, MATMUL_RULE_REFERENCE),
                         QUANT_ORDER_LANES);
        assert_int_equal(matmul_order(QUANT_BF16, 172, 64, 5, MATMUL_RULE_PROMPT), QUANT_ORDER_VEC);
        assert_int_equal(matmul_order(QUANT_BF16, 64, 6, 5, MATMUL_RULE_PROMPT), QUANT_ORDER_VEC);
        assert_int_equal(matmul_order(QUANT_BF16, 64, 8, 5, MATMUL_RULE_SAMPLED), QUANT_ORDER_VEC);
    } else {
        assert_int_equal(matmul_order(QUANT_BF16, 64, 64, 1, MATMUL_RULE_REFERENCE),
                         QUANT_ORDER_LANES);
    }
    for (size_t k = 0; k < N_TYPES; k++)
        for (int64_t n_out = 6; n_out <= 8; n_out++)
            for (int64_t n_tok = 2; n_tok <= 9; n_tok++)
                for (int rule = MATMUL_RULE_PROMPT; rule <= MATMUL_RULE_SAMPLED; rule++)
                    assert_int_equal(matmul_order(types[k], 64, n_out, n_tok, rule),
                                     matmul_order(types[k], 64, n_out, 1, rule));
    assert_int_equal(matmul_order(QUANT_F32, 64, 64, 1, MATMUL_RULE_PROMPT), QUANT_ORDER_LANES);
    assert_int_equal(matmul_order(QUANT_F32, 64, 64, 5, MATMUL_RULE_SAMPLED), QUANT_ORDER_VEC);
    assert_int_equal(matmul_order(QUANT_F16, 172, 64, 5, MATMUL_RULE_PROMPT), QUANT_ORDER_VEC);
    assert_int_equal(matmul_order(QUANT_Q4_0, 64, 64, 1, MATMUL_RULE_SAMPLED), QUANT_ORDER_BLOCKS);
}

/* Batch invariance: each token of a product of n_tok tokens gets exactly the bits it gets
 * alone (n_tok = 1) under the same rule (prompt, sampled), for every type, shapes with and
 * without tails, and 1 to 3 threads. */
static void test_matmul_batch_invariant(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_TYPES; k++) {
        const struct quant_traits *tr = quant_traits_of(types[k]);
        const int64_t n_in = tr->block_len == 1 ? 72 : 2 * tr->block_len;
        for (int64_t n_out = 13; n_out <= 16; n_out += 3) {
            struct problem p;
            problem_make(&p, types[k], n_in, n_out, 11);
            assert_int_equal(
                matmul_quantize_input(p.xf, 11, n_in, tr->dot_type, p.xq, p.x_row, 0, 1), ERR_OK);
            float all[16 * 11], one[16];
            for (int nth = 1; nth <= 3; nth++) {
                p.rule = (enum matmul_rule)(nth % 2); // PROMPT and SAMPLED
                run_split(&p, all, nth);
                for (int64_t t = 0; t < 11; t++) {
                    struct problem single = p;
                    single.n_tok = 1;
                    single.xq = p.xq + (size_t)t * p.x_row;
                    run_split(&single, one, 1);
                    if (memcmp(one, all + t * n_out, sizeof(float) * (size_t)n_out) != 0)
                        fail_msg("%s %lldx%lld token %lld of 11 (nth %d) differs from alone",
                                 tr->name, (long long)n_out, (long long)n_in, (long long)t, nth);
                }
            }
            problem_free(&p);
        }
    }
}

static void test_matmul_equals_vec_dot_loop(void **state)
{
    (void)state;
    // 13 rows and (float types) 37-wide rows are shapes where the reference's kernels pick
    // another summation order than for 16 rows of 64 (see matmul_order).
    for (size_t k = 0; k < N_TYPES; k++)
        for (int shape = 0; shape < 2; shape++) {
            const struct quant_traits *tr = quant_traits_of(types[k]);
            int64_t n_in = tr->block_len == 1 ? (shape ? 64 : 37) : 2 * tr->block_len;
            const int64_t n_out = shape ? 16 : 13;
            for (int64_t n_tok = 1; n_tok <= 17; n_tok++) {
                struct problem p;
                problem_make(&p, types[k], n_in, n_out, n_tok);
                p.rule = (enum matmul_rule)(n_tok % 3); // every rule, over the range of batch sizes
                for (int nth = 1; nth <= 3; nth++) {
                    for (int ith = 0; ith < nth; ith++)
                        assert_int_equal(matmul_quantize_input(p.xf, n_tok, n_in, tr->dot_type,
                                                               p.xq, p.x_row, ith, nth),
                                         ERR_OK);
                    size_t ny = (size_t)(p.n_out * n_tok);
                    float *y1 = mem_alloc(ny * sizeof(float)), *y2 = mem_alloc(ny * sizeof(float));
                    float *yn = mem_alloc(ny * sizeof(float));
                    assert_true(y1 && y2 && yn);
                    memset(y1, 0xff, ny * sizeof(float)); // NaN: every output must be written
                    run_split(&p, y1, nth);
                    run_split(&p, y2, nth);
                    naive(&p, yn);
                    assert_memory_equal(y1, y2, ny * sizeof(float));
                    for (size_t i = 0; i < ny; i++)
                        if (memcmp(&y1[i], &yn[i], sizeof(float)) != 0)
                            fail_msg("%s n_tok=%lld nth=%d out %zu: %.9g vs %.9g", tr->name,
                                     (long long)n_tok, nth, i, y1[i], yn[i]);
                    mem_free(y1);
                    mem_free(y2);
                    mem_free(yn);
                }
                problem_free(&p);
            }
        }
}

/* Widely spaced activation rows make the token chunks small (a few tokens each), so the
 * chunked loop runs several chunks and must still match the plain loop. */
static void test_matmul_token_chunks(void **state)
{
    (void)state;
    const uint32_t ts[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_F16};
    for (size_t k = 0; k < 3; k++) {
        struct problem p;
        problem_make(&p, ts[k], 256, 11, 10);
        size_t dense = p.x_row;
        p.x_row = 200 * 1024; // 2 tokens per chunk -> rounded up to one tile of tokens
        mem_free(p.xq);
        p.xq = mem_alloc(p.x_row * 10);
        assert_non_null(p.xq);
        const struct quant_traits *tr = quant_traits_of(ts[k]);
        assert_int_equal(matmul_quantize_input(p.xf, 10, 256, tr->dot_type, p.xq, p.x_row, 0, 1),
                         ERR_OK);
        float y[11 * 10], yn[11 * 10];
        run_split(&p, y, 2);
        naive(&p, yn);
        assert_memory_equal(y, yn, sizeof y);
        // a stride below the row size is rejected: nothing is written
        struct matmul_args bad = {.w = p.w,
                                  .w_type = p.type,
                                  .n_in = 256,
                                  .n_out = 11,
                                  .x = p.xq,
                                  .x_row_bytes = dense - 1,
                                  .n_tok = 10,
                                  .y = y};
        memset(y, 0, sizeof y);
        matmul_run(&bad, 0, 1);
        for (size_t i = 0; i < 110; i++)
            assert_true(y[i] == 0.0f);
        problem_free(&p);
    }
}

struct worker {
    struct thread th;
    const struct matmul_args *a;
    int ith, nth;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    matmul_run(w->a, w->ith, w->nth);
    return NULL;
}

/* Real threads writing disjoint rows give the same bits as sequential calls. */
static void test_matmul_threads(void **state)
{
    (void)state;
    struct problem p;
    problem_make(&p, QUANT_Q8_0, 256, 101, 9);
    assert_int_equal(matmul_quantize_input(p.xf, 9, 256, QUANT_Q8_0, p.xq, p.x_row, 0, 1), ERR_OK);
    float y_seq[101 * 9], y_thr[101 * 9];
    run_split(&p, y_seq, 3);
    struct matmul_args a = {.w = p.w,
                            .w_type = p.type,
                            .n_in = p.n_in,
                            .n_out = p.n_out,
                            .x = p.xq,
                            .x_row_bytes = p.x_row,
                            .n_tok = p.n_tok,
                            .y = y_thr};
    struct worker w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (struct worker){.a = &a, .ith = i, .nth = 3};
        assert_int_equal(thread_start(&w[i].th, worker_main, &w[i]), ERR_OK);
    }
    for (int i = 0; i < 3; i++)
        thread_join(&w[i].th);
    assert_memory_equal(y_seq, y_thr, sizeof y_seq);
    problem_free(&p);
}

static void test_quantize_input_validation(void **state)
{
    (void)state;
    float x[64] = {0};
    uint8_t out[128];
    assert_int_equal(matmul_quantize_input(x, 1, 64, QUANT_Q8_0, out, 68, 0, 1), ERR_OK);
    assert_int_equal(matmul_quantize_input(x, 1, 64, QUANT_Q8_0, out, 67, 0, 1), ERR_INVALID);
    assert_int_equal(matmul_quantize_input(x, 1, 48, QUANT_Q8_0, out, 68, 0, 1), ERR_INVALID);
    assert_int_equal(matmul_quantize_input(x, 1, 64, 99, out, 68, 0, 1), ERR_INVALID);
    assert_int_equal(matmul_quantize_input(x, 1, 64, QUANT_Q8_0, out, 68, 1, 1), ERR_INVALID);
    assert_int_equal(matmul_input_row_bytes(QUANT_Q4_0, 64), 68);
    assert_int_equal(matmul_input_row_bytes(QUANT_Q4_1, 64), 72);
    assert_int_equal(matmul_input_row_bytes(QUANT_F16, 5), 20);
    assert_int_equal(matmul_input_row_bytes(QUANT_Q4_0, 40), 0);
    assert_int_equal(matmul_input_row_bytes(QUANT_Q8_1, 64), 0);
    assert_int_equal(matmul_input_row_bytes(1234, 64), 0);
    // empty rows: every output is an empty sum
    float y[6];
    memset(y, 0xff, sizeof y);
    struct matmul_args a = {.w = out,
                            .w_type = QUANT_Q8_0,
                            .n_in = 0,
                            .n_out = 3,
                            .x = out,
                            .x_row_bytes = 0,
                            .n_tok = 2,
                            .y = y};
    matmul_run(&a, 0, 1);
    for (int i = 0; i < 6; i++)
        assert_true(y[i] == 0.0f);
}

static int setup(void **state)
{
    (void)state;
    kernels_init();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_order),
        cmocka_unit_test(test_matmul_equals_vec_dot_loop),
        cmocka_unit_test(test_matmul_batch_invariant),
        cmocka_unit_test(test_matmul_threads),
        cmocka_unit_test(test_matmul_token_chunks),
        cmocka_unit_test(test_quantize_input_validation),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
