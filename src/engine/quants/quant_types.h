/* The tensor type ids and the contract every weight-product kernel implements (the tile and
 * its summation orders), for the kernel files of every instruction set; quants.h adds the
 * tables that point at them. Declarations only. */
#ifndef ENGINE_QUANTS_QUANT_TYPES_H
#define ENGINE_QUANTS_QUANT_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum quant_type {
    QUANT_F32 = 0,
    QUANT_F16 = 1,
    QUANT_Q4_0 = 2,
    QUANT_Q4_1 = 3,
    QUANT_Q5_0 = 6,
    QUANT_Q5_1 = 7,
    QUANT_Q8_0 = 8,
    QUANT_Q8_1 = 9,
    QUANT_Q2_K = 10,
    QUANT_Q3_K = 11,
    QUANT_Q4_K = 12,
    QUANT_Q5_K = 13,
    QUANT_Q6_K = 14,
    QUANT_Q8_K = 15,
    QUANT_IQ4_NL = 20,
    QUANT_IQ4_XS = 23,
    QUANT_BF16 = 30,
    QUANT_MXFP4 = 39,
    // Internal types, never in a file (GGUF readers reject ids they do not know): weights
    // repacked at load, 16 rows interleaved per block (see quant_repack), and the activation
    // format their kernels read (Q8_0 quants with d and d * sum(quants) as floats).
    QUANT_Q8_0_R16 = 40,
    QUANT_Q4_0_R16 = 41,
    QUANT_Q8_0_S = 42,
    QUANT_Q5_0_R16 = 43,
    QUANT_Q4_K_R16 = 44,
    QUANT_Q6_K_R16 = 46,
    QUANT_TYPE_MAX = 48, // exclusive upper bound of ids this table knows
};

/* x: n elements of the type; y: n floats. n is a multiple of block_len. */
typedef void (*quant_to_float_fn)(const void *x, float *y, int64_t n);
/* x: n floats; y: n elements of the type. n is a multiple of block_len. */
typedef void (*quant_from_float_fn)(const float *x, void *y, int64_t n);
/* *s = dot(x, y) over n elements; x in the weight type, y in its dot_type. */
typedef void (*quant_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

#define QUANT_TILE_MAX      4 // largest n_rows and n_cols a tile kernel accepts (but see tile_rows)
#define QUANT_TILE_ROWS_MAX 64 // largest tile_rows any traits name
#define QUANT_TILE_COLS_MAX 48 // largest tile_cols any traits name

/* One tile of a matrix product: s[c * s_stride + r] = dot(row r of x, row c of y) for
 * r < n_rows, c < n_cols. Rows of x (weight type) are x_stride bytes apart, rows of y (dot type)
 * y_stride bytes apart. Each weight block is loaded once for all n_cols activation rows.
 *
 * The batch-invariance rule, which every kernel of every instruction set follows: within one
 * kernel set and one order, the value written for output (r, c) is a function of weight row r,
 * activation row c, n and order alone. It must not depend on n_rows, n_cols, is_stream, the
 * tile's place in the product, the other rows or columns of the tile, or the thread: each
 * output has its own accumulators, combined in a fixed sequence, and a kernel never switches
 * to another summation (wider integer accumulation across blocks, another lane split, another
 * reduction tree) because a tile is larger. So vec_dot equals the 1x1 tile and every tile
 * shape, bit for bit (test_quants checks each set the machine has), and since matmul picks
 * the order from the weights alone, a token's products are the same whether it is decoded
 * alone, stacked with other sequences' tokens, or computed in any chunk of its prompt. A
 * faster kernel that needs another summation is a new order (or a new kernel set used for
 * every shape), never a special case for big tiles. Different kernel sets (scalar, AVX2,
 * AVX-512) may sum differently from each other: invariance holds per set. */
struct quant_tile {
    int64_t n;       // elements per row, a multiple of block_len
    const void *x;   // first weight row
    size_t x_stride; // bytes between weight rows
    const void *y;   // first activation row
    size_t y_stride; // bytes between activation rows
    float *s;        // output; element (r, c) at s[c * s_stride + r]
    size_t s_stride; // floats between output rows (one output row per activation row)
    int n_rows;      // 1..QUANT_TILE_MAX weight rows, or up to the traits' tile_rows (for an
                     // interleaved type a multiple of rows_interleaved)
    int n_cols;      // 1..QUANT_TILE_MAX activation rows, or up to the traits' tile_cols
    int order;       // QUANT_ORDER_*: how partial sums are combined (0: the default)
    bool is_stream;  // first pass over these weight rows: prefetch the next tile's rows
                     // (always done when n_cols == 1); the result does not depend on it
};

/* Summation orders, mirroring the kernels the reference's x86 (AVX2) build runs for a product,
 * so that results can agree bit for bit (the AVX2 kernels; the scalar references sum in element
 * order and ignore this). The reference chooses among them by the number of tokens too;
 * matmul does only when asked to follow it (matmul_order), else by the weights alone:
 * - QUANT_ORDER_LANES (0): the default. Float weights: one 8-lane FMA chain per output, lanes
 *   added high half onto low, then pairs (the reference's batched product, used for two or
 *   more tokens when rows are a multiple of 8 long and there are a multiple of 4 rows).
 *   32-element blocks: the block's int8 products summed into 8 int32 lanes, each scaled by
 *   dx*dy into an 8-lane float FMA chain, added the same way at the end (its dot product).
 * - QUANT_ORDER_VEC, float weights: the reference's single-row dot - four 8-lane chains over
 *   each 32 elements, combined as (c0 + c2) + (c1 + c3), lanes high onto low then two
 *   horizontal adds, the remaining elements added one by one: for F32 weights in float,
 *   rounded products for all but the last (n mod 4), which are fused; for F16 in double.
 * - QUANT_ORDER_BLOCKS, Q4_0: one float per output, each block's exact integer dot converted
 *   and fused in as acc += idot * (dx*dy) (its kernels for Q4_0 matrices with a multiple of 8
 *   rows, which it stores interleaved by 8 rows).
 * matmul_run picks the order from the product's type and shape (matmul_order). */
#define QUANT_ORDER_LANES  0
#define QUANT_ORDER_VEC    1
#define QUANT_ORDER_BLOCKS 2
typedef void (*quant_vec_dot_tile_fn)(const struct quant_tile *t);

#endif
