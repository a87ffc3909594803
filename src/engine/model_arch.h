/* Family specifics of the decoder architectures (gemma2, gemma3, phi3, granite, smollm3,
 * olmo2 and the mixture-of-experts qwen3moe, olmoe, granitemoe): the struct model_feat of a
 * model from its <arch>.* metadata. Internal to engine/. */
#ifndef ENGINE_MODEL_ARCH_H
#define ENGINE_MODEL_ARCH_H

#include "engine/model_internal.h"
#include "util/err.h"

#include <stdbool.h>

#define N_LAYER_MAX_ARCH 1024

/* Fills m->feat and each layer's is_swa / has_rope / rope_set from the metadata, after the
 * common hyperparameters are read and m->layers is allocated. ERR_FORMAT (a key of the wrong
 * type or out of range, a missing required key), ERR_UNSUPPORTED (more experts per token than
 * MOE_USED_MAX); err names the key. */
int model_arch_load(struct engine_model *m, struct errmsg *err);

/* Whether the architecture routes its FFN through experts. Cannot fail. */
bool model_arch_is_moe(enum model_arch arch);

#endif
