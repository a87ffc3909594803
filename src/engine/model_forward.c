/* The forward pass of the llama / qwen2 / qwen3 graph over a batch of tokens from several
 * sequences: per layer RMSNorm, Q/K/V projections (+bias, + per-head norm), RoPE, GQA
 * attention over each sequence's F16 cache, output projection, RMSNorm, SwiGLU FFN. Weight
 * products run once over all stacked tokens; each step is one threadpool run split by rows. */
#include "engine/attn.h"
#include "engine/matmul.h"
#include "engine/model_internal.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"

#include <math.h>
#include <string.h>

/* Light steps run inline up to this many rows; attention up to this many (key, head) pairs
 * (about 50 us of work, a few dispatches' worth on a busy machine). */
#define LIGHT_ROWS_MAX   4
#define ATTN_INLINE_KEYS 2048
/* Steps of this many tokens or more run the reference's tile-softmax attention arithmetic in
 * reference numerics (its switch point); below, and always in invariant numerics, its
 * single-pass arithmetic. */
#define REF_TILED_MIN_TOKENS 64
/* Row ranges per thread in a weight product (see run_matmul_group). */
#define MATMUL_CHUNKS_PER_THREAD 4

/* State of one decode call, shared read-only by the kernel threads of each step. */
struct fwd {
    struct engine_model *m;
    const struct engine_batch_item *items;
    int n_items;
    int n_tok;  // stacked tokens (rows of the activation matrices)
    int n_rows; // rows still computed (n_tok, or n_items after the last attention)
    const struct layer *L;
    int il; // layer index
    // step parameters
    const float *src;    // rows to normalize / quantize
    const float *norm_w; // RMSNorm weight, or NULL for plain quantization
    const float *add;    // rows added to the residual first, or NULL
    const struct qplan *plan;
    float *mm_y[QPLAN_MAX];
    bool is_kept; // after keep_output_rows: the rows only produce outputs
};

static void split(int n, int ith, int nth, int *lo, int *hi)
{
    *lo = (int)((int64_t)n * ith / nth);
    *hi = (int)((int64_t)n * (ith + 1) / nth);
}

/* y = x * (1 / sqrt(mean(x^2) + eps)) * w, summing squares in double as the reference does. */
static void rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* Rounds float rows through half or bfloat16 in place: the reference multiplies F16 / BF16
 * weights with activations converted to that type, so its products see rounded inputs. */
static void round_rows(uint8_t *rows, size_t row_bytes, int n_rows, int64_t n, uint32_t type)
{
    for (int r = 0; r < n_rows; r++) {
        float *x = (float *)(rows + (size_t)r * row_bytes);
        for (int64_t i = 0; i < n; i++) {
            if (type == QUANT_F16) {
                x[i] = ops_f16_to_f32(ops_f32_to_f16(x[i]));
            } else { // bf16, round to nearest even
                uint32_t u;
                memcpy(&u, &x[i], 4);
                if ((u & 0x7fffffffu) <= 0x7f800000u)
                    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
                memcpy(&x[i], &u, 4);
            }
        }
    }
}

/* Quantizes rows [lo, hi) of src (n_in wide) into every slot of the plan. */
static void quantize_rows(const struct fwd *f, const float *src, int64_t n_in, int lo, int hi)
{
    const struct qplan *p = f->plan;
    for (int s = 0; s < p->n_slots; s++) {
        uint8_t *dst = (uint8_t *)f->m->sc.slot[s] + (size_t)lo * p->slot_row_bytes[s];
        (void)matmul_quantize_input(src + (size_t)lo * n_in, hi - lo, n_in, p->slot_type[s], dst,
                                    p->slot_row_bytes[s], 0, 1);
        if (p->slot_round[s] != QUANT_F32)
            round_rows(dst, p->slot_row_bytes[s], hi - lo, n_in, p->slot_round[s]);
    }
}

/* Step: [x += add]; xn = rmsnorm(x) * norm_w; quantize xn for the plan. Split by rows. */
static void job_norm_quant(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct scratch *sc = &f->m->sc;
    const int e = f->m->info.n_embd;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *x = sc->x + (size_t)t * e;
        if (f->add) {
            const float *a = f->add + (size_t)t * e;
            for (int i = 0; i < e; i++)
                x[i] += a[i];
        }
        rmsnorm(sc->xn + (size_t)t * e, x, f->norm_w, e, f->m->norm_eps);
    }
    if (hi > lo) quantize_rows(f, sc->xn, e, lo, hi);
}

