/* The recurrent layers of hybrid families in synthetic models.
 * lfm2: attention on every third layer from the second (1, 4, 7, ...), so a small model has
 * conv layers before, between and after attention (the last layer of a 4-layer model recurs);
 * short convolutions of 3 taps as the released models have, written per layer in
 * head_count_kv (0: recurrent).
 * qwen35: Gated DeltaNet layers with full attention on every second layer (the released models
 * use every fourth); delta-rule heads as wide as the attention heads, twice as many value heads
 * as key heads (time_step_rank a multiple of group_count), 4-tap convolutions; half of each
 * attention head rotated, in M-RoPE sections split as the released models split theirs; and
 * one next-token-prediction block after the decoder's, counted in block_count. qwen35moe is
 * qwen35 with synth.c's experts and a gated shared expert.
 * mamba2: every layer a Mamba-2 mixer and nothing else (no attention, no FFN), two groups.
 * granitehybrid: Mamba-2 layers with attention (no RoPE) on every third layer from the
 * second, as lfm2 places them, granite's multipliers, and an FFN in every layer.
 * nemotron_h: each layer one block, in a period of Mamba-2, FFN, attention, FFN (ReLU^2 FFNs
 * with biases, attention without RoPE), said per layer by head_count_kv and
 * feed_forward_length.
 * falcon-h1: attention and a Mamba-2 mixer side by side in every layer, then the FFN. */
#include "engine/gguf/synth_internal.h"

#include "engine/quants/quants.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define LFM2_L_CACHE    3
#define QWEN35_TAPS     4
#define QWEN35_INTERVAL 2 // full attention on layers 1, 3, ...

static bool is_qwen35(const struct synth *s)
{
    return strcmp(s->p->arch, "qwen35") == 0 || strcmp(s->p->arch, "qwen35moe") == 0;
}

static bool is_nemotron(const struct synth *s)
{
    return strcmp(s->p->arch, "nemotron_h") == 0 || strcmp(s->p->arch, "nemotron_h_moe") == 0;
}

static bool is_nemotron_moe(const struct synth *s)
{
    return strcmp(s->p->arch, "nemotron_h_moe") == 0;
}

static bool is_mamba2(const struct synth *s)
{
    return strcmp(s->p->arch, "mamba2") == 0 || strcmp(s->p->arch, "granitehybrid") == 0 ||
           is_nemotron(s) || strcmp(s->p->arch, "falcon-h1") == 0;
}

/* nemotron_h's layer kinds, in a period of four: Mamba-2, FFN, attention, FFN. */
enum nemo_kind { NEMO_MAMBA, NEMO_FFN, NEMO_ATTN };

static enum nemo_kind nemo_kind_of(int il)
{
    return il % 4 == 0 ? NEMO_MAMBA : il % 4 == 2 ? NEMO_ATTN : NEMO_FFN;
}

bool synth_is_hybrid(const char *arch)
{
    return arch && (strcmp(arch, "lfm2") == 0 || strcmp(arch, "lfm2moe") == 0 ||
                    strcmp(arch, "qwen35") == 0 || strcmp(arch, "qwen35moe") == 0 ||
                    strcmp(arch, "mamba2") == 0 || strcmp(arch, "granitehybrid") == 0 ||
                    strcmp(arch, "nemotron_h") == 0 || strcmp(arch, "falcon-h1") == 0 ||
                    strcmp(arch, "nemotron_h_moe") == 0);
}

bool synth_hybrid_layer_recurs(const struct synth *s, int il)
{
    if (is_qwen35(s)) return (il + 1) % QWEN35_INTERVAL != 0;
    if (strcmp(s->p->arch, "mamba2") == 0 || strcmp(s->p->arch, "falcon-h1") == 0) return true;
    if (is_nemotron(s)) return nemo_kind_of(il) == NEMO_MAMBA;
    return il % 3 != 1;
}

int synth_hybrid_extra_blocks(const struct synth *s)
{
    return is_qwen35(s) ? 1 : 0;
}

/* Mamba-2's sizes: an inner width of 2 * n_embd (as granitehybrid requires), 4-tap
 * convolutions; heads, groups sharing B and C and the state size from synth_hybrid_resolve. */
