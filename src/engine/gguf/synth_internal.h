/* The builder state and tensor helpers of the synthetic models, shared by synth.c (the
 * transformer families) and synth_hybrid.c (the recurrent layers of hybrid families).
 * Internal to engine/gguf. */
#ifndef ENGINE_SYNTH_INTERNAL_H
#define ENGINE_SYNTH_INTERNAL_H

#include "engine/gguf/synth.h"

#include <stdbool.h>
#include <stdint.h>

struct synth {
    const struct synth_params *p;
    struct gguf_writer *w;
    struct errmsg *err;
    uint32_t type; // base weight type
    bool is_mix;   // Q4_K_M
    uint64_t rng;
    int head_dim;
    int n_rot;    // rotated dims per head (phi3: three quarters, even)
    int n_swa;    // resolved window, 0: none
    int n_expert; // resolved expert counts (mixture-of-experts families)
    int n_expert_used;
    float (*row_gain)(int row); // set while the output matrix is written: row i is scaled by it
    int ssm_state, ssm_heads, ssm_groups; // resolved hybrid state sizes (synth_hybrid_resolve)
};

/* A tensor of n_out rows of n_in values uniform in [-scale, scale] + offset, stored as type
 * (made to fit the row length). ERR_UNSUPPORTED, ERR_INVALID, ERR_NOMEM; err says which. */
int synth_add_tensor(struct synth *s, const char *name, int64_t n_in, int64_t n_out, uint32_t type,
                     float scale, float offset);

/* A stack of n_expert weight matrices [n_in, n_out, n_expert], each like synth_add_mat. As
 * synth_add_tensor. */
int synth_add_experts(struct synth *s, const char *name, int64_t n_in, int64_t n_out, int n_expert);

/* An F32 vector of n values uniform in [-scale, scale] + offset. As synth_add_tensor. */
int synth_add_vec(struct synth *s, const char *name, int64_t n, float scale, float offset);

/* A weight matrix with standard deviation 1 / sqrt(n_in). As synth_add_tensor. */
int synth_add_mat(struct synth *s, const char *name, int64_t n_in, int64_t n_out, uint32_t type);

/* <arch>.<suffix> keys. What gguf_writer returns. */
int synth_add_key_u32(struct synth *s, const char *suffix, uint32_t v);
int synth_add_key_f32(struct synth *s, const char *suffix, float v);

/* The built-in tokenizer (synth_vocab.c): SPM-style with ChatML for decoders, WordPiece for
 * bert, p->n_vocab tokens. ERR_LIMIT, ERR_NOMEM, or what gguf_writer returns. */
int synth_add_builtin_vocab(struct synth *s, bool is_bert);

/* Every tokenizer.* key of p->vocab_from. What the reader or gguf_writer returns. */
int synth_copy_vocab(struct synth *s);

/* Resolves a hybrid's state sizes from p (0: derived from the widths) into s. ERR_INVALID
 * (sizes that do not divide each other); err says which. */
int synth_hybrid_resolve(struct synth *s, struct errmsg *err);

/* Whether the architecture is a hybrid with recurrent layers (synth_hybrid.c). */
bool synth_is_hybrid(const char *arch);

/* Whether layer il of a hybrid recurs (the others attend). */
bool synth_hybrid_layer_recurs(const struct synth *s, int il);

/* The hybrid's own keys (layer kinds, convolution size). As synth_add_tensor. */
int synth_hybrid_keys(struct synth *s);

/* Layer il's recurrent block (its norm comes from the caller). As synth_add_tensor. */
int synth_hybrid_layer(struct synth *s, int il);

/* A nemotron_h layer, which is one block (Mamba-2, attention or a ReLU^2 FFN) under its
 * attn_norm. As synth_add_tensor. */
int synth_hybrid_single_block_layer(struct synth *s, int il);

/* Blocks after the decoder's that block_count counts (qwen35's next-token prediction). */
int synth_hybrid_extra_blocks(const struct synth *s);

/* Such a block's own tensors beyond an attention layer's. As synth_add_tensor. */
int synth_hybrid_extra_block(struct synth *s, int il);

#endif
