/* Internals shared by model.c (loading, sequences) and model_forward.c (the forward pass).
 * Never include this from outside engine/. */
#ifndef ENGINE_MODEL_INTERNAL_H
#define ENGINE_MODEL_INTERNAL_H

#include "engine/model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum model_arch {
    MODEL_ARCH_LLAMA,
    MODEL_ARCH_QWEN2,
    MODEL_ARCH_QWEN3,
    MODEL_ARCH_GEMMA2,
    MODEL_ARCH_GEMMA3,
    MODEL_ARCH_PHI3,
    MODEL_ARCH_GRANITE,
    MODEL_ARCH_SMOLLM3,
    MODEL_ARCH_OLMO2,
    MODEL_ARCH_QWEN3MOE,
    MODEL_ARCH_OLMOE,
    MODEL_ARCH_GRANITEMOE,
    MODEL_ARCH_GPTOSS,
    MODEL_ARCH_LFM2,
    MODEL_ARCH_QWEN35,
    MODEL_ARCH_QWEN35MOE,
    MODEL_ARCH_MAMBA2,
    MODEL_ARCH_GRANITEHYBRID,
    MODEL_ARCH_NEMOTRON_H,
    MODEL_ARCH_LFM2MOE,
    MODEL_ARCH_FALCON_H1,
    MODEL_ARCH_NEMOTRON_H_MOE,
};

/* nemotron_h and its mixture-of-experts form share their layer kinds (model_recr.c). */
static inline bool model_arch_is_nemotron(enum model_arch a)
{
    return a == MODEL_ARCH_NEMOTRON_H || a == MODEL_ARCH_NEMOTRON_H_MOE;
}

/* lfm2 and its mixture-of-experts form share their layers (model_recr.c). */
static inline bool model_arch_is_lfm2(enum model_arch a)
{
    return a == MODEL_ARCH_LFM2 || a == MODEL_ARCH_LFM2MOE;
}

/* qwen35 and its mixture-of-experts form share their layers (model_gdn.c). */
static inline bool model_arch_is_qwen35(enum model_arch a)
{
    return a == MODEL_ARCH_QWEN35 || a == MODEL_ARCH_QWEN35MOE;
}

/* How a family differs from the llama graph, read at load (model_arch.c). Zero: llama. */
struct model_feat {
    float embd_scale;       // token embeddings times this (gemma sqrt(n_embd), granite), 0: none
    float q_scale;          // queries times this before attention (gemma, phi3), 0: none
    float kq_scale;         // attention score scale, 0: 1/sqrt(head_dim)
    float attn_softcap;     // scores become cap * tanh(s / cap), 0: none
    float final_softcap;    // logits likewise, 0: none
    float logit_div;        // logits divided by this (granite logit_scale), 0: none
    float residual_scale;   // attention and FFN outputs times this before the residual, 0: none
    float rope_attn_factor; // cos/sin times this (LongRoPE's attention factor), 0: 1
    bool no_pre_norm;       // olmo2: no attn_norm / ffn_norm before the blocks
    bool post_norms;        // RMSNorm of the attention and FFN outputs before the residual
    bool geglu;             // GELU (tanh form, half table) gate instead of SiLU
    bool qk_norm_full;      // q_norm / k_norm over the whole q / k row, not per head
    int n_swa;              // sliding window (keys a query sees, itself included), 0: none
    int nope_every;         // every Nth layer (1-based) has no RoPE, 0: all rotate
    float rope_base_swa;    // RoPE base of sliding-window layers
    int n_ctx_orig;         // LongRoPE: long factors when a sequence's n_ctx exceeds this
    int n_expert, n_expert_used;
    bool expert_norm;      // selected experts' weights renormalized to sum 1
    bool moe_sigmoid;      // lfm2moe: sigmoid gate, experts chosen by gate + exp_probs_b
    int n_dense_lead;      // lfm2moe: leading layers with a dense FFN instead of experts
    float expert_scale;    // their weights times this, 0: none
    int n_ff_exp;          // expert FFN width
    int n_ff_shexp;        // shared expert FFN width, 0: none
    bool softmax_selected; // gpt-oss: top-k on the router logits, softmax over the chosen k
    bool swiglu_oai;       // gpt-oss: clamped SwiGLU, x * sigmoid(1.702 x) * (up + 1)
    // YaRN (rope.scaling.type yarn): pairs ramp from interpolated to extrapolated angles
    bool is_yarn;
    float yarn_beta_fast, yarn_beta_slow;
    float yarn_attn_factor; // cos/sin multiplier before YaRN's own magnitude correction
    // M-RoPE (qwen2vl): frequency pairs turned by the temporal, height, width and extra
    // position, section by section (pair i is in section (i mod the sum)); all 0: plain RoPE
    bool is_mrope;
    int mrope[4];
    bool attn_gated; // qwen35: wq gives a query and a gate per head; output * sigmoid(gate)
    bool relu2_ffn;  // nemotron_h: FFN down(relu(up x)^2), no gate
};

