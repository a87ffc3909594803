/* qwen35 (Qwen3.5): Gated DeltaNet layers and the gated full-attention layers between them.
 * A DeltaNet layer projects the normed input to the conv channels (queries and keys of
 * group_count heads, values of time_step_rank heads), a gate z and the per-head beta and
 * alpha; runs a causal conv + SiLU over the channels; L2-normalizes each query and key head;
 * advances each value head's (state_size)^2 state by the gated delta rule (value head h reads
 * key head h mod group_count, as the reference tiles them); RMS-normalizes each head's output
 * times silu(z); and projects back. Its state per sequence is the conv tail and the heads'
 * matrices, in F32. An attention layer's query projection gives a query and a gate per head;
 * the attention output is multiplied by sigmoid(gate) before the output projection. */
#include "engine/model/model_gdn.h"

#include "engine/model/model_recr.h"
#include "engine/ops.h"
#include "engine/ssm.h"
#include "util/checked.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CONV_TAPS_MAX 64
#define HEADS_MAX     4096

static float sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* Step: the conv over this thread's channels, token by token (each sequence's tail advances
 * one token at a time), plus the bias if any, then SiLU, into recr_conv. */
static void job_conv_silu(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const struct layer *L = f->L;
    const int nc = m->n_conv_ch;
    int lo, hi;
    fwd_split(nc, ith, nth, &lo, &hi);
    for (int t = 0; hi > lo && t < f->n_tok; t++) {
        const float *x = m->sc.recr_in + (size_t)t * (size_t)m->recr_in_dim + m->conv_in_off;
        float *y = m->sc.recr_conv + (size_t)t * (size_t)nc;
        float *tail = model_recr_state(f, t);
        ssm_conv_step_ref(lo, hi, m->d_conv, tail, x, L->conv_w, y);
        for (int i = lo; L->conv_b && i < hi; i++)
            y[i] += L->conv_b[i];
        for (int i = lo; i < hi; i++)
            y[i] = y[i] / (1.0f + expf(-y[i]));
    }
}

/* One token through value head h: gates, the delta rule on the head's state, the gated norm
 * into y. */
static void delta_head(const struct fwd *f, int t, int h, float *state)
{
    const struct engine_model *m = f->m;
    const struct layer *L = f->L;
    const int n = m->ssm_d_state, hk = h % m->ssm_n_k_heads, nv = m->ssm_n_v_heads;
    const size_t key_dim = (size_t)n * (size_t)m->ssm_n_k_heads;
    const float *conv = m->sc.recr_conv + (size_t)t * (size_t)m->n_conv_ch;
    // beta rows first, then alpha rows (each its own matrix of ENGINE_BATCH_MAX rows)
    const float *beta = m->sc.recr_ab + (size_t)t * (size_t)nv;
    const float *alpha = m->sc.recr_ab + ((size_t)ENGINE_BATCH_MAX + (size_t)t) * (size_t)nv;
    float q[SSM_D_STATE_MAX], k[SSM_D_STATE_MAX];
    ssm_l2norm_ref(n, conv + (size_t)hk * n, m->norm_eps, q);
    ssm_l2norm_ref(n, conv + key_dim + (size_t)hk * n, m->norm_eps, k);
    const float *v = conv + 2 * key_dim + (size_t)h * n;
    const float decay = expf(model_recr_softplus(alpha[h] + L->ssm_dt[h]) * L->ssm_a[h]);
    float *y = m->sc.recr_y + (size_t)t * (size_t)m->recr_out_dim + (size_t)h * n;
    ssm_get()->delta_step(n, state, q, k, v, decay, sigmoid(beta[h]), 1.0f / sqrtf((float)n), y);
    ops_get()->rmsnorm(n, y, y, L->ssm_norm, m->norm_eps);
    const float *z = m->sc.recr_z + (size_t)t * (size_t)m->recr_out_dim + (size_t)h * n;
    for (int j = 0; j < n; j++)
        y[j] *= z[j] / (1.0f + expf(-z[j]));
}

/* Step: this thread's value heads, token by token. */
static void job_delta(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const size_t nn = (size_t)m->ssm_d_state * (size_t)m->ssm_d_state;
    const size_t conv_floats = (size_t)m->d_conv * (size_t)m->n_conv_ch;
    int lo, hi;
    fwd_split(m->ssm_n_v_heads, ith, nth, &lo, &hi);
    for (int t = 0; hi > lo && t < f->n_tok; t++) {
        float *heads = model_recr_state(f, t) + conv_floats;
        for (int h = lo; h < hi; h++)
            delta_head(f, t, h, heads + (size_t)h * nn);
    }
}

