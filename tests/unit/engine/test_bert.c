/* engine/bert: the tiny_bert golden file (token ids and embeddings from an independent
 * implementation), synthetic BERTs written with the GGUF writer against a plain float
 * reference forward pass in this file (mean, cls and last pooling; F32 and quantized
 * weights), batching, argument errors, bad files and an allocation-failure loop on load. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/bert/bert.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"
#include "engine/threadpool.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "util/mem.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TINY_BERT "../shared/models/bert/tiny_bert.gguf"
#define TINY_JSON "../shared/models/bert/tiny_bert.expected.json"
#define BGE_VOCAB "../shared/models/vocab/ggml-vocab-bert-bge.gguf"

/* ---- synthetic models ---- */

struct synth {
    int n_embd, n_head, n_ff, n_layer, n_pos;
    uint32_t wtype;          // type of the layer matrices (F32, F16, Q8_0)
    uint32_t down_type;      // type of ffn_down
    uint32_t vec_type;       // type of the norm weights and biases
    int pooling;             // written when >= 0
    bool has_types;          // token_types tensor
    bool drop_bias;          // leave the optional biases out
    const char *skip_tensor; // leave this tensor out (error tests)
    bool bge;                // copy the bge vocabulary, else the built-in one
    bool nomic;              // nomic-bert: fused QKV, RoPE (no position_embd), SwiGLU, no biases
    int head;                // rank head: 0 none, 1 cls + cls.output, 2 cls only, 3 cls.output only
    uint32_t head_type;      // type of the head matrices
    int n_labels;      // > 0: bert.classifier.output_labels with this many labels (else 1 row)
    int head_bad_rows; // > 0: cls.output gets this many rows instead (shape errors)
};

static const char *const k_builtin[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]",  "the", "cat", "sat", "on",    "mat",   "##s", ".",
    "a",     "dog",   "run",   "##ning", "big", "red", "sun", "hello", "world", ",",
};
#define N_BUILTIN ((int)(sizeof k_builtin / sizeof k_builtin[0]))

static uint64_t rng_state;

static float rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static void add_tensor(struct gguf_writer *w, const struct synth *s, const char *name,
                       uint32_t type, int64_t n0, int64_t n1, float scale, float offset)
{
    if (s->skip_tensor && strcmp(s->skip_tensor, name) == 0) return;
    const size_t n = (size_t)(n0 * n1);
    float *f = mem_alloc(n * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = offset + scale * rnd();
    size_t row = 0;
    assert_int_equal(quant_row_bytes(type, n0, &row), ERR_OK);
    void *data = mem_alloc(row * (size_t)n1);
    assert_non_null(data);
    for (int64_t r = 0; r < n1; r++)
        quant_traits_of(type)->from_float(f + r * n0, (uint8_t *)data + (size_t)r * row, n0);
    const int64_t ne[2] = {n0, n1};
    assert_int_equal(
        gguf_writer_add_tensor(w, name, type, n1 > 1 ? 2 : 1, ne, data, row * (size_t)n1), ERR_OK);
    mem_free(data);
    mem_free(f);
}

/* Tokenizer keys: the bge vocabulary copied from its file, or the built-in one. Returns the
 * vocabulary size. */
static int add_vocab(struct gguf_writer *w, bool bge)
{
    assert_int_equal(gguf_writer_add_str(w, "tokenizer.ggml.model", "bert"), ERR_OK);
    assert_int_equal(gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", 2), ERR_OK);
    if (!bge) {
        struct str toks[N_BUILTIN];
        for (int i = 0; i < N_BUILTIN; i++)
            toks[i] = (struct str){k_builtin[i], strlen(k_builtin[i])};
        assert_int_equal(gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, N_BUILTIN),
                         ERR_OK);
        assert_int_equal(gguf_writer_add_u32(w, "tokenizer.ggml.cls_token_id", 2), ERR_OK);
        assert_int_equal(gguf_writer_add_u32(w, "tokenizer.ggml.seperator_token_id", 3), ERR_OK);
        assert_int_equal(gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 1), ERR_OK);
        assert_int_equal(gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", 0), ERR_OK);
        return N_BUILTIN;
    }
    struct gguf *g;
    struct errmsg err;
    assert_int_equal(gguf_open(BGE_VOCAB, &g, &err), ERR_OK);
    enum gguf_value_type et;
    int64_t n;
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), ERR_OK);
    struct str *toks = mem_alloc((size_t)n * sizeof *toks);
    assert_non_null(toks);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &toks[i]), ERR_OK);
    assert_int_equal(gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, n), ERR_OK);
    const void *types;
    int64_t n_types;
    if (gguf_get_arr_data(g, "tokenizer.ggml.token_type", &et, &n_types, &types) == ERR_OK)
        assert_int_equal(gguf_writer_add_arr(w, "tokenizer.ggml.token_type", et, types, n_types),
                         ERR_OK);
    mem_free(toks);
    gguf_close(g);
    return (int)n;
}

static void add_norms(struct gguf_writer *w, const struct synth *s, int il)
{
    static const char *const norms[] = {"attn_output_norm", "layer_output_norm"};
    char name[64];
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "blk.%d.%s.weight", il, norms[k]);
        add_tensor(w, s, name, s->vec_type, s->n_embd, 1, 0.2f, 1.0f);
        snprintf(name, sizeof name, "blk.%d.%s.bias", il, norms[k]);
        add_tensor(w, s, name, s->vec_type, s->n_embd, 1, 0.1f, 0.0f);
    }
}