/* Step: quantize src (n_in = the plan's first weight's n_in) for the plan. Split by rows. */
static void job_quant(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    if (hi > lo) quantize_rows(f, f->src, f->plan->w[0]->n_in, lo, hi);
}

/* The summation rule of row r of the step (see enum engine_numerics): prompt tokens sum as the
 * reference sums a step of several tokens, sampled tokens and the output rows as it sums one. */
static enum matmul_rule row_rule(const struct fwd *f, int r)
{
    if (f->m->numerics == ENGINE_NUMERICS_REFERENCE) return MATMUL_RULE_REFERENCE;
    if (f->is_kept || f->items[f->m->sc.tok_item[r]].is_sampled) return MATMUL_RULE_SAMPLED;
    return MATMUL_RULE_PROMPT;
}

/* Step: every weight of the plan times its slot, each split by weight rows. Rows go in runs of
 * one rule when the weight's orders differ between the rules (float weights), else at once. */
static void job_matmul(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct qplan *p = f->plan;
    for (int i = 0; i < p->n_w; i++) {
        const struct wmat *w = p->w[i];
        const size_t x_row = p->slot_row_bytes[p->w_slot[i]];
        const bool is_split = f->m->numerics == ENGINE_NUMERICS_INVARIANT &&
                              matmul_order(w->type, w->n_in, w->n_out, 1, MATMUL_RULE_PROMPT) !=
                                  matmul_order(w->type, w->n_in, w->n_out, 1, MATMUL_RULE_SAMPLED);
        for (int r0 = 0, r1; r0 < f->n_rows; r0 = r1) {
            const enum matmul_rule rule = row_rule(f, r0);
            r1 = is_split ? r0 + 1 : f->n_rows;
            while (r1 < f->n_rows && row_rule(f, r1) == rule)
                r1++;
            const struct matmul_args a = {
                .w = w->data,
                .w_type = w->type,
                .n_in = w->n_in,
                .n_out = w->n_out,
                .x = (const uint8_t *)f->m->sc.slot[p->w_slot[i]] + (size_t)r0 * x_row,
                .x_row_bytes = x_row,
                .n_tok = r1 - r0,
                .y = f->mm_y[i] + (size_t)r0 * (size_t)w->n_out,
                .rule = rule,
            };
            matmul_run(&a, ith, nth);
        }
    }
}

static void run_matmul_group(struct threadpool *tp, struct fwd *f, const struct qplan *plan,
                             float *y0, float *y1, float *y2)
{
    f->plan = plan;
    f->mm_y[0] = y0;
    f->mm_y[1] = y1;
    f->mm_y[2] = y2;
    // Several row ranges per thread: whichever thread is running takes the next one, so a
    // thread the OS deschedules (a loaded machine) holds back at most one range.
    const int n_threads = threadpool_size(tp);
    threadpool_run_chunks(tp, job_matmul, f,
                          n_threads > 1 ? MATMUL_CHUNKS_PER_THREAD * n_threads : 1);
}

/* Rotates one head in place with the token's cos/sin table, rounding as the reference's x86
 * build does (its compiler contracts the expressions into fused multiply-adds): each output
 * is one FMA over one rounded product, x0' = fma(cos, x0, -(sin * x1)) and
 * x1' = fma(sin, x0, cos * x1); only an odd last pair of the adjacent (non-NeOX) layout uses
 * two rounded products. Measured against it for 2 to 32 pairs per head. Any difference here
 * reaches the last bits of every later activation. */
static void rope_head(float *x, const float *cs, const float *sn, int n_rot, bool neox)
{
    const int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b], c = cs[i], s = sn[i];
        if (neox) {
            x[a] = fmaf(c, x0, -(s * x1));
            x[b] = fmaf(s, x0, c * x1);
        } else if ((half & 1) && i == half - 1) {
            x[a] = c * x0 - s * x1;
            x[b] = c * x1 + s * x0;
        } else {
            x[a] = fmaf(c, x0, -(s * x1));
            x[b] = fmaf(s, x0, c * x1);
        }
    }
}

/* Step: biases, per-head norms, RoPE on q and k; k and v stored into the sequence caches.
 * Split by rows. */
