/* engine/quants: block layouts (hand-built blocks with known values), quantize/dequantize error
 * per type, scalar references against float math, and the AVX2 kernels against the references
 * on odd sizes and unaligned rows. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf.h"
#include "engine/kernels.h"
#include "engine/quants/quants.h"
#include "engine/quants/blocks.h"
#include "engine/quants/quants_ref.h"
#include "engine/quants/quants_repack.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-type bounds, measured on uniform [-1, 1] data with margin:
 * rt = RMS(dequant(quant(x)) - x) / RMS(x); fdot = |vec_dot - x.y| / (|x| |y|), which includes
 * the activation's own quantization. */
struct type_case {
    uint32_t type;
    double rt;
    double fdot;
};

static const struct type_case cases[] = {
    {QUANT_F32, 0.0, 1e-6},      {QUANT_F16, 3e-4, 1e-3},    {QUANT_BF16, 2e-3, 0.01},
    {QUANT_Q8_0, 0.005, 0.004},  {QUANT_Q4_0, 0.085, 0.04},  {QUANT_Q4_1, 0.07, 0.04},
    {QUANT_Q5_0, 0.04, 0.02},    {QUANT_Q5_1, 0.035, 0.015}, {QUANT_Q2_K, 0.25, 0.08},
    {QUANT_Q3_K, 0.135, 0.04},   {QUANT_Q4_K, 0.063, 0.02},  {QUANT_Q5_K, 0.032, 0.01},
    {QUANT_Q6_K, 0.0145, 0.006},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Uniform in [-1, 1). */
static float rng_float(void)
{
    return (float)(rng_u32() & 0xffffff) / 8388608.0f - 1.0f;
}

static void fill_random(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_float() * scale;
}

static size_t row_bytes(uint32_t type, int64_t n)
{
    size_t b = 0;
    assert_int_equal(quant_row_bytes(type, n, &b), ERR_OK);
    return b;
}

/* A quantized row in the given type, allocated at offset `misalign` of its buffer. */
struct qrow {
    uint8_t *buf;
    void *data;
};

static struct qrow qrow_make(const struct quant_traits *tr, uint32_t type, const float *x,
                             int64_t n, size_t misalign)
{
    struct qrow r;
    r.buf = mem_alloc(row_bytes(type, n) + misalign + 1);
    assert_non_null(r.buf);
    r.data = r.buf + misalign;
    tr->from_float(x, r.data, n);
    return r;
}

static void test_type_table(void **state)
{
    (void)state;
    assert_null(quant_traits_of(4)); // removed Q4_2
    assert_null(quant_traits_of(QUANT_TYPE_MAX));
    assert_null(quant_traits_of(UINT32_MAX));
    for (size_t i = 0; i < N_CASES; i++) {
        const struct quant_traits *tr = quant_traits_of(cases[i].type);
        assert_non_null(tr);
        assert_non_null(tr->to_float);
        assert_non_null(tr->from_float);
        assert_non_null(tr->vec_dot);
        const struct quant_traits *dt = quant_traits_of(tr->dot_type);
        assert_non_null(dt);
        assert_non_null(dt->from_float);
        assert_int_equal(tr->block_len % dt->block_len, 0);
    }
    assert_string_equal(quant_traits_of(QUANT_Q4_0)->name, "q4_0");
    assert_int_equal(quant_traits_of(QUANT_Q8_0)->block_bytes, 34);
    assert_int_equal(quant_traits_of(QUANT_Q8_1)->block_bytes, 36);
    assert_null(quant_traits_of(QUANT_Q8_1)->vec_dot);
    size_t b = 7;
    assert_int_equal(quant_row_bytes(QUANT_Q4_0, 64, &b), ERR_OK);
    assert_int_equal(b, 36);
    assert_int_equal(quant_row_bytes(QUANT_F16, 3, &b), ERR_OK);
    assert_int_equal(b, 6);
    b = 7;
    assert_int_equal(quant_row_bytes(QUANT_Q4_0, 33, &b), ERR_INVALID);
    assert_int_equal(quant_row_bytes(QUANT_Q4_0, -32, &b), ERR_INVALID);
    assert_int_equal(quant_row_bytes(99, 32, &b), ERR_INVALID);
    assert_int_equal(quant_row_bytes(QUANT_F32, INT64_MAX, &b), ERR_LIMIT);
    assert_int_equal(b, 7);
}

static void check_values(uint32_t type, const void *blk, const int *idx, const float *want,
                         int n_want)
{
    const struct quant_traits *tr = quant_traits_ref(type);
    assert_non_null(tr);
    float out[256];
    tr->to_float(blk, out, tr->block_len);
    for (int i = 0; i < n_want; i++) {
        if (out[idx[i]] != want[i])
            fail_msg("%s element %d: got %g want %g", tr->name, idx[i], out[idx[i]], want[i]);
    }
}

static void test_known_blocks_32(void **state)
{
    (void)state;
    static const int idx4[] = {0, 16, 1, 17, 15, 31};
    // Q4_0: d = 0.5 (0x3800); x = (q - 8) * d; qs[j] low nibble = elem j, high = elem j + 16
    uint8_t q40[18] = {0x00, 0x38, 0x1f, 0x80};
    q40[17] = 0x4c;
    assert_int_equal(quant_traits_of(QUANT_Q4_0)->block_bytes, sizeof q40);
    check_values(QUANT_Q4_0, q40, idx4, (const float[]){3.5f, -3.5f, -4.0f, 0.0f, 2.0f, -2.0f}, 6);
    // Q4_1: d = 0.5, m = 1.0 (0x3c00); x = q * d + m
    uint8_t q41[20] = {0x00, 0x38, 0x00, 0x3c, 0x1f, 0x80};
    check_values(QUANT_Q4_1, q41, idx4, (const float[]){8.5f, 1.5f, 1.0f, 5.0f, 1.0f, 1.0f}, 6);
    // Q5_0: d = 1, qh bit 0 and bit 17 set; x = q - 16
    uint8_t q50[22] = {0x00, 0x3c, 0x01, 0x00, 0x02, 0x00, 0x0f, 0x30};
    check_values(QUANT_Q5_0, q50, idx4, (const float[]){15.0f, -16.0f, -16.0f, 3.0f, -16, -16}, 6);
    // Q5_1: d = 2 (0x4000), m = -1 (0xbc00), same quants: x = q * 2 - 1
    uint8_t q51[24] = {0x00, 0x40, 0x00, 0xbc, 0x01, 0x00, 0x02, 0x00, 0x0f, 0x30};
    check_values(QUANT_Q5_1, q51, idx4, (const float[]){61.0f, -1.0f, -1.0f, 37.0f, -1, -1}, 6);
    // Q8_0: d = 0.25 (0x3400)
    uint8_t q80[34] = {0x00, 0x34, 0x81, 0x05};
    q80[33] = 0x7f;
    check_values(QUANT_Q8_0, q80, (const int[]){0, 1, 31, 2},
                 (const float[]){-31.75f, 1.25f, 31.75f, 0.0f}, 4);
    // Q8_1: d = 0.5, s ignored by to_float
    uint8_t q81[36] = {0x00, 0x38, 0x00, 0x00, 0xfe};
    check_values(QUANT_Q8_1, q81, (const int[]){0, 1}, (const float[]){-1.0f, 0.0f}, 2);
}

/* A K-quant block against an all-ones Q8_K row: the dot must equal the sum of its values
 * (this exercises the min terms through bsums). */
static void check_k_dot_ones(uint32_t type, const void *blk)
{
    uint8_t ones[292] = {0x00, 0x00, 0x80, 0x3f}; // d = 1.0f
    memset(ones + 4, 1, 256);
    for (int j = 0; j < 16; j++)
        ones[260 + 2 * j] = 16; // bsums, little-endian int16
    float v[256], want = 0, got_ref = 0, got = 0;
    quant_traits_ref(type)->to_float(blk, v, 256);
    for (int i = 0; i < 256; i++)
        want += v[i];
    quant_traits_ref(type)->vec_dot(256, &got_ref, blk, ones);
    quant_traits_of(type)->vec_dot(256, &got, blk, ones);
    assert_float_equal(got_ref, want, 1e-3);
    assert_float_equal(got, want, 1e-3);
}

static void test_known_blocks_k(void **state)
{
    (void)state;
    // Q2_K: scales[16] (lo nibble scale, hi nibble min), qs[64], d = 1, dmin = 0.5
    uint8_t q2[84] = {0x32, 0x15, 0x07};
    q2[8] = 0xf1;
    q2[16 + 0] = 0x07;  // elem 0: bits 0-1 = 3; elem 32: bits 2-3 = 1
    q2[16 + 16] = 0x02; // elem 16
    q2[16 + 32] = 0x03; // elem 128 (second half)
    q2[81] = 0x3c;
    q2[83] = 0x38;
    check_values(QUANT_Q2_K, q2, (const int[]){0, 16, 32, 128, 1},
                 (const float[]){4.5f, 9.5f, 7.0f, -4.5f, -1.5f}, 5);
    check_k_dot_ones(QUANT_Q2_K, q2);
    // Q3_K: hmask[32], qs[64], scales[12] (6-bit, biased 32), d = 1
    uint8_t q3[110] = {0x15}; // hmask[0]: bits 0, 2, 4
    q3[32 + 0] = 0x27;        // elem 0: 3, elem 32: 1, elem 64: 2
    q3[32 + 32] = 0x01;       // elem 128: 1
    q3[96 + 0] = 0x51;        // scale 0 low nibble 1, scale 8 low nibble 5
    q3[96 + 4] = 0x0f;        // scale 4 low nibble 15
    q3[96 + 8] = 0x26;        // high bits: scale 0 -> 2, scale 4 -> 1, scale 8 -> 2
    q3[109] = 0x3c;
    check_values(QUANT_Q3_K, q3, (const int[]){0, 16, 32, 64, 128},
                 (const float[]){3.0f, 128.0f, 96.0f, -2.0f, 5.0f}, 5);
    check_k_dot_ones(QUANT_Q3_K, q3);
    // Q4_K: d = 1, dmin = 0.5, scales[12]: (sc, m) = (2, 3), (5, 1), sub 4 = (33, 17)
    uint8_t q4[144] = {0x00, 0x3c, 0x00, 0x38, 0x82, 0x05, 0, 0, 0x43, 0x01, 0, 0, 0x11};
    q4[16 + 0] = 0x97;  // elem 0 = 7, elem 32 = 9
    q4[16 + 64] = 0x03; // elem 128 = 3
    check_values(QUANT_Q4_K, q4, (const int[]){0, 32, 128, 1, 160},
                 (const float[]){12.5f, 44.5f, 90.5f, -1.5f, 0.0f}, 5);
    check_k_dot_ones(QUANT_Q4_K, q4);
    // Q5_K: as Q4_K plus qh[32]: qh[0] bits 0 and 4 (elems 0, 128), qh[1] bit 0 (elem 1)
    uint8_t q5[176] = {0x00, 0x3c, 0x00, 0x38, 0x82, 0x05, 0, 0, 0x43, 0x01, 0, 0, 0x11};
    q5[16 + 0] = 0x11;
    q5[16 + 1] = 0x01;
    q5[48 + 0] = 0x97;
    q5[48 + 64] = 0x03;
    check_values(QUANT_Q5_K, q5, (const int[]){0, 32, 128, 1},
                 (const float[]){44.5f, 44.5f, 618.5f, 30.5f}, 4);
    check_k_dot_ones(QUANT_Q5_K, q5);
    // Q6_K: ql[128], qh[64], scales[16] (int8), d = 0.5
    uint8_t q6[210] = {0x5a};
    q6[32] = 0x03;
    q6[64] = 0x01;
    q6[128] = 0x1e;
    q6[192 + 0] = 2;
    q6[192 + 1] = 7;
    q6[192 + 2] = 0xfd; // -3
    q6[192 + 4] = 4;
    q6[192 + 8] = 1;
    q6[209] = 0x38;
    check_values(QUANT_Q6_K, q6, (const int[]){0, 32, 64, 96, 16, 128},
                 (const float[]){10.0f, -28.5f, -22.0f, 0.0f, -112.0f, -15.5f}, 6);
    check_k_dot_ones(QUANT_Q6_K, q6);
    // Q8_K: float d, qs[256], bsums[16]
    uint8_t q8k[292] = {0x00, 0x00, 0x00, 0x3f, 0xfd};
    check_values(QUANT_Q8_K, q8k, (const int[]){0, 1}, (const float[]){-1.5f, 0.0f}, 2);
}

static void test_known_floats(void **state)
{
    (void)state;
    const uint16_t h[] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000, 0x3555};
    const float hw[] = {1.0f, -2.0f, 5.9604644775390625e-8f, 65504.0f, -0.0f, 0.333251953125f};
    float out[6];
    quant_traits_ref(QUANT_F16)->to_float(h, out, 6);
    for (int i = 0; i < 6; i++)
        assert_true(out[i] == hw[i]);
    uint16_t back[6];
    quant_traits_ref(QUANT_F16)->from_float(hw, back, 6);
    assert_memory_equal(back, h, sizeof h);
    // round to nearest even, overflow to inf, subnormal rounding
    const float edge[] = {1.0f + 1.0f / 2048.0f, 65520.0f, 2.98023223876953125e-8f,
                          8.940696716308594e-08f};
    const uint16_t edge_want[] = {0x3c00, 0x7c00, 0x0000, 0x0002};
    quant_traits_ref(QUANT_F16)->from_float(edge, back, 4);
    assert_memory_equal(back, edge_want, sizeof edge_want);
    const uint16_t b[] = {0x3f80, 0xc040, 0x4049};
    quant_traits_ref(QUANT_BF16)->to_float(b, out, 3);
    assert_true(out[0] == 1.0f && out[1] == -3.0f && out[2] == 3.140625f);
}

