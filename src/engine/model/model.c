/* Model loading: hyperparameters from <arch>.* metadata with the defaults the GGUF ecosystem
 * uses, every tensor located and shape-checked, scratch for one batch, and sequences with
 * their KV caches. The forward pass is in model_forward.c. */
#define _DEFAULT_SOURCE // madvise(MADV_DONTNEED)
#include "engine/model/model.h"

#include "engine/attn.h"
#include "engine/kernels.h"
#include "engine/matmul.h"
#include "engine/model/model_arch.h"
#include "engine/model/model_internal.h"
#include "engine/model/model_moe.h"
#include "engine/model/model_plan.h"
#include "engine/model/model_recr.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"
#include "engine/ssm.h"
#include "util/checked.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define N_EMBD_MAX   (1 << 16)
#define N_LAYER_MAX  1024
#define N_HEAD_MAX   1024
#define HEAD_DIM_MAX HEAD_DIM_MAX_FWD
#define N_FF_MAX     (1 << 20)
#define N_VOCAB_MAX  (1 << 24)
#define N_CTX_MAX    (1 << 24)

/* Hyperparameter reading context. */
struct hp {
    const struct gguf *g;
    const char *arch;
    struct errmsg *err;
};

/* <arch>.<suffix> as an int in [lo, hi]; def < 0 means required. */
static int hp_int(const struct hp *h, const char *suffix, int64_t def, int64_t lo, int64_t hi,
                  int *out)
{
    char key[96];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", h->arch, suffix);
    int rc = gguf_get_i64(h->g, key, &v);
    if (rc == ERR_NOT_FOUND) {
        if (def < 0) return errmsg_set(h->err, ERR_FORMAT, "missing key '%s'", key);
        v = def;
    } else if (rc != ERR_OK) {
        return errmsg_set(h->err, ERR_FORMAT, "key '%s': not an integer", key);
    }
    if (v < lo || v > hi)
        return errmsg_set(h->err, ERR_FORMAT, "key '%s': %lld is outside %lld..%lld", key,
                          (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return ERR_OK;
}

static int hp_float(const struct hp *h, const char *suffix, float def, bool required, float *out)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", h->arch, suffix);
    int rc = gguf_get_f32(h->g, key, out);
    if (rc == ERR_NOT_FOUND && !required) {
        *out = def;
        return ERR_OK;
    }
    if (rc == ERR_NOT_FOUND) return errmsg_set(h->err, ERR_FORMAT, "missing key '%s'", key);
    if (rc != ERR_OK || !(*out == *out))
        return errmsg_set(h->err, ERR_FORMAT, "key '%s': not a number", key);
    return ERR_OK;
}

static int load_rope_scaling(struct engine_model *m, const struct hp *h)
{
    char key[96];
    struct str type = {"none", 4};
    float factor = 0.0f;
    m->rope_freq_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", h->arch);
    (void)gguf_get_str(h->g, key, &type);
    int rc = hp_float(h, "rope.scaling.factor", 0.0f, false, &factor);
    if (rc == ERR_OK && factor == 0.0f)
        rc = hp_float(h, "rope.scale_linear", 0.0f, false, &factor); // older files
    if (rc != ERR_OK) return rc;
    if (str_eq_cstr(type, "none") || factor == 0.0f || factor == 1.0f) return ERR_OK;
    m->feat.is_yarn = str_eq_cstr(type, "yarn");
    if (!str_eq_cstr(type, "linear") && !m->feat.is_yarn)
        return errmsg_set(h->err, ERR_UNSUPPORTED, "rope scaling type '%.*s' is not supported",
                          (int)type.len, type.ptr);
    if (!(factor > 0.0f))
        return errmsg_set(h->err, ERR_FORMAT, "rope scaling factor %g is not positive",
                          (double)factor);
    m->rope_freq_scale = 1.0f / factor;
    return ERR_OK;
}

static int load_arch(struct engine_model *m, struct errmsg *err)
{
    struct str arch;
    if (gguf_get_str(m->gguf, "general.architecture", &arch) != ERR_OK)
        return errmsg_set(err, ERR_FORMAT, "missing key 'general.architecture'");
    static const struct {
        const char *name;
        enum model_arch arch;
        bool neox;
    } archs[] = {
        {"llama", MODEL_ARCH_LLAMA, false},
        {"qwen2", MODEL_ARCH_QWEN2, true},
        {"qwen3", MODEL_ARCH_QWEN3, true},
        {"gemma2", MODEL_ARCH_GEMMA2, true},
        {"gemma3", MODEL_ARCH_GEMMA3, true},
        {"phi3", MODEL_ARCH_PHI3, true},
        {"granite", MODEL_ARCH_GRANITE, false},
        {"smollm3", MODEL_ARCH_SMOLLM3, false},
        {"olmo2", MODEL_ARCH_OLMO2, true},
        {"qwen3moe", MODEL_ARCH_QWEN3MOE, true},
        {"olmoe", MODEL_ARCH_OLMOE, true},
        {"granitemoe", MODEL_ARCH_GRANITEMOE, false},
        {"gpt-oss", MODEL_ARCH_GPTOSS, true},
        {"qwen2vl", MODEL_ARCH_QWEN2, true}, // + M-RoPE
        {"lfm2", MODEL_ARCH_LFM2, true},
        {"lfm2moe", MODEL_ARCH_LFM2MOE, true},
        {"qwen35", MODEL_ARCH_QWEN35, true}, // + gated attn
        {"qwen35moe", MODEL_ARCH_QWEN35MOE, true},
        {"mamba2", MODEL_ARCH_MAMBA2, false},
        {"granitehybrid", MODEL_ARCH_GRANITEHYBRID, false},
        {"nemotron_h", MODEL_ARCH_NEMOTRON_H, false},
        {"nemotron_h_moe", MODEL_ARCH_NEMOTRON_H_MOE, false},
        {"falcon-h1", MODEL_ARCH_FALCON_H1, true},
    };
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        if (str_eq_cstr(arch, archs[i].name)) {
            snprintf(m->arch_name, sizeof m->arch_name, "%s", archs[i].name);
            m->arch = archs[i].arch;
            m->rope_neox = archs[i].neox;
            m->info.arch = m->arch_name;
            return ERR_OK;
        }
    }
    return errmsg_set(err, ERR_UNSUPPORTED, "architecture '%.*s' is not supported",
                      (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
}

/* The attention and FFN sizes: head counts (per layer for hybrids), widths, rotation. */
static int attn_hparams(struct engine_model *m, const struct hp *h, int *v_len)
{
    struct engine_model_info *in = &m->info;
    bool kv_is_array = false, ff_is_array = false; // hybrids give counts per layer (0: none)
    int rc = model_recr_ff(m, in->n_layer, &in->n_ff, &ff_is_array, h->err);
    if (rc == ERR_OK && !ff_is_array)
        rc = hp_int(h, "feed_forward_length", -1, 1, N_FF_MAX, &in->n_ff);
    if (rc == ERR_OK) rc = hp_int(h, "attention.head_count", -1, 1, N_HEAD_MAX, &in->n_head);
    if (rc == ERR_OK)
        rc = model_recr_head_kv(m, in->n_layer, in->n_head, &in->n_head_kv, &kv_is_array, h->err);
    if (rc == ERR_OK && !kv_is_array)
        rc = hp_int(h, "attention.head_count_kv", in->n_head, 1, in->n_head, &in->n_head_kv);
    if (rc == ERR_OK) rc = hp_int(h, "context_length", -1, 1, INT32_MAX, &in->n_ctx_train);
    if (rc == ERR_OK)
        rc = hp_int(h, "attention.key_length", in->n_embd / in->n_head, 1, HEAD_DIM_MAX,
                    &in->head_dim);
    if (rc == ERR_OK)
        rc = hp_int(h, "attention.value_length", in->head_dim, 1, HEAD_DIM_MAX, v_len);
    if (rc == ERR_OK)
        rc = hp_int(h, "rope.dimension_count", in->head_dim, 0, in->head_dim, &m->n_rot);
    return rc;
}

/* mamba2 has neither attention nor an FFN (its files say 0 for both): one head of width one
 * stands in for the sizes nothing uses, and nothing rotates. */
static int attn_free_hparams(struct engine_model *m, const struct hp *h, int *v_len)
{
    struct engine_model_info *in = &m->info;
    in->n_ff = 0;
    in->n_head = in->n_head_kv = in->head_dim = *v_len = 1;
    m->n_rot = 0;
    return hp_int(h, "context_length", -1, 1, INT32_MAX, &in->n_ctx_train);
}

static int load_hparams(struct engine_model *m, struct errmsg *err)
{
    struct engine_model_info *in = &m->info;
    const struct hp h = {.g = m->gguf, .arch = m->arch_name, .err = err};
    int n_expert = 0, v_len = 0;
    int rc = hp_int(&h, "embedding_length", -1, 1, N_EMBD_MAX, &in->n_embd);
    if (rc == ERR_OK) rc = hp_int(&h, "block_count", -1, 1, N_LAYER_MAX, &in->n_layer);
    // Next-token-prediction blocks (qwen35) follow the decoder's in block_count: they serve
    // speculative decoding, which the decoder does not run, so they are left in the file.
    int n_nextn = 0;
    if (rc == ERR_OK) rc = hp_int(&h, "nextn_predict_layers", 0, 0, in->n_layer - 1, &n_nextn);
    in->n_layer -= n_nextn;
    if (rc == ERR_OK && m->arch == MODEL_ARCH_MAMBA2)
        rc = attn_free_hparams(m, &h, &v_len);
    else if (rc == ERR_OK)
        rc = attn_hparams(m, &h, &v_len);
    if (rc == ERR_OK) rc = hp_int(&h, "expert_count", 0, 0, INT32_MAX, &n_expert);
    // nemotron_h requires the plain epsilon, which stands in for a missing RMS one
    float eps_ln = 0.0f;
    const bool is_nemo = model_arch_is_nemotron(m->arch);
    if (rc == ERR_OK && is_nemo)
        rc = hp_float(&h, "attention.layer_norm_epsilon", 0.0f, true, &eps_ln);
    if (rc == ERR_OK)
        rc = hp_float(&h, "attention.layer_norm_rms_epsilon", eps_ln, !is_nemo, &m->norm_eps);
    if (rc == ERR_OK) rc = hp_float(&h, "rope.freq_base", 10000.0f, false, &m->rope_base);
    if (rc == ERR_OK) rc = load_rope_scaling(m, &h);
    if (rc != ERR_OK) return rc;
    // granitehybrid's experts are optional
    if (n_expert > 0 && !model_arch_is_moe(m->arch) && m->arch != MODEL_ARCH_GRANITEHYBRID)
        return errmsg_set(err, ERR_UNSUPPORTED, "mixture-of-experts %s models are not supported",
                          m->arch_name);
    if (v_len != in->head_dim)
        return errmsg_set(err, ERR_UNSUPPORTED, "value_length %d differs from key_length %d", v_len,
                          in->head_dim);
    if (in->n_head % in->n_head_kv != 0)
        return errmsg_set(err, ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d",
                          in->n_head, in->n_head_kv);
    if (m->n_rot % 2 != 0)
        return errmsg_set(err, ERR_FORMAT, "rope.dimension_count %d is odd", m->n_rot);
    if (!(m->norm_eps >= 0.0f) || !(m->rope_base > 0.0f))
        return errmsg_set(err, ERR_FORMAT, "rms epsilon or rope base out of range");
    m->q_dim = in->n_head * in->head_dim;
    m->kv_dim = in->n_head_kv * in->head_dim;
    in->kv_bytes_per_token = (size_t)2 * (size_t)in->n_layer * (size_t)m->kv_dim * 2;
    in->n_batch_max = ENGINE_BATCH_MAX;
    return ERR_OK;
}

/* A matrix (n_out, n_in) usable by matmul. need_dot: it is multiplied (not only looked up). */
static int load_wmat(struct engine_model *m, const char *name, int layer, int64_t n_in,
                     int64_t n_out, struct wmat *w, struct errmsg *err)
{
    char nb[96];
    char full[96];
    const struct gguf_tensor *t = gguf_find_layer_tensor(m->gguf, name, layer, full, sizeof full);
    if (!t) {
        return errmsg_set(err, ERR_FORMAT, "missing tensor '%s'", full);
    }
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return errmsg_set(
            err, ERR_FORMAT, "tensor '%s': shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
            gguf_tensor_name(t, nb, sizeof nb), (long long)t->ne[0], (long long)t->ne[1],
            (long long)t->ne[2], (long long)t->ne[3], (long long)n_in, (long long)n_out);
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->vec_dot || !tr->to_float)
        return errmsg_set(err, ERR_UNSUPPORTED, "tensor '%s': type %s is not supported",
                          gguf_tensor_name(t, nb, sizeof nb),
                          gguf_type_name(t->type) ? gguf_type_name(t->type) : "unknown");
    if (n_in % tr->block_len != 0)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "tensor '%s': rows of %lld are not whole %s blocks (re-quantize it)",
                          gguf_tensor_name(t, nb, sizeof nb), (long long)n_in, tr->name);
    w->data = t->data;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    return ERR_OK;
}

