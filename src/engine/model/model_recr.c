/* Recurrent layers of hybrid families and their per-sequence state. lfm2 (LFM2, LFM2.5): a
 * layer whose head_count_kv is 0 is a gated short convolution, in_proj to three rows b, c, x,
 * a depthwise causal convolution of b * x over the last l_cache inputs, gated by c, then
 * out_proj; the other layers are attention with per-head q/k norms. The state of a conv layer
 * is its last l_cache - 1 inputs per channel, in F32 as the reference keeps it. */
#include "engine/model/model_recr.h"

#include "engine/model/model_gdn.h"
#include "engine/model/model_ssd.h"
#include "engine/quants/quants.h"
#include "engine/ssm.h"
#include "util/checked.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define L_CACHE_MAX       64          // convolution taps (the released models use 3)
#define CKPT_BYTES_BUDGET (32u << 20) // checkpoint memory a sequence aims to stay within
#define CKPT_MIN          2
#define CKPT_MAX          8

int model_recr_get_int(const struct engine_model *m, const char *suffix, int64_t lo, int64_t hi,
                       int *out, struct errmsg *err)
{
    char key[96];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
    int rc = gguf_get_i64(m->gguf, key, &v);
    if (rc == ERR_NOT_FOUND) return errmsg_set(err, ERR_FORMAT, "missing key '%s'", key);
    if (rc != ERR_OK || v < lo || v > hi)
        return errmsg_set(err, ERR_FORMAT, "key '%s': not an integer in %lld..%lld", key,
                          (long long)lo, (long long)hi);
    *out = (int)v;
    return ERR_OK;
}

bool model_recr_is_hybrid(enum model_arch arch)
{
    return model_arch_is_lfm2(arch) || model_arch_is_qwen35(arch) || arch == MODEL_ARCH_MAMBA2 ||
           arch == MODEL_ARCH_GRANITEHYBRID || model_arch_is_nemotron(arch) ||
           arch == MODEL_ARCH_FALCON_H1;
}

int model_recr_head_kv(const struct engine_model *m, int n_layer, int n_head, int *n_head_kv,
                       bool *is_array, struct errmsg *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch_name);
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    if (gguf_get_arr_data(m->gguf, key, &et, &n, &data) != ERR_OK) return ERR_OK;
    if ((et != GGUF_VALUE_I32 && et != GGUF_VALUE_U32) || n != n_layer)
        return errmsg_set(err, ERR_FORMAT, "key '%s': expected %d integers", key, n_layer);
    int common = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, (const char *)data + i * 4, sizeof v);
        if (v < 0 || v > n_head || (v > 0 && n_head % v != 0))
            return errmsg_set(err, ERR_FORMAT, "key '%s': layer %lld has %d heads (of %d)", key,
                              (long long)i, (int)v, n_head);
        if (v == 0 && !model_recr_is_hybrid(m->arch))
            return errmsg_set(err, ERR_FORMAT, "key '%s': layer %lld has no key/value heads", key,
                              (long long)i);
        if (v > 0 && common > 0 && v != common)
            return errmsg_set(err, ERR_UNSUPPORTED, "key '%s': layers with %d and %d heads", key,
                              common, (int)v);
        if (v > 0) common = v;
    }
    *n_head_kv = common > 0 ? common : n_head; // no attention layer: unused
    *is_array = true;
    return ERR_OK;
}

/* Element il of the integer array <arch>.<suffix> (validated by the caller), or -1 when the key
 * is not an array. */
static int64_t arr_at(const struct engine_model *m, const char *suffix, int il)
{
    char key[96];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
    return gguf_get_arr_i64(m->gguf, key, il, &v) == ERR_OK ? v : -1;
}

