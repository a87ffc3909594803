/* The forward pass of the llama / qwen2 / qwen3 graph over a batch of tokens from several
 * sequences: per layer RMSNorm, Q/K/V projections (+bias, + per-head norm), RoPE, GQA
 * attention over each sequence's F16 cache, output projection, RMSNorm, SwiGLU FFN. Weight
 * products run once over all stacked tokens; each step is one threadpool run split by rows. */
#include "engine/attn.h"
#include "engine/matmul.h"
#include "engine/model/model_arch.h"
#include "engine/model/model_fwd.h"
#include "engine/model/model_gdn.h"
#include "engine/model/model_internal.h"
#include "engine/model/model_moe.h"
#include "engine/model/model_recr.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"

#include <math.h>
#include <string.h>

/* Attention runs inline up to this many (key, head) pairs (about 50 us of work, a few
 * dispatches' worth on a busy machine). */
#define ATTN_INLINE_KEYS 2048
/* Steps of this many tokens or more run the reference's tile-softmax attention arithmetic in
 * reference numerics (its switch point); below, and always in invariant numerics, its
 * single-pass arithmetic. */
#define REF_TILED_MIN_TOKENS 64
/* Row ranges per thread in a weight product (see fwd_run_matmul_group). */
#define MATMUL_CHUNKS_PER_THREAD 4

void fwd_split(int n, int ith, int nth, int *lo, int *hi)
{
    *lo = (int)((int64_t)n * ith / nth);
    *hi = (int)((int64_t)n * (ith + 1) / nth);
}

/* y = x * (1 / sqrt(mean(x^2) + eps)) * w, summing squares in double as the reference does
 * (ops.h; the selected kernel set). */
static void rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    ops_get()->rmsnorm(n, y, x, w, eps);
}

/* Rounds float rows through half or bfloat16 in place: the reference multiplies F16 / BF16
 * weights with activations converted to that type, so its products see rounded inputs. */
static void round_rows(uint8_t *rows, size_t row_bytes, int n_rows, int64_t n, uint32_t type)
{
    for (int r = 0; r < n_rows; r++) {
        float *x = (float *)(rows + (size_t)r * row_bytes);
        if (type == QUANT_F16) {
            ops_get()->round_f16(n, x);
            continue;
        }
        for (int64_t i = 0; i < n; i++) { // bf16, round to nearest even; NaN kept
            uint32_t u;
            memcpy(&u, &x[i], 4);
            const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
            u = (u & 0x7fffffffu) <= 0x7f800000u ? rounded : u;
            memcpy(&x[i], &u, 4);
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
    fwd_split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *x = sc->x + (size_t)t * e;
        if (f->add) {
            const float *a = f->add + (size_t)t * e;
            for (int i = 0; i < e; i++)
                x[i] += a[i];
        }
        if (f->norm_w)
            rmsnorm(sc->xn + (size_t)t * e, x, f->norm_w, e, f->m->norm_eps);
        else // olmo2: the blocks read the residual stream itself
            memcpy(sc->xn + (size_t)t * e, x, (size_t)e * sizeof(float));
    }
    if (hi > lo) quantize_rows(f, sc->xn, e, lo, hi);
}

/* Step: quantize src (n_in = the plan's first weight's n_in) for the plan. Split by rows. */
void fwd_job_quant(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    int lo, hi;
    fwd_split(f->n_rows, ith, nth, &lo, &hi);
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

void fwd_run_matmul_group(struct threadpool *tp, struct fwd *f, const struct qplan *plan, float *y0,
                          float *y1, float *y2)
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
 * build does (ops.h: one FMA over one rounded product per output). Any difference here
 * reaches the last bits of every later activation. */
static void rope_head(float *x, const float *cs, const float *sn, int n_rot, bool neox)
{
    ops_get()->rope(x, cs, sn, n_rot, neox);
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
    fwd_split(f->n_tok, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        if (m->feat.attn_gated) model_gdn_split_query(m, t);
        float *q = sc->q + (size_t)t * qd, *k = sc->k + (size_t)t * kvd;
        float *v = sc->v + (size_t)t * kvd;
        for (int i = 0; L->bq && i < qd; i++)
            q[i] += L->bq[i];
        for (int i = 0; L->bk && i < kvd; i++)
            k[i] += L->bk[i];
        for (int i = 0; L->bv && i < kvd; i++)
            v[i] += L->bv[i];
        const size_t set = (size_t)L->rope_set * ENGINE_BATCH_MAX * (size_t)half;
        const float *cs = sc->rope_cos + set + (size_t)t * half;
        const float *sn = sc->rope_sin + set + (size_t)t * half;
        const bool full = m->feat.qk_norm_full;
        if (full && L->q_norm) rmsnorm(q, q, L->q_norm, qd, m->norm_eps);
        if (full && L->k_norm) rmsnorm(k, k, L->k_norm, kvd, m->norm_eps);
        for (int h = 0; h < m->info.n_head; h++) {
            if (L->q_norm && !full) rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, m->norm_eps);
            if (L->has_rope) rope_head(q + h * hd, cs, sn, m->n_rot, m->rope_neox);
        }
        for (int h = 0; h < m->info.n_head_kv; h++) {
            if (L->k_norm && !full) rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, m->norm_eps);
            if (L->has_rope) rope_head(k + h * hd, cs, sn, m->n_rot, m->rope_neox);
        }
        if (m->feat.q_scale != 0.0f)
            for (int i = 0; i < qd; i++)
                q[i] *= m->feat.q_scale;
        const struct engine_seq *s = f->items[sc->tok_item[t]].seq;
        const size_t off = kv_layer_base(m, s, f->il) + kv_row(L, s, sc->tok_pos[t]) * (size_t)kvd;
        ops_get()->f32_to_f16(kvd, k, s->k_cache + off);
        ops_get()->f32_to_f16(kvd, v, s->v_cache + off);
    }
}