static double rms(const float *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return sqrt(s / (double)n);
}

static void roundtrip_one(const struct type_case *tc, int64_t n)
{
    const struct quant_traits *tr = quant_traits_ref(tc->type);
    float *x = mem_alloc((size_t)n * sizeof(float));
    float *back = mem_alloc((size_t)n * sizeof(float));
    assert_non_null(x);
    assert_non_null(back);
    fill_random(x, n, 1.0f);
    struct qrow q = qrow_make(tr, tc->type, x, n, 0);
    tr->to_float(q.data, back, n);
    for (int64_t i = 0; i < n; i++)
        back[i] -= x[i];
    double err = rms(back, n) / rms(x, n);
    if (getenv("SHOW_ERR")) printf("%s n=%lld rt %.5f\n", tr->name, (long long)n, err);
    if (err > tc->rt)
        fail_msg("%s n=%lld: round-trip error %.5f > %.5f", tr->name, (long long)n, err, tc->rt);
    mem_free(q.buf);
    mem_free(back);
    mem_free(x);
}

static void test_roundtrip_error(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++) {
        int64_t bl = quant_traits_ref(cases[i].type)->block_len;
        bl = bl < 32 ? 32 : bl;
        roundtrip_one(&cases[i], bl);
        roundtrip_one(&cases[i], 3 * bl);
        roundtrip_one(&cases[i], 17 * bl);
    }
}

/* All-zero and constant rows must not produce NaN. */
static void test_degenerate_rows(void **state)
{
    (void)state;
    float x[512], back[512];
    for (size_t i = 0; i < N_CASES; i++) {
        const struct quant_traits *tr = quant_traits_ref(cases[i].type);
        for (int pass = 0; pass < 2; pass++) {
            for (int j = 0; j < 512; j++)
                x[j] = pass == 0 ? 0.0f : 0.75f;
            struct qrow q = qrow_make(tr, cases[i].type, x, 512, 0);
            tr->to_float(q.data, back, 512);
            for (int j = 0; j < 512; j++)
                if (!(fabsf(back[j] - x[j]) <= 0.05f))
                    fail_msg("%s pass %d elem %d: %g", tr->name, pass, j, back[j]);
            mem_free(q.buf);
        }
    }
}

struct dot_data {
    float *w, *a;       // original floats
    float *wd, *ad;     // dequantized
    struct qrow qw, qa; // quantized (weight type, dot type)
};

static void dot_data_make(struct dot_data *d, uint32_t type, int64_t n, size_t mis_w, size_t mis_a)
{
    const struct quant_traits *tr = quant_traits_ref(type);
    const struct quant_traits *dt = quant_traits_ref(tr->dot_type);
    d->w = mem_alloc((size_t)n * sizeof(float));
    d->a = mem_alloc((size_t)n * sizeof(float));
    d->wd = mem_alloc((size_t)n * sizeof(float));
    d->ad = mem_alloc((size_t)n * sizeof(float));
    assert_true(d->w && d->a && d->wd && d->ad);
    fill_random(d->w, n, 1.0f);
    fill_random(d->a, n, 3.0f);
    d->qw = qrow_make(tr, type, d->w, n, mis_w);
    d->qa = qrow_make(dt, tr->dot_type, d->a, n, mis_a);
    tr->to_float(d->qw.data, d->wd, n);
    dt->to_float(d->qa.data, d->ad, n);
}

static void dot_data_free(struct dot_data *d)
{
    mem_free(d->w);
    mem_free(d->a);
    mem_free(d->wd);
    mem_free(d->ad);
    mem_free(d->qw.buf);
    mem_free(d->qa.buf);
}

static bool tr_dot_is_q8_1(const struct quant_traits *tr)
{
    return tr->dot_type == QUANT_Q8_1;
}

static void dot_one(const struct type_case *tc, int64_t n, size_t mis_w, size_t mis_a)
{
    const struct quant_traits *ref = quant_traits_ref(tc->type);
    const struct quant_traits *fast = quant_traits_of(tc->type);
    struct dot_data d;
    dot_data_make(&d, tc->type, n, mis_w, mis_a);
    double exact = 0, deq = 0, mag = 0, nw = 0, na = 0;
    for (int64_t i = 0; i < n; i++) {
        exact += (double)d.w[i] * d.a[i];
        deq += (double)d.wd[i] * d.ad[i];
        mag += fabs((double)d.wd[i] * d.ad[i]);
        nw += (double)d.w[i] * d.w[i];
        na += (double)d.a[i] * d.a[i];
    }
    float s_ref = NAN, s_fast = NAN;
    ref->vec_dot(n, &s_ref, d.qw.data, d.qa.data);
    if (fast->dot_type == ref->dot_type) {
        fast->vec_dot(n, &s_fast, d.qw.data, d.qa.data);
    } else { // AVX-512 BF16: activations in BF16; to within their rounding (2^-8 relative)
        struct qrow qa = qrow_make(quant_traits_of(fast->dot_type), fast->dot_type, d.a, n, mis_a);
        fast->vec_dot(n, &s_fast, d.qw.data, qa.data);
        mem_free(qa.buf);
        if (!(fabs((double)s_fast - s_ref) <= 0x1p-8 * mag + 2e-5 * mag + 1e-6))
            fail_msg("%s n=%lld: simd %.7g vs ref %.7g", ref->name, (long long)n, s_fast, s_ref);
        s_fast = s_ref; // the bound above replaces the order-only one below
    }
    // the reference equals float math on the dequantized rows up to float rounding
    // (Q8_1 stores d * sum(q) as a half, so the min term carries that rounding)
    double deq_tol = tr_dot_is_q8_1(ref) ? 1e-3 : 2e-5;
    if (!(fabs(s_ref - deq) <= deq_tol * mag + 1e-6))
        fail_msg("%s n=%lld: ref %.7g vs dequantized %.7g", ref->name, (long long)n, s_ref, deq);
    // the SIMD kernel equals the reference up to summation order
    if (!(fabs((double)s_fast - s_ref) <= 2e-5 * mag + 1e-6))
        fail_msg("%s n=%lld: simd %.7g vs ref %.7g", ref->name, (long long)n, s_fast, s_ref);
    double rel = fabs(s_ref - exact) / sqrt(nw * na);
    if (getenv("SHOW_ERR")) printf("%s n=%lld fdot %.5f\n", ref->name, (long long)n, rel);
    if (rel > tc->fdot)
        fail_msg("%s n=%lld: dot error %.5f vs float > %.5f", ref->name, (long long)n, rel,
                 tc->fdot);
    dot_data_free(&d);
}

