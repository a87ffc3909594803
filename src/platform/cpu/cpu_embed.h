/* The cpu platform's embedding models: an engine encoder (engine/bert/bert.h) or a decoder
 * (engine/model/model.h: llama, qwen2, qwen3 such as Qwen3-Embedding) whose final hidden states are
 * pooled, with the model's tokenizer, a kernel thread pool and one scheduler thread that runs
 * the inputs of every busy instance's REQUEST_EMBED request as shared batches. cpu_model.c
 * forwards the struct platform calls here for embedding GGUFs; the contracts are those of
 * platform.h. */
#ifndef PLATFORM_CPU_EMBED_H
#define PLATFORM_CPU_EMBED_H

#include "platform/platform.h"

#include <stdbool.h>

#define CPU_EMBED_MAX_INSTANCES 64

struct cpu_embed;

/* Whether the GGUF at gguf_path is an embedding model this module serves: an encoder ("bert",
 * "nomic-bert"), or a decoder that declares <arch>.pooling_type mean, cls, last or rank (rank
 * loads for qwen3 rerankers only), or any decoder when force_embedding is set (--embedding).
 * ERR_OK with *out, or the reader's error (ERR_IO, ERR_FORMAT, ERR_NOMEM, …) with err saying
 * why — an allocation failure must not pass for "not an embedding model". */
int cpu_embed_probe(const char *gguf_path, bool force_embedding, bool *out, struct errmsg *err);

/* Loads the embedding model at gguf_path (a resolved file) with a's threads, context, pooling
 * and on_done. Encoders: codes of engine_encoder_load(), the context is n_ctx_train lowered to
 * a->n_ctx when that is set; with pooling rank (a->pooling or the file's) the model is a
 * reranker: its results are n_cls_out scores per input; with pooling none, one unnormalized
 * vector per token (describe() says is_per_token) and describe() gives n_cls_out and the
 * pair layout (tokenizer.chat_template.rerank, the vocab's add_bos/add_eos/add_sep ids). Decoders: codes of engine_model_load(); ERR_UNSUPPORTED for
 * pooling none, rank on another arch than qwen3, or non-causal attention; ERR_FORMAT for rank
 * without a `cls.output.weight` of n_cls_out rows (qwen3 rank: the last token's state through
 * cls.output and a softmax, as llama.cpp scores Qwen3-Reranker); the context is a->n_ctx, or the training
 * context capped at 4096, and never above the training context; pooling is a->pooling, else
 * the file's, else last (causal attention: only the last token has seen the whole input).
 * Both: codes of vocab_load_gguf() and tok_new(); ERR_NOMEM. On success the caller frees *out
 * with cpu_embed_unload(). */
int cpu_embed_load(const char *gguf_path, const struct platform_load_args *a,
                   struct cpu_embed **out, struct errmsg *err);
void cpu_embed_describe(const struct cpu_embed *m, struct platform_model_desc *out);
/* Decoders: an instance owns a KV cache of the model's context, where its inputs are packed
 * (ERR_NOMEM). Encoders: bookkeeping only. */
int cpu_embed_add_instance(struct cpu_embed *m, int instance, struct errmsg *err);
void cpu_embed_remove_instance(struct cpu_embed *m, int instance);
/* Runs r (retained until on_done). A REQUEST_GENERATE request finishes with a 400 error; an
 * input longer than the context or a token outside the vocabulary with a 400 naming the
 * input's index. */
void cpu_embed_submit(struct cpu_embed *m, int instance, struct request *r);
void cpu_embed_unload(struct cpu_embed *m);
/* True once the model's GGUF changed on disk (gguf_is_changed); why names the file.
 * Thread-safe, one fstat. */
bool cpu_embed_is_failed(struct cpu_embed *m, struct errmsg *why);

#endif
