/* Tiled, row-split matrix products over the engine/quants kernels. A thread owns a contiguous
 * range of weight rows; within it a tile of a few rows x a few tokens keeps every loaded weight
 * block in registers for all the tile's tokens. */
#include "engine/matmul.h"
#include "engine/quants/quants.h"
#include "util/err.h"

#include <stdbool.h>

#define ROW_GROUP 4 // thread ranges start on multiples of this many rows

/* Tile shape for batches: weight rows x tokens (bounded by QUANT_TILE_MAX). 3x4 measured best
 * or equal-best for every type on a 4864x896 matrix (the quantized kernels are bound by
 * per-(row, token) arithmetic, so the shape matters little except for F16). A single token
 * uses ROW_GROUP x 1, streaming the weights once with 4 independent accumulator chains. */
#ifndef BATCH_TILE_ROWS
#define BATCH_TILE_ROWS 3
#endif
#ifndef BATCH_TILE_COLS
#define BATCH_TILE_COLS 4
#endif

#define ACT_CHUNK_BYTES (512 * 1024) // activation bytes per token chunk (L2 is 1-2 MiB)

static void run_tiles(const struct matmul_args *a, quant_vec_dot_tile_fn tile_fn, size_t w_row,
                      const int64_t rc[4], int64_t tile_rows, int64_t tile_cols);
static int reference_order(const struct matmul_args *a);

static int64_t min_i64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Rows [*r0, *r1) of n_rows owned by thread ith of nth. */
static void thread_range(int64_t n_rows, int64_t unit, int ith, int nth, int64_t *r0, int64_t *r1)
{
    int64_t n_units = (n_rows + unit - 1) / unit;
    *r0 = min_i64(n_units * ith / nth * unit, n_rows);
    *r1 = min_i64(n_units * (ith + 1) / nth * unit, n_rows);
}

static void run_untiled(const struct matmul_args *a, const struct quant_traits *tr, size_t w_row,
                        int64_t r0, int64_t r1)
{
    const uint8_t *w = a->w;
    const uint8_t *x = a->x;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < a->n_tok; t++)
            tr->vec_dot(a->n_in, &a->y[t * a->n_out + r], w + (size_t)r * w_row,
                        x + (size_t)t * a->x_row_bytes);
}

void matmul_run(const struct matmul_args *a, int ith, int nth)
{
    const struct quant_traits *tr = quant_traits_of(a->w_type);
    size_t w_row, x_row;
    if (!tr || (!tr->vec_dot && !tr->vec_dot_tile) || nth < 1 || ith < 0 || ith >= nth ||
        a->n_tok < 1 || quant_row_bytes(a->w_type, a->n_in, &w_row) != ERR_OK ||
        quant_row_bytes(tr->dot_type, a->n_in, &x_row) != ERR_OK || a->x_row_bytes < x_row)
        return;
    // An interleaved (repacked) type's tiles start on its groups of rows; a kernel set may
    // name its own tile shape.
    const int64_t unit = tr->rows_interleaved > 0 ? tr->rows_interleaved : ROW_GROUP;
    int64_t r0, r1;
    thread_range(a->n_out, unit, ith, nth, &r0, &r1);
    if (!tr->vec_dot_tile) {
        run_untiled(a, tr, w_row, r0, r1);
        return;
    }
    // The single-row float order keeps 4 accumulators per output: its batch tiles are 1 x 3.
    // Repacked types name their own tile (their rows come interleaved in groups).
    const bool is_vec = reference_order(a) == QUANT_ORDER_VEC;
    int64_t tile_rows = a->n_tok == 1 ? ROW_GROUP : is_vec ? 1 : BATCH_TILE_ROWS;
    int64_t tile_cols = a->n_tok == 1 ? 1 : is_vec ? 3 : BATCH_TILE_COLS;
    if (tr->tile_rows > 0) {
        tile_rows = tr->tile_rows;
        tile_cols = a->n_tok == 1 ? 1 : tr->tile_cols;
    }
    // Tokens go in chunks whose activations stay in L2 while every row tile of the range
    // passes over them; each chunk re-reads the thread's weights once.
    int64_t chunk = a->x_row_bytes == 0 // n_in == 0
                        ? a->n_tok
                        : (int64_t)(ACT_CHUNK_BYTES / a->x_row_bytes) / tile_cols * tile_cols;
    chunk = chunk < tile_cols ? tile_cols : chunk;
    for (int64_t c0 = 0; c0 < a->n_tok; c0 += chunk)
        run_tiles(a, tr->vec_dot_tile, w_row,
                  (int64_t[4]){r0, r1, c0, min_i64(c0 + chunk, a->n_tok)}, tile_rows, tile_cols);
}

