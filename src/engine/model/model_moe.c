/* Expert tensors, routing and the expert FFN step of the mixture-of-experts families. */
#include "engine/model/model_moe.h"

#include "engine/quants/quants.h"
#include "util/checked.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int moe_load_experts(const struct gguf *g, const char *name, int il, int64_t n_in, int64_t n_out,
                     int n_expert, struct wmat *out, struct errmsg *err)
{
    char full[96];
    const struct gguf_tensor *t = gguf_find_layer_tensor(g, name, il, full, sizeof full);
    if (!t) return errmsg_set(err, ERR_FORMAT, "missing tensor '%s'", full);
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_expert || t->ne[3] != 1)
        return errmsg_set(err, ERR_FORMAT,
                          "tensor '%s': shape [%lld, %lld, %lld], expected [%lld, %lld, %d]", full,
                          (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)n_in, (long long)n_out, n_expert);
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->vec_dot || !tr->to_float || n_in % tr->block_len != 0)
        return errmsg_set(err, ERR_UNSUPPORTED, "tensor '%s': type %s is not supported", full,
                          gguf_type_name(t->type) ? gguf_type_name(t->type) : "unknown");
    size_t row_bytes, mat_bytes, total;
    if (quant_row_bytes(t->type, n_in, &row_bytes) != ERR_OK ||
        !size_mul(row_bytes, (size_t)n_out, &mat_bytes) ||
        !size_mul(mat_bytes, (size_t)n_expert, &total) || total > t->size)
        return errmsg_set(err, ERR_FORMAT, "tensor '%s': size does not match its shape", full);
    for (int x = 0; x < n_expert; x++) {
        out[x].data = (const uint8_t *)t->data + (size_t)x * mat_bytes;
        out[x].type = t->type;
        out[x].n_in = n_in;
        out[x].n_out = n_out;
    }
    return ERR_OK;
}

/* The sum-1 renormalization and the scale of the chosen experts' weights. */
static void normalize_scale(float *w, int n_used, bool norm, float scale)
{
    if (norm) {
        float s = 0.0f;
        for (int k = 0; k < n_used; k++)
            s += w[k];
        if (s < 6.103515625e-5f) s = 6.103515625e-5f; // the reference clamps at F16's smallest
        for (int k = 0; k < n_used; k++)
            w[k] /= s;
    }
    if (scale != 0.0f && scale != 1.0f)
        for (int k = 0; k < n_used; k++)
            w[k] *= scale;
}

void moe_route_sigmoid(float *logits, const float *bias, int n_expert, int n_used, bool norm,
                       float scale, int32_t *sel, float *w)
{
    for (int i = 0; i < n_expert; i++)
        logits[i] = 1.0f / (1.0f + expf(-logits[i]));
    for (int k = 0; k < n_used; k++) {
        int best = -1;
        float best_v = 0.0f;
        for (int i = 0; i < n_expert; i++) {
            bool taken = false;
            for (int j = 0; j < k && !taken; j++)
                taken = sel[j] == i;
            const float v = bias ? logits[i] + bias[i] : logits[i];
            if (!taken && (best < 0 || v > best_v)) {
                best = i;
                best_v = v;
            }
        }
        sel[k] = best;
        w[k] = logits[best];
    }
    normalize_scale(w, n_used, norm, scale);
}

void moe_route(const float *logits, int n_expert, int n_used, bool norm, float scale, int32_t *sel,
               float *w)
{
    float mx = -INFINITY;
    for (int i = 0; i < n_expert; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n_expert; i++)
        sum += (double)expf(logits[i] - mx);
    const float inv = (float)(1.0 / sum);
    // top n_used by probability; the softmax is monotonic, so by logit, first index on ties
    for (int k = 0; k < n_used; k++) {
        int best = -1;
        for (int i = 0; i < n_expert; i++) {
            bool taken = false;
            for (int j = 0; j < k && !taken; j++)
                taken = sel[j] == i;
            if (!taken && (best < 0 || logits[i] > logits[best])) best = i;
        }
        sel[k] = best;
        w[k] = expf(logits[best] - mx) * inv;
    }
    normalize_scale(w, n_used, norm, scale);
}

