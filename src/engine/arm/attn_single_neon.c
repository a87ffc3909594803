/* The single-pass arithmetic of the tiled attention (attn.h) in NEON, bit-identical to
 * attn_run_ref; the plan of x86/attn_single_avx512.c in 4-lane registers:
 *   scores: 4 keys at a time; each key's eight 4-lane FMA chains (the reference's chains as
 *       low and high halves) added as the reference adds them, high half onto low, then the
 *       pairs of the 4 keys together with two pairwise adds (the same lane pairs as the
 *       one-key reduction);
 *   exponentials: the running maximum and the sum for 8 queries at once (two 4-lane
 *       registers, one lane each), every expf call (libm, the same arguments) in one loop
 *       before the accumulators;
 *   accumulator: up to 4 queries walk the tile's values together, 16 dimensions at a time
 *       held in registers, so their half-rounding chains overlap; a key that raises one
 *       query's maximum rescales all of them, by 1 where it does not (half(acc * 1) is acc).
 * Every ARMv8-A core has Advanced SIMD; the half conversions round to nearest even (FPCR
 * default). */
#include "engine/arm/attn_single_neon.h"
#include "engine/attn_driver_internal.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"

#include <arm_neon.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define WALK_Q 4 // queries whose accumulators run together

static inline float32x4_t round_half4(float32x4_t x)
{
    return vcvt_f32_f16(vcvt_f16_f32(x));
}

static inline float round_half(float x)
{
    return ops_f16_to_f32(ops_f32_to_f16(x));
}

/* One key's reduction up to the last pairs over the first np (a multiple of 32) dimensions:
 * chains (c0 + c2) + (c1 + c3) in low and high halves, then high onto low. */
static inline __attribute__((always_inline)) float32x4_t key_chains(const float *k, const float *q,
                                                                    int np)
{
    float32x4_t c[4][2];
    for (int j = 0; j < 4; j++)
        c[j][0] = c[j][1] = vdupq_n_f32(0.0f);
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++)
                c[j][h] = vfmaq_f32(c[j][h], vld1q_f32(k + i + 8 * j + 4 * h),
                                    vld1q_f32(q + i + 8 * j + 4 * h));
    const float32x4_t lo = vaddq_f32(vaddq_f32(c[0][0], c[2][0]), vaddq_f32(c[1][0], c[3][0]));
    const float32x4_t hi = vaddq_f32(vaddq_f32(c[0][1], c[2][1]), vaddq_f32(c[1][1], c[3][1]));
    return vaddq_f32(lo, hi);
}

/* Scores of one query (qr: rounded to half) for keys [a, e) of the tile into sc[a..e): the
 * 8-lane dot order of attn.h, 4 keys per pass (rows past e - 1 repeat row e - 1). np is
 * head_dim rounded down to 32, a constant where the caller inlines it. */