/* Keys query token t sees: those up to itself, or, in a non-causal item (an image's
 * embeddings, which attend to each other both ways), those up to the item's last token. */
static int key_count(const struct fwd *f, int t)
{
    const struct engine_batch_item *it = &f->items[f->m->sc.tok_item[t]];
    return it->is_noncausal ? it->seq->pos + it->n_tokens : f->m->sc.tok_pos[t] + 1;
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
    const struct layer *L = f->L;
    const size_t base = kv_layer_base(m, s, f->il) + (size_t)g * hd;
    struct attn_block b = {
        .arith = m->numerics == ENGINE_NUMERICS_REFERENCE && f->n_tok >= REF_TILED_MIN_TOKENS
                     ? ATTN_ARITH_TILE_SOFTMAX
                     : ATTN_ARITH_SINGLE_PASS,
        .head_dim = hd,
        .scale = m->feat.kq_scale != 0.0f ? m->feat.kq_scale : 1.0f / sqrtf((float)hd),
        .k = s->k_cache + base,
        .v = s->v_cache + base,
        .kv_stride = (size_t)m->kv_dim,
        .ring = L->is_swa ? s->swa_cap : 0,
        .softcap = m->feat.attn_softcap,
        .has_sinks = L->sinks != NULL};
    const int ta = t0 + tb * p->tok_per_block;
    const int tz = ta + p->tok_per_block < t0 + f->items[i].n_tokens ? ta + p->tok_per_block
                                                                     : t0 + f->items[i].n_tokens;
    const int h0 = g * rep + hs * p->head_per_block;
    const int h1 = h0 + p->head_per_block < (g + 1) * rep ? h0 + p->head_per_block : (g + 1) * rep;
    for (int t = ta; t < tz; t++)
        for (int h = h0; h < h1; h++, b.n_q++) {
            b.q[b.n_q] = m->sc.q + (size_t)t * m->q_dim + (size_t)h * hd;
            b.out[b.n_q] = m->sc.attn + (size_t)t * m->q_dim + (size_t)h * hd;
            b.n_keys[b.n_q] = key_count(f, t);
            // A sliding-window layer's query sees its last n_swa positions, itself included.
            const int own = m->sc.tok_pos[t] + 1;
            b.key_lo[b.n_q] = L->is_swa && own > m->feat.n_swa ? own - m->feat.n_swa : 0;
            b.sink[b.n_q] = L->sinks ? L->sinks[h] : 0.0f;
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
    fwd_split(attn_blocks(f), ith, nth, &lo, &hi);
    for (int u = lo; u < hi; u++)
        attn_block_run(f, &p, u);
}

/* gpt-oss's activation: gate clamped above at 7, up clamped to +-7, then
 * gate * sigmoid(1.702 gate) * (up + 1). */
static void swiglu_oai(int64_t n, float *gate, const float *up)
{
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t i = 0; i < n; i++) {
        const float x = gate[i] < limit ? gate[i] : limit;
        const float y = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
        gate[i] = x / (1.0f + expf(alpha * (-x))) * (y + 1.0f);
    }
}

