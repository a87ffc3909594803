/* The BERT forward pass over a batch of inputs: embeddings + LayerNorm, then per layer Q/K/V
 * (+bias), bidirectional attention within each input, output projection, residual +
 * LayerNorm, GELU FFN, residual + LayerNorm; finally pooling and L2 normalization, or the
 * reranker's classification head on the first token's state. Weight
 * products run once over all stacked tokens; each step is one threadpool run split by rows. */
#include "engine/bert/bert_internal.h"
#include "engine/matmul.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"

#include <math.h>
#include <string.h>

#define ATTN_KB    128 // keys scored per softmax rescale
#define ATTN_QB    16  // queries per attention work item
#define GELU_CHUNK 256 // elements converted to half at a time (stack buffer)
#ifndef MATMUL_CHUNK
#define MATMUL_CHUNK 32 // tokens per matrix-product chunk
#endif

/* State of one embed call, shared read-only by the kernel threads of each step. */
struct fwd {
    struct engine_encoder *e;
    const int32_t *const *inputs;
    const int *n_tokens;
    int n_inputs;
    int n_tok;      // stacked tokens
    int n_rows;     // rows still computed (n_tok, or n_inputs once only pooled rows remain)
    bool is_pooled; // only the pooled rows remain: one per input
    const struct bert_layer *L;
    // step parameters
    const float *src;  // rows to quantize
    const float *bias; // added with src to x before the norm, or NULL
    const float *norm_w, *norm_b;
    const struct bert_plan *plan; // next consumer of the step's output (NULL: none)
    float *mm_y[BERT_PLAN_MAX];
};

static void split(int n, int ith, int nth, int *lo, int *hi)
{
    *lo = (int)((int64_t)n * ith / nth);
    *hi = (int)((int64_t)n * (ith + 1) / nth);
}

/* y = (x - mean) / sqrt(var + eps) * w + b, sums in double as the reference does. In place
 * is allowed. */
static void layernorm(float *y, const float *x, const float *w, const float *b, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    const float mean = (float)(sum / n);
    double var = 0.0;
    for (int i = 0; i < n; i++) {
        const float c = x[i] - mean;
        var += (double)(c * c);
    }
    const float scale = 1.0f / sqrtf((float)(var / n) + eps);
    for (int i = 0; i < n; i++)
        y[i] = (x[i] - mean) * scale * w[i] + b[i];
}

/* Quantizes rows [lo, hi) of src (n_in wide) into every slot of the step's plan. */
static void quantize_rows(const struct fwd *f, const float *src, int64_t n_in, int lo, int hi)
{
    const struct bert_plan *p = f->plan;
    if (!p || hi <= lo) return;
    for (int s = 0; s < p->n_slots; s++) {
        uint8_t *dst = (uint8_t *)f->e->sc.slot[s] + (size_t)lo * p->slot_row_bytes[s];
        (void)matmul_quantize_input(src + (size_t)lo * n_in, hi - lo, n_in, p->slot_type[s], dst,
                                    p->slot_row_bytes[s], 0, 1);
    }
}

/* Adds row r of a (n_embd, rows) lookup table to y. */
static void add_row(const struct bert_wmat *w, int64_t r, float *y, float *tmp, int n)
{
    size_t row_bytes = 0;
    (void)quant_row_bytes(w->type, w->n_in, &row_bytes);
    quant_traits_of(w->type)->to_float((const uint8_t *)w->data + (size_t)r * row_bytes, tmp, n);
    for (int i = 0; i < n; i++)
        y[i] += tmp[i];
}

/* cos/sin of each rotated pair at position pos into row t of the tables, the angle advanced
 * by a float multiply per pair as the reference computes it. */
static void rope_table(const struct engine_encoder *e, int pos, int t)
{
    const int half = e->n_rot / 2;
    const float theta_scale = powf(e->rope_base, -2.0f / (float)e->n_rot);
    float theta = (float)pos;
    float *cs = e->sc.rope_cos + (size_t)t * half, *sn = e->sc.rope_sin + (size_t)t * half;
    for (int i = 0; i < half; i++) {
        cs[i] = cosf(theta);
        sn[i] = sinf(theta);
        theta *= theta_scale;
    }
}

