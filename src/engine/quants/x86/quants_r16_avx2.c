/* AVX2 product of Q4_0_R16 (16 rows interleaved, quants_repack.h) with Q8_0_S activations in
 * QUANT_ORDER_BLOCKS, the AVX2 kernels' order for Q4_0 matrices with a multiple of 8 rows: per
 * block and (row, token) the exact integer dot, then acc += dot * (dx * dy). A 32-byte half of
 * a chunk holds 4 quants of each of 8 rows, so one maddubs against the token's 4 quants
 * broadcast advances 8 rows, where the file's layout needs a sign, a maddubs, a madd and a
 * horizontal sum per (row, token). The stored nibbles are q + 8: their pair sums (<= 2 x 15 x
 * 127) stay exact in 16 bits across the block's 8 chunks (<= 30480), one madd per block makes
 * them 32-bit, and the activation's c8 = -8 * sum(q) removes the offset. Bit for bit the AVX2
 * result. Compiled with -mavx2 -mfma -mf16c. */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>

#define R16_COLS 4    // tokens per pass: 4 int16 and 4 float accumulators per 8-row half
#define PF_BYTES 1024 // prefetch distance in a streaming tile (as the AVX-512 kernel)

/* Rows [8 h, 8 h + 8) of the tile's 16 x NC outputs: the two halves run as separate passes so
 * that a pass's accumulators fit the 16 registers. */
INLINE_ALWAYS void half_q4_r16(const struct quant_tile *t, int h, int NC)
{
    const size_t gblk = 16 * sizeof(struct block_q4_0), ablk = sizeof(struct block_q8_0s);
    const bool stream = NC == 1 || t->is_stream;
    const uint8_t *y = t->y;
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i one = _mm256_set1_epi16(1);
    __m256 acc[R16_COLS];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < t->n / QK4_0; b++) {
        const uint8_t *wb = (const uint8_t *)t->x + (size_t)b * gblk;
        if (stream && h == 0)
            for (size_t off = 0; off < gblk; off += 64)
                _mm_prefetch((const char *)wb + PF_BYTES + off, _MM_HINT_T0);
        __m256i sum[R16_COLS];
        for (int c = 0; c < NC; c++)
            sum[c] = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) { // packed bytes 4k..4k+3: elements 4k.. low, 16+4k.. high
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(wb + 32 + 64 * k + 32 * h));
            const __m256i lo = _mm256_and_si256(raw, low);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            for (int c = 0; c < NC; c++) {
                const uint8_t *qs =
                    y + c * t->y_stride + (size_t)b * ablk + offsetof(struct block_q8_0s, qs);
                const __m256i a_lo = _mm256_set1_epi32(load_i32(qs + 4 * k));
                const __m256i a_hi = _mm256_set1_epi32(load_i32(qs + 16 + 4 * k));
                sum[c] = _mm256_add_epi16(sum[c], _mm256_maddubs_epi16(lo, a_lo));
                sum[c] = _mm256_add_epi16(sum[c], _mm256_maddubs_epi16(hi, a_hi));
            }
        }
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 16 * h)));
        for (int c = 0; c < NC; c++) {
            const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk;
            const __m256i dot =
                _mm256_add_epi32(_mm256_madd_epi16(sum[c], one),
                                 _mm256_set1_epi32(load_i32(a + offsetof(struct block_q8_0s, c8))));
            float dy;
            memcpy(&dy, a, 4);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dx, _mm256_set1_ps(dy)),
                                     acc[c]);
        }
    }
    for (int c = 0; c < NC; c++)
        _mm256_storeu_ps(t->s + c * t->s_stride + 8 * h, acc[c]);
}

INLINE_ALWAYS void tile_q4_r16(const struct quant_tile *t, int NC)
{
    half_q4_r16(t, 0, NC);
    half_q4_r16(t, 1, NC);
}

/* One group of 16 rows at a time, tokens in passes of up to R16_COLS (a flat dispatch, so
 * each shape is unrolled into registers). */
void q4_0_r16_tile_avx2(const struct quant_tile *tile)
{
    struct quant_tile part = *tile;
    for (int r0 = 0; r0 + 16 <= tile->n_rows; r0 += 16)
        for (int c0 = 0; c0 < tile->n_cols; c0 += R16_COLS) {
            part.x = (const uint8_t *)tile->x + (size_t)r0 * tile->x_stride;
            part.y = (const uint8_t *)tile->y + (size_t)c0 * tile->y_stride;
            part.s = tile->s + (size_t)c0 * tile->s_stride + r0;
            part.n_cols = tile->n_cols - c0 < R16_COLS ? tile->n_cols - c0 : R16_COLS;
            part.is_stream = tile->is_stream && c0 == 0;
            switch (part.n_cols) {
            case 1:
                tile_q4_r16(&part, 1);
                break;
            case 2:
                tile_q4_r16(&part, 2);
                break;
            case 3:
                tile_q4_r16(&part, 3);
                break;
            default:
                tile_q4_r16(&part, 4);
                break;
            }
        }
}
