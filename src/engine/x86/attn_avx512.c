/* AVX-512 variant of the tiled attention (attn.h), bit-identical to attn_run_ref and
 * attn_run_avx2: the same per-query operations with 16 lanes where AVX2 has 8.
 * Single-pass arithmetic: the tile's keys and values converted to F32 rows once per block,
 * then the block's queries step through them in attn_single_avx512.c (scores 16 keys at a
 * time, the exponentials before the accumulators, several queries' accumulators at once).
 * Tile-softmax arithmetic: transposed keys, 16 key columns per register
 * (one FMA chain per lane over the dimensions), the exponentials 16 at a time with each group
 * of 8 summed as the reference's 8-lane reduction, the value accumulators 16 dimensions per
 * register. Compiled with the AVX-512 flags; only called after attn_have_avx512(). */
#include "engine/attn.h"
#include "engine/attn_driver_internal.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"
#include "engine/x86/attn_single_x86.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include "engine/x86/ops_avx512_internal.h"

#include <immintrin.h>

#define GROUPS16 (ATTN_KEY_TILE / 16)

static inline __mmask16 tail_mask(int left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* The reference's 8-lane sum: high half onto low, upper pair onto lower, the last two. */
static inline float hsum8(__m256 v)
{
    __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* Halves [0, hd) of src into floats at dst. */
static inline void convert_row(const uint16_t *src, float *dst, int hd)
{
    for (int d = 0; d < hd; d += 16) {
        const __mmask16 m = tail_mask(hd - d);
        _mm512_mask_storeu_ps(dst + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + d)));
    }
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

/* Keys and values [k0, k0 + n) into F32 rows (the single-pass arithmetic). */
static void convert_rows(const struct attn_block *b, int k0, int n, float *kr, float *vr)
{
    const int hd = b->head_dim;
    for (int j = 0; j < n; j++) {
        convert_row(b->k + attn_key_offset(b, k0 + j), kr + (size_t)j * hd, hd);
        convert_row(b->v + attn_key_offset(b, k0 + j), vr + (size_t)j * hd, hd);
    }
}

/* Scores of the tile's 64 key columns for queries qa and qb (qb may be NULL): 4 registers
 * per query, one FMA chain per lane; two queries at once keep 8 chains in flight. */
static void scores2(const float *kt, const float *qa, const float *qb, int hd, float scale,
                    float *sa, float *sb)
{
    __m512 acc[2][GROUPS16];
    for (int g = 0; g < GROUPS16; g++)
        acc[0][g] = acc[1][g] = _mm512_setzero_ps();
    const __m512 vs = _mm512_set1_ps(scale);
    if (!qb) {
        for (int d = 0; d < hd; d++) {
            const __m512 qd = _mm512_set1_ps(qa[d]);
            const float *row = kt + d * ATTN_KEY_TILE;
            for (int g = 0; g < GROUPS16; g++)
                acc[0][g] = _mm512_fmadd_ps(_mm512_loadu_ps(row + 16 * g), qd, acc[0][g]);
        }
        for (int g = 0; g < GROUPS16; g++)
            _mm512_storeu_ps(sa + 16 * g, _mm512_mul_ps(acc[0][g], vs));
        return;
    }
    for (int d = 0; d < hd; d++) {
        const __m512 qad = _mm512_set1_ps(qa[d]), qbd = _mm512_set1_ps(qb[d]);
        const float *row = kt + d * ATTN_KEY_TILE;
        for (int g = 0; g < GROUPS16; g++) {
            const __m512 k = _mm512_loadu_ps(row + 16 * g);
            acc[0][g] = _mm512_fmadd_ps(k, qad, acc[0][g]);
            acc[1][g] = _mm512_fmadd_ps(k, qbd, acc[1][g]);
        }
    }
    for (int g = 0; g < GROUPS16; g++) {
        _mm512_storeu_ps(sa + 16 * g, _mm512_mul_ps(acc[0][g], vs));
        _mm512_storeu_ps(sb + 16 * g, _mm512_mul_ps(acc[1][g], vs));
    }
}

/* acc[d] = fma chain over keys j < n of vt[j][d] * p[j], for d in [d0, d0 + 64): four
 * registers kept in flight (a compile-time count, so they stay in registers). */
static inline __attribute__((always_inline)) void value_chunk4(const float *vt, const float *p,
                                                               int n, int hd, float *out, int d0)
{
    __m512 acc[4];
    for (int c = 0; c < 4; c++)
        acc[c] = _mm512_loadu_ps(out + d0 + 16 * c);
    for (int j = 0; j < n; j++) {
        const __m512 pj = _mm512_set1_ps(p[j]);
        const float *v = vt + (size_t)j * hd + d0;
        for (int c = 0; c < 4; c++)
            acc[c] = _mm512_fmadd_ps(_mm512_loadu_ps(v + 16 * c), pj, acc[c]);
    }
    for (int c = 0; c < 4; c++)
        _mm512_storeu_ps(out + d0 + 16 * c, acc[c]);
}

/* The same for the (masked) 16 dimensions from d0. */
static inline void value_chunk1(const float *vt, const float *p, int n, int hd, float *out, int d0)
{
    const __mmask16 m = tail_mask(hd - d0);
    __m512 acc = _mm512_maskz_loadu_ps(m, out + d0);
    for (int j = 0; j < n; j++)
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, vt + (size_t)j * hd + d0),
                              _mm512_set1_ps(p[j]), acc);
    _mm512_mask_storeu_ps(out + d0, m, acc);
}

