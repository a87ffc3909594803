/* The BERT forward pass over a batch of inputs: embeddings + LayerNorm, then per layer Q/K/V
 * (+bias), bidirectional attention within each input, output projection, residual +
 * LayerNorm, GELU FFN, residual + LayerNorm; finally pooling and L2 normalization. Weight
 * products run once over all stacked tokens; each step is one threadpool run split by rows. */
#include "engine/bert_internal.h"
#include "engine/matmul.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"

#include <math.h>
#include <string.h>

#define ATTN_BLOCK 128 // keys scored per softmax rescale
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
    int n_tok;  // stacked tokens
    int n_rows; // rows still computed (n_tok, or n_inputs once only pooled rows remain)
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

/* Step: x = LayerNorm(token + type 0 + position), quantized for layer 0. Split by rows. */
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
        add_row(&e->pos_embd, pos, x, row, d);
        layernorm(x, x, e->embd_norm_w, e->embd_norm_b, d, e->info.norm_eps);
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
    for (int t0 = 0; t0 < f->n_rows; t0 += MATMUL_CHUNK) {
        const int n = f->n_rows - t0 < MATMUL_CHUNK ? f->n_rows - t0 : MATMUL_CHUNK;
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

/* Step: Q/K/V biases; keys and values to half precision (every token's, all are attended
 * to). Split by rows. */
static void job_qkv_post(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct bert_scratch *sc = &f->e->sc;
    const struct bert_layer *L = f->L;
    const int d = f->e->info.n_embd;
    int lo, hi;
    split(f->n_tok, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        const size_t o = (size_t)t * d;
        add_vec(sc->q + o, L->bq, d);
        add_vec(sc->k + o, L->bk, d);
        add_vec(sc->v + o, L->bv, d);
        ops_get()->f32_to_f16(d, sc->k + o, sc->k16 + o);
        ops_get()->f32_to_f16(d, sc->v + o, sc->v16 + o);
    }
}

/* Attention of query row r, head h, over every token of its input, with a running (online)
 * softmax so no score row is needed. */
static void attend_head(const struct fwd *f, int r, int h, float *out)
{
    const struct bert_scratch *sc = &f->e->sc;
    const struct ops_kernels *ops = ops_get();
    const int d = f->e->info.n_embd, hd = f->e->info.head_dim, in = sc->row_input[r];
    const int first = sc->in_start[in], n_keys = sc->in_start[in + 1] - first;
    const uint16_t *kc = sc->k16 + (size_t)first * d + (size_t)h * hd;
    const uint16_t *vc = sc->v16 + (size_t)first * d + (size_t)h * hd;
    const float *q = sc->q + (size_t)r * d + (size_t)h * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float acc[BERT_HEAD_DIM_MAX], score[ATTN_BLOCK], mx = -INFINITY, sum = 0.0f;
    memset(acc, 0, sizeof(float) * (size_t)hd);
    for (int j0 = 0; j0 < n_keys; j0 += ATTN_BLOCK) {
        const int nb = n_keys - j0 < ATTN_BLOCK ? n_keys - j0 : ATTN_BLOCK;
        float bmx = -INFINITY;
        for (int j = 0; j < nb; j++) {
            score[j] = ops->dot_f16_f32(hd, kc + (size_t)(j0 + j) * d, q) * scale;
            bmx = score[j] > bmx ? score[j] : bmx;
        }
        if (bmx > mx) {
            const float c = expf(mx - bmx); // 0 on the first block
            for (int i = 0; i < hd; i++)
                acc[i] *= c;
            sum *= c;
            mx = bmx;
        }
        for (int j = 0; j < nb; j++) {
            const float p = expf(score[j] - mx);
            sum += p;
            ops->axpy_f16(hd, p, vc + (size_t)(j0 + j) * d, acc);
        }
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < hd; i++)
        out[i] = acc[i] * inv;
}

/* Step: attention for every (row, head) pair, split in contiguous ranges of pairs; then the
 * rows are quantized for attn_output. */
static void job_attention(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const int n_head = f->e->info.n_head, hd = f->e->info.head_dim, d = f->e->info.n_embd;
    int lo, hi;
    split(f->n_rows * n_head, ith, nth, &lo, &hi);
    for (int p = lo; p < hi; p++) {
        const int r = p / n_head, h = p % n_head;
        attend_head(f, r, h, f->e->sc.attn + (size_t)r * d + (size_t)h * hd);
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

/* Step: ff = gelu(ff + b_up), quantized for ffn_down. Split by rows. */
static void job_gelu(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_encoder *e = f->e;
    const int64_t n_ff = e->info.n_ff;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++)
        gelu_row(e->gelu, e->sc.ff + (size_t)t * n_ff, f->L->b_up, n_ff);
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
    }
    f->n_rows = f->n_inputs;
}

static void run_layer(struct threadpool *tp, struct fwd *f, int il)
{
    struct engine_encoder *e = f->e;
    struct bert_scratch *sc = &e->sc;
    const struct bert_layer *L = &e->layers[il];
    const bool is_last = il == e->info.n_layer - 1;
    f->L = L;
    run_matmul(tp, f, &L->plan_qkv, sc->q, sc->k, sc->v);
    threadpool_run(tp, job_qkv_post, f);
    if (is_last && e->info.pooling != ENGINE_POOLING_MEAN) keep_pooled_rows(f);
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
    run_matmul(tp, f, &L->plan_up, sc->ff, NULL, NULL);
    f->plan = &L->plan_down;
    threadpool_run(tp, job_gelu, f);
    run_matmul(tp, f, &L->plan_down, sc->proj, NULL, NULL);
    f->src = sc->proj;
    f->bias = L->b_down;
    f->norm_w = L->out_norm_w;
    f->norm_b = L->out_norm_b;
    f->plan = is_last ? NULL : &e->layers[il + 1].plan_qkv;
    threadpool_run(tp, job_residual_norm, f);
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
    threadpool_run(tp, job_embed, &f);
    for (int il = 0; il < e->info.n_layer; il++)
        run_layer(tp, &f, il);
    pool_rows(&f, out);
    return ERR_OK;
}
