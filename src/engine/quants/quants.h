/* Tensor element types and their kernels: the block layouts of the GGUF ecosystem (type ids
 * are the on-disk ggml ids), dequantize/quantize, and dot products of a weight row against an
 * activation row already converted to the type's dot format. Each kernel has a scalar _ref
 * version; SIMD variants (engine/quants/x86/: AVX2, AVX-512; engine/quants/arm/: NEON) are
 * selected once by kernels_init() (engine/kernels.h). Weights may be repacked at load into an
 * internal row-interleaved type (quant_repack) that only the matrix-product tiles read. */
#ifndef ENGINE_QUANTS_QUANTS_H
#define ENGINE_QUANTS_QUANTS_H

#include "engine/quants/quant_types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
