/* Synthetic model builder. Weight types follow the GGUF ecosystem's quantizer rules where they
 * matter for benchmarks: a type whose block does not divide a row falls back (Q4_K -> Q5_0,
 * Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, else F16), and the Q4_K_M mix puts Q6_K on
 * the output (or tied embeddings) and on attn_v / ffn_down of the "more bits" layers. */
#include "engine/gguf/synth.h"

#include "engine/gguf/synth_internal.h"
#include "engine/kernels.h"
#include "engine/quants/quants.h"
#include "engine/gguf/synth_words.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HEAD_DIM_SYNTH_MAX 512

struct synth_params synth_params_default(void)
{
    struct synth_params p = {
        .arch = "llama",
        .n_layer = 2,
        .n_embd = 64,
        .n_head = 4,
        .n_head_kv = 2,
        .n_ff = 128,
        .n_ctx = 256,
        .rope_base = 10000.0f,
        .norm_eps = 1e-5f,
        .type = "f32",
        .seed = 1,
        .pooling_type = -1,
        .n_swa = -1,
    };
    return p;
}

/* ---- deterministic random numbers (splitmix64) ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_unit(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* ---- tensor types ---- */

static const struct {
    const char *name;
    uint32_t type;
} type_names[] = {
    {"f32", QUANT_F32},       {"f16", QUANT_F16},     {"bf16", QUANT_BF16},
    {"q8_0", QUANT_Q8_0},     {"q4_0", QUANT_Q4_0},   {"q4_1", QUANT_Q4_1},
    {"q5_0", QUANT_Q5_0},     {"q5_1", QUANT_Q5_1},   {"q2_k", QUANT_Q2_K},
    {"q3_k", QUANT_Q3_K},     {"q4_k", QUANT_Q4_K},   {"q5_k", QUANT_Q5_K},
    {"q6_k", QUANT_Q6_K},     {"q4_k_m", QUANT_Q4_K}, {"iq4_nl", QUANT_IQ4_NL},
    {"iq4_xs", QUANT_IQ4_XS}, {"mxfp4", QUANT_MXFP4},
};

static bool parse_type(const char *s, uint32_t *type, bool *is_mix)
{
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++) {
        if (strcasecmp(s, type_names[i].name) == 0) {
            *type = type_names[i].type;
            *is_mix = strcasecmp(s, "q4_k_m") == 0;
            return true;
        }
    }
    return false;
}

static uint32_t fit_type(uint32_t type, int64_t n_in)
{
    const struct quant_traits *tr = quant_traits_of(type);
    if (tr && n_in % tr->block_len == 0) return type;
    uint32_t fb;
    switch (type) {
    case QUANT_Q2_K:
    case QUANT_Q3_K:
        fb = QUANT_Q4_0;
        break;
    case QUANT_Q4_K:
        fb = QUANT_Q5_0;
        break;
    case QUANT_Q5_K:
        fb = QUANT_Q5_1;
        break;
    case QUANT_Q6_K:
        fb = QUANT_Q8_0;
        break;
    case QUANT_IQ4_XS:
        fb = QUANT_IQ4_NL;
        break;
    default:
        fb = QUANT_F16;
        break;
    }
    tr = quant_traits_of(fb);
    return tr && n_in % tr->block_len == 0 ? fb : QUANT_F16;
}

/* The mix's "more bits" layers: the first and last eighth and every third in between. */
static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* Adds a tensor of n_out rows of n_in values uniform in [-scale, scale] + offset, stored as
 * type (made to fit the row length). */
int synth_add_tensor(struct synth *s, const char *name, int64_t n_in, int64_t n_out, uint32_t type,
                     float scale, float offset)
{
    const int64_t n = n_in * n_out;
    type = fit_type(type, n_in);
    const struct quant_traits *tr = quant_traits_of(type);
    if (!tr || !tr->from_float)
        return errmsg_set(s->err, ERR_UNSUPPORTED, "tensor '%s': no quantizer for type %u", name,
                          type);
    size_t row_bytes;
    if (quant_row_bytes(type, n_in, &row_bytes) != ERR_OK)
        return errmsg_set(s->err, ERR_INVALID, "tensor '%s': bad row length", name);
    float *x = mem_alloc((size_t)n * sizeof *x);
    void *q = mem_alloc(row_bytes * (size_t)n_out);
    int rc = ERR_NOMEM;
    if (x && q) {
        for (int64_t i = 0; i < n; i++)
            x[i] = offset + scale * rng_unit(&s->rng);
        for (int64_t i = 0; s->row_gain && i < n; i++)
            x[i] *= s->row_gain((int)(i / n_in));
        tr->from_float(x, q, n);
        int64_t ne[2] = {n_in, n_out};
        rc = gguf_writer_add_tensor(s->w, name, type, n_out > 1 ? 2 : 1, ne, q,
                                    row_bytes * (size_t)n_out);
    }
    mem_free(x);
    mem_free(q);
    if (rc != ERR_OK) return errmsg_set(s->err, rc, "tensor '%s': %s", name, err_str(rc));
    return ERR_OK;
}

