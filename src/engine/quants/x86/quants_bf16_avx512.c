/* AVX-512 products of BF16 weights with `vdpbf16ps` (AVX512_BF16), used only where the CPU has
 * it. The activations are BF16 too (rounded to nearest even, bf16_from_float_ref's bytes), as
 * the reference does on every x86 build: `vdpbf16ps` multiplies pairs of BF16 values exactly
 * and adds both products into a float lane, so one instruction advances an output by 32
 * elements. Two orders, those of the reference's AVX512_BF16 build, so results can agree with
 * it bit for bit:
 * - QUANT_ORDER_LANES (its batched product, rows a multiple of 32 long): per output one 16-lane
 *   chain over the 32-element steps, then the lanes summed as _mm512_reduce_add_ps sums them;
 *   a row length that is no multiple of 32 (never run in that order by matmul) has its last
 *   n mod 32 elements loaded under a mask (zeros add nothing).
 * - QUANT_ORDER_VEC (its single-row dot): two chains, over the first and second 32 elements of
 *   each 64, each summed as above and added in double, then the last n mod 64 products (exact
 *   in float) added one by one in double.
 * Every tile shape gives the single dot's bits in each order. Like every vdpbf16ps user the
 * products flush BF16 denormals (below 1.2e-38) to zero. Tiles of 4 rows x 6 tokens (24 zmm
 * accumulators, 4 weight vectors, 1 activation), 8 rows x 1 token for a matrix-vector
 * product; the single-row order (two accumulators per output) 4 x 2 and 8 x 1. Compiled with
 * AVX-512 F/BW/VL/DQ + BF16. */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>

#define ROWS     4 // weight rows per register block (several tokens)
#define COLS     6 // tokens per register block
#define VEC_ROWS 8 // weight rows per register block, one token

INLINE_ALWAYS __m512bh load32(const uint8_t *row, int64_t i)
{
    return (__m512bh)_mm512_loadu_si512(row + 2 * i);
}

/* The last n - i (1..31) values of a row, zeros beyond. */
INLINE_ALWAYS __m512bh load_tail(const uint8_t *row, int64_t i, __mmask32 m)
{
    return (__m512bh)_mm512_maskz_loadu_epi16(m, row + 2 * i);
}

