/* The single-pass arithmetic of the tiled attention (attn.h) in AVX2 + FMA + F16C,
 * bit-identical to attn_run_ref; the plan of attn_single_avx512.c in 8-lane registers:
 *   scores: 8 keys at a time; each key's four FMA chains added as the reference adds them,
 *       then the rest of its reduction tree (lane l onto l + 4, then the pairs) for the 8 keys
 *       together through shuffles, the same lane pairs added as the one-key reduction;
 *   exponentials: the running maximum and the sum for 8 queries at once (one lane each),
 *       every expf call (libm, the same arguments) in one loop before the accumulators;
 *   accumulator: up to 4 queries walk the tile's values together, 32 dimensions at a time,
 *       so their half-rounding chains overlap; between keys they are kept as half bits and
 *       read back with the conversion's memory form (a load where the register form needs a
 *       shuffle); a key that raises one query's maximum rescales all of them, by 1 where it
 *       does not (half(acc * 1) is acc).
 * Compiled with those ISA flags; only called after attn_have_avx2(). */
#include "engine/x86/attn_single_x86.h"
#include "engine/attn_driver_internal.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* expf runs once per key and query: called through its GOT entry rather than the PLT stub,
 * one indirect jump fewer per call (same function, same bits), as in attn_single_avx512.c. */
extern float expf(float) __attribute__((noplt));
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define ROUND_NEAREST _MM_FROUND_TO_NEAREST_INT // an immediate: clang wants a constant here

#define WALK_Q 4 // queries whose accumulators run together

/* Lanes below left set (all ones), as a maskload/maskstore mask. */
static inline __m256i lanes_below(int left)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One key's chains over the first np (a multiple of 32) dimensions, added as the reference
 * adds them: (c0 + c2) + (c1 + c3). */
static inline __attribute__((always_inline)) __m256 key_chains(const float *k, const float *q,
                                                               int np)
{
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    for (int i = 0; i < np; i += 32) {
        c0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), _mm256_loadu_ps(q + i), c0);
        c1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(q + i + 8), c1);
        c2 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 16), _mm256_loadu_ps(q + i + 16), c2);
        c3 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 24), _mm256_loadu_ps(q + i + 24), c3);
    }
    return _mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3));
}

/* Two keys' sums x0, x1 -> lanes 0-3: x0[l] + x0[l + 4], lanes 4-7: the same of x1. */
static inline __m256 fold4(__m256 x0, __m256 x1)
{
    return _mm256_add_ps(_mm256_permute2f128_ps(x0, x1, 0x20),
                         _mm256_permute2f128_ps(x0, x1, 0x31));
}

/* Pairs within each half: [x0 h0 + h1, x0 h2 + h3, x1 h0 + h1, x1 h2 + h3]. */
static inline __m256 fold_pairs(__m256 x0, __m256 x1)
{
    return _mm256_add_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Scores of one query (qr: rounded to half) for keys [a, e) of the tile into sc[a..e): the
 * 8-lane dot order of attn.h, 8 keys per pass (rows past e - 1 repeat row e - 1). np is
 * head_dim rounded down to 32, a constant where the caller inlines it. */
static inline __attribute__((always_inline)) void
query_scores(const float *kr, int hd, int np, int a, int e, const float *qr, float scale, float *sc)
{
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); // key 2t + g is in 4g + t
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int j0 = a; j0 < e; j0 += 8) {
        __m256 y[4];
        for (int p = 0; p < 4; p++) {
            const int j1 = j0 + 2 * p < e ? j0 + 2 * p : e - 1;
            const int j2 = j0 + 2 * p + 1 < e ? j0 + 2 * p + 1 : e - 1;
            y[p] = fold4(key_chains(kr + (size_t)j1 * hd, qr, np),
                         key_chains(kr + (size_t)j2 * hd, qr, np));
        }
        const __m256 u = _mm256_permutevar8x32_ps(
            fold_pairs(fold_pairs(y[0], y[1]), fold_pairs(y[2], y[3])), order);
        float f[8];
        if (np == hd && e - j0 >= 8) {
            _mm256_storeu_ps(sc + j0, _mm256_mul_ps(u, vscale));
            continue;
        }
        _mm256_storeu_ps(f, u);
        for (int t = 0; t < 8 && j0 + t < e; t++)
            sc[j0 + t] = attn_score_tail(kr + (size_t)(j0 + t) * hd, qr, np, hd, f[t], scale);
    }
}

/* The scores with np a constant for the common head sizes (the chains unrolled). Always
 * inlined into the group loop (attn_driver_internal.h), which calls it through its steps
 * table: as a call it cost the AVX2 prompt case ~1% (bench_ops). */
static inline __attribute__((always_inline)) void scores(const float *kr, int hd, int a, int e,
                                                         const float *qr, float scale, float *sc)
{
    if (hd == 64)
        query_scores(kr, 64, 64, a, e, qr, scale, sc);
    else if (hd == 128)
        query_scores(kr, 128, 128, a, e, qr, scale, sc);
    else
        query_scores(kr, hd, hd & ~31, a, e, qr, scale, sc);
}

