/* Image input for cpu decoder models: the model's multimodal projector (engine/mtmd: gemma3,
 * or qwen2.5vl_merger whose images keep their size and so their own count of positions), found
 * from --mmproj / mmproj_path or beside the model, and the embeddings of the images requests
 * carry, kept by content hash so a repeated image is encoded once. Owned by the model's
 * scheduler thread after load (no locks); not the prompt layout (api/generation/chat_prompt.c
 * places the image's positions, platform/cpu/cpu_model.c feeds them). */
#ifndef PLATFORM_CPU_VISION_H
#define PLATFORM_CPU_VISION_H

#include "engine/threadpool.h"
#include "platform/platform.h"
#include "platform/request.h"
#include "util/err.h"

#include <stdbool.h>

struct cpu_vision;

#define CPU_VISION_PER_STEP 4 // images one batch may hold (fewer than the cache keeps)

/* Loads the projector named by mmproj_path, else the one beside the model when model_path is
 * a directory with `mmproj-*.gguf`; *out is NULL when there is neither. The projector's
 * output width must equal the decoder's n_embd, and its images must fit one batch of
 * max_batch positions when their count is fixed (gemma3; qwen2.5vl_merger images are fed in
 * parts). Errors from clip_load (err says which file), ERR_INVALID for a width
 * or size mismatch or several projectors beside the model, ERR_NOMEM. Caller frees with
 * cpu_vision_free(). */
int cpu_vision_load(const char *mmproj_path, const char *model_path, int n_embd, int max_batch,
                    struct cpu_vision **out, struct errmsg *err);

/* NULL is a no-op. */
void cpu_vision_free(struct cpu_vision *v);

/* True once the projector's file changed on disk while loaded; why then names it (see
 * cpu_file_changed_msg). v may be NULL (false). Thread-safe, one fstat. */
bool cpu_vision_is_changed(const struct cpu_vision *v, struct errmsg *why);

/* Fills the desc's image fields (has_vision, image_tokens, image_begin/end, projector). v may
 * be NULL (no vision). Cannot fail. */
void cpu_vision_describe(const struct cpu_vision *v, struct platform_model_desc *out);

/* The positions a w x h image takes (*n_tok) and, for projectors whose images keep their
 * size (qwen2.5vl_merger), its grid of merged tokens (*grid_w x *grid_h; 0 x 0 otherwise).
 * ERR_INVALID (a size the projector cannot take; err says so). Thread-safe. */
int cpu_vision_image_grid(const struct cpu_vision *v, uint32_t w, uint32_t h, int *n_tok,
                          int *grid_w, int *grid_h, struct errmsg *err);

/* Whether images take M-RoPE grid positions (qwen2.5vl_merger), so the decoder must be an
 * M-RoPE family. Cannot fail. */
bool cpu_vision_needs_mrope(const struct cpu_vision *v);

/* Whether an image's positions attend to each other both ways (Gemma 3). Cannot fail. */
bool cpu_vision_is_noncausal(const struct cpu_vision *v);

/* The embeddings of im (image_tokens rows of n_embd floats): from the cache when an image
 * with its hash and size was encoded before, else preprocessed and encoded now on tp. The
 * pointer is borrowed until CPU_VISION_CACHE - 1 other images have been asked for (a batch
 * holds fewer). ERR_INVALID (im->n_tok is not the projector's count for the image), ERR_NOMEM.
 * Scheduler
 * thread only. */
int cpu_vision_embed(struct cpu_vision *v, struct threadpool *tp, const struct request_image *im,
                     const float **out, struct errmsg *err);

/* Encodes and cache lookups so far (tests and logs). Cannot fail. */
void cpu_vision_counts(const struct cpu_vision *v, int64_t *n_encoded, int64_t *n_hits);

#endif
