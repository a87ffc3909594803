/* Matrix products of a quantized weight matrix with a batch of activation rows, split by weight
 * rows across the caller's threads. The activations are first converted to the weight type's
 * dot format (matmul_quantize_input), then matmul_run computes y = x * W^T. Kernels come from
 * engine/quants; this module only tiles and splits. */
#ifndef ENGINE_MATMUL_H
#define ENGINE_MATMUL_H

#include <stddef.h>
#include <stdint.h>

/* One product. Filled by the caller; borrowed by matmul_run. */
struct matmul_args {
    const void *w;      // (n_out, n_in) weights of type w_type, rows contiguous
    uint32_t w_type;    // enum quant_type with a vec_dot
    int64_t n_in;       // elements per weight row, a multiple of the type's block length
    int64_t n_out;      // weight rows = outputs per token
    const void *x;      // (n_tok) activation rows in quant_traits_of(w_type)->dot_type
    size_t x_row_bytes; // bytes between activation rows (>= matmul_input_row_bytes)
    int64_t n_tok;      // activation rows (tokens)
    float *y;           // (n_tok, n_out) floats, row-major per token
};

/* Computes the rows of y owned by thread ith of nth: weight rows are split into nth contiguous
 * ranges (in groups of 4), and each range is computed for every token. Call it from nth threads
 * with ith = 0..nth-1 (or once with 0, 1); after all return, y is complete. No allocation, no
 * locks; for a given nth the result is bit-identical run to run, and the AVX2 kernels give the
 * same bits for any nth. Arguments are trusted (the caller validated shapes against the model):
 * an unsupported w_type or a bad shape computes nothing. Cannot fail. */
void matmul_run(const struct matmul_args *a, int ith, int nth);

/* Converts n_tok rows of n_in floats (row-major, contiguous) to dot_type rows of out_row_bytes
 * each in out; thread ith of nth converts its share of the rows. ERR_OK, or ERR_INVALID when
 * dot_type cannot be quantized to, n_in is not a multiple of its block length, or out_row_bytes
 * is smaller than a row. Thread-safe for disjoint ith; no allocation. */
int matmul_quantize_input(const float *x, int64_t n_tok, int64_t n_in, uint32_t dot_type, void *out,
                          size_t out_row_bytes, int ith, int nth);

/* The summation order (QUANT_ORDER_* in engine/quants/quants.h) matmul_run uses for a product
 * of this weight type and shape: the order of the kernel the reference's x86 build runs for
 * it, so results agree with it bit for bit. Every tile of the product is computed in that
 * order. Cannot fail. */
int matmul_order(uint32_t w_type, int64_t n_in, int64_t n_out, int64_t n_tok);

/* Bytes of one activation row of n_in elements in the dot type of w_type; 0 when w_type has no
 * vec_dot or n_in does not fit its block length. Cannot fail. */
size_t matmul_input_row_bytes(uint32_t w_type, int64_t n_in);

#endif
