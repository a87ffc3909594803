/* The recurrent layers of hybrid families (lfm2's gated short convolutions), and the state a
 * sequence keeps for them: the hyperparameters that say which layers recur, their tensors
 * beyond the weight matrices, their block in the forward pass, and the state's checkpoints.
 * Internal to engine/. */
#ifndef ENGINE_MODEL_RECR_H
#define ENGINE_MODEL_RECR_H

#include "engine/model/model_fwd.h"
#include "engine/model/model_internal.h"
#include "util/err.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* <arch>.<suffix>, a required integer in [lo, hi]: ERR_FORMAT naming the key when it is
 * missing, not an integer or out of range. The ssm.* sizes of model_gdn.c and model_ssd.c. */
int model_recr_get_int(const struct engine_model *m, const char *suffix, int64_t lo, int64_t hi,
                       int *out, struct errmsg *err);

/* log(1 + e^x), linear above 20 as the reference cuts it. */
static inline float model_recr_softplus(float x)
{
    return x > 20.0f ? x : logf(1.0f + expf(x));
}

/* Whether the architecture mixes recurrent layers with attention. Cannot fail. */
bool model_recr_is_hybrid(enum model_arch arch);

/* <arch>.attention.head_count_kv when it is a per-layer array: *n_head_kv becomes the one
 * non-zero count the layers share and *is_array true; a scalar or missing key leaves both
 * alone. ERR_FORMAT (not n_layer integers, a count outside 0..n_head or not dividing it, zero
 * in a family without recurrent layers), ERR_UNSUPPORTED (attention layers with different
 * counts); err names the key. */
int model_recr_head_kv(const struct engine_model *m, int n_layer, int n_head, int *n_head_kv,
                       bool *is_array, struct errmsg *err);

/* <arch>.feed_forward_length when it is a per-layer array (a hybrid's; 0 for layers without
 * an FFN): *n_ff becomes the one non-zero width the layers share and *is_array true; a scalar
 * or missing key leaves both alone. ERR_FORMAT (not n_layer integers in 0..1 << 20, an array
 * in a family without layer kinds), ERR_UNSUPPORTED (layers of different widths); err names
 * the key. */
int model_recr_ff(const struct engine_model *m, int n_layer, int *n_ff, bool *is_array,
                  struct errmsg *err);

/* For a hybrid family, after the common hyperparameters and with m->layers allocated: which
 * layers recur (lfm2: head_count_kv[i] == 0), the convolution's size
 * (<arch>.shortconv.l_cache) and the state sizes, including how many checkpoints a sequence
 * keeps. ERR_FORMAT naming the key; ERR_LIMIT when the state's size overflows. Other families:
 * nothing, ERR_OK. */
int model_recr_hparams(struct engine_model *m, struct errmsg *err);

/* Layer il's tensor blk.il.<name> of shape [ne0, ne1] converted to F32 in memory m owns
 * (freed at unload) into *out; a missing tensor that is not required leaves *out NULL.
 * ERR_FORMAT (missing, wrong shape), ERR_UNSUPPORTED (a type without conversion), ERR_NOMEM;
 * err names the tensor. */
int model_recr_load_floats(struct engine_model *m, int il, const char *name, int64_t ne0,
                           int64_t ne1, bool required, const float **out, struct errmsg *err);

/* Layer il's convolution taps blk.il.<name> [d_conv + 1, n_conv_ch] into conv_w, as
 * model_recr_load_floats. */
int model_recr_load_conv(struct engine_model *m, int il, const char *name, struct errmsg *err);

/* The recurrent block of layer f->L over the step's rows, whose normed input is already
 * quantized for plan_conv_in: input projection, the scan one token at a time in each item's
 * order (updating each sequence's state), gate, output projection into sc.proj. */
void model_recr_block(struct threadpool *tp, struct fwd *f);

/* The recurrent state of the current layer (f->L) in the sequence of the batch's token t: its
 * conv tail first, then the layer's scan state. Cannot fail. */
float *model_recr_state(const struct fwd *f, int t);

/* Zeroes the recurrent state of a sequence about to take its first token. Cannot fail. */
void model_recr_reset(struct engine_seq *s);

/* The position a truncation to n_keep (< pos) can keep: the latest checkpoint at or before
 * n_keep, else 0. Cannot fail. */
int model_recr_keepable(const struct engine_seq *s, int n_keep);

/* Goes back to position kept (a model_recr_keepable() answer below pos): restores that
 * checkpoint's state (kept 0: the next decode zeroes it) and drops the checkpoints beyond it,
 * since what follows may differ. Cannot fail. */
void model_recr_restore(struct engine_seq *s, int kept);

#endif
