/* Helpers every variant of the tiled attention (attn.c, x86/attn_*.c, arm/attn_neon.c) shares
 * for the layer features of attn.h: ring rows, the per-query key range within a tile, the
 * soft-cap and the sink. Scalar and small, so each variant keeps the reference's bits by
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
