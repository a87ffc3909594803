/* engine/ops: half conversions against exhaustive round trips, and every SIMD kernel set the
 * machine has (AVX2 and AVX-512 on x86, NEON on aarch64; a set it lacks is reported skipped
 * by name) against the scalar references on random lengths. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/kernels.h"
#include "engine/ops.h"
#include "engine/cpufeat.h"
#if defined(__x86_64__) || defined(__i386__)
#include "engine/x86/ops_avx2.h"
#include "engine/x86/ops_avx512.h"
#endif
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

struct variant {
    const char *name;
    const struct ops_kernels *k;
};

/* This architecture's SIMD tables the CPU runs, into v (at most 2); prints a skip line naming
 * each one it lacks. Returns how many. */
static int simd_variants(struct variant *v)
{
    int n = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (ops_have_avx2())
        v[n++] = (struct variant){"avx2", ops_avx2_kernels()};
    else
        printf("skip: avx2 ops (CPU lacks AVX2+FMA+F16C)\n");
    if (cpufeat_has_avx512())
        v[n++] = (struct variant){"avx512", ops_avx512_kernels()};
    else
        printf("skip: avx512 ops (CPU lacks AVX-512 F/BW/VL/DQ+VNNI)\n");
#elif defined(__aarch64__)
    if (cpufeat_arm_hw_level() >= CPUFEAT_ARM_NEON)
        v[n++] = (struct variant){"neon", ops_neon_kernels()};
    else
        printf("skip: neon ops (no Advanced SIMD)\n");
#else
    printf("skip: no SIMD kernels for this architecture\n");
#endif
    return n;
}

/* round_f16 gives the reference's bits for every float whose exponent a half can reach, near
 * and past its range (subnormals, ties, overflow to infinity), at every tail length. */
static void check_round_f16(struct variant v)
{
    enum { N = 4096 };
    static float want[N], got[N];
    for (uint32_t base = 0x33000000u; base < 0x47900000u; base += 0x00011000u) {
        for (int i = 0; i < N; i++) {
            const uint32_t u = (base + (uint32_t)i * 7u) | (i & 1 ? 0x80000000u : 0);
            memcpy(&want[i], &u, 4);
        }
        const int n = (int)(base >> 12) % N + 1;
        memcpy(got, want, sizeof want);
        ops_ref()->round_f16(n, want);
        v.k->round_f16(n, got);
        if (memcmp(want, got, (size_t)n * 4) != 0)
            fail_msg("round_f16 %s differs from the reference near 0x%08x", v.name, base);
    }
    float specials[] = {INFINITY, -INFINITY, 65519.0f, 65520.0f, -0.0f, 1.0f + 1.0f / 2048};
    float copy[6];
    memcpy(copy, specials, sizeof copy);
    ops_ref()->round_f16(6, specials);
    v.k->round_f16(6, copy);
    assert_memory_equal(specials, copy, sizeof copy);
    float nan1 = NAN;
    v.k->round_f16(1, &nan1);
    assert_true(isnan(nan1));
}

