/* Ultravox audio projector (see clip_audio.h): loader, Whisper encoder and projector. Tensor
 * and key names follow the GGUF convention of multimodal projector files (`clip.audio.*`,
 * `a.conv1d.N`, `a.blk.N.*`, `mm.a.*`). The products and the attention round as the
 * reference's CPU backend does (convolutions in half precision through im2col, attention in
 * one pass over half keys and values), so outputs agree with it to float rounding. */
#include "engine/mtmd/clip_audio.h"

#include "engine/gguf/gguf.h"
#include "engine/kernels.h"
#include "engine/matmul.h"
#include "engine/mtmd/audio_mel.h"
#include "engine/mtmd/clip_linear.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"
#include "util/checked.h"
#include "util/mem.h"
#include "util/str.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define A_LAYERS_MAX   256
#define A_EMBD_MAX     16384
#define A_HEAD_DIM_MAX 512
#define A_N_POS        (AUDIO_MEL_WINDOW / 2) // encoder frames per window (conv stride 2)
#define A_TILE         64                     // keys per attention tile (the reference's)

/* A weight matrix (n_out, n_in) in the mapping, in a type with a vec_dot. */
struct alayer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b; // (n_embd)
    struct clip_mat q, k, v, o, up, down;       // k without bias
};

/* Immutable after load. */
struct clip_audio {
    struct gguf *g;
    struct clip_audio_info info;
    uint16_t *conv1_w, *conv2_w;        // (n_embd, n_in * 3) halves, owned
    const float *conv1_b, *conv2_b;     // (n_embd)
    const float *pos;                   // (>= A_N_POS, n_embd)
    struct alayer *layers;              // (n_layer), owned
    const float *post_ln_w, *post_ln_b; // (n_embd)
    const float *norm_pre, *norm_mid;   // (n_embd * n_stack), (n_proj_ff)
    struct clip_mat mlp1, mlp2;         // (2 n_proj_ff, n_embd n_stack), (n_out, n_proj_ff)
};

static int get_u32_req(const struct gguf *g, const char *key, uint32_t hi, int *out,
                       struct errmsg *err)
{
    uint32_t v;
    if (gguf_get_u32(g, key, &v) != ERR_OK)
        return errmsg_set(err, ERR_FORMAT, "audio projector: missing or bad %s", key);
    if (v < 1 || v > hi)
        return errmsg_set(err, ERR_FORMAT, "audio projector: %s = %u out of range", key, v);
    *out = (int)v;
    return ERR_OK;
}

