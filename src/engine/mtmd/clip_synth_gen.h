/* What the synthetic projector writers (clip_synth.c, clip_synth_qwen2vl.c,
 * clip_synth_audio.c) share: a GGUF writer with a seeded generator, and tensors of uniform
 * random values stored in a block type. Internal to engine/mtmd. */
#ifndef ENGINE_MTMD_CLIP_SYNTH_GEN_H
#define ENGINE_MTMD_CLIP_SYNTH_GEN_H

#include "engine/gguf/gguf_write.h"
#include "util/err.h"

#include <stdint.h>

struct synth_gen {
    struct gguf_writer *w;
    uint64_t rng;  // splitmix64 state, the seed at first
    uint32_t type; // the block type of the encoder's matrices
    struct errmsg *err;
};

/* A tensor of ne[0] * ne[1] * ne[2] * ne[3] values center + scale * U(-1, 1) drawn in order,
 * stored as type (rows of ne[0]); ERR_INVALID when the rows do not fit the type's blocks. */
int synth_add(struct synth_gen *g, const char *name, uint32_t type, const int64_t ne[4],
              float scale, float center);

/* An F32 vector of n such values. */
int synth_vec(struct synth_gen *g, const char *name, int64_t n, float scale, float center);

#endif