static void test_vec_dot(void **state)
{
    (void)state;
    if (!quant_using_avx2())
        printf("note: no AVX2 on this CPU (or LLAMAPI_NO_SIMD=1); comparing ref with itself\n");
    for (size_t i = 0; i < N_CASES; i++) {
        int64_t bl = quant_traits_ref(cases[i].type)->block_len;
        if (bl == 1) { // float types: lengths that exercise the 8-wide tail
            const int64_t ns[] = {1, 7, 8, 9, 33, 100, 1000};
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
                dot_one(&cases[i], ns[k], k % 2, (k + 1) % 4);
            continue;
        }
        const int64_t mult[] = {1, 2, 3, 7, 28};
        for (size_t k = 0; k < sizeof mult / sizeof mult[0]; k++)
            dot_one(&cases[i], mult[k] * bl, k % 2 ? 1 : 0, k % 3);
    }
}

/* Tiles of every shape equal the single dot bit for bit, streaming (prefetching) or not. */
static void test_vec_dot_tile(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++) {
        const struct quant_traits *tr = quant_traits_of(cases[i].type);
        if (!tr->vec_dot_tile) continue;
        const struct quant_traits *dt = quant_traits_of(tr->dot_type);
        int64_t n = tr->block_len == 1 ? 45 : 3 * tr->block_len;
        size_t wb = row_bytes(cases[i].type, n), ab = row_bytes(tr->dot_type, n);
        uint8_t *w = mem_alloc(4 * wb + 1), *a = mem_alloc(4 * ab + 3);
        float f[1024];
        assert_true(w && a);
        for (int r = 0; r < 4; r++) {
            fill_random(f, n, 1.0f);
            tr->from_float(f, w + 1 + r * wb, n);
            fill_random(f, n, 2.0f);
            dt->from_float(f, a + 3 + r * ab, n);
        }
        for (int k = 0; k < 2 * QUANT_TILE_MAX * QUANT_TILE_MAX; k++) {
            const int nr = k / 2 / QUANT_TILE_MAX + 1, nc = k / 2 % QUANT_TILE_MAX + 1;
            float s[4 * 5];
            struct quant_tile t = {.n = n,
                                   .x = w + 1,
                                   .x_stride = wb,
                                   .y = a + 3,
                                   .y_stride = ab,
                                   .s = s,
                                   .s_stride = 5,
                                   .n_rows = nr,
                                   .n_cols = nc,
                                   .is_stream = k % 2};
            tr->vec_dot_tile(&t);
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) {
                    float one;
                    tr->vec_dot(n, &one, w + 1 + r * wb, a + 3 + c * ab);
                    if (memcmp(&one, &s[c * 5 + r], sizeof one) != 0)
                        fail_msg("%s tile %dx%d%s (%d,%d): %.9g vs %.9g", tr->name, nr, nc,
                                 t.is_stream ? " streaming" : "", r, c, s[c * 5 + r], one);
                }
        }
        mem_free(w);
        mem_free(a);
    }
}

/* The other summation orders (QUANT_ORDER_VEC for float weights, QUANT_ORDER_BLOCKS for Q4_0):
 * every tile shape equals the 1x1 tile bit for bit, and the result stays within float
 * rounding of the scalar reference. Lengths cover the float order's tails (n mod 32 of 0, 3,
 * 4, 7, 12). */
static void test_vec_dot_tile_orders(void **state)
{
    (void)state;
    static const struct {
        uint32_t type;
        int order;
    } cs[] = {{QUANT_F32, QUANT_ORDER_VEC},
              {QUANT_F16, QUANT_ORDER_VEC},
              {QUANT_Q4_0, QUANT_ORDER_BLOCKS}};
    static const int64_t lens[] = {32, 35, 64, 68, 71, 172, 224};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const struct quant_traits *tr = quant_traits_of(cs[i].type);
        const struct quant_traits *ref = quant_traits_ref(cs[i].type);
        if (!tr->vec_dot_tile) continue; // scalar build: orders do not apply
        const struct quant_traits *dt = quant_traits_of(tr->dot_type);
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            const int64_t n = lens[l];
            if (n % tr->block_len) continue;
            size_t wb = row_bytes(cs[i].type, n), ab = row_bytes(tr->dot_type, n);
            uint8_t *w = mem_alloc(4 * wb), *a = mem_alloc(4 * ab);
            float f[256], mag[4][4];
            assert_true(w && a);
            float wf[4][256], af[4][256];
            for (int r = 0; r < 4; r++) {
                fill_random(f, n, 1.0f);
                tr->from_float(f, w + r * wb, n);
                ref->to_float(w + r * wb, wf[r], n);
                fill_random(f, n, 2.0f);
                dt->from_float(f, a + r * ab, n);
                quant_traits_ref(tr->dot_type)->to_float(a + r * ab, af[r], n);
            }
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) {
                    mag[r][c] = 0.0f;
                    for (int64_t j = 0; j < n; j++)
                        mag[r][c] += fabsf(wf[r][j] * af[c][j]);
                }
            for (int nr = 1; nr <= QUANT_TILE_MAX; nr++)
                for (int nc = 1; nc <= QUANT_TILE_MAX; nc++) {
                    float s[4 * 5];
                    struct quant_tile t = {.n = n,
                                           .x = w,
                                           .x_stride = wb,
                                           .y = a,
                                           .y_stride = ab,
                                           .s = s,
                                           .s_stride = 5,
                                           .n_rows = nr,
                                           .n_cols = nc,
                                           .order = cs[i].order};
                    tr->vec_dot_tile(&t);
                    for (int r = 0; r < nr; r++)
                        for (int c = 0; c < nc; c++) {
                            float one, want;
                            struct quant_tile t1 = t;
                            t1.x = w + r * wb;
                            t1.y = a + c * ab;
                            t1.s = &one;
                            t1.n_rows = t1.n_cols = 1;
                            tr->vec_dot_tile(&t1);
                            if (memcmp(&one, &s[c * 5 + r], sizeof one) != 0)
                                fail_msg("%s order %d n=%lld tile %dx%d (%d,%d): %.9g vs %.9g",
                                         tr->name, cs[i].order, (long long)n, nr, nc, r, c,
                                         s[c * 5 + r], one);
                            ref->vec_dot(n, &want, w + r * wb, a + c * ab);
                            if (!(fabsf(one - want) <= 2e-6f * mag[r][c] + 1e-6f))
                                fail_msg("%s order %d n=%lld: %.9g vs ref %.9g", tr->name,
                                         cs[i].order, (long long)n, one, want);
                        }
                }
            mem_free(w);
            mem_free(a);
        }
    }
}

/* The stories260K files were quantized by llama.cpp from the F32 file: dequantized tensors
 * must be close to it, and re-quantizing the F32 data must reproduce the file's bytes (the
 * 32-element formats use ggml's reference rounding, which we follow). */
static void cross_check_file(const struct gguf *f32, const char *path, int64_t *n_checked)
{
    struct gguf *q = NULL;
    struct errmsg err;
    assert_int_equal(gguf_open(path, &q, &err), ERR_OK);
    for (int64_t i = 0; i < gguf_tensor_count(q); i++) {
        const struct gguf_tensor *tq = gguf_tensor_at(q, i);
        if (tq->type == QUANT_F32) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const struct gguf_tensor *tf = gguf_find_tensor(f32, name);
        assert_non_null(tf);
        assert_int_equal(tf->type, QUANT_F32);
        const struct quant_traits *tr = quant_traits_ref(tq->type);
        assert_non_null(tr);
        int64_t n = 1;
        for (int d = 0; d < tq->n_dims; d++)
            n *= tq->ne[d];
        float *deq = mem_alloc((size_t)n * sizeof(float));
        float *src = mem_alloc((size_t)n * sizeof(float));
        uint8_t *requant = mem_alloc(tq->size);
        assert_true(deq && src && requant);
        memcpy(src, tf->data, (size_t)n * sizeof(float));
        tr->to_float(tq->data, deq, n);
        tr->from_float(src, requant, n);
        for (int64_t e = 0; e < n; e++)
            deq[e] -= src[e];
        double rel = rms(deq, n) / rms(src, n);
        double bound = 0.0; // trained weights have heavier tails than uniform data: 1.5x
        for (size_t c = 0; c < N_CASES; c++)
            if (cases[c].type == tq->type) bound = 1.5 * cases[c].rt;
        if (getenv("SHOW_ERR"))
            printf("%s %s %s rel %.5f bytes %s\n", path, name, tr->name, rel,
                   memcmp(requant, tq->data, tq->size) == 0 ? "same" : "DIFF");
        else if (rel > bound)
            fail_msg("%s %s: dequantized error %.5f > %.5f", path, name, rel, bound);
        if (!getenv("SHOW_ERR") && memcmp(requant, tq->data, tq->size) != 0)
            fail_msg("%s %s: re-quantized bytes differ from the file", path, name);
        (*n_checked)++;
        mem_free(deq);
        mem_free(src);
        mem_free(requant);
    }
    gguf_close(q);
}