/* nomic-bert layer: fused QKV, output, SwiGLU FFN, no biases. */
static void add_nomic_layer(struct gguf_writer *w, const struct synth *s, int il)
{
    const int64_t d = s->n_embd, f = s->n_ff;
    char name[64];
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
    add_tensor(w, s, name, s->wtype, d, 3 * d, 0.4f, 0.0f);
    snprintf(name, sizeof name, "blk.%d.attn_output.weight", il);
    add_tensor(w, s, name, s->wtype, d, d, 0.4f, 0.0f);
    snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", il);
    add_tensor(w, s, name, s->wtype, d, f, 0.4f, 0.0f);
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il);
    add_tensor(w, s, name, s->wtype, d, f, 0.4f, 0.0f);
    snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);
    add_tensor(w, s, name, s->down_type, f, d, 0.3f, 0.0f);
    add_norms(w, s, il);
}

/* The reranker's classification head and its label names, as s->head says. */
static void add_head(struct gguf_writer *w, const struct synth *s)
{
    const int64_t d = s->n_embd;
    const int64_t n_out = s->head_bad_rows > 0 ? s->head_bad_rows
                          : s->n_labels > 0    ? s->n_labels
                                               : 1;
    if (s->n_labels > 0) {
        struct str labels[8];
        for (int i = 0; i < s->n_labels && i < 8; i++)
            labels[i] = (struct str){"LABEL", 5};
        assert_int_equal(
            gguf_writer_add_arr_str(w, "bert.classifier.output_labels", labels, s->n_labels), 0);
    }
    if (s->head == 1 || s->head == 2) {
        add_tensor(w, s, "cls.weight", s->head_type, d, d, 0.4f, 0.0f);
        add_tensor(w, s, "cls.bias", QUANT_F32, d, 1, 0.2f, 0.0f);
    }
    if (s->head == 1 || s->head == 3) {
        add_tensor(w, s, "cls.output.weight", s->head_type, d, n_out, 0.5f, 0.0f);
        add_tensor(w, s, "cls.output.bias", QUANT_F32, n_out, 1, 0.3f, 0.1f);
    }
}

static void write_model(const struct synth *s, const char *path)
{
    struct gguf_writer *w;
    char name[64];
    rng_state = 0x9e3779b97f4a7c15ull;
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    const char *arch = s->nomic ? "nomic-bert" : "bert";
    assert_int_equal(gguf_writer_add_str(w, "general.architecture", arch), ERR_OK);
    const struct {
        const char *key;
        int v;
    } hp[] = {{"embedding_length", s->n_embd},  {"block_count", s->n_layer},
              {"feed_forward_length", s->n_ff}, {"attention.head_count", s->n_head},
              {"context_length", s->n_pos},     {"pooling_type", s->pooling}};
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        snprintf(name, sizeof name, "%s.%s", arch, hp[i].key);
        if (hp[i].v >= 0) assert_int_equal(gguf_writer_add_u32(w, name, (uint32_t)hp[i].v), 0);
    }
    snprintf(name, sizeof name, "%s.attention.layer_norm_epsilon", arch);
    assert_int_equal(gguf_writer_add_f32(w, name, 1e-12f), 0);
    snprintf(name, sizeof name, "%s.attention.causal", arch);
    assert_int_equal(gguf_writer_add_bool(w, name, false), 0);
    if (s->nomic) assert_int_equal(gguf_writer_add_f32(w, "nomic-bert.rope.freq_base", 1000.0f), 0);
    const int n_vocab = add_vocab(w, s->bge);
    const int64_t d = s->n_embd, f = s->n_ff;
    add_tensor(w, s, "token_embd.weight", QUANT_F16, d, n_vocab, 0.5f, 0.0f);
    if (!s->nomic) add_tensor(w, s, "position_embd.weight", QUANT_F32, d, s->n_pos, 0.5f, 0.0f);
    if (s->has_types) add_tensor(w, s, "token_types.weight", QUANT_F32, d, 2, 0.5f, 0.0f);
    add_tensor(w, s, "token_embd_norm.weight", s->vec_type, d, 1, 0.2f, 1.0f);
    add_tensor(w, s, "token_embd_norm.bias", s->vec_type, d, 1, 0.1f, 0.0f);
    static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    for (int il = 0; il < s->n_layer; il++) {
        if (s->nomic) {
            add_nomic_layer(w, s, il);
            continue;
        }
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, mats[k]);
            add_tensor(w, s, name, s->wtype, d, d, 0.4f, 0.0f);
            snprintf(name, sizeof name, "blk.%d.%s.bias", il, mats[k]);
            if (!s->drop_bias) add_tensor(w, s, name, s->vec_type, d, 1, 0.1f, 0.0f);
        }
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il);
        add_tensor(w, s, name, s->wtype, d, f, 0.4f, 0.0f);
        snprintf(name, sizeof name, "blk.%d.ffn_up.bias", il);
        if (!s->drop_bias) add_tensor(w, s, name, s->vec_type, f, 1, 0.1f, 0.0f);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);
        add_tensor(w, s, name, s->down_type, f, d, 0.3f, 0.0f);
        snprintf(name, sizeof name, "blk.%d.ffn_down.bias", il);
        if (!s->drop_bias) add_tensor(w, s, name, s->vec_type, d, 1, 0.1f, 0.0f);
        static const char *const norms[] = {"attn_output_norm", "layer_output_norm"};
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, norms[k]);
            add_tensor(w, s, name, s->vec_type, d, 1, 0.2f, 1.0f);
            snprintf(name, sizeof name, "blk.%d.%s.bias", il, norms[k]);
            add_tensor(w, s, name, s->vec_type, d, 1, 0.1f, 0.0f);
        }
    }
    add_head(w, s);
    struct errmsg err;
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
}

static struct synth synth_default(void)
{
    return (struct synth){.n_embd = 32,
                          .n_head = 4,
                          .n_ff = 64,
                          .n_layer = 2,
                          .n_pos = 48,
                          .wtype = QUANT_F32,
                          .down_type = QUANT_F32,
                          .vec_type = QUANT_F32,
                          .pooling = -1,
                          .has_types = true};
}