static bool str_is(struct str s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

static int read_hparams(struct clip_audio *a, struct errmsg *err)
{
    const struct gguf *g = a->g;
    struct clip_audio_info *in = &a->info;
    struct str s;
    bool b = false;
    if (gguf_get_str(g, "general.architecture", &s) != ERR_OK || !str_is(s, "clip"))
        return errmsg_set(err, ERR_FORMAT, "audio projector: general.architecture is not 'clip'");
    if (gguf_get_bool(g, "clip.has_audio_encoder", &b) != ERR_OK || !b)
        return errmsg_set(err, ERR_FORMAT, "audio projector: no audio encoder");
    if ((gguf_get_str(g, "clip.projector_type", &s) != ERR_OK &&
         gguf_get_str(g, "clip.audio.projector_type", &s) != ERR_OK))
        return errmsg_set(err, ERR_FORMAT, "audio projector: missing clip.projector_type");
    if (!str_is(s, "ultravox"))
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "audio projector: type '%.*s' is not supported (ultravox)",
                          (int)(s.len > 32 ? 32 : s.len), s.ptr);
    in->projector_name = "ultravox";
    int rc = get_u32_req(g, "clip.audio.num_mel_bins", 512, &in->n_mel, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.audio.embedding_length", A_EMBD_MAX, &in->n_embd, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.audio.block_count", A_LAYERS_MAX, &in->n_layer, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.audio.attention.head_count", A_EMBD_MAX, &in->n_head, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.audio.feed_forward_length", 4 * A_EMBD_MAX, &in->n_ff, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.audio.projector.stack_factor", 64, &in->n_stack, err);
    if (rc != ERR_OK) return rc;
    if (in->n_embd % in->n_head != 0 || in->n_embd / in->n_head > A_HEAD_DIM_MAX)
        return errmsg_set(err, ERR_FORMAT, "audio projector: %d heads do not divide width %d",
                          in->n_head, in->n_embd);
    in->eps = 1e-5f;
    float eps;
    if (gguf_get_f32(g, "clip.audio.attention.layer_norm_epsilon", &eps) == ERR_OK) {
        if (!(eps > 0.0f && eps < 1.0f))
            return errmsg_set(err, ERR_FORMAT, "audio projector: layer_norm_epsilon out of range");
        in->eps = eps;
    }
    // Encoder frames of a window stacked n_stack at a time, the last group zero-padded.
    in->n_window_tokens = (A_N_POS + in->n_stack - 1) / in->n_stack;
    return ERR_OK;
}

static const struct gguf_tensor *find_shaped(const struct gguf *g, const char *name, int64_t n0,
                                             int64_t n1, int64_t n2, struct errmsg *err)
{
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) {
        errmsg_set(err, ERR_FORMAT, "audio projector: missing tensor %s", name);
        return NULL;
    }
    if (t->ne[0] != n0 || t->ne[1] != n1 || t->ne[2] != n2 || t->ne[3] != 1) {
        errmsg_set(err, ERR_FORMAT, "audio projector: tensor %s has shape [%lld, %lld, %lld]", name,
                   (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2]);
        return NULL;
    }
    return t;
}

/* An F32 tensor of n values; shape (n) or (1, n) (the convolutions' biases). */
static int vec_f32(const struct gguf *g, const char *name, int64_t n, const float **out,
                   struct errmsg *err)
{
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    if (t && t->ne[0] == 1 && t->ne[1] == n && n > 1)
        t = find_shaped(g, name, 1, n, 1, err);
    else
        t = find_shaped(g, name, n, 1, 1, err);
    if (!t) return ERR_FORMAT;
    if (t->type != QUANT_F32)
        return errmsg_set(err, ERR_UNSUPPORTED, "audio projector: %s must be f32", name);
    *out = t->data;
    return ERR_OK;
}

static int mat_load(const struct gguf *g, const char *wname, const char *bname, int64_t n_in,
                    int64_t n_out, struct clip_mat *m, struct errmsg *err)
{
    const struct gguf_tensor *t = find_shaped(g, wname, n_in, n_out, 1, err);
    if (!t) return ERR_FORMAT;
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->vec_dot || tr->rows_interleaved || n_in % tr->block_len != 0 ||
        matmul_input_row_bytes(t->type, n_in) == 0)
        return errmsg_set(err, ERR_UNSUPPORTED, "audio projector: %s has type %s without kernels",
                          wname, gguf_type_name(t->type));
    *m = (struct clip_mat){.w = t->data, .type = t->type, .n_in = n_in, .n_out = n_out};
    return bname ? vec_f32(g, bname, n_out, &m->bias, err) : ERR_OK;
}

/* A convolution kernel [3, n_in, n_out] (F32 or F16) as halves, one output channel a row. */
static int conv_load(struct clip_audio *a, int i, int64_t n_in, uint16_t **w, const float **b,
                     struct errmsg *err)
{
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "a.conv1d.%d.weight", i);
    snprintf(bn, sizeof bn, "a.conv1d.%d.bias", i);
    const int64_t e = a->info.n_embd, n = 3 * n_in * e;
    const struct gguf_tensor *t = find_shaped(a->g, wn, 3, n_in, e, err);
    if (!t) return ERR_FORMAT;
    if (t->type != QUANT_F32 && t->type != QUANT_F16)
        return errmsg_set(err, ERR_UNSUPPORTED, "audio projector: %s must be f32 or f16", wn);
    float *f = mem_alloc((size_t)n * sizeof(float));
    *w = mem_alloc((size_t)n * sizeof(uint16_t));
    if (!f || !*w) {
        mem_free(f);
        return errmsg_set(err, ERR_NOMEM, "out of memory");
    }
    // The reference multiplies im2col's half rows by the kernel converted to half.
    quant_traits_of(t->type)->to_float(t->data, f, n);
    ops_get()->f32_to_f16(n, f, *w);
    mem_free(f);
    return vec_f32(a->g, bn, e, b, err);
}

