/* AVX2 + FMA + F16C variants of the ops.h kernels; compiled with those ISA flags and only
 * called after ops_have_avx2(). Like the reference kernels they mirror, full 32-element steps
 * run in SIMD with four accumulators and the rest goes through the scalar tails. */
#include "engine/x86/ops_avx2.h"
#include "engine/cpufeat.h"
#include "engine/ops_ref.h"

#include <math.h>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "engine/x86/ops_avx2_internal.h"

#include <immintrin.h>

#define STEP 32

static inline __m256 load_h(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline void store_h(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

static float dot_f16(int64_t n, const uint16_t *a, const uint16_t *b)
{
    const int64_t np = n & ~(int64_t)(STEP - 1);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++)
            acc[j] = _mm256_fmadd_ps(load_h(a + i + 8 * j), load_h(b + i + 8 * j), acc[j]);
    __m256 s8 = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    return (float)ops_dot_f16_tail(np, n, a, b, (double)_mm_cvtss_f32(s));
}

static void mad_f16(int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    const int64_t np = n & ~(int64_t)(STEP - 1);
    const __m256 vs = _mm256_set1_ps(s);
    for (int64_t i = 0; i < np; i += 8)
        store_h(y + i, _mm256_fmadd_ps(load_h(x + i), vs, load_h(y + i)));
    ops_mad_f16_tail(np, n, y, x, s);
}

static void scale_f16(int64_t n, uint16_t *y, float s)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        store_h(y + i, _mm256_mul_ps(load_h(y + i), vs));
    for (; i < n; i++)
        y[i] = ops_f32_to_f16(ops_f16_to_f32(y[i]) * s);
}

static void f32_to_f16(int64_t n, const float *x, uint16_t *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = ops_f32_to_f16(x[i]);
}

static void round_f16(int64_t n, float *x)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++)
        x[i] = ops_f16_to_f32(ops_f32_to_f16(x[i]));
}

static void swiglu(int64_t n, float *g, const float *u)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = ops_expf_poly8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(silu, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* The GELU table gathered at half(g) (F16C rounds to nearest even, as ops_f32_to_f16), times u;
 * g * u from 10 up, 0 from -10 down: the reference kernel's bits. */
static void geglu(int64_t n, float *g, const float *u)
{
    const float *tab = ops_gelu_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i), y = _mm256_loadu_ps(u + i);
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        __m256 v = _mm256_mul_ps(_mm256_i32gather_ps(tab, h, 4), y);
        v = _mm256_blendv_ps(v, _mm256_mul_ps(x, y), _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        v = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), v);
        _mm256_storeu_ps(g + i, v);
    }
    ops_geglu_tail(i, n, g, u);
}

static const struct ops_kernels kernels_avx2 = {
    .dot_f16 = dot_f16,
    .mad_f16 = mad_f16,
    .scale_f16 = scale_f16,
    .f32_to_f16 = f32_to_f16,
    .round_f16 = round_f16,
    .swiglu = swiglu,
    .rmsnorm = ops_rmsnorm_ref,
    .rope = ops_rope_ref,
    .geglu = geglu,
};

const struct ops_kernels *ops_avx2_kernels(void)
{
    return &kernels_avx2;
}

#else // built without the ISA flags: never selected, but keep the symbol

const struct ops_kernels *ops_avx2_kernels(void)
{
    return ops_ref();
}

#endif

bool ops_have_avx2(void)
{
    return cpufeat_has_avx2_fma_f16c();
}