/* A vector of n floats: the mapped data when it is aligned F32, else a converted copy. */
static int load_vec(struct engine_model *m, const char *name, int layer, int64_t n, bool required,
                    const float **out, struct errmsg *err)
{
    char nb[96];
    char full[96];
    const struct gguf_tensor *t = gguf_find_layer_tensor(m->gguf, name, layer, full, sizeof full);
    *out = NULL;
    if (!t) {
        if (!required) return ERR_OK;
        return errmsg_set(err, ERR_FORMAT, "missing tensor '%s'", full);
    }
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return errmsg_set(err, ERR_FORMAT, "tensor '%s': shape [%lld, %lld], expected [%lld]",
                          gguf_tensor_name(t, nb, sizeof nb), (long long)t->ne[0],
                          (long long)t->ne[1], (long long)n);
    // Copied, F32 too: read from the mapping at every step, a vector faulted the pages around
    // it back in (whole page-cache folios of the neighbouring matrices), which kept ~95 MB of
    // the Q8_0 bench model's already repacked weights resident a second time.
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->to_float || n % tr->block_len != 0)
        return errmsg_set(err, ERR_UNSUPPORTED, "tensor '%s': type %s is not supported",
                          gguf_tensor_name(t, nb, sizeof nb),
                          gguf_type_name(t->type) ? gguf_type_name(t->type) : "unknown");
    void **owned = mem_realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *owned);
    if (!owned) return errmsg_set(err, ERR_NOMEM, "out of memory");
    m->owned = owned;
    float *v = mem_alloc((size_t)n * sizeof *v);
    if (!v) return errmsg_set(err, ERR_NOMEM, "out of memory");
    m->owned[m->n_owned++] = v;
    tr->to_float(t->data, v, n);
    *out = v;
    return ERR_OK;
}