static void tmp_path(char *buf, size_t cap, const char *tag)
{
    snprintf(buf, cap, "/tmp/llamapi_test_bert_%d_%s.gguf", (int)getpid(), tag);
}

/* ---- the reference forward pass: plain loops over dequantized weights ---- */

struct ref {
    const struct gguf *g;
    int d, n_head, n_ff, n_layer;
    float eps;
    bool nomic;      // fused QKV, RoPE, SwiGLU
    float rope_base; // nomic: rotation base, every head dim rotated
};

/* The tensor as floats (caller frees), or NULL when absent. */
static float *ref_tensor(const struct ref *r, const char *name, int layer)
{
    char full[96];
    if (layer >= 0)
        snprintf(full, sizeof full, "blk.%d.%s", layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    const struct gguf_tensor *t = gguf_find_tensor(r->g, full);
    if (!t) return NULL;
    const int64_t n = t->ne[0] * t->ne[1];
    float *v = mem_alloc((size_t)n * sizeof *v);
    assert_non_null(v);
    quant_traits_of(t->type)->to_float(t->data, v, n);
    return v;
}

static void ref_layernorm(float *x, const float *w, const float *b, int n, float eps)
{
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= n;
    for (int i = 0; i < n; i++)
        x[i] = (float)((x[i] - mean) / sqrt(var + eps) * w[i] + b[i]);
}

/* y[t] = x[t] W^T + b for n tokens; W (n_out, n_in). */
static void ref_linear(const float *x, int n, const float *w, const float *b, int n_in, int n_out,
                       float *y)
{
    for (int t = 0; t < n; t++)
        for (int o = 0; o < n_out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < n_in; i++)
                s += (double)x[t * n_in + i] * w[o * n_in + i];
            y[t * n_out + o] = (float)s;
        }
}

static float round_half(float x)
{
    return ops_f16_to_f32(ops_f32_to_f16(x));
}

/* ggml's GELU: the tanh approximation evaluated on the input rounded to half, rounded to
 * half again. */
static float ref_gelu(float x)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = round_half(x);
    return round_half(0.5f * h * (1.0f + tanhf(0.7978845608f * h * (1.0f + 0.044715f * h * h))));
}

static void ref_attention(const struct ref *r, const float *q, const float *k, const float *v,
                          int n, float *out)
{
    const int d = r->d, hd = d / r->n_head;
    double *p = mem_alloc((size_t)n * sizeof *p);
    assert_non_null(p);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < r->n_head; h++) {
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j < n; j++) {
                double s = 0.0;
                for (int i = 0; i < hd; i++) // keys and values are half precision
                    s += (double)q[t * d + h * hd + i] * round_half(k[j * d + h * hd + i]);
                p[j] = s / sqrt((double)hd);
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int j = 0; j < n; j++)
                sum += (p[j] = exp(p[j] - mx));
            for (int i = 0; i < hd; i++) {
                double a = 0.0;
                for (int j = 0; j < n; j++)
                    a += p[j] * round_half(v[j * d + h * hd + i]);
                out[t * d + h * hd + i] = (float)(a / sum);
            }
        }
    mem_free(p);
}

/* NeoX rotation of every head of n rows (pairs i, i + hd/2), angles in double. */
static void ref_rope(const struct ref *r, float *x, int n)
{
    const int hd = r->d / r->n_head, half = hd / 2;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < r->n_head; h++) {
            float *y = x + t * r->d + h * hd;
            for (int i = 0; i < half; i++) {
                const double a = t * pow(r->rope_base, -2.0 * i / hd);
                const double x0 = y[i], x1 = y[i + half];
                y[i] = (float)(x0 * cos(a) - x1 * sin(a));
                y[i + half] = (float)(x0 * sin(a) + x1 * cos(a));
            }
        }
}

/* The fused projection split into q, k, v, with RoPE on q and k. */
static void ref_nomic_qkv(const struct ref *r, int il, const float *x, int n, float *q, float *k,
                          float *v)
{
    const int d = r->d;
    float *w = ref_tensor(r, "attn_qkv.weight", il);
    float *qkv = mem_alloc(sizeof(float) * (size_t)(n * 3 * d));
    ref_linear(x, n, w, NULL, d, 3 * d, qkv);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) {
            q[t * d + i] = qkv[t * 3 * d + i];
            k[t * d + i] = qkv[t * 3 * d + d + i];
            v[t * d + i] = qkv[t * 3 * d + 2 * d + i];
        }
    ref_rope(r, q, n);
    ref_rope(r, k, n);
    mem_free(qkv);
    mem_free(w);
}

/* h holds x W_up^T; becomes silu(x W_gate^T) * h. */
static void ref_swiglu(const struct ref *r, int il, const float *x, int n, float *h)
{
    float *w = ref_tensor(r, "ffn_gate.weight", il);
    float *g = mem_alloc(sizeof(float) * (size_t)(n * r->n_ff));
    ref_linear(x, n, w, NULL, r->d, r->n_ff, g);
    for (int i = 0; i < n * r->n_ff; i++)
        h[i] = (float)(g[i] / (1.0 + exp(-(double)g[i])) * h[i]);
    mem_free(g);
    mem_free(w);
}

