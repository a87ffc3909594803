/* Q4_0 tiles by smmla (built with +i8mm; run when HWCAP2_I8MM is set). smmla multiplies a 2x8
 * int8 matrix by an 8x2 one into a 2x2 int32 accumulator, so a pair of weight rows against a
 * pair of activation rows takes four smmla per 32-element block where sdot takes eight plus
 * four reductions. It yields whole-block integer dots, which is the arithmetic of
 * QUANT_ORDER_BLOCKS (each block's exact dot fused into one float per output with dx*dy, as
 * the x86 kernel does for Q4_0 matrices of a multiple of 8 rows); the lane orders need the
 * per-4-element sums that only sdot gives, so other orders go to the dotprod tile. Odd rows or
 * columns reuse the last one and drop the duplicate outputs. */
#include "engine/quants/arm/quants_arm.h"
#include "engine/quants/arm/quants_neon_internal.h"

#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "quants_i8mm.c needs -march=...+i8mm (the Makefile's *_i8mm.o rule)"
#endif

/* Rows a and b of 16 int8 each -> the two 2x8 operands [a0..7 | b0..7], [a8..15 | b8..15]. */
INLINE_ALWAYS void pair_rows(int8x16_t a, int8x16_t b, int8x16_t out[2])
{
    const int64x2_t a64 = vreinterpretq_s64_s8(a), b64 = vreinterpretq_s64_s8(b);
    out[0] = vreinterpretq_s8_s64(vzip1q_s64(a64, b64));
    out[1] = vreinterpretq_s8_s64(vzip2q_s64(a64, b64));
}

/* The four exact block dots [r0.c0, r0.c1, r1.c0, r1.c1] of weight rows w0, w1 against
 * activation quants y0, y1 (each 32 int8 as two vectors). */
INLINE_ALWAYS int32x4_t mmla_block(const int8x16_t w0[2], const int8x16_t w1[2], const int8_t *y0,
                                   const int8_t *y1)
{
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++) {
        int8x16_t a[2], b[2];
        pair_rows(w0[h], w1[h], a);
        pair_rows(vld1q_s8(y0 + 16 * h), vld1q_s8(y1 + 16 * h), b);
        acc = vmmlaq_s32(acc, a[0], b[0]);
        acc = vmmlaq_s32(acc, a[1], b[1]);
    }
    return acc;
}

void q4_0_vec_dot_tile_i8mm(const struct quant_tile *t)
{
    if (t->order != QUANT_ORDER_BLOCKS) {
        q4_0_vec_dot_tile_dotprod(t);
        return;
    }
    const int64_t nb = t->n / 32;
    for (int r = 0; r < t->n_rows; r += 2) {
        const int r1 = r + 1 < t->n_rows ? r + 1 : r;
        const struct block_q4_0 *x0 =
            (const struct block_q4_0 *)((const uint8_t *)t->x + (size_t)r * t->x_stride);
        const struct block_q4_0 *x1 =
            (const struct block_q4_0 *)((const uint8_t *)t->x + (size_t)r1 * t->x_stride);
        for (int c = 0; c < t->n_cols; c += 2) {
            const int c1 = c + 1 < t->n_cols ? c + 1 : c;
            const struct block_q8_0 *y0 =
                (const struct block_q8_0 *)((const uint8_t *)t->y + (size_t)c * t->y_stride);
            const struct block_q8_0 *y1 =
                (const struct block_q8_0 *)((const uint8_t *)t->y + (size_t)c1 * t->y_stride);
            float32x4_t sum = vdupq_n_f32(0.0f);
            for (int64_t i = 0; i < nb; i++) {
                int8x16_t w0[2], w1[2];
                q4_0_quants(&x0[i], w0);
                q4_0_quants(&x1[i], w1);
                const int32x4_t id = mmla_block(w0, w1, y0[i].qs, y1[i].qs);
                const float dx0 = h2f(x0[i].d), dx1 = h2f(x1[i].d);
                const float dy0 = h2f(y0[i].d), dy1 = h2f(y1[i].d);
                const float32x4_t d = {dx0 * dy0, dx0 * dy1, dx1 * dy0, dx1 * dy1};
                sum = vfmaq_f32(sum, vcvtq_f32_s32(id), d); // fused, as fmaf per output
            }
            float out[4];
            vst1q_f32(out, sum);
            t->s[(size_t)c * t->s_stride + (size_t)r] = out[0];
            if (c1 != c) t->s[(size_t)c1 * t->s_stride + (size_t)r] = out[1];
            if (r1 != r) t->s[(size_t)c * t->s_stride + (size_t)r1] = out[2];
            if (r1 != r && c1 != c) t->s[(size_t)c1 * t->s_stride + (size_t)r1] = out[3];
        }
    }
}