static void test_simd_matches_ref(void **state)
{
    (void)state;
    kernels_init();
    struct variant vs[2] = {{NULL, NULL}, {NULL, NULL}};
    const int n_v = simd_variants(vs);
    if (n_v == 0) skip();
    const struct ops_kernels *r = ops_ref();
    uint16_t a[300], b[300], y1[300], y2[300];
    float x[300];
    for (int k = 0; k < n_v; k++) {
        const struct ops_kernels *v = vs[k].k;
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
        check_round_f16(vs[k]);
    }
    // The SIMD sets follow one summation order (the AVX2 one): equal dots between them.
    for (int k = 1; k < n_v; k++)
        for (int n = 1; n < 300; n += 7) {
            for (int i = 0; i < n; i++) {
                a[i] = ops_f32_to_f16(frand() * 8.0f);
                b[i] = ops_f32_to_f16(frand());
            }
            const float d0 = vs[0].k->dot_f16(n, a, b), d1 = vs[k].k->dot_f16(n, a, b);
            if (memcmp(&d0, &d1, sizeof d0) != 0)
                fail_msg("dot_f16 n=%d: %s %.9g, %s %.9g", n, vs[0].name, (double)d0, vs[k].name,
                         (double)d1);
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
    kernels_init();
    struct variant vs[2] = {{NULL, NULL}, {NULL, NULL}};
    const int n_v = simd_variants(vs);
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
        for (int k = 0; k < n_v; k++) {
            memcpy(g2, g0, sizeof(float) * (size_t)n);
            vs[k].k->swiglu(n, g2, u);
            if (memcmp(g1, g2, (size_t)n * sizeof(float)) != 0)
                fail_msg("swiglu n=%d: %s differs from the reference", n, vs[k].name);
        }
    }
}

/* The reference's GeGLU element by its definition: GELU's tanh form on the input rounded to
 * half, rounded to half again; 0 from -10 down, the identity from 10 up. */
static float geglu_spec(float x, float u)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x * u;
    const float h = ops_f16_to_f32(ops_f32_to_f16(x));
    const float g =
        0.5f * h *
        (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return ops_f16_to_f32(ops_f32_to_f16(g)) * u;
}

/* geglu: the reference kernel and every set give the definition's bits for every length, on
 * inputs across the table's range, beyond +-10, at +-10 exactly, and at half rounding ties;
 * and the values are GELU's to within the half roundings. */
static void test_geglu(void **state)
{
    (void)state;
    kernels_init();
    struct variant vs[2] = {{NULL, NULL}, {NULL, NULL}};
    const int n_v = simd_variants(vs);
    float g0[300], g1[300], g2[300], u[300];
    for (int n = 1; n < 300; n += 7) {
        for (int i = 0; i < n; i++) {
            const float x = frand() * (i % 5 == 0 ? 7.0f : 3.0f); // within and beyond +-10
            g0[i] = i % 11 == 3   ? (i % 2 ? 10.0f : -10.0f)
                    : i % 11 == 7 ? 1.0f + 0x1p-11f * (float)(1 + 2 * (i % 7)) // half ties
                    : i % 11 == 9 ? 9.999f
                                  : x;
            u[i] = frand();
        }
        memcpy(g1, g0, sizeof(float) * (size_t)n);
        ops_ref()->geglu(n, g1, u);
        for (int i = 0; i < n; i++) {
            const float want = geglu_spec(g0[i], u[i]);
            if (memcmp(&g1[i], &want, sizeof want) != 0)
                fail_msg("geglu n=%d [%d] x=%.9g: reference %.9g vs definition %.9g", n, i, g0[i],
                         g1[i], want);
            const double x = g0[i], exact = 0.5 * x * (1.0 + erf(x / sqrt(2.0))) * u[i];
            assert_true(fabs(g1[i] - exact) <= 3e-3 * fabs(x * u[i]) + 1e-3 * fabs(u[i]));
        }
        for (int k = 0; k < n_v; k++) {
            memcpy(g2, g0, sizeof(float) * (size_t)n);
            vs[k].k->geglu(n, g2, u);
            if (memcmp(g1, g2, (size_t)n * sizeof(float)) != 0)
                fail_msg("geglu n=%d: %s differs from the reference", n, vs[k].name);
        }
    }
    // every half value within (-10, 10) through each set, against the definition
    static float xs[1 << 16], ys[1 << 16], us[1 << 16];
    int m = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        const float x = ops_f16_to_f32((uint16_t)b);
        if (x > -10.0f && x < 10.0f) xs[m] = x, us[m] = 1.0f + (float)(b % 3), m++;
    }
    for (int k = -1; k < n_v; k++) {
        memcpy(ys, xs, sizeof(float) * (size_t)m);
        (k < 0 ? ops_ref() : vs[k].k)->geglu(m, ys, us);
        for (int i = 0; i < m; i++) {
            const float want = geglu_spec(xs[i], us[i]);
            if (memcmp(&ys[i], &want, sizeof want) != 0)
                fail_msg("geglu %s x=%.9g: %.9g vs definition %.9g", k < 0 ? "ref" : vs[k].name,
                         xs[i], ys[i], want);
        }
    }
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* rmsnorm: every set within one float ulp of the reference (the double sum of squares may be
 * added in another order) on random lengths and magnitudes, in place and not; in practice
 * equal, which the test reports. */