/* The rest of a query's tile step (its keys [a, e) of the tile) once its scores s are known. */
static void tile_query(const struct attn_block *b, const float *vt, float *s, int a, int e, int i,
                       float st[2])
{
    const int hd = b->head_dim;
    float *out = b->out[i];
    float p[ATTN_KEY_TILE];
    attn_cap_scores(b, s, a, e);
    float tmax = -INFINITY;
    for (int j = a; j < e; j++)
        tmax = fmaxf(tmax, s[j]);
    const float m_old = st[0], m_new = fmaxf(m_old, tmax);
    if (m_new > m_old) {
        const float ms = expf(m_old - m_new);
        const __m512 vms = _mm512_set1_ps(ms);
        for (int d = 0; d < hd; d += 16) {
            const __mmask16 m = tail_mask(hd - d);
            _mm512_mask_storeu_ps(out + d, m,
                                  _mm512_mul_ps(_mm512_maskz_loadu_ps(m, out + d), vms));
        }
        st[1] *= ms;
    }
    st[0] = m_new;
    const __m512 vm = _mm512_set1_ps(m_new);
    double sum = 0.0;
    for (int g = a & ~15; g < e; g += 16) { // groups of 8 aligned to the tile start
        const int skip = a - g > 0 ? a - g : 0;
        const __mmask16 valid = (__mmask16)(tail_mask(e - g) & ~tail_mask(skip));
        const __m512 x =
            _mm512_maskz_mov_ps(valid, ops_expf_poly16(_mm512_sub_ps(_mm512_loadu_ps(s + g), vm)));
        _mm512_storeu_ps(p + g, x);
        sum += (double)hsum8(_mm512_castps512_ps256(x));
        if (g + 8 < e) sum += (double)hsum8(_mm512_extractf32x8_ps(x, 1));
    }
    st[1] = (float)((double)st[1] + sum);
    const float *va = vt + (size_t)a * hd, *pa = p + a;
    int d = 0;
    for (; d + 64 <= hd; d += 64)
        value_chunk4(va, pa, e - a, hd, out, d);
    for (; d < hd; d += 16)
        value_chunk1(va, pa, e - a, hd, out, d);
}

/* One converted tile (keys [k0, k0 + n)) for every query that sees it, scored in pairs. */
static void tile_step(const struct attn_block *b, const float *kt, const float *vt, int k0, int n,
                      float state[][2])
{
    float sa[ATTN_KEY_TILE], sb[ATTN_KEY_TILE];
    const float scale = attn_dot_scale(b);
    int pend = -1, pa = 0, pe = 0; // a query whose scores wait for a partner, its keys
    for (int i = 0; i <= b->n_q; i++) {
        int a = 0, e = 0;
        if (i < b->n_q && !attn_span(b, i, k0, n, &a, &e)) continue;
        if (i < b->n_q && pend < 0) {
            pend = i, pa = a, pe = e;
            continue;
        }
        if (pend < 0) break;
        const bool is_pair = i < b->n_q;
        scores2(kt, b->q[pend], is_pair ? b->q[i] : NULL, b->head_dim, scale, sa, sb);
        tile_query(b, vt, sa, pa, pe, pend, state[pend]);
        if (is_pair) tile_query(b, vt, sb, a, e, i, state[i]);
        pend = -1;
    }
}

static const struct attn_tiled_steps steps = {
    .convert_rows = convert_rows,
    .single_tile = attn_single_tile_avx512,
    .convert_tile = convert_tile,
    .tile_step = tile_step,
};

void attn_run_avx512(const struct attn_block *b)
{
    attn_tiled_run(&steps, b);
}

#else // built without the ISA flags: never selected, but keep the symbol

void attn_run_avx512(const struct attn_block *b)
{
    attn_run_ref(b);
}

#endif