static void test_cross_check_stories260k(void **state)
{
    (void)state;
    const char *dir = "../shared/models/llama/";
    char path[256];
    struct gguf *f32 = NULL;
    struct errmsg err;
    snprintf(path, sizeof path, "%sstories260K.gguf", dir);
    if (gguf_open(path, &f32, &err) != ERR_OK) {
        printf("skip: %s not available\n", path);
        skip();
    }
    static const char *const variants[] = {"F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"};
    int64_t n_checked = 0;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        snprintf(path, sizeof path, "%sstories260K-%s.gguf", dir, variants[v]);
        cross_check_file(f32, path, &n_checked);
    }
    printf("cross-checked %lld tensors\n", (long long)n_checked);
    assert_true(n_checked > 100);
    gguf_close(f32);
}

/* The AVX-VNNI dots compute the same int32 lane sums as the AVX2 ones, so they agree bit for
 * bit on every tile shape. */
static void test_vnni_equals_avx2(void **state)
{
    (void)state;
    if (!quant_traits_simd(QUANT_Q8_0, QUANT_SIMD_AVX2_VNNI)) {
        printf("skip: no AVX-VNNI on this CPU\n");
        skip();
    }
    static const uint32_t types[] = {QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1, QUANT_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const struct quant_traits *a = quant_traits_simd(types[i], QUANT_SIMD_AVX2);
        const struct quant_traits *v = quant_traits_simd(types[i], QUANT_SIMD_AVX2_VNNI);
        const struct quant_traits *dt = quant_traits_ref(a->dot_type);
        const int64_t n = 7 * 32;
        size_t wb = row_bytes(types[i], n), ab = row_bytes(a->dot_type, n);
        uint8_t *w = mem_alloc(4 * wb), *y = mem_alloc(4 * ab);
        float f[7 * 32];
        assert_true(w && y);
        for (int r = 0; r < 4; r++) {
            fill_random(f, n, r == 3 ? 100.0f : 1.0f); // includes +-127 quants
            a->from_float(f, w + r * wb, n);
            fill_random(f, n, 5.0f);
            dt->from_float(f, y + r * ab, n);
        }
        float sa[16], sv[16];
        struct quant_tile t = {.n = n,
                               .x = w,
                               .x_stride = wb,
                               .y = y,
                               .y_stride = ab,
                               .s = sa,
                               .s_stride = 4,
                               .n_rows = 4,
                               .n_cols = 4};
        a->vec_dot_tile(&t);
        t.s = sv;
        v->vec_dot_tile(&t);
        assert_memory_equal(sa, sv, sizeof sa);
        v->vec_dot(n, &sv[0], w + 2 * wb, y + ab);
        assert_memory_equal(&sa[1 * 4 + 2], &sv[0], sizeof(float));
        mem_free(w);
        mem_free(y);
    }
}

/* The SIMD activation quantizers write the same bytes as the references, ties included. */
static void test_from_float_simd_matches_ref(void **state)
{
    (void)state;
    float x[32 * 40];
    fill_random(x, 32 * 40, 4.0f);
    for (int j = 0; j < 32; j++) // block 0: amax 127 -> d = 1, halves are exact ties
        x[j] = j == 0 ? 127.0f : (float)(j - 16) + 0.5f;
    for (int j = 32; j < 64; j++) // block 1: all zero
        x[j] = 0.0f;
    x[64] = 1e-30f;  // block 2: tiny scale
    x[300] = -50.0f; // Q8_K block 1: +-50 both present; the first one sets the sign
    x[400] = 50.0f;
    const uint32_t ts[] = {QUANT_Q8_0, QUANT_Q8_1, QUANT_Q8_K, QUANT_F16, QUANT_BF16};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        int64_t n = ts[k] == QUANT_Q8_K ? 256 * 5 : 32 * 40;
        uint8_t a[2600], b[2600];
        memset(a, 0xaa, sizeof a);
        memset(b, 0x55, sizeof b);
        quant_traits_ref(ts[k])->from_float(x, a, n);
        quant_traits_of(ts[k])->from_float(x, b, n);
        assert_memory_equal(a, b, row_bytes(ts[k], n));
    }
}

/* Random rows for the set tests: n_rows weight rows of type and n_cols activation rows in its
 * dot format (as the engine quantizes them), each at an odd offset of its buffer; the last
 * weight row 100x larger so the extreme quants appear. */
struct mats {
    int64_t n;
    size_t wb, ab;
    uint8_t *wbuf, *abuf;
    const uint8_t *w, *a;
};

static void quantize_act(uint32_t dot_type, const float *f, void *out, int64_t n)
{
    if (dot_type == QUANT_Q8_0)
        quant_q8_0_activations(f, out, n);
    else if (dot_type == QUANT_Q8_1)
        quant_q8_1_activations(f, out, n);
    else
        quant_traits_ref(dot_type)->from_float(f, out, n);
}

static struct mats mats_make(uint32_t type, int64_t n, int n_rows, int n_cols)
{
    const struct quant_traits *tr = quant_traits_ref(type);
    struct mats m = {.n = n, .wb = row_bytes(type, n), .ab = row_bytes(tr->dot_type, n)};
    m.wbuf = mem_alloc(m.wb * (size_t)n_rows + 1);
    m.abuf = mem_alloc(m.ab * (size_t)n_cols + 3);
    float *f = mem_alloc((size_t)n * sizeof *f);
    assert_true(m.wbuf && m.abuf && f);
    for (int r = 0; r < n_rows; r++) {
        fill_random(f, n, r == n_rows - 1 ? 100.0f : 1.0f);
        tr->from_float(f, m.wbuf + 1 + r * m.wb, n);
    }
    for (int c = 0; c < n_cols; c++) {
        fill_random(f, n, 3.0f);
        quantize_act(tr->dot_type, f, m.abuf + 3 + c * m.ab, n);
    }
    m.w = m.wbuf + 1;
    m.a = m.abuf + 3;
    mem_free(f);
    return m;
}

/* sum |x_i y_i| of the dequantized rows: the scale of the rounding tolerance. */
static double dot_mag(uint32_t type, const uint8_t *w, const uint8_t *a, int64_t n)
{
    const struct quant_traits *tr = quant_traits_ref(type);
    float *x = mem_alloc((size_t)n * sizeof *x), *y = mem_alloc((size_t)n * sizeof *y);
    assert_true(x && y);
    tr->to_float(w, x, n);
    quant_traits_ref(tr->dot_type)->to_float(a, y, n);
    double mag = 0;
    for (int64_t i = 0; i < n; i++)
        mag += fabs((double)x[i] * y[i]);
    mem_free(x);
    mem_free(y);
    return mag;
}

/* Every tile shape from 1x1 to max_r x max_c equals the set's 1x1 tile (in summation order
 * `order`) bit for bit. */
static void check_tiles(const struct quant_traits *tr, const struct mats *m, int max_r, int max_c,
                        int order)
{
    float s[QUANT_TILE_COLS_MAX * QUANT_TILE_ROWS_MAX];
    for (int nr = 1; nr <= max_r; nr++)
        for (int nc = 1; nc <= max_c; nc++) {
            struct quant_tile t = {.n = m->n,
                                   .x = m->w,
                                   .x_stride = m->wb,
                                   .y = m->a,
                                   .y_stride = m->ab,
                                   .s = s,
                                   .s_stride = (size_t)max_r,
                                   .n_rows = nr,
                                   .n_cols = nc,
                                   .order = order,
                                   .is_stream = (nr + nc) % 2};
            tr->vec_dot_tile(&t);
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) {
                    float one;
                    struct quant_tile t1 = {.n = m->n,
                                            .x = m->w + r * m->wb,
                                            .y = m->a + c * m->ab,
                                            .s = &one,
                                            .n_rows = 1,
                                            .n_cols = 1,
                                            .order = order};
                    tr->vec_dot_tile(&t1);
                    if (memcmp(&one, &s[c * max_r + r], sizeof one) != 0)
                        fail_msg("%s n=%lld order %d tile %dx%d (%d,%d): %.9g vs single %.9g",
                                 tr->name, (long long)m->n, order, nr, nc, r, c, s[c * max_r + r],
                                 one);
                }
        }
}

/* One kernel set against the scalar references: for every type and row lengths with tails,
 * each single dot within float rounding of the reference's (2e-5 of sum |x_i y_i|), and every
 * tile shape the set takes (its named tile, at least QUANT_TILE_MAX square) equal to the 1x1
 * tile bit for bit, in the default and (F32/F16 weights) the single-row order; AVX-512 also
 * equals AVX2 bit for bit in every summation order. A set this CPU cannot run is reported
 * skipped. */
