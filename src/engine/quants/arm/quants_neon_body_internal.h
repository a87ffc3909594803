/* The NEON kernels, written once and compiled twice: by quants_neon.c for ARMv8.0 (int8 dots
 * by smull/smlal2 + sadalp) and by quants_dotprod.c with +dotprod (sdot); dot16 picks by
 * __ARM_FEATURE_DOTPROD. The includer defines ISA (the symbol suffix) first.
 *
 * Integer formats: each block's (or sub-block's) integer dot is exact in int32 lanes, reduced
 * once per block, then scaled and summed with the scalar reference's own float expression in
 * its order, so results equal the reference bit for bit. Float weights: four 4-lane FMA
 * chains, added pairwise at the end, the tail one by one. */
#include "engine/quants/arm/quants_arm_internal.h"
#include "engine/quants/arm/quants_neon_internal.h"

#include <math.h>
#include <stddef.h>

#define PASTE2(a, b) a##_##b
#define PASTE(a, b)  PASTE2(a, b)
#define KERNEL(name) PASTE(name, ISA)

/* ---- float weights against F32 activations ---- */

INLINE_ALWAYS float32x4_t load_f32x4(const uint8_t *p)
{
    return vreinterpretq_f32_u8(vld1q_u8(p));
}

static float f32_at(const uint8_t *p, int64_t i)
{
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
}

/* Calls LOAD8(p, i, lo, hi) for the 8 weights at i as two float32x4, the tail through SCALAR. */
#define FLOAT_DOT(name, LOAD8, SCALAR)                                                             \
    void KERNEL(name)(int64_t n, float *s, const void *x, const void *y)                           \
    {                                                                                              \
        const uint8_t *a = x, *b = y;                                                              \
        float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};     \
        int64_t i = 0;                                                                             \
        for (; i + 16 <= n; i += 16) {                                                             \
            float32x4_t w0, w1, w2, w3;                                                            \
            LOAD8(a, i, w0, w1);                                                                   \
            LOAD8(a, i + 8, w2, w3);                                                               \
            acc[0] = vfmaq_f32(acc[0], w0, load_f32x4(b + 4 * i));                                 \
            acc[1] = vfmaq_f32(acc[1], w1, load_f32x4(b + 4 * (i + 4)));                           \
            acc[2] = vfmaq_f32(acc[2], w2, load_f32x4(b + 4 * (i + 8)));                           \
            acc[3] = vfmaq_f32(acc[3], w3, load_f32x4(b + 4 * (i + 12)));                          \
        }                                                                                          \
        float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[2]), vaddq_f32(acc[1], acc[3])));   \
        for (; i < n; i++)                                                                         \
            sum += SCALAR(a, i) * f32_at(b, i);                                                    \
        *s = sum;                                                                                  \
    }

#define LOAD8_F32(a, i, lo, hi)                                                                    \
    do {                                                                                           \
        lo = load_f32x4((a) + 4 * (i));                                                            \
        hi = load_f32x4((a) + 4 * (i) + 16);                                                       \
    } while (0)
#define LOAD8_F16(a, i, lo, hi)                                                                    \
    do {                                                                                           \
        float16x8_t h = vreinterpretq_f16_u8(vld1q_u8((a) + 2 * (i)));                             \
        lo = vcvt_f32_f16(vget_low_f16(h));                                                        \
        hi = vcvt_high_f32_f16(h);                                                                 \
    } while (0)
#define LOAD8_BF16(a, i, lo, hi)                                                                   \
    do {                                                                                           \
        uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8((a) + 2 * (i)));                              \
        lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));                              \
        hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));                                       \
    } while (0)

static float f16_at(const uint8_t *p, int64_t i)
{
    half_bits h;
    memcpy(&h, p + 2 * i, 2);
    return h2f(h);
}

static float bf16_at(const uint8_t *p, int64_t i)
{
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return bf16_to_f32(h);
}

FLOAT_DOT(f32_vec_dot, LOAD8_F32, f32_at)
FLOAT_DOT(f16_vec_dot, LOAD8_F16, f16_at)
FLOAT_DOT(bf16_vec_dot, LOAD8_BF16, bf16_at)

/* ---- 32-element blocks against Q8_0 (symmetric) or Q8_1 (with a min) ---- */

INLINE_ALWAYS int32_t block_dot(const int8x16_t w[2], const int8_t *q)
{
    int32x4_t acc = dot16(vdupq_n_s32(0), w[0], vld1q_s8(q));
    return vaddvq_s32(dot16(acc, w[1], vld1q_s8(q + 16)));
}