/* Views of a fused matrix's consecutive row blocks: rows [row0, row0 + n_out) of t. */
static int wmat_rows(const struct wmat *all, int64_t row0, int64_t n_out, struct wmat *w)
{
    size_t row_bytes;
    if (quant_row_bytes(all->type, all->n_in, &row_bytes) != ERR_OK) return ERR_FORMAT;
    *w = *all;
    w->data = (const uint8_t *)all->data + (size_t)row0 * row_bytes;
    w->n_out = n_out;
    return ERR_OK;
}

/* Q, K and V: separate matrices, or one fused attn_qkv (phi3) seen as three row blocks. */
static int load_qkv(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    const int64_t e = m->info.n_embd, qd = m->q_dim, kvd = m->kv_dim;
    char full[96];
    if (!gguf_find_layer_tensor(m->gguf, "attn_qkv.weight", il, full, sizeof full)) {
        // gated attention: each head's query rows, then its gate rows
        const int64_t q_rows = m->feat.attn_gated ? 2 * qd : qd;
        int rc = load_wmat(m, "attn_q.weight", il, e, q_rows, &L->wq, err);
        if (rc == ERR_OK) rc = load_wmat(m, "attn_k.weight", il, e, kvd, &L->wk, err);
        if (rc == ERR_OK) rc = load_wmat(m, "attn_v.weight", il, e, kvd, &L->wv, err);
        return rc;
    }
    struct wmat all;
    int rc = load_wmat(m, "attn_qkv.weight", il, e, qd + 2 * kvd, &all, err);
    if (rc == ERR_OK) rc = wmat_rows(&all, 0, qd, &L->wq);
    if (rc == ERR_OK) rc = wmat_rows(&all, qd, kvd, &L->wk);
    if (rc == ERR_OK) rc = wmat_rows(&all, qd + kvd, kvd, &L->wv);
    if (rc != ERR_OK) return errmsg_set(err, rc, "tensor '%s': bad rows", full);
    return ERR_OK;
}

/* The dense FFN: gate and up, or one ffn_up of 2 * n_ff rows (phi3: gate rows first), or up
 * alone with optional biases (nemotron_h's ReLU^2). */
