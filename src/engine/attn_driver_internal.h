/* The tiled driver and the single-pass query-group loop of attn.h, written once for every
 * variant over the variant's own steps (how a tile is converted and stepped through, how a
 * group's scores, weights and accumulators are computed: the parts whose instructions
 * differ). They are static inline so that each variant's file compiles them with its own
 * flags and its steps, a constant table, become direct calls: as separately compiled
 * functions calling through the table they measured 1-4% slower (bench_ops). Not for use
 * outside the attention module. */
#ifndef ENGINE_ATTN_DRIVER_INTERNAL_H
#define ENGINE_ATTN_DRIVER_INTERNAL_H

#include "engine/attn.h"
#include "engine/attn_internal.h"
#include "engine/ops.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* A variant's steps of the tiled driver, one tile of positions [k0, k0 + n) at a time. */
struct attn_tiled_steps {
    /* The single-pass arithmetic: keys and values into F32 rows kr and vr (row j: position
     * k0 + j, head_dim floats), then every query that sees them steps through them, its
     * b->out row the half accumulator and state[i] its running maximum and sum. */
    void (*convert_rows)(const struct attn_block *b, int k0, int n, float *kr, float *vr);
    void (*single_tile)(const struct attn_block *b, const float *kr, const float *vr, int k0, int n,
                        float state[][2]);
    /* The tile-softmax arithmetic: keys and values into the variant's tile layout kt, vt
     * (room for ATTN_KEY_TILE * head_dim floats each), then every query steps through it. */
    void (*convert_tile)(const struct attn_block *b, int k0, int n, float *kt, float *vt);
    void (*tile_step)(const struct attn_block *b, const float *kt, const float *vt, int k0, int n,
                      float state[][2]);
};

#define ATTN_GROUP_Q 8 // queries whose single-pass maximum and sum run together (as lanes)

/* Up to ATTN_GROUP_Q queries of a block stepping through one tile in the single-pass
 * arithmetic. Per-key arrays are indexed [key of the tile][query of the group], so a key's
 * values for the group are one register (two on NEON). */
struct attn_group {
    int n;                                  // queries in the group
    int a[ATTN_GROUP_Q], e[ATTN_GROUP_Q];   // each one's keys of the tile, [a, e)
    float *acc[ATTN_GROUP_Q];               // its half accumulator (the out row)
    float *st[ATTN_GROUP_Q];                // its running maximum and sum
    float sc[ATTN_KEY_TILE][ATTN_GROUP_Q];  // the key's score
    uint8_t raise[ATTN_KEY_TILE];           // bit q: the key raises query q's maximum
    float arg[ATTN_KEY_TILE][ATTN_GROUP_Q]; // the argument of the key's one expf, then its value
    float ms[ATTN_KEY_TILE][ATTN_GROUP_Q];  // the accumulator's rescale (1: no raise)
    float w[ATTN_KEY_TILE][ATTN_GROUP_Q];   // the value's weight (1: a raise)
};

/* A variant's steps of the single-pass group loop. */
struct attn_single_steps {
    /* Scores of one query (qr: rounded to half) for keys [a, e) of the rows kr into
     * sc[a..e), the 8-lane dot order of attn.h, times scale. */
    void (*scores)(const float *kr, int hd, int a, int e, const float *qr, float scale, float *sc);
    /* The group's running maxima and sums over its scores, and each key's rescale and
     * weight. */
    void (*weights)(struct attn_group *g);
    /* The group's accumulators over the tile's value rows vr. */
    void (*accumulate)(const struct attn_group *g, const float *vr, int hd);
};

static inline int attn_min_int(int a, int b)
{
    return a < b ? a : b;
}

/* attn_run with the given steps: each query's state and output zeroed, the block's tiles in
 * order, then the sink and the division by the sum. The tile buffers live on its stack.
 * Cannot fail. */