/* The reference's orders (see QUANT_ORDER_*): for float weights its single-row dot for one
 * token or a shape its batched kernel refuses, else its batched kernel; for Q4_0 matrices with
 * a multiple of 8 rows its interleaved kernels, whatever the tokens. */
int matmul_order(uint32_t w_type, int64_t n_in, int64_t n_out, int64_t n_tok, enum matmul_rule rule)
{
    switch (w_type) {
    case QUANT_F32:
    case QUANT_F16: {
        const bool is_single =
            rule == MATMUL_RULE_SAMPLED || (rule == MATMUL_RULE_REFERENCE && n_tok < 2);
        return is_single || n_in % 8 != 0 || n_out % 4 != 0 ? QUANT_ORDER_VEC : QUANT_ORDER_LANES;
    }
    case QUANT_BF16: {
        // Only the vdpbf16ps kernels (BF16 activations) have the reference's two orders: its
        // batched product takes rows a multiple of 32 long and a multiple of 4 rows.
        const struct quant_traits *tr = quant_traits_of(QUANT_BF16);
        if (!tr || tr->dot_type != QUANT_BF16) return QUANT_ORDER_LANES;
        const bool is_single =
            rule == MATMUL_RULE_SAMPLED || (rule == MATMUL_RULE_REFERENCE && n_tok < 2);
        return is_single || n_in % 32 != 0 || n_out % 4 != 0 ? QUANT_ORDER_VEC : QUANT_ORDER_LANES;
    }
    case QUANT_Q4_0:
        return n_out % 8 == 0 ? QUANT_ORDER_BLOCKS : QUANT_ORDER_LANES;
    default:
        return QUANT_ORDER_LANES;
    }
}

static int reference_order(const struct matmul_args *a)
{
    return matmul_order(a->w_type, a->n_in, a->n_out, a->n_tok, a->rule);
}

/* Tiles over rows [rc[0], rc[1]) and tokens [rc[2], rc[3]). */
static void run_tiles(const struct matmul_args *a, quant_vec_dot_tile_fn tile_fn, size_t w_row,
                      const int64_t rc[4], int64_t tile_rows, int64_t tile_cols)
{
    const uint8_t *w = a->w;
    const uint8_t *x = a->x;
    const int order = reference_order(a);
    for (int64_t r = rc[0]; r < rc[1]; r += tile_rows) {
        for (int64_t c = rc[2]; c < rc[3]; c += tile_cols) {
            struct quant_tile tile = {
                .n = a->n_in,
                .x = w + (size_t)r * w_row,
                .x_stride = w_row,
                .y = x + (size_t)c * a->x_row_bytes,
                .y_stride = a->x_row_bytes,
                .s = a->y + c * a->n_out + r,
                .s_stride = (size_t)a->n_out,
                .n_rows = (int)min_i64(tile_rows, rc[1] - r),
                .n_cols = (int)min_i64(tile_cols, rc[3] - c),
                .order = order,
                // The first token tile streams the rows in (from DRAM for a small batch, where
                // without prefetch a pass is latency-bound: 2 tokens took 2.5x one token's
                // time); the others find them in L1.
                .is_stream = c == rc[2],
            };
            tile_fn(&tile);
        }
    }
}

int matmul_quantize_input(const float *x, int64_t n_tok, int64_t n_in, uint32_t dot_type, void *out,
                          size_t out_row_bytes, int ith, int nth)
{
    const struct quant_traits *tr = quant_traits_of(dot_type);
    size_t row;
    if (!tr || !tr->from_float || nth < 1 || ith < 0 || ith >= nth || n_tok < 0 ||
        quant_row_bytes(dot_type, n_in, &row) != ERR_OK || out_row_bytes < row)
        return ERR_INVALID;
    int64_t t0, t1;
    thread_range(n_tok, 1, ith, nth, &t0, &t1);
    // Q8_0 / Q8_1 activations are rounded as the reference's runtime rounds them (quants.h).
    quant_from_float_fn quantize = dot_type == QUANT_Q8_0   ? quant_q8_0_activations
                                   : dot_type == QUANT_Q8_1 ? quant_q8_1_activations
                                                            : tr->from_float;
    for (int64_t t = t0; t < t1; t++)
        quantize(x + t * n_in, (uint8_t *)out + (size_t)t * out_row_bytes, n_in);
    return ERR_OK;
}

size_t matmul_input_row_bytes(uint32_t w_type, int64_t n_in)
{
    const struct quant_traits *tr = quant_traits_of(w_type);
    size_t row;
    if (!tr || (!tr->vec_dot && !tr->vec_dot_tile) ||
        quant_row_bytes(tr->dot_type, n_in, &row) != ERR_OK)
        return 0;
    return row;
}