#define MAMBA2_TAPS 4

static int mamba2_keys(struct synth *s)
{
    const uint32_t d_inner = 2 * (uint32_t)s->p->n_embd;
    int rc = synth_add_key_u32(s, "ssm.conv_kernel", MAMBA2_TAPS);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.inner_size", d_inner);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.state_size", (uint32_t)s->ssm_state);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.time_step_rank", (uint32_t)s->ssm_heads);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.group_count", (uint32_t)s->ssm_groups);
    return rc;
}

static int lfm2_keys(struct synth *s)
{
    const struct synth_params *p = s->p;
    int32_t *kv = mem_alloc((size_t)p->n_layer * sizeof *kv);
    if (!kv) return ERR_NOMEM;
    for (int il = 0; il < p->n_layer; il++)
        kv[il] = synth_hybrid_layer_recurs(s, il) ? 0 : p->n_head_kv;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", p->arch);
    int rc = gguf_writer_add_arr(s->w, key, GGUF_VALUE_I32, kv, p->n_layer);
    mem_free(kv);
    if (rc == ERR_OK && !is_mamba2(s)) rc = synth_add_key_u32(s, "shortconv.l_cache", LFM2_L_CACHE);
    if (rc == ERR_OK && is_mamba2(s)) rc = mamba2_keys(s);
    return rc;
}

static int qwen35_keys(struct synth *s)
{
    const uint32_t d = (uint32_t)s->ssm_state;
    const int half = s->n_rot / 2;
    // each rotated pair in the temporal, height or width section (text takes one position)
    const int32_t sec[4] = {(half + 2) / 3, (half + 1) / 3, half / 3, 0};
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", s->p->arch);
    int rc = gguf_writer_add_arr(s->w, key, GGUF_VALUE_I32, sec, 4);
    if (rc == ERR_OK)
        rc = synth_add_key_u32(s, "attention.head_count_kv", (uint32_t)s->p->n_head_kv);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.conv_kernel", QWEN35_TAPS);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.state_size", d);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.group_count", (uint32_t)s->ssm_groups);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.time_step_rank", (uint32_t)s->ssm_heads);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "ssm.inner_size", d * (uint32_t)s->ssm_heads);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "full_attention_interval", QWEN35_INTERVAL);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "nextn_predict_layers", 1);
    return rc;
}

/* nemotron_h: per-layer head_count_kv and feed_forward_length say each layer's kind, and the
 * family requires the plain norm epsilon. */
static int nemotron_keys(struct synth *s)
{
    const struct synth_params *p = s->p;
    int32_t *kv = mem_alloc((size_t)p->n_layer * 2 * sizeof *kv);
    if (!kv) return ERR_NOMEM;
    int32_t *ff = kv + p->n_layer;
    for (int il = 0; il < p->n_layer; il++) {
        kv[il] = nemo_kind_of(il) == NEMO_ATTN ? p->n_head_kv : 0;
        ff[il] = nemo_kind_of(il) == NEMO_FFN ? p->n_ff : 0;
    }
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", p->arch);
    int rc = gguf_writer_add_arr(s->w, key, GGUF_VALUE_I32, kv, p->n_layer);
    snprintf(key, sizeof key, "%s.feed_forward_length", p->arch);
    if (rc == ERR_OK) rc = gguf_writer_add_arr(s->w, key, GGUF_VALUE_I32, ff, p->n_layer);
    mem_free(kv);
    if (rc == ERR_OK) rc = synth_add_key_f32(s, "attention.layer_norm_epsilon", p->norm_eps);
    if (rc == ERR_OK && is_nemotron_moe(s)) { // the experts' weights renormalized, then scaled
        rc = gguf_writer_add_bool(s->w, "nemotron_h_moe.expert_weights_norm", true);
        if (rc == ERR_OK) rc = synth_add_key_f32(s, "expert_weights_scale", 2.5f);
    }
    if (rc == ERR_OK) rc = mamba2_keys(s);
    return rc;
}

