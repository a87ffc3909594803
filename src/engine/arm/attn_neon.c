/* NEON variant of the tiled attention (attn.h), bit-identical to attn_run_ref: the AVX2
 * variant's operations with each 8-lane register as a pair of 4-lane ones. Single-pass
 * arithmetic: keys and values converted to F32 rows once per block, then the block's queries
 * step through them in attn_single_neon.c (scores 4 keys at a time, the exponentials before
 * the accumulators, several queries' accumulators at once). Tile-softmax arithmetic:
 * transposed keys, one FMA chain per lane over the dimensions, the exponentials 8 keys at a
 * time summed as the reference's 8-lane reduction, each value dimension's FMA chain over the
 * keys in order. */
#include "engine/arm/attn_neon.h"
#include "engine/arm/attn_single_neon.h"
#include "engine/arm/ops_neon_internal.h"
#include "engine/attn_driver_internal.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"

#include <arm_neon.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#define GROUPS4 (ATTN_KEY_TILE / 4)

/* Halves [0, hd) of src into floats at dst. */
static inline void convert_row(const uint16_t *src, float *dst, int hd)
{
    int d = 0;
    for (; d + 4 <= hd; d += 4)
        vst1q_f32(dst + d, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + d))));
    for (; d < hd; d++)
        dst[d] = ops_f16_to_f32(src[d]);
}

/* The reference's 8-lane sum of (lo | hi): high half onto low, upper pair onto lower, the last
 * two. */
static inline float hsum8(float32x4_t lo, float32x4_t hi)
{
    const float32x4_t q = vaddq_f32(hi, lo);
    const float32x2_t r = vadd_f32(vget_low_f32(q), vget_high_f32(q));
    return vget_lane_f32(r, 0) + vget_lane_f32(r, 1);
}

/* Keys [k0, k0 + n) into kt[d * 64 + j] (columns n..63 zero) and values into vt[j * hd + d]. */
static void convert_tile(const struct attn_block *b, int k0, int n, float *kt, float *vt)
{
    const int hd = b->head_dim;
    float row[ATTN_HEAD_DIM_MAX];
    for (int j = 0; j < n; j++) {
        convert_row(b->k + attn_key_offset(b, k0 + j), row, hd);
        convert_row(b->v + attn_key_offset(b, k0 + j), vt + (size_t)j * hd, hd);
        for (int d = 0; d < hd; d++)
            kt[d * ATTN_KEY_TILE + j] = row[d];
    }
    if (n < ATTN_KEY_TILE)
        for (int d = 0; d < hd; d++)
            memset(kt + d * ATTN_KEY_TILE + n, 0, sizeof(float) * (size_t)(ATTN_KEY_TILE - n));
}

/* Scores of the tile's 64 key columns for one query: 16 registers, one FMA chain per lane. */
static void scores(const float *kt, const float *q, int hd, float scale, float *s)
{
    float32x4_t acc[GROUPS4];
    for (int g = 0; g < GROUPS4; g++)
        acc[g] = vdupq_n_f32(0.0f);
    for (int d = 0; d < hd; d++) {
        const float32x4_t qd = vdupq_n_f32(q[d]);
        const float *row = kt + d * ATTN_KEY_TILE;
        for (int g = 0; g < GROUPS4; g++)
            acc[g] = vfmaq_f32(acc[g], vld1q_f32(row + 4 * g), qd);
    }
    for (int g = 0; g < GROUPS4; g++)
        vst1q_f32(s + 4 * g, vmulq_n_f32(acc[g], scale));
}

/* acc[d] = fma chain over keys j < n of vt[j][d] * p[j], for d in [d0, d0 + 16). */
static inline void value_chunk16(const float *vt, const float *p, int n, int hd, float *out, int d0)
{
    float32x4_t acc[4];
    for (int c = 0; c < 4; c++)
        acc[c] = vld1q_f32(out + d0 + 4 * c);
    for (int j = 0; j < n; j++) {
        const float32x4_t pj = vdupq_n_f32(p[j]);
        const float *v = vt + (size_t)j * hd + d0;
        for (int c = 0; c < 4; c++)
            acc[c] = vfmaq_f32(acc[c], vld1q_f32(v + 4 * c), pj);
    }
    for (int c = 0; c < 4; c++)
        vst1q_f32(out + d0 + 4 * c, acc[c]);
}

