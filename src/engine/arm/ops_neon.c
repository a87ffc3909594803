/* NEON variants of the ops.h kernels: 8 elements a step (two float32x4), the rest through the
 * scalar tails shared with the references. */
#include "engine/arm/ops_neon.h"
#include "engine/arm/ops_neon_internal.h"
#include "engine/ops_ref.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

static inline float32x4_t load_h4(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline void store_h4(uint16_t *p, float32x4_t v)
{
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); // round to nearest even (FPCR default)
}

/* The x86 kernel's arithmetic: per 32 elements four 8-lane FMA chains (each a pair of 4-lane
 * vectors here), combined (c0 + c2) + (c1 + c3), high half onto low, two horizontal adds; the
 * rest through the shared double tail. */
static float dot_f16(int64_t n, const uint16_t *a, const uint16_t *b)
{
    const int64_t np = n & ~(int64_t)31;
    float32x4_t acc[4][2];
    for (int j = 0; j < 4; j++)
        acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) {
                const int64_t k = i + 8 * j + 4 * h;
                acc[j][h] = vfmaq_f32(acc[j][h], load_h4(a + k), load_h4(b + k));
            }
    const float32x4_t lo =
        vaddq_f32(vaddq_f32(acc[0][0], acc[2][0]), vaddq_f32(acc[1][0], acc[3][0]));
    const float32x4_t hi =
        vaddq_f32(vaddq_f32(acc[0][1], acc[2][1]), vaddq_f32(acc[1][1], acc[3][1]));
    const float32x4_t s = vaddq_f32(lo, hi);
    const float32x4_t p = vpaddq_f32(s, s);
    return (float)ops_dot_f16_tail(np, n, a, b, (double)vgetq_lane_f32(vpaddq_f32(p, p), 0));
}

static void mad_f16(int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    const float32x4_t sv = vdupq_n_f32(s);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        store_h4(y + i, vfmaq_f32(load_h4(y + i), load_h4(x + i), sv));
    ops_mad_f16_tail(i, n, y, x, s);
}

static void scale_f16(int64_t n, uint16_t *y, float s)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        store_h4(y + i, vmulq_n_f32(load_h4(y + i), s));
    for (; i < n; i++)
        y[i] = ops_f32_to_f16(ops_f16_to_f32(y[i]) * s);
}

static void f32_to_f16(int64_t n, const float *x, uint16_t *y)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        store_h4(y + i, vld1q_f32(x + i));
    for (; i < n; i++)
        y[i] = ops_f32_to_f16(x[i]);
}

static void round_f16(int64_t n, float *x)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(x + i, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++)
        x[i] = ops_f16_to_f32(ops_f32_to_f16(x[i]));
}

static void swiglu(int64_t n, float *g, const float *u)
{
    const int64_t nv = n & ~(int64_t)7;
    const float32x4_t one = vdupq_n_f32(1.0f), zero = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nv; i += 4) {
        const float32x4_t gv = vld1q_f32(g + i);
        const float32x4_t den = vaddq_f32(one, ops_expf_poly4(vsubq_f32(zero, gv)));
        vst1q_f32(g + i, vmulq_f32(vdivq_f32(gv, den), vld1q_f32(u + i)));
    }
    for (int64_t i = nv; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* Squares in float (the reference's), summed in double over four 2-lane chains (ops.h: the
 * float result may differ from the element-order sum only when the double lands within a few
 * of its ulps of a float rounding boundary). */
static void rmsnorm(int64_t n, float *y, const float *x, const float *w, float eps)
{
    float64x2_t s[4] = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        const float32x4_t qa = vmulq_f32(a, a), qb = vmulq_f32(b, b);
        s[0] = vaddq_f64(s[0], vcvt_f64_f32(vget_low_f32(qa)));
        s[1] = vaddq_f64(s[1], vcvt_high_f64_f32(qa));
        s[2] = vaddq_f64(s[2], vcvt_f64_f32(vget_low_f32(qb)));
        s[3] = vaddq_f64(s[3], vcvt_high_f64_f32(qb));
    }
    double sum = vaddvq_f64(vaddq_f64(vaddq_f64(s[0], s[1]), vaddq_f64(s[2], s[3])));
    for (; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    for (; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* x0' = fma(c, x0, -(s * x1)) as -(s * x1 - c * x0) fused (negation is exact), and
 * x1' = fma(s, x0, c * x1); adjacent pairs deinterleaved by vld2q. An odd last adjacent pair
 * and the rest go through the shared scalar tail: the reference's bits. */
static inline void rope4(float32x4_t *x0, float32x4_t *x1, float32x4_t c, float32x4_t s)
{
    const float32x4_t a = vnegq_f32(vfmsq_f32(vmulq_f32(s, *x1), c, *x0));
    *x1 = vfmaq_f32(vmulq_f32(c, *x1), s, *x0);
    *x0 = a;
}

static void rope(float *x, const float *cs, const float *sn, int n_rot, bool neox)
{
    const int half = n_rot / 2;
    int i = 0;
    if (neox) {
        for (; i + 4 <= half; i += 4) {
            float32x4_t x0 = vld1q_f32(x + i), x1 = vld1q_f32(x + half + i);
            rope4(&x0, &x1, vld1q_f32(cs + i), vld1q_f32(sn + i));
            vst1q_f32(x + i, x0);
            vst1q_f32(x + half + i, x1);
        }
    } else {
        const int hv = half - (half & 1);
        for (; i + 4 <= hv; i += 4) {
            float32x4x2_t v = vld2q_f32(x + 2 * i);
            rope4(&v.val[0], &v.val[1], vld1q_f32(cs + i), vld1q_f32(sn + i));
            vst2q_f32(x + 2 * i, v);
        }
    }
    ops_rope_tail(x, cs, sn, n_rot, neox, i);
}

/* The reference's (a table lookup per element; NEON has no gather). */
static void geglu(int64_t n, float *g, const float *u)
{
    ops_geglu_tail(0, n, g, u);
}

static const struct ops_kernels kernels_neon = {
    .dot_f16 = dot_f16,
    .mad_f16 = mad_f16,
    .scale_f16 = scale_f16,
    .f32_to_f16 = f32_to_f16,
    .round_f16 = round_f16,
    .swiglu = swiglu,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .geglu = geglu,
};

const struct ops_kernels *ops_neon_kernels(void)
{
    return &kernels_neon;
}
