/* Tensor element types and their kernels: the block layouts of the GGUF ecosystem (type ids
 * are the on-disk ggml ids), dequantize/quantize, and dot products of a weight row against an
 * activation row already converted to the type's dot format. Each kernel has a scalar _ref
 * version; AVX2 variants are selected once by quant_init(). */
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
    QUANT_BF16 = 30,
    QUANT_TYPE_MAX = 40, // exclusive upper bound of ids this table knows
};

/* x: n elements of the type; y: n floats. n is a multiple of block_len. */
typedef void (*quant_to_float_fn)(const void *x, float *y, int64_t n);
/* x: n floats; y: n elements of the type. n is a multiple of block_len. */
typedef void (*quant_from_float_fn)(const float *x, void *y, int64_t n);
/* *s = dot(x, y) over n elements; x in the weight type, y in its dot_type. */
typedef void (*quant_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

#define QUANT_TILE_MAX 4 // largest n_rows and n_cols a tile kernel accepts

/* One tile of a matrix product: s[c * s_stride + r] = dot(row r of x, row c of y) for
 * r < n_rows, c < n_cols. Rows of x (weight type) are x_stride bytes apart, rows of y (dot type)
 * y_stride bytes apart. Each weight block is loaded once for all n_cols activation rows. */
struct quant_tile {
    int64_t n;       // elements per row, a multiple of block_len
    const void *x;   // first weight row
    size_t x_stride; // bytes between weight rows
    const void *y;   // first activation row
    size_t y_stride; // bytes between activation rows
    float *s;        // output; element (r, c) at s[c * s_stride + r]
    size_t s_stride; // floats between output rows (one output row per activation row)
    int n_rows;      // 1..QUANT_TILE_MAX weight rows
    int n_cols;      // 1..QUANT_TILE_MAX activation rows
    int order;       // QUANT_ORDER_*: how partial sums are combined (0: the default)
    bool is_stream;  // first pass over these weight rows: prefetch the next tile's rows
                     // (always done when n_cols == 1); the result does not depend on it
};

/* Summation orders, mirroring the kernels the reference's x86 (AVX2) build runs for a product,
 * so that results agree bit for bit (the AVX2 kernels; the scalar references sum in element
 * order and ignore this):
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
 * matmul_run picks the order from the product's type and shape. */
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
    quant_vec_dot_fn vec_dot;           // NULL for activation-only types (Q8_K, Q8_1)
    quant_vec_dot_tile_fn vec_dot_tile; // NULL: loop vec_dot; else equal to it bit for bit
};

/* Selects SIMD variants for this CPU. Thread-safe: the first call does the work and any
 * concurrent or later call returns once it is done. Call it before using the table (until
 * then quant_traits_of gives the scalar references). LLAMAPI_NO_SIMD=1 in the environment
 * forces the scalar references; LLAMAPI_NO_VNNI=1 keeps AVX2 but skips the AVX-VNNI dots
 * (which give the same bits). */
void quant_init(void);

/* Traits of a type, or NULL for an unknown or unsupported id. Thread-safe after quant_init. */
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
 * quant_init selected it (same bytes either way). Thread-safe; allocates nothing. */
void quant_q8_0_activations(const float *x, void *y, int64_t n);

/* The same for Q8_1 (the activations of Q4_1 / Q5_1 weights): quants as
 * quant_q8_0_activations, d = amax / 127 and s = d * (sum of the quants), both stored as half. */
void quant_q8_1_activations(const float *x, void *y, int64_t n);

/* True when the running CPU has AVX2+FMA+F16C and the SIMD variants are in use. */
bool quant_using_avx2(void);

/* True when the kernels in use compute the AVX2 kernels' bits for the float and 32-element
 * formats: the AVX2 sets on x86, the NEON sets on aarch64 (not the scalar references, which
 * sum in element order). The strict goldens hold exactly then. */
bool quant_follows_avx2(void);

enum quant_simd {
    QUANT_SIMD_SCALAR = 0,    // the _ref kernels
    QUANT_SIMD_AVX2 = 1,      // AVX2 + FMA + F16C
    QUANT_SIMD_AVX2_VNNI = 2, // the AVX2 set with AVX-VNNI dots for the 32-element blocks
    // aarch64 (engine/quants/arm/), chosen by getauxval and LLAMAPI_ISA=scalar|neon|dotprod|i8mm
    QUANT_SIMD_NEON = 16,         // ARMv8.0 Advanced SIMD
    QUANT_SIMD_NEON_DOTPROD = 17, // + sdot for the integer dots
    QUANT_SIMD_NEON_I8MM = 18,    // + smmla tiles for the 32-element formats
};

/* Traits of a type in one kernel set, whatever quant_init chose (for tests and benchmarks
 * comparing sets), or NULL when the type is unknown or this CPU cannot run the set. Call
 * after quant_init. */
const struct quant_traits *quant_traits_simd(uint32_t type, enum quant_simd simd);

/* "scalar", "avx2", "avx2+vnni", "neon", "neon+dotprod" or "neon+i8mm": the kernel set quant_init chose (static string, for logs).
 * Cannot fail. */
const char *quant_simd_name(void);

#endif