/* All ones in lane q where a[q] <= j < e[q]: the queries of the group that see key j. */
static inline __m256 seeing(__m256i a, __m256i e, int j)
{
    const __m256i jv = _mm256_set1_epi32(j);
    return _mm256_castsi256_ps(
        _mm256_andnot_si256(_mm256_cmpgt_epi32(a, jv), _mm256_cmpgt_epi32(e, jv)));
}

/* The group's walk over its scores, the queries as lanes, each lane taking its own keys in
 * order: which keys raise the running maximum, each key's rescale and weight (one libm expf
 * of attn.h's argument, all of them called in one loop, off every dependency chain), and the
 * sum, S = fma(S, rescale, weight). */
static void weights(struct attn_group *g)
{
    int lo = ATTN_KEY_TILE, hi = 0;
    float mx[ATTN_GROUP_Q], sum[ATTN_GROUP_Q];
    int a[ATTN_GROUP_Q], e[ATTN_GROUP_Q];
    for (int q = 0; q < ATTN_GROUP_Q; q++) {
        const bool is_used = q < g->n;
        a[q] = is_used ? g->a[q] : 0;
        e[q] = is_used ? g->e[q] : 0;
        mx[q] = is_used ? g->st[q][0] : 0.0f;
        sum[q] = is_used ? g->st[q][1] : 0.0f;
        lo = is_used && a[q] < lo ? a[q] : lo;
        hi = is_used && e[q] > hi ? e[q] : hi;
    }
    const __m256i av = _mm256_loadu_si256((const __m256i *)a);
    const __m256i ev = _mm256_loadu_si256((const __m256i *)e);
    __m256 m8 = _mm256_loadu_ps(mx);
    for (int j = lo; j < hi; j++) {
        const __m256 x = _mm256_loadu_ps(g->sc[j]);
        const __m256 up = _mm256_and_ps(seeing(av, ev, j), _mm256_cmp_ps(x, m8, _CMP_GT_OQ));
        _mm256_storeu_ps(g->arg[j],
                         _mm256_blendv_ps(_mm256_sub_ps(x, m8), _mm256_sub_ps(m8, x), up));
        m8 = _mm256_blendv_ps(m8, x, up);
        g->raise[j] = (uint8_t)_mm256_movemask_ps(up);
    }
    for (int q = 0; q < g->n; q++)
        for (int j = g->a[q]; j < g->e[q]; j++)
            g->arg[j][q] = expf(g->arg[j][q]); // 0 for a query's first key ever
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 s8 = _mm256_loadu_ps(sum); // after the calls, which clobber every vector register
    for (int j = lo; j < hi; j++) {
        const int up = g->raise[j];
        const __m256 upv = _mm256_castsi256_ps(_mm256_cmpgt_epi32(
            _mm256_and_si256(_mm256_set1_epi32(up), _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128)),
            _mm256_setzero_si256()));
        const __m256 x = _mm256_loadu_ps(g->arg[j]);
        const __m256 ms = _mm256_blendv_ps(one, x, upv), w = _mm256_blendv_ps(x, one, upv);
        s8 = _mm256_blendv_ps(s8, _mm256_fmadd_ps(s8, ms, w), seeing(av, ev, j));
        _mm256_storeu_ps(g->ms[j], ms);
        _mm256_storeu_ps(g->w[j], w);
    }
    _mm256_storeu_ps(mx, m8);
    _mm256_storeu_ps(sum, s8);
    for (int q = 0; q < g->n; q++) {
        g->st[q][0] = mx[q];
        g->st[q][1] = sum[q];
    }
}

/* nv registers of floats from p, the last through the lane mask ml when is_tail. */
static inline __attribute__((always_inline)) __m256 load8(const float *p, int c, int nv,
                                                          bool is_tail, __m256i ml)
{
    return is_tail && c == nv - 1 ? _mm256_maskload_ps(p + 8 * c, ml) : _mm256_loadu_ps(p + 8 * c);
}

/* Keys [x, y) for the nq queries qs[] of the group, dimensions [d0, d0 + 8 * nv) (the last
 * register through ml when is_tail): per key, the rescale when one of them raises, then
 * acc = half(fma(v, w, acc)). nq, nv and is_tail are constants where inlined. Between keys
 * the accumulators are kept as their half bits in memory (h: exact, they are half values),
 * so each step reads them with the memory form of the half -> float conversion, whose second
 * micro-op is a load rather than a shuffle. */
