/* AVX-512 VNNI kernels for the repacked Q8_0_R16 / Q4_0_R16 / Q5_0_R16 weights against Q8_0_S
 * activations, bit for bit the AVX2 kernels' results (the same integer dots, the same float
 * operations per output in the same order), and Q4_K_R16 against Q8_K in an order of its own: each zmm holds 4 quants of 16 weight rows, so one
 * vpdpbusd advances 16 outputs by 4 elements and no horizontal sums are needed. Every output is
 * computed the same way whatever the tile shape. F16, BF16, Q6_K, the row-pair and the IQ
 * formats have AVX-512 kernels in files of their own; F32 and Q2_K keep the AVX2 kernels in the
 * AVX-512 table, as zmm ports of them measured no faster here (see docs/KERNELS.md). Compiled
 * with the AVX-512 F/BW/VL/DQ/VNNI flags; only called when kernels_init detected them. */
#include "engine/quants/blocks.h"
#include "engine/quants/quants_repack.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>
#include <stddef.h>

/* Bytes ahead of the current block that a streaming tile prefetches in each row group (the
 * AVX2 kernels prefetch a tile ahead for the same reason: a matvec from DRAM is otherwise
 * latency-bound; the distance is not tuned). */
#define PF_BYTES 1024

/* Calls fn(type, t, R, C) with C = t->n_cols as a compile-time constant (1..8). */
#define SWITCH_COLS(fn, type, t, R)                                                                \
    do {                                                                                           \
        switch ((t)->n_cols) {                                                                     \
        case 1:                                                                                    \
            fn(type, t, R, 1);                                                                     \
            break;                                                                                 \
        case 2:                                                                                    \
            fn(type, t, R, 2);                                                                     \
            break;                                                                                 \
        case 3:                                                                                    \
            fn(type, t, R, 3);                                                                     \
            break;                                                                                 \
        case 4:                                                                                    \
            fn(type, t, R, 4);                                                                     \
            break;                                                                                 \
        case 5:                                                                                    \
            fn(type, t, R, 5);                                                                     \
            break;                                                                                 \
        case 6:                                                                                    \
            fn(type, t, R, 6);                                                                     \
            break;                                                                                 \
        case 7:                                                                                    \
            fn(type, t, R, 7);                                                                     \
            break;                                                                                 \
        case 8:                                                                                    \
            fn(type, t, R, 8);                                                                     \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* ---- 16-row interleaved Q8_0 / Q4_0 x Q8_0_S ---- */

INLINE_ALWAYS float load_f32(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* Prefetches the next blocks of a tile's row groups (streaming tiles only). */
INLINE_ALWAYS void prefetch_groups(const uint8_t *const wb[4], int G, size_t gblk)
{
    for (int g = 0; g < G; g++)
        for (size_t off = 0; off < gblk; off += 64)
            _mm_prefetch((const char *)wb[g] + PF_BYTES + off, _MM_HINT_T0);
}

/* Q4_0_R16 in QUANT_ORDER_BLOCKS (the AVX2 kernels' order for Q4_0 matrices with a multiple
 * of 8 rows, which every repacked matrix has): per block and (row, token) the exact integer
 * dot (the stored nibbles are q + 8; the activation's c8 = -8 * sum starts the sum), then
 * acc += dot * (dx * dy). Bit for bit the AVX2 result. Straight-line kernel over G groups of
 * 16 rows and NC tokens. */
INLINE_ALWAYS void tile_q4_r16(int type, const struct quant_tile *t, int G, int NC)
{
    (void)type;
    const size_t gblk = 16 * sizeof(struct block_q4_0), ablk = sizeof(struct block_q8_0s);
    const size_t gstride = 16 * t->x_stride;
    const bool stream = NC == 1 || t->is_stream;
    const uint8_t *y = t->y;
    __m512 acc[4][8];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            acc[g][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < t->n / QK4_0; b++) {
        const uint8_t *wb[4];
        for (int g = 0; g < G; g++)
            wb[g] = (const uint8_t *)t->x + g * gstride + (size_t)b * gblk;
        if (stream) prefetch_groups(wb, G, gblk);
        __m512i dot[4][8];
        for (int c = 0; c < NC; c++) {
            const __m512i init = _mm512_set1_epi32(load_i32(y + c * t->y_stride + (size_t)b * ablk +
                                                            offsetof(struct block_q8_0s, c8)));
            for (int g = 0; g < G; g++)
                dot[g][c] = init;
        }
        for (int k = 0; k < 8; k++) { // chunks 0..3 low nibbles (elements 4k..), 4..7 high
            __m512i w[4];
            for (int g = 0; g < G; g++) {
                __m512i raw = _mm512_loadu_si512(wb[g] + 32 + 64 * (k & 3));
                if (k >= 4) raw = _mm512_srli_epi16(raw, 4);
                w[g] = _mm512_and_si512(raw, _mm512_set1_epi8(0x0f));
            }
            const size_t e = (size_t)(k & 3) * 4 + (k >= 4 ? 16 : 0);
            for (int c = 0; c < NC; c++) {
                const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk;
                const __m512i av =
                    _mm512_set1_epi32(load_i32(a + offsetof(struct block_q8_0s, qs) + e));
                for (int g = 0; g < G; g++)
                    dot[g][c] = _mm512_dpbusd_epi32(dot[g][c], w[g], av);
            }
        }
        for (int g = 0; g < G; g++) {
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wb[g]));
            for (int c = 0; c < NC; c++) {
                const __m512 dy = _mm512_set1_ps(load_f32(y + c * t->y_stride + (size_t)b * ablk));
                acc[g][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[g][c]), _mm512_mul_ps(dx, dy),
                                            acc[g][c]);
            }
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            _mm512_storeu_ps(t->s + c * t->s_stride + 16 * g, acc[g][c]);
}

/* Chunk k of a Q8_0_R16 / Q5_0_R16 block (wb: the group's block): 4 quants of each of the 16
 * rows, unsigned (q + 128 / q + 16), for the elements of the AVX2 kernels' lane k. */
INLINE_ALWAYS __m512i r16_chunk(int type, const uint8_t *wb, int k)
{
    if (type == QUANT_Q8_0_R16) return _mm512_loadu_si512(wb + 32 + 64 * k);
    __m512i raw = _mm512_loadu_si512(wb + 96 + 64 * (k & 3)); // Q5_0_R16
    if (k >= 4) raw = _mm512_srli_epi16(raw, 4);
    const __m512i lo = _mm512_and_si512(raw, _mm512_set1_epi8(0x0f));
    uint64_t fifth;
    memcpy(&fifth, wb + 32 + 8 * k, 8);
    return _mm512_mask_add_epi8(lo, (__mmask64)fifth, lo, _mm512_set1_epi8(16));
}

/* Q8_0_R16 and Q5_0_R16 in QUANT_ORDER_LANES (the AVX2 kernels' order for Q8_0 and Q5_0): per
 * block and (row, token) eight exact int32 sums of 4 products (chunk k = the AVX2 kernel's lane
 * k; the stored weights are unsigned, the activation's offset term starts each sum), each
 * fused into its own float chain with dx * dy; the eight chains added as AVX2 adds its lanes.
 * Bit for bit the AVX2 result. Straight-line kernel over G groups of 16 rows and NC tokens. */
INLINE_ALWAYS void tile_q8_r16(int type, const struct quant_tile *t, int G, int NC)
{
    const size_t gblk =
        16 * (type == QUANT_Q8_0_R16 ? sizeof(struct block_q8_0) : sizeof(struct block_q5_0));
    const size_t ablk = sizeof(struct block_q8_0s);
    const size_t gstride = 16 * t->x_stride;
    const bool stream = NC == 1 || t->is_stream;
    const uint8_t *y = t->y;
    __m512 acc[2][4][8];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            for (int k = 0; k < 8; k++)
                acc[g][c][k] = _mm512_setzero_ps();
    for (int64_t b = 0; b < t->n / QK8_0; b++) {
        const uint8_t *wb[4];
        for (int g = 0; g < G; g++)
            wb[g] = (const uint8_t *)t->x + g * gstride + (size_t)b * gblk;
        if (stream) prefetch_groups(wb, G, gblk);
        __m512 dxdy[2][4];
        for (int g = 0; g < G; g++) {
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wb[g]));
            for (int c = 0; c < NC; c++)
                dxdy[g][c] = _mm512_mul_ps(
                    dx, _mm512_set1_ps(load_f32(y + c * t->y_stride + (size_t)b * ablk)));
        }
        // Lane k's dot starts at the int32 that removes the stored weights' offset: -128 (Q8_0)
        // or -16 (Q5_0) times the sum of the activation's 4 quants. c128[k] is the former, a
        // multiple of 8, so Q5_0's is an exact shift, done here for the 8 lanes of the NC
        // tokens at once (then one broadcast load per lane, as Q8_0's).
        int32_t off16[4][8] __attribute__((aligned(32)));
        if (type == QUANT_Q5_0_R16) {
            for (int c = 0; c < NC; c++) {
                const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk;
                const __m256i c128 =
                    _mm256_loadu_si256((const __m256i *)(a + offsetof(struct block_q8_0s, c128)));
                _mm256_store_si256((__m256i *)off16[c], _mm256_srai_epi32(c128, 3));
            }
        }
        // Unrolled so the 8 x NC x G float chains stay in registers (GCC at -O3 kept the 16 x 3
        // tile's k loop rolled, its chains in memory: a load and a store around every FMA).
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m512i w[2];
            for (int g = 0; g < G; g++)
                w[g] = r16_chunk(type, wb[g], k);
            for (int c = 0; c < NC; c++) {
                const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk;
                const __m512i av =
                    _mm512_set1_epi32(load_i32(a + offsetof(struct block_q8_0s, qs) + 4 * k));
                const __m512i init = _mm512_set1_epi32(
                    type == QUANT_Q5_0_R16
                        ? off16[c][k]
                        : load_i32(a + offsetof(struct block_q8_0s, c128) + 4 * (size_t)k));
                for (int g = 0; g < G; g++) {
                    const __m512i dot = _mm512_dpbusd_epi32(init, w[g], av);
                    acc[g][c][k] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), dxdy[g][c], acc[g][c][k]);
                }
            }
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++) {
            const __m512(*l) = acc[g][c];
            const __m512 sum =
                _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                              _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7])));
            _mm512_storeu_ps(t->s + c * t->s_stride + 16 * g, sum);
        }
}