static int load_ffn(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    const int64_t e = m->info.n_embd, f = m->info.n_ff;
    char full[96];
    int rc;
    if (m->feat.relu2_ffn) {
        rc = load_wmat(m, "ffn_up.weight", il, e, f, &L->w_up, err);
        if (rc == ERR_OK) rc = load_vec(m, "ffn_up.bias", il, f, false, &L->ffn_up_b, err);
        if (rc == ERR_OK) rc = load_vec(m, "ffn_down.bias", il, e, false, &L->ffn_down_b, err);
    } else if (gguf_find_layer_tensor(m->gguf, "ffn_gate.weight", il, full, sizeof full)) {
        rc = load_wmat(m, "ffn_gate.weight", il, e, f, &L->w_gate, err);
        if (rc == ERR_OK) rc = load_wmat(m, "ffn_up.weight", il, e, f, &L->w_up, err);
    } else {
        struct wmat all;
        rc = load_wmat(m, "ffn_up.weight", il, e, 2 * f, &all, err);
        if (rc == ERR_OK && (wmat_rows(&all, 0, f, &L->w_gate) != ERR_OK ||
                             wmat_rows(&all, f, f, &L->w_up) != ERR_OK))
            rc = errmsg_set(err, ERR_FORMAT, "tensor 'blk.%d.ffn_up.weight': bad rows", il);
    }
    if (rc == ERR_OK) rc = load_wmat(m, "ffn_down.weight", il, f, e, &L->w_down, err);
    return rc;
}

/* The router, the experts' 3-D tensors as per-expert views, the optional shared expert. */
static int load_moe(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    const struct model_feat *ft = &m->feat;
    const int64_t e = m->info.n_embd, fe = ft->n_ff_exp, fs = ft->n_ff_shexp;
    int rc = load_wmat(m, "ffn_gate_inp.weight", il, e, ft->n_expert, &L->gate_inp, err);
    if (rc != ERR_OK) return rc;
    L->exp_gate = mem_calloc((size_t)ft->n_expert * 3, sizeof *L->exp_gate);
    if (!L->exp_gate) return errmsg_set(err, ERR_NOMEM, "out of memory");
    L->exp_up = L->exp_gate + ft->n_expert;
    L->exp_down = L->exp_up + ft->n_expert;
    // ReLU^2 experts (nemotron_h_moe) have no gate
    if (!ft->relu2_ffn)
        rc = moe_load_experts(m->gguf, "ffn_gate_exps.weight", il, e, fe, ft->n_expert, L->exp_gate,
                              err);
    if (rc == ERR_OK)
        rc = moe_load_experts(m->gguf, "ffn_up_exps.weight", il, e, fe, ft->n_expert, L->exp_up,
                              err);
    if (rc == ERR_OK)
        rc = moe_load_experts(m->gguf, "ffn_down_exps.weight", il, fe, e, ft->n_expert, L->exp_down,
                              err);
    if (rc == ERR_OK && m->arch == MODEL_ARCH_GPTOSS) {
        rc = load_vec(m, "ffn_gate_inp.bias", il, ft->n_expert, true, &L->gate_inp_b, err);
        if (rc == ERR_OK)
            rc = moe_load_bias(m->gguf, "ffn_gate_exps.bias", il, fe, ft->n_expert, &L->exp_gate_b,
                               err);
        if (rc == ERR_OK)
            rc =
                moe_load_bias(m->gguf, "ffn_up_exps.bias", il, fe, ft->n_expert, &L->exp_up_b, err);
        if (rc == ERR_OK)
            rc = moe_load_bias(m->gguf, "ffn_down_exps.bias", il, e, ft->n_expert, &L->exp_down_b,
                               err);
    }
    if (rc == ERR_OK && fs > 0) {
        if (!ft->relu2_ffn) rc = load_wmat(m, "ffn_gate_shexp.weight", il, e, fs, &L->sh_gate, err);
        if (rc == ERR_OK) rc = load_wmat(m, "ffn_up_shexp.weight", il, e, fs, &L->sh_up, err);
        if (rc == ERR_OK) rc = load_wmat(m, "ffn_down_shexp.weight", il, fs, e, &L->sh_down, err);
    }
    if (rc == ERR_OK && ft->moe_sigmoid) // lfm2moe, nemotron_h_moe
        rc = load_vec(m, "exp_probs_b.bias", il, ft->n_expert, true, &L->exp_probs_b, err);
    if (rc == ERR_OK && fs > 0 && m->arch == MODEL_ARCH_QWEN35MOE)
        rc = load_wmat(m, "ffn_gate_inp_shexp.weight", il, e, 1, &L->sh_gate_inp, err);
    return rc;
}

/* The attention block: Q, K, V (+ biases, per-head or full norms, gpt-oss's sinks) and the
 * output projection. */
static int load_attn(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    const struct model_feat *ft = &m->feat;
    const int64_t e = m->info.n_embd, qd = m->q_dim, kvd = m->kv_dim;
    const enum model_arch a = m->arch;
    const bool is_qwen2 = a == MODEL_ARCH_QWEN2;
    const bool has_qk_norm = a == MODEL_ARCH_QWEN3 || a == MODEL_ARCH_GEMMA3 ||
                             a == MODEL_ARCH_OLMO2 || a == MODEL_ARCH_QWEN3MOE ||
                             a == MODEL_ARCH_OLMOE || model_arch_is_lfm2(a) ||
                             model_arch_is_qwen35(a);
    const int64_t hd = m->info.head_dim;
    const int64_t qn = ft->qk_norm_full ? qd : hd, kn = ft->qk_norm_full ? kvd : hd;
    int rc = ERR_OK;
    if (a == MODEL_ARCH_GPTOSS)
        rc = load_vec(m, "attn_sinks.weight", il, m->info.n_head, true, &L->sinks, err);
    if (rc == ERR_OK) rc = load_qkv(m, il, L, err);
    if (rc == ERR_OK) rc = load_wmat(m, "attn_output.weight", il, qd, e, &L->wo, err);
    // Biases are required by qwen2 and optional elsewhere; the per-head norms define qwen3.
    if (rc == ERR_OK) rc = load_vec(m, "attn_q.bias", il, qd, is_qwen2, &L->bq, err);
    if (rc == ERR_OK) rc = load_vec(m, "attn_k.bias", il, kvd, is_qwen2, &L->bk, err);
    if (rc == ERR_OK) rc = load_vec(m, "attn_v.bias", il, kvd, is_qwen2, &L->bv, err);
    if (rc == ERR_OK) rc = load_vec(m, "attn_output.bias", il, e, false, &L->bo, err);
    if (rc == ERR_OK) rc = load_vec(m, "attn_q_norm.weight", il, qn, has_qk_norm, &L->q_norm, err);
    if (rc == ERR_OK) rc = load_vec(m, "attn_k_norm.weight", il, kn, has_qk_norm, &L->k_norm, err);
    return rc;
}

