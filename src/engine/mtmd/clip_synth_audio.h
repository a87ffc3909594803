/* Synthetic audio projectors: a `clip-audio` GGUF with the keys and tensor layout of an
 * Ultravox projector (Whisper encoder: two 1-D convolutions, learned positions, pre-norm
 * blocks; then frame stacking, RMS norm, SwiGLU MLP) and seeded random weights, so the audio
 * path can be compared with the reference without downloading a model. */
#ifndef ENGINE_MTMD_CLIP_SYNTH_AUDIO_H
#define ENGINE_MTMD_CLIP_SYNTH_AUDIO_H

#include "engine/gguf/gguf_write.h"
#include "util/err.h"

#include <stdint.h>

struct clip_synth_audio_params {
    int n_mel;        // mel bins (Whisper: 80 or 128)
    int n_embd;       // encoder width
    int n_layer;      // encoder blocks
    int n_head;       // attention heads
    int n_ff;         // encoder feed-forward width
    int n_stack;      // frames stacked per output embedding (Ultravox: 8)
    int n_proj_ff;    // projector MLP width (the SwiGLU output; the input half is twice this)
    int n_out;        // output width = the text model's n_embd
    const char *type; // block matrices: "f32" or "f16"
    uint64_t seed;
};

/* A tiny Ultravox shape: 80 mel, width 64, 2 blocks, 4 heads, ffn 128, stack 4, proj ffn 128,
 * out 128, f32, seed 1. Cannot fail. */
struct clip_synth_audio_params clip_synth_audio_params_default(void);

/* Builds the projector into a new writer (caller frees with gguf_writer_free()). The position
 * table has 1500 rows, one per encoder frame of a 30 s window. ERR_INVALID (a shape or type
 * the loader would refuse; err says which), ERR_NOMEM. Deterministic for given params. */
int clip_synth_audio_build(const struct clip_synth_audio_params *p, struct gguf_writer **out,
                           struct errmsg *err);

#endif
