/* Shared pieces of the projector encoders; see clip_linear.h. */
#include "engine/mtmd/clip_linear.h"

#include "engine/matmul.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"

#include <math.h>
#include <string.h>

struct linear_job {
    const struct clip_mat *m;
    const float *src;
    float *dst;
    int64_t n_rows;
    void *qin;
    size_t qin_row;
};

static void job_quant_in(void *arg, int ith, int nth)
{
    const struct linear_job *j = arg;
    const uint32_t dot = quant_traits_of(j->m->type)->dot_type;
    (void)matmul_quantize_input(j->src, j->n_rows, j->m->n_in, dot, j->qin, j->qin_row, ith, nth);
}

static void job_matmul(void *arg, int ith, int nth)
{
    const struct linear_job *j = arg;
    const struct matmul_args a = {.w = j->m->w,
                                  .w_type = j->m->type,
                                  .n_in = j->m->n_in,
                                  .n_out = j->m->n_out,
                                  .x = j->qin,
                                  .x_row_bytes = j->qin_row,
                                  .n_tok = j->n_rows,
                                  .y = j->dst,
                                  .rule = MATMUL_RULE_PROMPT};
    matmul_run(&a, ith, nth);
}

void clip_linear(struct threadpool *tp, void *qin, const struct clip_mat *m, const float *src,
                 float *dst, int64_t n_rows)
{
    struct linear_job j = {m, src, dst, n_rows, qin, matmul_input_row_bytes(m->type, m->n_in)};
    threadpool_run(tp, job_quant_in, &j);
    threadpool_run(tp, job_matmul, &j);
    if (m->bias)
        for (int64_t t = 0; t < n_rows; t++)
            for (int64_t i = 0; i < m->n_out; i++)
                dst[t * m->n_out + i] += m->bias[i];
}

void clip_layernorm(float *y, const float *x, const float *w, const float *b, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    const float mean = (float)(sum / n);
    double var = 0.0;
    for (int i = 0; i < n; i++)
        var += (double)(x[i] - mean) * (x[i] - mean);
    const float scale = 1.0f / sqrtf((float)(var / n) + eps);
    for (int i = 0; i < n; i++)
        y[i] = (x[i] - mean) * scale * w[i] + (b ? b[i] : 0.0f);
}

void clip_gelu(float *x, size_t n)
{
    const float *tab = ops_gelu_table();
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] <= -10.0f ? 0.0f : x[i] >= 10.0f ? x[i] : tab[ops_f32_to_f16(x[i])];
}

void clip_attend_f16(const float *q, const uint16_t *kh, const uint16_t *vh, size_t stride, int lo,
                     int hi, int hd, float scale, float *out)
{
    const struct ops_kernels *ops = ops_get();
    uint16_t qh[CLIP_HEAD_DIM_MAX], acc[CLIP_HEAD_DIM_MAX];
    ops->f32_to_f16(hd, q, qh);
    memset(acc, 0, sizeof(uint16_t) * (size_t)hd);
    float mx = -INFINITY, sum = 0.0f;
    for (int j = lo; j < hi; j++) {
        const size_t row = (size_t)j * stride;
        const float sc = ops->dot_f16(hd, kh + row, qh) * scale;
        float ms = 1.0f, vs = 1.0f;
        if (sc > mx) {
            const float mx_old = mx;
            mx = sc;
            ms = expf(mx_old - mx); // 0 for the first key
            ops->scale_f16(hd, acc, ms);
        } else {
            vs = expf(sc - mx);
        }
        ops->mad_f16(hd, acc, vh + row, vs);
        sum = fmaf(sum, ms, vs);
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < hd; i++)
        out[i] = ops_f16_to_f32(acc[i]) * inv;
}