/* qwen35's Gated DeltaNet: the conv channels' projection, the output gate, beta and alpha,
 * the taps, the decay bias and rate, the per-head norm, the output projection. */
static int load_gdn(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    const int64_t e = m->info.n_embd, nv = m->ssm_n_v_heads, d_in = m->recr_out_dim;
    int rc = load_wmat(m, "attn_qkv.weight", il, e, m->recr_in_dim, &L->conv_in, err);
    if (rc == ERR_OK) rc = load_wmat(m, "attn_gate.weight", il, e, d_in, &L->gdn_z, err);
    if (rc == ERR_OK) rc = load_wmat(m, "ssm_beta.weight", il, e, nv, &L->gdn_beta, err);
    if (rc == ERR_OK) rc = load_wmat(m, "ssm_alpha.weight", il, e, nv, &L->gdn_alpha, err);
    if (rc == ERR_OK) rc = model_recr_load_conv(m, il, "ssm_conv1d.weight", err);
    if (rc == ERR_OK) rc = load_vec(m, "ssm_dt.bias", il, nv, true, &L->ssm_dt, err);
    if (rc == ERR_OK) rc = load_vec(m, "ssm_a", il, nv, true, &L->ssm_a, err);
    if (rc == ERR_OK)
        rc = load_vec(m, "ssm_norm.weight", il, m->ssm_d_state, true, &L->ssm_norm, err);
    if (rc == ERR_OK) rc = load_wmat(m, "ssm_out.weight", il, d_in, e, &L->conv_out, err);
    return rc;
}

/* A Mamba-2 mixer: in_proj, the taps and their bias (required by mamba2), the dt bias, A and
 * D per head, the grouped norm, out_proj. */
static int load_ssd(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    const int64_t e = m->info.n_embd, nh = m->ssm_n_v_heads, d_in = m->recr_out_dim;
    const int64_t ng = m->ssm_n_groups;
    int rc = load_wmat(m, "ssm_in.weight", il, e, m->recr_in_dim, &L->conv_in, err);
    if (rc == ERR_OK) rc = model_recr_load_conv(m, il, "ssm_conv1d.weight", err);
    if (rc == ERR_OK)
        rc = load_vec(m, "ssm_conv1d.bias", il, m->n_conv_ch, m->arch == MODEL_ARCH_MAMBA2,
                      &L->conv_b, err);
    if (rc == ERR_OK) rc = load_vec(m, "ssm_dt.bias", il, nh, true, &L->ssm_dt, err);
    if (rc == ERR_OK) rc = model_recr_load_floats(m, il, "ssm_a", 1, nh, true, &L->ssm_a, err);
    if (rc == ERR_OK) rc = model_recr_load_floats(m, il, "ssm_d", 1, nh, true, &L->ssm_d, err);
    if (rc == ERR_OK) // falcon-h1 may leave the grouped norm out
        rc = model_recr_load_floats(m, il, "ssm_norm.weight", d_in / ng, ng,
                                    m->arch != MODEL_ARCH_FALCON_H1, &L->ssm_norm, err);
    if (rc == ERR_OK) rc = load_wmat(m, "ssm_out.weight", il, d_in, e, &L->conv_out, err);
    return rc;
}

/* lfm2's gated short convolution: in_proj (rows b | c | x), the taps, out_proj. */
static int load_shortconv(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    const int64_t e = m->info.n_embd;
    int rc = load_wmat(m, "shortconv.in_proj.weight", il, e, m->recr_in_dim, &L->conv_in, err);
    if (rc == ERR_OK) rc = model_recr_load_conv(m, il, "shortconv.conv.weight", err);
    if (rc == ERR_OK)
        rc = load_wmat(m, "shortconv.out_proj.weight", il, m->n_conv_ch, e, &L->conv_out, err);
    return rc;
}

/* A recurrent layer's mixer, by family. */
static int load_recr(struct engine_model *m, int il, struct layer *L, struct errmsg *err)
{
    if (model_arch_is_qwen35(m->arch)) return load_gdn(m, il, L, err);
    if (model_arch_is_lfm2(m->arch)) return load_shortconv(m, il, L, err);
    return load_ssd(m, il, L, err);
}

