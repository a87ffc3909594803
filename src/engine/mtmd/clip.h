/* Multimodal projectors: a CLIP-family GGUF (`general.type` clip-vision) that turns an image
 * into embeddings a decoder takes in place of token embeddings. Loads and validates the file
 * (every key, tensor name, type and shape checked before use), preprocesses RGB8 pixels as the
 * projector type requires and runs the ViT encoder and the projector. Not a decoder and not a
 * tokenizer: where the embeddings go in a prompt is the caller's (platform/cpu/cpu_model.c).
 * Projector types: gemma3 (SigLIP ViT, average pool, RMS norm, linear). */
#ifndef ENGINE_MTMD_CLIP_H
#define ENGINE_MTMD_CLIP_H

#include "engine/threadpool.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct clip_model;

enum clip_projector {
    CLIP_PROJECTOR_GEMMA3 = 1,
};

/* Immutable after load. */
struct clip_info {
    enum clip_projector projector;
    const char *projector_name; // "gemma3"; static
    bool has_vision;            // clip.has_vision_encoder
    bool has_audio;             // clip.has_audio_encoder (no audio projector runs yet)
    int image_size;             // clip.vision.image_size: the square side images are resized to
    int patch_size;             // clip.vision.patch_size
    int n_embd;                 // ViT width
    int n_layer;                // ViT blocks
    int n_head;                 // ViT attention heads
    int n_ff;                   // ViT feed-forward width
    int n_merge;                // gemma3: pooling kernel side (clip.vision.projector.scale_factor)
    int n_out_tokens;           // embeddings per image
    int n_out_embd;             // width of each embedding (the decoder's n_embd must match)
    float mean[3], std[3];      // clip.vision.image_mean / image_std
    float eps;                  // clip.vision.attention.layer_norm_epsilon
};

/* Loads a projector. ERR_IO / ERR_FORMAT / ERR_LIMIT from the GGUF reader; ERR_FORMAT for a
 * file that is not a CLIP projector (general.type/architecture), missing or inconsistent keys
 * and tensor shapes (err names them); ERR_UNSUPPORTED for a projector type, an audio-only file
 * or a tensor type this does not run; ERR_NOMEM. On success *out is the caller's; free with
 * clip_free(). Weights stay in the read-only mapping. */
int clip_load(const char *path, struct clip_model **out, struct errmsg *err);

/* clip_load on a file already in memory (borrowed; must outlive the model): for fuzzing and
 * tests. Same errors. */
int clip_load_memory(const void *data, size_t len, struct clip_model **out, struct errmsg *err);

/* Unmaps and frees. NULL is a no-op. */
void clip_free(struct clip_model *c);

/* Borrowed; valid until clip_free(). Thread-safe. Cannot fail. */
const struct clip_info *clip_get_info(const struct clip_model *c);

/* True once the projector's file changed on disk while loaded (gguf_is_changed): what it
 * computes from then on must be discarded. Thread-safe, one fstat. */
bool clip_is_changed(const struct clip_model *c);

/* Resizes RGB8 pixels (w x h, rows top to bottom) to image_size x image_size as the projector
 * type requires (gemma3: the aspect ratio kept, Pillow-style bilinear filter, centred on
 * black) and normalizes them to planar (3, image_size, image_size) floats with the file's
 * mean and std: (v / 255 - mean) / std. out holds 3 * image_size^2 floats. ERR_INVALID for
 * w or h of 0 or above 65536; ERR_NOMEM. Thread-safe. */
int clip_preprocess(const struct clip_model *c, const uint8_t *rgb, uint32_t w, uint32_t h,
                    float *out);

/* Encodes preprocessed pixels (clip_preprocess's output) to n_out_tokens x n_out_embd floats
 * in out, token after token. tp runs the matrix products (any size; results are the same for
 * every thread count). ERR_NOMEM (scratch for one image is allocated per call). Any number of
 * threads may encode at once, each with its own pool. */
int clip_encode(const struct clip_model *c, struct threadpool *tp, const float *pixels, float *out);

#endif
