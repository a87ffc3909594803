/* AVX2 dots of IQ4_NL, IQ4_XS and MXFP4 weights against Q8_0 / Q8_K activations: each 32-value
 * block's nibbles are looked up in the 16-level table with one byte shuffle, multiplied with
 * the int8 activations into 8 int32 lanes, and scaled into an 8-lane float accumulator,
 * summed at the end high half onto low. The block order equals the scalar references'; the
 * lane-wise float sums round differently from them (last bits only). */
#include "engine/quants/x86/quants_avx2_internal.h"
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"

/* The 32 table values of one block's 16 nibble bytes (low nibbles first, then high). */
INLINE_ALWAYS __m256i lookup32(__m128i table, const uint8_t *qs)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    return _mm256_set_m128i(hi, lo);
}

/* 8 int32 partial sums of the products of 32 int8 pairs. */
INLINE_ALWAYS __m256i idot32(__m256i v, const int8_t *q8)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(a, v));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

INLINE_ALWAYS float lanes_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void iq4_nl_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_iq4_nl *a = x;
    const struct block_q8_0 *b = y;
    const __m128i table = _mm_loadu_si128((const __m128i *)iq4nl_values);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        const __m256i d = idot32(lookup32(table, a[i].qs), b[i].qs);
        const float scale = half_to_f32(b[i].d) * half_to_f32(a[i].d);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(scale), acc);
    }
    *s = lanes_sum(acc);
}

void iq4_xs_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_iq4_xs *a = x;
    const struct block_q8_K *b = y;
    const __m128i table = _mm_loadu_si128((const __m128i *)iq4nl_values);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = half_to_f32(a[i].d) * b[i].d;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const __m256i p = idot32(lookup32(table, a[i].qs + 16 * ib), b[i].qs + 32 * ib);
            const float scale = d * (float)iq4_xs_scale(&a[i], ib);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(scale), acc);
        }
    }
    *s = lanes_sum(acc);
}

void mxfp4_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_mxfp4 *a = x;
    const struct block_q8_0 *b = y;
    const __m128i table = _mm_loadu_si128((const __m128i *)mxfp4_values);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const __m256i d = idot32(lookup32(table, a[i].qs), b[i].qs);
        const float scale = half_to_f32(b[i].d) * e8m0_half_to_f32(a[i].e);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(scale), acc);
    }
    *s = lanes_sum(acc);
}

/* Tiles loop the single dot, so they equal it bit for bit. */
#define TILE_BY_DOTS(t, w_bytes, a_bytes)                                                          \
    void t##_vec_dot_tile_avx2(const struct quant_tile *tile)                                      \
    {                                                                                              \
        for (int c = 0; c < tile->n_cols; c++)                                                     \
            for (int r = 0; r < tile->n_rows; r++)                                                 \
                t##_vec_dot_avx2(tile->n, tile->s + (size_t)c * tile->s_stride + r,                \
                                 (const uint8_t *)tile->x + (size_t)r * tile->x_stride,            \
                                 (const uint8_t *)tile->y + (size_t)c * tile->y_stride);           \
    }
TILE_BY_DOTS(iq4_nl, 0, 0)
TILE_BY_DOTS(iq4_xs, 0, 0)
TILE_BY_DOTS(mxfp4, 0, 0)