static int load_layer(struct engine_model *m, int il, struct errmsg *err)
{
    struct layer *L = &m->layers[il];
    const struct model_feat *ft = &m->feat;
    const int64_t e = m->info.n_embd;
    // gpt-oss and qwen35 name their FFN norm post_attention_norm
    const char *ffn_norm = m->arch == MODEL_ARCH_GPTOSS || model_arch_is_qwen35(m->arch)
                               ? "post_attention_norm.weight"
                               : "ffn_norm.weight";
    // nemotron_h: a layer is one block, whichever it is, normed by attn_norm; falcon-h1's
    // converter writes its FFN norm without the .weight suffix
    if (L->no_mixer) ffn_norm = "attn_norm.weight";
    if (m->arch == MODEL_ARCH_FALCON_H1) ffn_norm = "ffn_norm";
    int rc = ERR_OK;
    if (!L->no_mixer)
        rc = load_vec(m, "attn_norm.weight", il, e, !ft->no_pre_norm, &L->attn_norm, err);
    if (rc == ERR_OK && !L->no_ffn)
        rc = load_vec(m, ffn_norm, il, e, !ft->no_pre_norm, &L->ffn_norm, err);
    if (rc == ERR_OK && L->is_recr) rc = load_recr(m, il, L, err);
    if (rc == ERR_OK && !L->no_mixer && (!L->is_recr || L->par_attn)) rc = load_attn(m, il, L, err);
    if (rc == ERR_OK && L->no_ffn) return rc;
    if (rc == ERR_OK && ft->n_expert > 0 && il >= ft->n_dense_lead)
        rc = load_moe(m, il, L, err);
    else if (rc == ERR_OK)
        rc = load_ffn(m, il, L, err);
    if (rc == ERR_OK && ft->post_norms)
        rc = load_vec(m, "post_attention_norm.weight", il, e, true, &L->attn_post_norm, err);
    if (rc == ERR_OK && ft->post_norms)
        rc = load_vec(m, "post_ffw_norm.weight", il, e, true, &L->ffn_post_norm, err);
    return rc;
}

/* Gives the whole pages of [p, p + len) in the model file's mapping back to the OS: after
 * repacking, nothing reads the file's copy of a matrix, and without this its pages (faulted in
 * by the repack) stayed resident beside the copy, doubling those weights' share of the RSS.
 * The mapping is private and read-only (gguf_open, the only way engine_model_load opens a
 * file), so a page touched again is read back from the file, never lost; pages shared with a
 * neighbouring tensor are kept (the range is rounded inward). Best effort: a failure keeps the
 * pages mapped. */
static void drop_file_pages(const void *p, size_t len)
{
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || len < (size_t)page) return;
    const uintptr_t a = (uintptr_t)p, mask = (uintptr_t)page - 1;
    const uintptr_t lo = (a + mask) & ~mask, hi = (a + len) & ~mask;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

#define REPACK_SLICE_BYTES (4u << 20) // file bytes repacked before their pages are dropped

/* Replaces w by a repacked copy when the kernel set multiplies another layout faster
 * (quant_repack_type); the copy is owned by m, and the file's pages of w are dropped. */
static int repack_wmat(struct engine_model *m, struct wmat *w, struct errmsg *err)
{
    const uint32_t to = quant_repack_type(w->type, w->n_out, w->n_in);
    size_t row, bytes;
    if (to == w->type) return ERR_OK;
    if (quant_row_bytes(w->type, w->n_in, &row) != ERR_OK ||
        !size_mul(row, (size_t)w->n_out, &bytes))
        return errmsg_set(err, ERR_LIMIT, "weight size overflows");
    void **owned = mem_realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *owned);
    if (!owned) return errmsg_set(err, ERR_NOMEM, "out of memory");
    m->owned = owned;
    void *dst = mem_alloc(bytes);
    if (!dst) return errmsg_set(err, ERR_NOMEM, "out of memory for %zu bytes of weights", bytes);
    m->owned[m->n_owned++] = dst;
    // In slices of whole row groups, each slice's file pages given back once it is copied, so
    // the two copies of a large matrix (a tied output matrix: a quarter of a small model) are
    // never resident together.
    const int64_t group = quant_traits_of(to)->rows_interleaved;
    int64_t slice = (int64_t)(REPACK_SLICE_BYTES / row) / group * group;
    slice = slice < group ? group : slice;
    for (int64_t r0 = 0; r0 < w->n_out; r0 += slice) {
        const int64_t n = w->n_out - r0 < slice ? w->n_out - r0 : slice;
        const size_t off = (size_t)r0 * row;
        if (quant_repack(w->type, (const uint8_t *)w->data + off, (uint8_t *)dst + off, n,
                         w->n_in) != ERR_OK)
            return errmsg_set(err, ERR_INVALID, "repacking failed");
        drop_file_pages((const uint8_t *)w->data + off, (size_t)n * row);
    }
    drop_file_pages(w->data, bytes); // the pages the slices shared
    w->data = dst;
    w->type = to;
    return ERR_OK;
}

/* Every matrix multiplied. A tied output matrix is repacked once and the token embeddings
 * point at that copy: their rows are looked up through quant_get_row, which reads a repacked
 * row as the file's (one copy in memory, and the output head, a quarter of a small model's
 * bytes per token, gets the faster tiles). */
static int repack_all(struct engine_model *m, struct errmsg *err)
{
    int rc = ERR_OK;
    for (int il = 0; il < m->info.n_layer && rc == ERR_OK; il++) {
        struct layer *L = &m->layers[il];
        struct wmat *ws[12] = {&L->wq,       &L->wk,    &L->wv,       &L->wo,
                               &L->w_gate,   &L->w_up,  &L->w_down,   &L->conv_in,
                               &L->conv_out, &L->gdn_z, &L->gdn_beta, &L->gdn_alpha};
        for (int i = 0; i < 12 && rc == ERR_OK; i++)
            if (ws[i]->data) rc = repack_wmat(m, ws[i], err); // a layer has one of the blocks
    }
    const bool is_tied = m->output.data == m->tok_embd.data;
    if (rc == ERR_OK) rc = repack_wmat(m, &m->output, err);
    if (rc == ERR_OK && is_tied) {
        m->tok_embd.data = m->output.data;
        m->tok_embd.type = m->output.type;
    }
    return rc;
}

/* Adds n elements of elem bytes, 64-byte aligned, to a running size. */
static bool carve(size_t *total, size_t n, size_t elem, size_t *offset)
{
    size_t bytes;
    if (!size_mul(n, elem, &bytes) || !size_add(bytes, 63, &bytes)) return false;
    *offset = *total;
    return size_add(*total, bytes & ~(size_t)63, total);
}

