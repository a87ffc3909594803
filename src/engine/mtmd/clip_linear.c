/* Shared pieces of the projector encoders; see clip_linear.h. */
#include "engine/mtmd/clip_linear.h"

#include "engine/matmul.h"
#include "engine/quants/quants.h"

#include <math.h>

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