int synth_hybrid_resolve(struct synth *s, struct errmsg *err)
{
    const struct synth_params *p = s->p;
    if (p->ssm_state < 0 || p->ssm_heads < 0 || p->ssm_groups < 0)
        return errmsg_set(err, ERR_INVALID, "negative state size");
    if (is_qwen35(s)) {
        s->ssm_state = p->ssm_state ? p->ssm_state : s->head_dim < 128 ? s->head_dim : 128;
        s->ssm_heads = p->ssm_heads ? p->ssm_heads : p->n_embd / s->ssm_state;
        s->ssm_heads = s->ssm_heads > 0 ? s->ssm_heads : 1;
        s->ssm_groups = p->ssm_groups ? p->ssm_groups : s->ssm_heads > 1 ? s->ssm_heads / 2 : 1;
    } else if (is_mamba2(s)) {
        const int quarter = p->n_embd / 4 < 16 ? 16 : p->n_embd / 4;
        const int head = quarter < 64 ? quarter : 64;
        s->ssm_state = p->ssm_state ? p->ssm_state : quarter < 128 ? quarter : 128;
        s->ssm_heads = p->ssm_heads ? p->ssm_heads : 2 * p->n_embd / head;
        s->ssm_groups = p->ssm_groups ? p->ssm_groups : 2;
        if (s->ssm_heads < 1 || (2 * p->n_embd) % s->ssm_heads != 0)
            return errmsg_set(err, ERR_INVALID, "ssm heads %d must divide the inner width %d",
                              s->ssm_heads, 2 * p->n_embd);
    } else {
        return ERR_OK; // lfm2: its convolution has no such sizes
    }
    if (s->ssm_state < 1 || s->ssm_state > 256 || s->ssm_groups < 1 ||
        s->ssm_heads % s->ssm_groups != 0)
        return errmsg_set(err, ERR_INVALID,
                          "ssm state %d (1..256), heads %d and groups %d (dividing the heads)",
                          s->ssm_state, s->ssm_heads, s->ssm_groups);
    return ERR_OK;
}

int synth_hybrid_keys(struct synth *s)
{
    if (strcmp(s->p->arch, "mamba2") == 0) return mamba2_keys(s);
    if (is_nemotron(s)) return nemotron_keys(s);
    if (strcmp(s->p->arch, "falcon-h1") == 0) { // every layer attends too
        int rc = synth_add_key_u32(s, "attention.head_count_kv", (uint32_t)s->p->n_head_kv);
        return rc == ERR_OK ? mamba2_keys(s) : rc;
    }
    // granitehybrid gives its layer kinds as lfm2 does, in head_count_kv
    return is_qwen35(s) ? qwen35_keys(s) : lfm2_keys(s);
}

static int lfm2_layer(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc = synth_add_mat(s, NAME("shortconv.in_proj.weight"), e, 3 * e, s->type);
    // the taps stay F32 as converters keep them; about unit gain over the window
    if (rc == ERR_OK)
        rc = synth_add_tensor(s, NAME("shortconv.conv.weight"), LFM2_L_CACHE, e, QUANT_F32, 0.6f,
                              0.0f);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("shortconv.out_proj.weight"), e, e, s->type);
#undef NAME
    return rc;
}

static int qwen35_layer(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd, d = s->ssm_state, nv = s->ssm_heads;
    const int64_t key_dim = d * s->ssm_groups, d_inner = d * nv;
    const int64_t conv_ch = 2 * key_dim + d_inner;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc = synth_add_mat(s, NAME("attn_qkv.weight"), e, conv_ch, s->type);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_gate.weight"), e, d_inner, s->type);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ssm_beta.weight"), e, nv, s->type);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ssm_alpha.weight"), e, nv, s->type);
    if (rc == ERR_OK)
        rc = synth_add_tensor(s, NAME("ssm_conv1d.weight"), QWEN35_TAPS, conv_ch, QUANT_F32, 0.5f,
                              0.0f);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("ssm_dt.bias"), nv, 0.5f, 0.5f);
    // -exp(A_log): decay rates between -1.5 and -0.5
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("ssm_a"), nv, 0.5f, -1.0f);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("ssm_norm.weight"), d, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ssm_out.weight"), d_inner, e, s->type);
#undef NAME
    return rc;
}

