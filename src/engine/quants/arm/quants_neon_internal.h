/* Helpers shared by the NEON kernel files of engine/quants/arm (include only from them: they
 * need <arm_neon.h>). Quants of a 32-element block come out as two int8x16 vectors in element
 * order (0..15, 16..31), ready for a signed int8 dot against Q8_0 / Q8_1 activations. */
#ifndef ENGINE_QUANTS_ARM_QUANTS_NEON_INTERNAL_H
#define ENGINE_QUANTS_ARM_QUANTS_NEON_INTERNAL_H

#include "engine/quants/blocks.h"
#include "engine/quants/quant_types.h"

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#define INLINE_ALWAYS static inline __attribute__((always_inline))

/* Exact binary16 -> binary32 by the core's fcvt. */
INLINE_ALWAYS float h2f(half_bits bits)
{
    __fp16 h;
    memcpy(&h, &bits, sizeof h);
    return (float)h;
}

/* acc + the 16 products a[i] * b[i], four per int32 lane. Exact: without dotprod, adjacent
 * products are paired in int16 (|a * b| <= 128 * 127, two fit) and widened by sadalp. */
INLINE_ALWAYS int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
#endif
}

/* 0x10 in byte j of the result where bit j of the 32-bit little-endian qh is set. */
INLINE_ALWAYS void q5_high_bits(const uint8_t qh[4], uint8x16_t out[2])
{
    const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t b01 = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
    const uint8x16_t b23 = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
    out[0] = vandq_u8(vtstq_u8(b01, bit), vdupq_n_u8(0x10));
    out[1] = vandq_u8(vtstq_u8(b23, bit), vdupq_n_u8(0x10));
}

INLINE_ALWAYS void nibbles(const uint8_t qs[16], uint8x16_t out[2])
{
    const uint8x16_t q = vld1q_u8(qs);
    out[0] = vandq_u8(q, vdupq_n_u8(0x0f));
    out[1] = vshrq_n_u8(q, 4);
}

INLINE_ALWAYS void q4_0_quants(const struct block_q4_0 *b, int8x16_t w[2])
{
    uint8x16_t u[2];
    nibbles(b->qs, u);
    w[0] = vsubq_s8(vreinterpretq_s8_u8(u[0]), vdupq_n_s8(8));
    w[1] = vsubq_s8(vreinterpretq_s8_u8(u[1]), vdupq_n_s8(8));
}

INLINE_ALWAYS void q4_1_quants(const struct block_q4_1 *b, int8x16_t w[2])
{
    uint8x16_t u[2];
    nibbles(b->qs, u);
    w[0] = vreinterpretq_s8_u8(u[0]);
    w[1] = vreinterpretq_s8_u8(u[1]);
}

INLINE_ALWAYS void q5_0_quants(const struct block_q5_0 *b, int8x16_t w[2])
{
    uint8x16_t u[2], h[2];
    nibbles(b->qs, u);
    q5_high_bits(b->qh, h);
    w[0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(u[0], h[0])), vdupq_n_s8(16));
    w[1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(u[1], h[1])), vdupq_n_s8(16));
}

INLINE_ALWAYS void q5_1_quants(const struct block_q5_1 *b, int8x16_t w[2])
{
    uint8x16_t u[2], h[2];
    nibbles(b->qs, u);
    q5_high_bits(b->qh, h);
    w[0] = vreinterpretq_s8_u8(vorrq_u8(u[0], h[0]));
    w[1] = vreinterpretq_s8_u8(vorrq_u8(u[1], h[1]));
}

INLINE_ALWAYS void q8_0_quants(const struct block_q8_0 *b, int8x16_t w[2])
{
    w[0] = vld1q_s8(b->qs);
    w[1] = vld1q_s8(b->qs + 16);
}

/* The block's 32 products as 8 int32 lanes, lane k the sum of elements 4k..4k+3: the grouping
 * of the x86 kernels' maddubs + madd, which sdot has natively; without dotprod, products are
 * widened and added in adjacent pairs twice. Exact. */
INLINE_ALWAYS void lanes8(const int8x16_t w[2], const int8_t *q, int32x4_t out[2])
{
    for (int h = 0; h < 2; h++) {
        const int8x16_t a = vld1q_s8(q + 16 * h);
#if defined(__ARM_FEATURE_DOTPROD)
        out[h] = vdotq_s32(vdupq_n_s32(0), w[h], a);
#else
        const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(w[h]), vget_low_s8(a)));
        const int32x4_t hi = vpaddlq_s16(vmull_high_s8(w[h], a));
        out[h] = vpaddq_s32(lo, hi);
#endif
    }
}

#endif