/* A weight matrix used in place from the mapping. */
struct wmat {
    const void *data; // (n_out, n_in) rows of type
    uint32_t type;    // enum quant_type with a vec_dot
    int64_t n_in;     // elements per row (ne[0])
    int64_t n_out;    // rows (ne[1])
};

#define QPLAN_MAX        3
#define MOE_USED_MAX     16  // experts one token may use
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
    const float *attn_post_norm, *ffn_post_norm; // post_norms: (n_embd)
    const float *bo;                             // optional attn_output bias (n_embd)
    const float *sinks;                          // gpt-oss: (n_head) attention sink logits
    const float *gate_inp_b;                     // gpt-oss: (n_expert) router bias
    const float *exp_gate_b, *exp_up_b;          // gpt-oss: (n_expert, n_ff_exp) expert biases
    const float *exp_down_b;                     // gpt-oss: (n_expert, n_embd)
    const float *exp_probs_b;                    // lfm2moe: (n_expert) selection bias
    bool is_swa;                                 // sliding-window layer
    int kv_glob_before, kv_swa_before; // global / sliding-window layers before this one (their
                                       // caches come first in the sequence's K and V)
    bool has_rope;
    int rope_set; // which RoPE table (0 global, 1 sliding-window layers)
    // mixture of experts (n_expert > 0): the router, and per expert views into the 3-D tensors
    struct wmat gate_inp; // (n_expert, n_embd)
    struct wmat *exp_gate, *exp_up,
        *exp_down; // n_expert each, one allocation at exp_gate: (n_ff_exp, n_embd) x2, (n_embd, n_ff_exp)
    struct wmat sh_gate, sh_up, sh_down; // shared expert (n_ff_shexp > 0)
    struct wmat sh_gate_inp;             // qwen35moe: (1, n_embd) the shared expert's gate
    struct qplan plan_qkv, plan_o, plan_gu, plan_down;
    struct qplan plan_router, plan_exp_gu, plan_exp_down, plan_sh_gu, plan_sh_down;
    // recurrent layers of hybrid families (model_recr.c): no attention and no KV rows, a fixed
    // state per sequence instead
    bool is_recr;
    bool no_ffn;   // the layer is its mixer alone (mamba2, nemotron_h)
    bool no_mixer; // the layer is its FFN alone, normed by ffn_norm (nemotron_h)
    bool par_attn; // falcon-h1: attention beside the recurrent block, summed
    const float *ffn_up_b, *ffn_down_b; // optional dense FFN biases (n_ff), (n_embd)
    int recr_before;                    // recurrent layers before this one (its state's place)
    struct wmat conv_in;  // (recr_in_dim, n_embd): lfm2 rows b | c | x of the gated conv,
                          // qwen35 the conv channels (queries, keys, values)
    struct wmat conv_out; // (n_embd, recr_out_dim)
    const float *conv_w;  // (n_conv_ch, d_conv + 1) taps, oldest input first
    struct wmat gdn_z;    // qwen35: (recr_out_dim, n_embd) output gate
    struct wmat gdn_beta, gdn_alpha; // qwen35: (ssm_n_v_heads, n_embd) each
    const float *ssm_dt, *ssm_a;     // qwen35: (ssm_n_v_heads) decay bias and rate
    const float *ssm_norm;           // qwen35: (ssm_d_state) per-head output norm; Mamba-2:
                                     // (recr_out_dim) norm of each group's outputs
    const float *conv_b;             // Mamba-2: (n_conv_ch) conv bias, NULL: none
    const float *ssm_d;              // Mamba-2: (ssm_n_v_heads) skip weight of x
    struct qplan plan_conv_in, plan_conv_out, plan_ab;
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
    float *rope_cos, *rope_sin; // (2, B, n_rot / 2 + 1): global layers, then sliding-window ones
    float *moe_w;               // (B, n_expert_used) routing weights of the selected experts
    int32_t *moe_sel;           // (B, n_expert_used) selected experts, best first
    int32_t *moe_rows;          // (B * n_expert_used) token rows routed to the current expert
    float *moe_x;               // (B, n_embd) gathered normed rows of one expert
    float *moe_out;             // (B * n_expert_used, n_embd) each (token, slot)'s expert output
    float *router;              // (B, n_expert) router logits
    float *moe_sh;              // (B, n_embd) shared expert output
    float *moe_shg;             // (B) its gate's logit (qwen35moe)
    void *slot[QPLAN_MAX];      // (B, slot_row_cap) quantized activations
    size_t slot_row_cap;
    int32_t *tok_item; // (B) item of each stacked token
    int32_t *tok_pos;  // (B) its position in its sequence
    int32_t *tok_rpos; // (B, 3) M-RoPE: its temporal, height and width rotary positions
    float *recr_in;    // (B, recr_in_dim) a recurrent layer's input projection
    float *recr_y;     // (B, recr_out_dim) its gated output, before the output projection
    float *recr_z;     // qwen35: (B, recr_out_dim) the output gate
    float *recr_ab;    // qwen35: (2, B, ssm_n_v_heads) beta rows, then alpha rows
    float *recr_conv;  // qwen35: (B, n_conv_ch) conv + SiLU output
    float *qg;         // gated attention: (B, 2 * q_dim) each head's query then gate
    float *attn_gate;  // gated attention: (B, q_dim) the gates
    float *par_out;    // falcon-h1: (B, n_embd) the attention's output, while the SSM runs
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
    const float *rope_freqs;             // optional (n_rot / 2) frequency divisors
    const float *rope_long, *rope_short; // LongRoPE factors (n_rot / 2), phi3
    float rope_base_swa, rope_scale_swa;
    struct model_feat feat;
    int n_layer_swa; // layers with a sliding window (their caches hold swa_cap positions)
    struct qplan plan_out;
    struct layer *layers; // n_layer
    void **owned;         // converted copies of small vectors, freed at unload
    int n_owned;
    // hybrid families: recurrent layers and their per-sequence state (model_recr.c)
    int n_layer_recr;
    int n_layer_nokv;    // layers without attention (no KV rows): recurrent ones, FFN-only ones
    int d_conv;          // past inputs a short convolution keeps (its taps less one)
    int n_conv_ch;       // channels of the convolution
    int recr_in_dim;     // width of a recurrent layer's input projection
    int recr_out_dim;    // width of its output projection's input
    int ssm_d_state;     // qwen35: a delta-rule head's width (its state is its square)
    int ssm_n_k_heads;   // qwen35: query / key heads (ssm.group_count)
    int ssm_n_v_heads;   // qwen35: value heads (ssm.time_step_rank); Mamba-2: heads
    int ssm_n_groups;    // Mamba-2: groups sharing B and C (ssm.group_count)
    int ssm_head_dim;    // Mamba-2: channels per head (ssm.inner_size / heads)
    int conv_in_off;     // where the conv's channels start in a recr_in row (Mamba-2: after z)
    size_t recr_floats;  // state floats of one recurrent layer in one sequence
    size_t state_floats; // of all of them: n_layer_recr * recr_floats
    int n_ckpt;          // state checkpoints a sequence keeps (0 without recurrent layers)
    void *scratch_mem;
    struct scratch sc;
    enum engine_numerics numerics;
};