/* Rotates the (i, i + n_rot / 2) pairs of every head of one q or k row (NeoX order). */
static void rope_row(const struct engine_encoder *e, float *x, int t)
{
    const int half = e->n_rot / 2, hd = e->info.head_dim;
    const float *cs = e->sc.rope_cos + (size_t)t * half, *sn = e->sc.rope_sin + (size_t)t * half;
    for (int h = 0; h < e->info.n_head; h++) {
        float *y = x + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            const float x0 = y[i], x1 = y[i + half];
            y[i] = x0 * cs[i] - x1 * sn[i];
            y[i + half] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* Step: x = LayerNorm(token + type 0 + position), quantized for layer 0; RoPE tables for
 * nomic-bert. Split by rows. */
static void job_embed(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_encoder *e = f->e;
    const int d = e->info.n_embd;
    float *tmp = e->sc.q; // free until the first projection; one row per token
    int lo, hi;
    split(f->n_tok, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        const int in = e->sc.row_input[t], pos = t - e->sc.in_start[in];
        float *x = e->sc.x + (size_t)t * d, *row = tmp + (size_t)t * d;
        memset(x, 0, sizeof(float) * (size_t)d);
        add_row(&e->tok_embd, f->inputs[in][pos], x, row, d);
        if (e->type_embd.data) add_row(&e->type_embd, 0, x, row, d);
        if (e->pos_embd.data) add_row(&e->pos_embd, pos, x, row, d);
        layernorm(x, x, e->embd_norm_w, e->embd_norm_b, d, e->info.norm_eps);
        if (e->n_rot > 0) rope_table(e, pos, t);
    }
    quantize_rows(f, e->sc.x, d, lo, hi);
}

/* Step: every weight of the plan times its slot, each split by weight rows. Tokens go in
 * chunks so a chunk's activations stay in cache while the thread's weight rows stream past
 * them (a whole batch of activations is megabytes); every thread owns the same rows in every
 * chunk, so chunks need no barrier. */
static void job_matmul(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct bert_plan *p = f->plan;
    // The kernels' summation order depends on the token count (as the reference's does): a
    // pooled row goes alone so its bits do not depend on the other inputs of the batch.
    const int chunk = f->is_pooled ? 1 : MATMUL_CHUNK;
    for (int t0 = 0; t0 < f->n_rows; t0 += chunk) {
        const int n = f->n_rows - t0 < chunk ? f->n_rows - t0 : chunk;
        for (int i = 0; i < p->n_w; i++) {
            const struct bert_wmat *w = p->w[i];
            const size_t xb = p->slot_row_bytes[p->w_slot[i]];
            const struct matmul_args a = {
                .w = w->data,
                .w_type = w->type,
                .n_in = w->n_in,
                .n_out = w->n_out,
                .x = (const uint8_t *)f->e->sc.slot[p->w_slot[i]] + (size_t)t0 * xb,
                .x_row_bytes = xb,
                .n_tok = n,
                .y = f->mm_y[i] + (size_t)t0 * (size_t)w->n_out,
            };
            matmul_run(&a, ith, nth);
        }
    }
}

static void run_matmul(struct threadpool *tp, struct fwd *f, const struct bert_plan *plan,
                       float *y0, float *y1, float *y2)
{
    f->plan = plan;
    f->mm_y[0] = y0;
    f->mm_y[1] = y1;
    f->mm_y[2] = y2;
    threadpool_run(tp, job_matmul, f);
}

static void add_vec(float *y, const float *b, int n)
{
    for (int i = 0; b && i < n; i++)
        y[i] += b[i];
}

/* Splits row t of the fused projection (+ its bias) into q, k and v. */
static void unfuse(const struct bert_scratch *sc, const struct bert_layer *L, int t, int d)
{
    const float *src = sc->qkv + (size_t)t * 3 * d;
    float *dst[3] = {sc->q + (size_t)t * d, sc->k + (size_t)t * d, sc->v + (size_t)t * d};
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < d; i++)
            dst[p][i] = src[p * d + i] + (L->bqkv ? L->bqkv[p * d + i] : 0.0f);
}

/* Step: Q/K/V biases (and RoPE); keys to half precision in head-major rows, values rounded to half and
 * transposed per (head, input) for the probability x value product. Split by rows. */
static void job_qkv_post(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct bert_scratch *sc = &f->e->sc;
    const struct bert_layer *L = f->L;
    const int d = f->e->info.n_embd, hd = f->e->info.head_dim, n_head = f->e->info.n_head;
    uint16_t half[BERT_HEAD_DIM_MAX];
    int lo, hi;
    split(f->n_tok, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        const size_t o = (size_t)t * d;
        const int in = sc->row_input[t], first = sc->in_start[in];
        const int n_i = sc->in_start[in + 1] - first, j = t - first;
        if (L->wqkv.data) unfuse(sc, L, t, d);
        add_vec(sc->q + o, L->bq, d);
        add_vec(sc->k + o, L->bk, d);
        add_vec(sc->v + o, L->bv, d);
        if (f->e->n_rot > 0) {
            rope_row(f->e, sc->q + o, t);
            rope_row(f->e, sc->k + o, t);
        }
        for (int h = 0; h < n_head; h++) {
            const size_t hb = (size_t)h * (size_t)f->n_tok * hd;
            ops_get()->f32_to_f16(hd, sc->k + o + (size_t)h * hd, sc->k16 + hb + (size_t)t * hd);
            ops_get()->f32_to_f16(hd, sc->v + o + (size_t)h * hd, half);
            float *vt = sc->vt + hb + (size_t)first * hd + (size_t)j;
            for (int i = 0; i < hd; i++)
                vt[(size_t)i * n_i] = ops_f16_to_f32(half[i]);
        }
    }
}

/* One attention work item: queries [q0, q0 + nq) of input `in`, head h. */
struct attn_item {
    int in, h, q0, nq;
};

/* Running softmax state of the item's queries. */
struct attn_acc {
    float mx[ATTN_QB], sum[ATTN_QB];
    float acc[BERT_HEAD_DIM_MAX * ATTN_QB];  // (head_dim, nq) transposed output
    float part[BERT_HEAD_DIM_MAX * ATTN_QB]; // this key block's share
    float s[ATTN_QB * ATTN_KB];              // (nq, nk) scores, then probabilities
};

/* Scores of the queries against keys [j0, j0 + nk): S = Q K^T as a product with the keys as
 * the weight rows (F16) and the strided query rows as activations. */
static void attn_scores(const struct fwd *f, const struct attn_item *it, int j0, int nk,
                        struct attn_acc *a)
{
    const struct bert_scratch *sc = &f->e->sc;
    const int d = f->e->info.n_embd, hd = f->e->info.head_dim;
    const size_t kb =
        ((size_t)it->h * (size_t)f->n_tok + (size_t)(sc->in_start[it->in] + j0)) * (size_t)hd;
    const struct matmul_args m = {
        .w = sc->k16 + kb,
        .w_type = QUANT_F16,
        .n_in = hd,
        .n_out = nk,
        .x = sc->q + (size_t)(sc->q_start[it->in] + it->q0) * d + (size_t)it->h * hd,
        .x_row_bytes = (size_t)d * sizeof(float),
        .n_tok = it->nq,
        .y = a->s,
    };
    matmul_run(&m, 0, 1);
}

/* Folds one key block into the running softmax: rescales what is accumulated when the
 * maximum grows, turns scores into probabilities, and adds P V (values as activations
 * against the probability rows, giving the output transposed). */
static void attn_block(const struct fwd *f, const struct attn_item *it, int j0, int nk,
                       struct attn_acc *a)
{
    const struct bert_scratch *sc = &f->e->sc;
    const int hd = f->e->info.head_dim, first = sc->in_start[it->in];
    const int n_i = sc->in_start[it->in + 1] - first;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int r = 0; r < it->nq; r++) {
        float *s = a->s + (size_t)r * nk, bmx = -INFINITY;
        for (int k = 0; k < nk; k++) {
            s[k] *= scale;
            bmx = s[k] > bmx ? s[k] : bmx;
        }
        if (bmx > a->mx[r]) {
            const float c = expf(a->mx[r] - bmx); // 0 on the first block
            for (int i = 0; i < hd; i++)
                a->acc[(size_t)i * it->nq + r] *= c;
            a->sum[r] *= c;
            a->mx[r] = bmx;
        }
        for (int k = 0; k < nk; k++) {
            s[k] = expf(s[k] - a->mx[r]);
            a->sum[r] += s[k];
        }
    }
    const struct matmul_args m = {
        .w = a->s,
        .w_type = QUANT_F32,
        .n_in = nk,
        .n_out = it->nq,
        .x = sc->vt + ((size_t)it->h * (size_t)f->n_tok + (size_t)first) * hd + (size_t)j0,
        .x_row_bytes = (size_t)n_i * sizeof(float),
        .n_tok = hd,
        .y = a->part,
    };
    matmul_run(&m, 0, 1);
    for (int i = 0; i < hd * it->nq; i++)
        a->acc[i] += a->part[i];
}