int synth_add_vec(struct synth *s, const char *name, int64_t n, float scale, float offset)
{
    return synth_add_tensor(s, name, n, 1, QUANT_F32, scale, offset);
}

/* A weight matrix: uniform with standard deviation 1 / sqrt(n_in). */
int synth_add_mat(struct synth *s, const char *name, int64_t n_in, int64_t n_out, uint32_t type)
{
    return synth_add_tensor(s, name, n_in, n_out, type, sqrtf(3.0f / (float)n_in), 0.0f);
}

/* A stack of n_expert weight matrices [n_in, n_out, n_expert] (each expert like add_mat). */
int synth_add_experts(struct synth *s, const char *name, int64_t n_in, int64_t n_out, int n_expert)
{
    const uint32_t type = fit_type(s->type, n_in);
    const struct quant_traits *tr = quant_traits_of(type);
    size_t row_bytes;
    if (!tr || !tr->from_float || quant_row_bytes(type, n_in, &row_bytes) != ERR_OK)
        return errmsg_set(s->err, ERR_UNSUPPORTED, "tensor '%s': no quantizer for type %u", name,
                          type);
    const int64_t n = n_in * n_out * n_expert;
    const float scale = sqrtf(3.0f / (float)n_in);
    float *x = mem_alloc((size_t)n * sizeof *x);
    void *q = mem_alloc(row_bytes * (size_t)(n_out * n_expert));
    int rc = ERR_NOMEM;
    if (x && q) {
        for (int64_t i = 0; i < n; i++)
            x[i] = scale * rng_unit(&s->rng);
        tr->from_float(x, q, n);
        int64_t ne[3] = {n_in, n_out, n_expert};
        rc = gguf_writer_add_tensor(s->w, name, type, 3, ne, q,
                                    row_bytes * (size_t)(n_out * n_expert));
    }
    mem_free(x);
    mem_free(q);
    if (rc != ERR_OK) return errmsg_set(s->err, rc, "tensor '%s': %s", name, err_str(rc));
    return ERR_OK;
}

static bool arch_is(const struct synth_params *p, const char *name)
{
    return strcmp(p->arch, name) == 0;
}

/* The mixture-of-experts families, and granitehybrid when experts are asked for (Granite
 * 4.0-H Tiny and Small have them, Micro not). */
static bool arch_is_moe(const struct synth_params *p)
{
    return arch_is(p, "qwen3moe") || arch_is(p, "olmoe") || arch_is(p, "granitemoe") ||
           arch_is(p, "gpt-oss") || arch_is(p, "qwen35moe") ||
           (arch_is(p, "granitehybrid") && p->n_expert > 0) || arch_is(p, "lfm2moe") ||
           arch_is(p, "nemotron_h_moe");
}

/* lfm2 and its mixture-of-experts form share their layers. */
static bool is_lfm2(const struct synth_params *p)
{
    return arch_is(p, "lfm2") || arch_is(p, "lfm2moe");
}

/* lfm2moe's first layer keeps a dense FFN (leading_dense_block_count), as the released
 * models' first layers do. */
#define LFM2MOE_DENSE_LEAD 1

/* Whether layer il routes its FFN through experts. */
static bool layer_is_moe(const struct synth_params *p, int il)
{
    return arch_is_moe(p) && !(arch_is(p, "lfm2moe") && il < LFM2MOE_DENSE_LEAD);
}

/* The families whose experts come with a shared expert. */
static bool has_shared_expert(const struct synth_params *p)
{
    return arch_is(p, "granitemoe") || arch_is(p, "qwen35moe") || arch_is(p, "granitehybrid") ||
           arch_is(p, "nemotron_h_moe");
}

/* qwen35 and qwen35moe share their layers. */
static bool is_qwen35(const struct synth_params *p)
{
    return arch_is(p, "qwen35") || arch_is(p, "qwen35moe");
}

/* The FFN of a mixture-of-experts layer: router (F32, as converters keep it), experts, and
 * granitemoe's shared expert (qwen35moe's with its sigmoid gate). */