static int alloc_scratch(struct engine_model *m, struct errmsg *err)
{
    const struct model_feat *ft = &m->feat;
    const size_t B = ENGINE_BATCH_MAX, e = (size_t)m->info.n_embd;
    size_t f = (size_t)m->info.n_ff;
    if ((size_t)ft->n_ff_exp > f) f = (size_t)ft->n_ff_exp;
    if ((size_t)ft->n_ff_shexp > f) f = (size_t)ft->n_ff_shexp;
    const size_t n_exp = ft->n_expert > 0 ? (size_t)ft->n_expert : 1;
    const size_t n_used = ft->n_expert_used > 0 ? (size_t)ft->n_expert_used : 1;
    const size_t qd = (size_t)m->q_dim, kvd = (size_t)m->kv_dim, nv = (size_t)m->info.n_vocab;
    // the conv output and the gates of DeltaNet and Mamba-2 layers
    const bool is_gdn = !model_arch_is_lfm2(m->arch) && m->n_layer_recr > 0;
    struct {
        void **ptr;
        size_t n, elem;
    } parts[] = {
        {(void **)&m->sc.x, B * e, 4},
        {(void **)&m->sc.xn, B * e, 4},
        {(void **)&m->sc.q, B * qd, 4},
        {(void **)&m->sc.k, B * kvd, 4},
        {(void **)&m->sc.v, B * kvd, 4},
        {(void **)&m->sc.attn, B * qd, 4},
        {(void **)&m->sc.proj, B * e, 4},
        {(void **)&m->sc.gate, B * f, 4},
        {(void **)&m->sc.up, B * f, 4},
        {(void **)&m->sc.logits, B * nv, 4},
        {(void **)&m->sc.rope_cos, 2 * B * (size_t)(m->n_rot / 2 + 1), 4},
        {(void **)&m->sc.rope_sin, 2 * B * (size_t)(m->n_rot / 2 + 1), 4},
        {(void **)&m->sc.router, ft->n_expert > 0 ? B * n_exp : 1, 4},
        {(void **)&m->sc.moe_w, B * n_used, 4},
        {(void **)&m->sc.moe_sel, B * n_used, 4},
        {(void **)&m->sc.moe_rows, B * n_used, 4},
        {(void **)&m->sc.moe_x, ft->n_expert > 0 ? B * e : 1, 4},
        {(void **)&m->sc.moe_out, ft->n_expert > 0 ? B * n_used * e : 1, 4},
        {(void **)&m->sc.moe_sh, ft->n_ff_shexp > 0 ? B * e : 1, 4},
        {(void **)&m->sc.moe_shg, B, 4},
        {&m->sc.slot[0], B, m->sc.slot_row_cap},
        {&m->sc.slot[1], B, m->sc.slot_row_cap},
        {&m->sc.slot[2], B, m->sc.slot_row_cap},
        {(void **)&m->sc.tok_item, B, 4},
        {(void **)&m->sc.tok_pos, B, 4},
        {(void **)&m->sc.tok_rpos, 3 * B, 4},
        {(void **)&m->sc.recr_in, m->n_layer_recr > 0 ? B * (size_t)m->recr_in_dim : 1, 4},
        {(void **)&m->sc.recr_y, m->n_layer_recr > 0 ? B * (size_t)m->recr_out_dim : 1, 4},
        {(void **)&m->sc.recr_z, is_gdn ? B * (size_t)m->recr_out_dim : 1, 4},
        {(void **)&m->sc.recr_ab, is_gdn ? 2 * B * (size_t)m->ssm_n_v_heads : 1, 4},
        {(void **)&m->sc.recr_conv, is_gdn ? B * (size_t)m->n_conv_ch : 1, 4},
        {(void **)&m->sc.qg, ft->attn_gated ? 2 * B * qd : 1, 4},
        {(void **)&m->sc.attn_gate, ft->attn_gated ? B * qd : 1, 4},
        {(void **)&m->sc.par_out, m->arch == MODEL_ARCH_FALCON_H1 ? B * e : 1, 4},
    };
    const size_t n_parts = sizeof parts / sizeof parts[0];
    size_t total = 0, offs[sizeof parts / sizeof parts[0]];
    for (size_t i = 0; i < n_parts; i++)
        if (!carve(&total, parts[i].n, parts[i].elem, &offs[i]))
            return errmsg_set(err, ERR_LIMIT, "batch scratch size overflows");
    uint8_t *mem = mem_alloc(total + 64);
    if (!mem)
        return errmsg_set(err, ERR_NOMEM, "out of memory for %zu bytes of batch scratch", total);
    m->scratch_mem = mem;
    uint8_t *base = (uint8_t *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    for (size_t i = 0; i < n_parts; i++)
        *parts[i].ptr = base + offs[i];
    return ERR_OK;
}

/* Each layer's place in the sequences' caches, and what one more context position costs. */
static void kv_layout(struct engine_model *m)
{
    int n_glob = 0, n_swa = 0, n_nokv = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        struct layer *L = &m->layers[il];
        L->kv_glob_before = n_glob;
        L->kv_swa_before = n_swa;
        if (!layer_has_kv(L)) { // a fixed state, or an FFN alone: no cache rows
            n_nokv++;
            continue;
        }
        if (L->is_swa)
            n_swa++;
        else
            n_glob++;
    }
    m->n_layer_swa = n_swa;
    m->n_layer_nokv = n_nokv;
    // beyond the window only the global layers grow
    m->info.kv_bytes_per_token = (size_t)2 * (size_t)n_glob * (size_t)m->kv_dim * 2;
}