static void check_set(enum quant_simd set, const char *name)
{
    if (!quant_traits_simd(QUANT_F32, set)) {
        printf("skip: the %s kernel set needs CPU features this machine lacks\n", name);
        skip();
    }
    for (size_t i = 0; i < N_CASES; i++) {
        const struct quant_traits *tr = quant_traits_simd(cases[i].type, set);
        const struct quant_traits *ref = quant_traits_ref(cases[i].type);
        if (tr->dot_type != ref->dot_type) continue; // AVX-512 BF16: test_avx512_bf16
        const int64_t bl = ref->block_len;
        const int64_t ns[] = {bl == 1 ? 37 : bl, bl == 1 ? 100 : 3 * bl, bl == 1 ? 1000 : 9 * bl,
                              bl == 1 ? 1027 : 10 * bl};
        const int max_r = tr->tile_rows > QUANT_TILE_MAX ? tr->tile_rows : QUANT_TILE_MAX;
        const int max_c = tr->tile_cols > QUANT_TILE_MAX ? tr->tile_cols : QUANT_TILE_MAX;
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            struct mats m = mats_make(cases[i].type, ns[k], max_r, max_c);
            for (int r = 0; r < max_r; r++)
                for (int c = 0; c < max_c; c++) {
                    const uint8_t *w = m.w + r * m.wb, *a = m.a + c * m.ab;
                    float s_ref, s_set;
                    ref->vec_dot(m.n, &s_ref, w, a);
                    tr->vec_dot(m.n, &s_set, w, a);
                    double tol = 2e-5 * dot_mag(cases[i].type, w, a, m.n) + 1e-6;
                    if (!(fabs((double)s_set - s_ref) <= tol))
                        fail_msg("%s %s n=%lld (%d,%d): %.9g vs ref %.9g", name, tr->name,
                                 (long long)m.n, r, c, s_set, s_ref);
                    // AVX-512 follows the AVX2 arithmetic: the same bits, in every order
                    const struct quant_traits *a2 =
                        quant_traits_simd(cases[i].type, QUANT_SIMD_AVX2);
                    for (int order = 0; set == QUANT_SIMD_AVX512 && order < 3; order++) {
                        float s2[2];
                        struct quant_tile one = {.n = m.n,
                                                 .x = w,
                                                 .y = a,
                                                 .s = s2,
                                                 .n_rows = 1,
                                                 .n_cols = 1,
                                                 .order = order};
                        a2->vec_dot_tile(&one);
                        one.s = s2 + 1;
                        tr->vec_dot_tile(&one);
                        if (memcmp(&s2[0], &s2[1], sizeof(float)) != 0)
                            fail_msg("%s n=%lld order %d (%d,%d): avx512 %.9g vs avx2 %.9g",
                                     tr->name, (long long)m.n, order, r, c, s2[1], s2[0]);
                    }
                }
            if (tr->vec_dot_tile) check_tiles(tr, &m, max_r, max_c, 0);
            if (tr->vec_dot_tile && bl == 1 && cases[i].type != QUANT_BF16)
                check_tiles(tr, &m, max_r, max_c, QUANT_ORDER_VEC);
            mem_free(m.wbuf);
            mem_free(m.abuf);
        }
    }
}

static void test_set_avx2(void **state)
{
    (void)state;
    check_set(QUANT_SIMD_AVX2, "avx2");
}

static void test_set_avx2_vnni(void **state)
{
    (void)state;
    check_set(QUANT_SIMD_AVX2_VNNI, "avx2+vnni");
}

static void test_set_avx512(void **state)
{
    (void)state;
    check_set(QUANT_SIMD_AVX512, "avx512");
}

/* The Q8_0_S activations: the SIMD quantizer writes the reference's bytes, and its quants and
 * scale are those of the engine's Q8_0 activations (ties to even), with the offset sums. */
static void test_q8_0s_activations(void **state)
{
    (void)state;
    enum { N = 32 * 20 };
    float x[N];
    fill_random(x, N, 4.0f);
    for (int j = 0; j < 32; j++) // block 0: exact ties
        x[j] = j == 0 ? 127.0f : (float)(j % 2 ? j : -j) + 0.5f;
    for (int j = 32; j < 64; j++) // block 1: zero
        x[j] = 0.0f;
    struct block_q8_0s r[N / 32], v[N / 32];
    struct block_q8_0 q[N / 32];
    quant_traits_ref(QUANT_Q8_0_S)->from_float(x, r, N);
    q8_0_activations_ref(x, q, N);
    for (int i = 0; i < N / 32; i++) {
        int sum = 0;
        for (int k = 0; k < 8; k++) {
            int part = 0;
            for (int j = 4 * k; j < 4 * k + 4; j++)
                part += r[i].qs[j];
            assert_int_equal(r[i].c128[k], -128 * part);
            sum += part;
        }
        assert_int_equal(r[i].c8, -8 * sum);
        assert_memory_equal(r[i].qs, q[i].qs, 32);
        assert_true(r[i].d == half_to_f32(q[i].d));
    }
    const enum quant_simd sets[] = {QUANT_SIMD_AVX2, QUANT_SIMD_AVX512};
    int n_run = 0;
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        const struct quant_traits *t = quant_traits_simd(QUANT_Q8_0_S, sets[k]);
        if (!t) continue;
        memset(v, 0, sizeof v);
        t->from_float(x, v, N);
        assert_memory_equal(r, v, sizeof r);
        n_run++;
    }
    if (n_run == 0) {
        printf("skip: no x86 SIMD on this CPU (the reference quantizer was checked)\n");
        skip();
    }
}

/* The 16-row interleaved Q8_0 / Q4_0 / Q5_0 tiles of one kernel set: 64 rows repacked, 8
 * tokens, row lengths 32..896; each output within float rounding of the scalar dot of the
 * original row and bit for bit the AVX2 kernel's (in the order matmul picks for such a matrix:
 * QUANT_ORDER_BLOCKS for Q4_0, LANES for Q8_0 and Q5_0), and every tile shape (1..4 groups x
 * 1..8 tokens, from any group) gives the bits of the 16 x 1 tile. */
static void check_repacked(enum quant_simd set, const uint32_t *types, const uint32_t *repacked,
                           size_t n_types)
{
    const int64_t ns[] = {32, 96, 896};
    enum { R = 64, C = 8 };
    for (size_t ti = 0; ti < n_types; ti++)
        for (size_t k = 0; k < 3; k++) {
            const uint32_t rt = repacked[ti];
            const struct quant_traits *tr = quant_traits_simd(rt, set);
            const struct quant_traits *ref = quant_traits_ref(types[ti]);
            struct mats m = mats_make(types[ti], ns[k], R, C);
            const size_t sb = row_bytes(QUANT_Q8_0_S, m.n);
            uint8_t *packed = mem_alloc(m.wb * R), *acts = mem_alloc(sb * C);
            float *f = mem_alloc((size_t)m.n * sizeof *f);
            assert_true(packed && acts && f);
            if (rt == QUANT_Q8_0_R16)
                q8_0_repack_r16(m.w, packed, R, m.n);
            else if (rt == QUANT_Q4_0_R16)
                q4_0_repack_r16(m.w, packed, R, m.n);
            else
                q5_0_repack_r16(m.w, packed, R, m.n);
            for (int c = 0; c < C; c++) { // the same activations as m.a, in Q8_0_S
                quant_traits_ref(QUANT_Q8_0)->to_float(m.a + c * m.ab, f, m.n);
                quant_traits_simd(QUANT_Q8_0_S, set)->from_float(f, acts + c * sb, m.n);
            }
            float base[C][R], s[C][R];
            for (int g = 0; g < R / 16; g++)
                for (int c = 0; c < C; c++) {
                    struct quant_tile t = {.n = m.n,
                                           .x = packed + 16 * g * m.wb,
                                           .x_stride = m.wb,
                                           .y = acts + c * sb,
                                           .y_stride = sb,
                                           .s = &base[c][16 * g],
                                           .s_stride = R,
                                           .n_rows = 16,
                                           .n_cols = 1};
                    tr->vec_dot_tile(&t);
                }
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) {
                    float want;
                    ref->vec_dot(m.n, &want, m.w + r * m.wb, m.a + c * m.ab);
                    double tol = 2e-5 * dot_mag(types[ti], m.w + r * m.wb, m.a + c * m.ab, m.n);
                    if (!(fabs((double)base[c][r] - want) <= tol + 1e-6))
                        fail_msg("%s n=%lld (%d,%d): %.9g vs ref %.9g", tr->name, (long long)m.n, r,
                                 c, base[c][r], want);
                    const struct quant_traits *a2 = quant_traits_simd(types[ti], QUANT_SIMD_AVX2);
                    struct quant_tile one = {.n = m.n,
                                             .x = m.w + r * m.wb,
                                             .y = m.a + c * m.ab,
                                             .s = &want,
                                             .n_rows = 1,
                                             .n_cols = 1,
                                             .order = types[ti] == QUANT_Q4_0 ? QUANT_ORDER_BLOCKS
                                                                              : QUANT_ORDER_LANES};
                    a2->vec_dot_tile(&one);
                    if (memcmp(&want, &base[c][r], sizeof want) != 0)
                        fail_msg("%s n=%lld (%d,%d): %.9g vs avx2 %.9g", tr->name, (long long)m.n,
                                 r, c, base[c][r], want);
                }
            for (int g0 = 0; g0 < R / 16; g0++)
                for (int ng = 1; g0 + ng <= R / 16; ng++)
                    for (int nc = 1; nc <= C; nc++) {
                        struct quant_tile t = {.n = m.n,
                                               .x = packed + 16 * g0 * m.wb,
                                               .x_stride = m.wb,
                                               .y = acts,
                                               .y_stride = sb,
                                               .s = &s[0][16 * g0],
                                               .s_stride = R,
                                               .n_rows = 16 * ng,
                                               .n_cols = nc,
                                               .is_stream = nc % 2};
                        tr->vec_dot_tile(&t);
                        for (int c = 0; c < nc; c++)
                            if (memcmp(&s[c][16 * g0], &base[c][16 * g0],
                                       16 * (size_t)ng * sizeof(float)) != 0)
                                fail_msg("%s n=%lld tile %dx%d from group %d differs", tr->name,
                                         (long long)m.n, 16 * ng, nc, g0);
                    }
            mem_free(f);
            mem_free(packed);
            mem_free(acts);
            mem_free(m.wbuf);
            mem_free(m.abuf);
        }
}

static void test_avx512_repacked(void **state)
{
    (void)state;
    const struct quant_traits *t8 = quant_traits_simd(QUANT_Q8_0_R16, QUANT_SIMD_AVX512);
    if (!t8 || !t8->vec_dot_tile) {
        printf("skip: no AVX-512 VNNI on this CPU: the repacked kernels are not run\n");
        skip();
    }
    const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_0, QUANT_Q5_0};
    const uint32_t repacked[] = {QUANT_Q8_0_R16, QUANT_Q4_0_R16, QUANT_Q5_0_R16};
    check_repacked(QUANT_SIMD_AVX512, types, repacked, 3);
}

