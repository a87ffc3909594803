/* Tiled attention over a sequence's F16 KV cache with an online softmax: keys are visited in
 * tiles of ATTN_KEY_TILE, converted to F32 once per block of queries and shared by them (the
 * heads of a GQA group and a run of prompt tokens); each query keeps a running maximum, sum
 * and value accumulator. No score matrix of queries x keys exists. Two arithmetics, each with
 * a scalar reference and AVX2, AVX-512 and NEON (engine/arm/attn_neon.h) variants that give
 * the same bits (kernels_init, engine/kernels.h, picks the variant):
 *
 * ATTN_ARITH_SINGLE_PASS (the default): the reference's single-pass kernel, which it runs for
 * decode steps and steps under 64 tokens. Per query the query is rounded to half, and per key
 * in order:
 *   s = dot(k, q) * scale, the dot as the reference's 8-lane F16 dot sums it: four FMA chains
 *       over each 32 dimensions, (c0 + c2) + (c1 + c3), high half onto low, two horizontal
 *       adds, the last n mod 32 products added in double
 *   if s > M: acc = half(acc * e^(M - s)), M = s, w = 1; else w = e^(s - M) (libm expf)
 *   acc = half(acc + v * w) fused; S = S * (the rescale or 1) + w fused
 * and at the end out = acc * (1 / S). Keys are taken one by one, so tiles change nothing but
 * memory traffic.
 *
 * ATTN_ARITH_TILE_SOFTMAX: the reference's tiled kernel, which it runs for steps of 64 tokens
 * or more. Per query (F32) and tile of 64 keys starting at key 0:
 *   s_j = (one FMA chain from 0 over the dimensions in order of k_j[d] * q[d]) * scale
 *   M' = max(M, max_j s_j); when M' > M: acc *= e^(M - M') (libm expf), S *= the same
 *   p_j = e^(s_j - M') with the polynomial exponential (ops_expf_poly); groups of 8 keys
 *         from the tile start summed as ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)) in
 *         float, the groups added in double, S = float(S + that)
 *   acc[d] = one FMA chain over the tile's keys in order: acc[d] + v_j[d] * p_j (F32)
 * and at the end out = acc * (1 / S).
 *
 * Layer features, the same in both arithmetics and every variant:
 *   window: query i sees positions key_lo[i]..n_keys[i]-1 only. Tiles still start at multiples
 *       of ATTN_KEY_TILE in absolute position (from the tile holding the block's smallest
 *       key_lo); within a tile a query takes only its own keys: the single-pass loop runs over
 *       them, the tile-softmax maximum, exponentials and value chain see them alone (its groups
 *       of 8 stay aligned to the tile start, the lanes outside the query's keys counting 0).
 *   ring: the cache holds position p in row p % ring (a sliding-window layer keeps only its
 *       window), so a tile's rows may wrap; rows of positions no query of the block sees may
 *       hold anything (they are converted but never used).
 *   soft-cap: s = softcap * tanhf(dot * (scale / softcap)), scale / softcap rounded once, in
 *       place of s = dot * scale; then the softmax as above.
 *   sink: after the last key, one more logit x with no value: when x > M, acc *= e^(M - x)
 *       (libm expf, F32, not rounded to half), M = x, w = 1, else w = e^(x - M); then
 *       S = fma(S, the rescale or 1, w) and the final out = acc * (1 / S).
 *
 * The invariance rule, for both: a query's output is a function of that query's row, the
 * keys and values it sees (positions key_lo..n_keys-1), its sink, the head geometry and the
 * arithmetic alone. Tiles start at absolute multiples of ATTN_KEY_TILE, so a query at
 * position p meets the same tiles whether it is a decode token alone or one row of a
 * 512-token prompt chunk, and the other queries of a block never change its arithmetic. */
#ifndef ENGINE_ATTN_H
#define ENGINE_ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ATTN_KEY_TILE     64  // keys per tile; part of the arithmetic (see above)
#define ATTN_QUERIES_MAX  64  // queries per block
#define ATTN_HEAD_DIM_MAX 512 // largest head_dim the kernels accept

enum attn_arith {
    ATTN_ARITH_SINGLE_PASS = 0,
    ATTN_ARITH_TILE_SOFTMAX = 1,
};

/* One block of queries against one key/value head. Filled by the caller; borrowed. */
struct attn_block {
    enum attn_arith arith;            // zero: ATTN_ARITH_SINGLE_PASS
    int head_dim;                     // 1..ATTN_HEAD_DIM_MAX
    float scale;                      // score scale, usually 1 / sqrt(head_dim)
    const uint16_t *k;                // key j (half bits) at k + j * kv_stride
    const uint16_t *v;                // value j at v + j * kv_stride
    size_t kv_stride;                 // elements between consecutive positions
    int n_q;                          // 1..ATTN_QUERIES_MAX
    int ring;                         // rows of a ring cache (position p in row p % ring), 0:
                                      // position p in row p
    float softcap;                    // scores become softcap * tanh(s / softcap), 0: none
    bool has_sinks;                   // sink[] holds one extra logit per query (its head's)
    const float *q[ATTN_QUERIES_MAX]; // query rows, head_dim floats each
    int key_lo[ATTN_QUERIES_MAX];     // first key position query i sees (a window), >= 0
    int n_keys[ATTN_QUERIES_MAX];     // keys query i sees: positions key_lo[i]..n_keys[i]-1,
                                      // n_keys[i] > key_lo[i]
    float sink[ATTN_QUERIES_MAX];     // query i's sink logit when has_sinks
    float *out[ATTN_QUERIES_MAX];     // output rows, head_dim floats each (used as the query's
                                      // accumulator; must not overlap another out or q row)
};

/* Computes every query of the block with the selected variant. Arguments are trusted (the
 * caller validated shapes). Thread-safe for disjoint outputs; no allocation (the tile buffers,
 * up to 2 * ATTN_KEY_TILE * head_dim floats, live on the stack). Cannot fail. */
void attn_run(const struct attn_block *b);

typedef void (*attn_run_fn)(const struct attn_block *b);

/* Makes run (name: "avx2", "avx512", "neon") the variant attn_run calls. Only kernels_init
 * calls it, once, before any kernel thread runs attention. Cannot fail. */
void attn_select(attn_run_fn run, const char *name);

/* "scalar", "avx2", "avx512" or "neon": the variant kernels_init chose (static string). Cannot
 * fail. */
const char *attn_variant_name(void);

/* The variants, for tests comparing them: the reference (attn_ref.c) and the x86 ones
 * (engine/x86/attn_avx2.c, attn_avx512.c). attn_run_avx2 may only be called when
 * attn_have_avx2() is true, attn_run_avx512 (engine/x86/attn_avx512.c) when
 * attn_have_avx512() is. */
void attn_run_ref(const struct attn_block *b);
void attn_run_avx2(const struct attn_block *b);
void attn_run_avx512(const struct attn_block *b);
bool attn_have_avx2(void);
bool attn_have_avx512(void);

#endif