static void job_qkv_post(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const struct scratch *sc = &m->sc;
    const struct layer *L = f->L;
    const int hd = m->info.head_dim, qd = m->q_dim, kvd = m->kv_dim, half = m->n_rot / 2 + 1;
    int lo, hi;
    split(f->n_tok, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *q = sc->q + (size_t)t * qd, *k = sc->k + (size_t)t * kvd;
        float *v = sc->v + (size_t)t * kvd;
        for (int i = 0; L->bq && i < qd; i++)
            q[i] += L->bq[i];
        for (int i = 0; L->bk && i < kvd; i++)
            k[i] += L->bk[i];
        for (int i = 0; L->bv && i < kvd; i++)
            v[i] += L->bv[i];
        const float *cs = sc->rope_cos + (size_t)t * half, *sn = sc->rope_sin + (size_t)t * half;
        for (int h = 0; h < m->info.n_head; h++) {
            if (L->q_norm) rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, m->norm_eps);
            rope_head(q + h * hd, cs, sn, m->n_rot, m->rope_neox);
        }
        for (int h = 0; h < m->info.n_head_kv; h++) {
            if (L->k_norm) rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, m->norm_eps);
            rope_head(k + h * hd, cs, sn, m->n_rot, m->rope_neox);
        }
        const struct engine_seq *s = f->items[sc->tok_item[t]].seq;
        const size_t off = ((size_t)f->il * (size_t)s->n_ctx + (size_t)sc->tok_pos[t]) * kvd;
        ops_get()->f32_to_f16(kvd, k, s->k_cache + off);
        ops_get()->f32_to_f16(kvd, v, s->v_cache + off);
    }
}

/* Blocks of the tiled attention: each is one item's run of up to tok_per_block consecutive
 * tokens times up to head_per_block query heads of one KV head's group, so the block's
 * queries share every converted key/value tile. */
struct attn_plan {
    int head_per_block, n_hsub; // query heads per block, blocks per KV head's group
    int tok_per_block;
};

static struct attn_plan attn_plan_of(const struct engine_model *m)
{
    const int rep = m->info.n_head / m->info.n_head_kv;
    struct attn_plan p;
    p.head_per_block = rep < ATTN_QUERIES_MAX ? rep : ATTN_QUERIES_MAX;
    p.n_hsub = (rep + p.head_per_block - 1) / p.head_per_block;
    p.tok_per_block = ATTN_QUERIES_MAX / p.head_per_block;
    return p;
}

static int item_blocks(const struct fwd *f, const struct attn_plan *p, int i)
{
    const int n_tb = (f->items[i].n_tokens + p->tok_per_block - 1) / p->tok_per_block;
    return f->m->info.n_head_kv * p->n_hsub * n_tb;
}

static int attn_blocks(const struct fwd *f)
{
    const struct attn_plan p = attn_plan_of(f->m);
    int n = 0;
    for (int i = 0; i < f->n_items; i++)
        n += item_blocks(f, &p, i);
    return n;
}

/* Runs block u (numbered item by item, then KV head, head group, token run). */
static void attn_block_run(const struct fwd *f, const struct attn_plan *p, int u)
{
    const struct engine_model *m = f->m;
    const int hd = m->info.head_dim, rep = m->info.n_head / m->info.n_head_kv;
    int i = 0, t0 = 0;
    while (u >= item_blocks(f, p, i)) {
        u -= item_blocks(f, p, i);
        t0 += f->items[i].n_tokens;
        i++;
    }
    const int n_tb = (f->items[i].n_tokens + p->tok_per_block - 1) / p->tok_per_block;
    const int tb = u % n_tb, hs = u / n_tb % p->n_hsub, g = u / n_tb / p->n_hsub;
    const struct engine_seq *s = f->items[i].seq;
    const size_t base = (size_t)f->il * (size_t)s->n_ctx * m->kv_dim + (size_t)g * hd;
    struct attn_block b = {.arith = m->numerics == ENGINE_NUMERICS_REFERENCE &&
                                            f->n_tok >= REF_TILED_MIN_TOKENS
                                        ? ATTN_ARITH_TILE_SOFTMAX
                                        : ATTN_ARITH_SINGLE_PASS,
                           .head_dim = hd,
                           .scale = 1.0f / sqrtf((float)hd),
                           .k = s->k_cache + base,
                           .v = s->v_cache + base,
                           .kv_stride = (size_t)m->kv_dim};
    const int ta = t0 + tb * p->tok_per_block;
    const int tz = ta + p->tok_per_block < t0 + f->items[i].n_tokens ? ta + p->tok_per_block
                                                                     : t0 + f->items[i].n_tokens;
    const int h0 = g * rep + hs * p->head_per_block;
    const int h1 = h0 + p->head_per_block < (g + 1) * rep ? h0 + p->head_per_block : (g + 1) * rep;
    for (int t = ta; t < tz; t++)
        for (int h = h0; h < h1; h++, b.n_q++) {
            b.q[b.n_q] = m->sc.q + (size_t)t * m->q_dim + (size_t)h * hd;
            b.out[b.n_q] = m->sc.attn + (size_t)t * m->q_dim + (size_t)h * hd;
            b.n_keys[b.n_q] = m->sc.tok_pos[t] + 1;
        }
    attn_run(&b);
}