void model_gdn_block(struct threadpool *tp, struct fwd *f)
{
    struct engine_model *m = f->m;
    struct scratch *sc = &m->sc;
    const struct layer *L = f->L;
    const bool is_small = f->n_tok <= LIGHT_ROWS_MAX;
    fwd_run_matmul_group(tp, f, &L->plan_conv_in, sc->recr_in, sc->recr_z, NULL);
    f->src = sc->xn;
    f->plan = &L->plan_ab;
    fwd_run_light(tp, fwd_job_quant, f, is_small);
    fwd_run_matmul_group(tp, f, &L->plan_ab, sc->recr_ab,
                         sc->recr_ab + (size_t)ENGINE_BATCH_MAX * (size_t)m->ssm_n_v_heads, NULL);
    model_gdn_conv_silu(tp, f);
    fwd_run_light(tp, job_delta, f, is_small);
}

void model_gdn_conv_silu(struct threadpool *tp, struct fwd *f)
{
    fwd_run_light(tp, job_conv_silu, f, f->n_tok <= LIGHT_ROWS_MAX);
}

void model_gdn_split_query(const struct engine_model *m, int t)
{
    const int hd = m->info.head_dim;
    const float *qg = m->sc.qg + (size_t)t * 2 * (size_t)m->q_dim;
    float *q = m->sc.q + (size_t)t * (size_t)m->q_dim;
    float *g = m->sc.attn_gate + (size_t)t * (size_t)m->q_dim;
    for (int h = 0; h < m->info.n_head; h++) {
        memcpy(q + (size_t)h * hd, qg + (size_t)h * 2 * hd, (size_t)hd * sizeof *q);
        memcpy(g + (size_t)h * hd, qg + (size_t)h * 2 * hd + hd, (size_t)hd * sizeof *g);
    }
}

static void job_gate_output(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    int lo, hi;
    fwd_split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *a = m->sc.attn + (size_t)t * (size_t)m->q_dim;
        const float *g = m->sc.attn_gate + (size_t)t * (size_t)m->q_dim;
        for (int i = 0; i < m->q_dim; i++)
            a[i] *= sigmoid(g[i]);
    }
}

void model_gdn_gate_output(struct threadpool *tp, struct fwd *f)
{
    fwd_run_light(tp, job_gate_output, f, f->n_rows <= LIGHT_ROWS_MAX);
}

/* Which layers recur: attention.recurrent_layers (one flag per block, the skipped
 * next-token-prediction blocks included), else all but every full_attention_interval-th. */
static int layer_kinds(struct engine_model *m, struct errmsg *err)
{
    char key[96];
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", m->arch_name);
    if (gguf_get_arr_data(m->gguf, key, &et, &n, &data) == ERR_OK) {
        const size_t w = gguf_value_size(et);
        if ((et != GGUF_VALUE_BOOL && et != GGUF_VALUE_I32 && et != GGUF_VALUE_U32 &&
             et != GGUF_VALUE_U8) ||
            n < m->info.n_layer)
            return errmsg_set(err, ERR_FORMAT, "key '%s': expected %d flags", key, m->info.n_layer);
        for (int il = 0; il < m->info.n_layer; il++) {
            uint32_t v = 0;
            memcpy(&v, (const char *)data + (size_t)il * w, w);
            m->layers[il].is_recr = v != 0;
        }
        return ERR_OK;
    }
    int interval = 4;
    snprintf(key, sizeof key, "%s.full_attention_interval", m->arch_name);
    int64_t v;
    int rc = gguf_get_i64(m->gguf, key, &v);
    if (rc == ERR_OK && (v < 1 || v > INT32_MAX))
        return errmsg_set(err, ERR_FORMAT, "key '%s': %lld is not a positive count", key,
                          (long long)v);
    if (rc != ERR_OK && rc != ERR_NOT_FOUND)
        return errmsg_set(err, ERR_FORMAT, "key '%s': not an integer", key);
    if (rc == ERR_OK) interval = (int)v;
    for (int il = 0; il < m->info.n_layer; il++)
        m->layers[il].is_recr = (il + 1) % interval != 0;
    return ERR_OK;
}