static int mamba2_layer(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd, d_inner = 2 * e, nh = s->ssm_heads, ng = s->ssm_groups;
    const int64_t conv_ch = d_inner + 2 * ng * s->ssm_state;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc = synth_add_mat(s, NAME("ssm_in.weight"), e, d_inner + conv_ch + nh, s->type);
    if (rc == ERR_OK)
        rc = synth_add_tensor(s, NAME("ssm_conv1d.weight"), MAMBA2_TAPS, conv_ch, QUANT_F32, 0.5f,
                              0.0f);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("ssm_conv1d.bias"), conv_ch, 0.1f, 0.0f);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("ssm_dt.bias"), nh, 0.5f, -0.5f);
    // A = -exp(A_log) between -1.5 and -0.5, D near 1, as [1, heads] like the converters
    if (rc == ERR_OK) rc = synth_add_tensor(s, NAME("ssm_a"), 1, nh, QUANT_F32, 0.5f, -1.0f);
    if (rc == ERR_OK) rc = synth_add_tensor(s, NAME("ssm_d"), 1, nh, QUANT_F32, 0.5f, 1.0f);
    if (rc == ERR_OK)
        rc = synth_add_tensor(s, NAME("ssm_norm.weight"), d_inner / ng, ng, QUANT_F32, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ssm_out.weight"), d_inner, e, s->type);
#undef NAME
    return rc;
}

int synth_hybrid_layer(struct synth *s, int il)
{
    if (is_mamba2(s)) return mamba2_layer(s, il);
    return is_qwen35(s) ? qwen35_layer(s, il) : lfm2_layer(s, il);
}

/* nemotron_h_moe's expert FFN: router, selection biases, experts and a shared expert, each
 * up and down only (ReLU^2). */
static int relu2_experts(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd, f = s->p->n_ff;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc =
        synth_add_tensor(s, NAME("ffn_gate_inp.weight"), e, s->n_expert, QUANT_F32, 0.2f, 0.0f);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("exp_probs_b.bias"), s->n_expert, 0.2f, 0.0f);
    if (rc == ERR_OK) rc = synth_add_experts(s, NAME("ffn_up_exps.weight"), e, f, s->n_expert);
    if (rc == ERR_OK) rc = synth_add_experts(s, NAME("ffn_down_exps.weight"), f, e, s->n_expert);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ffn_up_shexp.weight"), e, f, s->type);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ffn_down_shexp.weight"), f, e, s->type);
#undef NAME
    return rc;
}

int synth_hybrid_single_block_layer(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd, f = s->p->n_ff, hd = s->head_dim;
    const int64_t qd = (int64_t)s->p->n_head * hd, kvd = (int64_t)s->p->n_head_kv * hd;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc = synth_add_vec(s, NAME("attn_norm.weight"), e, 0.1f, 1.0f);
    switch (nemo_kind_of(il)) {
    case NEMO_MAMBA:
        if (rc == ERR_OK) rc = mamba2_layer(s, il);
        break;
    case NEMO_ATTN: // no RoPE, no norms of its own
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_q.weight"), e, qd, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_k.weight"), e, kvd, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_v.weight"), e, kvd, s->type);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("attn_output.weight"), qd, e, s->type);
        break;
    case NEMO_FFN: // ReLU^2, no gate; its biases on (experts: sigmoid-routed, a shared one)
        if (rc == ERR_OK && is_nemotron_moe(s)) {
            rc = relu2_experts(s, il);
            break;
        }
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ffn_up.weight"), e, f, s->type);
        if (rc == ERR_OK) rc = synth_add_vec(s, NAME("ffn_up.bias"), f, 0.1f, 0.0f);
        if (rc == ERR_OK) rc = synth_add_mat(s, NAME("ffn_down.weight"), f, e, s->type);
        if (rc == ERR_OK) rc = synth_add_vec(s, NAME("ffn_down.bias"), e, 0.1f, 0.0f);
        break;
    }
#undef NAME
    return rc;
}

int synth_hybrid_extra_block(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc = synth_add_mat(s, NAME("nextn.eh_proj.weight"), 2 * e, e, s->type);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("nextn.enorm.weight"), e, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("nextn.hnorm.weight"), e, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = synth_add_vec(s, NAME("nextn.shared_head_norm.weight"), e, 0.1f, 1.0f);
#undef NAME
    return rc;
}