/* nemotron_h's activation of up (in g, plus its bias if any): relu(x)^2. */
static void relu2(int64_t n, float *g, const float *bias)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = bias ? g[i] + bias[i] : g[i];
        const float r = x > 0.0f ? x : 0.0f;
        g[i] = r * r;
    }
}

/* Step: gate = silu(gate) * up (or the GELU form), then quantize gate for the plan's down
 * matrix, whose input width is the FFN's. Split by rows. */
void fwd_job_swiglu_quant(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct scratch *sc = &f->m->sc;
    const int64_t n_ff = f->plan->w[0]->n_in;
    int lo, hi;
    fwd_split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *g = sc->gate + (size_t)t * n_ff, *u = sc->up + (size_t)t * n_ff;
        for (int64_t i = 0; f->gate_bias && i < n_ff; i++) {
            g[i] += f->gate_bias[i];
            u[i] += f->up_bias[i];
        }
        if (f->m->feat.relu2_ffn)
            relu2(n_ff, g, f->up_bias);
        else if (f->m->feat.swiglu_oai)
            swiglu_oai(n_ff, g, u);
        else if (f->m->feat.geglu)
            ops_get()->geglu(n_ff, g, u);
        else
            ops_get()->swiglu(n_ff, g, u);
    }
    if (hi > lo) quantize_rows(f, sc->gate, n_ff, lo, hi);
}

/* Step: what a family does to a block's output before the residual add, in the reference's
 * order: the attention output bias, the post-norm (norm_w), the residual scale. Split by
 * rows. */
static void job_post_block(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    const int e = m->info.n_embd;
    const float rs = m->feat.residual_scale;
    int lo, hi;
    fwd_split(f->n_rows, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        float *y = f->post_y + (size_t)t * e;
        for (int i = 0; f->post_bias && i < e; i++)
            y[i] += f->post_bias[i];
        if (f->norm_w) rmsnorm(y, y, f->norm_w, e, m->norm_eps);
        for (int i = 0; rs != 0.0f && i < e; i++)
            y[i] *= rs;
    }
}

/* Step: token embeddings into x. Split by rows. */
static void job_embed(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct engine_model *m = f->m;
    int lo, hi;
    fwd_split(f->n_tok, ith, nth, &lo, &hi);
    int t = 0;
    for (int i = 0; i < f->n_items; i++) {
        for (int j = 0; j < f->items[i].n_tokens; j++, t++) {
            if (t < lo || t >= hi) continue;
            float *x = m->sc.x + (size_t)t * m->info.n_embd;
            if (f->items[i].embd) { // given embeddings are taken as they are, unscaled
                memcpy(x, f->items[i].embd + (size_t)j * m->info.n_embd,
                       sizeof(float) * (size_t)m->info.n_embd);
                continue;
            }
            // the row's type was checked at load; a repacked (tied) matrix reads the same
            (void)quant_get_row(m->tok_embd.type, m->tok_embd.data, f->items[i].tokens[j],
                                m->info.n_embd, x);
            for (int k = 0; m->feat.embd_scale != 0.0f && k < m->info.n_embd; k++)
                x[k] *= m->feat.embd_scale;
        }
    }
}

/* Per-token RoPE tables (cos, sin of each rotated pair), computed as the reference does: the
 * angle is advanced by a float multiply per pair and divided by the optional frequency
 * factors (rope_freqs, or LongRoPE's long factors when the sequence's context exceeds the
 * original one and its short factors otherwise), and cos/sin are scaled by LongRoPE's
 * attention factor. Set 0 serves global layers, set 1 sliding-window layers (their own base
 * and scale). */