/* The AVX2 sets repack Q4_0 alone (x86/quants_r16_avx2.c). */
static void test_avx2_repacked(void **state)
{
    (void)state;
    if (!quant_traits_simd(QUANT_Q4_0_R16, QUANT_SIMD_AVX2)) {
        printf("skip: no AVX2 on this CPU: the repacked Q4_0 kernel is not run\n");
        skip();
    }
    const uint32_t types[] = {QUANT_Q4_0};
    const uint32_t repacked[] = {QUANT_Q4_0_R16};
    check_repacked(QUANT_SIMD_AVX2, types, repacked, 1);
    if (quant_traits_simd(QUANT_Q4_0_R16, QUANT_SIMD_AVX2_VNNI))
        check_repacked(QUANT_SIMD_AVX2_VNNI, types, repacked, 1);
    const struct quant_traits *q8 = quant_traits_simd(QUANT_Q8_0_R16, QUANT_SIMD_AVX2);
    assert_true(q8 == NULL || q8->vec_dot_tile == NULL); // Q8_0 keeps the file's layout there
}

/* Q8_0 and Q5_0 weights at the formats' extremes (every quant -128 / -16, d 1) against
 * activations of -127 (d 1): the largest lane sums the integer dots form (a Q8_0 lane reaches
 * 4 * 128 * 127, past int16), which every x86 set must hold exactly, in the file's layout and
 * repacked 16 rows at a time. */
/* Runs tile t with tr and fails unless each of its outputs is want. */
static void run_expect(const struct quant_traits *tr, struct quant_tile *t, float want, int set)
{
    tr->vec_dot_tile(t);
    for (int r = 0; r < t->n_rows; r++)
        for (int c = 0; c < t->n_cols; c++)
            if (t->s[c * t->s_stride + r] != want)
                fail_msg("%s set %d n=%lld: %.9g, want %.9g", tr->name, set, (long long)t->n,
                         t->s[c * t->s_stride + r], want);
}

static void check_extremes(enum quant_simd set, uint32_t type, int64_t n)
{
    enum { R = 16, C = 4 };
    const bool is_q8 = type == QUANT_Q8_0;
    const size_t bb = is_q8 ? sizeof(struct block_q8_0) : sizeof(struct block_q5_0);
    const size_t wb = (size_t)(n / 32) * bb, ab = row_bytes(QUANT_Q8_0, n);
    const size_t sb = row_bytes(QUANT_Q8_0_S, n);
    uint8_t *w = mem_alloc(R * wb), *packed = mem_alloc(R * wb);
    uint8_t *a = mem_alloc(C * ab), *as = mem_alloc(C * sb);
    float *f = mem_alloc((size_t)n * sizeof *f);
    assert_true(w && packed && a && as && f);
    for (int64_t b = 0; b < R * n / 32; b++) {
        uint8_t *blk = w + (size_t)b * bb;
        const uint16_t one = 0x3c00;
        memcpy(blk, &one, 2);
        memset(blk + 2, is_q8 ? 0x80 : 0x00, bb - 2); // q = -128, or nibbles and fifth bits 0
    }
    for (int64_t j = 0; j < n; j++)
        f[j] = -127.0f;
    for (int c = 0; c < C; c++) {
        quant_traits_ref(QUANT_Q8_0)->from_float(f, a + c * ab, n);
        quant_traits_simd(QUANT_Q8_0_S, set)->from_float(f, as + c * sb, n);
    }
    const float want = (float)n * 127.0f * (is_q8 ? 128.0f : 16.0f);
    float s[C][R];
    struct quant_tile t = {.n = n,
                           .x = w,
                           .x_stride = wb,
                           .y = a,
                           .y_stride = ab,
                           .s = &s[0][0],
                           .s_stride = R,
                           .n_rows = QUANT_TILE_MAX,
                           .n_cols = QUANT_TILE_MAX};
    run_expect(quant_traits_simd(type, set), &t, want, set);
    const uint32_t rt = quant_r16_packed_type(type);
    const struct quant_traits *rtr = quant_traits_simd(rt, set);
    if (rtr && rtr->vec_dot_tile) { // else this set keeps the file's layout
        assert_int_equal(quant_r16_repack(rt, w, packed, R, n), ERR_OK);
        t = (struct quant_tile){.n = n,
                                .x = packed,
                                .x_stride = wb,
                                .y = as,
                                .y_stride = sb,
                                .s = &s[0][0],
                                .s_stride = R,
                                .n_rows = R,
                                .n_cols = C};
        run_expect(rtr, &t, want, set);
    }
    mem_free(f);
    mem_free(as);
    mem_free(a);
    mem_free(packed);
    mem_free(w);
}

static void test_q32_extremes(void **state)
{
    (void)state;
    const enum quant_simd sets[] = {QUANT_SIMD_AVX2, QUANT_SIMD_AVX2_VNNI, QUANT_SIMD_AVX512};
    int n_run = 0;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        if (!quant_traits_simd(QUANT_Q8_0, sets[i])) {
            printf("skip: kernel set %d (not on this CPU)\n", (int)sets[i]);
            continue;
        }
        for (int64_t n = 32; n <= 896; n += 864) {
            check_extremes(sets[i], QUANT_Q8_0, n);
            check_extremes(sets[i], QUANT_Q5_0, n);
        }
        n_run++;
    }
    if (n_run == 0) {
        printf("skip: no x86 SIMD on this CPU\n");
        skip();
    }
}

/* A repacked matrix gives back every row: each block of each row unpacked from its group is
 * the file's block byte for byte, and quant_get_row of the repacked type equals the file
 * type's row bit for bit (the embedding lookup of a tied, repacked output matrix). The layout
 * is data: checked whatever kernel set runs. */
static void test_repacked_rows(void **state)
{
    (void)state;
    static const struct {
        uint32_t type, repacked;
        void (*repack)(const void *, void *, int64_t, int64_t);
    } cs[] = {{QUANT_Q8_0, QUANT_Q8_0_R16, q8_0_repack_r16},
              {QUANT_Q4_0, QUANT_Q4_0_R16, q4_0_repack_r16},
              {QUANT_Q5_0, QUANT_Q5_0_R16, q5_0_repack_r16},
              {QUANT_Q4_K, QUANT_Q4_K_R16, q4_K_repack_r16},
              {QUANT_Q6_K, QUANT_Q6_K_R16, q6_K_repack_r16}};
    enum { R = 32, N = 512 };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const struct quant_traits *ref = quant_traits_ref(cs[i].type);
        const size_t wb = row_bytes(cs[i].type, N), bb = ref->block_bytes;
        uint8_t *w = mem_alloc(R * wb), *packed = mem_alloc(R * wb);
        float f[N], want[N], got[N];
        assert_true(w && packed);
        for (int r = 0; r < R; r++) {
            fill_random(f, N, 1.0f + (float)r);
            ref->from_float(f, w + r * wb, N);
        }
        cs[i].repack(w, packed, R, N);
        for (int r = 0; r < R; r++) {
            for (int64_t b = 0; b < N / ref->block_len; b++) {
                uint8_t blk[256];
                assert_true(bb <= sizeof blk);
                quant_r16_unpack_block(cs[i].repacked, packed + (r / 16) * 16 * wb + b * 16 * bb,
                                       r % 16, blk);
                if (memcmp(blk, w + r * wb + b * bb, bb) != 0)
                    fail_msg("%s row %d block %lld unpacks to other bytes", ref->name, r,
                             (long long)b);
            }
            assert_int_equal(quant_get_row(cs[i].type, w, r, N, want), ERR_OK);
            assert_int_equal(quant_get_row(cs[i].repacked, packed, r, N, got), ERR_OK);
            if (memcmp(want, got, sizeof want) != 0)
                fail_msg("%s row %d: quant_get_row differs after repacking", ref->name, r);
        }
        assert_int_equal(quant_get_row(cs[i].repacked, packed, -1, N, got), ERR_INVALID);
        assert_int_equal(quant_get_row(cs[i].repacked, packed, 0, N + 1, got), ERR_INVALID);
        mem_free(packed);
        mem_free(w);
    }
    float out[32];
    assert_int_equal(quant_get_row(QUANT_TYPE_MAX, out, 0, 32, out), ERR_INVALID);
}

/* Row r of m's Q6_K weights set to the format's extremes (every quant -32, every scale -128,
 * d 1) and activation row c to all -128 (bsums -2048): the largest integer sums the Q6_K_R16
 * kernel forms, which the int32 arithmetic must hold exactly. */
static void q6_K_extremes(const struct mats *m, int r, int c)
{
    for (int64_t b = 0; b < m->n / 256; b++) {
        uint8_t *w = m->wbuf + 1 + r * m->wb + b * 210, *a = m->abuf + 3 + c * m->ab + b * 292;
        memset(w, 0, 192);
        memset(w + 192, 0x80, 16);
        const uint16_t one = 0x3c00;
        memcpy(w + 208, &one, 2);
        memset(a + 4, 0x80, 256);
        for (int j = 0; j < 16; j++) {
            const int16_t bs = -2048;
            memcpy(a + 260 + 2 * j, &bs, 2);
        }
    }
}

/* The 16-row interleaved Q4_K and Q6_K tiles (an order of their own: one exact integer sum
 * per super-block and output): 64 rows repacked, 8 tokens, 1..3 super-blocks (Q6_K also at its
 * integer extremes); each output within float rounding of the scalar dot of the original row,
 * and every tile shape (1..4 groups x 1..8 tokens, from any group, streaming or not) gives the
 * bits of the 16 x 1 tile, so a token's result does not depend on the batch it is computed
 * in. */