static int add_moe_ffn(struct synth *s, int il)
{
    const struct synth_params *p = s->p;
    const int64_t e = p->n_embd, f = p->n_ff;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc = synth_add_tensor(s, NAME("ffn_gate_inp.weight"), e, s->n_expert, QUANT_F32,
                              sqrtf(3.0f / (float)e), 0.0f);
    if (rc == ERR_OK) rc = synth_add_experts(s, NAME("ffn_gate_exps.weight"), e, f, s->n_expert);
    if (rc == ERR_OK) rc = synth_add_experts(s, NAME("ffn_up_exps.weight"), e, f, s->n_expert);
    if (rc == ERR_OK) rc = synth_add_experts(s, NAME("ffn_down_exps.weight"), f, e, s->n_expert);
    if (rc == ERR_OK && arch_is(p, "gpt-oss")) { // biases of the router and of every expert
        rc = synth_add_vec(s, NAME("ffn_gate_inp.bias"), s->n_expert, 0.5f, 0.0f);
        if (rc == ERR_OK)
            rc = synth_add_tensor(s, NAME("ffn_gate_exps.bias"), f, s->n_expert, QUANT_F32, 0.1f,
                                  0.0f);
        if (rc == ERR_OK)
            rc = synth_add_tensor(s, NAME("ffn_up_exps.bias"), f, s->n_expert, QUANT_F32, 0.1f,
                                  0.0f);
        if (rc == ERR_OK)
            rc = synth_add_tensor(s, NAME("ffn_down_exps.bias"), e, s->n_expert, QUANT_F32, 0.1f,
                                  0.0f);
    }
    if (rc == ERR_OK && has_shared_expert(p)) {
        rc = synth_add_mat(s, NAME("ffn_gate_shexp.weight"), e, f, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ffn_up_shexp.weight"), e, f, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ffn_down_shexp.weight"), f, e, s->type);
    }
    if (rc == ERR_OK && arch_is(p, "lfm2moe")) // biases the choice, not the weights
        rc = synth_add_vec(s, NAME("exp_probs_b.bias"), s->n_expert, 0.2f, 0.0f);
    if (rc == ERR_OK && arch_is(p, "qwen35moe"))
        rc = synth_add_tensor(s, NAME("ffn_gate_inp_shexp.weight"), e, 1, QUANT_F32,
                              sqrtf(3.0f / (float)e), 0.0f);
#undef NAME
    return rc;
}

/* A decoder layer's attention block after its norm: Q, K, V (or fused), output, the family's
 * biases, q/k norms, sinks and post-attention norm. */
static int add_attn(struct synth *s, int il)
{
    const struct synth_params *p = s->p;
    const int64_t e = p->n_embd, qd = (int64_t)p->n_head * s->head_dim;
    const int64_t kvd = (int64_t)p->n_head_kv * s->head_dim;
    const uint32_t more = s->is_mix && use_more_bits(il, p->n_layer) ? QUANT_Q6_K : s->type;
    const bool is_oss = arch_is(p, "gpt-oss");
    const bool is_qwen2 = arch_is(p, "qwen2") || arch_is(p, "qwen2vl") || is_oss; // biased QKV
    const bool is_olmo = arch_is(p, "olmo2") || arch_is(p, "olmoe");
    const bool head_norms = arch_is(p, "qwen3") || arch_is(p, "gemma3") || arch_is(p, "qwen3moe") ||
                            is_lfm2(p) || is_qwen35(p);
    const bool post_norms = arch_is(p, "gemma2") || arch_is(p, "gemma3") || arch_is(p, "olmo2");
    char n[96];
    int rc = ERR_OK;
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    if (arch_is(p, "phi3")) {
        rc = synth_add_mat(s, NAME("attn_qkv.weight"), e, qd + 2 * kvd, s->type);
    } else {
        // qwen35's gated attention: each head's query, then its gate
        const int64_t q_rows = is_qwen35(p) ? 2 * qd : qd;
        rc = synth_add_mat(s, NAME("attn_q.weight"), e, q_rows, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_k.weight"), e, kvd, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_v.weight"), e, kvd, more);
    }
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_output.weight"), qd, e, s->type);
    if (rc == ERR_OK && is_qwen2) rc = synth_add_vec(s, NAME("attn_q.bias"), qd, 0.1f, 0.0f);
    if (rc == ERR_OK && is_qwen2) rc = synth_add_vec(s, NAME("attn_k.bias"), kvd, 0.1f, 0.0f);
    if (rc == ERR_OK && is_qwen2) rc = synth_add_vec(s, NAME("attn_v.bias"), kvd, 0.1f, 0.0f);
    if (rc == ERR_OK && (head_norms || is_olmo))
        rc = synth_add_vec(s, NAME("attn_q_norm.weight"), is_olmo ? qd : s->head_dim, 0.1f, 1.0f);
    if (rc == ERR_OK && (head_norms || is_olmo))
        rc = synth_add_vec(s, NAME("attn_k_norm.weight"), is_olmo ? kvd : s->head_dim, 0.1f, 1.0f);
    if (rc == ERR_OK && is_oss) rc = synth_add_vec(s, NAME("attn_output.bias"), e, 0.1f, 0.0f);
    if (rc == ERR_OK && is_oss)
        rc = synth_add_vec(s, NAME("attn_sinks.weight"), p->n_head, 1.0f, 0.0f);
    // gpt-oss calls its FFN norm post_attention_norm
    if (rc == ERR_OK && (post_norms || is_oss))
        rc = synth_add_vec(s, NAME("post_attention_norm.weight"), e, 0.1f, 1.0f);
#undef NAME
    return rc;
}

