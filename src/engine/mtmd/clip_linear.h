/* What the projector encoders (clip.c, clip_qwen2vl.c, clip_audio.c) share: a weight matrix
 * read from the GGUF and its product over rows of activations through the engine's matmul,
 * the layer norm, the reference's GELU and the vision encoders' attention of one query head.
 * Internal to engine/mtmd. */
#ifndef ENGINE_MTMD_CLIP_LINEAR_H
#define ENGINE_MTMD_CLIP_LINEAR_H

#include "engine/threadpool.h"

#include <stddef.h>
#include <stdint.h>

#define CLIP_HEAD_DIM_MAX 512 // the largest head the encoders take (checked at load)

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

/* x[i] = gelu(x[i]) over n values, the reference's GELU: the tanh form looked up by the input
 * rounded to half (ops_gelu_table), 0 at or below -10 and the identity at or above 10. */
void clip_gelu(float *x, size_t n);

/* One query head over keys lo..hi-1 in the single pass of the reference's CPU flash attention:
 * the query (hd floats) rounded to half, keys and values half (row j at kh/vh + j * stride),
 * the accumulator half, a running maximum; out = the softmax-weighted sum of values. hd is at
 * most CLIP_HEAD_DIM_MAX; hi > lo. */
void clip_attend_f16(const float *q, const uint16_t *kh, const uint16_t *vh, size_t stride, int lo,
                     int hi, int hd, float scale, float *out);

#endif
