/* Qwen2.5-VL vision projector: loader, preprocessing and encoder (see clip_qwen2vl.h). Tokens
 * run through the ViT in window order (the 2x2 groups of each 112-pixel window together), as
 * the model and the reference implementation order them, so full-attention blocks sum their
 * keys in the same order; the merged outputs go back to raster order at the end. */
#include "engine/mtmd/clip_qwen2vl.h"

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

#define QV_LAYERS_MAX 256
#define QV_EMBD_MAX   16384
#define QV_SIDE_MAX   65536u
#define QV_TOKENS_MIN 8 // merged tokens per image, the family's preprocessor bounds
#define QV_TOKENS_MAX 4096
#define QV_WINDOW_PX  112 // the family's attention window

/* A weight matrix (n_out, n_in) in the mapping, in a type with a vec_dot, and its bias. */
struct layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b; // (n_embd); biases may be NULL
    struct clip_mat q, k, v, o, up, gate, down;
};

/* Immutable after load. */
struct clip_qwen2vl {
    struct gguf *g;
    struct clip_qwen2vl_info info;
    float *patch_w;     // (n_embd, 3, patch, patch) floats: the two temporal kernels summed
    struct layer *lays; // (n_layer), owned
    const float *post_w, *post_b;
    struct clip_mat mm0, mm2; // merger: (4 n_embd -> 4 n_embd), GELU, (4 n_embd -> n_out_embd)
};

