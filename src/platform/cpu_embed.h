/* The cpu platform's embedding models: an engine encoder (engine/bert.h), its WordPiece
 * tokenizer, a kernel thread pool and one scheduler thread that runs the inputs of every busy
 * instance's REQUEST_EMBED request as shared encoder batches. cpu_model.c forwards the
 * struct platform calls here for encoder GGUFs; the contracts are those of platform.h. */
#ifndef PLATFORM_CPU_EMBED_H
#define PLATFORM_CPU_EMBED_H

#include "platform/platform.h"

#include <stdbool.h>

#define CPU_EMBED_MAX_INSTANCES 64

struct cpu_embed;

/* Whether the GGUF at gguf_path is an encoder this module serves ("bert", "nomic-bert"):
 * ERR_OK with *out, or the reader's error (ERR_IO, ERR_FORMAT, ERR_NOMEM, …) with err saying
 * why — an allocation failure must not pass for "not an encoder". */
int cpu_embed_probe(const char *gguf_path, bool *out, struct errmsg *err);

/* Loads the encoder at gguf_path (a resolved file) with a's threads, context cap and
 * on_done. Codes of engine_encoder_load(), vocab_load_gguf() and tok_new(); ERR_NOMEM. The
 * context per instance is the encoder's n_ctx_train, lowered to a->n_ctx when that is set.
 * On success the caller frees *out with cpu_embed_unload(). */
int cpu_embed_load(const char *gguf_path, const struct platform_load_args *a,
                   struct cpu_embed **out, struct errmsg *err);
void cpu_embed_describe(const struct cpu_embed *m, struct platform_model_desc *out);
int cpu_embed_add_instance(struct cpu_embed *m, int instance, struct errmsg *err);
void cpu_embed_remove_instance(struct cpu_embed *m, int instance);
/* Runs r (retained until on_done). A REQUEST_GENERATE request finishes with a 400 error; an
 * input longer than the context or a token outside the vocabulary with a 400 naming the
 * input's index. */
void cpu_embed_submit(struct cpu_embed *m, int instance, struct request *r);
void cpu_embed_unload(struct cpu_embed *m);

#endif