static int load_layer(struct clip_audio *a, int il, struct errmsg *err)
{
    static const char *const names[6] = {"attn_q",   "attn_k", "attn_v",
                                         "attn_out", "ffn_up", "ffn_down"};
    const int64_t e = a->info.n_embd, f = a->info.n_ff;
    struct alayer *L = &a->layers[il];
    struct clip_mat *ms[6] = {&L->q, &L->k, &L->v, &L->o, &L->up, &L->down};
    const float **norms[4] = {&L->ln1_w, &L->ln1_b, &L->ln2_w, &L->ln2_b};
    char n[64], b[64];
    int rc = ERR_OK;
    for (int k = 0; k < 4 && rc == ERR_OK; k++) {
        snprintf(n, sizeof n, "a.blk.%d.ln%d.%s", il, 1 + k / 2, k % 2 ? "bias" : "weight");
        rc = vec_f32(a->g, n, e, norms[k], err);
    }
    for (int k = 0; k < 6 && rc == ERR_OK; k++) {
        snprintf(n, sizeof n, "a.blk.%d.%s.weight", il, names[k]);
        snprintf(b, sizeof b, "a.blk.%d.%s.bias", il, names[k]);
        rc = mat_load(a->g, n, k == 1 ? NULL : b, k == 5 ? f : e, k == 4 ? f : e, ms[k], err);
    }
    return rc;
}

static int load_tensors(struct clip_audio *a, struct errmsg *err)
{
    const struct gguf *g = a->g;
    struct clip_audio_info *in = &a->info;
    const int64_t e = in->n_embd, stacked = e * in->n_stack;
    int rc = conv_load(a, 1, in->n_mel, &a->conv1_w, &a->conv1_b, err);
    if (rc == ERR_OK) rc = conv_load(a, 2, e, &a->conv2_w, &a->conv2_b, err);
    if (rc != ERR_OK) return rc;
    const struct gguf_tensor *t = gguf_find_tensor(g, "a.position_embd.weight");
    if (!t || t->type != QUANT_F32 || t->ne[0] != e || t->ne[1] < A_N_POS || t->ne[2] != 1 ||
        t->ne[3] != 1)
        return errmsg_set(err, ERR_FORMAT,
                          "audio projector: a.position_embd.weight must be f32 [%lld, >= %d]",
                          (long long)e, A_N_POS);
    a->pos = t->data;
    a->layers = mem_calloc((size_t)in->n_layer, sizeof *a->layers);
    if (!a->layers) return errmsg_set(err, ERR_NOMEM, "out of memory");
    for (int il = 0; il < in->n_layer && rc == ERR_OK; il++)
        rc = load_layer(a, il, err);
    if (rc == ERR_OK) rc = vec_f32(g, "a.post_ln.weight", e, &a->post_ln_w, err);
    if (rc == ERR_OK) rc = vec_f32(g, "a.post_ln.bias", e, &a->post_ln_b, err);
    if (rc == ERR_OK) rc = vec_f32(g, "mm.a.norm_pre.weight", stacked, &a->norm_pre, err);
    if (rc != ERR_OK) return rc;
    t = gguf_find_tensor(g, "mm.a.mlp.1.weight");
    if (!t || t->ne[0] != stacked || t->ne[1] < 2 || t->ne[1] % 2 || t->ne[1] > 8 * A_EMBD_MAX)
        return errmsg_set(err, ERR_FORMAT,
                          "audio projector: mm.a.mlp.1.weight must be [%lld, 2 * width]",
                          (long long)stacked);
    in->n_proj_ff = (int)(t->ne[1] / 2);
    rc = mat_load(g, "mm.a.mlp.1.weight", NULL, stacked, t->ne[1], &a->mlp1, err);
    if (rc == ERR_OK) rc = vec_f32(g, "mm.a.norm_mid.weight", in->n_proj_ff, &a->norm_mid, err);
    if (rc != ERR_OK) return rc;
    t = gguf_find_tensor(g, "mm.a.mlp.2.weight");
    if (!t || t->ne[0] != in->n_proj_ff || t->ne[1] < 1 || t->ne[1] > 4 * A_EMBD_MAX)
        return errmsg_set(err, ERR_FORMAT, "audio projector: mm.a.mlp.2.weight must be [%d, n]",
                          in->n_proj_ff);
    in->n_out_embd = (int)t->ne[1];
    return mat_load(g, "mm.a.mlp.2.weight", NULL, in->n_proj_ff, t->ne[1], &a->mlp2, err);
}