static void ref_layer(const struct ref *r, int il, float *x, int n)
{
    const int d = r->d, f = r->n_ff;
    float *w[6], *b[6], *nw[2], *nb[2];
    static const char *const ws[] = {"attn_q",      "attn_k", "attn_v",
                                     "attn_output", "ffn_up", "ffn_down"};
    char name[64];
    for (int k = 0; k < 6; k++) {
        snprintf(name, sizeof name, "%s.weight", ws[k]);
        w[k] = ref_tensor(r, name, il);
        snprintf(name, sizeof name, "%s.bias", ws[k]);
        b[k] = ref_tensor(r, name, il);
    }
    nw[0] = ref_tensor(r, "attn_output_norm.weight", il);
    nb[0] = ref_tensor(r, "attn_output_norm.bias", il);
    nw[1] = ref_tensor(r, "layer_output_norm.weight", il);
    nb[1] = ref_tensor(r, "layer_output_norm.bias", il);
    float *q = mem_alloc(sizeof(float) * (size_t)(n * d)),
          *k = mem_alloc(sizeof(float) * (size_t)(n * d));
    float *v = mem_alloc(sizeof(float) * (size_t)(n * d)),
          *a = mem_alloc(sizeof(float) * (size_t)(n * d));
    float *o = mem_alloc(sizeof(float) * (size_t)(n * d)),
          *h = mem_alloc(sizeof(float) * (size_t)(n * f));
    if (r->nomic) {
        ref_nomic_qkv(r, il, x, n, q, k, v);
    } else {
        ref_linear(x, n, w[0], b[0], d, d, q);
        ref_linear(x, n, w[1], b[1], d, d, k);
        ref_linear(x, n, w[2], b[2], d, d, v);
    }
    ref_attention(r, q, k, v, n, a);
    ref_linear(a, n, w[3], b[3], d, d, o);
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < d; i++)
            x[t * d + i] += o[t * d + i];
        ref_layernorm(x + t * d, nw[0], nb[0], d, r->eps);
    }
    ref_linear(x, n, w[4], b[4], d, f, h);
    if (r->nomic)
        ref_swiglu(r, il, x, n, h);
    else
        for (int i = 0; i < n * f; i++)
            h[i] = ref_gelu(h[i]);
    ref_linear(h, n, w[5], b[5], f, d, o);
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < d; i++)
            x[t * d + i] += o[t * d + i];
        ref_layernorm(x + t * d, nw[1], nb[1], d, r->eps);
    }
    for (int kk = 0; kk < 6; kk++) {
        mem_free(w[kk]);
        mem_free(b[kk]);
    }
    for (int kk = 0; kk < 2; kk++) {
        mem_free(nw[kk]);
        mem_free(nb[kk]);
    }
    float *bufs[] = {q, k, v, a, o, h};
    for (int kk = 0; kk < 6; kk++)
        mem_free(bufs[kk]);
}

/* The classification head on the first token's state x (d floats): tanh(cls x + b) when the
 * file has cls, then cls.output x + b when it has that; the first n_out values into out. */
static void ref_head(const struct ref *r, const float *x, float *out)
{
    float *cw = ref_tensor(r, "cls.weight", -1), *cb = ref_tensor(r, "cls.bias", -1);
    float *ow = ref_tensor(r, "cls.output.weight", -1);
    float *ob = ref_tensor(r, "cls.output.bias", -1);
    const struct gguf_tensor *t = gguf_find_tensor(r->g, "cls.output.weight");
    const int n_out = t ? (int)t->ne[1] : 1;
    float h[64], y[64];
    memcpy(h, x, sizeof(float) * (size_t)r->d);
    if (cw) {
        ref_linear(x, 1, cw, cb, r->d, r->d, h);
        for (int i = 0; i < r->d; i++)
            h[i] = tanhf(h[i]);
    }
    if (ow) {
        ref_linear(h, 1, ow, ob, r->d, n_out, y);
        memcpy(h, y, sizeof(float) * (size_t)n_out);
    }
    memcpy(out, h, sizeof(float) * (size_t)n_out);
    float *all[] = {cw, cb, ow, ob};
    for (int i = 0; i < 4; i++)
        mem_free(all[i]);
}

/* Mean, cls or last pooling of n hidden states x (n, d), L2-normalized, into out. */
static void ref_pool(const float *x, int n, int d, int pooling, float *out)
{
    double norm = 0.0;
    for (int i = 0; i < d; i++) {
        double s = 0.0;
        if (pooling == ENGINE_POOLING_MEAN)
            for (int t = 0; t < n; t++)
                s += x[t * d + i];
        s = pooling == ENGINE_POOLING_MEAN  ? s / n
            : pooling == ENGINE_POOLING_CLS ? x[i]
                                            : x[(n - 1) * d + i];
        out[i] = (float)s;
        norm += s * s;
    }
    for (int i = 0; i < d; i++)
        out[i] = (float)(out[i] / sqrt(norm));
}

/* One input's pooled, normalized embedding (d floats) from the file at path; with rank pooling
 * the head's raw scores. */
static void ref_embed(const char *path, const int32_t *ids, int n, int pooling, float *out)
{
    struct gguf *g;
    struct errmsg err;
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    int64_t v;
    struct ref r = {.g = g, .eps = 1e-12f, .rope_base = 10000.0f};
    struct str arch;
    char key[96];
    assert_int_equal(gguf_get_str(g, "general.architecture", &arch), ERR_OK);
    r.nomic = str_eq_cstr(arch, "nomic-bert");
    const char *a = r.nomic ? "nomic-bert" : "bert";
    static const char *const keys[4] = {"embedding_length", "attention.head_count",
                                        "feed_forward_length", "block_count"};
    int *dst[4] = {&r.d, &r.n_head, &r.n_ff, &r.n_layer};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%s.%s", a, keys[i]);
        assert_int_equal(gguf_get_i64(g, key, &v), ERR_OK);
        *dst[i] = (int)v;
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_epsilon", a);
    (void)gguf_get_f32(g, key, &r.eps);
    (void)gguf_get_f32(g, "nomic-bert.rope.freq_base", &r.rope_base);
    const int d = r.d;
    float *tok = ref_tensor(&r, "token_embd.weight", -1);
    float *pos = ref_tensor(&r, "position_embd.weight", -1);
    float *typ = ref_tensor(&r, "token_types.weight", -1);
    float *nw = ref_tensor(&r, "token_embd_norm.weight", -1);
    float *nb = ref_tensor(&r, "token_embd_norm.bias", -1);
    float *x = mem_alloc(sizeof(float) * (size_t)(n * d));
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < d; i++)
            x[t * d + i] =
                tok[ids[t] * d + i] + (typ ? typ[i] : 0.0f) + (pos ? pos[t * d + i] : 0.0f);
        ref_layernorm(x + t * d, nw, nb, d, r.eps);
    }
    for (int il = 0; il < r.n_layer; il++)
        ref_layer(&r, il, x, n);
    if (pooling == ENGINE_POOLING_RANK)
        ref_head(&r, x, out);
    else
        ref_pool(x, n, d, pooling, out);
    float *all[] = {tok, pos, typ, nw, nb, x};
    for (int i = 0; i < 6; i++)
        mem_free(all[i]);
    gguf_close(g);
}