/* Attention of one item over every key of its input, in blocks with an online softmax. */
static void attend(const struct fwd *f, const struct attn_item *it, struct attn_acc *a)
{
    const struct bert_scratch *sc = &f->e->sc;
    const int d = f->e->info.n_embd, hd = f->e->info.head_dim;
    const int n_i = sc->in_start[it->in + 1] - sc->in_start[it->in];
    for (int r = 0; r < it->nq; r++) {
        a->mx[r] = -INFINITY;
        a->sum[r] = 0.0f;
    }
    memset(a->acc, 0, sizeof(float) * (size_t)hd * (size_t)it->nq);
    for (int j0 = 0; j0 < n_i; j0 += ATTN_KB) {
        const int nk = n_i - j0 < ATTN_KB ? n_i - j0 : ATTN_KB;
        attn_scores(f, it, j0, nk, a);
        attn_block(f, it, j0, nk, a);
    }
    for (int r = 0; r < it->nq; r++) {
        float *out = sc->attn + (size_t)(sc->q_start[it->in] + it->q0 + r) * d + (size_t)it->h * hd;
        const float inv = 1.0f / a->sum[r];
        for (int i = 0; i < hd; i++)
            out[i] = a->acc[(size_t)i * it->nq + r] * inv;
    }
}

/* Step: attention for every (input, head, query block), dealt round-robin to the threads
 * (items differ in cost with the input's length). */
