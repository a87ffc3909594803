/* engine/model on synthetic models written with engine/synth: a slow float reference forward
 * pass (everything dequantized, double accumulation, F32 attention) against the optimized one
 * for qwen2, qwen3 and llama and every tensor type; batching across sequences; thread counts;
 * prompt-cache truncation; decode and load errors; allocation failure during load. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/gguf/synth.h"
#include "engine/threadpool.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LAYERS 4
#define MAX_CTX    64

/* ---- the float reference ---- */

struct ref_layer {
    float *an, *fn, *wq, *wk, *wv, *wo, *wg, *wu, *wd, *bq, *bk, *bv, *qn, *kn;
};

struct ref_model {
    struct synth_params p;
    int hd, qd, kvd;
    float *emb, *out, *on;
    struct ref_layer L[MAX_LAYERS];
    float *kc, *vc; // (layer, MAX_CTX, kvd)
    float *hidden;  // (n_embd) the last ref_token's state after output_norm
};

static float *deq(const struct gguf *g, const char *name)
{
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) return NULL;
    const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *x = mem_alloc((size_t)n * sizeof *x);
    assert_non_null(x);
    quant_traits_ref(t->type)->to_float(t->data, x, n);
    return x;
}

static float *deq_l(const struct gguf *g, int il, const char *name)
{
    char full[96];
    snprintf(full, sizeof full, "blk.%d.%s", il, name);
    return deq(g, full);
}

static void ref_load(struct ref_model *r, const struct gguf *g, const struct synth_params *p)
{
    memset(r, 0, sizeof *r);
    r->p = *p;
    r->hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    r->qd = p->n_head * r->hd;
    r->kvd = p->n_head_kv * r->hd;
    r->emb = deq(g, "token_embd.weight");
    r->out = deq(g, "output.weight");
    r->on = deq(g, "output_norm.weight");
    for (int il = 0; il < p->n_layer; il++) {
        struct ref_layer *L = &r->L[il];
        L->an = deq_l(g, il, "attn_norm.weight");
        L->fn = deq_l(g, il, "ffn_norm.weight");
        L->wq = deq_l(g, il, "attn_q.weight");
        L->wk = deq_l(g, il, "attn_k.weight");
        L->wv = deq_l(g, il, "attn_v.weight");
        L->wo = deq_l(g, il, "attn_output.weight");
        L->wg = deq_l(g, il, "ffn_gate.weight");
        L->wu = deq_l(g, il, "ffn_up.weight");
        L->wd = deq_l(g, il, "ffn_down.weight");
        L->bq = deq_l(g, il, "attn_q.bias");
        L->bk = deq_l(g, il, "attn_k.bias");
        L->bv = deq_l(g, il, "attn_v.bias");
        L->qn = deq_l(g, il, "attn_q_norm.weight");
        L->kn = deq_l(g, il, "attn_k_norm.weight");
    }
    r->kc = mem_calloc((size_t)p->n_layer * MAX_CTX * (size_t)r->kvd, sizeof(float));
    r->vc = mem_calloc((size_t)p->n_layer * MAX_CTX * (size_t)r->kvd, sizeof(float));
    r->hidden = mem_calloc((size_t)p->n_embd, sizeof(float));
}

static void ref_free(struct ref_model *r)
{
    mem_free(r->emb);
    mem_free(r->out);
    mem_free(r->on);
    for (int il = 0; il < r->p.n_layer; il++) {
        float **f = &r->L[il].an;
        for (size_t i = 0; i < sizeof(struct ref_layer) / sizeof(float *); i++)
            mem_free(f[i]);
    }
    mem_free(r->kc);
    mem_free(r->vc);
    mem_free(r->hidden);
}

static void matvec(const float *w, const float *x, int n_in, int n_out, const float *b, float *y)
{
    for (int o = 0; o < n_out; o++) {
        double s = b ? b[o] : 0.0;
        for (int i = 0; i < n_in; i++)
            s += (double)w[(size_t)o * n_in + i] * x[i];
        y[o] = (float)s;
    }
}

static void norm(const float *x, const float *w, int n, float eps, float *y)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    const double sc = 1.0 / sqrt(s / n + eps);
    for (int i = 0; i < n; i++)
        y[i] = (float)(x[i] * sc * w[i]);
}

static void rope(float *x, int pos, int n_rot, float base, bool neox)
{
    for (int i = 0; i < n_rot / 2; i++) {
        const double th = pos * pow(base, -2.0 * i / n_rot);
        const int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
        const double x0 = x[a], x1 = x[b];
        x[a] = (float)(x0 * cos(th) - x1 * sin(th));
        x[b] = (float)(x0 * sin(th) + x1 * cos(th));
    }
}

static void ref_attention(const struct ref_model *r, int il, int pos, const float *q, float *out)
{
    const int hd = r->hd, grp = r->p.n_head / r->p.n_head_kv;
    double sc[MAX_CTX];
    for (int h = 0; h < r->p.n_head; h++) {
        const float *kc = r->kc + ((size_t)il * MAX_CTX) * r->kvd + (h / grp) * hd;
        const float *vc = r->vc + ((size_t)il * MAX_CTX) * r->kvd + (h / grp) * hd;
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= pos; j++) {
            double d = 0;
            for (int i = 0; i < hd; i++)
                d += (double)q[h * hd + i] * kc[(size_t)j * r->kvd + i];
            sc[j] = d / sqrt((double)hd);
            mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int j = 0; j <= pos; j++)
            sum += (sc[j] = exp(sc[j] - mx));
        for (int i = 0; i < hd; i++) {
            double o = 0;
            for (int j = 0; j <= pos; j++)
                o += sc[j] / sum * vc[(size_t)j * r->kvd + i];
            out[h * hd + i] = (float)o;
        }
    }
}

