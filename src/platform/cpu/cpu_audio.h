/* Audio input for cpu decoder models: an audio projector (engine/mtmd/clip_audio.h, general.type
 * clip-audio) behind the model's projector slot (cpu_vision.h), and the encoding of one 30 s
 * window of a request's clip with the clip's spectrogram kept for its next window. Owned by
 * the model's scheduler thread after load (no locks). Not the embedding cache or the loader of
 * the projector slot (cpu_vision.c) and not the prompt layout (api/generation/chat_prompt.c). */
#ifndef PLATFORM_CPU_AUDIO_H
#define PLATFORM_CPU_AUDIO_H

#include "engine/threadpool.h"
#include "platform/platform.h"
#include "platform/request.h"
#include "util/err.h"

#include <stdbool.h>

struct cpu_audio;

/* Whether path is a GGUF whose general.type is clip-audio (false for anything unreadable;
 * the loaders then say why). Cannot fail. */
bool cpu_audio_claims(const char *path);

/* Loads the audio projector at path. Errors from clip_audio_load (err says what), ERR_NOMEM.
 * Caller frees with cpu_audio_free(). */
int cpu_audio_load(const char *path, struct cpu_audio **out, struct errmsg *err);

/* NULL is a no-op. */
void cpu_audio_free(struct cpu_audio *a);

/* True once the projector's file changed on disk while loaded. Thread-safe, one fstat. */
bool cpu_audio_is_changed(const struct cpu_audio *a);

/* Embeddings per window and their width. Cannot fail. */
int cpu_audio_window_tokens(const struct cpu_audio *a);
int cpu_audio_n_embd(const struct cpu_audio *a);

/* Fills the desc's audio fields (has_audio, audio_window_tokens, audio_n_windows,
 * audio_begin/end) and its projector name. Cannot fail. */
void cpu_audio_describe(const struct cpu_audio *a, struct platform_model_desc *out);

/* Encodes the window item->window of item's clip into out (window_tokens rows of n_embd
 * floats) on tp. The clip's spectrogram is computed once and kept until another clip is
 * encoded. ERR_INVALID (not an audio item, or a window past the clip's end), ERR_NOMEM.
 * Scheduler thread only. */
int cpu_audio_encode(struct cpu_audio *a, struct threadpool *tp, const struct request_image *item,
                     float *out);

/* Spectrograms computed so far (tests and logs). Cannot fail. */
int64_t cpu_audio_n_mels(const struct cpu_audio *a);

#endif