static void job_attention(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct bert_scratch *sc = &f->e->sc;
    struct attn_acc a;
    int p = 0;
    for (int in = 0; in < f->n_inputs; in++) {
        const int nq_all = sc->q_start[in + 1] - sc->q_start[in];
        for (int h = 0; h < f->e->info.n_head; h++) {
            for (int q0 = 0; q0 < nq_all; q0 += ATTN_QB, p++) {
                if (p % nth != ith) continue;
                const struct attn_item it = {.in = in,
                                             .h = h,
                                             .q0 = q0,
                                             .nq = nq_all - q0 < ATTN_QB ? nq_all - q0 : ATTN_QB};
                attend(f, &it, &a);
            }
        }
    }
}

/* Step: quantize src (the plan's n_in wide) for the plan. Split by rows. */
static void job_quant(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    quantize_rows(f, f->src, f->plan->w[0]->n_in, lo, hi);
}

/* Step: x = LayerNorm(x + src + bias), quantized for the next plan. Split by rows. */
static void job_residual_norm(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_encoder *e = f->e;
    const int d = e->info.n_embd;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *x = e->sc.x + (size_t)t * d;
        const float *a = f->src + (size_t)t * d;
        for (int i = 0; i < d; i++)
            x[i] += a[i] + (f->bias ? f->bias[i] : 0.0f);
        layernorm(x, x, f->norm_w, f->norm_b, d, e->info.norm_eps);
    }
    quantize_rows(f, e->sc.x, d, lo, hi);
}

/* gelu(x + b) through the half-precision table, in place. */
static void gelu_row(const float *tab, float *y, const float *b, int64_t n)
{
    uint16_t h[GELU_CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += GELU_CHUNK) {
        const int64_t m = n - i0 < GELU_CHUNK ? n - i0 : GELU_CHUNK;
        float *x = y + i0;
        for (int64_t i = 0; b && i < m; i++)
            x[i] += b[i0 + i];
        ops_get()->f32_to_f16(m, x, h);
        for (int64_t i = 0; i < m; i++)
            x[i] = x[i] <= -10.0f ? 0.0f : x[i] >= 10.0f ? x[i] : tab[h[i]];
    }
}

/* silu(gate) * (up + b), into gate. */
static void swiglu_row(float *g, const float *u, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * (u[i] + (b ? b[i] : 0.0f));
}

/* Step: ff = gelu(ff + b_up), or the SwiGLU of gate and up, quantized for ffn_down. Split
 * by rows. */
static void job_ffn_act(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_encoder *e = f->e;
    const int64_t n_ff = e->info.n_ff;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        const size_t o = (size_t)t * (size_t)n_ff;
        if (f->L->w_gate.data)
            swiglu_row(e->sc.ff + o, e->sc.ff_up + o, f->L->b_up, n_ff);
        else
            gelu_row(e->gelu, e->sc.ff + o, f->L->b_up, n_ff);
    }
    quantize_rows(f, e->sc.ff, n_ff, lo, hi);
}

