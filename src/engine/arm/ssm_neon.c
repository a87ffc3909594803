/* NEON variants of the recurrent scans (ssm_neon.h), in the reference's ARM arithmetic
 * (ggml-cpu's NEON build without SVE: ggml_vec_dot_f32 and the Mamba-2 branch of ssm_scan):
 * over each whole 16-element step four 4-lane fused multiply-add accumulators, reduced as
 * (a0 + a2) + (a1 + a3) and then across lanes as (l0 + l1) + (l2 + l3) (vaddvq_f32, faddp),
 * the remaining products added to that float one by one, each with one fused multiply-add
 * (its compiler contracts the scalar `sum += x * y`). The element updates (decay, rank-1
 * update, the scan's product and sum rounded apart) are the scalar references', so only the
 * dots' order differs from them, and a row always sums the same way. These bits differ from
 * the AVX2 set's (8-lane accumulators over 32-element steps), as the reference's ARM and x86
 * builds differ from each other. */
#include "engine/arm/ssm_neon.h"

#include <arm_neon.h>
#include <math.h>
#include <stddef.h>

#define STEP 16 // elements per accumulation step: 4 accumulators of 4 lanes

/* The four accumulators' sum in the reference's reduction order. */
static inline float reduce4(const float32x4_t s[4])
{
    const float32x4_t t = vaddq_f32(vaddq_f32(s[0], s[2]), vaddq_f32(s[1], s[3]));
    return vaddvq_f32(t);
}

/* Decays the row and returns its dot with k: one pass where the reference makes two (the
 * products read the decayed values, as they would from memory). */
static float decay_dot(int n, float *row, const float *k, float decay)
{
    const int np = n & ~(STEP - 1);
    const float32x4_t vd = vdupq_n_f32(decay);
    float32x4_t s[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const float32x4_t r = vmulq_f32(vld1q_f32(row + i + 4 * j), vd);
            vst1q_f32(row + i + 4 * j, r);
            s[j] = vfmaq_f32(s[j], r, vld1q_f32(k + i + 4 * j));
        }
    float sum = reduce4(s);
    for (int i = np; i < n; i++) {
        row[i] *= decay;
        sum = fmaf(row[i], k[i], sum);
    }
    return sum;
}

/* row += k * d (fused), then returns the updated row's dot with q; one pass, as above. */
static float mad_dot(int n, float *row, const float *k, float d, const float *q)
{
    const int np = n & ~(STEP - 1);
    const float32x4_t vd = vdupq_n_f32(d);
    float32x4_t s[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const int o = i + 4 * j;
            const float32x4_t r = vfmaq_f32(vld1q_f32(row + o), vld1q_f32(k + o), vd);
            vst1q_f32(row + o, r);
            s[j] = vfmaq_f32(s[j], r, vld1q_f32(q + o));
        }
    float sum = reduce4(s);
    for (int i = np; i < n; i++) {
        row[i] = fmaf(k[i], d, row[i]);
        sum = fmaf(row[i], q[i], sum);
    }
    return sum;
}

void ssm_delta_step_neon(int n, float *state, const float *q, const float *k, const float *v,
                         float decay, float beta, float scale, float *out)
{
    for (int j = 0; j < n; j++) { // row by row, as in ssm_delta_step_ref
        float *row = state + (size_t)j * (size_t)n;
        const float d = (v[j] - decay_dot(n, row, k, decay)) * beta;
        out[j] = mad_dot(n, row, k, d, q) * scale;
    }
}

/* One channel's state row through the scan; returns its dot with c. */
static float ssd_row(int n, float *row, const float *b, const float *c, float decay, float x_dt)
{
    const int np = n & ~(STEP - 1);
    const float32x4_t vd = vdupq_n_f32(decay), vx = vdupq_n_f32(x_dt);
    float32x4_t s[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const int o = i + 4 * j;
            const float32x4_t kept = vmulq_f32(vld1q_f32(row + o), vd);
            const float32x4_t r = vaddq_f32(kept, vmulq_f32(vld1q_f32(b + o), vx));
            vst1q_f32(row + o, r);
            s[j] = vfmaq_f32(s[j], r, vld1q_f32(c + o));
        }
    float sum = reduce4(s);
    for (int i = np; i < n; i++) {
        const float kept = row[i] * decay, added = b[i] * x_dt;
        row[i] = kept + added;
        sum = fmaf(row[i], c[i], sum);
    }
    return sum;
}

void ssm_ssd_step_neon(int head_dim, int n, float *state, const float *x, const float *b,
                       const float *c, float decay, float dt, float *y)
{
    for (int i = 0; i < head_dim; i++)
        y[i] = ssd_row(n, state + (size_t)i * (size_t)n, b, c, decay, x[i] * dt);
}
