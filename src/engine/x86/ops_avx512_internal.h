/* Helpers shared by the AVX-512 files of engine/x86/ (ops_avx512.c, attn_avx512.c). Include
 * only from *_avx512.c files, which are compiled with the AVX-512 flags. */
#ifndef ENGINE_X86_OPS_AVX512_INTERNAL_H
#define ENGINE_X86_OPS_AVX512_INTERNAL_H

#include <immintrin.h>

/* ops_expf_poly on 16 lanes, the same operations in the same order as ops_expf_poly8. */
static inline __m512 ops_expf_poly16(__m512 x)
{
    const __m512 shift = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
    const __m512 n = _mm512_sub_ps(z, shift);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(z), 23);
    const __m512 k =
        _mm512_castsi512_ps(_mm512_add_epi32(e, _mm512_castps_si512(_mm512_set1_ps(1.0f))));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(
            _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
            _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_mul_ps(_mm512_set1_ps(0x1.ffffecp-1f), b));
    const __m512 abs_n = _mm512_abs_ps(n);
    const __mmask16 big = _mm512_cmp_ps_mask(abs_n, _mm512_set1_ps(126.0f), _CMP_GT_OQ);
    const __m512 plain = _mm512_fmadd_ps(k, j, k);
    if (!big) return plain;
    const __mmask16 le0 = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512i g = _mm512_maskz_mov_epi32(le0, _mm512_set1_epi32((int)0x82000000u));
    const __m512 s1 = _mm512_castsi512_ps(_mm512_add_epi32(g, _mm512_set1_epi32(0x7f000000)));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_sub_epi32(e, g));
    const __mmask16 huge = _mm512_cmp_ps_mask(abs_n, _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    const __m512 scaled = _mm512_mul_ps(_mm512_fmadd_ps(s2, j, s2), s1);
    const __m512 r = _mm512_mask_blend_ps(big, plain, scaled);
    return _mm512_mask_blend_ps(huge, r, _mm512_mul_ps(s1, s1));
}

/* 16 halves to floats and back (round to nearest even). */
static inline __m512 ops_load_h16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static inline void ops_store_h16(uint16_t *p, __m512 v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

#endif