static double cosine(const float *a, const float *b, int n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

static double max_abs_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fabs((double)a[i] - b[i]) > m ? fabs((double)a[i] - b[i]) : m;
    return m;
}

/* ---- tests ---- */

static struct tokenizer *tokenizer_of(const char *path)
{
    struct tokenizer *t = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = vocab_tokenizer_from_file(path, &t, &err);
    if (rc != ERR_OK) fail_msg("tokenizer of %s: %s", path, err.msg);
    return t;
}

static void encode(const struct tokenizer *t, const char *text, struct tok_ids *ids)
{
    tok_ids_init(ids);
    assert_int_equal(tok_encode(t, (struct str){text, strlen(text)}, true, false, ids), ERR_OK);
}

static void test_tiny_bert_golden(void **state)
{
    (void)state;
    if (access(TINY_BERT, R_OK) != 0 || access(TINY_JSON, R_OK) != 0) {
        printf("skip: %s absent\n", TINY_BERT);
        skip();
    }
    json_error_t jerr;
    json_t *doc = json_load_file(TINY_JSON, 0, &jerr);
    assert_non_null(doc);
    struct tokenizer *tok = tokenizer_of(TINY_BERT);
    struct engine_encoder *e;
    struct threadpool *tp;
    struct errmsg err;
    assert_int_equal(engine_encoder_load(TINY_BERT, NULL, &e, &err), ERR_OK);
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    const struct engine_encoder_info *in = engine_encoder_info(e);
    assert_int_equal(in->n_embd, 32);
    assert_int_equal(in->pooling, ENGINE_POOLING_MEAN);
    json_t *cases = json_object_get(doc, "cases"), *c;
    size_t i;
    assert_true(json_array_size(cases) >= 5);
    json_array_foreach(cases, i, c)
    {
        struct tok_ids ids;
        encode(tok, json_string_value(json_object_get(c, "text")), &ids);
        json_t *want_ids = json_object_get(c, "token_ids"), *want = json_object_get(c, "embedding");
        assert_int_equal(ids.n_ids, json_array_size(want_ids));
        for (size_t k = 0; k < ids.n_ids; k++)
            assert_int_equal(ids.ids[k], json_integer_value(json_array_get(want_ids, k)));
        float got[32], ref[32];
        const int32_t *p = ids.ids;
        const int n = (int)ids.n_ids;
        assert_int_equal(engine_encoder_embed(e, tp, &p, &n, 1, got, &err), ERR_OK);
        for (int k = 0; k < 32; k++)
            ref[k] = (float)json_number_value(json_array_get(want, (size_t)k));
        double cs = cosine(got, ref, 32);
        printf("tiny_bert case %zu: cosine %.7f, max diff %.2e\n", i, cs,
               max_abs_diff(got, ref, 32));
        assert_true(cs >= 0.999);
        tok_ids_deinit(&ids);
    }
    threadpool_free(tp);
    engine_encoder_free(e);
    tok_free(tok);
    json_decref(doc);
}

static const char *const k_sentences[] = {
    "the cat sat on the mat.",
    "hello world, a big red sun",
    "a dog running",
    "cats",
    "the big dog sat on a red mat, hello sun.",
};
#define N_SENT 5

/* Embeds every sentence alone and compares with the reference. */
static void check_against_ref(const struct synth *s, const char *tag, enum engine_pooling pool,
                              double min_cos, double max_diff)
{
    char path[128];
    tmp_path(path, sizeof path, tag);
    write_model(s, path);
    struct tokenizer *tok = tokenizer_of(path);
    struct engine_encoder_params p = {.pooling = pool};
    struct engine_encoder *e;
    struct threadpool *tp;
    struct errmsg err;
    errmsg_clear(&err);
    if (engine_encoder_load(path, &p, &e, &err) != ERR_OK) fail_msg("load: %s", err.msg);
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    const int d = engine_encoder_info(e)->n_out;
    double worst_cos = 1.0, worst_diff = 0.0;
    const int eff = pool == ENGINE_POOLING_UNSPECIFIED ? (s->pooling >= 0 ? s->pooling : 1) : pool;
    assert_int_equal(engine_encoder_info(e)->pooling, eff);
    for (int i = 0; i < N_SENT; i++) {
        struct tok_ids ids;
        encode(tok, k_sentences[i], &ids);
        assert_true(ids.n_ids >= 3);
        float got[64], ref[64];
        const int32_t *ptr = ids.ids;
        const int n = (int)ids.n_ids;
        assert_int_equal(engine_encoder_embed(e, tp, &ptr, &n, 1, got, &err), ERR_OK);
        ref_embed(path, ids.ids, n, eff, ref);
        double cs = cosine(got, ref, d), md = max_abs_diff(got, ref, d);
        worst_cos = cs < worst_cos ? cs : worst_cos;
        worst_diff = md > worst_diff ? md : worst_diff;
        if (cs < min_cos || md > max_diff)
            fail_msg("%s sentence %d: cosine %.7f, max diff %.2e", tag, i, cs, md);
        tok_ids_deinit(&ids);
    }
    printf("%s: worst cosine %.7f, max diff %.2e\n", tag, worst_cos, worst_diff);
    threadpool_free(tp);
    engine_encoder_free(e);
    tok_free(tok);
    unlink(path);
}

