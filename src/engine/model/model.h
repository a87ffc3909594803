/* Decoder-only transformer models (llama, qwen2, qwen3) loaded from GGUF: hyperparameters
 * from metadata, weights used in place from the read-only mapping, and sequences that each own
 * a KV cache. One engine_decode() call runs one forward pass over a batch of tokens drawn from
 * any number of sequences. Not a sampler (see sampler.h) and not a tokenizer (text/). */
#ifndef ENGINE_MODEL_H
#define ENGINE_MODEL_H

#include "engine/gguf/gguf.h"
#include "engine/threadpool.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tokens one engine_decode() call accepts in total over its items; callers chunk longer
 * prompts. Also exposed as engine_model_info.n_batch_max. */
#define ENGINE_BATCH_MAX 512

struct engine_model;
struct engine_seq;

/* Immutable after load. */
struct engine_model_info {
    const char *arch; // "llama", "qwen2", "qwen3"; borrowed from the model
    int n_vocab;      // rows of token_embd = logits per token
    int n_ctx_train;  // <arch>.context_length
    int n_embd;       // hidden width
    int n_layer;
    int n_head;                // query heads
    int n_head_kv;             // key/value heads (GQA when < n_head)
    int head_dim;              // <arch>.attention.key_length, default n_embd / n_head
    int n_ff;                  // feed-forward width
    int n_batch_max;           // ENGINE_BATCH_MAX
    int64_t n_params;          // weight elements over all tensors
    size_t file_size;          // bytes of the GGUF file
    size_t kv_bytes_per_token; // KV cache bytes one more context position costs (all layers,
                               // or the global ones when the others slide: their caches stop
                               // growing at n_swa + ENGINE_BATCH_MAX positions; recurrent
                               // layers of hybrids have none)
    size_t state_bytes;        // recurrent state of one sequence, any n_ctx (0 without
                               // recurrent layers); a sequence holds it n_checkpoints + 1 times
    int n_checkpoints;         // saved states a sequence keeps (engine_seq_checkpoint)
};

/* Loads and validates a model. ERR_IO / ERR_FORMAT / ERR_UNSUPPORTED / ERR_LIMIT from the
 * reader, ERR_FORMAT for missing or inconsistent hyperparameters or tensor shapes,
 * ERR_UNSUPPORTED for another architecture or a tensor type without kernels, ERR_NOMEM; err
 * names the key or tensor. Allocates the batch scratch for ENGINE_BATCH_MAX tokens. On
 * success *out is the caller's; free with engine_model_free() after every sequence. */
int engine_model_load(const char *path, struct engine_model **out, struct errmsg *err);

/* Unmaps and frees. All sequences of the model must have been freed. NULL is a no-op. */
void engine_model_free(struct engine_model *m);

/* How the forward pass orders its arithmetic (docs/NUMERICS.md).
 * - ENGINE_NUMERICS_INVARIANT (the default): batch invariance. A token's logits, hidden state
 *   and cache entries are the same bits whether it is decoded alone or beside other
 *   sequences, and whatever the chunking of its prompt (cold, after a cached prefix, in any
 *   chunk sizes). What a token's arithmetic may depend on is the token itself: prompt tokens
 *   sum float-weight products in the order the reference uses for a step of several tokens,
 *   sampled tokens (engine_batch_item.is_sampled) and the rows that only produce outputs in
 *   the order it uses for one token, and every query runs the tiled attention (attn.h) with
 *   the reference's single-pass arithmetic. A sequence decoded as the reference decodes it (a
 *   prompt of 2 to 63 tokens in one step, then one sampled token per step) gets its bits.
 * - ENGINE_NUMERICS_REFERENCE: the reference's x86 (AVX2) choices, which depend on the step:
 *   float-weight products sum one way for one token and another for several, and steps of 64
 *   tokens or more switch to the reference's tiled attention arithmetic. Results change with
 *   the batch as the reference's do.
 * Both run on every kernel set; each set is invariant on its own. */
enum engine_numerics {
    ENGINE_NUMERICS_INVARIANT = 0,
    ENGINE_NUMERICS_REFERENCE = 1,
};

/* Sets the model's numerics; engine_model_load starts with ENGINE_NUMERICS_REFERENCE when the
 * environment has LLAMAPI_NUMERICS=reference, else ENGINE_NUMERICS_INVARIANT. Not while a
 * decode runs (the caller's thread owns the model). Unknown values are ignored. Cannot fail. */
