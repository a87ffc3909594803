/* The forward pass's shared state and steps, for the files that build a layer's blocks
 * (model_forward.c, model_recr.c). Internal to engine/. */
#ifndef ENGINE_MODEL_FWD_H
#define ENGINE_MODEL_FWD_H

#include "engine/model/model_internal.h"
#include "engine/threadpool.h"

#include <stdbool.h>

/* Light steps run inline up to this many rows. */
#define LIGHT_ROWS_MAX 4

/* State of one decode call, shared read-only by the kernel threads of each step. */
struct fwd {
    struct engine_model *m;
    const struct engine_batch_item *items;
    int n_items;
    int n_tok;  // stacked tokens (rows of the activation matrices)
    int n_rows; // rows still computed (n_tok, or n_items after the last attention)
    const struct layer *L;
    int il; // layer index
    // step parameters
    const float *src;    // rows to normalize / quantize
    const float *norm_w; // RMSNorm weight, or NULL for plain quantization
    const float *add;    // rows added to the residual first, or NULL
    const struct qplan *plan;
    float *mm_y[QPLAN_MAX];
    const float *gate_bias, *up_bias; // job_swiglu_quant: added to gate / up rows first
    float *post_y;                    // job_post_block: rows changed in place
    const float *post_bias;           // added to them first, or NULL
    bool is_kept;                     // after keep_output_rows: the rows only produce outputs
};

/* Rows [*lo, *hi) of n that thread ith of nth takes. Cannot fail. */
void fwd_split(int n, int ith, int nth, int *lo, int *hi);

/* Step: quantize src (n_in = the plan's first weight's n_in) for f->plan. Split by rows. */
void fwd_job_quant(void *arg, int ith, int nth);

/* Step: gate = act(gate, up) (SwiGLU, GeGLU, gpt-oss's clamped form or ReLU^2, with f's gate
 * and up biases first), then quantize gate for f->plan's down matrix. Split by rows. */
void fwd_job_swiglu_quant(void *arg, int ith, int nth);

/* Every weight of plan times its slot into y0, y1, y2 (one per weight), over f->n_rows rows. */
void fwd_run_matmul_group(struct threadpool *tp, struct fwd *f, const struct qplan *plan, float *y0,
                          float *y1, float *y2);

/* Runs fn over the pool, or on the calling thread alone when is_small (results are the same
 * either way). */
void fwd_run_light(struct threadpool *tp, threadpool_fn fn, struct fwd *f, bool is_small);

#endif