/* One query against keys [a, e) of the converted tile. */
static void tile_query(const struct attn_block *b, const float *kt, const float *vt, int a, int e,
                       int i, float st[2])
{
    const int hd = b->head_dim;
    float *out = b->out[i];
    float s[ATTN_KEY_TILE], p[ATTN_KEY_TILE];
    scores(kt, b->q[i], hd, attn_dot_scale(b), s);
    attn_cap_scores(b, s, a, e);
    float tmax = -INFINITY;
    for (int j = a; j < e; j++)
        tmax = fmaxf(tmax, s[j]);
    const float m_old = st[0], m_new = fmaxf(m_old, tmax);
    if (m_new > m_old) {
        const float ms = expf(m_old - m_new);
        int d = 0;
        for (; d + 4 <= hd; d += 4)
            vst1q_f32(out + d, vmulq_n_f32(vld1q_f32(out + d), ms));
        for (; d < hd; d++)
            out[d] *= ms;
        st[1] *= ms;
    }
    st[0] = m_new;
    const float32x4_t vm = vdupq_n_f32(m_new);
    const float lanes[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    double sum = 0.0;
    for (int g = a & ~7; g < e; g += 8) { // groups aligned to the tile start
        const float32x4_t left = vdupq_n_f32((float)(e - g)), skip = vdupq_n_f32((float)(a - g));
        float32x4_t x[2];
        for (int h = 0; h < 2; h++) {
            const float32x4_t ln = vld1q_f32(lanes + 4 * h);
            const uint32x4_t valid = vandq_u32(vcltq_f32(ln, left), vcgeq_f32(ln, skip));
            x[h] = ops_expf_poly4(vsubq_f32(vld1q_f32(s + g + 4 * h), vm));
            x[h] = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x[h]), valid));
            vst1q_f32(p + g + 4 * h, x[h]);
        }
        sum += (double)hsum8(x[0], x[1]);
    }
    st[1] = (float)((double)st[1] + sum);
    const float *va = vt + (size_t)a * hd, *pa = p + a;
    const int n = e - a;
    int d = 0;
    for (; d + 16 <= hd; d += 16)
        value_chunk16(va, pa, n, hd, out, d);
    for (; d < hd; d++) {
        float acc = out[d];
        for (int j = 0; j < n; j++)
            acc = fmaf(va[(size_t)j * hd + d], pa[j], acc);
        out[d] = acc;
    }
}

/* Keys and values [k0, k0 + n) into F32 rows (the single-pass arithmetic). */
static void convert_rows(const struct attn_block *b, int k0, int n, float *kr, float *vr)
{
    const int hd = b->head_dim;
    for (int j = 0; j < n; j++) {
        convert_row(b->k + attn_key_offset(b, k0 + j), kr + (size_t)j * hd, hd);
        convert_row(b->v + attn_key_offset(b, k0 + j), vr + (size_t)j * hd, hd);
    }
}

/* Every query of the block that sees keys [k0, k0 + n) through the converted tile. */
static void tile_step(const struct attn_block *b, const float *kt, const float *vt, int k0, int n,
                      float state[][2])
{
    for (int i = 0; i < b->n_q; i++) {
        int a, e;
        if (attn_span(b, i, k0, n, &a, &e)) tile_query(b, kt, vt, a, e, i, state[i]);
    }
}

static const struct attn_tiled_steps steps = {
    .convert_rows = convert_rows,
    .single_tile = attn_single_tile_neon,
    .convert_tile = convert_tile,
    .tile_step = tile_step,
};

void attn_run_neon(const struct attn_block *b)
{
    attn_tiled_run(&steps, b);
}