/* Before the last layer's attention, with cls or last pooling only one row per input
 * matters: move its q and x rows to the front (keys and values stay for every token). */
static void keep_pooled_rows(struct fwd *f)
{
    struct bert_scratch *sc = &f->e->sc;
    const size_t d = (size_t)f->e->info.n_embd;
    const bool is_last = f->e->info.pooling == ENGINE_POOLING_LAST;
    for (int i = 0; i < f->n_inputs; i++) {
        const int t = is_last ? sc->in_start[i + 1] - 1 : sc->in_start[i];
        if (t != i) {
            memmove(sc->x + (size_t)i * d, sc->x + (size_t)t * d, d * sizeof(float));
            memmove(sc->q + (size_t)i * d, sc->q + (size_t)t * d, d * sizeof(float));
        }
        sc->row_input[i] = i;
        sc->q_start[i] = i;
    }
    sc->q_start[f->n_inputs] = f->n_inputs;
    f->n_rows = f->n_inputs;
    f->is_pooled = true;
}

static void run_layer(struct threadpool *tp, struct fwd *f, int il)
{
    struct engine_encoder *e = f->e;
    struct bert_scratch *sc = &e->sc;
    const struct bert_layer *L = &e->layers[il];
    const bool is_last = il == e->info.n_layer - 1;
    f->L = L;
    if (L->wqkv.data)
        run_matmul(tp, f, &L->plan_qkv, sc->qkv, NULL, NULL);
    else
        run_matmul(tp, f, &L->plan_qkv, sc->q, sc->k, sc->v);
    threadpool_run(tp, job_qkv_post, f);
    if (is_last && e->info.pooling != ENGINE_POOLING_MEAN && e->info.pooling != ENGINE_POOLING_NONE)
        keep_pooled_rows(f);
    threadpool_run(tp, job_attention, f);
    f->src = sc->attn;
    f->plan = &L->plan_o;
    threadpool_run(tp, job_quant, f);
    run_matmul(tp, f, &L->plan_o, sc->proj, NULL, NULL);
    f->src = sc->proj;
    f->bias = L->bo;
    f->norm_w = L->attn_norm_w;
    f->norm_b = L->attn_norm_b;
    f->plan = &L->plan_up;
    threadpool_run(tp, job_residual_norm, f);
    run_matmul(tp, f, &L->plan_up, sc->ff, sc->ff_up, NULL); // gate (or up), up
    f->plan = &L->plan_down;
    threadpool_run(tp, job_ffn_act, f);
    run_matmul(tp, f, &L->plan_down, sc->proj, NULL, NULL);
    f->src = sc->proj;
    f->bias = L->b_down;
    f->norm_w = L->out_norm_w;
    f->norm_b = L->out_norm_b;
    f->plan = is_last ? NULL : &e->layers[il + 1].plan_qkv;
    threadpool_run(tp, job_residual_norm, f);
}

/* Step: y = tanh(y + cls.bias) over the head's dense output (n_rows, n_embd), quantized for
 * cls.output when the file has it. Split by rows. */
static void job_cls_act(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_encoder *e = f->e;
    const int d = e->info.n_embd;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *y = e->sc.proj + (size_t)t * d;
        for (int i = 0; i < d; i++)
            y[i] = tanhf(y[i] + (e->cls_b ? e->cls_b[i] : 0.0f));
    }
    quantize_rows(f, e->sc.proj, d, lo, hi);
}

/* Rank pooling: the pooled rows (one per input, at the front of x) through the classification
 * head into out (n_inputs, n_cls_out), unnormalized. */
static void run_head(struct threadpool *tp, struct fwd *f, float *out)
{
    struct engine_encoder *e = f->e;
    struct bert_scratch *sc = &e->sc;
    const int d = e->info.n_embd, n_out = e->info.n_cls_out;
    const float *h = sc->x, *bias = NULL;
    int width = d;
    if (e->cls.data) {
        f->src = sc->x;
        f->plan = &e->plan_cls;
        threadpool_run(tp, job_quant, f);
        run_matmul(tp, f, &e->plan_cls, sc->proj, NULL, NULL);
        f->plan = e->cls_out.data ? &e->plan_cls_out : NULL;
        threadpool_run(tp, job_cls_act, f);
        h = sc->proj;
    } else if (e->cls_out.data) {
        f->src = sc->x;
        f->plan = &e->plan_cls_out;
        threadpool_run(tp, job_quant, f);
    }
    if (e->cls_out.data) {
        run_matmul(tp, f, &e->plan_cls_out, sc->q, NULL, NULL);
        h = sc->q;
        bias = e->cls_out_b;
        width = n_out;
    }
    for (int i = 0; i < f->n_inputs; i++)
        for (int k = 0; k < n_out; k++)
            out[(size_t)i * n_out + k] = h[(size_t)i * width + k] + (bias ? bias[k] : 0.0f);
}