#define DOT32_SYM(ty)                                                                              \
    void KERNEL(ty##_vec_dot)(int64_t n, float *s, const void *x, const void *y)                   \
    {                                                                                              \
        const struct block_##ty *a = x;                                                            \
        const struct block_q8_0 *b = y;                                                            \
        float sum = 0.0f;                                                                          \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            int8x16_t w[2];                                                                        \
            ty##_quants(&a[i], w);                                                                 \
            sum += (float)block_dot(w, b[i].qs) * (h2f(a[i].d) * h2f(b[i].d));                     \
        }                                                                                          \
        *s = sum;                                                                                  \
    }

#define DOT32_MIN(ty)                                                                              \
    void KERNEL(ty##_vec_dot)(int64_t n, float *s, const void *x, const void *y)                   \
    {                                                                                              \
        const struct block_##ty *a = x;                                                            \
        const struct block_q8_1 *b = y;                                                            \
        float sum = 0.0f;                                                                          \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            int8x16_t w[2];                                                                        \
            ty##_quants(&a[i], w);                                                                 \
            sum += (float)block_dot(w, b[i].qs) * (h2f(a[i].d) * h2f(b[i].d)) +                    \
                   h2f(a[i].m) * h2f(b[i].s);                                                      \
        }                                                                                          \
        *s = sum;                                                                                  \
    }

DOT32_SYM(q4_0)
DOT32_SYM(q5_0)
DOT32_SYM(q8_0)
DOT32_MIN(q4_1)
DOT32_MIN(q5_1)

/* ---- K-quant super-blocks against Q8_K ---- */

INLINE_ALWAYS int16x8_t bsums_at(const struct block_q8_K *b, int half)
{
    const uint8_t *p = (const uint8_t *)b + offsetof(struct block_q8_K, bsums) + 16 * half;
    return vreinterpretq_s16_u8(vld1q_u8(p));
}

/* sum_j m[j] * bsums[j] over the 16 sub-blocks of 16 elements. */
INLINE_ALWAYS int32_t mins_dot16(const struct block_q8_K *b, const uint8_t m[16])
{
    const uint8x16_t mv = vld1q_u8(m);
    const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mv)));
    const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mv));
    const int16x8_t b0 = bsums_at(b, 0), b1 = bsums_at(b, 1);
    int32x4_t acc = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
    acc = vmlal_high_s16(acc, m0, b0);
    acc = vmlal_s16(acc, vget_low_s16(m1), vget_low_s16(b1));
    acc = vmlal_high_s16(acc, m1, b1);
    return vaddvq_s32(acc);
}

/* The same over 8 sub-blocks of 32 elements (bsums added in pairs; each pair fits int16). */
INLINE_ALWAYS int32_t mins_dot32(const struct block_q8_K *b, const uint8_t m[8])
{
    const int16x8_t mv = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
    const int16x8_t pairs = vpaddq_s16(bsums_at(b, 0), bsums_at(b, 1));
    int32x4_t acc = vmull_s16(vget_low_s16(mv), vget_low_s16(pairs));
    acc = vmlal_high_s16(acc, mv, pairs);
    return vaddvq_s32(acc);
}

INLINE_ALWAYS uint8x16_t shr_u8(uint8x16_t v, int n)
{
    return vshlq_u8(v, vdupq_n_s8((int8_t)-n));
}

/* The reference's per-super-block expression, in its order. */
INLINE_ALWAYS float k_term(float d, float dmin, float dy, int32_t sumi, int32_t summ)
{
    return (d * dy) * (float)sumi - (dmin * dy) * (float)summ;
}

void KERNEL(q2_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q2_K *a = x;
    const struct block_q8_K *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t m[16];
        int32x4_t acc = vdupq_n_s32(0);
        for (int nn = 0; nn < 2; nn++) {
            const uint8x16_t q[2] = {vld1q_u8(a[i].qs + 32 * nn), vld1q_u8(a[i].qs + 32 * nn + 16)};
            for (int sh = 0; sh < 4; sh++)
                for (int h = 0; h < 2; h++) {
                    const int k = 8 * nn + 2 * sh + h; // sub-block of 16 elements
                    int8x16_t w =
                        vreinterpretq_s8_u8(vandq_u8(shr_u8(q[h], 2 * sh), vdupq_n_u8(3)));
                    int32x4_t d = dot16(vdupq_n_s32(0), w, vld1q_s8(b[i].qs + 16 * k));
                    acc = vmlaq_n_s32(acc, d, a[i].scales[k] & 0xf);
                }
        }
        for (int j = 0; j < 16; j++)
            m[j] = a[i].scales[j] >> 4;
        sum += k_term(h2f(a[i].d), h2f(a[i].dmin), b[i].d, vaddvq_s32(acc), mins_dot16(&b[i], m));
    }
    *s = sum;
}

