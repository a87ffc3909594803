/* What each supported family changes in the decoder graph, read from its GGUF metadata with
 * the defaults its converter and the reference loader use: embedding and attention scales,
 * soft-caps, post-norms, sliding windows, layers without RoPE, LongRoPE factors, and the
 * mixture-of-experts router. model.c calls these after the common hyperparameters. */
#include "engine/model/model_arch.h"

#include "util/checked.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int get_f32(const struct engine_model *m, const char *suffix, float def, float *out,
                   struct errmsg *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
    int rc = gguf_get_f32(m->gguf, key, out);
    if (rc == ERR_NOT_FOUND) {
        *out = def;
        return ERR_OK;
    }
    if (rc != ERR_OK || !isfinite(*out))
        return errmsg_set(err, ERR_FORMAT, "key '%s': not a finite number", key);
    return ERR_OK;
}

static int get_int(const struct engine_model *m, const char *suffix, int64_t def, int64_t lo,
                   int64_t hi, int *out, struct errmsg *err)
{
    char key[96];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
    int rc = gguf_get_i64(m->gguf, key, &v);
    if (rc == ERR_NOT_FOUND)
        v = def;
    else if (rc != ERR_OK)
        return errmsg_set(err, ERR_FORMAT, "key '%s': not an integer", key);
    if (v < lo || v > hi)
        return errmsg_set(err, ERR_FORMAT, "key '%s': %lld is outside %lld..%lld", key,
                          (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return ERR_OK;
}

/* qwen2vl's M-RoPE: <arch>.rope.dimension_sections, 3 or 4 counts of frequency pairs turned by
 * the temporal, height, width and extra positions. A text token has its position in the first
 * three and 0 in the extra one (as the reference fills them), and the sections' frequencies
 * continue one another, so with no extra section text is exactly NeoX RoPE; an image's merged
 * tokens take their grid row and column (engine_batch_item.grid_w). */
static int load_mrope_sections(struct engine_model *m, struct errmsg *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch_name);
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    if (gguf_get_arr_data(m->gguf, key, &et, &n, &data) != ERR_OK ||
        (et != GGUF_VALUE_I32 && et != GGUF_VALUE_U32) || n < 3 || n > 4)
        return errmsg_set(err, ERR_FORMAT, "key '%s': expected 3 or 4 integers", key);
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, (const char *)data + i * 4, sizeof v);
        if (v < 0 || (et == GGUF_VALUE_U32 && (uint32_t)v > INT32_MAX))
            return errmsg_set(err, ERR_FORMAT, "key '%s': negative section", key);
        sum += v;
        if (sum <= INT32_MAX) m->feat.mrope[i] = v;
    }
    m->feat.is_mrope = true;
    if (sum < 1 || sum > m->n_rot / 2)
        return errmsg_set(err, ERR_FORMAT, "key '%s': sections sum to %lld, not 1..%d", key,
                          (long long)sum, m->n_rot / 2);
    return ERR_OK;
}

void model_mrope_positions(int base, int n_tokens, int grid_w, int first, int32_t *out)
{
    for (int j = 0; j < n_tokens; j++) {
        const int g = first + j;
        const int y = grid_w ? g / grid_w : 0, x = grid_w ? g % grid_w : 0;
        out[3 * j] = grid_w ? base : base + j;
        out[3 * j + 1] = grid_w ? base + y : base + j;
        out[3 * j + 2] = grid_w ? base + x : base + j;
    }
}

int model_mrope_next(int base, int n_tokens, int grid_w, int grid_h)
{
    if (!grid_w) return base + n_tokens;
    return base + (grid_w > grid_h ? grid_w : grid_h);
}

/* Which layers use the sliding window: <arch>.attention.sliding_window_pattern as a per-layer
 * array of booleans, or as the period n (layers il % n < n - 1 slide, the last of each period
 * is global), else def_pattern. */
