/* Family specifics of the decoder architectures (gemma2, gemma3, phi3, granite, smollm3,
 * olmo2 and the mixture-of-experts qwen3moe, olmoe, granitemoe): the struct model_feat of a
 * model from its <arch>.* metadata. Internal to engine/. */
#ifndef ENGINE_MODEL_ARCH_H
#define ENGINE_MODEL_ARCH_H

#include "engine/model/model_internal.h"
#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

#define N_LAYER_MAX_ARCH 1024

/* Fills m->feat and each layer's is_swa / has_rope / rope_set from the metadata, after the
 * common hyperparameters are read and m->layers is allocated. ERR_FORMAT (a key of the wrong
 * type or out of range, a missing required key), ERR_UNSUPPORTED (more experts per token than
 * MOE_USED_MAX); err names the key. */
int model_arch_load(struct engine_model *m, struct errmsg *err);

/* Whether the architecture routes its FFN through experts. Cannot fail. */
bool model_arch_is_moe(enum model_arch arch);

/* M-RoPE (qwen2vl) rotary positions of n_tokens tokens from rotary position base:
 * out[3j..3j+2] = temporal, height, width of token j. Text (grid_w 0) counts on in all three;
 * an image's merged tokens in raster order over grid_w columns, the first being grid index
 * first, take (base, base + row, base + column), as the reference's multimodal decoder lays
 * them out (base is the image's, for every part of it). Cannot fail. */
void model_mrope_positions(int base, int n_tokens, int grid_w, int first, int32_t *out);

/* The rotary position after such a run: base + n_tokens for text, base + max(grid_w, grid_h)
 * after an image (the reference advances an M-RoPE image by its grid's longer side). Cannot
 * fail. */
int model_mrope_next(int base, int n_tokens, int grid_w, int grid_h);

#endif