static inline void attn_tiled_run(const struct attn_tiled_steps *steps, const struct attn_block *b)
{
    const int hd = b->head_dim;
    // Tile buffers on the stack: 2 * 64 * head_dim floats used (256 KiB at the largest),
    // aligned to a cache line so no vector load of a row splits one (as a file compiled for
    // a vector width would align them itself).
    _Alignas(64) float kt[ATTN_KEY_TILE * ATTN_HEAD_DIM_MAX];
    _Alignas(64) float vt[ATTN_KEY_TILE * ATTN_HEAD_DIM_MAX];
    float state[ATTN_QUERIES_MAX][2]; // running maximum, running sum
    for (int i = 0; i < b->n_q; i++) {
        state[i][0] = -INFINITY;
        state[i][1] = 0.0f;
        memset(b->out[i], 0, sizeof(float) * (size_t)hd);
    }
    const bool is_tile = b->arith == ATTN_ARITH_TILE_SOFTMAX;
    int max_keys;
    for (int k0 = attn_first_tile(b, &max_keys); k0 < max_keys; k0 += ATTN_KEY_TILE) {
        const int n = attn_min_int(ATTN_KEY_TILE, max_keys - k0);
        if (is_tile) {
            steps->convert_tile(b, k0, n, kt, vt);
            steps->tile_step(b, kt, vt, k0, n, state);
        } else {
            steps->convert_rows(b, k0, n, kt, vt);
            steps->single_tile(b, kt, vt, k0, n, state);
        }
    }
    for (int i = 0; i < b->n_q; i++) {
        attn_apply_sink(b, i, b->out[i], state[i]);
        const float inv = state[i][1] == 0.0f ? 0.0f : 1.0f / state[i][1];
        for (int d = 0; d < hd; d++) // one rounding per element: any vector width's bits
            b->out[i][d] *= inv;
    }
}

/* Query i of b joins g with its keys [a, e) of the tile: its scores into the group's lanes. */
static inline void attn_group_join(const struct attn_single_steps *steps,
                                   const struct attn_block *b, int i, int a, int e, const float *kr,
                                   float state[][2], struct attn_group *g)
{
    const int hd = b->head_dim;
    if (g->n == 0) memset(g->sc, 0, sizeof g->sc); // lanes of keys a query does not see
    const int q = g->n++;
    g->a[q] = a;
    g->e[q] = e;
    g->acc[q] = b->out[i];
    g->st[q] = state[i];
    _Alignas(64) float qr[ATTN_HEAD_DIM_MAX]; // vector loads never split a cache line
    _Alignas(64) float sc[ATTN_KEY_TILE];
    memcpy(qr, b->q[i], sizeof(float) * (size_t)hd); // rounded to half, as attn.h says
    ops_get()->round_f16(hd, qr);
    steps->scores(kr, hd, a, e, qr, attn_dot_scale(b), sc);
    attn_cap_scores(b, sc, a, e);
    for (int j = a; j < e; j++)
        g->sc[j][q] = sc[j];
}

/* The single-pass tile step with the given steps: the block's queries that see keys
 * [k0, k0 + n), in block order, in groups of ATTN_GROUP_Q, each one's scores as it
 * joins, the weights and accumulators once the group is full or the block ends. Arguments as
 * struct attn_tiled_steps' single_tile. Cannot fail. */
static inline void attn_single_run(const struct attn_single_steps *steps,
                                   const struct attn_block *b, const float *kr, const float *vr,
                                   int k0, int n, float state[][2])
{
    _Alignas(64) struct attn_group g; // each key's lanes in one line (its rows are 32 bytes)
    g.n = 0;
    for (int i = 0; i < b->n_q; i++) {
        int a, e;
        if (!attn_span(b, i, k0, n, &a, &e)) continue;
        attn_group_join(steps, b, i, a, e, kr, state, &g);
        if (g.n == ATTN_GROUP_Q) {
            steps->weights(&g);
            steps->accumulate(&g, vr, b->head_dim);
            g.n = 0;
        }
    }
    if (g.n > 0) {
        steps->weights(&g);
        steps->accumulate(&g, vr, b->head_dim);
    }
}

#endif