static inline __attribute__((always_inline)) void
query_scores(const float *kr, int hd, int np, int a, int e, const float *qr, float scale, float *sc)
{
    for (int j0 = a; j0 < e; j0 += 4) {
        float32x4_t h[4];
        for (int t = 0; t < 4; t++) {
            const int j = j0 + t < e ? j0 + t : e - 1;
            h[t] = key_chains(kr + (size_t)j * hd, qr, np);
        }
        // [h0 + h1, h2 + h3] of each key, then their sum: the 4 keys in order.
        const float32x4_t u = vpaddq_f32(vpaddq_f32(h[0], h[1]), vpaddq_f32(h[2], h[3]));
        if (np == hd && e - j0 >= 4) {
            vst1q_f32(sc + j0, vmulq_n_f32(u, scale));
            continue;
        }
        float f[4];
        vst1q_f32(f, u);
        for (int t = 0; t < 4 && j0 + t < e; t++)
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

/* All ones in lane l where a[l] <= j < e[l]. */
static inline uint32x4_t seeing(int32x4_t a, int32x4_t e, int j)
{
    const int32x4_t jv = vdupq_n_s32(j);
    return vandq_u32(vcleq_s32(a, jv), vcltq_s32(jv, e));
}

/* The lanes of mask m as bits 0-3. */
static inline unsigned lane_bits(uint32x4_t m)
{
    static const uint32_t bit[4] = {1, 2, 4, 8};
    return vaddvq_u32(vandq_u32(m, vld1q_u32(bit)));
}

/* The group's walk over its scores, the queries as lanes (two registers of four), each lane
 * taking its own keys in order: which keys raise the running maximum, each key's rescale and
 * weight (one libm expf of attn.h's argument, all of them called in one loop, off every
 * dependency chain), and the sum, S = fma(S, rescale, weight). */
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
    const int32x4_t av[2] = {vld1q_s32(a), vld1q_s32(a + 4)};
    const int32x4_t ev[2] = {vld1q_s32(e), vld1q_s32(e + 4)};
    float32x4_t m4[2] = {vld1q_f32(mx), vld1q_f32(mx + 4)};
    for (int j = lo; j < hi; j++) {
        unsigned bits = 0;
        for (int h = 0; h < 2; h++) {
            const float32x4_t x = vld1q_f32(g->sc[j] + 4 * h);
            const uint32x4_t up = vandq_u32(seeing(av[h], ev[h], j), vcgtq_f32(x, m4[h]));
            vst1q_f32(g->arg[j] + 4 * h, vbslq_f32(up, vsubq_f32(m4[h], x), vsubq_f32(x, m4[h])));
            m4[h] = vbslq_f32(up, x, m4[h]);
            bits |= lane_bits(up) << (4 * h);
        }
        g->raise[j] = (uint8_t)bits;
    }
    vst1q_f32(mx, m4[0]);
    vst1q_f32(mx + 4, m4[1]);
    for (int q = 0; q < g->n; q++)
        for (int j = g->a[q]; j < g->e[q]; j++)
            g->arg[j][q] = expf(g->arg[j][q]); // 0 for a query's first key ever
    static const uint32_t bit[8] = {1, 2, 4, 8, 16, 32, 64, 128};
    const float32x4_t one = vdupq_n_f32(1.0f);
    float32x4_t s4[2] = {vld1q_f32(sum), vld1q_f32(sum + 4)};
    for (int j = lo; j < hi; j++) {
        const uint32x4_t raise = vdupq_n_u32(g->raise[j]);
        for (int h = 0; h < 2; h++) {
            const uint32x4_t up = vtstq_u32(raise, vld1q_u32(bit + 4 * h));
            const float32x4_t x = vld1q_f32(g->arg[j] + 4 * h);
            const float32x4_t ms = vbslq_f32(up, x, one), w = vbslq_f32(up, one, x);
            s4[h] = vbslq_f32(seeing(av[h], ev[h], j), vfmaq_f32(w, s4[h], ms), s4[h]);
            vst1q_f32(g->ms[j] + 4 * h, ms);
            vst1q_f32(g->w[j] + 4 * h, w);
        }
    }
    vst1q_f32(sum, s4[0]);
    vst1q_f32(sum + 4, s4[1]);
    for (int q = 0; q < g->n; q++) {
        g->st[q][0] = mx[q];
        g->st[q][1] = sum[q];
    }
}

/* One query's accumulator (or a value row's) registers over 16 dimensions, or over 4 in r0
 * alone; named fields rather than an array, so that they stay in registers across the walk. */
struct regs {
    float32x4_t r0, r1, r2, r3;
};

static inline __attribute__((always_inline)) struct regs regs_load(const float *p, int nv)
{
    struct regs x;
    x.r0 = vld1q_f32(p);
    x.r1 = nv > 1 ? vld1q_f32(p + 4) : x.r0;
    x.r2 = nv > 1 ? vld1q_f32(p + 8) : x.r0;
    x.r3 = nv > 1 ? vld1q_f32(p + 12) : x.r0;
    return x;
}

static inline __attribute__((always_inline)) void regs_store(struct regs x, float *p, int nv)
{
    vst1q_f32(p, x.r0);
    if (nv == 1) return;
    vst1q_f32(p + 4, x.r1);
    vst1q_f32(p + 8, x.r2);
    vst1q_f32(p + 12, x.r3);
}

/* acc = half(acc * ms) */
static inline __attribute__((always_inline)) struct regs acc_rescale(struct regs a, int nv,
                                                                     float ms)
{
    a.r0 = round_half4(vmulq_n_f32(a.r0, ms));
    if (nv == 1) return a;
    a.r1 = round_half4(vmulq_n_f32(a.r1, ms));
    a.r2 = round_half4(vmulq_n_f32(a.r2, ms));
    a.r3 = round_half4(vmulq_n_f32(a.r3, ms));
    return a;
}

/* acc = half(fma(v, w, acc)) */
static inline __attribute__((always_inline)) struct regs acc_add(struct regs a, struct regs v,
                                                                 int nv, float w)
{
    const float32x4_t r = vdupq_n_f32(w);
    a.r0 = round_half4(vfmaq_f32(a.r0, v.r0, r));
    if (nv == 1) return a;
    a.r1 = round_half4(vfmaq_f32(a.r1, v.r1, r));
    a.r2 = round_half4(vfmaq_f32(a.r2, v.r2, r));
    a.r3 = round_half4(vfmaq_f32(a.r3, v.r3, r));
    return a;
}

/* Keys [x, y) for the nq queries qs[] of the group, dimensions [d0, d0 + 4 * nv) (nv 1 or 4):
 * per key, the rescale when one of them raises, then acc = half(fma(v, w, acc)). nq and nv
 * are constants where inlined. */
static inline __attribute__((always_inline)) void walk(const struct attn_group *g, const int *qs,
                                                       int nq, int nv, const float *vr, int hd,
                                                       int d0, int x, int y)
{
    const int q0 = qs[0], q1 = nq > 1 ? qs[1] : 0, q2 = nq > 2 ? qs[2] : 0, q3 = nq > 3 ? qs[3] : 0;
    const unsigned mine = 1u << q0 | (nq > 1 ? 1u << q1 : 0) | (nq > 2 ? 1u << q2 : 0) |
                          (nq > 3 ? 1u << q3 : 0); // the walking queries' bits
    struct regs a0 = regs_load(g->acc[q0] + d0, nv), a1 = a0, a2 = a0, a3 = a0;
    if (nq > 1) a1 = regs_load(g->acc[q1] + d0, nv);
    if (nq > 2) a2 = regs_load(g->acc[q2] + d0, nv);
    if (nq > 3) a3 = regs_load(g->acc[q3] + d0, nv);
    for (int j = x; j < y; j++) {
        if (g->raise[j] & mine) {
            a0 = acc_rescale(a0, nv, g->ms[j][q0]);
            if (nq > 1) a1 = acc_rescale(a1, nv, g->ms[j][q1]);
            if (nq > 2) a2 = acc_rescale(a2, nv, g->ms[j][q2]);
            if (nq > 3) a3 = acc_rescale(a3, nv, g->ms[j][q3]);
        }
        const struct regs v = regs_load(vr + (size_t)j * hd + d0, nv);
        a0 = acc_add(a0, v, nv, g->w[j][q0]);
        if (nq > 1) a1 = acc_add(a1, v, nv, g->w[j][q1]);
        if (nq > 2) a2 = acc_add(a2, v, nv, g->w[j][q2]);
        if (nq > 3) a3 = acc_add(a3, v, nv, g->w[j][q3]);
    }
    regs_store(a0, g->acc[q0] + d0, nv);
    if (nq > 1) regs_store(a1, g->acc[q1] + d0, nv);
    if (nq > 2) regs_store(a2, g->acc[q2] + d0, nv);
    if (nq > 3) regs_store(a3, g->acc[q3] + d0, nv);
}

/* walk with nq and nv constants: 16 dimensions (nv 4) or 4 (nv 1). A flat dispatch switch. */
static void walk_n(const struct attn_group *g, const int *qs, int nq, bool is_wide, const float *vr,
                   int hd, int d0, int x, int y)
{
    switch (nq * 2 + (is_wide ? 1 : 0)) {
    case 2:
        walk(g, qs, 1, 1, vr, hd, d0, x, y);
        break;
    case 3:
        walk(g, qs, 1, 4, vr, hd, d0, x, y);
        break;
    case 4:
        walk(g, qs, 2, 1, vr, hd, d0, x, y);
        break;
    case 5:
        walk(g, qs, 2, 4, vr, hd, d0, x, y);
        break;
    case 6:
        walk(g, qs, 3, 1, vr, hd, d0, x, y);
        break;
    case 7:
        walk(g, qs, 3, 4, vr, hd, d0, x, y);
        break;
    case 8:
        walk(g, qs, 4, 1, vr, hd, d0, x, y);
        break;
    default:
        walk(g, qs, 4, 4, vr, hd, d0, x, y);
        break;
    }
}

/* The last hd mod 4 dimensions, from d0, of query q over keys [x, y), element by element. */
static void walk_tail(const struct attn_group *g, int q, const float *vr, int hd, int d0, int x,
                      int y)
{
    float *acc = g->acc[q];
    for (int j = x; j < y; j++) {
        const float *v = vr + (size_t)j * hd;
        for (int d = d0; d < hd; d++) {
            if (g->raise[j] >> q & 1) acc[d] = round_half(acc[d] * g->ms[j][q]);
            acc[d] = round_half(fmaf(v[d], g->w[j][q], acc[d]));
        }
    }
}

/* The group's accumulators over the tile's values. Between consecutive span ends the set of
 * queries that see the keys is fixed; each such run of keys is walked by those queries
 * together, WALK_Q at a time (each query still takes its own keys in order). */
static void accumulate(const struct attn_group *g, const float *vr, int hd)
{
    int cut[2 * ATTN_GROUP_Q];
    const int n_cut = attn_span_cuts(g->a, g->e, g->n, cut);
    for (int c = 0; c + 1 < n_cut; c++) {
        const int x = cut[c], y = cut[c + 1];
        int qs[ATTN_GROUP_Q];
        const int nq = attn_run_queries(g->a, g->e, g->n, x, y, qs);
        for (int i = 0; i < nq; i += WALK_Q) {
            const int nw = nq - i < WALK_Q ? nq - i : WALK_Q;
            int d = 0;
            for (; d + 16 <= hd; d += 16)
                walk_n(g, qs + i, nw, true, vr, hd, d, x, y);
            for (; d + 4 <= hd; d += 4)
                walk_n(g, qs + i, nw, false, vr, hd, d, x, y);
            if (d < hd)
                for (int t = i; t < i + nw; t++)
                    walk_tail(g, qs[t], vr, hd, d, x, y);
        }
    }
}

static const struct attn_single_steps steps = {
    .scores = scores,
    .weights = weights,
    .accumulate = accumulate,
};

void attn_single_tile_neon(const struct attn_block *b, const float *kr, const float *vr, int k0,
                           int n, float state[][2])
{
    attn_single_run(&steps, b, kr, vr, k0, n, state);
}