/* Rows [r0, r0 + NR) x tokens [c0, c0 + NC). Each output's chain is the same whatever NR, NC. */
INLINE_ALWAYS void block(const struct quant_tile *t, int64_t r0, int64_t c0, int NR, int NC)
{
    const uint8_t *x = (const uint8_t *)t->x + r0 * t->x_stride;
    const uint8_t *y[COLS];
    for (int c = 0; c < NC; c++)
        y[c] = (const uint8_t *)t->y + (c0 + c) * t->y_stride;
    __m512 acc[VEC_ROWS][COLS];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm512_setzero_ps();
    const int64_t nb = t->n & ~(int64_t)31;
    const bool ahead = NC == 1 || t->is_stream;
    for (int64_t i = 0; i < nb; i += 32) {
        __m512bh w[VEC_ROWS];
        for (int r = 0; r < NR; r++) {
            const uint8_t *row = x + r * t->x_stride;
            if (ahead) _mm_prefetch((const char *)row + 2 * i + NR * t->x_stride, _MM_HINT_T0);
            w[r] = load32(row, i);
        }
        for (int c = 0; c < NC; c++) {
            const __m512bh a = load32(y[c], i);
            for (int r = 0; r < NR; r++)
                acc[r][c] = _mm512_dpbf16_ps(acc[r][c], w[r], a);
        }
    }
    if (nb < t->n) {
        const __mmask32 m = (__mmask32)((1u << (t->n - nb)) - 1);
        __m512bh w[VEC_ROWS];
        for (int r = 0; r < NR; r++)
            w[r] = load_tail(x + r * t->x_stride, nb, m);
        for (int c = 0; c < NC; c++) {
            const __m512bh a = load_tail(y[c], nb, m);
            for (int r = 0; r < NR; r++)
                acc[r][c] = _mm512_dpbf16_ps(acc[r][c], w[r], a);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            t->s[(c0 + c) * t->s_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][c]);
}

INLINE_ALWAYS float bf16_at(const uint8_t *row, int64_t j)
{
    uint16_t h;
    memcpy(&h, row + 2 * j, 2);
    return bf16_to_f32(h);
}

/* QUANT_ORDER_VEC for rows [r0, r0 + NR) x tokens [c0, c0 + NC): two chains per output. */
INLINE_ALWAYS void block_vec(const struct quant_tile *t, int64_t r0, int64_t c0, int NR, int NC)
{
    const uint8_t *x = (const uint8_t *)t->x + r0 * t->x_stride;
    const uint8_t *y[2];
    for (int c = 0; c < NC; c++)
        y[c] = (const uint8_t *)t->y + (c0 + c) * t->y_stride;
    __m512 acc[VEC_ROWS][2][2];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c][0] = acc[r][c][1] = _mm512_setzero_ps();
    const int64_t nb = t->n & ~(int64_t)63;
    const bool ahead = NC == 1 || t->is_stream;
    for (int64_t i = 0; i < nb; i += 64) {
        for (int h = 0; h < 2; h++) {
            __m512bh w[VEC_ROWS];
            for (int r = 0; r < NR; r++) {
                const uint8_t *row = x + r * t->x_stride;
                if (ahead)
                    _mm_prefetch((const char *)row + 2 * (i + 32 * h) + NR * t->x_stride,
                                 _MM_HINT_T0);
                w[r] = load32(row, i + 32 * h);
            }
            for (int c = 0; c < NC; c++) {
                const __m512bh a = load32(y[c], i + 32 * h);
                for (int r = 0; r < NR; r++)
                    acc[r][c][h] = _mm512_dpbf16_ps(acc[r][c][h], w[r], a);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) {
            const uint8_t *row = x + r * t->x_stride;
            double sum = 0.0;
            sum += (double)_mm512_reduce_add_ps(acc[r][c][0]);
            sum += (double)_mm512_reduce_add_ps(acc[r][c][1]);
            for (int64_t j = nb; j < t->n; j++)
                sum += (double)(bf16_at(row, j) * bf16_at(y[c], j));
            t->s[(c0 + c) * t->s_stride + r0 + r] = (float)sum;
        }
}

static void run_vec(const struct quant_tile *t)
{
    for (int64_t c0 = 0; c0 < t->n_cols; c0 += 2) {
        int64_t r = 0;
        if (t->n_cols - c0 == 1) {
            for (; r + VEC_ROWS <= t->n_rows; r += VEC_ROWS)
                block_vec(t, r, c0, VEC_ROWS, 1);
            for (; r < t->n_rows; r++)
                block_vec(t, r, c0, 1, 1);
            continue;
        }
        for (; r + ROWS <= t->n_rows; r += ROWS)
            block_vec(t, r, c0, ROWS, 2);
        for (; r < t->n_rows; r++)
            block_vec(t, r, c0, 1, 2);
    }
}

/* NR rows x nc (1..COLS) tokens, each shape a constant so the block stays in registers. */
#define COLS_SWITCH(t, r0, c0, NR, nc)                                                             \
    do {                                                                                           \
        switch (nc) {                                                                              \
        case 1:                                                                                    \
            block(t, r0, c0, NR, 1);                                                               \
            break;                                                                                 \
        case 2:                                                                                    \
            block(t, r0, c0, NR, 2);                                                               \
            break;                                                                                 \
        case 3:                                                                                    \
            block(t, r0, c0, NR, 3);                                                               \
            break;                                                                                 \
        case 4:                                                                                    \
            block(t, r0, c0, NR, 4);                                                               \
            break;                                                                                 \
        case 5:                                                                                    \
            block(t, r0, c0, NR, 5);                                                               \
            break;                                                                                 \
        default:                                                                                   \
            block(t, r0, c0, NR, 6);                                                               \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

void bf16_vec_dot_tile_avx512bf16(const struct quant_tile *t)
{
    if (t->order == QUANT_ORDER_VEC) {
        run_vec(t);
        return;
    }
    for (int64_t c0 = 0; c0 < t->n_cols; c0 += COLS) {
        const int nc = t->n_cols - c0 < COLS ? (int)(t->n_cols - c0) : COLS;
        int64_t r = 0;
        if (nc == 1)
            for (; r + VEC_ROWS <= t->n_rows; r += VEC_ROWS)
                block(t, r, c0, VEC_ROWS, 1);
        for (; r + ROWS <= t->n_rows; r += ROWS)
            COLS_SWITCH(t, r, c0, ROWS, nc);
        for (; r < t->n_rows; r++)
            COLS_SWITCH(t, r, c0, 1, nc);
    }
}

void bf16_vec_dot_avx512bf16(int64_t n, float *s, const void *x, const void *y)
{
    const struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};
    block(&one, 0, 0, 1, 1); // QUANT_ORDER_LANES, as every vec_dot
}

/* bf16_from_float_ref's bytes, 16 at a time: round to nearest even on the bits, a NaN kept
 * quiet (vcvtneps2bf16 would flush denormal inputs to zero, so the rounding is done here). */
void bf16_from_float_avx512(const float *x, void *y, int64_t n)
{
    uint8_t *out = y;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i quiet = _mm512_set1_epi32(64);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
        const __m512i hi = _mm512_srli_epi32(u, 16);
        const __m512i lsb = _mm512_and_si512(hi, one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256((__m256i *)(out + 2 * i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++) {
        const uint16_t h = f32_to_bf16(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}
