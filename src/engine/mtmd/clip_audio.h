/* Audio projectors: a CLIP-family GGUF with `general.type` clip-audio and
 * `clip.projector_type` ultravox, that turns 16 kHz mono samples into embeddings a decoder
 * takes in place of token embeddings: Whisper's log-mel spectrogram (audio_mel.h) in 30 s
 * windows, the Whisper encoder (two 1-D convolutions with GELU, learned positions, pre-norm
 * blocks, a final norm) and Ultravox's projector (frames stacked, RMS norm, SwiGLU MLP with a
 * middle RMS norm). Loads and validates the file (keys, tensor names, types, shapes) before
 * use. Not a decoder and not a resampler; where the embeddings go is the caller's. */
#ifndef ENGINE_MTMD_CLIP_AUDIO_H
#define ENGINE_MTMD_CLIP_AUDIO_H

#include "engine/threadpool.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct clip_audio;

/* Immutable after load. */
struct clip_audio_info {
    const char *projector_name; // "ultravox"; static
    int n_mel;                  // clip.audio.num_mel_bins
    int n_embd;                 // encoder width
    int n_layer;                // encoder blocks
    int n_head;                 // attention heads
    int n_ff;                   // encoder feed-forward width
    int n_stack;                // clip.audio.projector.stack_factor
    int n_proj_ff;              // projector MLP width (after SwiGLU)
    int n_window_tokens;        // embeddings per 30 s window
    int n_out_embd;             // width of each embedding (the decoder's n_embd must match)
    float eps;                  // clip.audio.attention.layer_norm_epsilon
};

/* Loads a projector. ERR_IO / ERR_FORMAT / ERR_LIMIT from the GGUF reader; ERR_FORMAT for a
 * file that is not an audio projector or has missing or inconsistent keys and tensor shapes
 * (err names them); ERR_UNSUPPORTED for another projector type or a tensor type this does not
 * run; ERR_NOMEM. On success *out is the caller's; free with clip_audio_free(). Weights stay
 * in the read-only mapping. */
int clip_audio_load(const char *path, struct clip_audio **out, struct errmsg *err);

/* clip_audio_load on a file already in memory (borrowed; must outlive the model). */
int clip_audio_load_memory(const void *data, size_t len, struct clip_audio **out,
                           struct errmsg *err);

/* Unmaps and frees. NULL is a no-op. */
void clip_audio_free(struct clip_audio *a);

/* Borrowed; valid until clip_audio_free(). Thread-safe. Cannot fail. */
const struct clip_audio_info *clip_audio_get_info(const struct clip_audio *a);

/* True once the projector's file changed on disk while loaded (gguf_is_changed): what it
 * computes from then on must be discarded. Thread-safe, one fstat. */
bool clip_audio_is_changed(const struct clip_audio *a);

/* Embeddings n samples at 16 kHz give: audio_mel_n_windows(n) * n_window_tokens. Cannot
 * fail. */
int64_t clip_audio_n_tokens(const struct clip_audio *a, size_t n_samples);

/* Encodes one 30 s window of log-mel frames (n_mel rows of 3000, audio_mel_compute's block)
 * to n_window_tokens x n_out_embd floats in out, token after token. tp runs the products
 * (results are the same for every thread count). ERR_NOMEM (scratch is allocated per call).
 * Any number of threads may encode at once, each with its own pool. */
int clip_audio_encode_window(const struct clip_audio *a, struct threadpool *tp, const float *mel,
                             float *out);

/* The whole path: spectrogram of samples (n at 16 kHz), every window encoded, into out
 * (clip_audio_n_tokens(a, n) x n_out_embd floats). ERR_NOMEM. Thread-safe as above. */
int clip_audio_encode(const struct clip_audio *a, struct threadpool *tp, const float *samples,
                      size_t n_samples, float *out);

#endif
