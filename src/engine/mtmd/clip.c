/* CLIP-family projector GGUF: loader and the gemma3 vision path (SigLIP ViT encoder, average
 * pool, RMS norm, linear projection). Key and tensor names follow the GGUF convention of
 * multimodal projector files (`clip.vision.*`, `v.blk.N.*`, `mm.*`). */
#include "engine/mtmd/clip.h"

#include "engine/gguf/gguf.h"
#include "engine/kernels.h"
#include "engine/matmul.h"
#include "engine/mtmd/clip_linear.h"
#include "engine/mtmd/clip_prep.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"
#include "util/checked.h"
#include "util/mem.h"
#include "util/str.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CLIP_LAYERS_MAX 256
#define CLIP_EMBD_MAX   16384
#define CLIP_IMAGE_MAX  4096

/* A weight matrix (n_out, n_in) in the mapping, in a type with a vec_dot. */
struct clip_layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b; // (n_embd)
    struct clip_mat q, k, v, o, up, down;
};

/* Immutable after load. */
struct clip_model {
    struct gguf *g;
    struct clip_info info;
    float *patch_w;            // (n_embd, 3, patch, patch) floats, owned
    const float *patch_b;      // (n_embd)
    float *pos;                // (n_patches, n_embd) floats, owned
    struct clip_layer *layers; // (n_layer), owned
    const float *post_ln_w, *post_ln_b;
    const float *soft_norm_w; // (n_embd) gemma3's norm before the projection
    float *proj;              // (n_out_embd, n_embd) floats, owned (transposed from the file)
    int n_patches;            // (image_size / patch_size)^2
};

static int get_u32_req(const struct gguf *g, const char *key, uint32_t lo, uint32_t hi, int *out,
                       struct errmsg *err)
{
    uint32_t v;
    if (gguf_get_u32(g, key, &v) != ERR_OK)
        return errmsg_set(err, ERR_FORMAT, "projector: missing or non-u32 key %s", key);
    if (v < lo || v > hi)
        return errmsg_set(err, ERR_FORMAT, "projector: %s = %u outside %u..%u", key, v, lo, hi);
    *out = (int)v;
    return ERR_OK;
}

static int get_f32x3(const struct gguf *g, const char *key, float *out, struct errmsg *err)
{
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    if (gguf_get_arr_data(g, key, &et, &n, &data) != ERR_OK || et != GGUF_VALUE_F32 || n != 3)
        return errmsg_set(err, ERR_FORMAT, "projector: %s must be an array of 3 f32", key);
    memcpy(out, data, 3 * sizeof(float));
    for (int i = 0; i < 3; i++)
        if (!isfinite(out[i]) || (strstr(key, "std") && !(out[i] > 0.0f)))
            return errmsg_set(err, ERR_FORMAT, "projector: %s[%d] is not usable", key, i);
    return ERR_OK;
}