/* rope.dimension_sections: required; a text token has the same position in the first three
 * sections and 0 in the fourth, and the sections interleave (pair i is in section i mod 3
 * while that section lasts, else the fourth), so text rotates as NeoX RoPE exactly when no
 * rotated pair falls to the fourth. */
static int check_sections(const struct engine_model *m, struct errmsg *err)
{
    char key[96];
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    int32_t sec[4] = {0, 0, 0, 0};
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch_name);
    if (gguf_get_arr_data(m->gguf, key, &et, &n, &data) != ERR_OK ||
        (et != GGUF_VALUE_I32 && et != GGUF_VALUE_U32) || n < 3 || n > 4)
        return errmsg_set(err, ERR_FORMAT, "key '%s': expected 3 or 4 integers", key);
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(&sec[i], (const char *)data + i * 4, 4);
        if (sec[i] < 0 || sec[i] > 1 << 16)
            return errmsg_set(err, ERR_FORMAT, "key '%s': section %lld out of range", key,
                              (long long)i);
        sum += sec[i];
    }
    if (sum < 1) return errmsg_set(err, ERR_FORMAT, "key '%s': sections sum to 0", key);
    for (int i = 0; i < m->n_rot / 2; i++) {
        const int s = (int)(i % sum);
        const bool is_thw = (s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) ||
                            (s % 3 == 2 && s < 3 * sec[2]);
        if (!is_thw)
            return errmsg_set(err, ERR_UNSUPPORTED,
                              "key '%s': rotated pair %d takes the extra position", key, i);
    }
    return ERR_OK;
}

/* The ssm.* sizes. */
static int ssm_sizes(struct engine_model *m, struct errmsg *err)
{
    int taps, d_state, n_v, n_k, d_inner;
    int rc = model_recr_get_int(m, "ssm.conv_kernel", 2, CONV_TAPS_MAX, &taps, err);
    if (rc == ERR_OK)
        rc = model_recr_get_int(m, "ssm.state_size", 1, SSM_D_STATE_MAX, &d_state, err);
    if (rc == ERR_OK) rc = model_recr_get_int(m, "ssm.time_step_rank", 1, HEADS_MAX, &n_v, err);
    if (rc == ERR_OK) rc = model_recr_get_int(m, "ssm.group_count", 1, HEADS_MAX, &n_k, err);
    if (rc == ERR_OK) rc = model_recr_get_int(m, "ssm.inner_size", 1, INT32_MAX, &d_inner, err);
    if (rc != ERR_OK) return rc;
    if (n_v % n_k != 0)
        return errmsg_set(err, ERR_FORMAT,
                          "ssm.time_step_rank %d is not a multiple of "
                          "ssm.group_count %d",
                          n_v, n_k);
    if ((int64_t)d_inner != (int64_t)d_state * n_v)
        return errmsg_set(err, ERR_FORMAT,
                          "ssm.inner_size %d is not ssm.state_size %d times "
                          "ssm.time_step_rank %d",
                          d_inner, d_state, n_v);
    m->d_conv = taps - 1;
    m->ssm_d_state = d_state;
    m->ssm_n_v_heads = n_v;
    m->ssm_n_k_heads = n_k;
    m->n_conv_ch = 2 * d_state * n_k + d_inner; // <= 3 * 256 * 4096: fits an int
    m->recr_in_dim = m->n_conv_ch;
    m->recr_out_dim = d_inner;
    return ERR_OK;
}

int model_gdn_hparams(struct engine_model *m, struct errmsg *err)
{
    int rc = ssm_sizes(m, err);
    if (rc == ERR_OK) rc = layer_kinds(m, err);
    if (rc == ERR_OK) rc = check_sections(m, err);
    if (rc != ERR_OK) return rc;
    size_t conv, heads, per;
    if (!size_mul((size_t)m->d_conv, (size_t)m->n_conv_ch, &conv) ||
        !size_mul((size_t)m->ssm_d_state * (size_t)m->ssm_d_state, (size_t)m->ssm_n_v_heads,
                  &heads) ||
        !size_add(conv, heads, &per))
        return errmsg_set(err, ERR_LIMIT, "recurrent state size overflows");
    m->recr_floats = per;
    return ERR_OK;
}
