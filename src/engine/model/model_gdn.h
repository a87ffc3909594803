/* qwen35's layers (model_gdn.c): the Gated DeltaNet block and the gated full attention.
 * Internal to engine/. */
#ifndef ENGINE_MODEL_GDN_H
#define ENGINE_MODEL_GDN_H

#include "engine/model/model_fwd.h"
#include "engine/model/model_internal.h"
#include "engine/threadpool.h"
#include "util/err.h"

/* qwen35's hyperparameters after the common ones, with m->layers allocated: the five ssm.*
 * keys (conv_kernel, state_size, time_step_rank, group_count, inner_size, which must be
 * state_size * time_step_rank), which layers recur (attention.recurrent_layers, else every
 * full_attention_interval-th layer attends, default 4), rope.dimension_sections (required;
 * text positions use only its first three sections), and the conv and state sizes. ERR_FORMAT
 * naming the key, ERR_UNSUPPORTED (head widths beyond SSM_D_STATE_MAX, sections that would
 * turn pairs by the extra position). */
int model_gdn_hparams(struct engine_model *m, struct errmsg *err);

/* The DeltaNet block of layer f->L over the step's rows, whose normed input (sc.xn) is already
 * quantized for plan_conv_in; the result, before out_proj, is in sc.recr_y. */
void model_gdn_block(struct threadpool *tp, struct fwd *f);

/* The causal conv of a DeltaNet or Mamba-2 layer over the step's tokens: the channels of each
 * sc.recr_in row from conv_in_off, each sequence's tail advanced token by token, plus the
 * layer's conv bias if any, SiLU, into sc.recr_conv. */
void model_gdn_conv_silu(struct threadpool *tp, struct fwd *f);

/* Gated attention: token t's projected row sc.qg holds per head a query then a gate; the
 * queries go to sc.q and the gates to sc.attn_gate. Cannot fail. */
void model_gdn_split_query(const struct engine_model *m, int t);

/* Gated attention: sc.attn rows times sigmoid of their gates, before the output projection. */
void model_gdn_gate_output(struct threadpool *tp, struct fwd *f);

#endif
