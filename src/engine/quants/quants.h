/* Tensor element types and their kernels: the block layouts of the GGUF ecosystem (type ids
 * are the on-disk ggml ids), dequantize/quantize, and dot products of a weight row against an
 * activation row already converted to the type's dot format. Each kernel has a scalar _ref
 * version; SIMD variants (engine/quants/x86/: AVX2, AVX-512; engine/quants/arm/: NEON) are
 * selected once by kernels_init() (engine/kernels.h). Weights may be repacked at load into an
 * internal row-interleaved type (quant_repack) that only the matrix-product tiles read. */
#ifndef ENGINE_QUANTS_QUANTS_H
#define ENGINE_QUANTS_QUANTS_H

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

struct quant_traits {
    const char *name;                   // "q4_K" etc., as ggml spells it
    int64_t block_len;                  // elements per block
    size_t block_bytes;                 // bytes per block
    enum quant_type dot_type;           // format activations are converted to for vec_dot
    quant_to_float_fn to_float;         // never NULL for a supported type
    quant_from_float_fn from_float;     // NULL when quantizing to this type is not supported
    quant_vec_dot_fn vec_dot;           // NULL for activation-only and interleaved types
    quant_vec_dot_tile_fn vec_dot_tile; // NULL: loop vec_dot; else equal to it bit for bit
    int rows_interleaved; // 0, or 16 for a repacked type: the unit of rows a tile starts on
                          // (a group of that many rows takes that many row_bytes, in place)
    int tile_rows;        // batch tile shape matmul uses with this table (0: its default);
    int tile_cols;        // n_tok == 1 uses tile_rows x 1
};

/* Weights in a row-interleaved layout the active kernel set multiplies faster: the type
 * quant_repack converts a (n_out, n_in) matrix of type to, or type itself when there is none
 * for this type, shape or kernel set (then keep the weights as they are). Cannot fail. */
uint32_t quant_repack_type(uint32_t type, int64_t n_out, int64_t n_in);

/* Writes the (n_out, n_in) matrix src of type as quant_repack_type(type, n_out, n_in) into dst
 * (the same number of bytes, quant_row_bytes(type, n_in) * n_out; dst does not overlap src).
 * ERR_OK, or ERR_INVALID when that type is type itself. Thread-safe; allocates nothing. */
int quant_repack(uint32_t type, const void *src, void *dst, int64_t n_out, int64_t n_in);

/* Row `row` (0-based) of a matrix of n elements per row, in type or in a repacked type
 * quant_repack made from it, as floats: the file type's to_float of that row, the same bits
 * either way. ERR_OK, or ERR_INVALID for a type without a to_float, a bad n or a negative
 * row. The row must exist (trusted, as matmul's arguments). Thread-safe after kernels_init. */
int quant_get_row(uint32_t type, const void *matrix, int64_t row, int64_t n, float *out);

/* Traits of a type, or NULL for an unknown or unsupported id. Thread-safe after kernels_init. */
const struct quant_traits *quant_traits_of(uint32_t type);

/* The scalar-reference traits of a type (for tests comparing kernels), or NULL. */
const struct quant_traits *quant_traits_ref(uint32_t type);

/* Bytes of a row of n elements: ERR_OK and *out, ERR_INVALID when the type is unknown or n is
 * not a multiple of its block length, ERR_LIMIT on overflow. */
int quant_row_bytes(uint32_t type, int64_t n, size_t *out);

/* Quantizes n activations (a multiple of 32) to Q8_0 the way the reference's x86 runtime
 * quantizes activations: scale 127/amax and round half to even. from_float rounds half away
 * from zero with 1/d, as the reference writes weights into files; the two differ in the last
 * bit of some quants, which is enough to flip near-tied greedy choices. Uses AVX2 when
 * kernels_init selected it (same bytes either way). Thread-safe; allocates nothing. */
void quant_q8_0_activations(const float *x, void *y, int64_t n);

/* The same for Q8_1 (the activations of Q4_1 / Q5_1 weights): quants as
 * quant_q8_0_activations, d = amax / 127 and s = d * (sum of the quants), both stored as half. */
void quant_q8_1_activations(const float *x, void *y, int64_t n);

/* True when a SIMD set (AVX2 or AVX-512) is in use. */
bool quant_using_avx2(void);

/* True when the kernels in use compute the AVX2 kernels' bits for the float and 32-element
 * formats: the AVX2 sets on x86, the NEON sets on aarch64 (not the scalar references, which
 * sum in element order). The strict goldens hold exactly then. BF16 is the exception on
 * AVX-512 with AVX512_BF16, whose activations are BF16 (the reference's arithmetic). */
bool quant_follows_avx2(void);

enum quant_simd {
    QUANT_SIMD_SCALAR = 0,    // the _ref kernels
    QUANT_SIMD_AVX2 = 1,      // AVX2 + FMA + F16C
    QUANT_SIMD_AVX2_VNNI = 2, // the AVX2 set with AVX-VNNI dots for the 32-element blocks
    QUANT_SIMD_AVX512 = 3,    // AVX-512 F/BW/VL/DQ + VNNI, and the repacked Q8_0/Q4_0/Q5_0/Q4_K
    // aarch64 (engine/quants/arm/), chosen by getauxval and LLAMAPI_ISA=scalar|neon|dotprod|i8mm
    QUANT_SIMD_NEON = 16,         // ARMv8.0 Advanced SIMD
    QUANT_SIMD_NEON_DOTPROD = 17, // + sdot for the integer dots
    QUANT_SIMD_NEON_I8MM = 18,    // + smmla tiles for the 32-element formats
};

struct cpufeat_caps;

/* Fills the tables of every set the CPU runs (hw: engine/cpufeat.h's cpufeat_caps_hw) and
 * makes set's the active one (the scalar references stay when the CPU cannot run set). Only
 * kernels_init (engine/kernels.h) calls it, once, before any table reader exists; until then
 * quant_traits_of gives the scalar references. Cannot fail. */
void quant_select(const struct cpufeat_caps *hw, enum quant_simd set);

/* Traits of a type in one kernel set, whatever kernels_init chose (for tests and benchmarks
 * comparing sets), or NULL when the type is unknown or this CPU cannot run the set. Call
 * after kernels_init. */
const struct quant_traits *quant_traits_simd(uint32_t type, enum quant_simd simd);

/* The kernel set kernels_init chose (LLAMAPI_ISA, LLAMAPI_NO_SIMD, then LLAMAPI_NO_VNNI=1
 * keeps AVX2 without its AVX-VNNI dots; on aarch64 the NEON level). Cannot fail. */
enum quant_simd quant_simd_active(void);

/* "scalar", "avx2", "avx2+vnni", "avx512", "neon", "neon+dotprod" or "neon+i8mm": the kernel
 * set kernels_init chose (static string, for logs). Cannot fail. */
const char *quant_simd_name(void);

#endif