static void test_rmsnorm(void **state)
{
    (void)state;
    struct variant vs[2] = {{NULL, NULL}, {NULL, NULL}};
    const int n_v = simd_variants(vs);
    static float x[5000], w[5000], y0[5000], y1[5000];
    for (int k = 0; k < n_v; k++) {
        int n_diff = 0, n_all = 0;
        for (int n = 1; n < 5000; n += n < 130 ? 1 : 611) {
            const float mag = n % 3 == 0 ? 1e-3f : n % 3 == 1 ? 1.0f : 300.0f;
            for (int i = 0; i < n; i++) {
                x[i] = frand() * mag * (i % 17 == 0 ? 50.0f : 1.0f);
                w[i] = frand();
            }
            ops_ref()->rmsnorm(n, y0, x, w, 1e-6f);
            vs[k].k->rmsnorm(n, y1, x, w, 1e-6f);
            for (int i = 0; i < n; i++, n_all++) {
                const uint32_t a = bits_of(y0[i]), b = bits_of(y1[i]);
                n_diff += a != b;
                if ((a > b ? a - b : b - a) > 1)
                    fail_msg("rmsnorm %s n=%d [%d]: %.9g vs %.9g", vs[k].name, n, i, (double)y0[i],
                             (double)y1[i]);
            }
            vs[k].k->rmsnorm(n, x, x, w, 1e-6f); // in place
            assert_memory_equal(x, y1, sizeof(float) * (size_t)n);
        }
        printf("rmsnorm %s: %d of %d outputs differ from the reference by one ulp\n", vs[k].name,
               n_diff, n_all);
    }
}

/* rope: every set gives the reference bits, for both layouts and every pair count 1..80
 * (odd counts take the adjacent layout's two-product last pair). */
static void test_rope(void **state)
{
    (void)state;
    struct variant vs[2] = {{NULL, NULL}, {NULL, NULL}};
    const int n_v = simd_variants(vs);
    float cs[64], sn[64], x0[256], x1[256], x2[256];
    for (int k = 0; k < n_v; k++)
        for (int neox = 0; neox < 2; neox++)
            for (int half = 1; half <= 64; half++) {
                for (int i = 0; i < half; i++) {
                    const float a = frand() * 3.0f;
                    cs[i] = cosf(a);
                    sn[i] = sinf(a);
                }
                for (int i = 0; i < 256; i++)
                    x0[i] = x1[i] = x2[i] = frand() * 10.0f;
                ops_ref()->rope(x1, cs, sn, 2 * half, neox);
                vs[k].k->rope(x2, cs, sn, 2 * half, neox);
                if (memcmp(x1, x2, sizeof x1) != 0)
                    fail_msg("rope %s %s %d pairs differs from the reference", vs[k].name,
                             neox ? "neox" : "adjacent", half);
                assert_memory_equal(x1 + 2 * half, x0 + 2 * half,
                                    sizeof(float) * (size_t)(256 - 2 * half)); // rest untouched
            }
}

int main(void)
{
    kernels_init();
    printf("ops set in use: %s\n", ops_variant_name());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_round_trip),
        cmocka_unit_test(test_simd_matches_ref),
        cmocka_unit_test(test_expf_poly),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_geglu),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
