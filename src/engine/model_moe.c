/* Expert tensors and routing for the mixture-of-experts families. */
#include "engine/model_moe.h"

#include "engine/quants/quants.h"
#include "util/checked.h"

#include <math.h>
#include <stdio.h>

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
