/* engine/quants: IQ4_NL, IQ4_XS and MXFP4. Hand-built blocks decode to the values the layouts
 * define (ggml-common.h: nibble order, IQ4_XS's split 6-bit scales, the E8M0 exponent and the
 * doubled FP4 table); the scalar dot equals the float dot of the dequantized operands; the AVX2
 * dot agrees with the scalar one on many rows; quantizing and dequantizing stays close. Every
 * SIMD set this machine runs (AVX2, AVX2+VNNI, AVX-512, NEON, NEON+dotprod, NEON+i8mm) computes
 * the x86 lane arithmetic modelled here in scalar C bit for bit, single dots and every tile
 * shape, so ARM and every x86 set give the same bits. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/kernels.h"
#include "engine/quants/quants.h"
#include "engine/quants/blocks.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng = 0x243f6a8885a308d3ULL;

static float unit(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void test_iq4_nl_layout(void **state)
{
    (void)state;
    struct block_iq4_nl b;
    b.d = 0x3800; // 0.5
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    kernels_init();
    quant_traits_ref(QUANT_IQ4_NL)->to_float(&b, y, 32);
    static const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 0.5f * (float)levels[j]);
        assert_true(y[j + 16] == 0.5f * (float)levels[15 - j]);
    }
    assert_int_equal(quant_traits_of(QUANT_IQ4_NL)->dot_type, QUANT_Q8_0);
    assert_int_equal(quant_traits_of(QUANT_IQ4_NL)->block_bytes, 18);
}

static void test_iq4_xs_layout(void **state)
{
    (void)state;
    struct block_iq4_xs b;
    memset(&b, 0, sizeof b);
    b.d = 0x3c00; // 1.0
    // sub-block scales 0..7 = -32, -1, 0, 31, 5, -20, 1, 17 (+32: 0, 31, 32, 63, 37, 12, 33, 49)
    static const int ls[8] = {-32, -1, 0, 31, 5, -20, 1, 17};
    for (int ib = 0; ib < 8; ib++) {
        const int u = ls[ib] + 32;
        b.scales_l[ib / 2] |= (uint8_t)((u & 0xf) << (4 * (ib % 2)));
        b.scales_h |= (uint16_t)((u >> 4) << (2 * ib));
    }
    for (int j = 0; j < 128; j++)
        b.qs[j] = (uint8_t)((j % 16) | (((j + 3) % 16) << 4));
    float y[256];
    quant_traits_ref(QUANT_IQ4_XS)->to_float(&b, y, 256);
    for (int ib = 0; ib < 8; ib++) {
        assert_int_equal(iq4_xs_scale(&b, ib), ls[ib]);
        for (int j = 0; j < 16; j++) {
            assert_true(y[32 * ib + j] == (float)ls[ib] * (float)iq4nl_values[j]);
            assert_true(y[32 * ib + 16 + j] == (float)ls[ib] * (float)iq4nl_values[(j + 3) % 16]);
        }
    }
    assert_int_equal(quant_traits_of(QUANT_IQ4_XS)->dot_type, QUANT_Q8_K);
}

static void test_mxfp4_layout(void **state)
{
    (void)state;
    struct block_mxfp4 b;
    b.e = 128; // scale 2^0 on the doubled table: values are E2M1 * 2
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(j | (j << 4));
    float y[32];
    quant_traits_ref(QUANT_MXFP4)->to_float(&b, y, 32);
    static const float e2m1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == e2m1x2[j]);
        assert_true(y[j + 16] == e2m1x2[j]);
    }
    assert_true(e8m0_half_to_f32(130) == 4.0f);
    assert_true(e8m0_half_to_f32(1) == ldexpf(1.0f, -127));
    assert_true(e8m0_half_to_f32(0) == ldexpf(1.0f, -128));
    assert_int_equal(quant_traits_of(QUANT_MXFP4)->block_bytes, 17);
}

/* Quantize/dequantize error, the scalar dot against the float dot of the dequantized
 * operands, and the SIMD dot against the scalar one. */
