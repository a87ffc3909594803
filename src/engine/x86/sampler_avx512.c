/* AVX-512 passes of the sampler over the vocabulary (see sampler_x86.h): the AVX2 ones with 16
 * lanes, the tails under masks. */
#include "engine/x86/sampler_x86.h"
#include "engine/ops.h"
#include "engine/x86/ops_avx512_internal.h"

#include <immintrin.h>
#include <math.h>

static inline __mmask16 tail_mask(int32_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

int32_t sampler_argmax_avx512(const float *x, int32_t n)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 vm = ninf;
    for (int32_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i);
        vm = _mm512_max_ps(v, vm); // a NaN in v yields vm
    }
    const float m = _mm512_reduce_max_ps(vm);
    if (!(m > -INFINITY)) return -1;
    const __m512 vmax = _mm512_set1_ps(m);
    for (int32_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __mmask16 hit =
            _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, x + i), vmax, _CMP_EQ_OQ);
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    return -1; // not reached
}

int32_t sampler_next_above_avx512(const float *x, int32_t i, int32_t n, float t)
{
    const __m512 vt = _mm512_set1_ps(t);
    for (; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __mmask16 hit =
            _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, x + i), vt, _CMP_GT_OQ);
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    return n;
}

double sampler_sum_exp_avx512(const float *x, int32_t n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int32_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        // masked-off lanes read -inf, whose e^ is 0
        const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + i);
        const __m512 e = ops_expf_poly16(_mm512_sub_ps(v, vm));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}
