/* Matrix products of a quantized weight matrix with a batch of activation rows, split by weight
 * rows across the caller's threads. The activations are first converted to the weight type's
 * dot format (matmul_quantize_input), then matmul_run computes y = x * W^T. Kernels come from
 * engine/quants; this module only tiles and splits. */
#ifndef ENGINE_MATMUL_H
#define ENGINE_MATMUL_H

#include <stddef.h>
#include <stdint.h>

/* Which summation order a product uses (matmul_order). The reference picks the order of a
 * float-weight product from the number of tokens in the step; the first two rules fix it per
 * token instead, so a token's outputs never depend on the tokens beside it. */
enum matmul_rule {
    MATMUL_RULE_PROMPT = 0, // the reference's order for a step of several tokens, for any n_tok
    MATMUL_RULE_SAMPLED,    // the reference's order for a single token, for any n_tok
    MATMUL_RULE_REFERENCE,  // as the reference picks: SAMPLED's for one token, else PROMPT's
                            // (depends on n_tok: not batch-invariant)
};

/* One product. Filled by the caller; borrowed by matmul_run. */
struct matmul_args {
    const void *w;         // (n_out, n_in) weights of type w_type, rows contiguous
    uint32_t w_type;       // enum quant_type with a vec_dot
    int64_t n_in;          // elements per weight row, a multiple of the type's block length
    int64_t n_out;         // weight rows = outputs per token
    const void *x;         // (n_tok) activation rows in quant_traits_of(w_type)->dot_type
    size_t x_row_bytes;    // bytes between activation rows (>= matmul_input_row_bytes)
    int64_t n_tok;         // activation rows (tokens)
    float *y;              // (n_tok, n_out) floats, row-major per token
    enum matmul_rule rule; // zero: MATMUL_RULE_PROMPT
};

/* Computes the rows of y owned by thread ith of nth: weight rows are split into nth contiguous
 * ranges (in groups of 4), and each range is computed for every token. Call it from nth threads
 * with ith = 0..nth-1 (or once with 0, 1); after all return, y is complete. No allocation, no
 * locks; the result is bit-identical run to run and for any nth. Batch invariance (rules
 * PROMPT and SAMPLED): output (t, r) depends only on weight row r, activation row t and the
 * rule, never on n_tok, the tile a kernel computed it in or the thread that ran it, so a token
 * gets the same bits alone or stacked with any others. Arguments are trusted (the caller validated
 * shapes against the model): an unsupported w_type or a bad shape computes nothing. Cannot
 * fail. */
void matmul_run(const struct matmul_args *a, int ith, int nth);

/* Converts n_tok rows of n_in floats (row-major, contiguous) to dot_type rows of out_row_bytes
 * each in out; thread ith of nth converts its share of the rows. ERR_OK, or ERR_INVALID when
 * dot_type cannot be quantized to, n_in is not a multiple of its block length, or out_row_bytes
 * is smaller than a row. Thread-safe for disjoint ith; no allocation. */
int matmul_quantize_input(const float *x, int64_t n_tok, int64_t n_in, uint32_t dot_type, void *out,
                          size_t out_row_bytes, int ith, int nth);

/* The summation order (QUANT_ORDER_* in engine/quants/quants.h) matmul_run uses for a product
 * of this weight type and shape under rule; every tile of the product is computed in it. The
 * orders are those of the kernels the reference's x86 build runs, so results can agree with
 * it bit for bit: for float weights its single-row dot (SAMPLED, or one token under REFERENCE)
 * or its batched kernel (PROMPT, or several tokens under REFERENCE) where the shape allows it
 * (BF16 weights only with the vdpbf16ps kernels, whose activations are BF16 as the reference's);
 * Q4_0 with a multiple of 8 rows its interleaved kernels under every rule. Only REFERENCE
 * looks at n_tok. Cannot fail. */
int matmul_order(uint32_t w_type, int64_t n_in, int64_t n_out, int64_t n_tok,
                 enum matmul_rule rule);

/* Bytes of one activation row of n_in elements in the dot type of w_type; 0 when w_type has no
 * vec_dot or n_in does not fit its block length. Cannot fail. */
size_t matmul_input_row_bytes(uint32_t w_type, int64_t n_in);

#endif