static int load_from(const char *path, const void *data, size_t len, struct clip_audio **out,
                     struct errmsg *err)
{
    kernels_init();
    struct clip_audio *a = mem_calloc(1, sizeof *a);
    if (!a) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = path ? gguf_open(path, &a->g, err) : gguf_open_memory(data, len, &a->g, err);
    if (rc == ERR_OK) rc = read_hparams(a, err);
    if (rc == ERR_OK) rc = load_tensors(a, err);
    if (rc != ERR_OK) {
        clip_audio_free(a);
        return rc;
    }
    *out = a;
    return ERR_OK;
}

int clip_audio_load(const char *path, struct clip_audio **out, struct errmsg *err)
{
    return load_from(path, NULL, 0, out, err);
}

int clip_audio_load_memory(const void *data, size_t len, struct clip_audio **out,
                           struct errmsg *err)
{
    return load_from(NULL, data, len, out, err);
}

void clip_audio_free(struct clip_audio *a)
{
    if (!a) return;
    mem_free(a->conv1_w);
    mem_free(a->conv2_w);
    mem_free(a->layers);
    gguf_close(a->g);
    mem_free(a);
}

const struct clip_audio_info *clip_audio_get_info(const struct clip_audio *a)
{
    return &a->info;
}

bool clip_audio_is_changed(const struct clip_audio *a)
{
    return gguf_is_changed(a->g);
}

int64_t clip_audio_n_tokens(const struct clip_audio *a, size_t n_samples)
{
    return audio_mel_n_windows(n_samples) * a->info.n_window_tokens;
}

/* Scratch of one window's encode. */
struct aenc {
    const struct clip_audio *a;
    const float *mel;                 // (n_mel, 3000)
    uint16_t *col;                    // im2col rows: (n_frames, n_in * 3) halves
    float *h1;                        // (3000, n_embd) after the first convolution
    float *x, *xn, *q, *k, *v, *attn; // (A_N_POS, n_embd)
    float *ff;                        // (A_N_POS, max(n_ff, 2 n_proj_ff)), the projector too
    void *qin;                        // quantized activation rows
    int conv;                         // 1 or 2: the convolution running
};

static float gelu_erf(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}

/* One convolution's output frames split over threads: a dot of each half im2col row (kernel
 * taps of every input channel, zero past either end) with each output channel's half kernel,
 * plus bias, GELU. conv 1: mel (n_mel, 3000) -> h1 (3000, e), stride 1; conv 2: h1 -> x
 * (1500, e), stride 2. Positions are added after the second. */