void engine_model_set_numerics(struct engine_model *m, enum engine_numerics numerics);

/* The model's numerics. Cannot fail. */
enum engine_numerics engine_model_numerics(const struct engine_model *m);

/* True when a sampled token leaves the same cache entries as the same token fed in a prompt,
 * so a prompt cache may reuse sampled positions for a later prompt without changing results:
 * in invariant numerics when no layer weight sums differently for the two (quantized weights;
 * F32 and F16 weights do), and always in reference numerics (which promise nothing across
 * batches). Cannot fail. */
bool engine_model_sampled_is_prompt(const struct engine_model *m);

/* Borrowed; valid until engine_model_free(). Thread-safe. Cannot fail. */
const struct engine_model_info *engine_model_info(const struct engine_model *m);

/* The model's GGUF reader, for vocabulary and chat template metadata. Borrowed; valid until
 * engine_model_free(); read-only, so any thread may use it. */
const struct gguf *engine_model_gguf(const struct engine_model *m);

/* Bytes a sequence of n_ctx positions allocates (KV cache, the recurrent state and its
 * checkpoints, logits and bookkeeping). 0 when n_ctx < 1 or the size overflows. Cannot fail
 * otherwise. */
size_t engine_seq_bytes(const struct engine_model *m, int n_ctx);

/* A new empty sequence with room for n_ctx tokens. Its KV cache is F16: half the memory and
 * bandwidth of F32, and the rounding the reference implementation applies by default, so
 * greedy outputs follow it. ERR_INVALID (n_ctx < 1 or above 1 << 24), ERR_NOMEM. The sequence
 * borrows m (which must outlive it); caller frees with engine_seq_free(). A sequence belongs to
 * the thread driving its model's decode loop. */
int engine_seq_new(struct engine_model *m, int n_ctx, struct engine_seq **out);

/* Frees the KV cache and scratch. NULL is a no-op. */
void engine_seq_free(struct engine_seq *s);

/* Tokens in the KV cache (the position the next token gets). Cannot fail. */
int engine_seq_pos(const struct engine_seq *s);

/* Capacity given to engine_seq_new(). Cannot fail. */
int engine_seq_n_ctx(const struct engine_seq *s);

/* Bytes of KV cache (keys and values, every attention layer, F16) n_ctx positions take
 * (sliding-window layers hold at most n_swa + ENGINE_BATCH_MAX of them), plus the recurrent
 * state of a hybrid (F32, no checkpoints): what engine_seq_bind needs. 0 when n_ctx < 1,
 * n_ctx > 1 << 24 or the size overflows. Cannot fail otherwise. */
size_t engine_kv_bytes(const struct engine_model *m, int n_ctx);

/* A sequence with no memory of its own, for inputs that are embedded and then forgotten:
 * engine_seq_bind() gives it a KV cache in caller memory before each use, so many short
 * sequences can share one allocation. It has no logits: a decode item on it must ask for
 * hidden states. ERR_NOMEM. Borrows m; caller frees with engine_seq_free() (which leaves the
 * bound memory alone). */
int engine_seq_new_view(struct engine_model *m, struct engine_seq **out);

/* Empties a view sequence and places its KV cache (and recurrent state) for n_ctx positions at
 * kv (kv_bytes >= engine_kv_bytes(m, n_ctx), 2-byte aligned, 4-byte with a recurrent state;
 * borrowed until the next bind or the free).
 * ERR_INVALID (not a view, n_ctx out of range, too few bytes, misaligned). Cannot fail
 * otherwise. */
int engine_seq_bind(struct engine_seq *s, void *kv, size_t kv_bytes, int n_ctx);

/* Keeps the first n_keep cached tokens and drops the rest (prompt-cache reuse; clamps n_keep to
 * 0..pos), or fewer: read engine_seq_pos afterwards. A model with sliding-window layers keeps
 * only the last n_swa + ENGINE_BATCH_MAX positions of those layers, so when the window before
 * n_keep has left them it keeps nothing. A hybrid's recurrent state cannot be cut back: below
 * pos it keeps the latest checkpoint at or before n_keep (engine_seq_checkpoint), else nothing,
 * and forgets the checkpoints beyond what it keeps. The logits of the last decode become
 * stale. Cannot fail. */
void engine_seq_truncate(struct engine_seq *s, int n_keep);

/* The position engine_seq_truncate(s, n_keep) would keep, changing nothing: a prompt cache
 * asks it to learn how much of a prefix an instance can reuse. Cannot fail. */