void q4_0_r16_tile_avx512(const struct quant_tile *tile)
{
    switch (tile->n_rows) {
    case 16:
        SWITCH_COLS(tile_q4_r16, 0, tile, 1);
        break;
    case 32:
        SWITCH_COLS(tile_q4_r16, 0, tile, 2);
        break;
    case 48:
        SWITCH_COLS(tile_q4_r16, 0, tile, 3);
        break;
    case 64:
        SWITCH_COLS(tile_q4_r16, 0, tile, 4);
        break;
    default:
        break;
    }
}

/* One Q8_0_R16 / Q5_0_R16 tile of G groups and 1..4 tokens (2 x 4 x 8 float chains already
 * exceed the 32 registers, so larger tiles are cut into these). Flat dispatch switch. */
INLINE_ALWAYS void lanes_r16_part(int type, const struct quant_tile *t, int G)
{
    switch (t->n_cols * 2 + G - 3) {
    case 0:
        tile_q8_r16(type, t, 1, 1);
        break;
    case 1:
        tile_q8_r16(type, t, 2, 1);
        break;
    case 2:
        tile_q8_r16(type, t, 1, 2);
        break;
    case 3:
        tile_q8_r16(type, t, 2, 2);
        break;
    case 4:
        tile_q8_r16(type, t, 1, 3);
        break;
    case 5:
        tile_q8_r16(type, t, 2, 3);
        break;
    case 6:
        tile_q8_r16(type, t, 1, 4);
        break;
    case 7:
        tile_q8_r16(type, t, 2, 4);
        break;
    default:
        break;
    }
}

