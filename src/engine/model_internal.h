/* Internals shared by model.c (loading, sequences) and model_forward.c (the forward pass).
 * Never include this from outside engine/. */
#ifndef ENGINE_MODEL_INTERNAL_H
#define ENGINE_MODEL_INTERNAL_H

#include "engine/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum model_arch {
    MODEL_ARCH_LLAMA,
    MODEL_ARCH_QWEN2,
    MODEL_ARCH_QWEN3,
};

/* A weight matrix used in place from the mapping. */
struct wmat {
    const void *data; // (n_out, n_in) rows of type
    uint32_t type;    // enum quant_type with a vec_dot
    int64_t n_in;     // elements per row (ne[0])
    int64_t n_out;    // rows (ne[1])
};

#define QPLAN_MAX        3
#define HEAD_DIM_MAX_FWD 512 // attention keeps one head's accumulator on the stack

/* How one activation matrix is converted for the weights that consume it: each weight's dot
 * type gets one slot, shared by weights with the same dot type. Fixed at load. */
struct qplan {
    int n_slots;
    uint32_t slot_type[QPLAN_MAX]; // dot type of slot i
    size_t slot_row_bytes[QPLAN_MAX];
    uint32_t slot_round[QPLAN_MAX]; // QUANT_F16/QUANT_BF16: round F32 rows through it, else F32
    int n_w;
    const struct wmat *w[QPLAN_MAX];
    int w_slot[QPLAN_MAX]; // slot of weight i
};

struct layer {
    const float *attn_norm;           // (n_embd)
    const float *ffn_norm;            // (n_embd)
    struct wmat wq, wk, wv, wo;       // (q_dim, n_embd) (kv_dim, n_embd) x2, (n_embd, q_dim)
    struct wmat w_gate, w_up, w_down; // (n_ff, n_embd) x2, (n_embd, n_ff)
    const float *bq, *bk, *bv;        // optional biases (q_dim), (kv_dim), (kv_dim)
    const float *q_norm, *k_norm;     // qwen3: (head_dim) RMSNorm weights per head
    struct qplan plan_qkv, plan_o, plan_gu, plan_down;
};

/* Batch scratch, carved from one allocation at load (ENGINE_BATCH_MAX rows each). Owned by the
 * thread that calls engine_decode. */
struct scratch {
    float *x;                   // (B, n_embd) residual stream
    float *xn;                  // (B, n_embd) normed input of a matmul group
    float *q;                   // (B, q_dim)
    float *k, *v;               // (B, kv_dim)
    float *attn;                // (B, q_dim)
    float *proj;                // (B, n_embd) output of wo / w_down
    float *gate, *up;           // (B, n_ff)
    float *logits;              // (B, n_vocab) only the first n_items rows are used
    float *rope_cos, *rope_sin; // (B, n_rot / 2)
    void *slot[QPLAN_MAX];      // (B, slot_row_cap) quantized activations
    size_t slot_row_cap;
    int32_t *tok_item; // (B) item of each stacked token
    int32_t *tok_pos;  // (B) its position in its sequence
};

/* Immutable after load, except scratch (see struct scratch). */
struct engine_model {
    struct gguf *gguf;
    struct engine_model_info info;
    char arch_name[16];
    enum model_arch arch;
    bool rope_neox; // rotate (i, i + n_rot/2) pairs instead of (2i, 2i+1)
    int n_rot;      // rotated dims per head (even, <= head_dim)
    float rope_base;
    float rope_freq_scale;
    float norm_eps;
    int q_dim, kv_dim;    // n_head * head_dim, n_head_kv * head_dim
    struct wmat tok_embd; // (n_vocab, n_embd)
    struct wmat output;   // (n_vocab, n_embd), token_embd when tied
    const float *output_norm;
    const float *rope_freqs; // optional (n_rot / 2) frequency divisors
    struct qplan plan_out;
    struct layer *layers; // n_layer
    void **owned;         // converted copies of small vectors, freed at unload
    int n_owned;
    void *scratch_mem;
    struct scratch sc;
    enum engine_numerics numerics;
};

struct engine_seq {
    struct engine_model *m; // borrowed
    int n_ctx;
    int pos; // tokens in the cache
    bool has_logits;
    bool is_view;      // caches are borrowed (engine_seq_bind), no logits
    uint16_t *k_cache; // (n_layer, n_ctx, kv_dim) half bits
    uint16_t *v_cache; // (n_layer, n_ctx, kv_dim) half bits
    float *logits;     // (n_vocab), NULL for a view
};

#endif