int engine_seq_keepable(const struct engine_seq *s, int n_keep);

/* Saves the recurrent state at the current position into the sequence's bounded set of
 * checkpoints (n_checkpoints of them: the same position again refreshes its copy, else an
 * empty slot, else the oldest is replaced), so a later truncation can come back to this
 * prefix: a continued conversation, a retry or another continuation of the same prompt. A
 * prompt cache takes them where prompts are likely to be shared: at chunk boundaries, a few
 * tokens before a prompt's end and at its end. No-op without recurrent layers, for a view, or
 * at position 0. Allocates nothing. Cannot fail. */
void engine_seq_checkpoint(struct engine_seq *s);

/* What a decode produces for one item. The hidden state of a token is the residual stream
 * after the last layer and output_norm: what the logits matrix would multiply. Asking only for
 * hidden states skips the logits product, the largest matmul of the pass. */
enum engine_output {
    ENGINE_OUTPUT_LOGITS = 0, // the last token's logits, kept in the sequence
    ENGINE_OUTPUT_LAST,       // the last token's hidden state, written to hidden
    ENGINE_OUTPUT_FIRST,      // the first token's hidden state, written to hidden
    ENGINE_OUTPUT_SUM,        // every token's hidden state added to hidden, in token order (so
                              // a sum over several chunked calls is the same at any chunking)
};

/* One sequence's share of a batch: its next tokens. */
struct engine_batch_item {
    struct engine_seq *seq;    // appended to at its current position; each seq at most once
    const int32_t *tokens;     // n_tokens ids, borrowed for the call; unused with embd
    int n_tokens;              // >= 1
    enum engine_output output; // zero: logits
    float *hidden;             // (n_embd) floats for the hidden-state outputs, else unused
    bool is_sampled;           // the tokens were sampled (generated), not prompt: they take
                               // the single-token summation order (ENGINE_NUMERICS_INVARIANT)
    const float *embd;         // NULL, or (n_tokens, n_embd) input embeddings used instead of
                               // token rows (a projector's image embeddings; not scaled by
                               // the family's embedding scale), borrowed for the call
    bool is_noncausal;         // every token of the item sees all of the item's tokens (Gemma
                               // 3's image embeddings); earlier positions as usual
    int grid_w, grid_h;        // 0, or an image's merged tokens in raster order: M-RoPE
                               // families give grid token (y, x) the rotary positions
                               // (b, b + y, b + x), b the sequence's next one, and then
                               // advance it by max(grid_w, grid_h); others ignore it
    int grid_first;            // the grid index of the item's first token: an image fed in
                               // parts, in order with nothing between (a part after the first
                               // finds b as the sequence's next rotary position less that
                               // advance); grid_first + n_tokens <= grid_w * grid_h
};

/* Appends each item's tokens to its sequence and runs one forward pass over all of them:
 * weight matrices are applied to the stacked tokens of every item at once, attention runs per
 * sequence over its own cache (causal, or both ways within an is_noncausal item). Afterwards
 * each ENGINE_OUTPUT_LOGITS item's sequence holds the logits of its last token (engine_seq_logits); the other items have their hidden
 * output written (the sequence's logits become stale). The logits product runs only when some
 * item wants logits, over every row kept for the batch's outputs. In invariant numerics a
 * token's results do not depend on the other items of the batch or on how its sequence was
 * split into calls (see enum engine_numerics). tp runs the kernels (any size; results are
 * bit-identical for every thread count). Errors, checked before anything changes (nothing is
 * appended): ERR_INVALID (no items, n_tokens < 1, neither tokens nor embd, a token id
 * outside the vocabulary, a sequence of another model or listed twice, an unknown output, a
 * hidden output without a buffer, logits asked of a view sequence; err says which), ERR_LIMIT
 * (more than ENGINE_BATCH_MAX tokens in total, or an item would overflow its sequence's
 * n_ctx).
 * Allocates nothing. Not reentrant:
 * one thread at a time per model (the model's scheduler thread), because the batch scratch
 * belongs to the model. */
int engine_decode(struct engine_model *m, struct threadpool *tp, struct engine_batch_item *items,
                  int n_items, struct errmsg *err);

/* n_vocab logits of the last token of the sequence's last decode (NULL before any decode or
 * after a truncate). Borrowed; valid until the next decode, truncate or free of the sequence. */
const float *engine_seq_logits(const struct engine_seq *s);

#endif
