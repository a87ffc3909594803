/* engine/quants: IQ4_NL, IQ4_XS and MXFP4. Hand-built blocks decode to the values the layouts
 * define (ggml-common.h: nibble order, IQ4_XS's split 6-bit scales, the E8M0 exponent and the
 * doubled FP4 table); the scalar dot equals the float dot of the dequantized operands; the AVX2
 * dot agrees with the scalar one on many rows; quantizing and dequantizing stays close. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/quants/quants.h"
#include "engine/quants/quants_iq_internal.h"
#include "util/mem.h"

#include <math.h>
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
    quant_init();
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

int main(void)
{
    quant_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iq4_nl_layout),  cmocka_unit_test(test_iq4_xs_layout),
        cmocka_unit_test(test_mxfp4_layout),   cmocka_unit_test(test_iq4_nl_kernels),
        cmocka_unit_test(test_iq4_xs_kernels), cmocka_unit_test(test_mxfp4_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