static bool have_bge(void)
{
    if (access(BGE_VOCAB, R_OK) == 0) return true;
    printf("note: %s absent; using the built-in vocabulary\n", BGE_VOCAB);
    return false;
}

static void test_synthetic_f32(void **state)
{
    (void)state;
    struct synth s = synth_default();
    s.bge = have_bge();
    check_against_ref(&s, "f32", ENGINE_POOLING_UNSPECIFIED, 0.999999, 5e-4);
}

static void test_synthetic_pooling(void **state)
{
    (void)state;
    struct synth s = synth_default();
    s.pooling = ENGINE_POOLING_CLS;
    s.has_types = false;
    check_against_ref(&s, "cls", ENGINE_POOLING_UNSPECIFIED, 0.999999, 5e-4);
    s.pooling = ENGINE_POOLING_MEAN;
    check_against_ref(&s, "last", ENGINE_POOLING_LAST, 0.999999, 5e-4);
}

static void test_synthetic_nomic(void **state)
{
    (void)state;
    struct synth s = synth_default();
    s.nomic = true;
    s.drop_bias = true;
    check_against_ref(&s, "nomic", ENGINE_POOLING_UNSPECIFIED, 0.999999, 5e-4);
    s.skip_tensor = "blk.1.ffn_gate.weight";
    char path[128];
    tmp_path(path, sizeof path, "nomic_bad");
    write_model(&s, path);
    struct engine_encoder *e = NULL;
    struct errmsg err;
    assert_int_equal(engine_encoder_load(path, NULL, &e, &err), ERR_FORMAT);
    assert_non_null(strstr(err.msg, "blk.1.ffn_gate.weight"));
    unlink(path);
}

/* Rank pooling: the head's scores against the reference, for every head layout. */
static void test_rank_head(void **state)
{
    (void)state;
    struct synth s = synth_default();
    s.head = 1;
    s.head_type = QUANT_F32;
    s.pooling = ENGINE_POOLING_RANK;
    check_against_ref(&s, "rank", ENGINE_POOLING_UNSPECIFIED, -1.0, 5e-4);
    s.head = 2; // cls only: the first value of the tanh layer
    check_against_ref(&s, "rank_cls", ENGINE_POOLING_UNSPECIFIED, -1.0, 5e-4);
    s.head = 3; // cls.output only, three labels
    s.n_labels = 3;
    check_against_ref(&s, "rank_out3", ENGINE_POOLING_RANK, 0.999999, 5e-4);
    s.head = 1;
    s.head_type = QUANT_Q8_0;
    s.wtype = QUANT_F16;
    check_against_ref(&s, "rank_q8", ENGINE_POOLING_UNSPECIFIED, 0.999, 3e-2);
    char path[128];
    tmp_path(path, sizeof path, "rank_info");
    write_model(&s, path);
    struct engine_encoder *e;
    struct errmsg err;
    assert_int_equal(engine_encoder_load(path, NULL, &e, &err), ERR_OK);
    assert_int_equal(engine_encoder_info(e)->pooling, ENGINE_POOLING_RANK);
    assert_int_equal(engine_encoder_info(e)->n_cls_out, 3);
    assert_int_equal(engine_encoder_info(e)->n_out, 3);
    engine_encoder_free(e);
    // The same file pooled as embeddings ignores the head.
    struct engine_encoder_params p = {.pooling = ENGINE_POOLING_CLS};
    assert_int_equal(engine_encoder_load(path, &p, &e, &err), ERR_OK);
    assert_int_equal(engine_encoder_info(e)->n_out, 32);
    assert_int_equal(engine_encoder_info(e)->n_cls_out, 0);
    engine_encoder_free(e);
    unlink(path);
}

/* Pooling none: a row per token of every input, unnormalized; their mean, normalized, is the
 * mean-pooled vector, the first row normalized the cls-pooled one, for every input of a batch. */
