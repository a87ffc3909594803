/* Mamba-2 (mamba2, and the recurrent layers of granitehybrid). in_proj gives each token
 * z (inner_size), the conv channels x | B | C (inner_size + 2 * group_count * state_size) and
 * dt (one per head). After the causal conv (+ bias) and SiLU, head h (of group
 * h / (heads / groups), as the reference assigns them) scans its channels: with
 * dt' = model_recr_softplus(dt + ssm_dt) and decay exp(dt' * A), each channel's state row becomes
 * state * decay + B * x * dt' and its output the row's dot with C; then y += x * D,
 * y *= silu(z), an RMS norm over each group's channels, and out_proj. A layer's state per
 * sequence is its conv tail and its heads' (head_dim, state_size) rows, in F32. */
#include "engine/model/model_ssd.h"

#include "engine/model/model_gdn.h"
#include "engine/model/model_recr.h"
#include "engine/ops.h"
#include "engine/ssm.h"
#include "util/checked.h"

#include <math.h>

#define CONV_TAPS_MAX 64
#define HEADS_MAX     (1 << 16)

int model_ssd_hparams(struct engine_model *m, struct errmsg *err)
{
    int taps, d_inner, d_state, n_head, n_group;
    int rc = model_recr_get_int(m, "ssm.conv_kernel", 2, CONV_TAPS_MAX, &taps, err);
    if (rc == ERR_OK) rc = model_recr_get_int(m, "ssm.inner_size", 1, 1 << 20, &d_inner, err);
    if (rc == ERR_OK)
        rc = model_recr_get_int(m, "ssm.state_size", 1, SSM_D_STATE_MAX, &d_state, err);
    if (rc == ERR_OK) rc = model_recr_get_int(m, "ssm.time_step_rank", 1, HEADS_MAX, &n_head, err);
    if (rc == ERR_OK) rc = model_recr_get_int(m, "ssm.group_count", 1, HEADS_MAX, &n_group, err);
    if (rc != ERR_OK) return rc;
    if (d_inner % n_head != 0 || n_head % n_group != 0)
        return errmsg_set(err, ERR_FORMAT,
                          "ssm.inner_size %d, ssm.time_step_rank %d, ssm.group_count %d: heads "
                          "must divide the inner size and groups the heads",
                          d_inner, n_head, n_group);
    // all below 1 << 20 + 2 * (1 << 16) * 256 + (1 << 16): an int holds them
    m->d_conv = taps - 1;
    m->ssm_d_state = d_state;
    m->ssm_n_v_heads = n_head;
    m->ssm_n_groups = n_group;
    m->ssm_head_dim = d_inner / n_head;
    m->n_conv_ch = d_inner + 2 * n_group * d_state;
    m->conv_in_off = d_inner;
    m->recr_in_dim = d_inner + m->n_conv_ch + n_head;
    m->recr_out_dim = d_inner;
    size_t conv, heads;
    if (!size_mul((size_t)m->d_conv, (size_t)m->n_conv_ch, &conv) ||
        !size_mul((size_t)d_inner, (size_t)d_state, &heads) ||
        !size_add(conv, heads, &m->recr_floats))
        return errmsg_set(err, ERR_LIMIT, "recurrent state size overflows");
    return ERR_OK;
}

/* One token through head h: the scan, the skip and the gate, into recr_y. */
static void ssd_head(const struct fwd *f, int t, int h, float *state)
{
    const struct engine_model *m = f->m;
    const struct layer *L = f->L;
    const int hd = m->ssm_head_dim, n = m->ssm_d_state, d_inner = m->recr_out_dim;
    const int g = h / (m->ssm_n_v_heads / m->ssm_n_groups);
    const float *in = m->sc.recr_in + (size_t)t * (size_t)m->recr_in_dim;
    const float *conv = m->sc.recr_conv + (size_t)t * (size_t)m->n_conv_ch;
    const float *x = conv + (size_t)h * hd, *z = in + (size_t)h * hd;
    const float *b = conv + d_inner + (size_t)g * n;
    const float *c = conv + d_inner + (size_t)m->ssm_n_groups * n + (size_t)g * n;
    const float dt = model_recr_softplus(in[d_inner + m->n_conv_ch + h] + L->ssm_dt[h]);
    float *y = m->sc.recr_y + (size_t)t * (size_t)d_inner + (size_t)h * hd;
    ssm_get()->ssd_step(hd, n, state, x, b, c, expf(dt * L->ssm_a[h]), dt, y);
    for (int i = 0; i < hd; i++) {
        const float v = y[i] + x[i] * L->ssm_d[h];
        y[i] = z[i] / (1.0f + expf(-z[i])) * v;
    }
}

/* Step: this thread's heads, token by token. */
static void job_ssd(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const size_t per_head = (size_t)m->ssm_head_dim * (size_t)m->ssm_d_state;
    const size_t conv_floats = (size_t)m->d_conv * (size_t)m->n_conv_ch;
    int lo, hi;
    fwd_split(m->ssm_n_v_heads, ith, nth, &lo, &hi);
    for (int t = 0; hi > lo && t < f->n_tok; t++) {
        float *heads = model_recr_state(f, t) + conv_floats;
        for (int h = lo; h < hi; h++)
            ssd_head(f, t, h, heads + (size_t)h * per_head);
    }
}

/* Step: the RMS norm of each group's channels of recr_y. Split by rows. */
static void job_group_norm(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const int gs = m->recr_out_dim / m->ssm_n_groups;
    int lo, hi;
    fwd_split(f->n_tok, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++)
        for (int g = 0; g < m->ssm_n_groups; g++) {
            float *y = m->sc.recr_y + (size_t)t * (size_t)m->recr_out_dim + (size_t)g * gs;
            ops_get()->rmsnorm(gs, y, y, f->L->ssm_norm + (size_t)g * gs, m->norm_eps);
        }
}

void model_ssd_block(struct threadpool *tp, struct fwd *f)
{
    struct engine_model *m = f->m;
    struct scratch *sc = &m->sc;
    const struct layer *L = f->L;
    const bool is_small = f->n_tok <= LIGHT_ROWS_MAX;
    fwd_run_matmul_group(tp, f, &L->plan_conv_in, sc->recr_in, NULL, NULL);
    model_gdn_conv_silu(tp, f);
    fwd_run_light(tp, job_ssd, f, is_small);
    if (L->ssm_norm) fwd_run_light(tp, job_group_norm, f, is_small); // falcon-h1 may have none
}