int model_recr_ff(const struct engine_model *m, int n_layer, int *n_ff, bool *is_array,
                  struct errmsg *err)
{
    char key[96];
    enum gguf_value_type et;
    int64_t n;
    snprintf(key, sizeof key, "%s.feed_forward_length", m->arch_name);
    if (gguf_get_arr(m->gguf, key, &et, &n) != ERR_OK) return ERR_OK;
    if (n != n_layer || !model_recr_is_hybrid(m->arch))
        return errmsg_set(err, ERR_FORMAT, "key '%s': expected one integer", key);
    int64_t common = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (gguf_get_arr_i64(m->gguf, key, i, &v) != ERR_OK || v < 0 || v > (1 << 20))
            return errmsg_set(err, ERR_FORMAT, "key '%s': layer %lld out of range", key,
                              (long long)i);
        if (v > 0 && common > 0 && v != common)
            return errmsg_set(err, ERR_UNSUPPORTED, "key '%s': layers of %lld and %lld", key,
                              (long long)common, (long long)v);
        if (v > 0) common = v;
    }
    *n_ff = common > 0 ? (int)common : 1; // no FFN layer: unused
    *is_array = true;
    return ERR_OK;
}

/* nemotron_h: a layer is Mamba-2 where head_count_kv and feed_forward_length are both 0,
 * attention where only the latter is, else an FFN alone. */
static int nemotron_kinds(struct engine_model *m, struct errmsg *err)
{
    for (int il = 0; il < m->info.n_layer; il++) {
        const int64_t kv = arr_at(m, "attention.head_count_kv", il);
        const int64_t ff = arr_at(m, "feed_forward_length", il);
        if (kv < 0 || ff < 0)
            return errmsg_set(err, ERR_FORMAT,
                              "keys '%s.attention.head_count_kv' and "
                              "'%s.feed_forward_length' must give each layer its kind",
                              m->arch_name, m->arch_name);
        struct layer *L = &m->layers[il];
        L->is_recr = kv == 0 && ff == 0;
        L->no_mixer = ff > 0;
        L->no_ffn = ff == 0;
    }
    return ERR_OK;
}

/* lfm2, granitehybrid: each layer's is_recr from the head_count_kv array (0: recurrent). */
static int kinds_from_kv(struct engine_model *m, struct errmsg *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch_name);
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    // model_recr_head_kv validated the array; a scalar means every layer attends
    if (gguf_get_arr_data(m->gguf, key, &et, &n, &data) != ERR_OK) return ERR_OK;
    if (n != m->info.n_layer) return errmsg_set(err, ERR_FORMAT, "key '%s': wrong length", key);
    for (int il = 0; il < m->info.n_layer; il++) {
        int32_t v;
        memcpy(&v, (const char *)data + (size_t)il * 4, sizeof v);
        m->layers[il].is_recr = v == 0;
    }
    return ERR_OK;
}

/* The state sizes (recr_floats per layer is the family's) and how many checkpoints fit the
 * budget. */
static int size_state(struct engine_model *m, struct errmsg *err)
{
    size_t all, bytes;
    if (!size_mul(m->recr_floats, (size_t)m->n_layer_recr, &all) ||
        !size_mul(all, sizeof(float), &bytes))
        return errmsg_set(err, ERR_LIMIT, "recurrent state size overflows");
    m->state_floats = all;
    m->info.state_bytes = bytes;
    size_t n = bytes > 0 ? CKPT_BYTES_BUDGET / bytes : CKPT_MAX;
    m->n_ckpt = n < CKPT_MIN ? CKPT_MIN : n > CKPT_MAX ? CKPT_MAX : (int)n;
    if (m->n_layer_recr == 0) m->n_ckpt = 0;
    m->info.n_checkpoints = m->n_ckpt;
    return ERR_OK;
}

/* lfm2: the convolution's size and which layers recur. */
static int lfm2_hparams(struct engine_model *m, struct errmsg *err)
{
    int l_cache;
    int rc = model_recr_get_int(m, "shortconv.l_cache", 2, L_CACHE_MAX, &l_cache, err);
    if (rc != ERR_OK) return rc;
    m->d_conv = l_cache - 1;
    m->n_conv_ch = m->info.n_embd;
    m->recr_in_dim = 3 * m->info.n_embd; // n_embd <= 1 << 16: no overflow
    m->recr_out_dim = m->info.n_embd;
    m->recr_floats = (size_t)m->d_conv * (size_t)m->n_conv_ch; // <= 63 << 16
    return kinds_from_kv(m, err);
}