static int load_swa_layers(struct engine_model *m, int def_pattern, struct errmsg *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch_name);
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    const int n_layer = m->info.n_layer;
    if (gguf_get_arr_data(m->gguf, key, &et, &n, &data) == ERR_OK) {
        if (et != GGUF_VALUE_BOOL || n != n_layer)
            return errmsg_set(err, ERR_FORMAT, "key '%s': expected %d booleans", key, n_layer);
        for (int il = 0; il < n_layer; il++)
            m->layers[il].is_swa = ((const uint8_t *)data)[il] != 0;
        return ERR_OK;
    }
    int period;
    int rc = get_int(m, "attention.sliding_window_pattern", def_pattern, 0, N_LAYER_MAX_ARCH,
                     &period, err);
    if (rc != ERR_OK) return rc;
    for (int il = 0; il < n_layer; il++)
        m->layers[il].is_swa = period == 0 || il % period < period - 1;
    return ERR_OK;
}

bool model_arch_is_moe(enum model_arch arch)
{
    return arch == MODEL_ARCH_QWEN3MOE || arch == MODEL_ARCH_OLMOE ||
           arch == MODEL_ARCH_GRANITEMOE || arch == MODEL_ARCH_GPTOSS ||
           arch == MODEL_ARCH_QWEN35MOE || arch == MODEL_ARCH_LFM2MOE ||
           arch == MODEL_ARCH_NEMOTRON_H_MOE;
}

static int load_granite(struct engine_model *m, struct model_feat *f, struct errmsg *err)
{
    char key[96];
    float logit_scale;
    snprintf(key, sizeof key, "%s.logit_scale", m->arch_name);
    if (gguf_get_f32(m->gguf, key, &logit_scale) != ERR_OK || !isfinite(logit_scale) ||
        logit_scale == 0.0f)
        return errmsg_set(err, ERR_FORMAT, "missing or zero key '%s'", key);
    f->logit_div = logit_scale;
    int rc = get_f32(m, "residual_scale", 0.0f, &f->residual_scale, err);
    if (rc == ERR_OK) rc = get_f32(m, "embedding_scale", 0.0f, &f->embd_scale, err);
    if (rc == ERR_OK) rc = get_f32(m, "attention.scale", 0.0f, &f->kq_scale, err);
    return rc;
}

/* lfm2moe: expert_gating_func (required; 1 softmax, 2 sigmoid, which picks experts by gate
 * plus each layer's exp_probs_b and weighs them by the gate alone) and the leading layers
 * that keep a dense FFN (leading_dense_block_count). */
static int load_lfm2moe_routing(struct engine_model *m, struct model_feat *f, struct errmsg *err)
{
    int func;
    int rc = get_int(m, "expert_gating_func", -1, -1, 3, &func, err);
    if (rc == ERR_OK && func < 0)
        return errmsg_set(err, ERR_FORMAT, "missing key '%s.expert_gating_func'", m->arch_name);
    if (rc == ERR_OK && func != 1 && func != 2)
        return errmsg_set(err, ERR_UNSUPPORTED, "key '%s.expert_gating_func': %d is not 1 or 2",
                          m->arch_name, func);
    f->moe_sigmoid = func == 2;
    if (rc == ERR_OK)
        rc = get_int(m, "leading_dense_block_count", 0, 0, m->info.n_layer, &f->n_dense_lead, err);
    return rc;
}

/* nemotron_h_moe: sigmoid routing with selection biases, expert_weights_norm (bool, default
 * off) and expert_weights_scale; experts n_ff / k wide without expert_feed_forward_length (as
 * the reference falls back); a shared expert always. Latent experts (moe_latent_size) and
 * per-layer expert counts are not read. */