/* One token at pos through the reference; logits (n_vocab) out. */
static void ref_token(struct ref_model *r, int32_t tok, int pos, float *logits)
{
    const struct synth_params *p = &r->p;
    const int e = p->n_embd, f = p->n_ff, hd = r->hd;
    const bool neox = strcmp(p->arch, "llama") != 0;
    float x[512], xn[512], q[512], k[512], v[512], att[512], o[512], g[1024], u[1024];
    memcpy(x, r->emb + (size_t)tok * e, sizeof(float) * (size_t)e);
    for (int il = 0; il < p->n_layer; il++) {
        const struct ref_layer *L = &r->L[il];
        norm(x, L->an, e, p->norm_eps, xn);
        matvec(L->wq, xn, e, r->qd, L->bq, q);
        matvec(L->wk, xn, e, r->kvd, L->bk, k);
        matvec(L->wv, xn, e, r->kvd, L->bv, v);
        for (int h = 0; h < p->n_head; h++) {
            if (L->qn) norm(q + h * hd, L->qn, hd, p->norm_eps, q + h * hd);
            rope(q + h * hd, pos, hd, p->rope_base, neox);
        }
        for (int h = 0; h < p->n_head_kv; h++) {
            if (L->kn) norm(k + h * hd, L->kn, hd, p->norm_eps, k + h * hd);
            rope(k + h * hd, pos, hd, p->rope_base, neox);
        }
        memcpy(r->kc + ((size_t)il * MAX_CTX + pos) * r->kvd, k, sizeof(float) * (size_t)r->kvd);
        memcpy(r->vc + ((size_t)il * MAX_CTX + pos) * r->kvd, v, sizeof(float) * (size_t)r->kvd);
        ref_attention(r, il, pos, q, att);
        matvec(L->wo, att, r->qd, e, NULL, o);
        for (int i = 0; i < e; i++)
            x[i] += o[i];
        norm(x, L->fn, e, p->norm_eps, xn);
        matvec(L->wg, xn, e, f, NULL, g);
        matvec(L->wu, xn, e, f, NULL, u);
        for (int i = 0; i < f; i++)
            g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        matvec(L->wd, g, f, e, NULL, o);
        for (int i = 0; i < e; i++)
            x[i] += o[i];
    }
    norm(x, r->on, e, p->norm_eps, xn);
    memcpy(r->hidden, xn, sizeof(float) * (size_t)e);
    matvec(r->out ? r->out : r->emb, xn, e, p->n_vocab, NULL, logits);
}

/* ---- helpers ---- */

/* Writes a synthetic model to a temp file; path receives its name. */
static void synth_file(const struct synth_params *p, char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/test_model_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct gguf_writer *w;
    struct errmsg err = {{0}};
    if (synth_build(p, &w, &err) != ERR_OK) fail_msg("synth: %s", err.msg);
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
}

static struct synth_params small_params(const char *arch, const char *type)
{
    struct synth_params p = synth_params_default();
    p.arch = arch;
    p.type = type;
    p.n_layer = 2;
    p.n_embd = 256; // one K-quant super-block per row
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 512;
    p.n_vocab = synth_builtin_vocab_size(arch);
    p.n_ctx = MAX_CTX;
    p.seed = 7;
    return p;
}

static double rel_err(const float *a, const float *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return num / (den > 0 ? den : 1);
}

static const int32_t prompt[] = {1, 290, 261, 262, 17, 99, 280, 5, 270, 31};
#define N_PROMPT (int)(sizeof prompt / sizeof prompt[0])

/* Decodes the prompt in one batch plus 3 single tokens and compares every logits vector with
 * the reference; returns the worst relative error. */
static double compare_with_reference(const char *arch, const char *type)
{
    struct synth_params p = small_params(arch, type);
    char path[64];
    synth_file(&p, path, sizeof path);
    struct engine_model *m;
    struct errmsg err = {{0}};
    if (engine_model_load(path, &m, &err) != ERR_OK)
        fail_msg("load %s/%s: %s", arch, type, err.msg);
    struct ref_model r;
    ref_load(&r, engine_model_gguf(m), &p);
    struct threadpool *tp;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(m, MAX_CTX, &s), ERR_OK);
    float *want = mem_alloc((size_t)p.n_vocab * sizeof *want);
    for (int i = 0; i < N_PROMPT; i++)
        ref_token(&r, prompt[i], i, want);
    struct engine_batch_item it = {.seq = s, .tokens = prompt, .n_tokens = N_PROMPT};
    assert_int_equal(engine_decode(m, tp, &it, 1, &err), ERR_OK);
    double worst = rel_err(engine_seq_logits(s), want, p.n_vocab);
    for (int step = 0; step < 3; step++) {
        int32_t tok = (int32_t)(40 + 37 * step);
        ref_token(&r, tok, N_PROMPT + step, want);
        it.tokens = &tok;
        it.n_tokens = 1;
        assert_int_equal(engine_decode(m, tp, &it, 1, &err), ERR_OK);
        worst = fmax(worst, rel_err(engine_seq_logits(s), want, p.n_vocab));
    }
    assert_int_equal(engine_seq_pos(s), N_PROMPT + 3);
    mem_free(want);
    engine_seq_free(s);
    threadpool_free(tp);
    ref_free(&r);
    engine_model_free(m);
    unlink(path);
    return worst;
}

/* ---- tests ---- */

static void test_reference_all_types(void **state)
{
    (void)state;
    // Tolerance per type (relative to the largest logit). The reference uses the dequantized
    // weights exactly, so what remains is the optimized path's own rounding: activations
    // converted to the weights' dot format (8-bit blocks for every quantized type, which is
    // why they all land near 2e-2; 256-element blocks for the K types), K/V and the attention
    // accumulator in half. Measured worst: f32 8e-4, f16 1.5e-3, bf16 5e-3 (6.1e-3 with the
    // vdpbf16ps kernels, whose activations are BF16 too), 32-element block types 2.1e-2, K types
    // 2.8e-2.
    static const struct {
        const char *type;
        double tol;
    } types[] = {
        {"f32", 2e-3},  {"f16", 3e-3},  {"bf16", 1e-2}, {"q8_0", 3e-2},   {"q4_0", 3e-2},
        {"q4_1", 3e-2}, {"q5_0", 3e-2}, {"q5_1", 3e-2}, {"q2_k", 3e-2},   {"q3_k", 3e-2},
        {"q4_k", 3e-2}, {"q5_k", 3e-2}, {"q6_k", 3e-2}, {"q4_k_m", 3e-2},
    };
    static const char *const archs[] = {"qwen2", "qwen3", "llama"};
    for (size_t a = 0; a < 3; a++) {
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            if (a == 2 && i > 3)
                continue; // llama: the graph differences are covered by f32/f16/q8_0
            double e = compare_with_reference(archs[a], types[i].type);
            printf("%s %-6s rel err %.2e (tol %.0e)\n", archs[a], types[i].type, e, types[i].tol);
            if (!(e <= types[i].tol))
                fail_msg("%s %s: relative error %.3e above %.0e", archs[a], types[i].type, e,
                         types[i].tol);
        }
    }
}

