/* AVX2 + FMA + F16C variant of the tiled attention (attn.h), bit-identical to attn_run_ref.
 * Single-pass arithmetic: a tile's keys and values converted to F32 rows once per block, then
 * the block's queries step through them in attn_single_avx2.c (scores 8 keys at a time, the
 * exponentials before the accumulators, several queries' accumulators at once).
 * Tile-softmax arithmetic: keys converted and transposed
 * (dimension-major, 64 keys per row), so the scores of 8 keys are one register whose lanes
 * each run their own FMA chain over the dimensions in order; values row-major, each
 * dimension's accumulator running its FMA chain over the keys in order, 32 dimensions at a
 * time. Compiled with those ISA flags; only called after attn_have_avx2(). */
#include "engine/attn.h"
#include "engine/attn_driver_internal.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"
#include "engine/x86/attn_single_x86.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "engine/x86/ops_avx2_internal.h"

#include <immintrin.h>

#define GROUPS (ATTN_KEY_TILE / 8)

/* The reference's 8-lane sum: high half onto low, upper pair onto lower, the last two. */
static inline float hsum8(__m256 v)
{
    __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* Keys [k0, k0 + n) into kt[d * 64 + j] (columns n..63 zero) and values into vt[j * hd + d]. */
static void convert_tile(const struct attn_block *b, int k0, int n, float *kt, float *vt)
{
    const int hd = b->head_dim;
    float row[ATTN_HEAD_DIM_MAX];
    for (int j = 0; j < n; j++) {
        const uint16_t *k = b->k + attn_key_offset(b, k0 + j);
        const uint16_t *v = b->v + attn_key_offset(b, k0 + j);
        int d = 0;
        for (; d + 8 <= hd; d += 8) {
            _mm256_storeu_ps(row + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + d))));
            _mm256_storeu_ps(vt + (size_t)j * hd + d,
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + d))));
        }
        for (; d < hd; d++) {
            row[d] = ops_f16_to_f32(k[d]);
            vt[(size_t)j * hd + d] = ops_f16_to_f32(v[d]);
        }
        for (d = 0; d < hd; d++)
            kt[d * ATTN_KEY_TILE + j] = row[d];
    }
    if (n < ATTN_KEY_TILE)
        for (int d = 0; d < hd; d++)
            memset(kt + d * ATTN_KEY_TILE + n, 0, sizeof(float) * (size_t)(ATTN_KEY_TILE - n));
}

/* Keys and values [k0, k0 + n) into F32 rows (the single-pass arithmetic). */
static void convert_rows(const struct attn_block *b, int k0, int n, float *kr, float *vr)
{
    const int hd = b->head_dim;
    for (int j = 0; j < n; j++) {
        const uint16_t *k = b->k + attn_key_offset(b, k0 + j);
        const uint16_t *v = b->v + attn_key_offset(b, k0 + j);
        float *ko = kr + (size_t)j * hd, *vo = vr + (size_t)j * hd;
        int d = 0;
        for (; d + 8 <= hd; d += 8) {
            _mm256_storeu_ps(ko + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + d))));
            _mm256_storeu_ps(vo + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + d))));
        }
        for (; d < hd; d++) {
            ko[d] = ops_f16_to_f32(k[d]);
            vo[d] = ops_f16_to_f32(v[d]);
        }
    }
}

/* Scores of the tile's 64 key columns for one query: 8 registers, one FMA chain per lane. */
static void scores(const float *kt, const float *q, int hd, float scale, float *s)
{
    __m256 acc[GROUPS];
    for (int g = 0; g < GROUPS; g++)
        acc[g] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const __m256 qd = _mm256_set1_ps(q[d]);
        const float *row = kt + d * ATTN_KEY_TILE;
        for (int g = 0; g < GROUPS; g++)
            acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(row + 8 * g), qd, acc[g]);
    }
    const __m256 vs = _mm256_set1_ps(scale);
    for (int g = 0; g < GROUPS; g++)
        _mm256_storeu_ps(s + 8 * g, _mm256_mul_ps(acc[g], vs));
}

/* acc[d] = fma chain over keys j < n of vt[j][d] * p[j], for d in [d0, d0 + 8 * NV). */
static inline void value_chunk(const float *vt, const float *p, int n, int hd, float *out, int d0,
                               int nv)
{
    __m256 acc[4];
    for (int c = 0; c < nv; c++)
        acc[c] = _mm256_loadu_ps(out + d0 + 8 * c);
    for (int j = 0; j < n; j++) {
        const __m256 pj = _mm256_set1_ps(p[j]);
        const float *v = vt + (size_t)j * hd + d0;
        for (int c = 0; c < nv; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_loadu_ps(v + 8 * c), pj, acc[c]);
    }
    for (int c = 0; c < nv; c++)
        _mm256_storeu_ps(out + d0 + 8 * c, acc[c]);
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
        const __m256 vms = _mm256_set1_ps(ms);
        int d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(out + d), vms));
        for (; d < hd; d++)
            out[d] *= ms;
        st[1] *= ms;
    }
    st[0] = m_new;
    const __m256 vm = _mm256_set1_ps(m_new);
    const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    double sum = 0.0;
    for (int g = a & ~7; g < e; g += 8) { // groups aligned to the tile start
        __m256 x = ops_expf_poly8(_mm256_sub_ps(_mm256_loadu_ps(s + g), vm));
        const __m256 valid =
            _mm256_and_ps(_mm256_cmp_ps(lane, _mm256_set1_ps((float)(e - g)), _CMP_LT_OQ),
                          _mm256_cmp_ps(lane, _mm256_set1_ps((float)(a - g)), _CMP_GE_OQ));
        x = _mm256_and_ps(x, valid);
        _mm256_storeu_ps(p + g, x);
        sum += (double)hsum8(x);
    }
    st[1] = (float)((double)st[1] + sum);
    const float *va = vt + (size_t)a * hd, *pa = p + a;
    const int n = e - a;
    int d = 0;
    for (; d + 32 <= hd; d += 32)
        value_chunk(va, pa, n, hd, out, d, 4);
    for (; d + 8 <= hd; d += 8)
        value_chunk(va, pa, n, hd, out, d, 1);
    for (; d < hd; d++) {
        float acc = out[d];
        for (int j = 0; j < n; j++)
            acc = fmaf(va[(size_t)j * hd + d], pa[j], acc);
        out[d] = acc;
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
    .single_tile = attn_single_tile_avx2,
    .convert_tile = convert_tile,
    .tile_step = tile_step,
};

void attn_run_avx2(const struct attn_block *b)
{
    attn_tiled_run(&steps, b);
}

#else // built without the ISA flags: never selected, but keep the symbol

void attn_run_avx2(const struct attn_block *b)
{
    attn_run_ref(b);
}

#endif