int model_recr_hparams(struct engine_model *m, struct errmsg *err)
{
    if (!model_recr_is_hybrid(m->arch)) return ERR_OK;
    int rc;
    switch (m->arch) {
    case MODEL_ARCH_LFM2:
    case MODEL_ARCH_LFM2MOE:
        rc = lfm2_hparams(m, err);
        break;
    case MODEL_ARCH_MAMBA2: // every layer
        rc = model_ssd_hparams(m, err);
        for (int il = 0; il < m->info.n_layer; il++)
            m->layers[il].is_recr = true;
        break;
    case MODEL_ARCH_GRANITEHYBRID:
        rc = model_ssd_hparams(m, err);
        if (rc == ERR_OK) rc = kinds_from_kv(m, err);
        break;
    case MODEL_ARCH_NEMOTRON_H:
    case MODEL_ARCH_NEMOTRON_H_MOE:
        rc = model_ssd_hparams(m, err);
        if (rc == ERR_OK) rc = nemotron_kinds(m, err);
        break;
    case MODEL_ARCH_FALCON_H1: // attention and Mamba-2 side by side in every layer
        rc = model_ssd_hparams(m, err);
        for (int il = 0; il < m->info.n_layer; il++)
            m->layers[il].is_recr = m->layers[il].par_attn = true;
        break;
    default:
        rc = model_gdn_hparams(m, err);
        break;
    }
    if (rc != ERR_OK) return rc;
    m->n_layer_recr = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        m->layers[il].recr_before = m->n_layer_recr;
        m->n_layer_recr += m->layers[il].is_recr;
    }
    return size_state(m, err);
}

int model_recr_load_floats(struct engine_model *m, int il, const char *name, int64_t ne0,
                           int64_t ne1, bool required, const float **out, struct errmsg *err)
{
    char nb[96], full[96];
    const struct gguf_tensor *t = gguf_find_layer_tensor(m->gguf, name, il, full, sizeof full);
    *out = NULL;
    if (!t && !required) return ERR_OK;
    if (!t) return errmsg_set(err, ERR_FORMAT, "missing tensor '%s'", full);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return errmsg_set(err, ERR_FORMAT, "tensor '%s': shape [%lld, %lld], expected [%lld, %lld]",
                          gguf_tensor_name(t, nb, sizeof nb), (long long)t->ne[0],
                          (long long)t->ne[1], (long long)ne0, (long long)ne1);
    const struct quant_traits *tr = quant_traits_of(t->type);
    size_t row_bytes;
    if (!tr || !tr->to_float || ne0 % tr->block_len != 0 ||
        quant_row_bytes(t->type, ne0, &row_bytes) != ERR_OK)
        return errmsg_set(err, ERR_UNSUPPORTED, "tensor '%s': type %s is not supported",
                          gguf_tensor_name(t, nb, sizeof nb),
                          gguf_type_name(t->type) ? gguf_type_name(t->type) : "unknown");
    void **owned = mem_realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *owned);
    if (!owned) return errmsg_set(err, ERR_NOMEM, "out of memory");
    m->owned = owned;
    float *w = mem_alloc((size_t)(ne0 * ne1) * sizeof *w); // the reader bounded ne0 * ne1
    if (!w) return errmsg_set(err, ERR_NOMEM, "out of memory");
    m->owned[m->n_owned++] = w;
    for (int64_t r = 0; r < ne1; r++) // row by row: a row may not end on a block boundary
        tr->to_float((const uint8_t *)t->data + (size_t)r * row_bytes, w + r * ne0, ne0);
    *out = w;
    return ERR_OK;
}

int model_recr_load_conv(struct engine_model *m, int il, const char *name, struct errmsg *err)
{
    return model_recr_load_floats(m, il, name, m->d_conv + 1, m->n_conv_ch, true,
                                  &m->layers[il].conv_w, err);
}

/* Step: lfm2's gated convolution over the channels [lo, hi) of this thread, token by token in
 * stacked order (each item's tokens are consecutive and in order, so each sequence's state
 * advances one token at a time, the same arithmetic however the sequence was chunked):
 * bx = b * x, y = c * conv(tail, bx). */