struct fixture {
    char path[64];
    struct engine_model *m;
    struct threadpool *tp1, *tp2;
};

static struct fixture *fixture_new(const char *arch, const char *type)
{
    struct fixture *f = mem_calloc(1, sizeof *f);
    struct synth_params p = small_params(arch, type);
    synth_file(&p, f->path, sizeof f->path);
    struct errmsg err;
    assert_int_equal(engine_model_load(f->path, &f->m, &err), ERR_OK);
    assert_int_equal(threadpool_new(1, &f->tp1), ERR_OK);
    assert_int_equal(threadpool_new(2, &f->tp2), ERR_OK);
    return f;
}

static void fixture_free(struct fixture *f)
{
    threadpool_free(f->tp1);
    threadpool_free(f->tp2);
    engine_model_free(f->m);
    unlink(f->path);
    mem_free(f);
}

static void decode_one(struct fixture *f, struct threadpool *tp, struct engine_seq *s,
                       const int32_t *toks, int n)
{
    struct engine_batch_item it = {.seq = s, .tokens = toks, .n_tokens = n};
    struct errmsg err;
    assert_int_equal(engine_decode(f->m, tp, &it, 1, &err), ERR_OK);
}

static void test_batch_equals_single(void **state)
{
    (void)state;
    struct fixture *f = fixture_new("qwen2", "q8_0");
    const int nv = engine_model_info(f->m)->n_vocab;
    struct engine_seq *alone[3], *batched[3];
    const int32_t *toks[3] = {prompt, prompt + 2, prompt + 5};
    const int lens[3] = {N_PROMPT, 4, 1};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(engine_seq_new(f->m, MAX_CTX, &alone[i]), ERR_OK);
        assert_int_equal(engine_seq_new(f->m, MAX_CTX, &batched[i]), ERR_OK);
        decode_one(f, f->tp2, alone[i], toks[i], lens[i]);
    }
    struct engine_batch_item items[3];
    for (int i = 0; i < 3; i++)
        items[i] =
            (struct engine_batch_item){.seq = batched[i], .tokens = toks[i], .n_tokens = lens[i]};
    struct errmsg err;
    assert_int_equal(engine_decode(f->m, f->tp2, items, 3, &err), ERR_OK);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(engine_seq_logits(alone[i]), engine_seq_logits(batched[i]),
                            (size_t)nv * sizeof(float));
    // A second step mixes a prompt chunk with single decode tokens.
    const int32_t next[3] = {44, 45, 46};
    const int32_t chunk[3] = {46, 47, 48};
    decode_one(f, f->tp2, alone[0], &next[0], 1);
    decode_one(f, f->tp2, alone[1], chunk, 3);
    decode_one(f, f->tp2, alone[2], &next[2], 1);
    items[0] = (struct engine_batch_item){.seq = batched[0], .tokens = &next[0], .n_tokens = 1};
    items[1] = (struct engine_batch_item){.seq = batched[1], .tokens = chunk, .n_tokens = 3};
    items[2] = (struct engine_batch_item){.seq = batched[2], .tokens = &next[2], .n_tokens = 1};
    assert_int_equal(engine_decode(f->m, f->tp2, items, 3, &err), ERR_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(engine_seq_pos(alone[i]), engine_seq_pos(batched[i]));
        assert_memory_equal(engine_seq_logits(alone[i]), engine_seq_logits(batched[i]),
                            (size_t)nv * sizeof(float));
        engine_seq_free(alone[i]);
        engine_seq_free(batched[i]);
    }
    fixture_free(f);
}

static void test_threads_identical(void **state)
{
    (void)state;
    static const char *const types[] = {"f32", "q4_k_m", "q4_0"};
    for (size_t t = 0; t < 3; t++) {
        struct fixture *f = fixture_new("qwen3", types[t]);
        const int nv = engine_model_info(f->m)->n_vocab;
        struct engine_seq *a, *b;
        assert_int_equal(engine_seq_new(f->m, MAX_CTX, &a), ERR_OK);
        assert_int_equal(engine_seq_new(f->m, MAX_CTX, &b), ERR_OK);
        decode_one(f, f->tp1, a, prompt, N_PROMPT);
        decode_one(f, f->tp2, b, prompt, N_PROMPT);
        assert_memory_equal(engine_seq_logits(a), engine_seq_logits(b), (size_t)nv * 4);
        decode_one(f, f->tp1, a, prompt + 3, 1);
        decode_one(f, f->tp2, b, prompt + 3, 1);
        assert_memory_equal(engine_seq_logits(a), engine_seq_logits(b), (size_t)nv * 4);
        engine_seq_free(a);
        engine_seq_free(b);
        fixture_free(f);
    }
}

static void test_truncate_reuses_prefix(void **state)
{
    (void)state;
    struct fixture *f = fixture_new("llama", "q8_0");
    const int nv = engine_model_info(f->m)->n_vocab;
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(f->m, MAX_CTX, &s), ERR_OK);
    decode_one(f, f->tp2, s, prompt, N_PROMPT);
    float *first = mem_alloc((size_t)nv * sizeof *first);
    memcpy(first, engine_seq_logits(s), (size_t)nv * sizeof *first);
    engine_seq_truncate(s, 6);
    assert_int_equal(engine_seq_pos(s), 6);
    assert_null(engine_seq_logits(s));
    decode_one(f, f->tp2, s, prompt + 6, N_PROMPT - 6);
    assert_int_equal(engine_seq_pos(s), N_PROMPT);
    assert_true(rel_err(engine_seq_logits(s), first, nv) < 1e-6);
    mem_free(first);
    engine_seq_free(s);
    fixture_free(f);
}