static inline __attribute__((always_inline)) void walk(const struct attn_group *g, const int *qs,
                                                       int nq, int nv, bool is_tail, __m256i ml,
                                                       const float *vr, int hd, int d0, int x,
                                                       int y)
{
    int qv[WALK_Q];
    unsigned mine = 0; // the walking queries' bits
    for (int i = 0; i < nq; i++) {
        qv[i] = qs[i];
        mine |= 1u << qs[i];
    }
    __m128i h[WALK_Q][4];
    for (int i = 0; i < nq; i++)
        for (int c = 0; c < nv; c++)
            h[i][c] = _mm256_cvtps_ph(load8(g->acc[qv[i]] + d0, c, nv, is_tail, ml), ROUND_NEAREST);
    for (int j = x; j < y; j++) {
        if (g->raise[j] & mine)
            for (int i = 0; i < nq; i++) { // by 1 where query i does not raise
                const __m256 r = _mm256_set1_ps(g->ms[j][qv[i]]);
                for (int c = 0; c < nv; c++)
                    h[i][c] =
                        _mm256_cvtps_ph(_mm256_mul_ps(_mm256_cvtph_ps(h[i][c]), r), ROUND_NEAREST);
            }
        __m256 v[4];
        for (int c = 0; c < nv; c++)
            v[c] = load8(vr + (size_t)j * hd + d0, c, nv, is_tail, ml);
        for (int i = 0; i < nq; i++) {
            const __m256 w = _mm256_set1_ps(g->w[j][qv[i]]);
            for (int c = 0; c < nv; c++)
                h[i][c] = _mm256_cvtps_ph(_mm256_fmadd_ps(v[c], w, _mm256_cvtph_ps(h[i][c])),
                                          ROUND_NEAREST);
        }
        __asm__ volatile("" : "+m"(h)); // keeps h in memory (otherwise it lives in registers)
    }
    for (int i = 0; i < nq; i++)
        for (int c = 0; c < nv; c++) {
            float *p = g->acc[qv[i]] + d0 + 8 * c;
            if (is_tail && c == nv - 1)
                _mm256_maskstore_ps(p, ml, _mm256_cvtph_ps(h[i][c]));
            else
                _mm256_storeu_ps(p, _mm256_cvtph_ps(h[i][c]));
        }
}

/* walk with nq and the width constants: 32 dimensions (four registers) or a masked 8. A flat
 * dispatch switch. */
static void walk_n(const struct attn_group *g, const int *qs, int nq, bool is_wide, __m256i ml,
                   const float *vr, int hd, int d0, int x, int y)
{
    switch (nq * 2 + (is_wide ? 1 : 0)) {
    case 2:
        walk(g, qs, 1, 1, true, ml, vr, hd, d0, x, y);
        break;
    case 3:
        walk(g, qs, 1, 4, false, ml, vr, hd, d0, x, y);
        break;
    case 4:
        walk(g, qs, 2, 1, true, ml, vr, hd, d0, x, y);
        break;
    case 5:
        walk(g, qs, 2, 4, false, ml, vr, hd, d0, x, y);
        break;
    case 6:
        walk(g, qs, 3, 1, true, ml, vr, hd, d0, x, y);
        break;
    case 7:
        walk(g, qs, 3, 4, false, ml, vr, hd, d0, x, y);
        break;
    case 8:
        walk(g, qs, 4, 1, true, ml, vr, hd, d0, x, y);
        break;
    default:
        walk(g, qs, 4, 4, false, ml, vr, hd, d0, x, y);
        break;
    }
}

/* The group's accumulators over the tile's values. Between consecutive span ends the set of
 * queries that see the keys is fixed; each such run of keys is walked by those queries
 * together, WALK_Q at a time (each query still takes its own keys in order). */
static void accumulate(const struct attn_group *g, const float *vr, int hd)
{
    int cut[2 * ATTN_GROUP_Q];
    const int n_cut = attn_span_cuts(g->a, g->e, g->n, cut);
    const __m256i all = _mm256_set1_epi32(-1);
    for (int c = 0; c + 1 < n_cut; c++) {
        const int x = cut[c], y = cut[c + 1];
        int qs[ATTN_GROUP_Q];
        const int nq = attn_run_queries(g->a, g->e, g->n, x, y, qs);
        for (int i = 0; i < nq; i += WALK_Q) {
            const int nw = nq - i < WALK_Q ? nq - i : WALK_Q;
            int d = 0;
            for (; d + 32 <= hd; d += 32)
                walk_n(g, qs + i, nw, true, all, vr, hd, d, x, y);
            for (; d < hd; d += 8)
                walk_n(g, qs + i, nw, false, lanes_below(hd - d), vr, hd, d, x, y);
        }
    }
}

static const struct attn_single_steps steps = {
    .scores = scores,
    .weights = weights,
    .accumulate = accumulate,
};

void attn_single_tile_avx2(const struct attn_block *b, const float *kr, const float *vr, int k0,
                           int n, float state[][2])
{
    attn_single_run(&steps, b, kr, vr, k0, n, state);
}

#else // built without the ISA flags: never called

void attn_single_tile_avx2(const struct attn_block *b, const float *kr, const float *vr, int k0,
                           int n, float state[][2])
{
    (void)b, (void)kr, (void)vr, (void)k0, (void)n, (void)state;
}

#endif
