/* Reference kernels of the recurrent layers (ssm.h). Plain C, one token per call; SIMD
 * variants, when they come, live beside the other ISA folders with their own selection. */
#include "engine/ssm.h"

#include <math.h>
#include <string.h>

void ssm_conv_step_ref(int c0, int c1, int d_conv, float *tail, const float *x, const float *w,
                       float *out)
{
    const int n_tap = d_conv + 1;
    for (int c = c0; c < c1; c++) {
        float *t = tail + (size_t)c * (size_t)d_conv;
        const float *wc = w + (size_t)c * (size_t)n_tap;
        float sum = 0.0f;
        for (int k = 0; k < d_conv; k++)
            sum = fmaf(t[k], wc[k], sum);
        sum = fmaf(x[c], wc[d_conv], sum);
        out[c] = sum;
        if (d_conv > 0) {
            memmove(t, t + 1, (size_t)(d_conv - 1) * sizeof *t);
            t[d_conv - 1] = x[c];
        }
    }
}

static float dot_fma(int n, const float *a, const float *b)
{
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum = fmaf(a[i], b[i], sum);
    return sum;
}

void ssm_delta_step_ref(int n, float *state, const float *q, const float *k, const float *v,
                        float decay, float beta, float scale, float *tmp, float *out)
{
    const size_t nn = (size_t)n * (size_t)n;
    for (size_t i = 0; i < nn; i++)
        state[i] *= decay;
    for (int j = 0; j < n; j++)
        tmp[j] = (v[j] - dot_fma(n, state + (size_t)j * n, k)) * beta;
    for (int j = 0; j < n; j++) {
        float *row = state + (size_t)j * n;
        for (int i = 0; i < n; i++)
            row[i] = fmaf(k[i], tmp[j], row[i]);
    }
    for (int j = 0; j < n; j++)
        out[j] = dot_fma(n, state + (size_t)j * n, q) * scale;
}

void ssm_l2norm_ref(int n, const float *x, float eps, float *y)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps / (float)n), inv = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * scale * inv;
}

void ssm_ssd_step_ref(int head_dim, int n, float *state, const float *x, const float *b,
                      const float *c, float decay, float dt, float *y)
{
    for (int i = 0; i < head_dim; i++) {
        float *row = state + (size_t)i * (size_t)n;
        const float x_dt = x[i] * dt;
        float sum = 0.0f;
        for (int k = 0; k < n; k++) {
            const float kept = row[k] * decay, added = b[k] * x_dt;
            row[k] = kept + added;
            sum = fmaf(row[k], c[k], sum);
        }
        y[i] = sum;
    }
}