static void test_decode_errors(void **state)
{
    (void)state;
    struct fixture *f = fixture_new("qwen2", "f16");
    struct engine_seq *s, *t;
    assert_int_equal(engine_seq_new(f->m, 8, &s), ERR_OK);
    assert_int_equal(engine_seq_new(f->m, 8, &t), ERR_OK);
    assert_int_equal(engine_seq_new(f->m, 0, &t), ERR_INVALID);
    struct errmsg err;
    const int32_t bad = engine_model_info(f->m)->n_vocab, neg = -1;
    struct engine_batch_item it = {.seq = s, .tokens = &bad, .n_tokens = 1};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_INVALID);
    assert_non_null(strstr(err.msg, "token id"));
    it.tokens = &neg;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_INVALID);
    it.tokens = prompt;
    it.n_tokens = 9; // n_ctx is 8
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_LIMIT);
    it.n_tokens = 0;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_INVALID);
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 0, &err), ERR_INVALID);
    struct engine_batch_item two[2] = {{.seq = s, .tokens = prompt, .n_tokens = 1},
                                       {.seq = s, .tokens = prompt, .n_tokens = 1}};
    assert_int_equal(engine_decode(f->m, f->tp2, two, 2, &err), ERR_INVALID);
    assert_int_equal(engine_seq_pos(s), 0); // nothing was appended
    // More than ENGINE_BATCH_MAX tokens in one call.
    struct engine_seq *big;
    assert_int_equal(engine_seq_new(f->m, ENGINE_BATCH_MAX + 1, &big), ERR_OK);
    int32_t *many = mem_calloc(ENGINE_BATCH_MAX + 1, sizeof *many);
    struct engine_batch_item bi = {.seq = big, .tokens = many, .n_tokens = ENGINE_BATCH_MAX + 1};
    assert_int_equal(engine_decode(f->m, f->tp2, &bi, 1, &err), ERR_LIMIT);
    bi.n_tokens = ENGINE_BATCH_MAX; // the limit itself works
    assert_int_equal(engine_decode(f->m, f->tp2, &bi, 1, &err), ERR_OK);
    assert_int_equal(engine_seq_pos(big), ENGINE_BATCH_MAX);
    mem_free(many);
    engine_seq_free(big);
    engine_seq_free(s);
    engine_seq_free(t);
    fixture_free(f);
}

/* ---- hidden-state outputs (decoders as embedding models) ---- */

/* A view sequence bound to the start of kv for n tokens. */
static struct engine_seq *view_at(struct engine_model *m, void *kv, size_t cap, int n)
{
    struct engine_seq *v;
    assert_int_equal(engine_seq_new_view(m, &v), ERR_OK);
    assert_int_equal(engine_seq_bind(v, kv, cap, n), ERR_OK);
    return v;
}

/* The LAST, FIRST and SUM outputs of the prompt against the float reference's states after
 * output_norm, with the tolerance of the logits comparison for the type. */
static void check_hidden_against_reference(const char *arch, const char *type, double tol)
{
    struct synth_params p = small_params(arch, type);
    char path[64];
    synth_file(&p, path, sizeof path);
    struct engine_model *m;
    struct errmsg err = {{0}};
    assert_int_equal(engine_model_load(path, &m, &err), ERR_OK);
    struct ref_model r;
    ref_load(&r, engine_model_gguf(m), &p);
    const int e = p.n_embd;
    float *logits = mem_alloc((size_t)p.n_vocab * sizeof *logits);
    float *first = mem_calloc((size_t)e, sizeof *first), *sum = mem_calloc((size_t)e, 4);
    double *ref_sum = mem_calloc((size_t)e, sizeof *ref_sum);
    for (int i = 0; i < N_PROMPT; i++) {
        ref_token(&r, prompt[i], i, logits);
        if (i == 0) memcpy(first, r.hidden, sizeof(float) * (size_t)e);
        for (int j = 0; j < e; j++)
            ref_sum[j] += r.hidden[j];
    }
    for (int j = 0; j < e; j++)
        sum[j] = (float)ref_sum[j];
    struct threadpool *tp;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    const size_t cap = 3 * engine_kv_bytes(m, N_PROMPT);
    void *kv = mem_alloc(cap);
    const size_t one = engine_kv_bytes(m, N_PROMPT);
    struct engine_seq *v[3];
    float *got = mem_calloc(3 * (size_t)e, sizeof *got);
    struct engine_batch_item items[3];
    const enum engine_output outs[3] = {ENGINE_OUTPUT_LAST, ENGINE_OUTPUT_FIRST, ENGINE_OUTPUT_SUM};
    for (int i = 0; i < 3; i++) {
        v[i] = view_at(m, (uint8_t *)kv + i * one, one, N_PROMPT);
        items[i] = (struct engine_batch_item){.seq = v[i],
                                              .tokens = prompt,
                                              .n_tokens = N_PROMPT,
                                              .output = outs[i],
                                              .hidden = got + (size_t)i * e};
    }
    assert_int_equal(engine_decode(m, tp, items, 3, &err), ERR_OK);
    const double e_last = rel_err(got, r.hidden, e), e_first = rel_err(got + e, first, e);
    const double e_sum = rel_err(got + 2 * e, sum, e);
    printf("%s %-5s hidden rel err last %.2e first %.2e sum %.2e (tol %.0e)\n", arch, type, e_last,
           e_first, e_sum, tol);
    assert_true(e_last <= tol && e_first <= tol && e_sum <= tol);
    assert_null(engine_seq_logits(v[0])); // a view has no logits
    assert_int_equal(engine_seq_pos(v[0]), N_PROMPT);
    for (int i = 0; i < 3; i++)
        engine_seq_free(v[i]);
    mem_free(got);
    mem_free(kv);
    threadpool_free(tp);
    mem_free(ref_sum);
    mem_free(sum);
    mem_free(first);
    mem_free(logits);
    ref_free(&r);
    engine_model_free(m);
    unlink(path);
}