static int add_layer_decoder(struct synth *s, int il)
{
    const struct synth_params *p = s->p;
    const int64_t e = p->n_embd, f = p->n_ff;
    const uint32_t more = s->is_mix && use_more_bits(il, p->n_layer) ? QUANT_Q6_K : s->type;
    const bool is_oss = arch_is(p, "gpt-oss");
    // blocks beyond n_layer (next-token prediction) attend
    const bool recurs =
        synth_is_hybrid(p->arch) && il < p->n_layer && synth_hybrid_layer_recurs(s, il);
    const bool post_norms = arch_is(p, "gemma2") || arch_is(p, "gemma3") || arch_is(p, "olmo2");
    const bool pre_norms = !arch_is(p, "olmo2");
    // gpt-oss and qwen35 name their FFN norm post_attention_norm (gpt-oss writes it above)
    // and falcon-h1 without the .weight suffix
    const char *ffn_norm = is_qwen35(p)              ? "post_attention_norm.weight"
                           : arch_is(p, "falcon-h1") ? "ffn_norm"
                                                     : "ffn_norm.weight";
    char n[96];
    int rc = ERR_OK;
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    if (arch_is(p, "nemotron_h") || arch_is(p, "nemotron_h_moe"))
        return synth_hybrid_single_block_layer(s, il);
    if (pre_norms) rc = synth_add_vec(s, NAME("attn_norm.weight"), e, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = recurs ? synth_hybrid_layer(s, il) : add_attn(s, il);
    if (rc == ERR_OK && arch_is(p, "falcon-h1")) rc = add_attn(s, il); // beside the SSM
    if (arch_is(p, "mamba2")) return rc; // its layers are the mixer alone
    if (rc == ERR_OK && pre_norms && !is_oss) {
        snprintf(n, sizeof n, "blk.%d.%s", il, ffn_norm);
        rc = synth_add_vec(s, n, e, 0.1f, 1.0f);
    }
    if (rc == ERR_OK && layer_is_moe(p, il)) {
        rc = add_moe_ffn(s, il);
    } else if (rc == ERR_OK && arch_is(p, "phi3")) {
        rc = synth_add_mat(s, NAME("ffn_up.weight"), e, 2 * f, s->type);
    } else if (rc == ERR_OK) {
        rc = synth_add_mat(s, NAME("ffn_gate.weight"), e, f, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ffn_up.weight"), e, f, s->type);
    }
    if (rc == ERR_OK && !layer_is_moe(p, il))
        rc = synth_add_mat(s, NAME("ffn_down.weight"), f, e, more);
    if (rc == ERR_OK && post_norms)
        rc = synth_add_vec(s, NAME("post_ffw_norm.weight"), e, 0.1f, 1.0f);
#undef NAME
    return rc;
}

/* The encoder layout of the bert architecture (post-norm, biases everywhere). */
static int add_layer_bert(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd, f = s->p->n_ff;
    static const struct {
        const char *name;
        int kind; // 0: (e, e) matrix, 1: (e, f), 2: (f, e), 3: bias e, 4: bias f, 5: norm e
    } parts[] = {
        {"attn_q.weight", 0},
        {"attn_q.bias", 3},
        {"attn_k.weight", 0},
        {"attn_k.bias", 3},
        {"attn_v.weight", 0},
        {"attn_v.bias", 3},
        {"attn_output.weight", 0},
        {"attn_output.bias", 3},
        {"attn_output_norm.weight", 5},
        {"attn_output_norm.bias", 3},
        {"ffn_up.weight", 1},
        {"ffn_up.bias", 4},
        {"ffn_down.weight", 2},
        {"ffn_down.bias", 3},
        {"layer_output_norm.weight", 5},
        {"layer_output_norm.bias", 3},
    };
    char n[96];
    int rc = ERR_OK;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && rc == ERR_OK; i++) {
        snprintf(n, sizeof n, "blk.%d.%s", il, parts[i].name);
        switch (parts[i].kind) {
        case 0:
            rc = synth_add_mat(s, n, e, e, s->type);
            break;
        case 1:
            rc = synth_add_mat(s, n, e, f, s->type);
            break;
        case 2:
            rc = synth_add_mat(s, n, f, e, s->type);
            break;
        case 3:
            rc = synth_add_vec(s, n, e, 0.1f, 0.0f);
            break;
        case 4:
            rc = synth_add_vec(s, n, f, 0.1f, 0.0f);
            break;
        default:
            rc = synth_add_vec(s, n, e, 0.1f, 1.0f);
            break;
        }
    }
    return rc;
}

/* The classification head: bert's dense cls layer (tanh follows it) and the cls.output
 * projection; decoders (Qwen3-Reranker) have the projection only. */
static int add_head(struct synth *s, bool is_bert)
{
    const int64_t e = s->p->n_embd;
    int rc = ERR_OK;
    if (is_bert) {
        rc = synth_add_mat(s, "cls.weight", e, e, s->type);
        if (rc == ERR_OK) rc = synth_add_vec(s, "cls.bias", e, 0.1f, 0.0f);
    }
    if (rc == ERR_OK) rc = synth_add_mat(s, "cls.output.weight", e, s->p->n_cls_out, s->type);
    if (rc == ERR_OK && is_bert)
        rc = synth_add_vec(s, "cls.output.bias", s->p->n_cls_out, 0.1f, 0.0f);
    return rc;
}

static int add_globals(struct synth *s, bool is_bert)
{
    const struct synth_params *p = s->p;
    const int64_t e = p->n_embd;
    // Tied embeddings serve as the output matrix, so the mix gives them the output's type.
    const uint32_t emb_type = s->is_mix && p->tied ? QUANT_Q6_K : s->type;
    int rc = synth_add_tensor(s, "token_embd.weight", e, p->n_vocab, emb_type, 1.0f, 0.0f);
    if (rc == ERR_OK && is_bert) {
        rc = synth_add_tensor(s, "token_types.weight", e, 2, QUANT_F32, 0.1f, 0.0f);
        if (rc == ERR_OK)
            rc = synth_add_tensor(s, "position_embd.weight", e, p->n_ctx, QUANT_F32, 0.1f, 0.0f);
        if (rc == ERR_OK) rc = synth_add_vec(s, "token_embd_norm.weight", e, 0.1f, 1.0f);
        if (rc == ERR_OK) rc = synth_add_vec(s, "token_embd_norm.bias", e, 0.1f, 0.0f);
        return rc;
    }
    // lfm2's converter names the final norm token_embd_norm
    const char *out_norm = is_lfm2(p) ? "token_embd_norm.weight" : "output_norm.weight";
    if (rc == ERR_OK) rc = synth_add_vec(s, out_norm, e, 0.1f, 1.0f);
    if (p->is_words_vocab) s->row_gain = synth_words_output_gain;
    if (rc == ERR_OK && !p->tied)
        rc = synth_add_mat(s, "output.weight", e, p->n_vocab, s->is_mix ? QUANT_Q6_K : s->type);
    s->row_gain = NULL;
    if (rc == ERR_OK && arch_is(p, "phi3")) {
        // LongRoPE divisors: near 1 for short contexts, growing with the pair for long ones.
        const int half = s->n_rot / 2;
        float f[HEAD_DIM_SYNTH_MAX / 2];
        for (int i = 0; i < half; i++)
            f[i] = 1.0f + 0.05f * (float)i;
        int64_t ne[1] = {half};
        rc = gguf_writer_add_tensor(s->w, "rope_factors_short.weight", QUANT_F32, 1, ne, f,
                                    (size_t)half * sizeof(float));
        for (int i = 0; i < half; i++)
            f[i] = 1.0f + 3.0f * (float)i / (float)(half > 1 ? half - 1 : 1);
        if (rc == ERR_OK)
            rc = gguf_writer_add_tensor(s->w, "rope_factors_long.weight", QUANT_F32, 1, ne, f,
                                        (size_t)half * sizeof(float));
        if (rc != ERR_OK) errmsg_set(s->err, rc, "rope factors: %s", err_str(rc));
    }
    return rc;
}

/* ---- metadata ---- */

int synth_add_key_u32(struct synth *s, const char *suffix, uint32_t v)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", s->p->arch, suffix);
    return gguf_writer_add_u32(s->w, key, v);
}