void KERNEL(q3_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q3_K *a = x;
    const struct block_q8_K *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        k3_scales(a[i].scales, sc);
        const uint8x16_t hm[2] = {vld1q_u8(a[i].hmask), vld1q_u8(a[i].hmask + 16)};
        int32x4_t acc = vdupq_n_s32(0);
        for (int nn = 0; nn < 2; nn++) {
            const uint8x16_t q[2] = {vld1q_u8(a[i].qs + 32 * nn), vld1q_u8(a[i].qs + 32 * nn + 16)};
            for (int sh = 0; sh < 4; sh++)
                for (int h = 0; h < 2; h++) {
                    const int k = 8 * nn + 2 * sh + h;
                    uint8x16_t lo = vandq_u8(shr_u8(q[h], 2 * sh), vdupq_n_u8(3));
                    uint8x16_t hi = vandq_u8(
                        vtstq_u8(hm[h], vdupq_n_u8((uint8_t)(1u << (4 * nn + sh)))), vdupq_n_u8(4));
                    int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(4));
                    int32x4_t d = dot16(vdupq_n_s32(0), w, vld1q_s8(b[i].qs + 16 * k));
                    acc = vmlaq_n_s32(acc, d, sc[k]);
                }
        }
        sum += k_term(h2f(a[i].d), 0.0f, b[i].d, vaddvq_s32(acc), 0);
    }
    *s = sum;
}

/* Q4_K and Q5_K: 64-element chunk c holds elements 64c..64c+31 in the low nibbles of
 * qs[32c..32c+31] and the next 32 in the high nibbles; Q5_K's fifth bit of element e is bit
 * e / 32 of qh[e % 32]. Sub-blocks of 32 elements. */
INLINE_ALWAYS void k45_vec_dot(int64_t n, float *s, const void *x, const void *y, bool five)
{
    const struct block_q8_K *b = y;
    const size_t bsize = five ? sizeof(struct block_q5_K) : sizeof(struct block_q4_K);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)x + (size_t)i * bsize;
        half_bits d, dmin;
        memcpy(&d, blk, 2);
        memcpy(&dmin, blk + 2, 2);
        const uint8_t *scales = blk + 4;
        const uint8_t *qh = blk + 16;
        const uint8_t *qs = five ? blk + 48 : blk + 16;
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++)
            k4_scale_min(j, scales, &sc[j], &m[j]);
        uint8x16_t hb[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if (five) {
            hb[0] = vld1q_u8(qh);
            hb[1] = vld1q_u8(qh + 16);
        }
        int32x4_t acc = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t q[2] = {vld1q_u8(qs + 32 * c), vld1q_u8(qs + 32 * c + 16)};
            const int8_t *yq = b[i].qs + 64 * c;
            int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
            for (int h = 0; h < 2; h++) {
                uint8x16_t wl = vandq_u8(q[h], vdupq_n_u8(0x0f)), wh = vshrq_n_u8(q[h], 4);
                if (five) {
                    const uint8x16_t ten = vdupq_n_u8(0x10);
                    wl = vorrq_u8(
                        wl, vandq_u8(vtstq_u8(hb[h], vdupq_n_u8((uint8_t)(1u << (2 * c)))), ten));
                    wh = vorrq_u8(
                        wh, vandq_u8(vtstq_u8(hb[h], vdupq_n_u8((uint8_t)(2u << (2 * c)))), ten));
                }
                lo = dot16(lo, vreinterpretq_s8_u8(wl), vld1q_s8(yq + 16 * h));
                hi = dot16(hi, vreinterpretq_s8_u8(wh), vld1q_s8(yq + 32 + 16 * h));
            }
            acc = vmlaq_n_s32(acc, lo, sc[2 * c]);
            acc = vmlaq_n_s32(acc, hi, sc[2 * c + 1]);
        }
        sum += k_term(h2f(d), h2f(dmin), b[i].d, vaddvq_s32(acc), mins_dot32(&b[i], m));
    }
    *s = sum;
}

