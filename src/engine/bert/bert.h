/* BERT-family encoders for sentence embeddings, in llama.cpp's GGUF form: `bert` (BERT,
 * MiniLM, bge, e5, gte: token + position + token-type embeddings, post-LayerNorm blocks with
 * bidirectional attention and a tanh-GELU FFN) and `nomic-bert` (fused QKV, NeoX RoPE instead
 * of position embeddings, SwiGLU FFN); one pooled, L2-normalized vector per input, or with
 * rank pooling (cross-encoder rerankers such as bge-reranker, `bert` only) the classification
 * head's scores. Not a decoder (model.h) and not a tokenizer (text/). */
#ifndef ENGINE_BERT_H
#define ENGINE_BERT_H

#include "engine/gguf/gguf.h"
#include "engine/threadpool.h"
#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

/* Pooling of the last hidden states into one vector per input; values are llama.cpp's
 * `<arch>.pooling_type` numbering. */
enum engine_pooling {
    ENGINE_POOLING_UNSPECIFIED = -1, // load parameter only: take the file's (mean when absent)
    ENGINE_POOLING_NONE = 0,         // no pooling: every token's final state
    ENGINE_POOLING_MEAN = 1,         // mean over every position, [CLS] and [SEP] included
    ENGINE_POOLING_CLS = 2,          // the first token's state
    ENGINE_POOLING_LAST = 3,         // the last token's state
    ENGINE_POOLING_RANK = 4,         // reranker: the first token's state through the
                                     // classification head (cls, cls.output), bert only
};

/* Tokens one engine_encoder_embed() call takes in total when the caller asks for no other
 * capacity (at least one full-context input always fits; see n_batch_tokens). The scratch is
 * n_batch_tokens * (31 * n_embd + 4 * n_ff) bytes plus the activations converted for the
 * matrices (F16/F32 weights: 4 * n_ff bytes per token); bge-small (384, 1536, F16) at 2048
 * tokens takes 49 MB (engine_encoder_info().scratch_bytes). */
#define ENGINE_ENCODER_BATCH_DEFAULT 2048

/* Load options; zero-initialize and set what you need (pooling = UNSPECIFIED for the file's). */
struct engine_encoder_params {
    int n_batch_tokens;          // scratch capacity in tokens per embed call; 0: the default
                                 // (max(ENGINE_ENCODER_BATCH_DEFAULT, n_ctx_train))
    enum engine_pooling pooling; // UNSPECIFIED: <arch>.pooling_type, mean when absent
};

/* Immutable after load. */
struct engine_encoder_info {
    const char *arch; // "bert" or "nomic-bert"; borrowed from the encoder
    int n_vocab;      // rows of token_embd
    int n_ctx_train;  // most tokens per input: <arch>.context_length, or the position_embd
                      // rows when fewer
    int n_embd;       // hidden width
    int n_layer;
    int n_head;
    int head_dim; // n_embd / n_head
    int n_ff;
    float norm_eps;              // <arch>.attention.layer_norm_epsilon
    enum engine_pooling pooling; // MEAN, CLS, LAST or RANK
    int n_out;                   // floats per output row: n_embd, or with RANK n_cls_out
                                 // (with NONE a row per token, else per input)
    int n_cls_out;               // RANK: scores per input (the length of
                                 // <arch>.classifier.output_labels, else 1); 0 otherwise
    int n_batch_tokens;          // most tokens per embed call, over all its inputs
    int64_t n_params;            // weight elements over all tensors
    size_t file_size;            // bytes of the GGUF file
    size_t scratch_bytes;        // bytes of the batch scratch allocated at load
};

struct engine_encoder;

/* True when the file's general.architecture is one this module loads ("bert", "nomic-bert").
 * Cannot fail. */
bool engine_encoder_handles(const struct gguf *g);

/* Loads and validates an encoder; p may be NULL (defaults). ERR_IO / ERR_FORMAT /
 * ERR_UNSUPPORTED / ERR_LIMIT from the reader; ERR_FORMAT for missing or inconsistent
 * hyperparameters or tensor shapes (for rank pooling also a file with neither `cls.weight`
 * nor `cls.output.weight`); ERR_UNSUPPORTED for another architecture, a tensor type without
 * kernels, or rank pooling on nomic-bert; ERR_INVALID for bad params; ERR_NOMEM. err names
 * the key or tensor. Allocates the batch scratch (n_batch_tokens rows of every activation)
 * and a 64K-entry GELU table. On success *out is the caller's; free with engine_encoder_free. */
int engine_encoder_load(const char *path, const struct engine_encoder_params *p,
                        struct engine_encoder **out, struct errmsg *err);

/* Unmaps and frees. NULL is a no-op. */
void engine_encoder_free(struct engine_encoder *e);

/* Borrowed; valid until engine_encoder_free(). Thread-safe. Cannot fail. */
const struct engine_encoder_info *engine_encoder_info(const struct engine_encoder *e);

/* The encoder's GGUF reader, for the vocabulary. Borrowed; valid until engine_encoder_free();
 * read-only, so any thread may use it. */
const struct gguf *engine_encoder_gguf(const struct engine_encoder *e);

/* Embeds n_inputs token sequences in one forward pass: weight matrices run over the stacked
 * tokens of every input, attention runs within each input (bidirectional). inputs[i] holds
 * n_tokens[i] ids (borrowed for the call), usually [CLS] … [SEP] from the tokenizer; token
 * type 0 and positions 0..n-1 are used. out receives n_inputs rows of info.n_out floats: each
 * pooled and L2-normalized (a zero vector stays zero); with pooling none one row per token
 * instead (every input's tokens in order), unnormalized; with rank pooling the scores of the
 * classification head, raw (tanh(cls * h + b) then cls.output, as far as the file has them;
 * the first n_cls_out values when it has no cls.output). tp runs the kernels (any size).
 * Errors, checked before any work: ERR_INVALID (n_inputs < 1, an input with no tokens, a token
 * id outside the vocabulary; err says which input), ERR_LIMIT (an input longer than
 * n_ctx_train, or more than n_batch_tokens tokens in total; the caller splits the batch).
 * Allocates nothing (the kernel threads use about 75 KB of stack each for attention). Not
 * reentrant: one thread at a time per encoder (the scratch belongs to it). An input's vector
 * does not depend on the other inputs of the batch nor on the thread count: the bits are the
 * same as embedding it alone. */
int engine_encoder_embed(struct engine_encoder *e, struct threadpool *tp,
                         const int32_t *const *inputs, const int *n_tokens, int n_inputs,
                         float *out, struct errmsg *err);

#endif