int synth_add_key_f32(struct synth *s, const char *suffix, float v)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", s->p->arch, suffix);
    return gguf_writer_add_f32(s->w, key, v);
}

/* The keys that make each family itself (see synth.h for the choices). */
static int add_family_keys(struct synth *s)
{
    const struct synth_params *p = s->p;
    int rc = ERR_OK;
    if (s->n_swa > 0) rc = synth_add_key_u32(s, "attention.sliding_window", (uint32_t)s->n_swa);
    if (s->n_swa > 0 && !is_lfm2(p)) { // lfm2's attention layers all slide
        // layers alternate: even ones slide, odd ones are global
        uint8_t *pat = mem_alloc((size_t)p->n_layer);
        if (!pat) return ERR_NOMEM;
        for (int il = 0; il < p->n_layer; il++)
            pat[il] = il % 2 == 0;
        char key[96];
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", p->arch);
        if (rc == ERR_OK) rc = gguf_writer_add_arr(s->w, key, GGUF_VALUE_BOOL, pat, p->n_layer);
        mem_free(pat);
    }
    if (rc == ERR_OK && arch_is(p, "qwen2vl")) {
        // M-RoPE sections over the rotated pairs, split as Qwen2.5-VL's [16, 24, 24, 0] of 64
        const int half = s->head_dim / 2, hw = 3 * half / 8;
        const int32_t sec[4] = {half - 2 * hw, hw, hw, 0};
        char key[96];
        snprintf(key, sizeof key, "%s.rope.dimension_sections", p->arch);
        rc = gguf_writer_add_arr(s->w, key, GGUF_VALUE_I32, sec, 4);
    }
    if (rc == ERR_OK && arch_is(p, "gemma2")) {
        // tied embeddings give logits of several units: a cap of 20 bends the largest
        rc = synth_add_key_f32(s, "attn_logit_softcapping", 4.0f);
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "final_logit_softcapping", 20.0f);
    }
    if (rc == ERR_OK && arch_is(p, "gemma3")) {
        rc = synth_add_key_f32(s, "final_logit_softcapping", 3.0f);
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "rope.freq_base_swa", p->rope_base);
        if (rc == ERR_OK) rc = gguf_writer_add_str(s->w, "gemma3.rope.scaling.type", "linear");
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "rope.scaling.factor", 2.0f);
    }
    if (rc == ERR_OK && arch_is(p, "phi3")) {
        rc = synth_add_key_f32(s, "rope.scaling.attn_factor", 1.19f);
        if (rc == ERR_OK)
            rc = synth_add_key_u32(s, "rope.scaling.original_context_length",
                                   (uint32_t)(p->n_ctx / 4));
    }
    if (rc == ERR_OK &&
        (arch_is(p, "granite") || arch_is(p, "granitemoe") || arch_is(p, "granitehybrid"))) {
        rc = synth_add_key_f32(s, "embedding_scale", 6.0f);
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "residual_scale", 0.5f);
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "attention.scale", 0.3f);
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "logit_scale", 2.5f);
    }
    if (rc == ERR_OK && arch_is(p, "granitehybrid")) // Granite 4.0-H: no RoPE
        rc = gguf_writer_add_bool(s->w, "granitehybrid.rope.scaling.finetuned", false);
    if (rc == ERR_OK && arch_is(p, "gpt-oss")) {
        char key[96];
        snprintf(key, sizeof key, "%s.rope.scaling.type", p->arch);
        rc = gguf_writer_add_str(s->w, key, "yarn");
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "rope.scaling.factor", 4.0f);
        if (rc == ERR_OK)
            rc = synth_add_key_u32(s, "rope.scaling.original_context_length",
                                   (uint32_t)(p->n_ctx / 4));
    }
    if (rc == ERR_OK && arch_is_moe(p)) {
        rc = synth_add_key_u32(s, "expert_count", (uint32_t)s->n_expert);
        if (rc == ERR_OK)
            rc = synth_add_key_u32(s, "expert_used_count", (uint32_t)s->n_expert_used);
        if (rc == ERR_OK)
            rc = synth_add_key_u32(s, "expert_feed_forward_length", (uint32_t)p->n_ff);
        if (rc == ERR_OK && has_shared_expert(p))
            rc = synth_add_key_u32(s, "expert_shared_feed_forward_length", (uint32_t)p->n_ff);
        if (rc == ERR_OK && arch_is(p, "lfm2moe")) // sigmoid gate
            rc = synth_add_key_u32(s, "expert_gating_func", 2);
        if (rc == ERR_OK && arch_is(p, "lfm2moe"))
            rc = synth_add_key_u32(s, "leading_dense_block_count", LFM2MOE_DENSE_LEAD);
    }
    return rc;
}