static void job_shortconv(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const struct layer *L = f->L;
    const int e = m->n_conv_ch;
    int lo, hi;
    fwd_split(e, ith, nth, &lo, &hi);
    for (int t = 0; hi > lo && t < f->n_tok; t++) {
        float *in = m->sc.recr_in + (size_t)t * (size_t)m->recr_in_dim;
        const float *b = in, *c = in + e;
        float *x = in + 2 * (size_t)e;
        float *y = m->sc.recr_y + (size_t)t * (size_t)e;
        float *tail = model_recr_state(f, t);
        for (int i = lo; i < hi; i++)
            x[i] *= b[i];
        ssm_conv_step_ref(lo, hi, m->d_conv, tail, x, L->conv_w, y);
        for (int i = lo; i < hi; i++)
            y[i] *= c[i];
    }
}

void model_recr_block(struct threadpool *tp, struct fwd *f)
{
    struct engine_model *m = f->m;
    const struct layer *L = f->L;
    if (model_arch_is_qwen35(m->arch)) {
        model_gdn_block(tp, f);
    } else if (!model_arch_is_lfm2(m->arch)) { // mamba2, granitehybrid, nemotron_h, falcon-h1
        model_ssd_block(tp, f);
    } else {
        fwd_run_matmul_group(tp, f, &L->plan_conv_in, m->sc.recr_in, NULL, NULL);
        fwd_run_light(tp, job_shortconv, f, f->n_tok <= LIGHT_ROWS_MAX);
    }
    // every family's output projection, from sc.recr_y (n_rows is n_tok in the mixer)
    f->src = m->sc.recr_y;
    f->plan = &L->plan_conv_out;
    fwd_run_light(tp, fwd_job_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
    fwd_run_matmul_group(tp, f, &L->plan_conv_out, m->sc.proj, NULL, NULL);
}

void model_recr_reset(struct engine_seq *s)
{
    if (s->state) memset(s->state, 0, s->m->state_floats * sizeof *s->state);
}

/* The slot of the latest checkpoint at or before n_keep, or -1. */
static int latest_ckpt(const struct engine_seq *s, int n_keep)
{
    int best = -1;
    for (int i = 0; s->ckpt && i < s->m->n_ckpt; i++)
        if (s->ckpt_pos[i] > 0 && s->ckpt_pos[i] <= n_keep &&
            (best < 0 || s->ckpt_pos[i] > s->ckpt_pos[best]))
            best = i;
    return best;
}

int model_recr_keepable(const struct engine_seq *s, int n_keep)
{
    const int best = latest_ckpt(s, n_keep);
    return best >= 0 ? s->ckpt_pos[best] : 0;
}

void model_recr_restore(struct engine_seq *s, int kept)
{
    const struct engine_model *m = s->m;
    const int best = latest_ckpt(s, kept);
    if (best >= 0 && s->ckpt_pos[best] == kept)
        memcpy(s->state, s->ckpt + (size_t)best * m->state_floats,
               m->state_floats * sizeof *s->state);
    for (int i = 0; s->ckpt && i < m->n_ckpt; i++)
        if (s->ckpt_pos[i] > kept) s->ckpt_pos[i] = -1;
}

void engine_seq_checkpoint(struct engine_seq *s)
{
    const struct engine_model *m = s->m;
    if (!s->ckpt || s->pos == 0) return;
    // the same position again refreshes its slot, else an empty slot, else the oldest save
    int slot = -1;
    for (int i = 0; i < m->n_ckpt && slot < 0; i++)
        if (s->ckpt_pos[i] == s->pos) slot = i;
    for (int i = 0; i < m->n_ckpt && slot < 0; i++)
        if (s->ckpt_pos[i] < 0) slot = i;
    if (slot < 0) {
        slot = s->ckpt_next;
        s->ckpt_next = (s->ckpt_next + 1) % m->n_ckpt;
    }
    memcpy(s->ckpt + (size_t)slot * m->state_floats, s->state, m->state_floats * sizeof *s->state);
    s->ckpt_pos[slot] = s->pos;
}

float *model_recr_state(const struct fwd *f, int t)
{
    const struct engine_model *m = f->m;
    struct engine_seq *s = f->items[m->sc.tok_item[t]].seq;
    return s->state + (size_t)f->L->recr_before * m->recr_floats;
}