static void job_conv(void *arg, int ith, int nth)
{
    struct aenc *E = arg;
    const struct clip_audio *a = E->a;
    const int e = a->info.n_embd, is1 = E->conv == 1;
    const int n_in = is1 ? a->info.n_mel : e, n_out = is1 ? AUDIO_MEL_WINDOW : A_N_POS;
    const int stride = is1 ? 1 : 2, L = AUDIO_MEL_WINDOW;
    const uint16_t *w = is1 ? a->conv1_w : a->conv2_w;
    const float *bias = is1 ? a->conv1_b : a->conv2_b;
    for (int t = ith; t < n_out; t += nth) {
        uint16_t *col = E->col + (size_t)t * (size_t)n_in * 3;
        for (int c = 0; c < n_in; c++)
            for (int k = 0; k < 3; k++) {
                const int s = t * stride + k - 1;
                float v = 0.0f;
                if (s >= 0 && s < L) v = is1 ? E->mel[(size_t)c * L + s] : E->h1[(size_t)s * e + c];
                col[c * 3 + k] = ops_f32_to_f16(v);
            }
        float *dst = is1 ? E->h1 + (size_t)t * e : E->x + (size_t)t * e;
        for (int o = 0; o < e; o++) {
            const float y = ops_get()->dot_f16(n_in * 3, w + (size_t)o * n_in * 3, col);
            dst[o] = gelu_erf(y + bias[o]);
            if (!is1) dst[o] += a->pos[(size_t)t * e + o];
        }
    }
}

static void rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

/* Full attention of every frame over every frame as the reference's CPU flash attention does
 * for 64 or more queries (its tiled path): keys and values rounded to half, the query kept in
 * float, scores in float over tiles of 64 keys, a running maximum per tile and the weighted
 * sum of values in float. */
static void job_attention(void *arg, int ith, int nth)
{
    const struct aenc *E = arg;
    const struct clip_audio_info *in = &E->a->info;
    const int hd = in->n_embd / in->n_head, n = A_N_POS;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int p = ith; p < n * in->n_head; p += nth) {
        const int t = p / in->n_head, h = p % in->n_head;
        const float *q = E->q + (size_t)t * in->n_embd + (size_t)h * hd;
        float acc[A_HEAD_DIM_MAX], kq[A_TILE];
        memset(acc, 0, sizeof(float) * (size_t)hd);
        float mx = -INFINITY, sum = 0.0f;
        for (int j0 = 0; j0 < n; j0 += A_TILE) {
            const int nt = n - j0 < A_TILE ? n - j0 : A_TILE;
            float tmax = -INFINITY;
            for (int j = 0; j < nt; j++) {
                const float *k = E->k + (size_t)(j0 + j) * in->n_embd + (size_t)h * hd;
                float d = 0.0f;
                for (int i = 0; i < hd; i++)
                    d = fmaf(q[i], k[i], d);
                kq[j] = d * scale;
                tmax = kq[j] > tmax ? kq[j] : tmax;
            }
            if (tmax > mx) {
                const float ms = expf(mx - tmax); // 0 for the first tile
                for (int i = 0; i < hd; i++)
                    acc[i] *= ms;
                sum *= ms;
                mx = tmax;
            }
            double ts = 0.0;
            for (int j = 0; j < nt; j++) {
                kq[j] = expf(kq[j] - mx);
                ts += kq[j];
            }
            sum += (float)ts;
            for (int j = 0; j < nt; j++) {
                const float *v = E->v + (size_t)(j0 + j) * in->n_embd + (size_t)h * hd;
                for (int i = 0; i < hd; i++)
                    acc[i] = fmaf(kq[j], v[i], acc[i]);
            }
        }
        float *out = E->attn + (size_t)t * in->n_embd + (size_t)h * hd;
        const float inv = 1.0f / sum;
        for (int i = 0; i < hd; i++)
            out[i] = acc[i] * inv;
    }
}

/* Values rounded to half and back, as the reference casts keys and values before attention. */
static void round_half(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = ops_f16_to_f32(ops_f32_to_f16(x[i]));
}

