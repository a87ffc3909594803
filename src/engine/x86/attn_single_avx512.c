/* The single-pass arithmetic of the tiled attention (attn.h) in AVX-512, bit-identical to
 * attn_run_ref. The arithmetic is one serial recurrence per query, so the work is arranged to
 * keep that chain short and run several of them at once, every operation of the reference
 * kept:
 *   scores: 16 keys at a time; each key's two 16-lane FMA chains (the reference's chains
 *       0|1 and 2|3) are added, then the reduction tree (lane l onto l + 8, l onto l + 4,
 *       then the pairs) runs for the 16 keys together through shuffles, the same lane pairs
 *       added as the one-key reduction, so no horizontal adds;
 *   exponentials: which keys raise the running maximum and each key's one expf argument
 *       follow from the scores alone, so the running maximum and the sum run for 8 queries
 *       at once (one lane each), and all their expf calls (libm, the same arguments) run in
 *       one loop before the accumulators, off every dependency chain;
 *   accumulator: up to 4 queries of the block walk the tile's values together, 64
 *       dimensions at a time, so their half-rounding latency chains (FMA, to half, back)
 *       overlap and each value row is loaded once for all of them; between keys they are
 *       kept as half bits, read back with the conversion's memory form (fewer micro-ops on
 *       the ports the walk is bound by). A key that raises one query's maximum rescales all
 *       of them, by 1 where it does not: the accumulator holds half values, so
 *       half(acc * 1) is acc.
 * Compiled with the AVX-512 flags; only called after attn_have_avx512(). */
#include "engine/x86/attn_single_x86.h"
#include "engine/attn_driver_internal.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* expf runs once per key and query: called through its GOT entry rather than the PLT stub
 * (same function, same bits; the kernel measured ~10% faster). */
extern float expf(float) __attribute__((noplt));
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include <immintrin.h>

#define ROUND_NEAREST _MM_FROUND_TO_NEAREST_INT // an immediate: clang wants a constant here

#define WALK_Q 4 // queries whose accumulators run together

static inline __mmask16 tail_mask(int left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* One key's chains over the first np (a multiple of 32) dimensions: the reference's chains
 * 0|1 and 2|3 as two registers, added (lanes 0-7: c0 + c2, lanes 8-15: c1 + c3). */
static inline __attribute__((always_inline)) __m512 key_chains(const float *k, const float *q,
                                                               int np)
{
    __m512 c01 = _mm512_setzero_ps(), c23 = _mm512_setzero_ps();
    for (int i = 0; i < np; i += 32) {
        c01 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), _mm512_loadu_ps(q + i), c01);
        c23 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16), _mm512_loadu_ps(q + i + 16), c23);
    }
    return _mm512_add_ps(c01, c23);
}