INLINE_ALWAYS void lanes_r16_tile(int type, const struct quant_tile *tile)
{
    struct quant_tile part = *tile;
    for (int c0 = 0; c0 < tile->n_cols; c0 += 4) {
        part.y = (const uint8_t *)tile->y + (size_t)c0 * tile->y_stride;
        part.n_cols = tile->n_cols - c0 < 4 ? tile->n_cols - c0 : 4;
        for (int r0 = 0; r0 < tile->n_rows; r0 += 32) {
            part.x = (const uint8_t *)tile->x + (size_t)r0 * tile->x_stride;
            part.s = tile->s + (size_t)c0 * tile->s_stride + r0;
            lanes_r16_part(type, &part, tile->n_rows - r0 >= 32 ? 2 : 1);
        }
    }
}

void q8_0_r16_tile_avx512(const struct quant_tile *tile)
{
    lanes_r16_tile(QUANT_Q8_0_R16, tile);
}

void q5_0_r16_tile_avx512(const struct quant_tile *tile)
{
    lanes_r16_tile(QUANT_Q5_0_R16, tile);
}

/* ---- 16-row interleaved Q4_K x Q8_K ---- */

/* Decodes a Q4_K_R16 super-block's 256 six-bit scale/min values (layout in quants_repack.h)
 * into out[256], one byte each. */