static void test_avx512_repacked_k(void **state)
{
    (void)state;
    const uint32_t types[] = {QUANT_Q4_K, QUANT_Q6_K},
                   repacked[] = {QUANT_Q4_K_R16, QUANT_Q6_K_R16};
    for (size_t ti = 0; ti < 2; ti++) {
        const struct quant_traits *tr = quant_traits_simd(repacked[ti], QUANT_SIMD_AVX512);
        if (!tr || !tr->vec_dot_tile) {
            printf("skip: no AVX-512 VNNI on this CPU: the repacked K-quant kernels are not run\n");
            skip();
        }
        const struct quant_traits *ref = quant_traits_ref(types[ti]);
        enum { R = 64, C = 8 };
        for (int64_t n = 256; n <= 768; n += 256) {
            struct mats m = mats_make(types[ti], n, R, C);
            if (types[ti] == QUANT_Q6_K) q6_K_extremes(&m, 17, 5);
            assert_int_equal(row_bytes(repacked[ti], n), m.wb);
            uint8_t *packed = mem_alloc(m.wb * R);
            assert_non_null(packed);
            assert_int_equal(quant_repack_type(types[ti], R, n),
                             quant_simd_active() == QUANT_SIMD_AVX512 ? repacked[ti] : types[ti]);
            if (types[ti] == QUANT_Q4_K)
                q4_K_repack_r16(m.w, packed, R, n);
            else
                q6_K_repack_r16(m.w, packed, R, n);
            float base[C][R], s[C][R];
            for (int g = 0; g < R / 16; g++)
                for (int c = 0; c < C; c++) {
                    struct quant_tile t = {.n = n,
                                           .x = packed + 16 * g * m.wb,
                                           .x_stride = m.wb,
                                           .y = m.a + c * m.ab,
                                           .y_stride = m.ab,
                                           .s = &base[c][16 * g],
                                           .s_stride = R,
                                           .n_rows = 16,
                                           .n_cols = 1};
                    tr->vec_dot_tile(&t);
                }
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) {
                    float want;
                    ref->vec_dot(n, &want, m.w + r * m.wb, m.a + c * m.ab);
                    double tol = 2e-5 * dot_mag(types[ti], m.w + r * m.wb, m.a + c * m.ab, n);
                    if (!(fabs((double)base[c][r] - want) <= tol + 1e-6))
                        fail_msg("%s n=%lld (%d,%d): %.9g vs ref %.9g", tr->name, (long long)n, r,
                                 c, base[c][r], want);
                }
            for (int g0 = 0; g0 < R / 16; g0++)
                for (int ng = 1; g0 + ng <= R / 16; ng++)
                    for (int nc = 1; nc <= C; nc++) {
                        struct quant_tile t = {.n = n,
                                               .x = packed + 16 * g0 * m.wb,
                                               .x_stride = m.wb,
                                               .y = m.a,
                                               .y_stride = m.ab,
                                               .s = &s[0][16 * g0],
                                               .s_stride = R,
                                               .n_rows = 16 * ng,
                                               .n_cols = nc,
                                               .is_stream = nc % 2};
                        tr->vec_dot_tile(&t);
                        for (int c = 0; c < nc; c++)
                            if (memcmp(&s[c][16 * g0], &base[c][16 * g0],
                                       16 * (size_t)ng * sizeof(float)) != 0)
                                fail_msg("%s n=%lld tile %dx%d from group %d differs", tr->name,
                                         (long long)n, 16 * ng, nc, g0);
                    }
            mem_free(packed);
            mem_free(m.wbuf);
            mem_free(m.abuf);
        }
    }
}

/* Repacking is offered only for whole groups of 16 rows and by a set that has the kernels. */
/* AVX-512 BF16 (vdpbf16ps, where the CPU has AVX512_BF16): the activations are rounded to BF16
 * with the reference's bytes (ties to even, NaN kept quiet, denormals rounded); every tile shape
 * up to the set's 8 x 6 gives the single dot's bits, in both orders; each order equals the scalar
 * element-order sum over the same BF16 activations within float rounding (2e-5 of sum |x y|:
 * the products are exact, only the order differs) and the F32-activation reference within the
 * activations' rounding (2^-8 of sum |x y| more: BF16 keeps 8 significant bits). */
static void test_avx512_bf16(void **state)
{
    (void)state;
    const struct quant_traits *tr = quant_traits_simd(QUANT_BF16, QUANT_SIMD_AVX512);
    if (!tr || tr->dot_type != QUANT_BF16) {
        printf("skip: the vdpbf16ps kernels need AVX512_BF16, which this CPU lacks\n");
        skip();
    }
    const struct quant_traits *ref = quant_traits_ref(QUANT_BF16);
    float x[67];
    fill_random(x, 67, 5.0f);
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0x7f800001u,
                                       0xff800000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu,
                                       0x3f80ffffu, 0x80000000u};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        memcpy(&x[3 + 5 * k], &special[k], sizeof special[k]);
    uint8_t want[2 * 67], got[2 * 67 + 1];
    ref->from_float(x, want, 67);
    tr->from_float(x, got + 1, 67);
    assert_memory_equal(want, got + 1, sizeof want);

    const int64_t ns[] = {1, 31, 32, 33, 100, 896, 1027};
    const int max_r = tr->tile_rows, max_c = tr->tile_cols;
    assert_true(max_r >= QUANT_TILE_MAX && max_c >= QUANT_TILE_MAX);
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        struct mats m = {.n = n, .wb = row_bytes(QUANT_BF16, n), .ab = row_bytes(QUANT_BF16, n)};
        m.wbuf = mem_alloc(m.wb * (size_t)max_r + 1);
        m.abuf = mem_alloc(m.ab * (size_t)max_c + 3);
        float *af = mem_alloc((size_t)(n * max_c) * sizeof *af);
        float *f = mem_alloc((size_t)n * sizeof *f), *ar = mem_alloc((size_t)n * sizeof *ar);
        assert_true(m.wbuf && m.abuf && af && f && ar);
        m.w = m.wbuf + 1;
        m.a = m.abuf + 3;
        for (int r = 0; r < max_r; r++) {
            fill_random(f, n, r == max_r - 1 ? 100.0f : 1.0f);
            ref->from_float(f, m.wbuf + 1 + r * m.wb, n);
        }
        for (int c = 0; c < max_c; c++) {
            fill_random(af + c * n, n, 3.0f);
            tr->from_float(af + c * n, m.abuf + 3 + c * m.ab, n);
        }
        for (int r = 0; r < max_r; r++)
            for (int c = 0; c < max_c; c++) {
                const uint8_t *w = m.w + r * m.wb, *a = m.a + c * m.ab;
                float s_set[2], s_round, s_f32;
                tr->vec_dot(n, &s_set[0], w, a);
                struct quant_tile vec = {
                    .n = n, .x = w, .y = a, .s = &s_set[1], .n_rows = 1, .n_cols = 1};
                vec.order = QUANT_ORDER_VEC;
                tr->vec_dot_tile(&vec);
                ref->to_float(a, ar, n); // the BF16 activations as floats (exact)
                ref->vec_dot(n, &s_round, w, ar);
                ref->vec_dot(n, &s_f32, w, af + c * n);
                const double mag = dot_mag(QUANT_BF16, w, (const uint8_t *)(af + c * n), n);
                for (int o = 0; o < 2; o++) {
                    if (!(fabs((double)s_set[o] - s_round) <= 2e-5 * mag + 1e-6))
                        fail_msg("bf16 n=%lld order %d (%d,%d): vdpbf16ps %.9g vs scalar %.9g",
                                 (long long)n, o, r, c, s_set[o], s_round);
                    // rounding an activation to BF16 (8 significant bits, to nearest) moves
                    // it by at most 2^-8 of itself, so each term by 2^-8 of |w x|
                    if (!(fabs((double)s_set[o] - s_f32) <= (0x1p-8 + 2e-5) * mag + 1e-6))
                        fail_msg("bf16 n=%lld order %d (%d,%d): vdpbf16ps %.9g vs F32 "
                                 "activations %.9g",
                                 (long long)n, o, r, c, s_set[o], s_f32);
                }
            }
        check_tiles(tr, &m, max_r, max_c, QUANT_ORDER_LANES);
        check_tiles(tr, &m, max_r, max_c, QUANT_ORDER_VEC);
        mem_free(m.wbuf);
        mem_free(m.abuf);
        mem_free(af);
        mem_free(f);
        mem_free(ar);
    }
}

static void test_repack_type(void **state)
{
    (void)state;
    const enum quant_simd set = quant_simd_active();
    const bool avx512 = set == QUANT_SIMD_AVX512;
    const bool x86 = avx512 || set == QUANT_SIMD_AVX2 || set == QUANT_SIMD_AVX2_VNNI;
    assert_int_equal(quant_repack_type(QUANT_Q8_0, 48, 64), avx512 ? QUANT_Q8_0_R16 : QUANT_Q8_0);
    assert_int_equal(quant_repack_type(QUANT_Q4_0, 16, 32), x86 ? QUANT_Q4_0_R16 : QUANT_Q4_0);
    assert_int_equal(quant_repack_type(QUANT_Q8_0, 40, 64), QUANT_Q8_0);
    assert_int_equal(quant_repack_type(QUANT_Q4_K, 64, 256), avx512 ? QUANT_Q4_K_R16 : QUANT_Q4_K);
    assert_int_equal(quant_repack_type(QUANT_Q4_K, 40, 256), QUANT_Q4_K);
    assert_int_equal(quant_repack_type(QUANT_Q6_K, 32, 512), avx512 ? QUANT_Q6_K_R16 : QUANT_Q6_K);
    assert_int_equal(quant_repack_type(QUANT_Q6_K, 24, 256), QUANT_Q6_K);
    uint8_t a[34 * 16], b[34 * 16];
    assert_int_equal(quant_repack(QUANT_Q8_0, a, b, 40, 32), ERR_INVALID);
    assert_null(quant_traits_of(QUANT_Q8_0_R16)->vec_dot); // no single-row kernel
    size_t rb;
    assert_int_equal(quant_row_bytes(QUANT_Q8_0_R16, 64, &rb), ERR_OK);
    assert_int_equal(rb, 68);
    assert_int_equal(quant_row_bytes(QUANT_Q8_0_S, 64, &rb), ERR_OK);
    assert_int_equal(rb, 144);
}