static void rope_tables(const struct fwd *f)
{
    const struct engine_model *m = f->m;
    const struct model_feat *ft = &m->feat;
    const int half = m->n_rot / 2, stride = half + 1;
    const bool has_swa = ft->n_swa > 0;
    float mscale = ft->rope_attn_factor != 0.0f ? ft->rope_attn_factor : 1.0f;
    if (ft->is_yarn) mscale = ft->yarn_attn_factor;
    for (int set = 0; set < (has_swa ? 2 : 1); set++) {
        const float base = set ? m->rope_base_swa : m->rope_base;
        const float fscale = set ? m->rope_scale_swa : m->rope_freq_scale;
        const float theta_scale = powf(base, -2.0f / (float)m->n_rot);
        const size_t off = (size_t)set * ENGINE_BATCH_MAX * (size_t)stride;
        float corr[2] = {0.0f, 0.0f}, ms = mscale;
        if (ft->is_yarn) { // the pairs between corr[0] and corr[1] ramp from one rule to the other
            const float n = (float)m->n_rot, orig = (float)ft->n_ctx_orig,
                        pi2 = 2.0f * 3.14159265358979323846f;
            const float lo = floorf(n * logf(orig / (ft->yarn_beta_fast * pi2)) / (2 * logf(base)));
            const float hi = ceilf(n * logf(orig / (ft->yarn_beta_slow * pi2)) / (2 * logf(base)));
            corr[0] = lo > 0.0f ? lo : 0.0f;
            corr[1] = hi < n - 1 ? hi : n - 1;
            ms *= 1.0f + 0.1f * logf(1.0f / fscale);
        }
        const int *sec = ft->mrope;
        const int n_sec = sec[0] + sec[1] + sec[2] + sec[3];
        for (int t = 0; t < f->n_tok; t++) {
            float theta = (float)m->sc.tok_pos[t];
            // M-RoPE: each position's angle advanced on its own, pair i taking its section's
            float th_t = 0.0f, th_h = 0.0f, th_w = 0.0f, th_e = 0.0f;
            if (ft->is_mrope) {
                const int32_t *rp = m->sc.tok_rpos + (size_t)t * 3;
                th_t = (float)rp[0];
                th_h = (float)rp[1];
                th_w = (float)rp[2];
            }
            float *cs = m->sc.rope_cos + off + (size_t)t * stride;
            float *sn = m->sc.rope_sin + off + (size_t)t * stride;
            const float *factors = m->rope_freqs;
            if (!factors && m->rope_long && m->rope_short) {
                const struct engine_seq *s = f->items[m->sc.tok_item[t]].seq;
                factors = s->n_ctx > ft->n_ctx_orig ? m->rope_long : m->rope_short;
            }
            for (int i = 0; i < half; i++) {
                if (ft->is_mrope) {
                    const int k = i % n_sec;
                    theta = k < sec[0]                     ? th_t
                            : k < sec[0] + sec[1]          ? th_h
                            : k < sec[0] + sec[1] + sec[2] ? th_w
                                                           : th_e;
                    th_t *= theta_scale;
                    th_h *= theta_scale;
                    th_w *= theta_scale;
                    th_e *= theta_scale;
                }
                const float ff = factors ? factors[i] : 1.0f;
                const float extrap = theta / ff;
                float a = fscale * extrap;
                if (ft->is_yarn) {
                    const float y = (float)(i - corr[0]) / fmaxf(0.001f, corr[1] - corr[0]);
                    const float mix = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
                    a = a * (1.0f - mix) + extrap * mix;
                }
                cs[i] = cosf(a) * ms;
                sn[i] = sinf(a) * ms;
                theta *= theta_scale;
            }
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
void fwd_run_light(struct threadpool *tp, threadpool_fn fn, struct fwd *f, bool is_small)
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

/* A block's output in proj before the residual add: bias, post-norm, residual scale, for the
 * families that have them. */
static void post_block(struct threadpool *tp, struct fwd *f, const float *bias, const float *norm_w)
{
    if (!bias && !norm_w && f->m->feat.residual_scale == 0.0f) return;
    f->post_y = f->m->sc.proj;
    f->post_bias = bias;
    f->norm_w = norm_w;
    fwd_run_light(tp, job_post_block, f, f->n_rows <= LIGHT_ROWS_MAX);
}

/* Attention for the step: every query through the tiled kernel (attn.h), in the single-pass
 * arithmetic, or (reference numerics, steps of 64 tokens or more) the tile-softmax one, as the
 * reference switches. Sliding windows (ring rows, a first key per query), the score soft-cap
 * and attention sinks are the kernel's own features, so every layer takes this path. */
static void run_attention(struct threadpool *tp, struct fwd *f)
{
    if (attention_is_small(f)) {
        job_attention_tiled(f, 0, 1);
        return;
    }
    const int n_blocks = attn_blocks(f);
    threadpool_run_chunks(tp, job_attention_tiled, f, n_blocks < (1 << 20) ? n_blocks : 1 << 20);
}

/* Attention from the quantized normed rows to its output projection in proj. */
static void run_attention_block(struct threadpool *tp, struct fwd *f, const struct layer *L)
{
    struct engine_model *m = f->m;
    struct scratch *sc = &m->sc;
    const bool is_gated = m->feat.attn_gated;
    fwd_run_matmul_group(tp, f, &L->plan_qkv, is_gated ? sc->qg : sc->q, sc->k, sc->v);
    fwd_run_light(tp, job_qkv_post, f, f->n_tok <= LIGHT_ROWS_MAX);
    run_attention(tp, f);
    if (is_gated) model_gdn_gate_output(tp, f);
    f->src = sc->attn;
    f->plan = &L->plan_o;
    fwd_run_light(tp, fwd_job_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
    fwd_run_matmul_group(tp, f, &L->plan_o, sc->proj, NULL, NULL);
}

/* Step: proj += par_out (falcon-h1: the SSM's output plus the attention's). Split by rows. */
static void job_add_par(void *arg, int ith, int nth)
{
    const struct fwd *f = arg;
    const struct scratch *sc = &f->m->sc;
    const size_t e = (size_t)f->m->info.n_embd;
    int lo, hi;
    fwd_split(f->n_rows, ith, nth, &lo, &hi);
    for (size_t i = (size_t)lo * e; i < (size_t)hi * e; i++)
        sc->proj[i] = sc->par_out[i] + sc->proj[i];
}

/* The layer's mixer (attention or a recurrent block, or falcon-h1's both side by side on the
 * same normed input, summed) into proj. The residual of the previous layer is folded into
 * this norm step. */
static void run_mixer(struct threadpool *tp, struct fwd *f, const struct layer *L)
{
    struct engine_model *m = f->m;
    struct scratch *sc = &m->sc;
    f->add = f->il > 0 ? sc->proj : NULL;
    f->norm_w = L->attn_norm;
    f->plan = L->is_recr && !L->par_attn ? &L->plan_conv_in : &L->plan_qkv;
    fwd_run_light(tp, job_norm_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
    if (L->is_recr && L->par_attn) {
        run_attention_block(tp, f, L);
        memcpy(sc->par_out, sc->proj, (size_t)f->n_rows * (size_t)m->info.n_embd * sizeof(float));
        f->src = sc->xn; // the same normed rows, quantized for the SSM's projection
        f->plan = &L->plan_conv_in;
        fwd_run_light(tp, fwd_job_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
        model_recr_block(tp, f);
        fwd_run_light(tp, job_add_par, f, f->n_rows <= LIGHT_ROWS_MAX);
    } else if (L->is_recr) {
        model_recr_block(tp, f);
    } else {
        run_attention_block(tp, f, L);
    }
    post_block(tp, f, L->bo, L->attn_post_norm);
}

/* The layer's FFN (experts or dense) over the residual plus proj, normed, into proj. A layer
 * without a mixer (nemotron_h) adds the previous layer's output here, or nothing at the first
 * layer. */
static void run_ffn(struct threadpool *tp, struct fwd *f, const struct layer *L)
{
    struct engine_model *m = f->m;
    struct scratch *sc = &m->sc;
    f->add = f->il > 0 || !L->no_mixer ? sc->proj : NULL;
    f->norm_w = L->ffn_norm;
    if (L->gate_inp.data) {
        f->plan = &L->plan_router;
        fwd_run_light(tp, job_norm_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
        moe_run(tp, f, L);
    } else {
        f->plan = &L->plan_gu;
        fwd_run_light(tp, job_norm_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
        // ReLU^2 (no gate) writes up into the gate buffer the activation reads
        fwd_run_matmul_group(tp, f, &L->plan_gu, sc->gate, m->feat.relu2_ffn ? NULL : sc->up, NULL);
        f->plan = &L->plan_down;
        f->up_bias = L->ffn_up_b;
        fwd_run_light(tp, fwd_job_swiglu_quant, f, f->n_rows <= LIGHT_ROWS_MAX);
        f->up_bias = NULL;
        fwd_run_matmul_group(tp, f, &L->plan_down, sc->proj, NULL, NULL);
    }
    post_block(tp, f, L->ffn_down_b, L->ffn_post_norm);
}

static void run_layer(struct threadpool *tp, struct fwd *f, int il)
{
    struct engine_model *m = f->m;
    const struct layer *L = &m->layers[il];
    f->L = L;
    f->il = il;
    f->n_rows = f->n_tok;
    if (!L->no_mixer) run_mixer(tp, f, L);
    if (il == m->info.n_layer - 1) keep_output_rows(f);
    if (!L->no_ffn) run_ffn(tp, f, L); // else the next norm step adds the mixer's output
}

/* The families' last touch on the logits rows: granite divides by its logit scale (as a
 * multiply by the reciprocal), gemma soft-caps them, cap * tanh(l / cap). */
static void finish_logits(const struct engine_model *m, float *logits, int n_rows)
{
    const struct model_feat *ft = &m->feat;
    const size_t n = (size_t)n_rows * (size_t)m->info.n_vocab;
    if (ft->logit_div != 0.0f) {
        const float inv = 1.0f / ft->logit_div;
        for (size_t i = 0; i < n; i++)
            logits[i] *= inv;
    }
    if (ft->final_softcap != 0.0f) {
        const float cap = ft->final_softcap, inv = 1.0f / cap;
        for (size_t i = 0; i < n; i++)
            logits[i] = tanhf(logits[i] * inv) * cap;
    }
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
        if (it->n_tokens < 1 || (!it->tokens && !it->embd))
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
        if ((it->grid_w || it->grid_h || it->grid_first) &&
            (it->grid_w < 1 || it->grid_h < 1 || it->grid_first < 0 ||
             (int64_t)it->grid_first + it->n_tokens > (int64_t)it->grid_w * it->grid_h))
            return errmsg_set(err, ERR_INVALID,
                              "item %d: %d tokens from index %d do not fit a %dx%d grid", i,
                              it->n_tokens, it->grid_first, it->grid_w, it->grid_h);
        if (it->n_tokens > it->seq->n_ctx - it->seq->pos)
            return errmsg_set(err, ERR_LIMIT, "item %d: %d tokens do not fit (%d of %d used)", i,
                              it->n_tokens, it->seq->pos, it->seq->n_ctx);
        for (int j = 0; !it->embd && j < it->n_tokens; j++)
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

/* The rotary position an item counts from: the sequence's next one, or for a later part of
 * an image, the image's own (the first part moved the next one on by the grid's longer side). */
static int item_rope_base(const struct engine_batch_item *it)
{
    const int side = it->grid_w > it->grid_h ? it->grid_w : it->grid_h;
    return it->grid_w && it->grid_first > 0 ? it->seq->rope_pos - side : it->seq->rope_pos;
}

/* Moves the sequence's next rotary position past the item (model_mrope_next) and records it
 * per cache row, so a truncation finds it again. Other families keep it equal to the row. */
static void advance_rope(struct engine_seq *s, const struct engine_batch_item *it)
{
    if (!s->m->feat.is_mrope) {
        s->rope_pos = s->pos + it->n_tokens;
        return;
    }
    const int b = item_rope_base(it);
    for (int j = 0; s->rope_next && j < it->n_tokens; j++)
        s->rope_next[s->pos + j] = model_mrope_next(b, j + 1, it->grid_w, it->grid_h);
    s->rope_pos = model_mrope_next(b, it->n_tokens, it->grid_w, it->grid_h);
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
        advance_rope(s, it);
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
    if (m->feat.is_mrope)
        for (int i = 0, t = 0; i < n_items; t += items[i].n_tokens, i++)
            model_mrope_positions(item_rope_base(&items[i]), items[i].n_tokens, items[i].grid_w,
                                  items[i].grid_first, sc->tok_rpos + (size_t)t * 3);
    for (int i = 0; m->n_layer_recr > 0 && i < n_items; i++)
        if (items[i].seq->pos == 0) model_recr_reset(items[i].seq); // a fresh or emptied one
    rope_tables(&f);
    fwd_run_light(tp, job_embed, &f, f.n_tok <= LIGHT_ROWS_MAX);
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
    fwd_run_light(tp, job_norm_quant, &f, f.n_rows <= LIGHT_ROWS_MAX);
    if (any_logits) {
        fwd_run_matmul_group(tp, &f, &m->plan_out, sc->logits, NULL, NULL);
        finish_logits(m, sc->logits, f.n_rows);
    }
    store_outputs(m, items, n_items);
    return ERR_OK;
}