static void test_hidden_reference(void **state)
{
    (void)state;
    check_hidden_against_reference("qwen3", "f32", 2e-3);
    check_hidden_against_reference("qwen3", "q8_0", 3e-2);
    check_hidden_against_reference("qwen2", "f16", 3e-3);
    check_hidden_against_reference("llama", "f32", 2e-3);
}

/* Input embeddings instead of ids: the token_embd rows of the prompt (an f32 llama, which
 * scales nothing) give the same logits as the ids; a non-causal item lets its first token see
 * the later ones, so the first position's hidden state changes while a causal one does not. */
static void test_input_embeddings(void **state)
{
    (void)state;
    struct fixture *f = fixture_new("llama", "f32");
    const int e = engine_model_info(f->m)->n_embd, nv = engine_model_info(f->m)->n_vocab;
    const struct gguf_tensor *te = gguf_find_tensor(engine_model_gguf(f->m), "token_embd.weight");
    assert_non_null(te);
    float *rows = mem_alloc(sizeof(float) * (size_t)e * N_PROMPT);
    for (int j = 0; j < N_PROMPT; j++)
        memcpy(rows + (size_t)j * e, (const float *)te->data + (size_t)prompt[j] * e,
               sizeof(float) * (size_t)e);
    struct engine_seq *a, *b;
    assert_int_equal(engine_seq_new(f->m, MAX_CTX, &a), ERR_OK);
    assert_int_equal(engine_seq_new(f->m, MAX_CTX, &b), ERR_OK);
    struct errmsg err;
    decode_one(f, f->tp2, a, prompt, N_PROMPT);
    struct engine_batch_item it = {.seq = b, .embd = rows, .n_tokens = N_PROMPT};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    assert_memory_equal(engine_seq_logits(a), engine_seq_logits(b), sizeof(float) * (size_t)nv);
    float first_causal[256] = {0}, first_both[256] = {0};
    engine_seq_truncate(b, 0);
    it = (struct engine_batch_item){.seq = b,
                                    .embd = rows,
                                    .n_tokens = 1,
                                    .output = ENGINE_OUTPUT_FIRST,
                                    .hidden = first_causal};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    float first_alone[256] = {0};
    memcpy(first_alone, first_causal, sizeof first_alone);
    engine_seq_truncate(b, 0);
    it.n_tokens = N_PROMPT;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    assert_memory_equal(first_causal, first_alone, sizeof(float) * (size_t)e);
    engine_seq_truncate(b, 0);
    it.hidden = first_both;
    it.is_noncausal = true;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    assert_memory_not_equal(first_both, first_alone, sizeof(float) * (size_t)e);
    it = (struct engine_batch_item){.seq = b, .n_tokens = 2}; // neither ids nor embeddings
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_INVALID);
    engine_seq_free(a);
    engine_seq_free(b);
    mem_free(rows);
    fixture_free(f);
}

/* An input's hidden states are the same bits alone, in a batch with other inputs (views
 * packed in one allocation), beside a generating sequence, and when fed in two chunks. */
static void test_hidden_batch_independent(void **state)
{
    (void)state;
    struct fixture *f = fixture_new("qwen3", "q4_k_m");
    const int e = engine_model_info(f->m)->n_embd, nv = engine_model_info(f->m)->n_vocab;
    const int32_t *toks[3] = {prompt, prompt + 2, prompt + 7};
    const int lens[3] = {N_PROMPT, 5, 3};
    const size_t cap = engine_kv_bytes(f->m, 2 * N_PROMPT);
    void *kv = mem_alloc(cap);
    float alone[3][256] = {{0}}, batched[3][256] = {{0}};
    struct errmsg err;
    for (int i = 0; i < 3; i++) {
        struct engine_seq *v = view_at(f->m, kv, cap, lens[i]);
        struct engine_batch_item it = {.seq = v,
                                       .tokens = toks[i],
                                       .n_tokens = lens[i],
                                       .output = ENGINE_OUTPUT_SUM,
                                       .hidden = alone[i]};
        assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
        engine_seq_free(v);
    }
    // Packed back to back in one allocation, next to an item that wants logits.
    struct engine_seq *gen, *gen_alone, *v[3];
    assert_int_equal(engine_seq_new(f->m, MAX_CTX, &gen), ERR_OK);
    assert_int_equal(engine_seq_new(f->m, MAX_CTX, &gen_alone), ERR_OK);
    decode_one(f, f->tp2, gen_alone, prompt, 4);
    struct engine_batch_item items[4] = {{.seq = gen, .tokens = prompt, .n_tokens = 4}};
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        const size_t b = engine_kv_bytes(f->m, lens[i]);
        v[i] = view_at(f->m, (uint8_t *)kv + off, b, lens[i]);
        off += b;
        items[1 + i] = (struct engine_batch_item){.seq = v[i],
                                                  .tokens = toks[i],
                                                  .n_tokens = lens[i],
                                                  .output = ENGINE_OUTPUT_SUM,
                                                  .hidden = batched[i]};
    }
    assert_int_equal(engine_decode(f->m, f->tp1, items, 4, &err), ERR_OK);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(alone[i], batched[i], (size_t)e * sizeof(float));
    assert_memory_equal(engine_seq_logits(gen), engine_seq_logits(gen_alone),
                        (size_t)nv * sizeof(float));
    // The first input in two chunks, with LAST beside SUM: the same sum and the same last state.
    float chunked[256] = {0}, last[256], last_whole[256];
    struct engine_seq *c = view_at(f->m, kv, cap, N_PROMPT);
    struct engine_batch_item it = {
        .seq = c, .tokens = prompt, .n_tokens = 6, .output = ENGINE_OUTPUT_SUM, .hidden = chunked};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    it = (struct engine_batch_item){.seq = c,
                                    .tokens = prompt + 6,
                                    .n_tokens = N_PROMPT - 6,
                                    .output = ENGINE_OUTPUT_SUM,
                                    .hidden = chunked};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    assert_memory_equal(chunked, alone[0], (size_t)e * sizeof(float));
    assert_int_equal(engine_seq_bind(c, kv, cap, N_PROMPT), ERR_OK); // empties it
    it = (struct engine_batch_item){.seq = c,
                                    .tokens = prompt,
                                    .n_tokens = N_PROMPT,
                                    .output = ENGINE_OUTPUT_LAST,
                                    .hidden = last_whole};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    engine_seq_truncate(c, 6);
    it = (struct engine_batch_item){.seq = c,
                                    .tokens = prompt + 6,
                                    .n_tokens = N_PROMPT - 6,
                                    .output = ENGINE_OUTPUT_LAST,
                                    .hidden = last};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    assert_memory_equal(last, last_whole, (size_t)e * sizeof(float));
    // A regular sequence can give hidden states too; its logits are then stale.
    it = (struct engine_batch_item){.seq = gen,
                                    .tokens = prompt + 4,
                                    .n_tokens = 2,
                                    .output = ENGINE_OUTPUT_LAST,
                                    .hidden = last};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    assert_null(engine_seq_logits(gen));
    engine_seq_free(c);
    for (int i = 0; i < 3; i++)
        engine_seq_free(v[i]);
    engine_seq_free(gen);
    engine_seq_free(gen_alone);
    mem_free(kv);
    fixture_free(f);
}