static int setup(void **state)
{
    (void)state;
    kernels_init();
    return 0;
}

/* Activation Q8_0: the AVX2 and scalar versions write the same bytes, ties round to even
 * (scale 127/amax), and the result dequantizes close to the input. */
static void test_q8_0_activations_match_reference_rounding(void **state)
{
    (void)state;
    enum { N = 32 * 40 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) / 97.0f;
    for (int j = 0; j < 32; j++) // one block of exact ties: amax 127 gives id 1
        x[j] = j == 0 ? 127.0f : (float)(j % 2 ? j : -j) + 0.5f;
    struct block_q8_0 a[N / 32], b[N / 32];
    q8_0_activations_ref(x, a, N);
    quant_q8_0_activations(x, b, N);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(a[0].qs[1], 2);  // 1.5 -> 2 (even)
    assert_int_equal(a[0].qs[2], -2); // -2.5 -> -2 (even)
    assert_int_equal(a[0].qs[3], 4);  // 3.5 -> 4
    float y[N];
    quant_traits_ref(QUANT_Q8_0)->to_float(a, y, N);
    for (int i = 32; i < N; i++)
        assert_true(fabsf(y[i] - x[i]) <= 10.4f / 127.0f * 0.51f + 1e-3f);
}

/* Activation Q8_1: quants as for Q8_0 (ties to even), d = amax / 127 and s = d * sum(q);
 * the AVX2 and scalar versions write the same bytes. */
static void test_q8_1_activations_match_reference_rounding(void **state)
{
    (void)state;
    enum { N = 32 * 40 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) / 89.0f;
    for (int j = 0; j < 32; j++)
        x[j] = j == 0 ? 127.0f : (float)(j % 2 ? j : -j) + 0.5f;
    struct block_q8_1 a[N / 32], b[N / 32];
    q8_1_activations_ref(x, a, N);
    quant_q8_1_activations(x, b, N);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(a[0].qs[1], 2);  // 1.5 -> 2 (even)
    assert_int_equal(a[0].qs[2], -2); // -2.5 -> -2 (even)
    for (int i = 0; i < N / 32; i++) {
        int sum = 0;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            sum += a[i].qs[j];
            amax = fmaxf(amax, fabsf(x[32 * i + j]));
        }
        assert_int_equal(a[i].d, f32_to_half(amax / 127.0f));
        assert_int_equal(a[i].s, f32_to_half(amax / 127.0f * (float)sum));
    }
}

/* Each ARM kernel set (neon, neon+dotprod, neon+i8mm) on random rows with tails, every tile
 * shape and order: all sets give the same bits (for the float and 32-element formats those of
 * the x86 AVX2 kernels, whose arithmetic they follow; for the K-quants those of the scalar
 * reference), within float rounding of the reference, and the activation quantizers write
 * the references' bytes. Sets this CPU lacks are reported as skipped. */
static void test_arm_sets(void **state)
{
    (void)state;
    static const enum quant_simd sets[] = {QUANT_SIMD_NEON, QUANT_SIMD_NEON_DOTPROD,
                                           QUANT_SIMD_NEON_I8MM};
    static const char *const names[] = {"neon", "neon+dotprod", "neon+i8mm"};
    kernels_init();
    int n_run = 0;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        if (!quant_traits_simd(QUANT_F32, sets[si])) {
            printf("skip: kernel set %s (not on this CPU or architecture)\n", names[si]);
            continue;
        }
        n_run++;
        for (size_t i = 0; i < N_CASES; i++) {
            const struct quant_traits *tr = quant_traits_simd(cases[i].type, sets[si]);
            const struct quant_traits *base = quant_traits_simd(cases[i].type, QUANT_SIMD_NEON);
            const struct quant_traits *ref = quant_traits_ref(cases[i].type);
            const bool is_k = ref->block_len == QK_K;
            const int64_t bl = ref->block_len;
            const int64_t ns[] = {bl == 1 ? 7 : bl, bl == 1 ? 45 : 3 * bl, bl == 1 ? 1003 : 9 * bl};
            for (size_t k = 0; k < 3; k++) {
                const int64_t n = ns[k];
                struct dot_data d[4];
                for (int r = 0; r < 4; r++)
                    dot_data_make(&d[r], cases[i].type, n, (size_t)r, (size_t)(3 - r));
                for (int r = 0; r < 4; r++) {
                    float s_set, s_base, s_ref;
                    tr->vec_dot(n, &s_set, d[r].qw.data, d[r].qa.data);
                    base->vec_dot(n, &s_base, d[r].qw.data, d[r].qa.data);
                    ref->vec_dot(n, &s_ref, d[r].qw.data, d[r].qa.data);
                    double mag = 0;
                    for (int64_t j = 0; j < n; j++)
                        mag += fabs((double)d[r].wd[j] * d[r].ad[j]);
                    if (memcmp(&s_set, &s_base, sizeof s_set) != 0)
                        fail_msg("%s %s n=%lld: %.9g vs neon %.9g", names[si], ref->name,
                                 (long long)n, s_set, s_base);
                    if (is_k ? memcmp(&s_set, &s_ref, sizeof s_set) != 0
                             : !(fabs((double)s_set - s_ref) <= 2e-5 * mag + 1e-6))
                        fail_msg("%s %s n=%lld: %.9g vs ref %.9g", names[si], ref->name,
                                 (long long)n, s_set, s_ref);
                }
                if (!tr->vec_dot_tile) {
                    for (int r = 0; r < 4; r++)
                        dot_data_free(&d[r]);
                    continue;
                }
                /* rows and columns in separate buffers: strides are the distance between them */
                for (int order = 0; order <= QUANT_ORDER_BLOCKS; order++)
                    for (int nr = 1; nr <= QUANT_TILE_MAX; nr++)
                        for (int nc = 1; nc <= QUANT_TILE_MAX; nc++) {
                            size_t wb = row_bytes(cases[i].type, n),
                                   ab = row_bytes(tr->dot_type, n);
                            uint8_t *w = mem_alloc(4 * wb), *a = mem_alloc(4 * ab);
                            assert_true(w && a);
                            for (int r = 0; r < 4; r++) {
                                memcpy(w + r * wb, d[r].qw.data, wb);
                                memcpy(a + r * ab, d[r].qa.data, ab);
                            }
                            float s[4 * 4], one;
                            struct quant_tile t = {.n = n,
                                                   .x = w,
                                                   .x_stride = wb,
                                                   .y = a,
                                                   .y_stride = ab,
                                                   .s = s,
                                                   .s_stride = 4,
                                                   .n_rows = nr,
                                                   .n_cols = nc,
                                                   .order = order};
                            tr->vec_dot_tile(&t);
                            for (int r = 0; r < nr; r++)
                                for (int c = 0; c < nc; c++) {
                                    struct quant_tile t1 = t;
                                    t1.x = w + r * wb;
                                    t1.y = a + c * ab;
                                    t1.s = &one;
                                    t1.n_rows = t1.n_cols = 1;
                                    base->vec_dot_tile(&t1);
                                    if (memcmp(&one, &s[c * 4 + r], sizeof one) != 0)
                                        fail_msg("%s %s order %d tile %dx%d (%d,%d): %.9g vs %.9g",
                                                 names[si], ref->name, order, nr, nc, r, c,
                                                 s[c * 4 + r], one);
                                }
                            mem_free(w);
                            mem_free(a);
                        }
                for (int r = 0; r < 4; r++)
                    dot_data_free(&d[r]);
            }
        }
        /* Q8_K activations (the K-quants' dot type) as the reference writes them. */
        float x[QK_K * 3];
        fill_random(x, QK_K * 3, 5.0f);
        x[7] = -9.0f; // the extreme value negative: its sign sets the scale's
        struct block_q8_K ka[3], kb[3];
        quant_traits_ref(QUANT_Q8_K)->from_float(x, ka, QK_K * 3);
        quant_traits_simd(QUANT_Q8_K, sets[si])->from_float(x, kb, QK_K * 3);
        assert_memory_equal(ka, kb, sizeof ka);
    }
    if (!n_run) skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_activations_match_reference_rounding),
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_known_blocks_32),
        cmocka_unit_test(test_known_blocks_k),
        cmocka_unit_test(test_known_floats),
        cmocka_unit_test(test_roundtrip_error),
        cmocka_unit_test(test_degenerate_rows),
        cmocka_unit_test(test_vec_dot),
        cmocka_unit_test(test_vec_dot_tile),
        cmocka_unit_test(test_vec_dot_tile_orders),
        cmocka_unit_test(test_q8_1_activations_match_reference_rounding),
        cmocka_unit_test(test_vnni_equals_avx2),
        cmocka_unit_test(test_from_float_simd_matches_ref),
        cmocka_unit_test(test_cross_check_stories260k),
        cmocka_unit_test(test_set_avx2),
        cmocka_unit_test(test_set_avx2_vnni),
        cmocka_unit_test(test_set_avx512),
        cmocka_unit_test(test_q8_0s_activations),
        cmocka_unit_test(test_avx512_repacked),
        cmocka_unit_test(test_avx2_repacked),
        cmocka_unit_test(test_q32_extremes),
        cmocka_unit_test(test_repacked_rows),
        cmocka_unit_test(test_avx512_repacked_k),
        cmocka_unit_test(test_avx512_bf16),
        cmocka_unit_test(test_repack_type),
        cmocka_unit_test(test_arm_sets),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