static int load_globals(struct engine_model *m, struct errmsg *err)
{
    const struct gguf_tensor *te = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te) return errmsg_set(err, ERR_FORMAT, "missing tensor 'token_embd.weight'");
    if (te->ne[1] < 1 || te->ne[1] > N_VOCAB_MAX)
        return errmsg_set(err, ERR_FORMAT, "tensor 'token_embd.weight': %lld rows",
                          (long long)te->ne[1]);
    m->info.n_vocab = (int)te->ne[1];
    int rc =
        load_wmat(m, "token_embd.weight", -1, m->info.n_embd, m->info.n_vocab, &m->tok_embd, err);
    // lfm2's converter names its final norm token_embd_norm
    const char *out_norm =
        model_arch_is_lfm2(m->arch) ? "token_embd_norm.weight" : "output_norm.weight";
    if (rc == ERR_OK) rc = load_vec(m, out_norm, -1, m->info.n_embd, true, &m->output_norm, err);
    if (rc == ERR_OK && gguf_find_tensor(m->gguf, "output.weight"))
        rc = load_wmat(m, "output.weight", -1, m->info.n_embd, m->info.n_vocab, &m->output, err);
    else if (rc == ERR_OK)
        m->output = m->tok_embd; // tied embeddings
    if (rc == ERR_OK && m->n_rot > 0)
        rc = load_vec(m, "rope_freqs.weight", -1, m->n_rot / 2, false, &m->rope_freqs, err);
    if (rc == ERR_OK && m->n_rot > 0)
        rc = load_vec(m, "rope_factors_long.weight", -1, m->n_rot / 2, false, &m->rope_long, err);
    if (rc == ERR_OK && m->n_rot > 0)
        rc = load_vec(m, "rope_factors_short.weight", -1, m->n_rot / 2, false, &m->rope_short, err);
    enum gguf_value_type et;
    int64_t n_tokens;
    if (rc == ERR_OK && gguf_get_arr(m->gguf, "tokenizer.ggml.tokens", &et, &n_tokens) == ERR_OK &&
        n_tokens > m->info.n_vocab)
        rc = errmsg_set(err, ERR_FORMAT, "vocabulary has %lld tokens but token_embd only %d rows",
                        (long long)n_tokens, m->info.n_vocab);
    return rc;
}

int engine_model_load(const char *path, struct engine_model **out, struct errmsg *err)
{
    kernels_init();
    struct engine_model *m = mem_calloc(1, sizeof *m);
    if (!m) return errmsg_set(err, ERR_NOMEM, "out of memory");
    const char *numerics = getenv("LLAMAPI_NUMERICS");
    m->numerics = numerics && strcmp(numerics, "reference") == 0 ? ENGINE_NUMERICS_REFERENCE
                                                                 : ENGINE_NUMERICS_INVARIANT;
    int rc = gguf_open(path, &m->gguf, err);
    if (rc == ERR_OK) rc = load_arch(m, err);
    if (rc == ERR_OK) rc = load_hparams(m, err);
    if (rc == ERR_OK) rc = load_globals(m, err);
    if (rc == ERR_OK) {
        m->layers = mem_calloc((size_t)m->info.n_layer, sizeof *m->layers);
        if (!m->layers) rc = errmsg_set(err, ERR_NOMEM, "out of memory");
    }
    if (rc == ERR_OK) rc = model_arch_load(m, err);
    if (rc == ERR_OK) rc = model_recr_hparams(m, err);
    if (rc == ERR_OK) kv_layout(m);
    for (int il = 0; rc == ERR_OK && il < m->info.n_layer; il++)
        rc = load_layer(m, il, err);
    if (rc == ERR_OK) rc = repack_all(m, err);
    if (rc == ERR_OK) rc = model_plan_all(m, err);
    if (rc == ERR_OK) rc = alloc_scratch(m, err);
    if (rc != ERR_OK) {
        engine_model_free(m);
        return rc;
    }
    m->info.n_params = gguf_param_count(m->gguf);
    m->info.file_size = gguf_file_size(m->gguf);
    *out = m;
    return ERR_OK;
}

void engine_model_free(struct engine_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++)
        mem_free(m->owned[i]);
    mem_free(m->owned);
    for (int il = 0; m->layers && il < m->info.n_layer; il++)
        mem_free(m->layers[il].exp_gate);
    mem_free(m->layers);
    mem_free(m->scratch_mem);
    gguf_close(m->gguf);
    mem_free(m);
}

void engine_model_set_numerics(struct engine_model *m, enum engine_numerics numerics)
{
    if (numerics == ENGINE_NUMERICS_INVARIANT || numerics == ENGINE_NUMERICS_REFERENCE)
        m->numerics = numerics;
}

enum engine_numerics engine_model_numerics(const struct engine_model *m)
{
    return m->numerics;
}

static bool orders_agree(const struct wmat *w)
{
    return matmul_order(w->type, w->n_in, w->n_out, 1, MATMUL_RULE_PROMPT) ==
           matmul_order(w->type, w->n_in, w->n_out, 1, MATMUL_RULE_SAMPLED);
}

bool engine_model_sampled_is_prompt(const struct engine_model *m)
{
    if (m->numerics == ENGINE_NUMERICS_REFERENCE) return true;
    for (int il = 0; il < m->info.n_layer; il++) {
        const struct layer *L = &m->layers[il];
        const struct wmat *ws[] = {&L->wq,       &L->wk,    &L->wv,       &L->wo,
                                   &L->w_gate,   &L->w_up,  &L->w_down,   &L->conv_in,
                                   &L->conv_out, &L->gdn_z, &L->gdn_beta, &L->gdn_alpha};
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
            if (ws[k]->data && !orders_agree(ws[k])) return false;
    }
    return true;
}

const struct engine_model_info *engine_model_info(const struct engine_model *m)
{
    return &m->info;
}

const struct gguf *engine_model_gguf(const struct engine_model *m)
{
    return m->gguf;
}