/* Step: the tiled attention, blocks split in contiguous ranges (one block per chunk when the
 * pool runs it). */
static void job_attention_tiled(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct attn_plan p = attn_plan_of(f->m);
    int lo, hi;
    split(attn_blocks(f), ith, nth, &lo, &hi);
    for (int u = lo; u < hi; u++)
        attn_block_run(f, &p, u);
}

/* Step: gate = silu(gate) * up, then quantize gate for w_down. Split by rows. */
static void job_swiglu_quant(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct scratch *sc = &f->m->sc;
    const int64_t n_ff = f->m->info.n_ff;
    int lo, hi;
    split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++)
        ops_get()->swiglu(n_ff, sc->gate + (size_t)t * n_ff, sc->up + (size_t)t * n_ff);
    if (hi > lo) quantize_rows(f, sc->gate, n_ff, lo, hi);
}

/* Step: token embeddings into x. Split by rows. */
static void job_embed(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const struct quant_traits *tr = quant_traits_of(m->tok_embd.type);
    size_t row_bytes = 0;
    (void)quant_row_bytes(m->tok_embd.type, m->info.n_embd, &row_bytes);
    int lo, hi;
    split(f->n_tok, ith, nth, &lo, &hi);
    int t = 0;
    for (int i = 0; i < f->n_items; i++) {
        for (int j = 0; j < f->items[i].n_tokens; j++, t++) {
            if (t < lo || t >= hi) continue;
            const uint8_t *row =
                (const uint8_t *)m->tok_embd.data + (size_t)f->items[i].tokens[j] * row_bytes;
            tr->to_float(row, m->sc.x + (size_t)t * m->info.n_embd, m->info.n_embd);
        }
    }
}

/* Per-token RoPE tables (cos, sin of each rotated pair), computed as the reference does: the
 * angle is advanced by a float multiply per pair and divided by the optional frequency
 * factors. */
static void rope_tables(const struct fwd *f)
{
    const struct engine_model *m = f->m;
    const int half = m->n_rot / 2, stride = half + 1;
    const float theta_scale = powf(m->rope_base, -2.0f / (float)m->n_rot);
    for (int t = 0; t < f->n_tok; t++) {
        float theta = (float)m->sc.tok_pos[t];
        float *cs = m->sc.rope_cos + (size_t)t * stride, *sn = m->sc.rope_sin + (size_t)t * stride;
        for (int i = 0; i < half; i++) {
            const float ff = m->rope_freqs ? m->rope_freqs[i] : 1.0f;
            const float a = m->rope_freq_scale * (theta / ff);
            cs[i] = cosf(a);
            sn[i] = sinf(a);
            theta *= theta_scale;
        }
    }
}

/* Rows of an item that its output needs after the last layer: [*first, *first + return). */
static int kept_rows(const struct engine_batch_item *it, int *first)
{
    *first = it->output == ENGINE_OUTPUT_FIRST ? 0 : it->n_tokens - 1;
    if (it->output != ENGINE_OUTPUT_SUM) return 1;
    *first = 0;
    return it->n_tokens;
}

/* After the last layer's attention output projection only the rows the outputs need matter
 * (each item's last token when it wants logits): move those rows of x and proj to the front,
 * in item order, so the remaining steps compute fewer rows. Rows only move forward, so nothing
 * is overwritten before it is moved. The projection itself still runs over every token, as in
 * the reference, whose batched product sums in another order than its single-row one (see
 * QUANT_ORDER_* in quants.h); the kept rows then take the single-token rule, as the reference
 * computes them for one sequence (one row). */
