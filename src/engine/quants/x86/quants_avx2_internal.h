/* Helpers shared by the x86 kernel files of engine/quants. Include only from files compiled
 * with at least -mavx2 -mfma -mf16c (*_avx2.c, *_avx512.c). */
#ifndef ENGINE_QUANTS_X86_QUANTS_AVX2_INTERNAL_H
#define ENGINE_QUANTS_X86_QUANTS_AVX2_INTERNAL_H

#include "engine/quants/quant_types.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define INLINE_ALWAYS static inline __attribute__((always_inline))

/* Calls fn(type, t, NR, NC) with the tile shape as compile-time constants, so each shape gets
 * its own fully unrolled, register-resident instance. A flat dispatch switch. */
#define TILE_SWITCH(fn, type, t)                                                                   \
    do {                                                                                           \
        switch (((t)->n_rows - 1) * QUANT_TILE_MAX + ((t)->n_cols - 1)) {                          \
        case 0:                                                                                    \
            fn(type, t, 1, 1);                                                                     \
            break;                                                                                 \
        case 1:                                                                                    \
            fn(type, t, 1, 2);                                                                     \
            break;                                                                                 \
        case 2:                                                                                    \
            fn(type, t, 1, 3);                                                                     \
            break;                                                                                 \
        case 3:                                                                                    \
            fn(type, t, 1, 4);                                                                     \
            break;                                                                                 \
        case 4:                                                                                    \
            fn(type, t, 2, 1);                                                                     \
            break;                                                                                 \
        case 5:                                                                                    \
            fn(type, t, 2, 2);                                                                     \
            break;                                                                                 \
        case 6:                                                                                    \
            fn(type, t, 2, 3);                                                                     \
            break;                                                                                 \
        case 7:                                                                                    \
            fn(type, t, 2, 4);                                                                     \
            break;                                                                                 \
        case 8:                                                                                    \
            fn(type, t, 3, 1);                                                                     \
            break;                                                                                 \
        case 9:                                                                                    \
            fn(type, t, 3, 2);                                                                     \
            break;                                                                                 \
        case 10:                                                                                   \
            fn(type, t, 3, 3);                                                                     \
            break;                                                                                 \
        case 11:                                                                                   \
            fn(type, t, 3, 4);                                                                     \
            break;                                                                                 \
        case 12:                                                                                   \
            fn(type, t, 4, 1);                                                                     \
            break;                                                                                 \
        case 13:                                                                                   \
            fn(type, t, 4, 2);                                                                     \
            break;                                                                                 \
        case 14:                                                                                   \
            fn(type, t, 4, 3);                                                                     \
            break;                                                                                 \
        case 15:                                                                                   \
            fn(type, t, 4, 4);                                                                     \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* Sum of 8 float lanes in a fixed order (high half onto low, then pairs). */
INLINE_ALWAYS float hsum_f32x8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE_ALWAYS int32_t hsum_i32x8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* The lane sums of four vectors, as the four lanes of the result, for lanes of magnitude at
 * most 4096 (Q4_0 block dots: 4 products of |q| <= 8 and |y| <= 127) so that sums of 4 fit
 * int16: pairs are packed to 16 bits and summed by madd, twice, then the halves added.
 * Exact, and fewer shuffles than horizontal adds. */
INLINE_ALWAYS __m128i hsum4_small_i32x8(const __m256i p[4])
{
    const __m256i one = _mm256_set1_epi16(1);
    __m256i a = _mm256_madd_epi16(_mm256_packs_epi32(p[0], p[1]), one);
    __m256i b = _mm256_madd_epi16(_mm256_packs_epi32(p[2], p[3]), one);
    __m256i h = _mm256_madd_epi16(_mm256_packs_epi32(a, b), one);
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* The half-precision scales of four blocks as floats. */
INLINE_ALWAYS __m128 load_half4(const uint8_t *const blk[4])
{
    uint16_t h[4];
    for (int r = 0; r < 4; r++)
        memcpy(&h[r], blk[r], 2);
    return _mm_cvtph_ps(
        _mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

/* Four bytes as an int32 (a block's packed quants or its stored sums), any alignment. */
INLINE_ALWAYS int32_t load_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE_ALWAYS float load_half(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 16 bytes of packed nibbles -> 32 bytes 0..15: low nibbles first, then high nibbles (the
 * element order of the 32-element formats). */
INLINE_ALWAYS __m256i nibbles_32(const uint8_t *p)
{
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* Byte j of the result is 0xff when bit j of bits is set. */
INLINE_ALWAYS __m256i bits_to_bytes(uint32_t bits)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                            2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* u (unsigned bytes) . s (signed bytes) as 8 int32 lanes, each the sum of 4 adjacent products.
 * Exact when |u_i * s_i + u_j * s_j| fits int16, which holds for every format here. */
INLINE_ALWAYS __m256i madd_u8_i8(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

#endif
