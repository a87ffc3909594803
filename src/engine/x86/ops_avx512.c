/* AVX-512 variants of the ops.h kernels: 16 lanes where the AVX2 variants have 8, the same
 * operations per element and the same reduction trees, so they give the AVX2 bits (rmsnorm's
 * double sum aside, see ops.h); partial vectors go through masks or the shared scalar tails.
 * Compiled with the AVX-512 flags; only selected after cpufeat_has_avx512(). */
#include "engine/x86/ops_avx512.h"
#include "engine/ops_ref.h"

#include <math.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include "engine/x86/ops_avx512_internal.h"

#include <immintrin.h>

static inline __mmask16 tail_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* The AVX2 dot's arithmetic: four 8-lane FMA chains per 32 elements, here as two 16-lane ones
 * (chains 0|1 and 2|3), so (c0 + c2) | (c1 + c3) is one add and its halves the next. */
static float dot_f16(int64_t n, const uint16_t *a, const uint16_t *b)
{
    const int64_t np = n & ~(int64_t)31;
    __m512 c01 = _mm512_setzero_ps(), c23 = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; i += 32) {
        c01 = _mm512_fmadd_ps(ops_load_h16(a + i), ops_load_h16(b + i), c01);
        c23 = _mm512_fmadd_ps(ops_load_h16(a + i + 16), ops_load_h16(b + i + 16), c23);
    }
    const __m512 v = _mm512_add_ps(c01, c23);
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    return (float)ops_dot_f16_tail(np, n, a, b, (double)_mm_cvtss_f32(s));
}

static void mad_f16(int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    const int64_t np = n & ~(int64_t)31;
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < np; i += 16)
        ops_store_h16(y + i, _mm512_fmadd_ps(ops_load_h16(x + i), vs, ops_load_h16(y + i)));
    ops_mad_f16_tail(np, n, y, x, s);
}

static void scale_f16(int64_t n, uint16_t *y, float s)
{
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, y + i));
        _mm256_mask_storeu_epi16(y + i, m,
                                 _mm512_cvtps_ph(_mm512_mul_ps(v, vs), _MM_FROUND_TO_NEAREST_INT));
    }
}

static void f32_to_f16(int64_t n, const float *x, uint16_t *y)
{
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
}

static void round_f16(int64_t n, float *x)
{
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m256i h =
            _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm512_mask_storeu_ps(x + i, m, _mm512_cvtph_ps(h));
    }
}

/* Full groups of 8 through the polynomial (a last group of 8 as a half-masked vector: the
 * lanes are independent), the rest through libm's expf, as the reference. */
static void swiglu(int64_t n, float *g, const float *u)
{
    const int64_t nv = n & ~(int64_t)7;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < nv; i += 16) {
        const __mmask16 m = tail_mask(nv - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 e = ops_expf_poly16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, u + i)));
    }
    for (int64_t i = nv; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* Squares in float (exact as the reference's), summed in double over two 8-lane chains. */
static void rmsnorm(int64_t n, float *y, const float *x, const float *w, float eps)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        const __m512 sq = _mm512_mul_ps(v, v);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
    }
    const double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    const float mean = (float)(sum / (double)n);
    const __m512 scale = _mm512_set1_ps(1.0f / sqrtf(mean + eps));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
    }
}

/* NeoX halves: 16 pairs a step. Adjacent pairs: 8 pairs a step, the even lanes
 * fma(c, x0, -(s * x1)) and the odd ones fma(s, x0, c * x1) as one fmaddsub over blended
 * operands; an odd last pair (two rounded products) and the rest through the scalar tail. */
static void rope(float *x, const float *cs, const float *sn, int n_rot, bool neox)
{
    const int half = n_rot / 2;
    if (neox) {
        for (int i = 0; i < half; i += 16) {
            const __mmask16 m = tail_mask(half - i);
            const __m512 x0 = _mm512_maskz_loadu_ps(m, x + i);
            const __m512 x1 = _mm512_maskz_loadu_ps(m, x + half + i);
            const __m512 c = _mm512_maskz_loadu_ps(m, cs + i);
            const __m512 s = _mm512_maskz_loadu_ps(m, sn + i);
            _mm512_mask_storeu_ps(x + i, m, _mm512_fmsub_ps(c, x0, _mm512_mul_ps(s, x1)));
            _mm512_mask_storeu_ps(x + half + i, m, _mm512_fmadd_ps(s, x0, _mm512_mul_ps(c, x1)));
        }
        return;
    }
    const int hv = half - (half & 1);
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __mmask16 odd = 0xaaaa;
    int i = 0;
    for (; i + 8 <= hv; i += 8) {
        const __m512 v = _mm512_loadu_ps(x + 2 * i);
        const __m512 vs = _mm512_permute_ps(v, 0xb1); // pairs swapped
        const __m512 c =
            _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cs + i)));
        const __m512 s =
            _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(sn + i)));
        const __m512 a = _mm512_mask_blend_ps(odd, c, s);
        const __m512 b = _mm512_mask_blend_ps(odd, v, vs);
        const __m512 t = _mm512_mask_blend_ps(odd, _mm512_mul_ps(s, vs), _mm512_mul_ps(c, v));
        _mm512_storeu_ps(x + 2 * i, _mm512_fmaddsub_ps(a, b, t));
    }
    ops_rope_tail(x, cs, sn, n_rot, false, i);
}

/* The AVX2 kernel's lanes, 16 at a time, the tail under a mask. */
static void geglu(int64_t n, float *g, const float *u)
{
    const float *tab = ops_gelu_table();
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i), y = _mm512_maskz_loadu_ps(m, u + i);
        const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        __m512 v = _mm512_mul_ps(_mm512_mask_i32gather_ps(zero, m, h, tab, 4), y);
        v = _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x, y);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), zero);
        _mm512_mask_storeu_ps(g + i, m, v);
    }
}

static const struct ops_kernels kernels_avx512 = {
    .dot_f16 = dot_f16,
    .mad_f16 = mad_f16,
    .scale_f16 = scale_f16,
    .f32_to_f16 = f32_to_f16,
    .round_f16 = round_f16,
    .swiglu = swiglu,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .geglu = geglu,
};

const struct ops_kernels *ops_avx512_kernels(void)
{
    return &kernels_avx512;
}

#else // built without the ISA flags: never selected, but keep the symbol

const struct ops_kernels *ops_avx512_kernels(void)
{
    return ops_ref();
}

#endif
