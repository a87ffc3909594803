/* NEON dots of IQ4_NL, IQ4_XS and MXFP4 weights against Q8_0 / Q8_K activations, written once
 * and compiled twice: by quants_iq_neon.c (ARMv8.0) and quants_iq_dotprod.c (+dotprod, sdot);
 * the includer defines ISA (the symbol suffix) first. Each 32-value block's nibbles go
 * through the 16-level table with one tbl per half, its 32 products become 8 exact int32
 * lanes grouped as the x86 kernels group them (lanes8), and those are fused into an 8-lane
 * float chain (two float32x4) with the block's scale and summed as x86 sums 8 lanes: the
 * AVX2 kernels' arithmetic step by step, so ARM and x86 give the same bits. */
#include "engine/quants/arm/quants_neon_internal.h"
#include "engine/quants/blocks.h"
#include "engine/quants/arm/quants_arm.h"

#include <stddef.h>

#define PASTE2(a, b) a##_##b
#define PASTE(a, b)  PASTE2(a, b)
#define KERNEL(name) PASTE(name, ISA)

/* The x86 8-lane float accumulator as two 4-lane halves. */
struct acc8 {
    float32x4_t lo, hi;
};

/* The 32 levels of one block's 16 nibble bytes (low nibbles are elements 0..15). */
INLINE_ALWAYS void iq_levels(int8x16_t table, const uint8_t *qs, int8x16_t w[2])
{
    uint8x16_t u[2];
    nibbles(qs, u);
    w[0] = vqtbl1q_s8(table, u[0]);
    w[1] = vqtbl1q_s8(table, u[1]);
}

/* acc + the 8 integer lanes of w . q, each times scale (fused, as _mm256_fmadd_ps). */
INLINE_ALWAYS struct acc8 fma_block(struct acc8 acc, const int8x16_t w[2], const int8_t *q,
                                    float scale)
{
    int32x4_t l[2];
    lanes8(w, q, l);
    const float32x4_t d = vdupq_n_f32(scale);
    acc.lo = vfmaq_f32(acc.lo, vcvtq_f32_s32(l[0]), d);
    acc.hi = vfmaq_f32(acc.hi, vcvtq_f32_s32(l[1]), d);
    return acc;
}

/* The x86 8-lane sum: high half onto low, then (l0 + l2) + (l1 + l3). */
INLINE_ALWAYS float sum8(struct acc8 v)
{
    const float32x4_t s = vaddq_f32(v.lo, v.hi);
    return vaddv_f32(vadd_f32(vget_low_f32(s), vget_high_f32(s)));
}