void KERNEL(q4_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    k45_vec_dot(n, s, x, y, false);
}

void KERNEL(q5_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    k45_vec_dot(n, s, x, y, true);
}

void KERNEL(q6_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q6_K *a = x;
    const struct block_q8_K *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int nn = 0; nn < 2; nn++) {
            const uint8_t *ql = a[i].ql + 64 * nn;
            const uint8x16_t qh[2] = {vld1q_u8(a[i].qh + 32 * nn),
                                      vld1q_u8(a[i].qh + 32 * nn + 16)};
            for (int sh = 0; sh < 4; sh++)
                for (int h = 0; h < 2; h++) {
                    const int k = 8 * nn + 2 * sh + h;
                    const uint8x16_t byte = vld1q_u8(ql + 32 * (sh & 1) + 16 * h);
                    uint8x16_t lo = sh < 2 ? vandq_u8(byte, vdupq_n_u8(0x0f)) : vshrq_n_u8(byte, 4);
                    uint8x16_t hi = vshlq_n_u8(vandq_u8(shr_u8(qh[h], 2 * sh), vdupq_n_u8(3)), 4);
                    int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
                    int32x4_t d = dot16(vdupq_n_s32(0), w, vld1q_s8(b[i].qs + 16 * k));
                    acc = vmlaq_n_s32(acc, d, a[i].scales[k]);
                }
        }
        sum += k_term(h2f(a[i].d), 0.0f, b[i].d, vaddvq_s32(acc), 0);
    }
    *s = sum;
}

/* ---- activation quantizers (the same bytes as the _ref versions) ---- */

/* Largest |x| of 32 floats. */
INLINE_ALWAYS float absmax32(const float *x)
{
    float32x4_t m = vabsq_f32(vld1q_f32(x)); // maxnm: NaN skipped, as the reference
    for (int j = 4; j < 32; j += 4)
        m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    return vmaxnmvq_f32(m);
}

/* q[j] = round-half-even(x[j] * id) for 16 values known to lie in [-127, 127] after rounding
 * (or clamped there); returns their int32 lane sums. */
INLINE_ALWAYS int32x4_t round16(const float *x, float id, int8_t *q)
{
    int32x4_t r[4];
    for (int j = 0; j < 4; j++) {
        r[j] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 4 * j), id));
        r[j] = vmaxq_s32(vminq_s32(r[j], vdupq_n_s32(127)), vdupq_n_s32(-127));
    }
    const int16x8_t lo = vcombine_s16(vmovn_s32(r[0]), vmovn_s32(r[1]));
    const int16x8_t hi = vcombine_s16(vmovn_s32(r[2]), vmovn_s32(r[3]));
    vst1q_s8(q, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
    return vaddq_s32(vaddq_s32(r[0], r[1]), vaddq_s32(r[2], r[3]));
}

void KERNEL(q8_0_activations)(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float amax = absmax32(x);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        round16(x, id, b[i].qs);
        round16(x + 16, id, b[i].qs + 16);
        b[i].d = f32_to_half(amax / 127.0f);
    }
}

void KERNEL(q8_1_activations)(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float amax = absmax32(x);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const int32x4_t s = vaddq_s32(round16(x, id, b[i].qs), round16(x + 16, id, b[i].qs + 16));
        const float d = amax / 127.0f;
        b[i].d = f32_to_half(d);
        b[i].s = f32_to_half(d * (float)vaddvq_s32(s));
    }
}

void KERNEL(q8_K_from_float)(const float *x, void *y, int64_t n)
{
    struct block_q8_K *b = y;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int e = 0; e < QK_K; e += 4)
            m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + e)));
        const float amax = vmaxnmvq_f32(m);
        if (!(amax > 0.0f)) { // zero (or NaN): as the reference, whose strict > never fires
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float max = 0.0f; // the first element of largest magnitude, with its sign
        for (int e = 0; e < QK_K; e++)
            if (fabsf(x[e]) == amax) {
                max = x[e];
                break;
            }
        const float iscale = -127.0f / max;
        int16_t bsums[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++)
            bsums[j] = (int16_t)vaddvq_s32(round16(x + 16 * j, iscale, b[i].qs + 16 * j));
        memcpy(b[i].bsums, bsums, sizeof bsums);
        b[i].d = 1.0f / iscale;
    }
}
