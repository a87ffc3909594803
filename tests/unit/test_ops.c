/* engine/ops: half conversions against exhaustive round trips, and the SIMD kernels (AVX2 on
 * x86, NEON on aarch64) against their scalar references on random lengths. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/ops.h"
#if defined(__aarch64__)
#include "engine/arm/cpufeat_arm.h"
#include "engine/arm/ops_neon.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static void test_half_round_trip(void **state)
{
    (void)state;
    // Every half value (except NaN payloads) converts to float and back unchanged.
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
        assert_int_equal(ops_f32_to_f16(ops_f16_to_f32((uint16_t)h)), h);
    }
    assert_true(ops_f16_to_f32(0x3c00) == 1.0f);
    assert_int_equal(ops_f32_to_f16(65520.0f), 0x7c00); // rounds to infinity
    assert_int_equal(ops_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(ops_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); // tie to even
    assert_int_equal(ops_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
    assert_int_equal(ops_f32_to_f16(5.96046448e-8f), 0x0001); // smallest subnormal
    assert_int_equal(ops_f32_to_f16(2.98023224e-8f), 0x0000); // half of it: tie to even
    assert_true(isnan(ops_f16_to_f32(ops_f32_to_f16(NAN))));
}

static uint64_t rng = 42;
static float frand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

/* This architecture's SIMD table, or NULL (with a skip line) when the CPU has none. */
static const struct ops_kernels *simd_kernels(void)
{
#if defined(__x86_64__) || defined(__i386__)
    static const struct ops_kernels avx2 = {
        .dot_f16 = ops_dot_f16_avx2,
        .mad_f16 = ops_mad_f16_avx2,
        .scale_f16 = ops_scale_f16_avx2,
        .f32_to_f16 = ops_f32_to_f16_avx2,
        .swiglu = ops_swiglu_avx2,
    };
    if (ops_have_avx2()) return &avx2;
    printf("skip: no AVX2\n");
#elif defined(__aarch64__)
    if (cpufeat_arm_hw_level() >= CPUFEAT_ARM_NEON) return ops_neon_kernels();
    printf("skip: no Advanced SIMD\n");
#else
    printf("skip: no SIMD kernels for this architecture\n");
#endif
    return NULL;
}

static void test_simd_matches_ref(void **state)
{
    (void)state;
    ops_init();
    const struct ops_kernels *r = ops_ref(), *v = simd_kernels();
    if (!v) skip();
    uint16_t a[300], b[300], y1[300], y2[300];
    float x[300];
    for (int n = 1; n < 300; n += 7) {
        for (int i = 0; i < n; i++) {
            x[i] = frand();
            a[i] = ops_f32_to_f16(frand());
            b[i] = ops_f32_to_f16(frand());
            y1[i] = y2[i] = ops_f32_to_f16(frand());
        }
        float d_ref = r->dot_f16(n, a, b), d_simd = v->dot_f16(n, a, b);
        assert_true(fabsf(d_ref - d_simd) <= 1e-5f * (1.0f + fabsf(d_ref)) * (float)n);
        r->mad_f16(n, y1, a, 0.37f);
        v->mad_f16(n, y2, a, 0.37f);
        assert_memory_equal(y1, y2, (size_t)n * 2); // both fused, as the reference
        r->scale_f16(n, y1, 0.5f);
        v->scale_f16(n, y2, 0.5f);
        assert_memory_equal(y1, y2, (size_t)n * 2);
        r->f32_to_f16(n, x, y1);
        v->f32_to_f16(n, x, y2);
        assert_memory_equal(y1, y2, (size_t)n * 2);
    }
}

/* The polynomial exponential stays within a few float ulp of e^x over the normal range,
 * including the two-step scaling near the ends, and saturates like expf. */
static void test_expf_poly(void **state)
{
    (void)state;
    assert_true(ops_expf_poly(0.0f) == 1.0f);
    for (float x = -87.0f; x <= 88.0f; x += 0.01371f) {
        const double want = exp((double)x);
        const double got = ops_expf_poly(x);
        if (!(fabs(got - want) <= 4e-7 * want))
            fail_msg("expf_poly(%.9g) = %.9g, e^x = %.9g", (double)x, got, want);
    }
    assert_true(ops_expf_poly(-200.0f) == 0.0f);
    assert_true(isinf(ops_expf_poly(200.0f)));
    assert_true(ops_expf_poly(-100.0f) > 0.0f && ops_expf_poly(-100.0f) < 1e-43f);
}

/* swiglu: the SIMD version gives the reference bits for every length (full groups of 8
 * through the polynomial, the rest through expf), and both are close to the exact value. */
static void test_swiglu(void **state)
{
    (void)state;
    ops_init();
    const struct ops_kernels *v = simd_kernels();
    float g1[300], g2[300], u[300], g0[300];
    for (int n = 1; n < 300; n += 5) {
        for (int i = 0; i < n; i++) {
            g0[i] = g1[i] = g2[i] = frand() * (i % 9 == 0    ? 60.0f
                                               : i % 13 == 0 ? 80.0f
                                                             : 4.0f); // some saturate
            u[i] = frand();
        }
        ops_ref()->swiglu(n, g1, u);
        for (int i = 0; i < n; i++) {
            const double x = g0[i], want = x / (1.0 + exp(-x)) * u[i];
            assert_true(fabs(g1[i] - want) <= 1e-6 * (fabs(x * u[i]) + 1e-30));
        }
        if (!v) continue;
        v->swiglu(n, g2, u);
        assert_memory_equal(g1, g2, (size_t)n * sizeof(float));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_round_trip),
        cmocka_unit_test(test_simd_matches_ref),
        cmocka_unit_test(test_expf_poly),
        cmocka_unit_test(test_swiglu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