static void run_block(struct threadpool *tp, struct aenc *E, const struct alayer *L)
{
    const struct clip_audio_info *in = &E->a->info;
    const int n = A_N_POS, d = in->n_embd;
    for (int t = 0; t < n; t++)
        clip_layernorm(E->xn + (size_t)t * d, E->x + (size_t)t * d, L->ln1_w, L->ln1_b, d, in->eps);
    clip_linear(tp, E->qin, &L->q, E->xn, E->q, n);
    clip_linear(tp, E->qin, &L->k, E->xn, E->k, n);
    clip_linear(tp, E->qin, &L->v, E->xn, E->v, n);
    round_half(E->k, (size_t)n * d);
    round_half(E->v, (size_t)n * d);
    threadpool_run(tp, job_attention, E);
    clip_linear(tp, E->qin, &L->o, E->attn, E->xn, n);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
        E->x[i] += E->xn[i];
    for (int t = 0; t < n; t++)
        clip_layernorm(E->xn + (size_t)t * d, E->x + (size_t)t * d, L->ln2_w, L->ln2_b, d, in->eps);
    clip_linear(tp, E->qin, &L->up, E->xn, E->ff, n);
    for (size_t i = 0; i < (size_t)n * (size_t)in->n_ff; i++)
        E->ff[i] = gelu_erf(E->ff[i]);
    clip_linear(tp, E->qin, &L->down, E->ff, E->xn, n);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
        E->x[i] += E->xn[i];
}

/* Ultravox: n_stack consecutive frames side by side (zeros past the last frame), RMS norm
 * (eps 1e-6) times norm_pre, the first MLP, SwiGLU with the gate in the second half
 * (silu(b) * a), RMS norm times norm_mid, the second MLP. */
static void project_ultravox(struct threadpool *tp, struct aenc *E, float *out)
{
    const struct clip_audio *a = E->a;
    const struct clip_audio_info *in = &a->info;
    const int n_tok = in->n_window_tokens, w = in->n_embd * in->n_stack, f = in->n_proj_ff;
    float *st = E->q; // (n_tok, w) fits in the (A_N_POS, n_embd) buffers after the last block
    memset(E->q, 0, (size_t)n_tok * (size_t)w * sizeof(float));
    memcpy(st, E->x, (size_t)A_N_POS * (size_t)in->n_embd * sizeof(float));
    for (int t = 0; t < n_tok; t++)
        rmsnorm(st + (size_t)t * w, st + (size_t)t * w, a->norm_pre, w, 1e-6f);
    clip_linear(tp, E->qin, &a->mlp1, st, E->ff, n_tok);
    for (int t = 0; t < n_tok; t++) {
        const float *h = E->ff + (size_t)t * 2 * f;
        float *g = E->xn + (size_t)t * f;
        for (int i = 0; i < f; i++) {
            const float b = h[f + i];
            g[i] = b / (1.0f + expf(-b)) * h[i];
        }
        rmsnorm(g, g, a->norm_mid, f, 1e-6f);
    }
    clip_linear(tp, E->qin, &a->mlp2, E->xn, out, n_tok);
}

static void aenc_free(struct aenc *E)
{
    mem_free(E->col);
    mem_free(E->h1);
    mem_free(E->x);
    mem_free(E->xn);
    mem_free(E->q);
    mem_free(E->k);
    mem_free(E->v);
    mem_free(E->attn);
    mem_free(E->ff);
    mem_free(E->qin);
}

static size_t max_qrow(const struct clip_audio *a)
{
    const struct clip_audio_info *in = &a->info;
    size_t q = matmul_input_row_bytes(a->mlp1.type, a->mlp1.n_in);
    size_t r = matmul_input_row_bytes(a->mlp2.type, a->mlp2.n_in);
    q = r > q ? r : q;
    for (int il = 0; il < in->n_layer; il++) {
        const struct alayer *L = &a->layers[il];
        const struct clip_mat *ms[6] = {&L->q, &L->k, &L->v, &L->o, &L->up, &L->down};
        for (int j = 0; j < 6; j++) {
            r = matmul_input_row_bytes(ms[j]->type, ms[j]->n_in);
            q = r > q ? r : q;
        }
    }
    return q;
}