/* <arch>.classifier.output_labels: "LABEL_0" … as converted classifier heads name them. */
static int add_labels(struct synth *s)
{
    const int n = s->p->n_cls_out;
    char key[96], *text = mem_alloc((size_t)n * 16);
    struct str *labels = mem_alloc((size_t)n * sizeof *labels);
    int rc = ERR_NOMEM;
    if (text && labels) {
        for (int i = 0; i < n; i++) {
            int len = snprintf(text + (size_t)i * 16, 16, "LABEL_%d", i);
            labels[i] = (struct str){text + (size_t)i * 16, (size_t)len};
        }
        snprintf(key, sizeof key, "%s.classifier.output_labels", s->p->arch);
        rc = gguf_writer_add_arr_str(s->w, key, labels, n);
    }
    mem_free(text);
    mem_free(labels);
    return rc;
}

static int add_hparams(struct synth *s, bool is_bert)
{
    const struct synth_params *p = s->p;
    int rc = gguf_writer_add_str(s->w, "general.architecture", p->arch);
    if (rc == ERR_OK) rc = gguf_writer_add_str(s->w, "general.name", "synthetic");
    if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "general.quantization_version", 2);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "context_length", (uint32_t)p->n_ctx);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "embedding_length", (uint32_t)p->n_embd);
    const int n_block = p->n_layer + (synth_is_hybrid(p->arch) ? synth_hybrid_extra_blocks(s) : 0);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "block_count", (uint32_t)n_block);
    // mamba2 has neither FFN nor attention: its converter writes 0 for both
    const bool is_mamba2 = arch_is(p, "mamba2");
    if (rc == ERR_OK && !arch_is(p, "nemotron_h") && !arch_is(p, "nemotron_h_moe")) // per layer
        rc = synth_add_key_u32(s, "feed_forward_length", is_mamba2 ? 0 : (uint32_t)p->n_ff);
    if (rc == ERR_OK)
        rc = synth_add_key_u32(s, "attention.head_count", is_mamba2 ? 0 : (uint32_t)p->n_head);
    if (rc == ERR_OK && p->n_cls_out > 0) rc = add_labels(s);
    const int rank_or_none = p->n_cls_out > 0 ? 4 : -1;
    if (is_bert) {
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "attention.layer_norm_epsilon", p->norm_eps);
        const int pooling = p->pooling_type >= 0 ? p->pooling_type
                            : rank_or_none >= 0  ? rank_or_none
                                                 : 1; // mean
        if (rc == ERR_OK) rc = synth_add_key_u32(s, "pooling_type", (uint32_t)pooling);
        return rc;
    }
    const int pooling = p->pooling_type >= 0 ? p->pooling_type : rank_or_none;
    if (rc == ERR_OK && pooling >= 0) rc = synth_add_key_u32(s, "pooling_type", (uint32_t)pooling);
    if (rc == ERR_OK && !synth_is_hybrid(p->arch)) // hybrids give it per layer
        rc = synth_add_key_u32(s, "attention.head_count_kv", (uint32_t)p->n_head_kv);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "attention.key_length", (uint32_t)s->head_dim);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "attention.value_length", (uint32_t)s->head_dim);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "rope.dimension_count", (uint32_t)s->n_rot);
    // gemma3's global layers use a larger base than its sliding ones, as the real models do
    const float base = arch_is(p, "gemma3") ? p->rope_base * 100.0f : p->rope_base;
    if (rc == ERR_OK) rc = synth_add_key_f32(s, "rope.freq_base", base);
    if (rc == ERR_OK) rc = synth_add_key_f32(s, "attention.layer_norm_rms_epsilon", p->norm_eps);
    if (rc == ERR_OK) rc = add_family_keys(s);
    if (rc == ERR_OK && synth_is_hybrid(p->arch)) rc = synth_hybrid_keys(s);
    return rc;
}