static void check_type(uint32_t type, double rt_max)
{
    const int64_t n = 1024;
    const struct quant_traits *ref = quant_traits_ref(type);
    const struct quant_traits *act = quant_traits_ref(ref->dot_type);
    assert_non_null(ref);
    float *x = mem_alloc(n * sizeof *x), *y = mem_alloc(n * sizeof *y);
    float *xd = mem_alloc(n * sizeof *xd), *yd = mem_alloc(n * sizeof *yd);
    size_t wb, ab;
    assert_int_equal(quant_row_bytes(type, n, &wb), 0);
    assert_int_equal(quant_row_bytes(ref->dot_type, n, &ab), 0);
    uint8_t *wq = mem_alloc(wb), *aq = mem_alloc(ab);
    double worst_simd = 0.0;
    for (int round = 0; round < 20; round++) {
        for (int64_t i = 0; i < n; i++) {
            x[i] = unit() * (round % 3 == 0 ? 0.01f : 1.0f);
            y[i] = unit();
        }
        ref->from_float(x, wq, n);
        ref->to_float(wq, xd, n);
        act->from_float(y, aq, n);
        act->to_float(aq, yd, n);
        double e2 = 0.0, x2 = 0.0, dot = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; i++) {
            e2 += (double)(xd[i] - x[i]) * (xd[i] - x[i]);
            x2 += (double)x[i] * x[i];
            dot += (double)xd[i] * yd[i];
            mag += fabs((double)xd[i] * yd[i]);
        }
        assert_true(sqrt(e2 / x2) < rt_max);
        float s_ref;
        ref->vec_dot(n, &s_ref, wq, aq);
        assert_true(fabs((double)s_ref - dot) <= 1e-5 * mag + 1e-30);
        const struct quant_traits *simd = quant_traits_simd(type, QUANT_SIMD_AVX2);
        if (simd) {
            float s_simd;
            simd->vec_dot(n, &s_simd, wq, aq);
            const double d = fabs((double)s_simd - s_ref) / (mag + 1e-30);
            worst_simd = d > worst_simd ? d : worst_simd;
            // a 2x2 tile gives the single dots' bits
            float t[4];
            const struct quant_tile tile = {.n = n / 2,
                                            .x = wq,
                                            .x_stride = wb / 2,
                                            .y = aq,
                                            .y_stride = ab / 2,
                                            .s = t,
                                            .s_stride = 2,
                                            .n_rows = 2,
                                            .n_cols = 2};
            simd->vec_dot_tile(&tile);
            float one;
            simd->vec_dot(n / 2, &one, wq + wb / 2, aq + ab / 2);
            assert_true(one == t[3]);
        }
    }
    assert_true(worst_simd < 1e-5);
    mem_free(x);
    mem_free(y);
    mem_free(xd);
    mem_free(yd);
    mem_free(wq);
    mem_free(aq);
}

static void test_iq4_nl_kernels(void **state)
{
    (void)state;
    check_type(QUANT_IQ4_NL, 0.12);
}

static void test_iq4_xs_kernels(void **state)
{
    (void)state;
    check_type(QUANT_IQ4_XS, 0.12);
}

static void test_mxfp4_kernels(void **state)
{
    (void)state;
    check_type(QUANT_MXFP4, 0.2);
}

/* The x86 (AVX2) lane arithmetic in scalar C: per 32-value block, 8 exact integer lanes (lane k
 * the products of elements 4k..4k+3) each fused into its float chain with the block's scale,
 * then the 8 lanes summed high half onto low, (l0 + l2) + (l1 + l3). */
static void lanes_fma(float acc[8], const int8_t *table, const uint8_t qs[16], const int8_t *q,
                      float scale)
{
    for (int k = 0; k < 8; k++) {
        int32_t sum = 0;
        for (int j = 4 * k; j < 4 * k + 4; j++) {
            const int v = j < 16 ? table[qs[j] & 0xf] : table[qs[j - 16] >> 4];
            sum += v * q[j];
        }
        acc[k] = fmaf((float)sum, scale, acc[k]);
    }
}

static float lanes_sum(const float acc[8])
{
    float s[4];
    for (int k = 0; k < 4; k++)
        s[k] = acc[k + 4] + acc[k];
    return (s[0] + s[2]) + (s[1] + s[3]);
}

static float model_dot(uint32_t type, int64_t n, const void *x, const void *y)
{
    float acc[8] = {0};
    if (type == QUANT_IQ4_XS) {
        const struct block_iq4_xs *a = x;
        const struct block_q8_K *b = y;
        for (int64_t i = 0; i < n / QK_K; i++) {
            const float d = half_to_f32(a[i].d) * b[i].d;
            for (int ib = 0; ib < QK_K / 32; ib++)
                lanes_fma(acc, iq4nl_values, a[i].qs + 16 * ib, b[i].qs + 32 * ib,
                          d * (float)iq4_xs_scale(&a[i], ib));
        }
        return lanes_sum(acc);
    }
    const struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / 32; i++) {
        if (type == QUANT_MXFP4) {
            const struct block_mxfp4 *a = (const struct block_mxfp4 *)x + i;
            lanes_fma(acc, mxfp4_values, a->qs, b[i].qs,
                      half_to_f32(b[i].d) * e8m0_half_to_f32(a->e));
        } else {
            const struct block_iq4_nl *a = (const struct block_iq4_nl *)x + i;
            lanes_fma(acc, iq4nl_values, a->qs, b[i].qs, half_to_f32(b[i].d) * half_to_f32(a->d));
        }
    }
    return lanes_sum(acc);
}