int moe_load_bias(const struct gguf *g, const char *name, int il, int64_t n, int n_expert,
                  const float **out, struct errmsg *err)
{
    char full[96];
    const struct gguf_tensor *t = gguf_find_layer_tensor(g, name, il, full, sizeof full);
    if (!t) return errmsg_set(err, ERR_FORMAT, "missing tensor '%s'", full);
    if (t->ne[0] != n || t->ne[1] != n_expert || t->ne[2] != 1 || t->ne[3] != 1)
        return errmsg_set(err, ERR_FORMAT, "tensor '%s': shape [%lld, %lld], expected [%lld, %d]",
                          full, (long long)t->ne[0], (long long)t->ne[1], (long long)n, n_expert);
    if (t->type != QUANT_F32 || ((uintptr_t)t->data % sizeof(float)) != 0)
        return errmsg_set(err, ERR_UNSUPPORTED, "tensor '%s': only aligned F32 biases", full);
    *out = t->data;
    return ERR_OK;
}

void moe_route_selected(const float *logits, int n_expert, int n_used, int32_t *sel, float *w)
{
    for (int k = 0; k < n_used; k++) {
        int best = -1;
        for (int i = 0; i < n_expert; i++) {
            bool taken = false;
            for (int j = 0; j < k && !taken; j++)
                taken = sel[j] == i;
            if (!taken && (best < 0 || logits[i] > logits[best])) best = i;
        }
        sel[k] = best;
    }
    const float mx = logits[sel[0]];
    double sum = 0.0;
    for (int k = 0; k < n_used; k++) {
        w[k] = expf(logits[sel[k]] - mx);
        sum += (double)w[k];
    }
    const float inv = (float)(1.0 / sum);
    for (int k = 0; k < n_used; k++)
        w[k] *= inv;
}

/* One expert's FFN over the n rows of moe_x routed to it; the result replaces moe_x. */
static void run_expert(struct threadpool *tp, struct fwd *f, const struct layer *L, int x, int n)
{
    struct scratch *sc = &f->m->sc;
    struct qplan gu = L->plan_exp_gu, down = L->plan_exp_down;
    if (f->m->feat.relu2_ffn) { // up alone (nemotron_h_moe)
        gu.w[0] = &L->exp_up[x];
    } else {
        gu.w[0] = &L->exp_gate[x];
        gu.w[1] = &L->exp_up[x];
    }
    down.w[0] = &L->exp_down[x];
    f->n_rows = n;
    f->src = sc->moe_x;
    f->plan = &gu;
    fwd_run_light(tp, fwd_job_quant, f, n <= LIGHT_ROWS_MAX);
    fwd_run_matmul_group(tp, f, &gu, sc->gate, sc->up, NULL);
    f->plan = &down;
    const size_t fe = (size_t)f->m->feat.n_ff_exp;
    f->gate_bias = L->exp_gate_b ? L->exp_gate_b + (size_t)x * fe : NULL;
    f->up_bias = L->exp_up_b ? L->exp_up_b + (size_t)x * fe : NULL;
    fwd_run_light(tp, fwd_job_swiglu_quant, f, n <= LIGHT_ROWS_MAX);
    f->gate_bias = f->up_bias = NULL;
    fwd_run_matmul_group(tp, f, &down, sc->moe_x, NULL, NULL);
}

/* The mixture-of-experts FFN of the normed rows in xn (the router's slot already holds their
 * quantization) into proj: the router's choice per token, then each chosen expert once over
 * every row routed to it, so its weights stream once per step; each (token, slot) output is
 * weighted and the slots summed in rank order as the reference does, plus the shared expert's
 * output when the family has one. */