static bool str_is(struct str s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

static int read_hparams(struct clip_model *c, struct errmsg *err)
{
    const struct gguf *g = c->g;
    struct clip_info *in = &c->info;
    struct str s;
    if (gguf_get_str(g, "general.architecture", &s) != ERR_OK || !str_is(s, "clip"))
        return errmsg_set(err, ERR_FORMAT, "projector: general.architecture is not 'clip'");
    if (gguf_get_str(g, "general.type", &s) == ERR_OK && !str_is(s, "clip-vision") &&
        !str_is(s, "mmproj"))
        return errmsg_set(err, str_is(s, "clip-audio") ? ERR_UNSUPPORTED : ERR_FORMAT,
                          "projector: general.type '%.*s' (supported: clip-vision)",
                          (int)(s.len > 32 ? 32 : s.len), s.ptr);
    bool b = false;
    in->has_vision = gguf_get_bool(g, "clip.has_vision_encoder", &b) == ERR_OK && b;
    b = false;
    in->has_audio = gguf_get_bool(g, "clip.has_audio_encoder", &b) == ERR_OK && b;
    if (!in->has_vision)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "projector: no vision encoder (audio projectors "
                          "are not supported yet)");
    if (gguf_get_str(g, "clip.projector_type", &s) != ERR_OK)
        return errmsg_set(err, ERR_FORMAT, "projector: missing clip.projector_type");
    if (!str_is(s, "gemma3"))
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: type '%.*s' is not supported (gemma3)",
                          (int)(s.len > 32 ? 32 : s.len), s.ptr);
    in->projector = CLIP_PROJECTOR_GEMMA3;
    in->projector_name = "gemma3";
    int rc = get_u32_req(g, "clip.vision.image_size", 1, CLIP_IMAGE_MAX, &in->image_size, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.vision.patch_size", 1, CLIP_IMAGE_MAX, &in->patch_size, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.vision.embedding_length", 1, CLIP_EMBD_MAX, &in->n_embd, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.vision.block_count", 1, CLIP_LAYERS_MAX, &in->n_layer, err);
    if (rc == ERR_OK)
        rc = get_u32_req(g, "clip.vision.attention.head_count", 1, CLIP_EMBD_MAX, &in->n_head, err);
    if (rc == ERR_OK)
        rc =
            get_u32_req(g, "clip.vision.feed_forward_length", 1, 4 * CLIP_EMBD_MAX, &in->n_ff, err);
    if (rc == ERR_OK) rc = get_f32x3(g, "clip.vision.image_mean", in->mean, err);
    if (rc == ERR_OK) rc = get_f32x3(g, "clip.vision.image_std", in->std, err);
    if (rc != ERR_OK) return rc;
    in->eps = 1e-6f;
    float eps;
    if (gguf_get_f32(g, "clip.vision.attention.layer_norm_epsilon", &eps) == ERR_OK) {
        if (!(eps > 0.0f && eps < 1.0f))
            return errmsg_set(err, ERR_FORMAT, "projector: layer_norm_epsilon out of range");
        in->eps = eps;
    }
    // gemma3's pooling kernel is 4 unless the file says otherwise (test models do)
    in->n_merge = 4;
    uint32_t sf;
    if (gguf_get_u32(g, "clip.vision.projector.scale_factor", &sf) == ERR_OK) {
        if (sf < 1 || sf > CLIP_IMAGE_MAX)
            return errmsg_set(err, ERR_FORMAT, "projector: scale_factor %u out of range", sf);
        in->n_merge = (int)sf;
    }
    bool gelu = false;
    (void)gguf_get_bool(g, "clip.use_gelu", &gelu);
    bool silu = false;
    if (gguf_get_bool(g, "clip.use_silu", &silu) == ERR_OK && silu)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: SiLU encoders are not supported");
    const int side = in->image_size / in->patch_size;
    if (in->image_size % in->patch_size != 0)
        return errmsg_set(err, ERR_FORMAT, "projector: image_size %d not a multiple of patch %d",
                          in->image_size, in->patch_size);
    if (in->n_embd % in->n_head != 0 || in->n_embd / in->n_head > CLIP_HEAD_DIM_MAX)
        return errmsg_set(err, ERR_FORMAT, "projector: %d heads do not divide width %d", in->n_head,
                          in->n_embd);
    if (side % in->n_merge != 0)
        return errmsg_set(err, ERR_FORMAT, "projector: %d patches per side not a multiple of %d",
                          side, in->n_merge);
    if (side > 128)
        return errmsg_set(err, ERR_LIMIT, "projector: %d patches per side (at most 128)", side);
    c->n_patches = side * side;
    in->n_out_tokens = (side / in->n_merge) * (side / in->n_merge);
    return ERR_OK;
}

/* A tensor with exactly these dimensions (unused trailing ones given as 1). */
static const struct gguf_tensor *find_shaped(const struct gguf *g, const char *name, int64_t n0,
                                             int64_t n1, int64_t n2, int64_t n3, struct errmsg *err)
{
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) {
        errmsg_set(err, ERR_FORMAT, "projector: missing tensor %s", name);
        return NULL;
    }
    const int64_t want[4] = {n0, n1, n2, n3};
    for (int i = 0; i < 4; i++)
        if (t->ne[i] != want[i]) {
            errmsg_set(err, ERR_FORMAT, "projector: tensor %s has shape [%lld, %lld, %lld, %lld]",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3]);
            return NULL;
        }
    return t;
}