static void test_pooling_none(void **state)
{
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "none");
    struct synth s = synth_default();
    write_model(&s, path);
    struct tokenizer *tok = tokenizer_of(path);
    struct engine_encoder *none, *mean, *cls;
    struct threadpool *tp;
    struct errmsg err;
    struct engine_encoder_params p = {.pooling = ENGINE_POOLING_NONE};
    assert_int_equal(engine_encoder_load(path, &p, &none, &err), ERR_OK);
    p.pooling = ENGINE_POOLING_MEAN;
    assert_int_equal(engine_encoder_load(path, &p, &mean, &err), ERR_OK);
    p.pooling = ENGINE_POOLING_CLS;
    assert_int_equal(engine_encoder_load(path, &p, &cls, &err), ERR_OK);
    assert_int_equal(engine_encoder_info(none)->pooling, ENGINE_POOLING_NONE);
    assert_int_equal(engine_encoder_info(none)->n_out, 32);
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    struct tok_ids ids[N_SENT];
    const int32_t *ptrs[N_SENT];
    int lens[N_SENT], total = 0;
    for (int i = 0; i < N_SENT; i++) {
        encode(tok, k_sentences[i], &ids[i]);
        ptrs[i] = ids[i].ids;
        lens[i] = (int)ids[i].n_ids;
        total += lens[i];
    }
    float *rows = mem_alloc(sizeof(float) * (size_t)total * 32);
    float pooled_m[N_SENT * 32], pooled_c[N_SENT * 32];
    assert_non_null(rows);
    assert_int_equal(engine_encoder_embed(none, tp, ptrs, lens, N_SENT, rows, &err), ERR_OK);
    assert_int_equal(engine_encoder_embed(mean, tp, ptrs, lens, N_SENT, pooled_m, &err), ERR_OK);
    assert_int_equal(engine_encoder_embed(cls, tp, ptrs, lens, N_SENT, pooled_c, &err), ERR_OK);
    for (int i = 0, off = 0; i < N_SENT; off += lens[i], i++) {
        float m[32] = {0}, c[32];
        double nm = 0, nc = 0, n0 = 0;
        for (int k = 0; k < 32; k++) {
            for (int t = 0; t < lens[i]; t++)
                m[k] += rows[(size_t)(off + t) * 32 + k] / (float)lens[i];
            c[k] = rows[(size_t)off * 32 + k];
            nm += (double)m[k] * m[k];
            nc += (double)c[k] * c[k];
        }
        for (int k = 0; k < 32; k++) {
            m[k] = (float)(m[k] / sqrt(nm));
            c[k] = (float)(c[k] / sqrt(nc));
            n0 += (double)rows[(size_t)off * 32 + k] * rows[(size_t)off * 32 + k];
        }
        assert_true(fabs(n0 - 1.0) > 1e-3); // not normalized
        if (max_abs_diff(m, pooled_m + i * 32, 32) > 1e-5 ||
            max_abs_diff(c, pooled_c + i * 32, 32) > 1e-5)
            fail_msg("input %d: token rows disagree with the pooled vectors", i);
    }
    for (int i = 0; i < N_SENT; i++)
        tok_ids_deinit(&ids[i]);
    mem_free(rows);
    threadpool_free(tp);
    engine_encoder_free(none);
    engine_encoder_free(mean);
    engine_encoder_free(cls);
    tok_free(tok);
    unlink(path);
}

static void test_synthetic_quantized(void **state)
{
    (void)state;
    struct synth s = synth_default();
    s.wtype = QUANT_F16;
    s.down_type = QUANT_Q8_0;
    s.vec_type = QUANT_F16;
    s.drop_bias = true;
    s.n_layer = 3;
    check_against_ref(&s, "quant", ENGINE_POOLING_UNSPECIFIED, 0.9995, 2e-2);
}

/* Several inputs in one call (3 threads) give the same bits as each alone (1 thread). */
static void check_batch_equals_single(const struct synth *s)
{
    char path[128];
    tmp_path(path, sizeof path, "batch");
    write_model(s, path);
    struct tokenizer *tok = tokenizer_of(path);
    struct engine_encoder *e;
    struct threadpool *tp1, *tp3;
    struct errmsg err;
    assert_int_equal(engine_encoder_load(path, NULL, &e, &err), ERR_OK);
    assert_int_equal(threadpool_new(1, &tp1), ERR_OK);
    assert_int_equal(threadpool_new(3, &tp3), ERR_OK);
    struct tok_ids ids[N_SENT];
    const int32_t *ptrs[N_SENT];
    int lens[N_SENT];
    float batch[N_SENT * 32], alone[32];
    const int w = engine_encoder_info(e)->n_out;
    for (int i = 0; i < N_SENT; i++) {
        encode(tok, k_sentences[i], &ids[i]);
        ptrs[i] = ids[i].ids;
        lens[i] = (int)ids[i].n_ids;
    }
    assert_int_equal(engine_encoder_embed(e, tp3, ptrs, lens, N_SENT, batch, &err), ERR_OK);
    for (int i = 0; i < N_SENT; i++) {
        assert_int_equal(engine_encoder_embed(e, tp1, &ptrs[i], &lens[i], 1, alone, &err), ERR_OK);
        double md = max_abs_diff(alone, batch + i * w, w);
        if (memcmp(alone, batch + i * w, sizeof(float) * (size_t)w) != 0)
            fail_msg("input %d: batch differs from alone by %.3e", i, md);
    }
    for (int i = 0; i < N_SENT; i++)
        tok_ids_deinit(&ids[i]);
    threadpool_free(tp1);
    threadpool_free(tp3);
    engine_encoder_free(e);
    tok_free(tok);
    unlink(path);
}

static void test_batch_equals_single(void **state)
{
    (void)state;
    struct synth s = synth_default();
    check_batch_equals_single(&s);
    s.pooling = ENGINE_POOLING_RANK; // a reranker's scores do not depend on batch neighbours
    s.head = 1;
    s.head_type = QUANT_F16;
    check_batch_equals_single(&s);
}

/* Inputs longer than one attention key block and query block, batched with a short one. */
static void test_long_inputs(void **state)
{
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "long");
    struct synth s = synth_default();
    s.n_pos = 300;
    write_model(&s, path);
    struct engine_encoder *e;
    struct threadpool *tp;
    struct errmsg err;
    assert_int_equal(engine_encoder_load(path, NULL, &e, &err), ERR_OK);
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    static int32_t ids[3][300];
    const int lens[3] = {260, 5, 129};
    const int32_t *ptrs[3] = {ids[0], ids[1], ids[2]};
    rng_state = 12345;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < lens[i]; j++)
            ids[i][j] =
                (int32_t)((rng_state = rng_state * 6364136223846793005ull + 1) >> 33) % N_BUILTIN;
    float got[3 * 32], ref[32];
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 3, got, &err), ERR_OK);
    for (int i = 0; i < 3; i++) {
        ref_embed(path, ids[i], lens[i], ENGINE_POOLING_MEAN, ref);
        double cs = cosine(got + i * 32, ref, 32), md = max_abs_diff(got + i * 32, ref, 32);
        printf("long input %d (%d tokens): cosine %.7f, max diff %.2e\n", i, lens[i], cs, md);
        assert_true(cs >= 0.999999 && md <= 5e-4);
    }
    threadpool_free(tp);
    engine_encoder_free(e);
    unlink(path);
}