struct engine_seq {
    struct engine_model *m; // borrowed
    int n_ctx;
    int pos;     // tokens in the cache
    int swa_cap; // positions a sliding-window layer's cache holds (a ring: position p in slot
                 // p % swa_cap): min(n_ctx, n_swa + ENGINE_BATCH_MAX), n_ctx without windows
    bool has_logits;
    bool is_view;      // caches are borrowed (engine_seq_bind), no logits
    uint16_t *k_cache; // per layer (n_ctx or swa_cap, kv_dim) half bits, global layers first
    uint16_t *v_cache; // the same layout
    float *logits;     // (n_vocab), NULL for a view
    // M-RoPE families: a token's rotary position is not its cache row, since an image's
    // merged tokens share one temporal position and advance it by the grid's longer side.
    int rope_pos;       // the rotary position the next text token takes (pos otherwise)
    int32_t *rope_next; // (n_ctx) M-RoPE, own memory: rope_pos after each cached token
    // hybrid families: the recurrent layers' state after pos tokens, and saved copies of it
    // at earlier positions, so a truncation can go back to one of them (model_recr.c)
    float *state;      // (n_layer_recr, recr_floats), F32 as the reference keeps it
    float *ckpt;       // (n_ckpt, state_floats), own memory; NULL for a view
    int32_t *ckpt_pos; // (n_ckpt) position each checkpoint holds, -1: empty
    int ckpt_next;     // the slot the next checkpoint takes (oldest first)
};

/* Whether layer L attends (has KV rows). */
static inline bool layer_has_kv(const struct layer *L)
{
    return !L->no_mixer && (!L->is_recr || L->par_attn);
}

/* Elements before layer il's cache in a sequence's K (or V) cache: the global layers' caches
 * of n_ctx rows come first, then the sliding-window layers' rings of swa_cap rows. */
static inline size_t kv_layer_base(const struct engine_model *m, const struct engine_seq *s, int il)
{
    const struct layer *L = &m->layers[il];
    const size_t n_glob = (size_t)(m->info.n_layer - m->n_layer_swa - m->n_layer_nokv);
    const size_t rows =
        L->is_swa ? n_glob * (size_t)s->n_ctx + (size_t)L->kv_swa_before * (size_t)s->swa_cap
                  : (size_t)L->kv_glob_before * (size_t)s->n_ctx;
    return rows * (size_t)m->kv_dim;
}

/* The cache row of position pos in layer L. */
static inline size_t kv_row(const struct layer *L, const struct engine_seq *s, int pos)
{
    return L->is_swa ? (size_t)(pos % s->swa_cap) : (size_t)pos;
}

#endif