static int vec_f32(const struct gguf *g, const char *name, int64_t n, const float **out,
                   struct errmsg *err)
{
    const struct gguf_tensor *t = find_shaped(g, name, n, 1, 1, 1, err);
    if (!t) return ERR_FORMAT;
    if (t->type != QUANT_F32)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: %s must be f32", name);
    *out = t->data;
    return ERR_OK;
}

/* A float copy of an F32 or F16 tensor of n elements. */
static int to_floats(const struct gguf_tensor *t, const char *name, int64_t n, float **out,
                     struct errmsg *err)
{
    size_t bytes;
    if (!size_mul((size_t)n, sizeof(float), &bytes))
        return errmsg_set(err, ERR_LIMIT, "projector: %s too large", name);
    if (t->type != QUANT_F32 && t->type != QUANT_F16)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: %s must be f32 or f16", name);
    float *f = mem_alloc(bytes);
    if (!f) return errmsg_set(err, ERR_NOMEM, "out of memory");
    quant_traits_of(t->type)->to_float(t->data, f, n);
    *out = f;
    return ERR_OK;
}

static int mat_load(const struct gguf *g, const char *stem, int il, int64_t n_in, int64_t n_out,
                    struct clip_mat *m, struct errmsg *err)
{
    char name[96], bname[96];
    snprintf(name, sizeof name, "v.blk.%d.%s.weight", il, stem);
    snprintf(bname, sizeof bname, "v.blk.%d.%s.bias", il, stem);
    const struct gguf_tensor *t = find_shaped(g, name, n_in, n_out, 1, 1, err);
    if (!t) return ERR_FORMAT;
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->vec_dot || tr->rows_interleaved || n_in % tr->block_len != 0 ||
        matmul_input_row_bytes(t->type, n_in) == 0)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: %s has type %s without kernels", name,
                          gguf_type_name(t->type));
    *m = (struct clip_mat){.w = t->data, .type = t->type, .n_in = n_in, .n_out = n_out};
    return vec_f32(g, bname, n_out, &m->bias, err);
}

static int load_layer(struct clip_model *c, int il, struct errmsg *err)
{
    const struct gguf *g = c->g;
    const int64_t e = c->info.n_embd, f = c->info.n_ff;
    struct clip_layer *L = &c->layers[il];
    char n[4][64];
    snprintf(n[0], sizeof n[0], "v.blk.%d.ln1.weight", il);
    snprintf(n[1], sizeof n[1], "v.blk.%d.ln1.bias", il);
    snprintf(n[2], sizeof n[2], "v.blk.%d.ln2.weight", il);
    snprintf(n[3], sizeof n[3], "v.blk.%d.ln2.bias", il);
    int rc = vec_f32(g, n[0], e, &L->ln1_w, err);
    if (rc == ERR_OK) rc = vec_f32(g, n[1], e, &L->ln1_b, err);
    if (rc == ERR_OK) rc = vec_f32(g, n[2], e, &L->ln2_w, err);
    if (rc == ERR_OK) rc = vec_f32(g, n[3], e, &L->ln2_b, err);
    if (rc == ERR_OK) rc = mat_load(g, "attn_q", il, e, e, &L->q, err);
    if (rc == ERR_OK) rc = mat_load(g, "attn_k", il, e, e, &L->k, err);
    if (rc == ERR_OK) rc = mat_load(g, "attn_v", il, e, e, &L->v, err);
    if (rc == ERR_OK) rc = mat_load(g, "attn_out", il, e, e, &L->o, err);
    if (rc == ERR_OK) rc = mat_load(g, "ffn_up", il, e, f, &L->up, err);
    if (rc == ERR_OK) rc = mat_load(g, "ffn_down", il, f, e, &L->down, err);
    return rc;
}