INLINE_ALWAYS void k4_r16_values(const uint8_t *wb, uint8_t *out)
{
    const __m512i lo0 = _mm512_loadu_si512(wb + 64), lo1 = _mm512_loadu_si512(wb + 128);
    const __m512i hb = _mm512_loadu_si512(wb + 192);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x30);
    const __m512i hi[4] = {_mm512_and_si512(_mm512_slli_epi16(hb, 4), m2),
                           _mm512_and_si512(_mm512_slli_epi16(hb, 2), m2), _mm512_and_si512(hb, m2),
                           _mm512_and_si512(_mm512_srli_epi16(hb, 2), m2)};
    const __m512i low[4] = {_mm512_and_si512(lo0, m4), _mm512_and_si512(lo1, m4),
                            _mm512_and_si512(_mm512_srli_epi16(lo0, 4), m4),
                            _mm512_and_si512(_mm512_srli_epi16(lo1, 4), m4)};
    for (int q = 0; q < 4; q++)
        _mm512_storeu_si512(out + 64 * q, _mm512_or_si512(low[q], hi[q]));
}

/* Q4_K_R16 in its own order (the AVX-512 set's order for Q4_K; within float rounding of the
 * AVX2 one, which splits each output over 8 lanes): per super-block and (row, token) the exact
 * int32 sum over the eight sub-blocks of scale * (32-element dot) and the exact int32 sum of
 * min * (the activation's 32-element sums), then acc += S * (d * dy) and acc -= M * (dmin * dy)
 * in one float per output. Straight-line kernel over G groups of 16 rows and NC tokens. */
