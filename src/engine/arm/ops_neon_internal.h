/* Helpers shared by the NEON files of engine/arm/ (ops_neon.c, attn_neon.c). aarch64 only. */
#ifndef ENGINE_ARM_OPS_NEON_INTERNAL_H
#define ENGINE_ARM_OPS_NEON_INTERNAL_H

#include <arm_neon.h>

/* ops_expf_poly lane by lane: the same fused steps, the two range branches as selects. */
static inline float32x4_t ops_expf_poly4(float32x4_t x)
{
    const float32x4_t shift = vdupq_n_f32(0x1.8p23f);
    const float32x4_t z = vfmaq_f32(shift, x, vdupq_n_f32(0x1.715476p+0f));
    const float32x4_t n = vsubq_f32(z, shift);
    const float32x4_t nn = vnegq_f32(n);
    const float32x4_t b =
        vfmaq_f32(vfmaq_f32(x, nn, vdupq_n_f32(0x1.62e4p-1f)), nn, vdupq_n_f32(0x1.7f7d1cp-20f));
    const uint32x4_t e = vshlq_n_u32(vreinterpretq_u32_f32(z), 23);
    const float32x4_t k = vreinterpretq_f32_u32(vaddq_u32(e, vdupq_n_u32(0x3f800000u)));
    const float32x4_t u = vmulq_f32(b, b);
    const float32x4_t a1 = vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f), vdupq_n_f32(0x1.0e4020p-7f), b);
    const float32x4_t b1 = vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f), vdupq_n_f32(0x1.555e66p-3f), b);
    const float32x4_t a2 = vfmaq_f32(b1, a1, u);
    const float32x4_t j = vfmaq_f32(vmulq_f32(vdupq_n_f32(0x1.ffffecp-1f), b), a2, u);
    const float32x4_t normal = vfmaq_f32(k, k, j);
    const float32x4_t an = vabsq_f32(n);
    const uint32x4_t big = vcgtq_f32(an, vdupq_n_f32(126.0f));
    if (vmaxvq_u32(big) == 0) return normal;
    const uint32x4_t g = vandq_u32(vcleq_f32(n, vdupq_n_f32(0.0f)), vdupq_n_u32(0x82000000u));
    const float32x4_t s1 = vreinterpretq_f32_u32(vaddq_u32(g, vdupq_n_u32(0x7f000000u)));
    const float32x4_t s2 = vreinterpretq_f32_u32(vsubq_u32(e, g));
    const float32x4_t huge = vmulq_f32(s1, s1);
    const float32x4_t scaled = vmulq_f32(vfmaq_f32(s2, s2, j), s1);
    const float32x4_t out = vbslq_f32(vcgtq_f32(an, vdupq_n_f32(192.0f)), huge, scaled);
    return vbslq_f32(big, out, normal);
}

#endif