void moe_run(struct threadpool *tp, struct fwd *f, const struct layer *L)
{
    struct engine_model *m = f->m;
    struct scratch *sc = &m->sc;
    const struct model_feat *ft = &m->feat;
    const int n_rows = f->n_rows, k = ft->n_expert_used;
    const size_t e = (size_t)m->info.n_embd;
    fwd_run_matmul_group(tp, f, &L->plan_router, sc->router, NULL, NULL);
    for (int t = 0; t < n_rows; t++) {
        float *logits = sc->router + (size_t)t * ft->n_expert;
        for (int i = 0; L->gate_inp_b && i < ft->n_expert; i++)
            logits[i] += L->gate_inp_b[i];
        if (ft->softmax_selected)
            moe_route_selected(logits, ft->n_expert, k, sc->moe_sel + (size_t)t * k,
                               sc->moe_w + (size_t)t * k);
        else if (ft->moe_sigmoid)
            moe_route_sigmoid(logits, L->exp_probs_b, ft->n_expert, k, ft->expert_norm,
                              ft->expert_scale, sc->moe_sel + (size_t)t * k,
                              sc->moe_w + (size_t)t * k);
        else
            moe_route(logits, ft->n_expert, k, ft->expert_norm, ft->expert_scale,
                      sc->moe_sel + (size_t)t * k, sc->moe_w + (size_t)t * k);
    }
    if (ft->n_ff_shexp > 0) {
        f->src = sc->xn;
        f->plan = &L->plan_sh_gu;
        fwd_run_light(tp, fwd_job_quant, f, n_rows <= LIGHT_ROWS_MAX);
        fwd_run_matmul_group(tp, f, &L->plan_sh_gu, sc->gate, sc->up, sc->moe_shg);
        f->plan = &L->plan_sh_down;
        fwd_run_light(tp, fwd_job_swiglu_quant, f, n_rows <= LIGHT_ROWS_MAX);
        fwd_run_matmul_group(tp, f, &L->plan_sh_down, sc->moe_sh, NULL, NULL);
    }
    for (int x = 0; x < ft->n_expert; x++) {
        int n = 0;
        for (int r = 0; r < n_rows * k; r++)
            if (sc->moe_sel[r] == x) sc->moe_rows[n++] = r;
        if (n == 0) continue;
        for (int i = 0; i < n; i++)
            memcpy(sc->moe_x + (size_t)i * e, sc->xn + (size_t)(sc->moe_rows[i] / k) * e,
                   e * sizeof(float));
        run_expert(tp, f, L, x, n);
        for (int i = 0; i < n; i++) {
            const int r = sc->moe_rows[i];
            const float w = sc->moe_w[r], *y = sc->moe_x + (size_t)i * e;
            const float *b = L->exp_down_b ? L->exp_down_b + (size_t)x * e : NULL;
            float *out = sc->moe_out + (size_t)r * e;
            for (size_t j = 0; j < e; j++)
                out[j] = (b ? y[j] + b[j] : y[j]) * w;
        }
    }
    f->n_rows = n_rows;
    for (int t = 0; t < n_rows; t++) {
        float *y = sc->proj + (size_t)t * e;
        memcpy(y, sc->moe_out + (size_t)t * k * e, e * sizeof(float));
        for (int s = 1; s < k; s++) {
            const float *o = sc->moe_out + ((size_t)t * k + (size_t)s) * e;
            for (size_t j = 0; j < e; j++)
                y[j] += o[j];
        }
        // qwen35moe gates the shared expert by sigmoid(its gate's logit)
        const float g = L->sh_gate_inp.data ? 1.0f / (1.0f + expf(-sc->moe_shg[t])) : 1.0f;
        for (size_t j = 0; ft->n_ff_shexp > 0 && j < e; j++)
            y[j] += L->sh_gate_inp.data ? sc->moe_sh[(size_t)t * e + j] * g
                                        : sc->moe_sh[(size_t)t * e + j];
    }
}
