/* AVX-512 VNNI kernel for the repacked Q6_K_R16 weights (layout in quants_repack.h) against
 * Q8_K activations, in the order Q4_K_R16 uses (the AVX-512 set's own for K-quants): per
 * super-block and (row, token) the exact int32 sum over the 16 sub-blocks of scale × the
 * sub-block's 16-element dot, then one float FMA. Each zmm holds 4 quants of 16 weight rows,
 * so one vpdpbusd advances 16 outputs by 4 elements, no horizontal sums. Every output is
 * computed the same way whatever the tile shape. Compiled with the AVX-512 F/BW/VL/DQ/VNNI
 * flags; only called when kernels_init detected them. */
#include "engine/quants/blocks.h"
#include "engine/quants/quants_repack.h"
#include "engine/quants/x86/quants_x86.h"

#include <immintrin.h>
#include <stddef.h>

#define INLINE_ALWAYS static inline __attribute__((always_inline))

/* Bytes ahead of the current super-block that a streaming tile prefetches in each row group
 * (as the other repacked kernels; not tuned). */
#define PF_BYTES 1024

INLINE_ALWAYS int32_t load_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE_ALWAYS float load_f32(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* The 16 rows' unsigned quants (q + 32, 0..63) of elements 16j + 4k .. + 3 of a group's
 * super-block wb: the low nibbles of pair j / 2 (high nibbles for odd j) merged with bits
 * 2(j % 4) .. + 1 of the high-bit chunk, moved to bits 4..5. */
INLINE_ALWAYS __m512i q6_r16_chunk(const uint8_t *wb, int j, int k)
{
    __m512i nib = _mm512_loadu_si512(wb + Q6_K_R16_QL + 64 * (4 * (j / 2) + k));
    if (j & 1) nib = _mm512_srli_epi16(nib, 4);
    __m512i hb = _mm512_loadu_si512(wb + Q6_K_R16_QH + 64 * (4 * (j / 4) + k));
    switch (j % 4) {
    case 0:
        hb = _mm512_slli_epi16(hb, 4);
        break;
    case 1:
        hb = _mm512_slli_epi16(hb, 2);
        break;
    case 3:
        hb = _mm512_srli_epi16(hb, 2);
        break;
    default:
        break;
    }
    hb = _mm512_and_si512(hb, _mm512_set1_epi8(0x30));
    // (nib & 0x0f) | hb in one ternary-logic operation (A = nib, B = hb, C = the mask)
    return _mm512_ternarylogic_epi32(nib, hb, _mm512_set1_epi8(0x0f), 0xec);
}

/* Straight-line kernel over G groups of 16 rows and NC tokens. Per sub-block j the dot starts
 * at -32 × the activation's 16-element sum (bsums[j]), which removes the stored +32 offset, so
 * it is the exact signed dot; scaled by the rows' int8 scales (vpmulld) into one int32 sum per
 * super-block (|sum| < 16 · 128 · 16 · 32 · 127 < 2^31), then acc += sum * (d * dy). */
INLINE_ALWAYS void tile_q6k_r16(const struct quant_tile *t, int G, int NC)
{
    const size_t gblk = 16 * sizeof(struct block_q6_K), ablk = sizeof(struct block_q8_K);
    const size_t gstride = 16 * t->x_stride;
    const bool stream = NC == 1 || t->is_stream;
    const uint8_t *y = t->y;
    __m512 acc[2][4];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            acc[g][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < t->n / QK_K; b++) {
        const uint8_t *wb[2];
        for (int g = 0; g < G; g++) {
            wb[g] = (const uint8_t *)t->x + g * gstride + (size_t)b * gblk;
            if (stream)
                for (size_t off = 0; off < gblk; off += 64)
                    _mm_prefetch((const char *)wb[g] + PF_BYTES + off, _MM_HINT_T0);
        }
        const uint8_t *a[4];
        for (int c = 0; c < NC; c++)
            a[c] = y + c * t->y_stride + (size_t)b * ablk;
        __m512i sum[2][4];
        for (int g = 0; g < G; g++)
            for (int c = 0; c < NC; c++)
                sum[g][c] = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) {
            __m512i dot[2][4];
            for (int c = 0; c < NC; c++) {
                int16_t bs;
                memcpy(&bs, a[c] + offsetof(struct block_q8_K, bsums) + 2 * (size_t)j, 2);
                const __m512i init = _mm512_set1_epi32(-32 * (int32_t)bs);
                for (int g = 0; g < G; g++)
                    dot[g][c] = init;
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m512i w[2];
                for (int g = 0; g < G; g++)
                    w[g] = q6_r16_chunk(wb[g], j, k);
                for (int c = 0; c < NC; c++) {
                    const __m512i av = _mm512_set1_epi32(
                        load_i32(a[c] + offsetof(struct block_q8_K, qs) + 16 * (size_t)j + 4 * k));
                    for (int g = 0; g < G; g++)
                        dot[g][c] = _mm512_dpbusd_epi32(dot[g][c], w[g], av);
                }
            }
            for (int g = 0; g < G; g++) {
                const __m512i sc = _mm512_cvtepi8_epi32(
                    _mm_loadu_si128((const __m128i *)(wb[g] + Q6_K_R16_SC + 16 * j)));
                for (int c = 0; c < NC; c++)
                    sum[g][c] = _mm512_add_epi32(sum[g][c], _mm512_mullo_epi32(dot[g][c], sc));
            }
        }
        for (int g = 0; g < G; g++) {
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wb[g]));
            for (int c = 0; c < NC; c++)
                acc[g][c] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[g][c]),
                                    _mm512_mul_ps(d, _mm512_set1_ps(load_f32(a[c]))), acc[g][c]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            _mm512_storeu_ps(t->s + c * t->s_stride + 16 * g, acc[g][c]);
}

/* Tiles of up to 2 groups x 4 tokens, the registers' limit; larger ones are cut. */
void q6_K_r16_tile_avx512(const struct quant_tile *tile)
{
    struct quant_tile part = *tile;
    for (int c0 = 0; c0 < tile->n_cols; c0 += 4) {
        part.y = (const uint8_t *)tile->y + (size_t)c0 * tile->y_stride;
        part.n_cols = tile->n_cols - c0 < 4 ? tile->n_cols - c0 : 4;
        for (int r0 = 0; r0 < tile->n_rows; r0 += 32) {
            part.x = (const uint8_t *)tile->x + (size_t)r0 * tile->x_stride;
            part.s = tile->s + (size_t)c0 * tile->s_stride + r0;
            const int G = tile->n_rows - r0 >= 32 ? 2 : 1;
            switch (part.n_cols) { // flat dispatch: compile-time shapes
            case 1:
                G == 2 ? tile_q6k_r16(&part, 2, 1) : tile_q6k_r16(&part, 1, 1);
                break;
            case 2:
                G == 2 ? tile_q6k_r16(&part, 2, 2) : tile_q6k_r16(&part, 1, 2);
                break;
            case 3:
                G == 2 ? tile_q6k_r16(&part, 2, 3) : tile_q6k_r16(&part, 1, 3);
                break;
            default:
                G == 2 ? tile_q6k_r16(&part, 2, 4) : tile_q6k_r16(&part, 1, 4);
                break;
            }
        }
    }
}