static void keep_output_rows(struct fwd *f)
{
    struct scratch *sc = &f->m->sc;
    const size_t e = (size_t)f->m->info.n_embd;
    int row = 0, t0 = 0;
    for (int i = 0; i < f->n_items; i++) {
        int first;
        const int n = kept_rows(&f->items[i], &first);
        for (int k = 0; k < n; k++, row++) {
            const int t = t0 + first + k;
            if (t == row) continue;
            memmove(sc->x + (size_t)row * e, sc->x + (size_t)t * e, e * sizeof(float));
            memmove(sc->proj + (size_t)row * e, sc->proj + (size_t)t * e, e * sizeof(float));
        }
        t0 += f->items[i].n_tokens;
    }
    f->n_rows = row;
    f->is_kept = true;
}

/* Runs a light step (elementwise work over n_rows rows) on the calling thread alone when there
 * are too few rows to be worth a dispatch: a generation step then pays for 4 pool
 * synchronizations per layer instead of 10, which matters most when the machine is busy and a
 * worker may be waiting for a time slice. Every row is computed the same way on any thread, so
 * results do not depend on this choice. */
static void run_light(struct threadpool *tp, threadpool_fn fn, struct fwd *f, bool is_small)
{
    if (is_small)
        fn(f, 0, 1);
    else
        threadpool_run(tp, fn, f);
}

/* Whether the batch's attention ((key, head) pairs over all tokens) is small. */
static bool attention_is_small(const struct fwd *f)
{
    int64_t keys = 0;
    for (int t = 0; t < f->n_tok; t++)
        keys += f->m->sc.tok_pos[t] + 1;
    return keys * f->m->info.n_head <= ATTN_INLINE_KEYS;
}

/* Attention for the step: every query through the tiled kernel (attn.h), in the single-pass
 * arithmetic, or (reference numerics, steps of 64 tokens or more) the tile-softmax one, as the
 * reference switches. */
static void run_attention(struct threadpool *tp, struct fwd *f)
{
    if (attention_is_small(f)) {
        job_attention_tiled(f, 0, 1);
        return;
    }
    const int n_blocks = attn_blocks(f);
    threadpool_run_chunks(tp, job_attention_tiled, f, n_blocks < (1 << 20) ? n_blocks : 1 << 20);
}

