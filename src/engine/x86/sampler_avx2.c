/* AVX2 passes of the sampler over the vocabulary (see sampler_x86.h). */
#include "engine/x86/sampler_x86.h"
#include "engine/ops.h"

#include <math.h>

#if defined(__AVX2__) && defined(__FMA__)
#include "engine/x86/ops_avx2_internal.h"

#include <immintrin.h>

int32_t sampler_argmax_avx2(const float *x, int32_t n)
{
    __m256 vm = _mm256_set1_ps(-INFINITY);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        vm = _mm256_max_ps(_mm256_loadu_ps(x + i), vm); // a NaN in x yields vm
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    float m = -INFINITY;
    for (int k = 0; k < 8; k++)
        m = lanes[k] > m ? lanes[k] : m;
    for (int32_t j = i; j < n; j++)
        m = x[j] > m ? x[j] : m;
    if (m == -INFINITY) return -1;
    const __m256 vmax = _mm256_set1_ps(m);
    for (i = 0; i + 8 <= n; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vmax, _CMP_EQ_OQ));
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == m) return i;
    return -1; // not reached
}

int32_t sampler_next_above_avx2(const float *x, int32_t i, int32_t n, float t)
{
    const __m256 vt = _mm256_set1_ps(t);
    for (; i + 8 <= n; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vt, _CMP_GT_OQ));
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] > t) return i;
    return n;
}

double sampler_sum_exp_avx2(const float *x, int32_t n, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = ops_expf_poly8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double d[4];
    _mm256_storeu_pd(d, _mm256_add_pd(lo, hi));
    double z = (d[0] + d[2]) + (d[1] + d[3]);
    for (; i < n; i++)
        z += (double)ops_expf_poly(x[i] - m);
    return z;
}

#else // built without the ISA flags: never selected, but keep the symbols

int32_t sampler_argmax_avx2(const float *x, int32_t n)
{
    (void)x;
    (void)n;
    return -1;
}

int32_t sampler_next_above_avx2(const float *x, int32_t i, int32_t n, float t)
{
    (void)x;
    (void)i;
    (void)t;
    return n;
}

double sampler_sum_exp_avx2(const float *x, int32_t n, float m)
{
    (void)x;
    (void)n;
    (void)m;
    return 0.0;
}

#endif