static void test_embed_errors(void **state)
{
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "errors");
    struct synth s = synth_default();
    write_model(&s, path);
    struct engine_encoder *e;
    struct threadpool *tp;
    struct errmsg err;
    struct engine_encoder_params p = {.n_batch_tokens = 64, .pooling = ENGINE_POOLING_UNSPECIFIED};
    assert_int_equal(engine_encoder_load(path, &p, &e, &err), ERR_OK);
    assert_int_equal(engine_encoder_info(e)->n_batch_tokens, 64);
    assert_int_equal(engine_encoder_info(e)->n_ctx_train, 48);
    assert_int_equal(threadpool_new(1, &tp), ERR_OK);
    int32_t ids[64] = {2, 4, 5, 3};
    const int32_t *ptrs[3] = {ids, ids, ids};
    int lens[3] = {4, 4, 4};
    float out[3 * 32];
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 0, out, &err), ERR_INVALID);
    lens[1] = 0;
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 3, out, &err), ERR_INVALID);
    assert_non_null(strstr(err.msg, "input 1"));
    lens[1] = 4;
    ids[2] = N_BUILTIN;
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 3, out, &err), ERR_INVALID);
    ids[2] = -1;
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 3, out, &err), ERR_INVALID);
    ids[2] = 5;
    lens[2] = 49; // above the 48 positions
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 3, out, &err), ERR_LIMIT);
    lens[0] = lens[1] = lens[2] = 30; // 90 tokens > 64
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 3, out, &err), ERR_LIMIT);
    lens[0] = lens[1] = 32; // exactly the capacity
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 2, out, &err), ERR_OK);
    threadpool_free(tp);
    engine_encoder_free(e);
    unlink(path);
}

static void expect_load_error(const struct synth *s, enum engine_pooling pool, int code,
                              const char *needle)
{
    char path[128];
    tmp_path(path, sizeof path, "bad");
    write_model(s, path);
    struct engine_encoder *e = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    struct engine_encoder_params p = {.pooling = pool};
    assert_int_equal(engine_encoder_load(path, &p, &e, &err), code);
    assert_null(e);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
    unlink(path);
}

static void test_load_errors(void **state)
{
    (void)state;
    struct synth s = synth_default();
    s.skip_tensor = "blk.1.ffn_down.weight";
    expect_load_error(&s, ENGINE_POOLING_UNSPECIFIED, ERR_FORMAT, "blk.1.ffn_down.weight");
    s.skip_tensor = "token_embd_norm.bias";
    expect_load_error(&s, ENGINE_POOLING_UNSPECIFIED, ERR_FORMAT, "token_embd_norm.bias");
    s.skip_tensor = NULL;
    s.pooling = ENGINE_POOLING_RANK; // no head
    expect_load_error(&s, ENGINE_POOLING_UNSPECIFIED, ERR_FORMAT, "classification head");
    s.head = 1;
    s.n_labels = 2;
    s.head_type = QUANT_F32;
    s.head_bad_rows = 3; // two labels, three output rows
    expect_load_error(&s, ENGINE_POOLING_UNSPECIFIED, ERR_FORMAT, "cls.output.weight");
    s.head_bad_rows = 0;
    s.nomic = true;
    s.drop_bias = true;
    expect_load_error(&s, ENGINE_POOLING_UNSPECIFIED, ERR_UNSUPPORTED, "nomic-bert");
    s.nomic = false;
    s.drop_bias = false;
    s.head = 0;
    s.n_labels = 0;
    s.pooling = 7;
    expect_load_error(&s, ENGINE_POOLING_UNSPECIFIED, ERR_FORMAT, "pooling_type");
    s.pooling = -1;
    s.n_head = 5; // 32 does not split into 5 heads
    expect_load_error(&s, ENGINE_POOLING_UNSPECIFIED, ERR_FORMAT, "heads");
    struct engine_encoder *e = NULL;
    struct errmsg err;
    assert_int_equal(engine_encoder_load("/nonexistent.gguf", NULL, &e, &err), ERR_IO);
    if (access("../shared/models/llama/stories260K.gguf", R_OK) == 0)
        assert_int_equal(
            engine_encoder_load("../shared/models/llama/stories260K.gguf", NULL, &e, &err),
            ERR_UNSUPPORTED);
}

static void test_load_alloc_failures(void **state)
{
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "oom");
    struct synth s = synth_default();
    s.vec_type = QUANT_F16; // converted norm copies are allocations too
    write_model(&s, path);
    int64_t live = mem_live_count();
    bool ok = false;
    for (int64_t n = 0; n < 200 && !ok; n++) {
        struct engine_encoder *e = NULL;
        struct errmsg err;
        mem_fail_after(n);
        int rc = engine_encoder_load(path, NULL, &e, &err);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            ok = true;
            engine_encoder_free(e);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
            assert_null(e);
        }
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(ok);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_bert_golden),  cmocka_unit_test(test_synthetic_f32),
        cmocka_unit_test(test_synthetic_pooling), cmocka_unit_test(test_synthetic_quantized),
        cmocka_unit_test(test_synthetic_nomic),   cmocka_unit_test(test_batch_equals_single),
        cmocka_unit_test(test_rank_head),         cmocka_unit_test(test_pooling_none),
        cmocka_unit_test(test_long_inputs),       cmocka_unit_test(test_embed_errors),
        cmocka_unit_test(test_load_errors),       cmocka_unit_test(test_load_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