static void test_hidden_errors(void **state)
{
    (void)state;
    struct fixture *f = fixture_new("qwen2", "f32");
    const size_t b = engine_kv_bytes(f->m, 8);
    assert_int_equal(b, engine_model_info(f->m)->kv_bytes_per_token * 8);
    assert_int_equal(engine_kv_bytes(f->m, 0), 0);
    uint8_t *kv = mem_alloc(b + 2);
    struct engine_seq *v, *s;
    assert_int_equal(engine_seq_new_view(f->m, &v), ERR_OK);
    assert_int_equal(engine_seq_new(f->m, 8, &s), ERR_OK);
    assert_int_equal(engine_seq_bind(v, kv, b - 1, 8), ERR_INVALID);
    assert_int_equal(engine_seq_bind(v, kv + 1, b, 8), ERR_INVALID);
    assert_int_equal(engine_seq_bind(v, kv, b, 0), ERR_INVALID);
    assert_int_equal(engine_seq_bind(s, kv, b, 8), ERR_INVALID); // owns its cache
    assert_int_equal(engine_seq_bind(v, kv, b, 8), ERR_OK);
    float h[256];
    struct errmsg err;
    struct engine_batch_item it = {.seq = v, .tokens = prompt, .n_tokens = 3};
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_INVALID); // logits of a view
    assert_non_null(strstr(err.msg, "view"));
    it.output = ENGINE_OUTPUT_LAST;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_INVALID); // no buffer
    it.hidden = h;
    it.output = (enum engine_output)9;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_INVALID);
    it.output = ENGINE_OUTPUT_FIRST;
    it.n_tokens = 9;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_LIMIT); // bound for 8
    assert_int_equal(engine_seq_pos(v), 0);
    it.n_tokens = 8;
    assert_int_equal(engine_decode(f->m, f->tp2, &it, 1, &err), ERR_OK);
    engine_seq_free(v);
    engine_seq_free(s);
    mem_free(kv);
    fixture_free(f);
}

static void test_info(void **state)
{
    (void)state;
    struct synth_params p = small_params("qwen2", "q8_0");
    p.tied = true;
    char path[64];
    synth_file(&p, path, sizeof path);
    struct engine_model *m;
    struct errmsg err;
    assert_int_equal(engine_model_load(path, &m, &err), ERR_OK);
    const struct engine_model_info *in = engine_model_info(m);
    assert_string_equal(in->arch, "qwen2");
    assert_int_equal(in->n_embd, 256);
    assert_int_equal(in->n_layer, 2);
    assert_int_equal(in->n_head, 4);
    assert_int_equal(in->n_head_kv, 2);
    assert_int_equal(in->head_dim, 64);
    assert_int_equal(in->n_ff, 512);
    assert_int_equal(in->n_ctx_train, MAX_CTX);
    assert_int_equal(in->n_vocab, p.n_vocab);
    assert_int_equal(in->n_batch_max, ENGINE_BATCH_MAX);
    assert_int_equal(in->kv_bytes_per_token, 2 * 2 * 128 * 2);
    assert_true(engine_seq_bytes(m, 100) >= 100 * in->kv_bytes_per_token);
    assert_int_equal(engine_seq_bytes(m, 0), 0);
    int64_t expect =
        (int64_t)p.n_vocab * 256 + 256 +
        2 * (256 + 256 + 256 * 256 * 2 + 256 * 128 * 2 + 256 + 128 * 2 + 3 * 256 * 512);
    assert_int_equal(in->n_params, expect);
    assert_non_null(engine_model_gguf(m));
    engine_model_free(m);
    unlink(path);
}

/* Loads path and returns the logits of a fixed prompt (caller frees). */
static float *prompt_logits(const char *path, int *n_vocab)
{
    struct engine_model *m;
    struct engine_seq *s;
    struct threadpool *tp;
    struct errmsg err;
    if (engine_model_load(path, &m, &err) != ERR_OK) fail_msg("%s: %s", path, err.msg);
    assert_int_equal(engine_seq_new(m, 32, &s), ERR_OK);
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    static const int32_t toks[] = {1, 45, 300, 7, 99, 260, 3, 18};
    struct engine_batch_item it = {.seq = s, .tokens = toks, .n_tokens = 8};
    assert_int_equal(engine_decode(m, tp, &it, 1, &err), ERR_OK);
    *n_vocab = engine_model_info(m)->n_vocab;
    float *out = mem_alloc(sizeof(float) * (size_t)*n_vocab);
    assert_non_null(out);
    memcpy(out, engine_seq_logits(s), sizeof(float) * (size_t)*n_vocab);
    threadpool_free(tp);
    engine_seq_free(s);
    engine_model_free(m);
    return out;
}

/* Tied embeddings: the output matrix is repacked where the kernel set has a layout for it and
 * the token embeddings read that copy (quant_get_row). The same model with a separate output
 * matrix holding the same bytes (repacked alone; the embeddings read the file) must give the
 * same logits bit for bit, for every repackable type. */
