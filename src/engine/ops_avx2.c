/* AVX2 + FMA + F16C variants of the ops.h kernels; compiled with those ISA flags and only
 * called after ops_have_avx2(). Tails fall back to the scalar conversions. */
#include "engine/ops.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

float ops_dot_f16_f32_avx2(int64_t n, const uint16_t *a, const float *b)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256 a1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8)));
        acc0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        acc0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + i), acc0);
    }
    __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float r = _mm_cvtss_f32(s);
    for (; i < n; i++)
        r += ops_f16_to_f32(a[i]) * b[i];
    return r;
}

void ops_axpy_f16_avx2(int64_t n, float s, const uint16_t *x, float *y)
{
    __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vs, xv, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; i++)
        y[i] += s * ops_f16_to_f32(x[i]);
}

void ops_f32_to_f16_avx2(int64_t n, const float *x, uint16_t *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    for (; i < n; i++)
        y[i] = ops_f32_to_f16(x[i]);
}

#else // built without the ISA flags: never selected, but keep the symbols

float ops_dot_f16_f32_avx2(int64_t n, const uint16_t *a, const float *b)
{
    return ops_ref()->dot_f16_f32(n, a, b);
}

void ops_axpy_f16_avx2(int64_t n, float s, const uint16_t *x, float *y)
{
    ops_ref()->axpy_f16(n, s, x, y);
}

void ops_f32_to_f16_avx2(int64_t n, const float *x, uint16_t *y)
{
    ops_ref()->f32_to_f16(n, x, y);
}

#endif
