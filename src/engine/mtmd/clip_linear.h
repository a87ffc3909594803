/* What the projector encoders (clip.c, clip_qwen2vl.c, clip_audio.c) share: a weight matrix
 * read from the GGUF and its product over rows of activations through the engine's matmul,
 * and the layer norm. Internal to engine/mtmd. */
#ifndef ENGINE_MTMD_CLIP_LINEAR_H
#define ENGINE_MTMD_CLIP_LINEAR_H

#include "engine/threadpool.h"

#include <stdint.h>

struct clip_mat {
    const void *w;
    uint32_t type;
    int64_t n_in, n_out;
    const float *bias; // (n_out) or NULL
};

/* dst = src * m^T + bias for n_rows rows, on the pool. qin: scratch of at least n_rows *
 * matmul_input_row_bytes(m->type, m->n_in) bytes for the activations in the dot type. */
void clip_linear(struct threadpool *tp, void *qin, const struct clip_mat *m, const float *src,
                 float *dst, int64_t n_rows);

/* y = (x - mean) / sqrt(var + eps) * w + b over n values (b may be NULL). */
void clip_layernorm(float *y, const float *x, const float *w, const float *b, int n, float eps);

#endif