INLINE_ALWAYS void tile_q4k_r16(int type, const struct quant_tile *t, int G, int NC)
{
    (void)type;
    const size_t gblk = 16 * sizeof(struct block_q4_K), ablk = sizeof(struct block_q8_K);
    const size_t gstride = 16 * t->x_stride;
    const bool stream = NC == 1 || t->is_stream;
    const uint8_t *y = t->y;
    __m512 acc[2][4];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            acc[g][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < t->n / QK_K; b++) {
        const uint8_t *wb[4];
        uint8_t vals[2][256] __attribute__((aligned(64)));
        for (int g = 0; g < G; g++) {
            wb[g] = (const uint8_t *)t->x + g * gstride + (size_t)b * gblk;
            if (stream) prefetch_groups(wb + g, 1, gblk);
            k4_r16_values(wb[g], vals[g]);
        }
        __m512i sum[2][4];
        for (int g = 0; g < G; g++)
            for (int c = 0; c < NC; c++)
                sum[g][c] = _mm512_setzero_si512();
        for (int s = 0; s < 8; s++) { // sub-block s: nibbles (s & 1) of pair s / 2
            const int p = s / 2;
            __m512i dot[2][4];
            for (int g = 0; g < G; g++)
                for (int c = 0; c < NC; c++)
                    dot[g][c] = _mm512_setzero_si512();
            for (int k = 0; k < 8; k++) {
                __m512i w[2];
                for (int g = 0; g < G; g++) {
                    __m512i raw = _mm512_loadu_si512(wb[g] + Q4_K_R16_QS + 512 * p + 64 * k);
                    if (s & 1) raw = _mm512_srli_epi16(raw, 4);
                    w[g] = _mm512_and_si512(raw, _mm512_set1_epi8(0x0f));
                }
                for (int c = 0; c < NC; c++) {
                    const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk + 4 + 32 * s + 4 * k;
                    const __m512i av = _mm512_set1_epi32(load_i32(a));
                    for (int g = 0; g < G; g++)
                        dot[g][c] = _mm512_dpbusd_epi32(dot[g][c], w[g], av);
                }
            }
            for (int g = 0; g < G; g++) {
                const __m512i sc =
                    _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(vals[g] + 16 * s)));
                for (int c = 0; c < NC; c++)
                    sum[g][c] = _mm512_add_epi32(sum[g][c], _mm512_mullo_epi32(dot[g][c], sc));
            }
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk;
            int16_t bs[16];
            memcpy(bs, a + offsetof(struct block_q8_K, bsums), sizeof bs);
            int32_t ypair[4]; // the 32-element sums of sub-blocks 2i and 2i + 1, as int16 pairs
            for (int i = 0; i < 4; i++)
                ypair[i] = (int32_t)((uint32_t)(uint16_t)(bs[4 * i] + bs[4 * i + 1]) |
                                     (uint32_t)(uint16_t)(bs[4 * i + 2] + bs[4 * i + 3]) << 16);
            const __m512 dy = _mm512_set1_ps(load_f32(a));
            for (int g = 0; g < G; g++) {
                __m512i mins = _mm512_setzero_si512();
                for (int i = 0; i < 4; i++) {
                    const __m512i m = _mm512_cvtepu8_epi16(
                        _mm256_load_si256((const __m256i *)(vals[g] + 128 + 32 * i)));
                    mins = _mm512_dpwssd_epi32(mins, m, _mm512_set1_epi32(ypair[i]));
                }
                const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wb[g]));
                const __m512 dmin =
                    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wb[g] + 32)));
                acc[g][c] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[g][c]), _mm512_mul_ps(d, dy), acc[g][c]);
                acc[g][c] =
                    _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dmin, dy), acc[g][c]);
            }
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            _mm512_storeu_ps(t->s + c * t->s_stride + 16 * g, acc[g][c]);
}

/* Tiles of up to 2 groups x 4 tokens, the registers' limit; larger ones are cut. */
void q4_K_r16_tile_avx512(const struct quant_tile *tile)
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
                G == 2 ? tile_q4k_r16(0, &part, 2, 1) : tile_q4k_r16(0, &part, 1, 1);
                break;
            case 2:
                G == 2 ? tile_q4k_r16(0, &part, 2, 2) : tile_q4k_r16(0, &part, 1, 2);
                break;
            case 3:
                G == 2 ? tile_q4k_r16(0, &part, 2, 3) : tile_q4k_r16(0, &part, 1, 3);
                break;
            default:
                G == 2 ? tile_q4k_r16(0, &part, 2, 4) : tile_q4k_r16(0, &part, 1, 4);
                break;
            }
        }
    }
}

/* Q8_0_S activations: quants byte-identical to quant_q8_0_activations (scale 127/amax, round
 * half to even in the default rounding mode), d half-rounded, and the offset corrections. */
void q8_0s_from_float_avx512(const float *x, void *y, int64_t n)
{
    struct block_q8_0s *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax =
            _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
        _mm_storeu_si128((__m128i *)b[i].qs, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(b[i].qs + 16), _mm512_cvtsepi32_epi8(q1));
        int32_t part[8], q[32]; // sums of 4 quants (a small share of the time: scalar)
        _mm512_storeu_si512(q, q0);
        _mm512_storeu_si512(q + 16, q1);
        int sum = 0;
        for (int k = 0; k < 8; k++) {
            part[k] = q[4 * k] + q[4 * k + 1] + q[4 * k + 2] + q[4 * k + 3];
            b[i].c128[k] = -128 * part[k];
            sum += part[k];
        }
        b[i].c8 = -8 * sum;
        b[i].d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, 0));
    }
}