static int aenc_alloc(struct aenc *E)
{
    const struct clip_audio_info *in = &E->a->info;
    const size_t n = A_N_POS, d = (size_t)in->n_embd;
    const size_t d_big = d * (size_t)in->n_stack; // the stacked rows reuse q: n * d >= ...
    const size_t f = (size_t)(in->n_ff > 2 * in->n_proj_ff ? in->n_ff : 2 * in->n_proj_ff);
    const size_t nin = (size_t)(in->n_mel > in->n_embd ? in->n_mel : in->n_embd) * 3;
    const size_t q_len = (size_t)in->n_window_tokens * d_big; // >= n * d
    const size_t xn_len = n * (d > (size_t)in->n_proj_ff ? d : (size_t)in->n_proj_ff);
    E->col = mem_alloc((size_t)AUDIO_MEL_WINDOW * nin * sizeof(uint16_t));
    E->h1 = mem_alloc((size_t)AUDIO_MEL_WINDOW * d * sizeof(float));
    E->x = mem_alloc(n * d * sizeof(float));
    E->xn = mem_alloc(xn_len * sizeof(float));
    E->q = mem_alloc(q_len * sizeof(float));
    E->k = mem_alloc(n * d * sizeof(float));
    E->v = mem_alloc(n * d * sizeof(float));
    E->attn = mem_alloc(n * d * sizeof(float));
    E->ff = mem_alloc(n * f * sizeof(float));
    E->qin = mem_alloc(n * max_qrow(E->a));
    if (!E->col || !E->h1 || !E->x || !E->xn || !E->q || !E->k || !E->v || !E->attn || !E->ff ||
        !E->qin)
        return ERR_NOMEM;
    return ERR_OK;
}

int clip_audio_encode_window(const struct clip_audio *a, struct threadpool *tp, const float *mel,
                             float *out)
{
    const struct clip_audio_info *in = &a->info;
    struct aenc E = {.a = a, .mel = mel};
    int rc = aenc_alloc(&E);
    if (rc != ERR_OK) {
        aenc_free(&E);
        return rc;
    }
    E.conv = 1;
    threadpool_run(tp, job_conv, &E);
    E.conv = 2;
    threadpool_run(tp, job_conv, &E);
    for (int il = 0; il < in->n_layer; il++)
        run_block(tp, &E, &a->layers[il]);
    const size_t d = (size_t)in->n_embd;
    for (size_t t = 0; t < A_N_POS; t++)
        clip_layernorm(E.x + t * d, E.x + t * d, a->post_ln_w, a->post_ln_b, (int)d, in->eps);
    project_ultravox(tp, &E, out);
    aenc_free(&E);
    return ERR_OK;
}

int clip_audio_encode(const struct clip_audio *a, struct threadpool *tp, const float *samples,
                      size_t n_samples, float *out)
{
    const struct clip_audio_info *in = &a->info;
    const int64_t n_win = audio_mel_n_windows(n_samples);
    const size_t per = (size_t)in->n_mel * AUDIO_MEL_WINDOW;
    size_t n;
    if (!size_mul(per, (size_t)n_win, &n) || n > SIZE_MAX / sizeof(float)) return ERR_NOMEM;
    float *mel = mem_alloc(n * sizeof(float));
    if (!mel) return ERR_NOMEM;
    int rc = audio_mel_compute(samples, n_samples, in->n_mel, mel);
    for (int64_t w = 0; w < n_win && rc == ERR_OK; w++)
        rc = clip_audio_encode_window(a, tp, mel + (size_t)w * per,
                                      out + (size_t)w * (size_t)in->n_window_tokens *
                                                (size_t)in->n_out_embd);
    mem_free(mel);
    return rc;
}