static void run_layer(struct threadpool *tp, struct fwd *f, int il)
{
    struct engine_model *m = f->m;
    struct scratch *sc = &m->sc;
    const struct layer *L = &m->layers[il];
    f->L = L;
    f->il = il;
    f->n_rows = f->n_tok;
    // Residual of the previous layer's FFN is folded into this norm step.
    f->add = il > 0 ? sc->proj : NULL;
    f->norm_w = L->attn_norm;
    f->plan = &L->plan_qkv;
    run_light(tp, job_norm_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
    run_matmul_group(tp, f, &L->plan_qkv, sc->q, sc->k, sc->v);
    run_light(tp, job_qkv_post, f, f->n_tok <= LIGHT_ROWS_MAX);
    run_attention(tp, f);
    f->src = sc->attn;
    f->plan = &L->plan_o;
    run_light(tp, job_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
    run_matmul_group(tp, f, &L->plan_o, sc->proj, NULL, NULL);
    if (il == m->info.n_layer - 1) keep_output_rows(f);
    f->add = sc->proj;
    f->norm_w = L->ffn_norm;
    f->plan = &L->plan_gu;
    run_light(tp, job_norm_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
    run_matmul_group(tp, f, &L->plan_gu, sc->gate, sc->up, NULL);
    f->plan = &L->plan_down;
    run_light(tp, job_swiglu_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
    run_matmul_group(tp, f, &L->plan_down, sc->proj, NULL, NULL);
}

static int check_batch(const struct engine_model *m, const struct engine_batch_item *items,
                       int n_items, int *n_tok, struct errmsg *err)
{
    if (!items || n_items < 1) return errmsg_set(err, ERR_INVALID, "empty batch");
    int64_t total = 0;
    for (int i = 0; i < n_items; i++) {
        const struct engine_batch_item *it = &items[i];
        if (!it->seq || it->seq->m != m)
            return errmsg_set(err, ERR_INVALID, "item %d: sequence of another model", i);
        if (it->n_tokens < 1 || !it->tokens)
            return errmsg_set(err, ERR_INVALID, "item %d: no tokens", i);
        if (it->output < ENGINE_OUTPUT_LOGITS || it->output > ENGINE_OUTPUT_SUM)
            return errmsg_set(err, ERR_INVALID, "item %d: unknown output %d", i, (int)it->output);
        if (it->output != ENGINE_OUTPUT_LOGITS && !it->hidden)
            return errmsg_set(err, ERR_INVALID, "item %d: no buffer for the hidden state", i);
        if (it->output == ENGINE_OUTPUT_LOGITS && it->seq->is_view)
            return errmsg_set(err, ERR_INVALID, "item %d: a view sequence has no logits", i);
        for (int j = 0; j < i; j++)
            if (items[j].seq == it->seq)
                return errmsg_set(err, ERR_INVALID, "item %d: sequence listed twice", i);
        if (it->n_tokens > it->seq->n_ctx - it->seq->pos)
            return errmsg_set(err, ERR_LIMIT, "item %d: %d tokens do not fit (%d of %d used)", i,
                              it->n_tokens, it->seq->pos, it->seq->n_ctx);
        for (int j = 0; j < it->n_tokens; j++)
            if (it->tokens[j] < 0 || it->tokens[j] >= m->info.n_vocab)
                return errmsg_set(err, ERR_INVALID, "item %d: token id %d outside 0..%d", i,
                                  (int)it->tokens[j], m->info.n_vocab - 1);
        total += it->n_tokens;
        if (total > ENGINE_BATCH_MAX)
            return errmsg_set(err, ERR_LIMIT, "batch has more than %d tokens", ENGINE_BATCH_MAX);
    }
    *n_tok = (int)total;
    return ERR_OK;
}

/* Hands each item its output from the kept rows (xn: hidden states, logits: their products)
 * and advances its sequence. */
static void store_outputs(struct engine_model *m, const struct engine_batch_item *items,
                          int n_items)
{
    const struct scratch *sc = &m->sc;
    const size_t e = (size_t)m->info.n_embd, nv = (size_t)m->info.n_vocab;
    for (int i = 0, row = 0; i < n_items; i++) {
        const struct engine_batch_item *it = &items[i];
        struct engine_seq *s = it->seq;
        int first;
        const int n = kept_rows(it, &first);
        if (it->output == ENGINE_OUTPUT_LOGITS) {
            memcpy(s->logits, sc->logits + (size_t)row * nv, nv * sizeof(float));
        } else if (it->output == ENGINE_OUTPUT_SUM) {
            for (int k = 0; k < n; k++) {
                const float *h = sc->xn + (size_t)(row + k) * e;
                for (size_t j = 0; j < e; j++)
                    it->hidden[j] += h[j];
            }
        } else {
            memcpy(it->hidden, sc->xn + (size_t)row * e, e * sizeof(float));
        }
        s->has_logits = it->output == ENGINE_OUTPUT_LOGITS;
        s->pos += it->n_tokens;
        row += n;
    }
}

int engine_decode(struct engine_model *m, struct threadpool *tp, struct engine_batch_item *items,
                  int n_items, struct errmsg *err)
{
    int n_tok = 0;
    int rc = check_batch(m, items, n_items, &n_tok, err);
    if (rc != ERR_OK) return rc;
    struct scratch *sc = &m->sc;
    struct fwd f = {.m = m, .items = items, .n_items = n_items, .n_tok = n_tok};
    for (int i = 0, t = 0; i < n_items; i++)
        for (int j = 0; j < items[i].n_tokens; j++, t++) {
            sc->tok_item[t] = i;
            sc->tok_pos[t] = items[i].seq->pos + j;
        }
    rope_tables(&f);
    run_light(tp, job_embed, &f, f.n_tok <= LIGHT_ROWS_MAX);
    for (int il = 0; il < m->info.n_layer; il++)
        run_layer(tp, &f, il);
    // The final norm; its rows are quantized for the logits product only when it runs.
    static const struct qplan no_plan;
    bool any_logits = false;
    for (int i = 0; i < n_items; i++)
        any_logits |= items[i].output == ENGINE_OUTPUT_LOGITS;
    f.add = sc->proj;
    f.norm_w = m->output_norm;
    f.plan = any_logits ? &m->plan_out : &no_plan;
    run_light(tp, job_norm_quant, &f, f.n_rows <= LIGHT_ROWS_MAX);
    if (any_logits) run_matmul_group(tp, &f, &m->plan_out, sc->logits, NULL, NULL);
    store_outputs(m, items, n_items);
    return ERR_OK;
}