static bool str_is(struct str s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

static int get_u32(const struct gguf *g, const char *key, uint32_t lo, uint32_t hi, int *out,
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

static int get_f32x3(const struct gguf *g, const char *key, bool positive, float *out,
                     struct errmsg *err)
{
    enum gguf_value_type et;
    int64_t n;
    const void *data;
    if (gguf_get_arr_data(g, key, &et, &n, &data) != ERR_OK || et != GGUF_VALUE_F32 || n != 3)
        return errmsg_set(err, ERR_FORMAT, "projector: %s must be an array of 3 f32", key);
    memcpy(out, data, 3 * sizeof(float));
    for (int i = 0; i < 3; i++)
        if (!isfinite(out[i]) || (positive && !(out[i] > 0.0f)))
            return errmsg_set(err, ERR_FORMAT, "projector: %s[%d] is not usable", key, i);
    return ERR_OK;
}

static int check_type(const struct gguf *g, struct errmsg *err)
{
    struct str s;
    if (gguf_get_str(g, "general.architecture", &s) != ERR_OK || !str_is(s, "clip"))
        return errmsg_set(err, ERR_FORMAT, "projector: general.architecture is not 'clip'");
    bool b = false;
    if (gguf_get_bool(g, "clip.has_vision_encoder", &b) != ERR_OK || !b)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: no vision encoder");
    if (gguf_get_str(g, "clip.projector_type", &s) != ERR_OK || !str_is(s, "qwen2.5vl_merger"))
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: not a qwen2.5vl_merger");
    b = false;
    if (gguf_get_bool(g, "clip.use_silu", &b) != ERR_OK || !b)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: only SiLU (SwiGLU) encoders run");
    uint32_t merge = 2;
    (void)gguf_get_u32(g, "clip.vision.spatial_merge_size", &merge);
    if (merge != 2)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: spatial_merge_size %u (only 2)", merge);
    if (gguf_find_tensor(g, "v.pre_ln.weight"))
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: a pre-norm is not supported");
    return ERR_OK;
}

static int read_hparams(struct clip_qwen2vl *q, struct errmsg *err)
{
    const struct gguf *g = q->g;
    struct clip_qwen2vl_info *in = &q->info;
    int rc = check_type(g, err);
    // 56 keeps at least one merged group per 112-pixel window
    if (rc == ERR_OK) rc = get_u32(g, "clip.vision.patch_size", 1, 56, &in->patch_size, err);
    if (rc == ERR_OK)
        rc = get_u32(g, "clip.vision.embedding_length", 1, QV_EMBD_MAX, &in->n_embd, err);
    if (rc == ERR_OK)
        rc = get_u32(g, "clip.vision.block_count", 1, QV_LAYERS_MAX, &in->n_layer, err);
    if (rc == ERR_OK)
        rc = get_u32(g, "clip.vision.attention.head_count", 1, QV_EMBD_MAX, &in->n_head, err);
    if (rc == ERR_OK)
        rc = get_u32(g, "clip.vision.feed_forward_length", 1, 4 * QV_EMBD_MAX, &in->n_ff, err);
    if (rc == ERR_OK)
        rc = get_u32(g, "clip.vision.n_wa_pattern", 0, QV_LAYERS_MAX, &in->n_wa_pattern, err);
    if (rc == ERR_OK) rc = get_f32x3(g, "clip.vision.image_mean", false, in->mean, err);
    if (rc == ERR_OK) rc = get_f32x3(g, "clip.vision.image_std", true, in->std, err);
    if (rc != ERR_OK) return rc;
    in->eps = 1e-6f;
    float eps;
    if (gguf_get_f32(g, "clip.vision.attention.layer_norm_epsilon", &eps) == ERR_OK) {
        if (!(eps > 0.0f && eps < 1.0f))
            return errmsg_set(err, ERR_FORMAT, "projector: layer_norm_epsilon out of range");
        in->eps = eps;
    }
    const int hd = in->n_embd / in->n_head;
    if (in->n_embd % in->n_head != 0 || hd % 4 != 0 || hd > CLIP_HEAD_DIM_MAX)
        return errmsg_set(err, ERR_FORMAT,
                          "projector: %d heads do not split width %d into a multiple of 4",
                          in->n_head, in->n_embd);
    in->window_px = QV_WINDOW_PX;
    const int64_t area = 4 * (int64_t)in->patch_size * in->patch_size;
    in->min_px = QV_TOKENS_MIN * area;
    in->max_px = QV_TOKENS_MAX * area;
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

/* An f32 vector of n; when optional, a missing one leaves *out NULL. */
static int vec_f32(const struct gguf *g, const char *name, int64_t n, bool optional,
                   const float **out, struct errmsg *err)
{
    if (optional && !gguf_find_tensor(g, name)) return ERR_OK;
    const struct gguf_tensor *t = find_shaped(g, name, n, 1, 1, 1, err);
    if (!t) return ERR_FORMAT;
    if (t->type != QUANT_F32)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: %s must be f32", name);
    *out = t->data;
    return ERR_OK;
}

/* Weight prefix.weight (n_out rows of n_in) and bias prefix.bias. */
static int mat_load(const struct gguf *g, const char *prefix, int64_t n_in, int64_t n_out,
                    struct clip_mat *m, struct errmsg *err)
{
    char name[96], bname[96];
    snprintf(name, sizeof name, "%s.weight", prefix);
    snprintf(bname, sizeof bname, "%s.bias", prefix);
    const struct gguf_tensor *t = find_shaped(g, name, n_in, n_out, 1, 1, err);
    if (!t) return ERR_FORMAT;
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->vec_dot || tr->rows_interleaved || n_in % tr->block_len != 0 ||
        matmul_input_row_bytes(t->type, n_in) == 0)
        return errmsg_set(err, ERR_UNSUPPORTED, "projector: %s has type %s without kernels", name,
                          gguf_type_name(t->type));
    *m = (struct clip_mat){.w = t->data, .type = t->type, .n_in = n_in, .n_out = n_out};
    return vec_f32(g, bname, n_out, false, &m->bias, err);
}

static int load_layer(struct clip_qwen2vl *q, int il, struct errmsg *err)
{
    const struct gguf *g = q->g;
    const int64_t e = q->info.n_embd, f = q->info.n_ff;
    struct layer *L = &q->lays[il];
    char n[64];
    snprintf(n, sizeof n, "v.blk.%d.ln1.weight", il);
    int rc = vec_f32(g, n, e, false, &L->ln1_w, err);
    snprintf(n, sizeof n, "v.blk.%d.ln1.bias", il);
    if (rc == ERR_OK) rc = vec_f32(g, n, e, true, &L->ln1_b, err);
    snprintf(n, sizeof n, "v.blk.%d.ln2.weight", il);
    if (rc == ERR_OK) rc = vec_f32(g, n, e, false, &L->ln2_w, err);
    snprintf(n, sizeof n, "v.blk.%d.ln2.bias", il);
    if (rc == ERR_OK) rc = vec_f32(g, n, e, true, &L->ln2_b, err);
    struct clip_mat *ms[7] = {&L->q, &L->k, &L->v, &L->o, &L->up, &L->gate, &L->down};
    static const char *const stems[7] = {"attn_q", "attn_k",   "attn_v",  "attn_out",
                                         "ffn_up", "ffn_gate", "ffn_down"};
    for (int k = 0; k < 7 && rc == ERR_OK; k++) {
        snprintf(n, sizeof n, "v.blk.%d.%s", il, stems[k]);
        rc = mat_load(g, n, k == 6 ? f : e, k == 4 || k == 5 ? f : e, ms[k], err);
    }
    return rc;
}

/* The two temporal patch kernels, summed: a still image is both frames of the pair. */
static int load_patch(struct clip_qwen2vl *q, struct errmsg *err)
{
    const int64_t p = q->info.patch_size, e = q->info.n_embd, n = p * p * 3 * e;
    static const char *const names[2] = {"v.patch_embd.weight", "v.patch_embd.weight.1"};
    q->patch_w = mem_calloc((size_t)n, sizeof(float));
    float *tmp = mem_alloc((size_t)n * sizeof(float));
    int rc = q->patch_w && tmp ? ERR_OK : errmsg_set(err, ERR_NOMEM, "out of memory");
    for (int k = 0; k < 2 && rc == ERR_OK; k++) {
        const struct gguf_tensor *t = find_shaped(q->g, names[k], p, p, 3, e, err);
        if (!t) {
            rc = ERR_FORMAT;
        } else if (t->type != QUANT_F32 && t->type != QUANT_F16) {
            rc = errmsg_set(err, ERR_UNSUPPORTED, "projector: %s must be f32 or f16", names[k]);
        } else {
            quant_traits_of(t->type)->to_float(t->data, tmp, n);
            for (int64_t i = 0; i < n; i++)
                q->patch_w[i] += tmp[i];
        }
    }
    mem_free(tmp);
    return rc;
}

static int load_tensors(struct clip_qwen2vl *q, struct errmsg *err)
{
    const int64_t e = q->info.n_embd;
    int rc = load_patch(q, err);
    if (rc != ERR_OK) return rc;
    q->lays = mem_calloc((size_t)q->info.n_layer, sizeof *q->lays);
    if (!q->lays) return errmsg_set(err, ERR_NOMEM, "out of memory");
    for (int il = 0; il < q->info.n_layer && rc == ERR_OK; il++)
        rc = load_layer(q, il, err);
    if (rc == ERR_OK) rc = vec_f32(q->g, "v.post_ln.weight", e, false, &q->post_w, err);
    if (rc == ERR_OK) rc = vec_f32(q->g, "v.post_ln.bias", e, true, &q->post_b, err);
    if (rc == ERR_OK) rc = mat_load(q->g, "mm.0", 4 * e, 4 * e, &q->mm0, err);
    if (rc != ERR_OK) return rc;
    const struct gguf_tensor *t = gguf_find_tensor(q->g, "mm.2.weight");
    if (!t || t->ne[0] != 4 * e || t->ne[1] < 1 || t->ne[1] > 4 * QV_EMBD_MAX)
        return errmsg_set(err, ERR_FORMAT, "projector: mm.2.weight must be [%lld, n_out]",
                          (long long)(4 * e));
    q->info.n_out_embd = (int)t->ne[1];
    return mat_load(q->g, "mm.2", 4 * e, t->ne[1], &q->mm2, err);
}

static int load_from(const char *path, const void *data, size_t len, struct clip_qwen2vl **out,
                     struct errmsg *err)
{
    kernels_init();
    struct clip_qwen2vl *q = mem_calloc(1, sizeof *q);
    if (!q) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = path ? gguf_open(path, &q->g, err) : gguf_open_memory(data, len, &q->g, err);
    if (rc == ERR_OK) rc = read_hparams(q, err);
    if (rc == ERR_OK) rc = load_tensors(q, err);
    if (rc != ERR_OK) {
        clip_qwen2vl_free(q);
        return rc;
    }
    *out = q;
    return ERR_OK;
}

int clip_qwen2vl_load(const char *path, struct clip_qwen2vl **out, struct errmsg *err)
{
    return load_from(path, NULL, 0, out, err);
}

int clip_qwen2vl_load_memory(const void *data, size_t len, struct clip_qwen2vl **out,
                             struct errmsg *err)
{
    return load_from(NULL, data, len, out, err);
}

void clip_qwen2vl_free(struct clip_qwen2vl *q)
{
    if (!q) return;
    mem_free(q->patch_w);
    mem_free(q->lays);
    gguf_close(q->g);
    mem_free(q);
}

const struct clip_qwen2vl_info *clip_qwen2vl_get_info(const struct clip_qwen2vl *q)
{
    return &q->info;
}

bool clip_qwen2vl_is_changed(const struct clip_qwen2vl *q)
{
    return gguf_is_changed(q->g);
}

/* The family's resize rule in the reference's float arithmetic: each side rounded to the
 * nearest multiple of 2 patches, then scaled down (floor) or up (ceil) as a whole when the
 * pixel count leaves the bounds. */
int clip_qwen2vl_image_size(const struct clip_qwen2vl *q, uint32_t w, uint32_t h, uint32_t *rw,
                            uint32_t *rh, int *n_tok)
{
    if (!w || !h || w > QV_SIDE_MAX || h > QV_SIDE_MAX) return ERR_INVALID;
    const int f = 2 * q->info.patch_size;
    const float ff = (float)f, fw = (float)w, fh = (float)h;
    int64_t bw = (int64_t)roundf(fw / ff) * f, bh = (int64_t)roundf(fh / ff) * f;
    if (bw < f) bw = f;
    if (bh < f) bh = f;
    if (bw * bh > q->info.max_px) {
        const float beta = sqrtf(fh * fw / (float)q->info.max_px);
        bh = (int64_t)floorf(fh / beta / ff) * f;
        bw = (int64_t)floorf(fw / beta / ff) * f;
        if (bh < f) bh = f;
        if (bw < f) bw = f;
    } else if (bw * bh < q->info.min_px) {
        const float beta = sqrtf((float)q->info.min_px / (fh * fw));
        bh = (int64_t)ceilf(fh * beta / ff) * f;
        bw = (int64_t)ceilf(fw * beta / ff) * f;
    }
    if (bw > (int64_t)QV_SIDE_MAX || bh > (int64_t)QV_SIDE_MAX) return ERR_INVALID;
    *rw = (uint32_t)bw;
    *rh = (uint32_t)bh;
    *n_tok = (int)((bw / f) * (bh / f));
    return ERR_OK;
}

/* Fits w x h into rw x rh: scaled by the smaller ratio (sizes rounded up in float, at most
 * the target), bicubic, placed at the integer-halved offsets on black, as the reference
 * implementation's preprocessor for this family does (the two aspect ratios differ by less
 * than one 2-patch step, so the border is a few pixels at most). */
static int fit(const uint8_t *rgb, uint32_t w, uint32_t h, uint32_t rw, uint32_t rh, uint8_t *dst)
{
    if (w == rw && h == rh) {
        memcpy(dst, rgb, (size_t)w * h * 3);
        return ERR_OK;
    }
    const float sx = (float)rw / (float)w, sy = (float)rh / (float)h;
    const float sc = sx < sy ? sx : sy;
    uint32_t nw = (uint32_t)ceilf((float)w * sc), nh = (uint32_t)ceilf((float)h * sc);
    if (nw > rw) nw = rw;
    if (nh > rh) nh = rh;
    if (nw < 1) nw = 1;
    if (nh < 1) nh = 1;
    uint8_t *r = mem_alloc((size_t)nw * nh * 3);
    if (!r) return ERR_NOMEM;
    int rc = clip_prep_resize_bicubic(rgb, w, h, r, nw, nh);
    if (rc == ERR_OK) {
        memset(dst, 0, (size_t)rw * rh * 3);
        const uint32_t ox = (rw - nw) / 2, oy = (rh - nh) / 2;
        for (uint32_t y = 0; y < nh; y++)
            memcpy(dst + ((size_t)(oy + y) * rw + ox) * 3, r + (size_t)y * nw * 3, (size_t)nw * 3);
    }
    mem_free(r);
    return rc;
}

int clip_qwen2vl_preprocess(const struct clip_qwen2vl *q, const uint8_t *rgb, uint32_t w,
                            uint32_t h, float *out)
{
    uint32_t rw, rh;
    int n_tok;
    int rc = clip_qwen2vl_image_size(q, w, h, &rw, &rh, &n_tok);
    if (rc != ERR_OK) return rc;
    const size_t plane = (size_t)rw * rh;
    uint8_t *rs = mem_alloc(plane * 3);
    if (!rs) return ERR_NOMEM;
    rc = fit(rgb, w, h, rw, rh, rs);
    if (rc == ERR_OK)
        for (size_t i = 0; i < plane; i++)
            for (int ch = 0; ch < 3; ch++) {
                const float v = (float)rs[i * 3 + (size_t)ch] / 255.0f;
                out[(size_t)ch * plane + i] = (v - q->info.mean[ch]) / q->info.std[ch];
            }
    mem_free(rs);
    return rc;
}

/* ---- the encoder ---- */

/* One image's scratch and the step running. Owned by the encoding thread. */
struct enc {
    const struct clip_qwen2vl *q;
    const float *pixels;
    int rw, n_px, n_py, n_tok; // resized width; patches across, down; n_px * n_py
    int *pos_y, *pos_x;        // (n_tok) patch row and column of each token (window order)
    int *win_lo, *win_hi;      // (n_tok) the token range of its window
    int *group_of;             // (n_tok / 4) window-order slot of each raster 2x2 group
    bool is_full;              // the block running attends to all tokens
    float *x, *xn, *q_, *k, *v, *attn, *up, *gate; // (n_tok, width) floats
    uint16_t *kh, *vh;                             // (n_tok, n_embd) halves
    void *qin;                                     // activation rows in a dot type
};

/* Window order: the 2x2 groups of each window together, windows and the groups inside them
 * in raster order, the four patches of a group row by row. */
static void plan_tokens(struct enc *e)
{
    const struct clip_qwen2vl_info *in = &e->q->info;
    const int gw = e->n_px / 2, gh = e->n_py / 2;
    const int win = in->n_wa_pattern > 0 ? in->window_px / in->patch_size / 2 : (gw > gh ? gw : gh);
    int slot = 0;
    for (int wy = 0; wy < gh; wy += win)
        for (int wx = 0; wx < gw; wx += win) {
            const int h = gh - wy < win ? gh - wy : win, w = gw - wx < win ? gw - wx : win;
            const int lo = slot * 4, hi = (slot + h * w) * 4;
            for (int dy = 0; dy < h; dy++)
                for (int dx = 0; dx < w; dx++, slot++) {
                    const int gy = wy + dy, gx = wx + dx;
                    e->group_of[gy * gw + gx] = slot;
                    for (int k = 0; k < 4; k++) {
                        const int t = slot * 4 + k;
                        e->pos_y[t] = 2 * gy + k / 2;
                        e->pos_x[t] = 2 * gx + k % 2;
                        e->win_lo[t] = lo;
                        e->win_hi[t] = hi;
                    }
                }
        }
}

static void job_patches(void *arg, int ith, int nth)
{
    const struct enc *e = arg;
    const struct clip_qwen2vl_info *in = &e->q->info;
    const int p = in->patch_size;
    const size_t plane = (size_t)e->rw * (size_t)(e->n_py * p);
    for (int t = ith; t < e->n_tok; t += nth) {
        float *x = e->x + (size_t)t * in->n_embd;
        const size_t y0 = (size_t)e->pos_y[t] * p, x0 = (size_t)e->pos_x[t] * p;
        for (int o = 0; o < in->n_embd; o++) {
            const float *w = e->q->patch_w + (size_t)o * 3 * p * p;
            float acc = 0.0f;
            for (int ch = 0; ch < 3; ch++)
                for (int ky = 0; ky < p; ky++)
                    for (int kx = 0; kx < p; kx++)
                        acc += w[(ch * p + ky) * p + kx] *
                               e->pixels[(size_t)ch * plane + (y0 + ky) * (size_t)e->rw + x0 + kx];
            x[o] = acc;
        }
    }
}

static void rmsnorm(float *y, const float *x, const float *w, const float *b, int n, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i] + (b ? b[i] : 0.0f);
}

/* The vision rotary embedding of one head (hd floats) in place: the first quarter of the
 * frequency pairs turn with the patch row, the second with its column; pair j rotates
 * elements j and j + hd/2. Thetas are built by repeated float products, as the reference
 * builds its cache. */
static void rope_head(float *v, int hd, int py, int px)
{
    const int half = hd / 2, quarter = hd / 4;
    const float step = powf(10000.0f, -2.0f / (float)half);
    float th = (float)py;
    for (int j = 0; j < half; j++) {
        if (j == quarter) th = (float)px;
        const float c = cosf(th), s = sinf(th);
        const float x0 = v[j], x1 = v[j + half];
        v[j] = x0 * c - x1 * s;
        v[j + half] = x0 * s + x1 * c;
        th *= step;
    }
}

static void job_rope(void *arg, int ith, int nth)
{
    const struct enc *e = arg;
    const struct clip_qwen2vl_info *in = &e->q->info;
    const int hd = in->n_embd / in->n_head;
    for (int p = ith; p < e->n_tok * in->n_head; p += nth) {
        const int t = p / in->n_head, h = p % in->n_head;
        const size_t off = (size_t)t * in->n_embd + (size_t)h * hd;
        rope_head(e->q_ + off, hd, e->pos_y[t], e->pos_x[t]);
        rope_head(e->k + off, hd, e->pos_y[t], e->pos_x[t]);
    }
}

/* Attention of each (token, head) over its window, or over all tokens in a full block, in the
 * single pass of the reference's CPU flash attention: the query rounded to half, keys and
 * values in half, a running maximum and a half accumulator rescaled as it grows. Keys outside
 * the window are the ones its mask makes -inf, which that pass skips. */
static void job_attention(void *arg, int ith, int nth)
{
    const struct enc *e = arg;
    const struct clip_qwen2vl_info *in = &e->q->info;
    const int hd = in->n_embd / in->n_head;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int p = ith; p < e->n_tok * in->n_head; p += nth) {
        const int t = p / in->n_head;
        const int lo = e->is_full ? 0 : e->win_lo[t], hi = e->is_full ? e->n_tok : e->win_hi[t];
        const size_t head = (size_t)(p % in->n_head) * hd;
        const size_t at = (size_t)t * in->n_embd + head;
        clip_attend_f16(e->q_ + at, e->kh + head, e->vh + head, in->n_embd, lo, hi, hd, scale,
                        e->attn + at);
    }
}

