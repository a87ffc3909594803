/* The Qwen2.5-VL vision projector (`clip.projector_type` qwen2.5vl_merger): images at their own
 * aspect ratio, resized to multiples of 2 patches within the family's pixel bounds; a ViT with
 * two temporal patch kernels, 2-D rotary positions, RMS norm, SwiGLU and attention inside
 * 112-pixel windows except every n_wa_pattern-th block; the 2x2 patch merger's MLP. Not
 * Qwen2-VL (LayerNorm, no windows) and not the decoder side (M-RoPE positions of the image
 * tokens): those are the caller's. Follows the GGUF layout of multimodal projector files. */
#ifndef ENGINE_MTMD_CLIP_QWEN2VL_H
#define ENGINE_MTMD_CLIP_QWEN2VL_H

#include "engine/threadpool.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct clip_qwen2vl;

/* Immutable after load. */
struct clip_qwen2vl_info {
    int patch_size;         // clip.vision.patch_size
    int n_embd, n_layer;    // ViT width and blocks
    int n_head, n_ff;       // attention heads; SwiGLU width
    int n_wa_pattern;       // blocks il with (il + 1) % n == 0 attend fully; 0: all do
    int window_px;          // attention window side in pixels (112)
    int64_t min_px, max_px; // pixel-count bounds of the resized image (8 and 4096 tokens)
    int n_out_embd;         // width of each embedding (the decoder's n_embd)
    float mean[3], std[3];  // clip.vision.image_mean / image_std
    float eps;              // RMS norm epsilon
};

/* Loads a projector from a file, or from memory (borrowed; must outlive the projector).
 * ERR_IO / ERR_FORMAT / ERR_LIMIT from the GGUF reader; ERR_FORMAT for missing or inconsistent
 * keys and tensor shapes (err names them); ERR_UNSUPPORTED for another projector type, a
 * non-SiLU feed-forward or a tensor type without kernels; ERR_NOMEM. On success *out is the
 * caller's; free with clip_qwen2vl_free(). Weights stay in the read-only mapping. */
int clip_qwen2vl_load(const char *path, struct clip_qwen2vl **out, struct errmsg *err);
int clip_qwen2vl_load_memory(const void *data, size_t len, struct clip_qwen2vl **out,
                             struct errmsg *err);

/* Unmaps and frees. NULL is a no-op. */
void clip_qwen2vl_free(struct clip_qwen2vl *q);

/* Borrowed; valid until clip_qwen2vl_free(). Thread-safe. Cannot fail. */
const struct clip_qwen2vl_info *clip_qwen2vl_get_info(const struct clip_qwen2vl *q);

/* True once the projector's file changed on disk while loaded (gguf_is_changed): what it
 * computes from then on must be discarded. Thread-safe, one fstat. */
bool clip_qwen2vl_is_changed(const struct clip_qwen2vl *q);

/* The size a w x h image is resized to (*rw x *rh, multiples of 2 patches, the aspect ratio
 * kept within the pixel bounds) and the embeddings it becomes (*n_tok, one per 2x2 patches).
 * ERR_INVALID for w or h of 0 or above 65536. Thread-safe. */
int clip_qwen2vl_image_size(const struct clip_qwen2vl *q, uint32_t w, uint32_t h, uint32_t *rw,
                            uint32_t *rh, int *n_tok);

/* Fits RGB8 pixels (w x h, rows top to bottom) into clip_qwen2vl_image_size's rw x rh (aspect
 * kept, Pillow's bicubic filter, centred on black) and normalizes them to planar (3, rh, rw) floats in out:
 * (v / 255 - mean) / std. ERR_INVALID as above; ERR_NOMEM. Thread-safe. */
int clip_qwen2vl_preprocess(const struct clip_qwen2vl *q, const uint8_t *rgb, uint32_t w,
                            uint32_t h, float *out);

/* Encodes preprocessed pixels (rw x rh from clip_qwen2vl_image_size) to n_tok x n_out_embd
 * floats in out, merged patches in raster order. tp runs the products and the attention (any
 * size; the same results for every thread count). ERR_INVALID for a size that is not a
 * multiple of 2 patches or beyond the bounds; ERR_NOMEM (scratch is allocated per call). Any
 * number of threads may encode at once, each with its own pool. */
int clip_qwen2vl_encode(const struct clip_qwen2vl *q, struct threadpool *tp, const float *pixels,
                        uint32_t rw, uint32_t rh, float *out);

#endif
