/* Internals shared by bert.c (loading) and bert_forward.c (the forward pass). Never include
 * this from outside engine/. */
#ifndef ENGINE_BERT_INTERNAL_H
#define ENGINE_BERT_INTERNAL_H

#include "engine/bert/bert.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A weight matrix used in place from the mapping. */
struct bert_wmat {
    const void *data; // (n_out, n_in) rows of type
    uint32_t type;    // enum quant_type with a vec_dot
    int64_t n_in;     // elements per row (ne[0])
    int64_t n_out;    // rows (ne[1])
};

#define BERT_PLAN_MAX     3
#define BERT_HEAD_DIM_MAX 512 // attention keeps one head's accumulator on the stack

/* How one activation matrix is converted for the weights that read it: one slot per distinct
 * dot type. Fixed at load. */
struct bert_plan {
    int n_slots;
    uint32_t slot_type[BERT_PLAN_MAX]; // dot type of slot i
    size_t slot_row_bytes[BERT_PLAN_MAX];
    int n_w;
    const struct bert_wmat *w[BERT_PLAN_MAX];
    int w_slot[BERT_PLAN_MAX]; // slot of weight i
};

struct bert_layer {
    struct bert_wmat wq, wk, wv, wo;        // (n_embd, n_embd) each
    struct bert_wmat wqkv;                  // nomic-bert: fused (3 n_embd, n_embd), data NULL
                                            // when q/k/v are separate
    struct bert_wmat w_up, w_down;          // (n_ff, n_embd), (n_embd, n_ff)
    struct bert_wmat w_gate;                // nomic-bert: (n_ff, n_embd) SwiGLU gate, data
                                            // NULL for a GELU FFN
    const float *bq, *bk, *bv, *bo;         // optional biases (n_embd)
    const float *bqkv;                      // optional fused bias (3 n_embd)
    const float *b_up, *b_down;             // optional (n_ff), (n_embd)
    const float *attn_norm_w, *attn_norm_b; // attn_output_norm (n_embd)
    const float *out_norm_w, *out_norm_b;   // layer_output_norm (n_embd)
    struct bert_plan plan_qkv, plan_o, plan_up, plan_down;
};

/* Batch scratch, carved from one allocation at load (B = info.n_batch_tokens rows each).
 * Owned by the thread that calls engine_encoder_embed. */
struct bert_scratch {
    float *x;      // (B, n_embd) hidden state
    float *q;      // (B, n_embd)
    float *k, *v;  // (B, n_embd) projections before conversion
    uint16_t *k16; // (n_head, n_tok, head_dim) half-precision keys, head-major so one
                   // input's keys of one head are contiguous rows
    float *vt;     // per head, per input: (head_dim, n_i) values (rounded to half),
                   // transposed; head h, input i at (h * n_tok + in_start[i]) * head_dim
    float *attn;   // (B, n_embd) attention output
    float *proj;   // (B, n_embd) output of attn_output / ffn_down
    float *ff;     // (B, n_ff) FFN input (the gate's output with SwiGLU)
    float *ff_up;  // (B, n_ff) SwiGLU: the up projection; empty otherwise
    float *qkv;    // (B, 3 n_embd) fused projection output; empty when unused
    float *rope_cos, *rope_sin; // (B, n_rot / 2) per-token rotation tables; empty without RoPE
    void *slot[BERT_PLAN_MAX];  // (B, slot_row_cap) converted activations
    size_t slot_row_cap;
    int n_slots;        // slots any plan uses (the others are empty)
    int32_t *row_input; // (B) input of each computed row
    int32_t *in_start;  // (B + 1) first stacked token of each input; [n_inputs] = total
    int32_t *q_start;   // (B + 1) first query row of each input (in_start, or i once only
                        // the pooled rows remain)
};

/* Immutable after load, except scratch (see struct bert_scratch). */
struct engine_encoder {
    struct gguf *gguf;
    struct engine_encoder_info info;
    char arch_name[16];
    bool is_nomic;              // nomic-bert: RoPE instead of position embeddings, SwiGLU
    int n_rot;                  // nomic-bert: rotated dims per head (even); 0 for bert
    float rope_base;            // nomic-bert: <arch>.rope.freq_base
    struct bert_wmat tok_embd;  // (n_vocab, n_embd), rows looked up
    struct bert_wmat pos_embd;  // (n_pos, n_embd); data NULL for nomic-bert
    struct bert_wmat type_embd; // (n_types, n_embd); data NULL when absent (row 0 is used)
    const float *embd_norm_w, *embd_norm_b; // token_embd_norm (n_embd)
    struct bert_layer *layers;              // n_layer
    // Rank pooling's classification head; data NULL for a part the file does not have.
    struct bert_wmat cls;     // (n_embd, n_embd) dense layer before the tanh
    const float *cls_b;       // (n_embd) or NULL
    struct bert_wmat cls_out; // (n_cls_out, n_embd) output projection
    const float *cls_out_b;   // (n_cls_out) or NULL
    struct bert_plan plan_cls, plan_cls_out;
    float *gelu;  // (65536) tanh-GELU of every half value, rounded to half
    void **owned; // converted copies of small vectors, freed at unload
    int n_owned;
    void *scratch_mem;
    struct bert_scratch sc;
};

#endif