INLINE_ALWAYS struct acc8 acc8_zero(void)
{
    return (struct acc8){vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
}

/* IQ4_NL and MXFP4 share the 32-element layout; only the table and the weight scale differ. */
INLINE_ALWAYS float weight_scale(int type, const void *blk)
{
    if (type == QUANT_MXFP4) return e8m0_half_to_f32(((const struct block_mxfp4 *)blk)->e);
    return h2f(((const struct block_iq4_nl *)blk)->d);
}

INLINE_ALWAYS const uint8_t *weight_qs(int type, const void *blk)
{
    return type == QUANT_MXFP4 ? ((const struct block_mxfp4 *)blk)->qs
                               : ((const struct block_iq4_nl *)blk)->qs;
}

/* A tile of 32-element blocks: per block each row's levels once, then every column; each
 * (row, column) is the single dot's chain, so tile and dot give the same bits. */
INLINE_ALWAYS void tile32(int type, const struct quant_tile *t)
{
    const size_t bb =
        type == QUANT_MXFP4 ? sizeof(struct block_mxfp4) : sizeof(struct block_iq4_nl);
    const int8x16_t table = vld1q_s8(type == QUANT_MXFP4 ? mxfp4_values : iq4nl_values);
    const int nr = t->n_rows, nc = t->n_cols;
    struct acc8 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            acc[r][c] = acc8_zero();
    for (int64_t b = 0; b < t->n / 32; b++) {
        int8x16_t w[QUANT_TILE_MAX][2];
        float dx[QUANT_TILE_MAX];
        for (int r = 0; r < nr; r++) {
            const uint8_t *blk = (const uint8_t *)t->x + r * t->x_stride + (size_t)b * bb;
            iq_levels(table, weight_qs(type, blk), w[r]);
            dx[r] = weight_scale(type, blk);
        }
        for (int c = 0; c < nc; c++) {
            const struct block_q8_0 *ab =
                (const struct block_q8_0 *)((const uint8_t *)t->y + c * t->y_stride) + b;
            const float dy = h2f(ab->d);
            for (int r = 0; r < nr; r++)
                acc[r][c] = fma_block(acc[r][c], w[r], ab->qs, dy * dx[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            t->s[c * t->s_stride + r] = sum8(acc[r][c]);
}

/* One row against one column: the tile of one. */
INLINE_ALWAYS void dot32(int type, int64_t n, float *s, const void *x, const void *y)
{
    const struct quant_tile t = {.n = n,
                                 .x = x,
                                 .y = y,
                                 .s = s,
                                 .n_rows = 1,
                                 .n_cols = 1,
                                 .x_stride = 0,
                                 .y_stride = 0,
                                 .s_stride = 1};
    tile32(type, &t);
}

void KERNEL(iq4_nl_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    dot32(QUANT_IQ4_NL, n, s, x, y);
}

void KERNEL(mxfp4_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    dot32(QUANT_MXFP4, n, s, x, y);
}

void KERNEL(iq4_nl_vec_dot_tile)(const struct quant_tile *t)
{
    tile32(QUANT_IQ4_NL, t);
}

void KERNEL(mxfp4_vec_dot_tile)(const struct quant_tile *t)
{
    tile32(QUANT_MXFP4, t);
}

/* IQ4_XS: super-blocks of 8 sub-blocks of 32, each with its 6-bit scale; the scale of a
 * sub-block is (d_x * d_y) * ls as the AVX2 kernel forms it. */
void KERNEL(iq4_xs_vec_dot_tile)(const struct quant_tile *t)
{
    const int8x16_t table = vld1q_s8(iq4nl_values);
    const int nr = t->n_rows, nc = t->n_cols;
    struct acc8 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            acc[r][c] = acc8_zero();
    for (int64_t b = 0; b < t->n / QK_K; b++) {
        const struct block_iq4_xs *wb[QUANT_TILE_MAX];
        for (int r = 0; r < nr; r++)
            wb[r] = (const struct block_iq4_xs *)((const uint8_t *)t->x + r * t->x_stride) + b;
        for (int c = 0; c < nc; c++) {
            const struct block_q8_K *ab =
                (const struct block_q8_K *)((const uint8_t *)t->y + c * t->y_stride) + b;
            for (int r = 0; r < nr; r++) {
                const float d = h2f(wb[r]->d) * ab->d;
                for (int ib = 0; ib < QK_K / 32; ib++) {
                    int8x16_t w[2];
                    iq_levels(table, wb[r]->qs + 16 * ib, w);
                    const float scale = d * (float)iq4_xs_scale(wb[r], ib);
                    acc[r][c] = fma_block(acc[r][c], w, ab->qs + 32 * ib, scale);
                }
            }
        }
    }
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            t->s[c * t->s_stride + r] = sum8(acc[r][c]);
}

void KERNEL(iq4_xs_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    const struct quant_tile t = {.n = n,
                                 .x = x,
                                 .y = y,
                                 .s = s,
                                 .n_rows = 1,
                                 .n_cols = 1,
                                 .x_stride = 0,
                                 .y_stride = 0,
                                 .s_stride = 1};
    KERNEL(iq4_xs_vec_dot_tile)(&t);
}
