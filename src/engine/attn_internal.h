/* Helpers every variant of the tiled attention (attn_ref.c, x86/attn_*.c, arm/attn_neon.c)
 * shares for the layer features of attn.h: ring rows, the per-query key range within a tile,
 * the soft-cap and the sink. Scalar and small, so each variant keeps the reference's bits by
 * calling the same code. Not for use outside the attention module. */
#ifndef ENGINE_ATTN_INTERNAL_H
#define ENGINE_ATTN_INTERNAL_H

#include "engine/attn.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* Elements from b->k (or b->v) to the row of position pos. */
static inline size_t attn_key_offset(const struct attn_block *b, int pos)
{
    const int row = b->ring > 0 ? pos % b->ring : pos;
    return (size_t)row * b->kv_stride;
}

/* The multiplier of the dot product: scale, or scale / softcap when capped. */
static inline float attn_dot_scale(const struct attn_block *b)
{
    return b->softcap != 0.0f ? b->scale / b->softcap : b->scale;
}

/* The soft-cap of scores s[a..e) in place (no-op without one). */
static inline void attn_cap_scores(const struct attn_block *b, float *s, int a, int e)
{
    if (b->softcap == 0.0f) return;
    for (int j = a; j < e; j++)
        s[j] = b->softcap * tanhf(s[j]);
}

/* The first tile's start: the block's smallest key_lo rounded down to a tile; the key
 * count to cover in *n_end. */
static inline int attn_first_tile(const struct attn_block *b, int *n_end)
{
    int lo = b->key_lo[0], hi = b->n_keys[0];
    for (int i = 1; i < b->n_q; i++) {
        lo = b->key_lo[i] < lo ? b->key_lo[i] : lo;
        hi = b->n_keys[i] > hi ? b->n_keys[i] : hi;
    }
    *n_end = hi;
    return lo - lo % ATTN_KEY_TILE;
}

/* Query i's keys within the tile of positions [k0, k0 + n) as tile indices [*a, *e); false
 * when it sees none of them. */
static inline bool attn_span(const struct attn_block *b, int i, int k0, int n, int *a, int *e)
{
    const int lo = b->key_lo[i] - k0, hi = b->n_keys[i] - k0;
    if (hi <= 0 || lo >= n) return false;
    *a = lo > 0 ? lo : 0;
    *e = hi < n ? hi : n;
    return true;
}

/* A single-pass score finished from its SIMD part head (the reduction of the first np
 * dimensions): the last hd - np products of key k and query q added in double, as attn.h
 * says, times scale. */
static inline float attn_score_tail(const float *k, const float *q, int np, int hd, float head,
                                    float scale)
{
    double sum = (double)head;
    for (int i = np; i < hd; i++)
        sum += (double)(k[i] * q[i]);
    return (float)sum * scale;
}

/* The distinct ends of the n key spans [a[i], e[i]) in ascending order into cut (room for
 * 2 n); returns how many. Between consecutive cuts the same queries see every key, so a
 * group of queries can walk each such run of keys together. */
static inline int attn_span_cuts(const int *a, const int *e, int n, int *cut)
{
    int n_cut = 0;
    for (int i = 0; i < n; i++) {
        const int ends[2] = {a[i], e[i]};
        for (int t = 0; t < 2; t++) { // insertion into the sorted cuts, once per value
            int at = n_cut;
            while (at > 0 && cut[at - 1] > ends[t])
                at--;
            if (at > 0 && cut[at - 1] == ends[t]) continue;
            for (int u = n_cut; u > at; u--)
                cut[u] = cut[u - 1];
            cut[at] = ends[t];
            n_cut++;
        }
    }
    return n_cut;
}

/* The queries (indices into a, e) whose spans hold the whole run of keys [x, y), into qs;
 * returns how many. */
static inline int attn_run_queries(const int *a, const int *e, int n, int x, int y, int *qs)
{
    int nq = 0;
    for (int i = 0; i < n; i++)
        if (a[i] <= x && e[i] >= y) qs[nq++] = i;
    return nq;
}

/* Folds query i's sink logit into its accumulator out (head_dim floats) and running state
 * st (maximum, sum), as attn.h says; no-op without sinks. */
static inline void attn_apply_sink(const struct attn_block *b, int i, float *out, float st[2])
{
    if (!b->has_sinks) return;
    const float x = b->sink[i];
    float ms = 1.0f, w = 1.0f;
    if (x > st[0]) {
        ms = expf(st[0] - x);
        for (int d = 0; d < b->head_dim; d++)
            out[d] *= ms;
        st[0] = x;
    } else {
        w = expf(x - st[0]);
    }
    st[1] = fmaf(st[1], ms, w);
}

#endif