static int load_nemotron_routing(struct engine_model *m, struct model_feat *f, struct errmsg *err)
{
    char key[96];
    int latent;
    int rc = get_int(m, "moe_latent_size", 0, 0, INT32_MAX, &latent, err);
    if (rc == ERR_OK && latent > 0)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "key '%s.moe_latent_size': latent experts are "
                          "not supported",
                          m->arch_name);
    bool norm = false;
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch_name);
    int brc = gguf_get_bool(m->gguf, key, &norm);
    if (brc != ERR_OK && brc != ERR_NOT_FOUND)
        return errmsg_set(err, ERR_FORMAT, "key '%s': not a boolean", key);
    f->expert_norm = brc == ERR_OK && norm;
    f->moe_sigmoid = true;
    if (rc == ERR_OK) rc = get_f32(m, "expert_weights_scale", 0.0f, &f->expert_scale, err);
    snprintf(key, sizeof key, "%s.expert_feed_forward_length", m->arch_name);
    if (rc == ERR_OK && gguf_find_key(m->gguf, key) < 0)
        f->n_ff_exp = m->info.n_ff / f->n_expert_used > 0 ? m->info.n_ff / f->n_expert_used : 1;
    if (rc == ERR_OK)
        rc = get_int(m, "expert_shared_feed_forward_length", -1, -1, 1 << 20, &f->n_ff_shexp, err);
    if (rc == ERR_OK && f->n_ff_shexp < 1)
        rc = errmsg_set(err, ERR_FORMAT, "missing key '%s.expert_shared_feed_forward_length'",
                        m->arch_name);
    return rc;
}

/* granitehybrid: granite's multipliers, each optional (the logit scale too), and
 * rope.scaling.finetuned, which the family uses as a switch: false means no RoPE at all. */
static int load_granite_hybrid(struct engine_model *m, struct model_feat *f, struct errmsg *err)
{
    char key[96];
    bool has_rope = true;
    snprintf(key, sizeof key, "%s.rope.scaling.finetuned", m->arch_name);
    int rc = gguf_get_bool(m->gguf, key, &has_rope);
    if (rc != ERR_OK && rc != ERR_NOT_FOUND)
        return errmsg_set(err, ERR_FORMAT, "key '%s': not a boolean", key);
    if (rc == ERR_NOT_FOUND) has_rope = true;
    for (int il = 0; il < m->info.n_layer; il++)
        m->layers[il].has_rope = has_rope && m->n_rot > 0;
    rc = get_f32(m, "logit_scale", 0.0f, &f->logit_div, err);
    if (rc == ERR_OK) rc = get_f32(m, "residual_scale", 0.0f, &f->residual_scale, err);
    if (rc == ERR_OK) rc = get_f32(m, "embedding_scale", 0.0f, &f->embd_scale, err);
    if (rc == ERR_OK) rc = get_f32(m, "attention.scale", 0.0f, &f->kq_scale, err);
    return rc;
}

static int load_gemma(struct engine_model *m, struct model_feat *f, struct errmsg *err)
{
    const bool is2 = m->arch == MODEL_ARCH_GEMMA2;
    const int n_layer = m->info.n_layer;
    int rc = ERR_OK;
    f->embd_scale = sqrtf((float)m->info.n_embd);
    f->geglu = true;
    f->post_norms = true;
    // The 27B models scale queries by the model width per head, the others by the head width.
    const bool is_27b = n_layer == (is2 ? 46 : 62);
    f->q_scale = is_27b ? 1.0f / sqrtf((float)(m->info.n_embd / m->info.n_head))
                        : 1.0f / sqrtf((float)m->info.head_dim);
    f->kq_scale = 1.0f;
    if (is2) {
        rc = get_f32(m, "attn_logit_softcapping", 50.0f, &f->attn_softcap, err);
        if (rc == ERR_OK) rc = get_f32(m, "final_logit_softcapping", 30.0f, &f->final_softcap, err);
        if (rc == ERR_OK)
            rc = get_int(m, "attention.sliding_window", 4096, 0, INT32_MAX, &f->n_swa, err);
        if (rc == ERR_OK) rc = load_swa_layers(m, 2, err);
        m->rope_scale_swa = m->rope_freq_scale;
        if (rc == ERR_OK)
            rc = get_f32(m, "rope.freq_base_swa", m->rope_base, &m->rope_base_swa, err);
        return rc;
    }
    rc = get_f32(m, "final_logit_softcapping", 0.0f, &f->final_softcap, err);
    if (rc == ERR_OK) rc = get_int(m, "attention.sliding_window", 0, 0, INT32_MAX, &f->n_swa, err);
    if (rc == ERR_OK && f->n_swa > 0) {
        rc = load_swa_layers(m, 6, err);
        m->rope_scale_swa = 1.0f;
        if (rc == ERR_OK) rc = get_f32(m, "rope.freq_base_swa", 10000.0f, &m->rope_base_swa, err);
    }
    return rc;
}