static void run_block(struct threadpool *tp, struct enc *e, const struct layer *L)
{
    const struct clip_qwen2vl_info *in = &e->q->info;
    const int n = e->n_tok, d = in->n_embd;
    for (int t = 0; t < n; t++)
        rmsnorm(e->xn + (size_t)t * d, e->x + (size_t)t * d, L->ln1_w, L->ln1_b, d, in->eps);
    clip_linear(tp, e->qin, &L->q, e->xn, e->q_, n);
    clip_linear(tp, e->qin, &L->k, e->xn, e->k, n);
    clip_linear(tp, e->qin, &L->v, e->xn, e->v, n);
    threadpool_run(tp, job_rope, e);
    ops_get()->f32_to_f16((int64_t)n * d, e->k, e->kh);
    ops_get()->f32_to_f16((int64_t)n * d, e->v, e->vh);
    threadpool_run(tp, job_attention, e);
    clip_linear(tp, e->qin, &L->o, e->attn, e->xn, n);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
        e->x[i] += e->xn[i];
    for (int t = 0; t < n; t++)
        rmsnorm(e->xn + (size_t)t * d, e->x + (size_t)t * d, L->ln2_w, L->ln2_b, d, in->eps);
    clip_linear(tp, e->qin, &L->up, e->xn, e->up, n);
    clip_linear(tp, e->qin, &L->gate, e->xn, e->gate, n);
    for (size_t i = 0; i < (size_t)n * (size_t)in->n_ff; i++) {
        const float g = e->gate[i];
        e->up[i] *= g / (1.0f + expf(-g));
    }
    clip_linear(tp, e->qin, &L->down, e->up, e->xn, n);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
        e->x[i] += e->xn[i];
}