/* Two keys' chains x0, x1 -> lanes 0-7: x0[l] + x0[l + 8], lanes 8-15: the same of x1. */
static inline __m512 fold8(__m512 x0, __m512 x1)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(x0, x1, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* Two fold8 results (keys A|B, C|D) -> quarters A, B, C, D: lane l + lane l + 4, l < 4. */
static inline __m512 fold4(__m512 y0, __m512 y1)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Pairs within each quarter: [x0 h0 + h1, x0 h2 + h3, x1 h0 + h1, x1 h2 + h3]. */
static inline __m512 fold_pairs(__m512 x0, __m512 x1)
{
    return _mm512_add_ps(_mm512_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Scores of one query (qr: rounded to half) for keys [a, e) of the tile into sc[a..e): the
 * 8-lane dot order of attn.h, 16 keys per pass (rows past e - 1 repeat row e - 1). np is
 * head_dim rounded down to 32, a constant where the caller inlines it. */
static inline __attribute__((always_inline)) void
query_scores(const float *kr, int hd, int np, int a, int e, const float *qr, float scale, float *sc)
{
    // fold_pairs twice leaves key 4t + g in lane 4g + t.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int j0 = a; j0 < e; j0 += 16) {
        __m512 y[8], z[4];
        for (int p = 0; p < 8; p++) {
            const int j1 = j0 + 2 * p < e ? j0 + 2 * p : e - 1;
            const int j2 = j0 + 2 * p + 1 < e ? j0 + 2 * p + 1 : e - 1;
            y[p] = fold8(key_chains(kr + (size_t)j1 * hd, qr, np),
                         key_chains(kr + (size_t)j2 * hd, qr, np));
        }
        for (int p = 0; p < 4; p++)
            z[p] = fold4(y[2 * p], y[2 * p + 1]);
        const __m512 u = _mm512_permutexvar_ps(
            order, fold_pairs(fold_pairs(z[0], z[1]), fold_pairs(z[2], z[3])));
        const __mmask16 m = tail_mask(e - j0);
        if (np == hd) {
            _mm512_mask_storeu_ps(sc + j0, m, _mm512_mul_ps(u, vscale));
            continue;
        }
        float f[16];
        _mm512_storeu_ps(f, u);
        for (int t = 0; t < 16 && j0 + t < e; t++)
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

/* Bit q set where a[q] <= j < e[q]: the queries of the group that see key j. */
static inline __mmask8 seeing(__m256i a, __m256i e, int j)
{
    const __m256i jv = _mm256_set1_epi32(j);
    return _mm256_cmple_epi32_mask(a, jv) & _mm256_cmplt_epi32_mask(jv, e);
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
        const __mmask8 act = seeing(av, ev, j);
        const __m256 x = _mm256_loadu_ps(g->sc[j]);
        const __mmask8 up = _mm256_mask_cmp_ps_mask(act, x, m8, _CMP_GT_OQ); // s > M
        _mm256_storeu_ps(g->arg[j],
                         _mm256_mask_blend_ps(up, _mm256_sub_ps(x, m8), _mm256_sub_ps(m8, x)));
        m8 = _mm256_mask_mov_ps(m8, up, x);
        g->raise[j] = (uint8_t)up;
    }
    for (int q = 0; q < g->n; q++)
        for (int j = g->a[q]; j < g->e[q]; j++)
            g->arg[j][q] = expf(g->arg[j][q]); // 0 for a query's first key ever
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 s8 = _mm256_loadu_ps(sum); // after the calls, which clobber every vector register
    for (int j = lo; j < hi; j++) {
        const __mmask8 act = seeing(av, ev, j), up = g->raise[j];
        const __m256 x = _mm256_loadu_ps(g->arg[j]);
        const __m256 ms = _mm256_mask_blend_ps(up, one, x), w = _mm256_mask_blend_ps(up, x, one);
        s8 = _mm256_mask_mov_ps(s8, act, _mm256_fmadd_ps(s8, ms, w));
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

/* Keys [x, y) for the nq queries qs[] of the group, dimensions [d0, d0 + 16 * nv) (the last
 * register masked by ml): per key, the rescale when one of them raises, then
 * acc = half(fma(v, w, acc)). nq and nv are constants where inlined. Between keys the
 * accumulators are kept as their half bits in memory (h: exact, they are half values), so
 * each step reads them with the memory form of the half -> float conversion, whose second
 * micro-op is a load rather than a shuffle on the port the FMAs and the float -> half
 * conversions also need (the walk is bound by those ports: ~13% faster than registers). */
static inline __attribute__((always_inline)) void walk(const struct attn_group *g, const int *qs,
                                                       int nq, int nv, __mmask16 ml,
                                                       const float *vr, int hd, int d0, int x,
                                                       int y)
{
    int qv[WALK_Q];
    unsigned mine = 0; // the walking queries' bits
    for (int i = 0; i < nq; i++) {
        qv[i] = qs[i];
        mine |= 1u << qs[i];
    }
    __m256i h[WALK_Q][4];
    for (int i = 0; i < nq; i++)
        for (int c = 0; c < nv; c++)
            h[i][c] = _mm512_cvtps_ph(
                _mm512_maskz_loadu_ps(c == nv - 1 ? ml : 0xffff, g->acc[qv[i]] + d0 + 16 * c),
                ROUND_NEAREST);
    for (int j = x; j < y; j++) {
        if (g->raise[j] & mine)
            for (int i = 0; i < nq; i++) { // by 1 where query i does not raise
                const __m512 r = _mm512_set1_ps(g->ms[j][qv[i]]);
                for (int c = 0; c < nv; c++)
                    h[i][c] =
                        _mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtph_ps(h[i][c]), r), ROUND_NEAREST);
            }
        __m512 v[4];
        for (int c = 0; c < nv; c++)
            v[c] =
                _mm512_maskz_loadu_ps(c == nv - 1 ? ml : 0xffff, vr + (size_t)j * hd + d0 + 16 * c);
        for (int i = 0; i < nq; i++) {
            const __m512 w = _mm512_set1_ps(g->w[j][qv[i]]);
            for (int c = 0; c < nv; c++)
                h[i][c] = _mm512_cvtps_ph(_mm512_fmadd_ps(v[c], w, _mm512_cvtph_ps(h[i][c])),
                                          ROUND_NEAREST);
        }
        __asm__ volatile("" : "+m"(h)); // keeps h in memory (otherwise it lives in registers)
    }
    for (int i = 0; i < nq; i++)
        for (int c = 0; c < nv; c++)
            _mm512_mask_storeu_ps(g->acc[qv[i]] + d0 + 16 * c, c == nv - 1 ? ml : 0xffff,
                                  _mm512_cvtph_ps(h[i][c]));
}

/* walk with nq and nv constants: 64 dimensions (nv 4) or a masked 16 (nv 1). A flat dispatch
 * switch. */
static void walk_n(const struct attn_group *g, const int *qs, int nq, bool is_wide, __mmask16 ml,
                   const float *vr, int hd, int d0, int x, int y)
{
    switch (nq * 2 + (is_wide ? 1 : 0)) {
    case 2:
        walk(g, qs, 1, 1, ml, vr, hd, d0, x, y);
        break;
    case 3:
        walk(g, qs, 1, 4, ml, vr, hd, d0, x, y);
        break;
    case 4:
        walk(g, qs, 2, 1, ml, vr, hd, d0, x, y);
        break;
    case 5:
        walk(g, qs, 2, 4, ml, vr, hd, d0, x, y);
        break;
    case 6:
        walk(g, qs, 3, 1, ml, vr, hd, d0, x, y);
        break;
    case 7:
        walk(g, qs, 3, 4, ml, vr, hd, d0, x, y);
        break;
    case 8:
        walk(g, qs, 4, 1, ml, vr, hd, d0, x, y);
        break;
    default:
        walk(g, qs, 4, 4, ml, vr, hd, d0, x, y);
        break;
    }
}

/* The group's accumulators over the tile's values. Between consecutive span ends the set of
 * queries that see the keys is fixed; each such run of keys is walked by those queries
 * together (each query still takes its own keys in order). */
static void accumulate(const struct attn_group *g, const float *vr, int hd)
{
    int cut[2 * ATTN_GROUP_Q];
    const int n_cut = attn_span_cuts(g->a, g->e, g->n, cut);
    for (int c = 0; c + 1 < n_cut; c++) {
        const int x = cut[c], y = cut[c + 1];
        int qs[ATTN_GROUP_Q];
        const int nq = attn_run_queries(g->a, g->e, g->n, x, y, qs);
        if (nq == 0) continue;
        for (int i = 0; i < nq; i += WALK_Q) {
            const int nw = nq - i < WALK_Q ? nq - i : WALK_Q;
            int d = 0;
            for (; d + 64 <= hd; d += 64)
                walk_n(g, qs + i, nw, true, 0xffff, vr, hd, d, x, y);
            for (; d < hd; d += 16)
                walk_n(g, qs + i, nw, false, tail_mask(hd - d), vr, hd, d, x, y);
        }
    }
}

static const struct attn_single_steps steps = {
    .scores = scores,
    .weights = weights,
    .accumulate = accumulate,
};

void attn_single_tile_avx512(const struct attn_block *b, const float *kr, const float *vr, int k0,
                             int n, float state[][2])
{
    attn_single_run(&steps, b, kr, vr, k0, n, state);
}

#else // built without the ISA flags: never called

void attn_single_tile_avx512(const struct attn_block *b, const float *kr, const float *vr, int k0,
                             int n, float state[][2])
{
    (void)b, (void)kr, (void)vr, (void)k0, (void)n, (void)state;
}

#endif