/* Pools rows into out (n_inputs, n_embd) and L2-normalizes each vector. */
static void pool_rows(const struct fwd *f, float *out)
{
    const struct engine_encoder *e = f->e;
    const int d = e->info.n_embd;
    for (int i = 0; i < f->n_inputs; i++) {
        float *o = out + (size_t)i * d;
        if (e->info.pooling == ENGINE_POOLING_MEAN) {
            const int t0 = e->sc.in_start[i], t1 = e->sc.in_start[i + 1];
            memset(o, 0, sizeof(float) * (size_t)d);
            for (int t = t0; t < t1; t++)
                add_vec(o, e->sc.x + (size_t)t * d, d);
            for (int k = 0; k < d; k++)
                o[k] /= (float)(t1 - t0);
        } else {
            memcpy(o, e->sc.x + (size_t)i * d, sizeof(float) * (size_t)d);
        }
        double norm = 0.0;
        for (int k = 0; k < d; k++)
            norm += (double)o[k] * o[k];
        const float inv = norm > 0.0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (int k = 0; k < d; k++)
            o[k] *= inv;
    }
}

static int check_batch(const struct engine_encoder *e, const int32_t *const *inputs,
                       const int *n_tokens, int n_inputs, int *n_tok, struct errmsg *err)
{
    const struct engine_encoder_info *in = &e->info;
    if (!inputs || !n_tokens || n_inputs < 1) return errmsg_set(err, ERR_INVALID, "empty batch");
    int64_t total = 0;
    for (int i = 0; i < n_inputs; i++) {
        if (n_tokens[i] < 1 || !inputs[i])
            return errmsg_set(err, ERR_INVALID, "input %d: no tokens", i);
        if (n_tokens[i] > in->n_ctx_train)
            return errmsg_set(err, ERR_LIMIT, "input %d: %d tokens, more than the %d allowed", i,
                              n_tokens[i], in->n_ctx_train);
        for (int j = 0; j < n_tokens[i]; j++)
            if (inputs[i][j] < 0 || inputs[i][j] >= in->n_vocab)
                return errmsg_set(err, ERR_INVALID, "input %d: token id %d outside 0..%d", i,
                                  (int)inputs[i][j], in->n_vocab - 1);
        total += n_tokens[i];
        if (total > in->n_batch_tokens)
            return errmsg_set(err, ERR_LIMIT, "batch has more than %d tokens", in->n_batch_tokens);
    }
    *n_tok = (int)total;
    return ERR_OK;
}

int engine_encoder_embed(struct engine_encoder *e, struct threadpool *tp,
                         const int32_t *const *inputs, const int *n_tokens, int n_inputs,
                         float *out, struct errmsg *err)
{
    int n_tok = 0;
    int rc = check_batch(e, inputs, n_tokens, n_inputs, &n_tok, err);
    if (rc != ERR_OK) return rc;
    struct bert_scratch *sc = &e->sc;
    struct fwd f = {.e = e,
                    .inputs = inputs,
                    .n_tokens = n_tokens,
                    .n_inputs = n_inputs,
                    .n_tok = n_tok,
                    .n_rows = n_tok,
                    .plan = &e->layers[0].plan_qkv};
    for (int i = 0, t = 0; i < n_inputs; i++) {
        sc->in_start[i] = t;
        for (int j = 0; j < n_tokens[i]; j++)
            sc->row_input[t++] = i;
    }
    sc->in_start[n_inputs] = n_tok;
    memcpy(sc->q_start, sc->in_start, sizeof(int32_t) * (size_t)(n_inputs + 1));
    threadpool_run(tp, job_embed, &f);
    for (int il = 0; il < e->info.n_layer; il++)
        run_layer(tp, &f, il);
    if (e->info.pooling == ENGINE_POOLING_RANK)
        run_head(tp, &f, out);
    else if (e->info.pooling == ENGINE_POOLING_NONE)
        memcpy(out, sc->x, sizeof(float) * (size_t)n_tok * (size_t)e->info.n_embd);
    else
        pool_rows(&f, out);
    return ERR_OK;
}
