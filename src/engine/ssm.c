/* Reference kernels of the recurrent layers (ssm.h), one token per call, and the choice of
 * the scan variants. */
#include "engine/ssm.h"

#if defined(__x86_64__) || defined(__i386__)
#include "engine/x86/ssm_x86.h"
#endif
#if defined(__aarch64__)
#include "engine/arm/ssm_neon.h"
#endif

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

/* The reference's portable dot: float products summed in double, in order. */
static float dot_double(int n, const float *a, const float *b)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(a[i] * b[i]);
    return (float)sum;
}

void ssm_delta_step_ref(int n, float *state, const float *q, const float *k, const float *v,
                        float decay, float beta, float scale, float *out)
{
    // Row by row: each row's decay, update and read depend on that row alone, so one pass
    // over the state does what the reference's four passes do, element for element.
    for (int j = 0; j < n; j++) {
        float *row = state + (size_t)j * n;
        for (int i = 0; i < n; i++)
            row[i] *= decay;
        const float d = (v[j] - dot_double(n, row, k)) * beta;
        for (int i = 0; i < n; i++)
            row[i] = fmaf(k[i], d, row[i]);
        out[j] = dot_double(n, row, q) * scale;
    }
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

static const struct ssm_kernels kernels_ref = {
    .delta_step = ssm_delta_step_ref,
    .ssd_step = ssm_ssd_step_ref,
};

#if defined(__x86_64__) || defined(__i386__)
static const struct ssm_kernels kernels_avx2 = {
    .delta_step = ssm_delta_step_avx2,
    .ssd_step = ssm_ssd_step_avx2,
};

static const struct ssm_kernels kernels_avx512 = {
    .delta_step = ssm_delta_step_avx512,
    .ssd_step = ssm_ssd_step_avx512,
};
#endif

#if defined(__aarch64__)
static const struct ssm_kernels kernels_neon = {
    .delta_step = ssm_delta_step_neon,
    .ssd_step = ssm_ssd_step_neon,
};
#endif

static const struct ssm_kernels *kernels_sel = &kernels_ref;

#if defined(__x86_64__) || defined(__i386__)
const struct ssm_kernels *ssm_avx2_kernels(void)
{
    return &kernels_avx2;
}

const struct ssm_kernels *ssm_avx512_kernels(void)
{
    return &kernels_avx512;
}
#endif

#if defined(__aarch64__)
const struct ssm_kernels *ssm_neon_kernels(void)
{
    return &kernels_neon;
}
#endif

void ssm_select(const struct ssm_kernels *k)
{
    kernels_sel = k;
}

const struct ssm_kernels *ssm_get(void)
{
    return kernels_sel;
}

const struct ssm_kernels *ssm_ref_kernels(void)
{
    return &kernels_ref;
}