static void test_tied_embeddings(void **state)
{
    (void)state;
    static const char *const types[] = {"q8_0", "q4_0", "q5_0", "q4_k", "q6_k", "f16"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        struct synth_params p = small_params("llama", types[i]);
        p.tied = true;
        p.n_vocab = (p.n_vocab + 15) / 16 * 16; // whole groups of 16 rows
        struct gguf_writer *w;
        struct errmsg err = {{0}};
        if (synth_build(&p, &w, &err) != ERR_OK) fail_msg("synth: %s", err.msg);
        char tied[] = "/tmp/test_model_tied_XXXXXX", sep[] = "/tmp/test_model_sep_XXXXXX";
        close(mkstemp(tied));
        close(mkstemp(sep));
        assert_int_equal(gguf_writer_to_file(w, tied, &err), ERR_OK);
        void *bytes;
        size_t len;
        assert_int_equal(gguf_writer_to_memory(w, &bytes, &len), ERR_OK);
        struct gguf *g;
        assert_int_equal(gguf_open_memory(bytes, len, &g, &err), ERR_OK);
        const struct gguf_tensor *e = gguf_find_tensor(g, "token_embd.weight");
        assert_non_null(e);
        assert_null(gguf_find_tensor(g, "output.weight"));
        assert_int_equal(
            gguf_writer_add_tensor(w, "output.weight", e->type, e->n_dims, e->ne, e->data, e->size),
            ERR_OK);
        assert_int_equal(gguf_writer_to_file(w, sep, &err), ERR_OK);
        gguf_close(g);
        mem_free(bytes);
        gguf_writer_free(w);
        int n_a, n_b;
        float *a = prompt_logits(tied, &n_a), *b = prompt_logits(sep, &n_b);
        assert_int_equal(n_a, n_b);
        if (memcmp(a, b, sizeof(float) * (size_t)n_a) != 0)
            fail_msg("%s: tied and separate output matrices give other logits", types[i]);
        mem_free(a);
        mem_free(b);
        unlink(tied);
        unlink(sep);
    }
}

static int load_bytes(struct gguf_writer *w, struct errmsg *err)
{
    char path[] = "/tmp/test_model_bad_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(gguf_writer_to_file(w, path, err), ERR_OK);
    struct engine_model *m = NULL;
    int rc = engine_model_load(path, &m, err);
    engine_model_free(m);
    unlink(path);
    return rc;
}

static void test_load_errors(void **state)
{
    (void)state;
    struct errmsg err;
    struct gguf_writer *w;
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    gguf_writer_add_str(w, "general.architecture", "gpt-j");
    assert_int_equal(load_bytes(w, &err), ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "gpt-j"));
    gguf_writer_free(w);

    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    gguf_writer_add_str(w, "general.architecture", "llama");
    gguf_writer_add_u32(w, "llama.embedding_length", 64);
    assert_int_equal(load_bytes(w, &err), ERR_FORMAT);
    assert_string_equal(err.msg, "missing key 'llama.block_count'");
    gguf_writer_add_u32(w, "llama.block_count", 1);
    gguf_writer_add_u32(w, "llama.feed_forward_length", 128);
    gguf_writer_add_u32(w, "llama.attention.head_count", 4);
    gguf_writer_add_u32(w, "llama.attention.head_count_kv", 3);
    gguf_writer_add_u32(w, "llama.context_length", 64);
    gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    assert_int_equal(load_bytes(w, &err), ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not a multiple of head_count_kv"));
    gguf_writer_free(w);

    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    gguf_writer_add_str(w, "general.architecture", "qwen3");
    gguf_writer_add_u32(w, "qwen3.embedding_length", 64);
    gguf_writer_add_u32(w, "qwen3.block_count", 1);
    gguf_writer_add_u32(w, "qwen3.feed_forward_length", 128);
    gguf_writer_add_u32(w, "qwen3.attention.head_count", 4);
    gguf_writer_add_u32(w, "qwen3.context_length", 64);
    gguf_writer_add_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-5f);
    assert_int_equal(load_bytes(w, &err), ERR_FORMAT);
    assert_string_equal(err.msg, "missing tensor 'token_embd.weight'");
    float emb[64 * 8] = {0};
    int64_t ne[2] = {64, 8}, ne_bad[2] = {32, 8};
    gguf_writer_add_tensor(w, "token_embd.weight", QUANT_F32, 2, ne, emb, sizeof emb);
    gguf_writer_add_tensor(w, "output_norm.weight", QUANT_F32, 1, ne, emb, 256);
    gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", QUANT_F32, 1, ne, emb, 256);
    gguf_writer_add_tensor(w, "blk.0.ffn_norm.weight", QUANT_F32, 1, ne, emb, 256);
    gguf_writer_add_tensor(w, "blk.0.attn_q.weight", QUANT_F32, 2, ne_bad, emb, 32 * 8 * 4);
    assert_int_equal(load_bytes(w, &err), ERR_FORMAT);
    assert_string_equal(err.msg,
                        "tensor 'blk.0.attn_q.weight': shape [32, 8, 1, 1], expected [64, 64]");
    gguf_writer_free(w);
    assert_int_equal(engine_model_load("/nonexistent.gguf", &(struct engine_model *){NULL}, &err),
                     ERR_IO);
}

