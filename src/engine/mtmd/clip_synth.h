/* Synthetic multimodal projectors for tests and benchmarks: a CLIP-family GGUF with the keys and
 * tensor layout of a real projector type and seeded random weights, so encoders can be
 * compared with the reference and timed at real shapes without downloading anything. */
#ifndef ENGINE_MTMD_CLIP_SYNTH_H
#define ENGINE_MTMD_CLIP_SYNTH_H

#include "engine/gguf/gguf_write.h"
#include "util/err.h"

#include <stdint.h>

struct clip_synth_params {
    const char *projector; // "gemma3" or "qwen2.5vl_merger"
    int image_size;        // square side in pixels
    int patch_size;
    int n_embd;       // ViT width
    int n_layer;      // ViT blocks
    int n_head;       // attention heads
    int n_ff;         // feed-forward width
    int n_merge;      // gemma3's pooling kernel side (qwen2.5vl: 2, the merger's)
    int n_wa_pattern; // qwen2.5vl: every n-th block attends to the whole image, the others
                      // within 112-pixel windows
    int n_out;        // projection width (the decoder's n_embd)
    const char *type; // matrices: "f32", "f16" or "q8_0" (rows that do not fit its blocks: f16)
    uint64_t seed;
};

/* The tiny projector's shape (32x32 images, patch 2, 128 wide, 4 blocks, merge 1, out 128),
 * f16, seed 1. Cannot fail. */
struct clip_synth_params clip_synth_params_default(void);

/* The qwen2.5vl_merger one (clip_synth_qwen2vl.c); same contract as clip_synth_build. */
int clip_synth_build_qwen2vl(const struct clip_synth_params *p, struct gguf_writer **out,
                             struct errmsg *err);

/* Builds the projector into a new writer (caller frees with gguf_writer_free()).
 * ERR_INVALID (shape or type the loader would refuse; err says which), ERR_NOMEM.
 * Deterministic for given params. */
int clip_synth_build(const struct clip_synth_params *p, struct gguf_writer **out,
                     struct errmsg *err);

#endif