/* YaRN's constants as the reference derives them: the original context, the ramp's betas, and
 * the attention factor (its magnitude correction for the scale factor, divided back out
 * because the rotation applies it again, times rope.scaling.attn_factor). */
static int load_yarn(struct engine_model *m, struct model_feat *f, struct errmsg *err)
{
    int rc = get_int(m, "rope.scaling.original_context_length", m->info.n_ctx_train, 1, INT32_MAX,
                     &f->n_ctx_orig, err);
    f->yarn_beta_fast = 32.0f;
    f->yarn_beta_slow = 1.0f;
    const float factor = 1.0f / m->rope_freq_scale;
    float a = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
    a *= 1.0f / (1.0f + 0.1f * logf(factor));
    a *= f->rope_attn_factor != 0.0f ? f->rope_attn_factor : 1.0f;
    f->yarn_attn_factor = a;
    return rc;
}

int model_arch_load(struct engine_model *m, struct errmsg *err)
{
    struct model_feat *f = &m->feat;
    int rc = ERR_OK;
    m->rope_base_swa = m->rope_base;
    m->rope_scale_swa = m->rope_freq_scale;
    for (int il = 0; il < m->info.n_layer; il++)
        m->layers[il].has_rope = m->n_rot > 0;
    switch (m->arch) {
    case MODEL_ARCH_GEMMA2:
    case MODEL_ARCH_GEMMA3:
        rc = load_gemma(m, f, err);
        break;
    case MODEL_ARCH_PHI3:
        f->q_scale = 1.0f / sqrtf((float)m->info.head_dim);
        f->kq_scale = 1.0f;
        rc = get_int(m, "rope.scaling.original_context_length", m->info.n_ctx_train, 1, INT32_MAX,
                     &f->n_ctx_orig, err);
        break; // its sliding window is ignored, as the reference does
    case MODEL_ARCH_GRANITE:
    case MODEL_ARCH_GRANITEMOE:
        rc = load_granite(m, f, err);
        break;
    case MODEL_ARCH_SMOLLM3:
        f->nope_every = 4;
        for (int il = 0; il < m->info.n_layer; il++)
            m->layers[il].has_rope = m->n_rot > 0 && (il + 1) % f->nope_every != 0;
        break;
    case MODEL_ARCH_OLMO2:
        f->no_pre_norm = true;
        f->post_norms = true;
        f->qk_norm_full = true;
        rc = get_int(m, "attention.sliding_window", 0, 0, INT32_MAX, &f->n_swa, err);
        if (rc == ERR_OK && f->n_swa > 0) {
            rc = load_swa_layers(m, 4, err);
            m->rope_scale_swa = 1.0f;
            if (rc == ERR_OK)
                rc = get_f32(m, "rope.freq_base_swa", m->rope_base, &m->rope_base_swa, err);
        }
        break;
    case MODEL_ARCH_OLMOE:
        f->qk_norm_full = true;
        break;
    case MODEL_ARCH_LFM2: // an optional window on every attention layer
    case MODEL_ARCH_LFM2MOE:
        rc = get_int(m, "attention.sliding_window", 0, 0, INT32_MAX, &f->n_swa, err);
        for (int il = 0; rc == ERR_OK && il < m->info.n_layer; il++)
            m->layers[il].is_swa = f->n_swa > 0; // recurrent layers have no cache to slide
        break;
    case MODEL_ARCH_MAMBA2: // its layers and state: model_ssd.c
        for (int il = 0; il < m->info.n_layer; il++)
            m->layers[il].no_ffn = true;
        break;
    case MODEL_ARCH_NEMOTRON_H: // layer kinds: model_recr.c
    case MODEL_ARCH_NEMOTRON_H_MOE:
        f->relu2_ffn = true;
        for (int il = 0; il < m->info.n_layer; il++)
            m->layers[il].has_rope = false;
        break;
    case MODEL_ARCH_GRANITEHYBRID:
        rc = load_granite_hybrid(m, f, err);
        break;
    case MODEL_ARCH_QWEN35:
    case MODEL_ARCH_QWEN35MOE:
        f->attn_gated = true; // its layers and state: model_gdn.c
        break;
    case MODEL_ARCH_GPTOSS:
        f->kq_scale = 1.0f / sqrtf((float)m->n_rot);
        f->softmax_selected = true;
        f->swiglu_oai = true;
        rc = get_int(m, "attention.sliding_window", -1, -1, INT32_MAX, &f->n_swa, err);
        if (rc == ERR_OK && f->n_swa < 0)
            rc = errmsg_set(err, ERR_FORMAT, "missing key 'gpt-oss.attention.sliding_window'");
        if (rc == ERR_OK) rc = load_swa_layers(m, 2, err);
        if (rc == ERR_OK)
            rc = get_f32(m, "rope.freq_base_swa", m->rope_base, &m->rope_base_swa, err);
        break;
    default:
        break;
    }
    if (rc == ERR_OK && strcmp(m->arch_name, "qwen2vl") == 0) rc = load_mrope_sections(m, err);
    // LongRoPE's (or any converter's) cos/sin multiplier
    if (rc == ERR_OK) rc = get_f32(m, "rope.scaling.attn_factor", 0.0f, &f->rope_attn_factor, err);
    if (rc == ERR_OK && f->is_yarn) rc = load_yarn(m, f, err);
    // granitehybrid has experts when its file counts them
    int64_t n_exp_key = 0;
    char exp_key[96];
    snprintf(exp_key, sizeof exp_key, "%s.expert_count", m->arch_name);
    const bool has_experts = m->arch == MODEL_ARCH_GRANITEHYBRID &&
                             gguf_get_i64(m->gguf, exp_key, &n_exp_key) == ERR_OK && n_exp_key > 0;
    if (rc == ERR_OK && (model_arch_is_moe(m->arch) || has_experts)) {
        rc = get_int(m, "expert_count", 0, 1, 4096, &f->n_expert, err);
        if (rc == ERR_OK && f->n_expert < 1)
            rc = errmsg_set(err, ERR_FORMAT, "key '%s.expert_count' is missing", m->arch_name);
        if (rc == ERR_OK)
            rc = get_int(m, "expert_used_count", 0, 1, f->n_expert, &f->n_expert_used, err);
        if (rc == ERR_OK && f->n_expert_used < 1)
            rc = errmsg_set(err, ERR_FORMAT, "key '%s.expert_used_count' is missing", m->arch_name);
        if (rc == ERR_OK && f->n_expert_used > MOE_USED_MAX)
            rc = errmsg_set(err, ERR_UNSUPPORTED, "%d experts per token (at most %d)",
                            f->n_expert_used, MOE_USED_MAX);
        // qwen35moe: without the keys, experts are n_ff / k wide and the shared expert n_ff
        const bool is_q35 = m->arch == MODEL_ARCH_QWEN35MOE;
        const int ff_exp =
            is_q35 && f->n_expert_used > 0 ? m->info.n_ff / f->n_expert_used : m->info.n_ff;
        if (rc == ERR_OK)
            rc = get_int(m, "expert_feed_forward_length", ff_exp > 0 ? ff_exp : 1, 1, 1 << 20,
                         &f->n_ff_exp, err);
        if (rc == ERR_OK &&
            (m->arch == MODEL_ARCH_GRANITEMOE || m->arch == MODEL_ARCH_GRANITEHYBRID || is_q35))
            rc = get_int(m, "expert_shared_feed_forward_length", is_q35 ? m->info.n_ff : 0, 0,
                         1 << 20, &f->n_ff_shexp, err);
        f->expert_norm = m->arch != MODEL_ARCH_OLMOE;
        if (rc == ERR_OK && m->arch == MODEL_ARCH_LFM2MOE) rc = load_lfm2moe_routing(m, f, err);
        if (rc == ERR_OK && m->arch == MODEL_ARCH_NEMOTRON_H_MOE)
            rc = load_nemotron_routing(m, f, err);
    }
    if (rc == ERR_OK && f->n_swa == 0)
        for (int il = 0; il < m->info.n_layer; il++)
            m->layers[il].is_swa = false;
    for (int il = 0; il < m->info.n_layer; il++)
        m->layers[il].rope_set = m->layers[il].is_swa ? 1 : 0;
    return rc;
}
