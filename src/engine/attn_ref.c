/* The scalar reference of the tiled attention (attn.h), both arithmetics. It converts a
 * tile's keys and values to F32 once per block, like the AVX2 variant, and follows the same
 * per-query operation order (including the 8-lane dot of the single-pass arithmetic, emulated
 * lane by lane), so both give the same bits. */
#include "engine/attn.h"
#include "engine/attn_driver_internal.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"

#include <math.h>
#include <string.h>

/* Sum of 8 floats in the order of the reference's 8-lane reduction: high half onto low, then
 * the upper pair onto the lower, then the two left. */
static float hsum8(const float p[8])
{
    return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

/* One query against keys [a, e) of the converted tile (rows of head_dim floats). */
static void tile_query_ref(const struct attn_block *b, const float *kt, const float *vt, int a,
                           int e, int i, float ms_state[2])
{
    const int hd = b->head_dim;
    const float *q = b->q[i], scale = attn_dot_scale(b);
    float *out = b->out[i];
    float s[ATTN_KEY_TILE], p[ATTN_KEY_TILE];
    float tmax = -INFINITY;
    for (int j = a; j < e; j++) {
        float acc = 0.0f;
        for (int d = 0; d < hd; d++)
            acc = fmaf(kt[j * hd + d], q[d], acc);
        s[j] = acc * scale;
    }
    attn_cap_scores(b, s, a, e);
    for (int j = a; j < e; j++)
        tmax = fmaxf(tmax, s[j]);
    const float m_old = ms_state[0], m_new = fmaxf(m_old, tmax);
    if (m_new > m_old) {
        const float ms = expf(m_old - m_new);
        for (int d = 0; d < hd; d++)
            out[d] *= ms;
        ms_state[1] *= ms;
    }
    ms_state[0] = m_new;
    double sum = 0.0;
    for (int g = a & ~7; g < e; g += 8) { // groups aligned to the tile start
        float lane[8];
        for (int l = 0; l < 8; l++)
            lane[l] = g + l >= a && g + l < e ? ops_expf_poly(s[g + l] - m_new) : 0.0f;
        for (int l = 0; l < 8; l++)
            if (g + l >= a && g + l < e) p[g + l] = lane[l];
        sum += (double)hsum8(lane);
    }
    ms_state[1] = (float)((double)ms_state[1] + sum);
    for (int d = 0; d < hd; d++) {
        float acc = out[d];
        for (int j = a; j < e; j++)
            acc = fmaf(vt[j * hd + d], p[j], acc);
        out[d] = acc;
    }
}

static float round_half(float x)
{
    return ops_f16_to_f32(ops_f32_to_f16(x));
}

/* dot(k, q) over n floats in the order of the reference's 8-lane F16 dot (attn.h). */
static float dot_lanes_ref(const float *k, const float *q, int n)
{
    const int np = n & ~31;
    float c[4][8] = {{0}};
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++)
                c[j][l] = fmaf(k[i + 8 * j + l], q[i + 8 * j + l], c[j][l]);
    float h[4];
    for (int l = 0; l < 4; l++)
        h[l] = ((c[0][l] + c[2][l]) + (c[1][l] + c[3][l])) +
               ((c[0][l + 4] + c[2][l + 4]) + (c[1][l + 4] + c[3][l + 4]));
    double sum = (double)((h[0] + h[1]) + (h[2] + h[3]));
    for (int i = np; i < n; i++)
        sum += (double)(k[i] * q[i]);
    return (float)sum;
}

/* Single-pass arithmetic: one query (qr: rounded to half) over keys [0, n) of the converted
 * rows; acc holds half values, st the running maximum and sum. */
static void single_pass_ref(const struct attn_block *b, const float *kt, const float *vt, int n,
                            const float *qr, float *acc, float st[2])
{
    const int hd = b->head_dim;
    const float scale = attn_dot_scale(b);
    for (int j = 0; j < n; j++) {
        float s = dot_lanes_ref(kt + j * hd, qr, hd) * scale;
        attn_cap_scores(b, &s, 0, 1);
        float ms = 1.0f, vs = 1.0f;
        if (s > st[0]) {
            ms = expf(st[0] - s); // 0 for the first key
            st[0] = s;
            for (int d = 0; d < hd; d++)
                acc[d] = round_half(acc[d] * ms);
        } else {
            vs = expf(s - st[0]);
        }
        for (int d = 0; d < hd; d++)
            acc[d] = round_half(fmaf(vt[j * hd + d], vs, acc[d]));
        st[1] = fmaf(st[1], ms, vs);
    }
}

/* Query i over the converted tile of positions [k0, k0 + n), if it sees any of them. */
static void query_step_ref(const struct attn_block *b, const float *kt, const float *vt, int k0,
                           int n, int i, float st[2])
{
    const int hd = b->head_dim;
    int a, e;
    if (!attn_span(b, i, k0, n, &a, &e)) return;
    if (b->arith == ATTN_ARITH_TILE_SOFTMAX) {
        tile_query_ref(b, kt, vt, a, e, i, st);
        return;
    }
    float qr[ATTN_HEAD_DIM_MAX];
    for (int d = 0; d < hd; d++)
        qr[d] = round_half(b->q[i][d]);
    single_pass_ref(b, kt + a * hd, vt + a * hd, e - a, qr, b->out[i], st);
}

/* Keys and values [k0, k0 + n) into F32 rows: the reference's tile in both arithmetics. */
static void convert_rows(const struct attn_block *b, int k0, int n, float *kt, float *vt)
{
    const int hd = b->head_dim;
    for (int j = 0; j < n; j++) {
        const size_t off = attn_key_offset(b, k0 + j);
        for (int d = 0; d < hd; d++) {
            kt[j * hd + d] = ops_f16_to_f32(b->k[off + (size_t)d]);
            vt[j * hd + d] = ops_f16_to_f32(b->v[off + (size_t)d]);
        }
    }
}

/* Every query of the block over the converted tile of positions [k0, k0 + n). */
static void tile_step(const struct attn_block *b, const float *kt, const float *vt, int k0, int n,
                      float state[][2])
{
    for (int i = 0; i < b->n_q; i++)
        query_step_ref(b, kt, vt, k0, n, i, state[i]);
}

static const struct attn_tiled_steps steps = {
    .convert_rows = convert_rows,
    .single_tile = tile_step,
    .convert_tile = convert_rows,
    .tile_step = tile_step,
};

void attn_run_ref(const struct attn_block *b)
{
    attn_tiled_run(&steps, b);
}