static void test_load_alloc_failures(void **state)
{
    (void)state;
    struct synth_params p = small_params("qwen3", "f16"); // f16 norms are converted copies
    char path[64];
    synth_file(&p, path, sizeof path);
    int64_t live = mem_live_count();
    bool done = false;
    for (int64_t n = 0; n < 500 && !done; n++) {
        struct engine_model *m = NULL;
        struct errmsg err;
        mem_fail_after(n);
        int rc = engine_model_load(path, &m, &err);
        struct engine_seq *s = NULL;
        if (rc == ERR_OK) rc = engine_seq_new(m, 16, &s);
        mem_fail_after(-1);
        if (rc == ERR_OK)
            done = true;
        else
            assert_int_equal(rc, ERR_NOMEM);
        engine_seq_free(s);
        engine_model_free(m);
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(done);
    unlink(path);
}

/* Opens the writer's bytes as a reader; caller frees both with gguf_close() and mem_free(). */
static struct gguf *synth_open(const struct synth_params *p, void **bytes)
{
    struct gguf_writer *w;
    struct errmsg err = {{0}};
    if (synth_build(p, &w, &err) != ERR_OK) fail_msg("synth: %s", err.msg);
    size_t len;
    assert_int_equal(gguf_writer_to_memory(w, bytes, &len), ERR_OK);
    gguf_writer_free(w);
    struct gguf *g;
    assert_int_equal(gguf_open_memory(*bytes, len, &g, &err), ERR_OK);
    return g;
}

static void test_synth_layouts(void **state)
{
    (void)state;
    // The Q4_K_M mix on rows of 256: Q6_K on tied embeddings and on attn_v / ffn_down of the
    // "more bits" layers, Q4_K elsewhere; on rows of 96 the K types fall back.
    struct synth_params p = small_params("qwen2", "q4_k_m");
    p.tied = true;
    p.n_layer = 8;
    void *bytes;
    struct gguf *g = synth_open(&p, &bytes);
    assert_null(gguf_find_tensor(g, "output.weight"));
    assert_int_equal(gguf_find_tensor(g, "token_embd.weight")->type, QUANT_Q6_K);
    assert_int_equal(gguf_find_tensor(g, "blk.0.attn_v.weight")->type, QUANT_Q6_K);
    assert_int_equal(gguf_find_tensor(g, "blk.1.attn_v.weight")->type, QUANT_Q4_K);
    assert_int_equal(gguf_find_tensor(g, "blk.3.ffn_down.weight")->type, QUANT_Q6_K);
    assert_int_equal(gguf_find_tensor(g, "blk.7.ffn_down.weight")->type, QUANT_Q6_K);
    assert_int_equal(gguf_find_tensor(g, "blk.2.attn_q.weight")->type, QUANT_Q4_K);
    assert_non_null(gguf_find_tensor(g, "blk.2.attn_q.bias"));
    struct str tmpl;
    assert_int_equal(gguf_get_str(g, "tokenizer.chat_template", &tmpl), ERR_OK);
    assert_true(str_has_prefix(tmpl, "{% for message in messages %}"));
    gguf_close(g);
    mem_free(bytes);

    p = small_params("qwen3", "q4_k_m");
    p.n_embd = 96;
    p.n_head = 2;
    p.n_head_kv = 1;
    g = synth_open(&p, &bytes);
    assert_int_equal(gguf_find_tensor(g, "output.weight")->type, QUANT_Q8_0); // Q6_K fallback
    assert_int_equal(gguf_find_tensor(g, "blk.0.attn_q.weight")->type, QUANT_Q5_0);
    assert_int_equal(gguf_find_tensor(g, "blk.0.ffn_down.weight")->type, QUANT_Q4_K); // 512
    assert_int_equal(gguf_find_tensor(g, "blk.1.ffn_down.weight")->type, QUANT_Q6_K);
    assert_non_null(gguf_find_tensor(g, "blk.1.attn_k_norm.weight"));
    gguf_close(g);
    mem_free(bytes);

    p = small_params("bert", "f16");
    p.n_vocab = 100;
    g = synth_open(&p, &bytes);
    static const char *const names[] = {
        "token_embd.weight",    "token_types.weight",
        "position_embd.weight", "token_embd_norm.weight",
        "blk.1.attn_q.bias",    "blk.1.attn_output_norm.weight",
        "blk.1.ffn_down.bias",  "blk.1.layer_output_norm.bias",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_non_null(gguf_find_tensor(g, names[i]));
    struct str model;
    assert_int_equal(gguf_get_str(g, "tokenizer.ggml.model", &model), ERR_OK);
    assert_true(str_eq_cstr(model, "bert"));
    gguf_close(g);
    mem_free(bytes);
    struct gguf_writer *w;
    struct errmsg err;
    p.arch = "mamba";
    assert_int_equal(synth_build(&p, &w, &err), ERR_INVALID);
    p = small_params("llama", "q9_9");
    assert_int_equal(synth_build(&p, &w, &err), ERR_INVALID);
}

static void test_synth_vocab_from(void **state)
{
    (void)state;
    const char *src = "../shared/models/llama/stories260K.gguf";
    if (access(src, R_OK) != 0) {
        printf("skip: %s absent\n", src);
        skip();
    }
    struct gguf *from;
    struct errmsg err;
    assert_int_equal(gguf_open(src, &from, &err), ERR_OK);
    struct synth_params p = small_params("llama", "q8_0");
    p.vocab_from = from;
    p.n_vocab = 0;
    void *bytes;
    struct gguf *g = synth_open(&p, &bytes);
    int64_t n_keys = 0;
    for (int64_t i = 0; i < gguf_key_count(from); i++) {
        struct str name = gguf_key_name(from, i);
        if (!str_has_prefix(name, "tokenizer.")) continue;
        n_keys++;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)name.len, name.ptr);
        int64_t j = gguf_find_key(g, key);
        assert_true(j >= 0);
        assert_int_equal(gguf_key_type(g, j), gguf_key_type(from, i));
    }
    assert_true(n_keys >= 5);
    assert_int_equal(gguf_find_tensor(g, "token_embd.weight")->ne[1], 512);
    struct str tok;
    assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 300, &tok), ERR_OK);
    struct str want;
    assert_int_equal(gguf_get_arr_str(from, "tokenizer.ggml.tokens", 300, &want), ERR_OK);
    assert_true(tok.len == want.len && memcmp(tok.ptr, want.ptr, tok.len) == 0);
    gguf_close(g);
    mem_free(bytes);
    gguf_close(from);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_all_types),
        cmocka_unit_test(test_batch_equals_single),
        cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_truncate_reuses_prefix),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_tied_embeddings),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_alloc_failures),
        cmocka_unit_test(test_synth_layouts),
        cmocka_unit_test(test_synth_vocab_from),
        cmocka_unit_test(test_hidden_reference),
        cmocka_unit_test(test_hidden_batch_independent),
        cmocka_unit_test(test_hidden_errors),
        cmocka_unit_test(test_input_embeddings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