static int load_tensors(struct clip_model *c, struct errmsg *err)
{
    const struct gguf *g = c->g;
    struct clip_info *in = &c->info;
    const int64_t e = in->n_embd, p = in->patch_size;
    const struct gguf_tensor *t = find_shaped(g, "v.patch_embd.weight", p, p, 3, e, err);
    int rc = t ? to_floats(t, "v.patch_embd.weight", p * p * 3 * e, &c->patch_w, err) : ERR_FORMAT;
    if (rc == ERR_OK) rc = vec_f32(g, "v.patch_embd.bias", e, &c->patch_b, err);
    if (rc != ERR_OK) return rc;
    t = find_shaped(g, "v.position_embd.weight", e, c->n_patches, 1, 1, err);
    rc = t ? to_floats(t, "v.position_embd.weight", e * c->n_patches, &c->pos, err) : ERR_FORMAT;
    if (rc != ERR_OK) return rc;
    c->layers = mem_calloc((size_t)in->n_layer, sizeof *c->layers);
    if (!c->layers) return errmsg_set(err, ERR_NOMEM, "out of memory");
    for (int il = 0; il < in->n_layer && rc == ERR_OK; il++)
        rc = load_layer(c, il, err);
    if (rc == ERR_OK) rc = vec_f32(g, "v.post_ln.weight", e, &c->post_ln_w, err);
    if (rc == ERR_OK) rc = vec_f32(g, "v.post_ln.bias", e, &c->post_ln_b, err);
    if (rc == ERR_OK) rc = vec_f32(g, "mm.soft_emb_norm.weight", e, &c->soft_norm_w, err);
    if (rc != ERR_OK) return rc;
    // The file stores the projection as (n_embd rows of n_out_embd); products want the
    // transpose, rows of n_embd.
    t = gguf_find_tensor(g, "mm.input_projection.weight");
    if (!t || t->ne[1] != e || t->ne[2] != 1 || t->ne[3] != 1 || t->ne[0] < 1 ||
        t->ne[0] > 4 * CLIP_EMBD_MAX)
        return errmsg_set(err, ERR_FORMAT,
                          "projector: mm.input_projection.weight must be "
                          "[n_out, %lld]",
                          (long long)e);
    in->n_out_embd = (int)t->ne[0];
    float *raw = NULL;
    rc = to_floats(t, "mm.input_projection.weight", t->ne[0] * e, &raw, err);
    if (rc != ERR_OK) return rc;
    c->proj = mem_alloc((size_t)t->ne[0] * (size_t)e * sizeof(float));
    if (c->proj) {
        for (int64_t i = 0; i < e; i++)
            for (int64_t j = 0; j < t->ne[0]; j++)
                c->proj[j * e + i] = raw[i * t->ne[0] + j];
    }
    mem_free(raw);
    return c->proj ? ERR_OK : errmsg_set(err, ERR_NOMEM, "out of memory");
}