/* ---- entry point ---- */

static const char *const decoder_archs[] = {
    "gpt-oss",       "llama",      "qwen2",   "qwen3",     "gemma2",        "gemma3",
    "phi3",          "granite",    "smollm3", "olmo2",     "qwen3moe",      "olmoe",
    "granitemoe",    "qwen2vl",    "lfm2",    "qwen35",    "qwen35moe",     "mamba2",
    "granitehybrid", "nemotron_h", "lfm2moe", "falcon-h1", "nemotron_h_moe"};

static int check_params(const struct synth_params *p, struct synth *s, struct errmsg *err)
{
    bool is_bert = p->arch && strcmp(p->arch, "bert") == 0, known = is_bert;
    for (size_t i = 0; p->arch && i < sizeof decoder_archs / sizeof decoder_archs[0]; i++)
        known |= strcmp(p->arch, decoder_archs[i]) == 0;
    if (!known)
        return errmsg_set(
            err, ERR_INVALID,
            "unknown arch '%s' (llama, qwen2, qwen2vl, qwen3, gemma2, gemma3, phi3, "
            "granite, smollm3, olmo2, qwen3moe, olmoe, granitemoe, gpt-oss, lfm2, qwen35, "
            "qwen35moe, mamba2, granitehybrid, nemotron_h, nemotron_h_moe, lfm2moe, falcon-h1, "
            "bert)",
            p->arch ? p->arch : "");
    if (!p->type || !parse_type(p->type, &s->type, &s->is_mix))
        return errmsg_set(err, ERR_INVALID, "unknown tensor type '%s'", p->type ? p->type : "");
    if (p->n_layer < 1 || p->n_embd < 1 || p->n_head < 1 || p->n_ff < 1 || p->n_ctx < 1 ||
        p->n_vocab < 1 || p->n_cls_out < 0 || p->n_cls_out > p->n_embd ||
        (!is_bert && (p->n_head_kv < 1 || p->n_head % p->n_head_kv != 0)))
        return errmsg_set(err, ERR_INVALID, "bad shape (every size >= 1, heads %% kv heads == 0)");
    s->head_dim = p->head_dim > 0 ? p->head_dim : p->n_embd / p->n_head;
    if (s->head_dim < 2 || s->head_dim % 2 != 0 || s->head_dim > HEAD_DIM_SYNTH_MAX ||
        (is_bert && s->head_dim * p->n_head != p->n_embd))
        return errmsg_set(err, ERR_INVALID, "head dimension %d must be even, 2..%d", s->head_dim,
                          HEAD_DIM_SYNTH_MAX);
    s->n_rot = s->head_dim;
    if (is_qwen35(p)) s->n_rot = (s->head_dim / 2) & ~1; // partial, as released
    if (strcmp(p->arch, "phi3") == 0) s->n_rot = (s->head_dim * 3 / 4) & ~1;
    const bool is_gemma = strcmp(p->arch, "gemma2") == 0 || strcmp(p->arch, "gemma3") == 0;
    const bool is_oss = strcmp(p->arch, "gpt-oss") == 0;
    const bool has_swa = is_gemma || is_oss || strcmp(p->arch, "olmo2") == 0 || is_lfm2(p);
    if (p->n_swa > 0 && !has_swa)
        return errmsg_set(err, ERR_INVALID,
                          "--swa applies to gemma2, gemma3, olmo2, gpt-oss and lfm2");
    s->n_swa = p->n_swa >= 0 ? p->n_swa : is_gemma || is_oss ? 8 : 0;
    if ((strcmp(p->arch, "gemma2") == 0 || is_oss) && s->n_swa == 0)
        return errmsg_set(err, ERR_INVALID, "%s always has a sliding window", p->arch);
    const bool is_moe = arch_is_moe(p);
    if (!is_moe && (p->n_expert > 0 || p->n_expert_used > 0))
        return errmsg_set(err, ERR_INVALID,
                          "--experts applies to qwen3moe, olmoe, granitemoe, gpt-oss, qwen35moe, "
                          "granitehybrid, lfm2moe, nemotron_h_moe");
    s->n_expert = p->n_expert > 0 ? p->n_expert : 8;
    s->n_expert_used = p->n_expert_used > 0 ? p->n_expert_used : 2;
    if (is_moe && (s->n_expert_used > s->n_expert || s->n_expert_used > 16))
        return errmsg_set(err, ERR_INVALID, "experts used %d must be <= experts %d and <= 16",
                          s->n_expert_used, s->n_expert);
    if (!synth_is_hybrid(p->arch) && (p->ssm_state || p->ssm_heads || p->ssm_groups))
        return errmsg_set(err, ERR_INVALID, "--ssm-* apply to the hybrid families");
    if (synth_is_hybrid(p->arch)) {
        int rc = synth_hybrid_resolve(s, err);
        if (rc != ERR_OK) return rc;
    }
    const bool is_olmo = strcmp(p->arch, "olmo2") == 0 || strcmp(p->arch, "olmoe") == 0;
    if (is_olmo && (p->n_head_kv != p->n_head || s->head_dim * p->n_head != p->n_embd))
        return errmsg_set(err, ERR_INVALID,
                          "%s needs heads-kv == heads and head-dim * heads == embd", p->arch);
    if (p->is_words_vocab && (is_bert || p->vocab_from))
        return errmsg_set(err, ERR_INVALID,
                          "the words vocabulary is for decoders, not with a copied one");
    if (!p->vocab_from && !p->is_words_vocab && p->n_vocab < synth_builtin_vocab_size(p->arch))
        return errmsg_set(err, ERR_INVALID, "vocab %d is below the built-in tokenizer's %d",
                          p->n_vocab, synth_builtin_vocab_size(p->arch));
    return ERR_OK;
}