/* Post-norm, then the merger's MLP on each 2x2 group (four consecutive tokens, one row of
 * 4 n_embd), written back in raster order. */
static void merge(struct threadpool *tp, struct enc *e, float *out)
{
    const struct clip_qwen2vl *q = e->q;
    const int d = q->info.n_embd, n_grp = e->n_tok / 4, n_out = q->info.n_out_embd;
    for (int t = 0; t < e->n_tok; t++)
        rmsnorm(e->x + (size_t)t * d, e->x + (size_t)t * d, q->post_w, q->post_b, d, q->info.eps);
    clip_linear(tp, e->qin, &q->mm0, e->x, e->xn, n_grp);
    clip_gelu(e->xn, (size_t)n_grp * 4 * (size_t)d);
    clip_linear(tp, e->qin, &q->mm2, e->xn, e->attn, n_grp);
    for (int g = 0; g < n_grp; g++)
        memcpy(out + (size_t)g * n_out, e->attn + (size_t)e->group_of[g] * n_out,
               sizeof(float) * (size_t)n_out);
}

static void enc_free(struct enc *e)
{
    void *ps[] = {e->pos_y, e->pos_x, e->win_lo, e->win_hi, e->group_of, e->x,  e->xn, e->q_,
                  e->k,     e->v,     e->attn,   e->up,     e->gate,     e->kh, e->vh, e->qin};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        mem_free(ps[i]);
}