static int load_from(const char *path, const void *data, size_t len, struct clip_model **out,
                     struct errmsg *err)
{
    kernels_init();
    struct clip_model *c = mem_calloc(1, sizeof *c);
    if (!c) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = path ? gguf_open(path, &c->g, err) : gguf_open_memory(data, len, &c->g, err);
    if (rc == ERR_OK) rc = read_hparams(c, err);
    if (rc == ERR_OK) rc = load_tensors(c, err);
    if (rc != ERR_OK) {
        clip_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

int clip_load(const char *path, struct clip_model **out, struct errmsg *err)
{
    return load_from(path, NULL, 0, out, err);
}

int clip_load_memory(const void *data, size_t len, struct clip_model **out, struct errmsg *err)
{
    return load_from(NULL, data, len, out, err);
}

void clip_free(struct clip_model *c)
{
    if (!c) return;
    mem_free(c->patch_w);
    mem_free(c->pos);
    mem_free(c->layers);
    mem_free(c->proj);
    gguf_close(c->g);
    mem_free(c);
}

const struct clip_info *clip_get_info(const struct clip_model *c)
{
    return &c->info;
}

bool clip_is_changed(const struct clip_model *c)
{
    return gguf_is_changed(c->g);
}

int clip_preprocess(const struct clip_model *c, const uint8_t *rgb, uint32_t w, uint32_t h,
                    float *out)
{
    const int s = c->info.image_size;
    size_t n;
    if (!size_mul((size_t)s * (size_t)s, 3, &n)) return ERR_LIMIT;
    uint8_t *sq = mem_alloc(n);
    if (!sq) return ERR_NOMEM;
    int rc = clip_prep_fit(rgb, w, h, (uint32_t)s, sq);
    if (rc == ERR_OK) {
        const size_t plane = (size_t)s * (size_t)s;
        for (size_t i = 0; i < plane; i++)
            for (int ch = 0; ch < 3; ch++) {
                const float v = (float)sq[i * 3 + (size_t)ch] / 255.0f;
                out[(size_t)ch * plane + i] = (v - c->info.mean[ch]) / c->info.std[ch];
            }
    }
    mem_free(sq);
    return rc;
}

/* ---- the encoder ---- */

struct enc {
    const struct clip_model *c;
    const float *pixels;
    int n_tok;
    float *x, *xn, *q, *k, *v, *attn, *ff; // (n_tok, width) floats
    uint16_t *kh, *vh;                     // (n_tok, n_embd) halves
    void *qin;                             // quantized activation rows
};

static void job_patches(void *arg, int ith, int nth)
{
    const struct enc *e = arg;
    const struct clip_info *in = &e->c->info;
    const int side = in->image_size / in->patch_size, p = in->patch_size, s = in->image_size;
    const size_t plane = (size_t)s * (size_t)s;
    for (int t = ith; t < e->n_tok; t += nth) {
        const int py = t / side, px = t % side;
        float *x = e->x + (size_t)t * in->n_embd;
        for (int o = 0; o < in->n_embd; o++) {
            const float *w = e->c->patch_w + (size_t)o * 3 * p * p;
            float acc = 0.0f;
            for (int ch = 0; ch < 3; ch++)
                for (int ky = 0; ky < p; ky++)
                    for (int kx = 0; kx < p; kx++)
                        acc += w[(ch * p + ky) * p + kx] *
                               e->pixels[(size_t)ch * plane + (size_t)(py * p + ky) * (size_t)s +
                                         (size_t)(px * p + kx)];
            x[o] = acc + e->c->patch_b[o] + e->c->pos[(size_t)t * in->n_embd + o];
        }
    }
}

/* Full (bidirectional) attention of every patch over every patch, one (token, head) pair at
 * a time, in the single pass the reference's CPU flash attention makes: the query rounded to
 * half, keys and values in half, a running maximum, and the weighted sum of values kept in a
 * half accumulator rescaled when the maximum grows (ops' AVX2 kernels). */
static void job_attention(void *arg, int ith, int nth)
{
    const struct enc *e = arg;
    const struct clip_info *in = &e->c->info;
    const int hd = in->n_embd / in->n_head, n = e->n_tok;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int p = ith; p < n * in->n_head; p += nth) {
        const size_t head = (size_t)(p % in->n_head) * hd;
        const size_t at = (size_t)(p / in->n_head) * in->n_embd + head;
        clip_attend_f16(e->q + at, e->kh + head, e->vh + head, in->n_embd, 0, n, hd, scale,
                        e->attn + at);
    }
}

static void run_block(struct threadpool *tp, struct enc *e, const struct clip_layer *L)
{
    const struct clip_info *in = &e->c->info;
    const int n = e->n_tok, d = in->n_embd;
    for (int t = 0; t < n; t++)
        clip_layernorm(e->xn + (size_t)t * d, e->x + (size_t)t * d, L->ln1_w, L->ln1_b, d, in->eps);
    clip_linear(tp, e->qin, &L->q, e->xn, e->q, n);
    clip_linear(tp, e->qin, &L->k, e->xn, e->k, n);
    clip_linear(tp, e->qin, &L->v, e->xn, e->v, n);
    ops_get()->f32_to_f16((int64_t)n * d, e->k, e->kh);
    ops_get()->f32_to_f16((int64_t)n * d, e->v, e->vh);
    threadpool_run(tp, job_attention, e);
    clip_linear(tp, e->qin, &L->o, e->attn, e->xn, n);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
        e->x[i] += e->xn[i];
    for (int t = 0; t < n; t++)
        clip_layernorm(e->xn + (size_t)t * d, e->x + (size_t)t * d, L->ln2_w, L->ln2_b, d, in->eps);
    clip_linear(tp, e->qin, &L->up, e->xn, e->ff, n);
    clip_gelu(e->ff, (size_t)n * (size_t)in->n_ff);
    clip_linear(tp, e->qin, &L->down, e->ff, e->xn, n);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
        e->x[i] += e->xn[i];
}

/* gemma3: average pool n_merge x n_merge patches, RMS norm times soft_emb_norm, projection. */
static void project_gemma3(struct threadpool *tp, struct enc *e, float *out)
{
    const struct clip_model *c = e->c;
    const struct clip_info *in = &c->info;
    const int d = in->n_embd, side = in->image_size / in->patch_size, k = in->n_merge;
    const int oside = side / k;
    for (int oy = 0; oy < oside; oy++)
        for (int ox = 0; ox < oside; ox++) {
            float *dst = e->xn + (size_t)(oy * oside + ox) * d;
            for (int i = 0; i < d; i++) {
                float acc = 0.0f;
                for (int dy = 0; dy < k; dy++)
                    for (int dx = 0; dx < k; dx++)
                        acc += e->x[(size_t)((oy * k + dy) * side + ox * k + dx) * d + i];
                dst[i] = acc / (float)(k * k);
            }
            double ss = 0.0;
            for (int i = 0; i < d; i++)
                ss += (double)dst[i] * dst[i];
            const float scale = 1.0f / sqrtf((float)(ss / d) + in->eps);
            for (int i = 0; i < d; i++)
                dst[i] = dst[i] * scale * c->soft_norm_w[i];
        }
    const struct clip_mat proj = {
        .w = c->proj, .type = QUANT_F32, .n_in = d, .n_out = in->n_out_embd};
    clip_linear(tp, e->qin, &proj, e->xn, out, in->n_out_tokens);
}

static void enc_free(struct enc *e)
{
    mem_free(e->x);
    mem_free(e->xn);
    mem_free(e->q);
    mem_free(e->k);
    mem_free(e->v);
    mem_free(e->attn);
    mem_free(e->ff);
    mem_free(e->kh);
    mem_free(e->vh);
    mem_free(e->qin);
}

int clip_encode(const struct clip_model *c, struct threadpool *tp, const float *pixels, float *out)
{
    const struct clip_info *in = &c->info;
    struct enc e = {.c = c, .pixels = pixels, .n_tok = c->n_patches};
    const size_t n = (size_t)e.n_tok, d = (size_t)in->n_embd, f = (size_t)in->n_ff;
    const size_t wide = d > f ? d : f;
    size_t qrow = d * sizeof(float); // the projection's F32 rows
    for (int il = 0; il < in->n_layer; il++) {
        const struct clip_layer *L = &c->layers[il];
        const struct clip_mat *ms[6] = {&L->q, &L->k, &L->v, &L->o, &L->up, &L->down};
        for (int j = 0; j < 6; j++) {
            size_t r = matmul_input_row_bytes(ms[j]->type, ms[j]->n_in);
            if (r > qrow) qrow = r;
        }
    }
    e.x = mem_alloc(n * d * sizeof(float));
    e.xn = mem_alloc(n * wide * sizeof(float));
    e.q = mem_alloc(n * d * sizeof(float));
    e.k = mem_alloc(n * d * sizeof(float));
    e.v = mem_alloc(n * d * sizeof(float));
    e.attn = mem_alloc(n * d * sizeof(float));
    e.ff = mem_alloc(n * f * sizeof(float));
    e.kh = mem_alloc(n * d * sizeof(uint16_t));
    e.vh = mem_alloc(n * d * sizeof(uint16_t));
    e.qin = mem_alloc(n * qrow);
    if (!e.x || !e.xn || !e.q || !e.k || !e.v || !e.attn || !e.ff || !e.kh || !e.vh || !e.qin) {
        enc_free(&e);
        return ERR_NOMEM;
    }
    threadpool_run(tp, job_patches, &e);
    for (int il = 0; il < in->n_layer; il++)
        run_block(tp, &e, &c->layers[il]);
    for (size_t t = 0; t < n; t++)
        clip_layernorm(e.x + t * d, e.x + t * d, c->post_ln_w, c->post_ln_b, (int)d, in->eps);
    project_gemma3(tp, &e, out);
    enc_free(&e);
    return ERR_OK;
}