int synth_build(const struct synth_params *params, struct gguf_writer **out, struct errmsg *err)
{
    struct synth_params p = *params;
    struct synth s = {.p = &p, .err = err, .rng = params->seed};
    enum gguf_value_type et;
    int64_t n_tok = 0;
    if (p.vocab_from &&
        gguf_get_arr(p.vocab_from, "tokenizer.ggml.tokens", &et, &n_tok) == ERR_OK &&
        p.n_vocab < n_tok)
        p.n_vocab = (int)n_tok; // the copied vocabulary decides
    if (p.is_words_vocab) p.n_vocab = synth_words_count();
    int rc = check_params(&p, &s, err);
    if (rc != ERR_OK) return rc;
    if (strcmp(p.arch, "gemma2") == 0) p.tied = true; // the family has no output matrix
    if (strcmp(p.arch, "olmo2") == 0 || strcmp(p.arch, "olmoe") == 0 ||
        strcmp(p.arch, "gpt-oss") == 0)
        p.tied = false;
    kernels_init();
    const bool is_bert = strcmp(p.arch, "bert") == 0;
    rc = gguf_writer_new(&s.w);
    if (rc != ERR_OK) return errmsg_set(err, rc, "out of memory");
    rc = add_hparams(&s, is_bert);
    if (rc == ERR_OK)
        rc = p.vocab_from       ? synth_copy_vocab(&s)
             : p.is_words_vocab ? synth_words_add(s.w)
                                : synth_add_builtin_vocab(&s, is_bert);
    if (rc != ERR_OK) errmsg_set(err, rc, "writing metadata: %s", err_str(rc));
    if (rc == ERR_OK) rc = add_globals(&s, is_bert);
    for (int il = 0; il < p.n_layer && rc == ERR_OK; il++)
        rc = is_bert ? add_layer_bert(&s, il) : add_layer_decoder(&s, il);
    const int n_extra = synth_is_hybrid(p.arch) ? synth_hybrid_extra_blocks(&s) : 0;
    for (int il = p.n_layer; il < p.n_layer + n_extra && rc == ERR_OK; il++) {
        rc = add_layer_decoder(&s, il);
        if (rc == ERR_OK) rc = synth_hybrid_extra_block(&s, il);
    }
    if (rc == ERR_OK && p.n_cls_out > 0) rc = add_head(&s, is_bert);
    if (rc != ERR_OK) {
        gguf_writer_free(s.w);
        return rc;
    }
    *out = s.w;
    return ERR_OK;
}