static size_t max_row_bytes(const struct clip_qwen2vl *q)
{
    size_t r = matmul_input_row_bytes(q->mm0.type, q->mm0.n_in);
    const size_t r2 = matmul_input_row_bytes(q->mm2.type, q->mm2.n_in);
    if (r2 > r) r = r2;
    for (int il = 0; il < q->info.n_layer; il++) {
        const struct layer *L = &q->lays[il];
        const struct clip_mat *ms[7] = {&L->q, &L->k, &L->v, &L->o, &L->up, &L->gate, &L->down};
        for (int j = 0; j < 7; j++) {
            const size_t b = matmul_input_row_bytes(ms[j]->type, ms[j]->n_in);
            if (b > r) r = b;
        }
    }
    return r;
}

static int enc_alloc(struct enc *e)
{
    const struct clip_qwen2vl_info *in = &e->q->info;
    const size_t n = (size_t)e->n_tok, d = (size_t)in->n_embd, f = (size_t)in->n_ff;
    const size_t wide = d > f ? d : f, out = (size_t)in->n_out_embd;
    e->pos_y = mem_alloc(n * sizeof(int));
    e->pos_x = mem_alloc(n * sizeof(int));
    e->win_lo = mem_alloc(n * sizeof(int));
    e->win_hi = mem_alloc(n * sizeof(int));
    e->group_of = mem_alloc(n / 4 * sizeof(int));
    e->x = mem_alloc(n * d * sizeof(float));
    e->xn = mem_alloc(n * wide * sizeof(float));
    e->q_ = mem_alloc(n * d * sizeof(float));
    e->k = mem_alloc(n * d * sizeof(float));
    e->v = mem_alloc(n * d * sizeof(float));
    e->attn = mem_alloc(n * (d > out ? d : out) * sizeof(float)); // also the merger's output
    e->up = mem_alloc(n * f * sizeof(float));
    e->gate = mem_alloc(n * f * sizeof(float));
    e->kh = mem_alloc(n * d * sizeof(uint16_t));
    e->vh = mem_alloc(n * d * sizeof(uint16_t));
    e->qin = mem_alloc(n * max_row_bytes(e->q));
    const bool ok = e->pos_y && e->pos_x && e->win_lo && e->win_hi && e->group_of && e->x &&
                    e->xn && e->q_ && e->k && e->v && e->attn && e->up && e->gate && e->kh &&
                    e->vh && e->qin;
    return ok ? ERR_OK : ERR_NOMEM;
}

int clip_qwen2vl_encode(const struct clip_qwen2vl *q, struct threadpool *tp, const float *pixels,
                        uint32_t rw, uint32_t rh, float *out)
{
    const struct clip_qwen2vl_info *in = &q->info;
    const uint32_t f = 2 * (uint32_t)in->patch_size;
    if (!rw || !rh || rw % f || rh % f || (int64_t)rw * rh > in->max_px) return ERR_INVALID;
    struct enc e = {.q = q, .pixels = pixels, .rw = (int)rw};
    e.n_px = (int)rw / in->patch_size;
    e.n_py = (int)rh / in->patch_size;
    e.n_tok = e.n_px * e.n_py;
    int rc = enc_alloc(&e);
    if (rc == ERR_OK) {
        plan_tokens(&e);
        threadpool_run(tp, job_patches, &e);
        for (int il = 0; il < in->n_layer; il++) {
            e.is_full = in->n_wa_pattern == 0 || (il + 1) % in->n_wa_pattern == 0;
            run_block(tp, &e, &q->lays[il]);
        }
        merge(tp, &e, out);
    }
    enc_free(&e);
    return rc;
}
