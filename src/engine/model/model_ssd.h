/* Mamba-2 layers (model_ssd.c): mamba2, and granitehybrid's recurrent layers. Internal to
 * engine/. */
#ifndef ENGINE_MODEL_SSD_H
#define ENGINE_MODEL_SSD_H

#include "engine/model/model_fwd.h"
#include "engine/model/model_internal.h"
#include "engine/threadpool.h"
#include "util/err.h"

/* The five ssm.* keys of a Mamba-2 layer (conv_kernel, inner_size, state_size,
 * time_step_rank = heads, group_count), checked (heads divide inner_size, groups divide
 * heads), and the layout and state sizes they give. Which layers recur is the caller's.
 * ERR_FORMAT naming the key, ERR_LIMIT when a size overflows. */
int model_ssd_hparams(struct engine_model *m, struct errmsg *err);

/* The Mamba-2 block of layer f->L over the step's rows, whose normed input is already
 * quantized for plan_conv_in: in_proj to z | x B C | dt, the causal conv (+ bias) and SiLU
 * over x B C, the scan of each head one token at a time (each sequence's state in order),
 * the skip x * D, the gate silu(z) and the grouped RMS norm into sc.recr_y (model_recr_block
 * runs out_proj). */
void model_ssd_block(struct threadpool *tp, struct fwd *f);

#endif