/* One set's kernels for one type: single dots equal the model on rows of 1, 3 and 9 blocks of
 * random data (scales spread over many binades), and every tile shape up to QUANT_TILE_MAX
 * equals the single dots. Returns false when this machine cannot run the set. */
static bool check_set_type(enum quant_simd set, uint32_t type)
{
    const struct quant_traits *tr = quant_traits_simd(type, set);
    if (!tr) return false;
    const struct quant_traits *ref = quant_traits_ref(type);
    const struct quant_traits *act = quant_traits_ref(ref->dot_type);
    const int64_t bl = ref->block_len, ns[] = {bl, 3 * bl, 9 * bl};
    enum { R = QUANT_TILE_MAX };
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        size_t wb, ab;
        assert_int_equal(quant_row_bytes(type, n, &wb), 0);
        assert_int_equal(quant_row_bytes(ref->dot_type, n, &ab), 0);
        uint8_t *w = mem_alloc(R * wb), *a = mem_alloc(R * ab);
        float *f = mem_alloc((size_t)n * sizeof *f);
        assert_true(w && a && f);
        for (int r = 0; r < R; r++) {
            for (int64_t i = 0; i < n; i++)
                f[i] = unit() * ldexpf(1.0f, (int)((i / 32 + r) % 9) - 4);
            ref->from_float(f, w + r * wb, n);
            for (int64_t i = 0; i < n; i++)
                f[i] = unit() * 3.0f;
            act->from_float(f, a + r * ab, n);
        }
        float one[R][R], tile[R * R];
        for (int r = 0; r < R; r++)
            for (int c = 0; c < R; c++) {
                tr->vec_dot(n, &one[r][c], w + r * wb, a + c * ab);
                const float want = model_dot(type, n, w + r * wb, a + c * ab);
                if (memcmp(&want, &one[r][c], sizeof want) != 0)
                    fail_msg("set %d %s n=%lld (%d,%d): %.9g, the x86 lanes give %.9g", (int)set,
                             tr->name, (long long)n, r, c, one[r][c], want);
            }
        for (int nr = 1; tr->vec_dot_tile && nr <= R; nr++)
            for (int nc = 1; nc <= R; nc++) {
                const struct quant_tile t = {.n = n,
                                             .x = w,
                                             .x_stride = wb,
                                             .y = a,
                                             .y_stride = ab,
                                             .s = tile,
                                             .s_stride = R,
                                             .n_rows = nr,
                                             .n_cols = nc,
                                             .order = (nr + nc) % 3};
                tr->vec_dot_tile(&t);
                for (int r = 0; r < nr; r++)
                    for (int c = 0; c < nc; c++)
                        if (memcmp(&tile[c * R + r], &one[r][c], sizeof(float)) != 0)
                            fail_msg("set %d %s n=%lld tile %dx%d (%d,%d): %.9g vs %.9g", (int)set,
                                     tr->name, (long long)n, nr, nc, r, c, tile[c * R + r],
                                     one[r][c]);
            }
        mem_free(w);
        mem_free(a);
        mem_free(f);
    }
    return true;
}

static void test_simd_sets_follow_x86_lanes(void **state)
{
    (void)state;
    static const struct {
        enum quant_simd set;
        const char *name;
    } sets[] = {{QUANT_SIMD_AVX2, "avx2"},
                {QUANT_SIMD_AVX2_VNNI, "avx2+vnni"},
                {QUANT_SIMD_AVX512, "avx512"},
                {QUANT_SIMD_NEON, "neon"},
                {QUANT_SIMD_NEON_DOTPROD, "neon+dotprod"},
                {QUANT_SIMD_NEON_I8MM, "neon+i8mm"}};
    static const uint32_t types[] = {QUANT_IQ4_NL, QUANT_IQ4_XS, QUANT_MXFP4};
    int n_run = 0;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        bool ran = false;
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            ran = check_set_type(sets[si].set, types[ti]);
        if (ran) n_run++;
        printf("%s: %s\n", sets[si].name,
               ran ? "equal to the x86 lanes" : "skip (not on this CPU)");
    }
    assert_true(n_run > 0);
}

int main(void)
{
    kernels_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iq4_nl_layout),
        cmocka_unit_test(test_iq4_xs_layout),
        cmocka_unit_test(test_mxfp4_layout),
        cmocka_unit_test(test_iq4_nl_kernels),
        cmocka_unit_test(test_iq4_xs_kernels),
        cmocka_unit_test(test_mxfp4_kernels),
        cmocka_unit_test(test_simd_sets_follow_x86_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
