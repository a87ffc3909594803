/* Synthetic Qwen2.5-VL projectors (see clip_synth.h): the keys and tensors of a
 * `qwen2.5vl_merger` file (two temporal patch kernels without bias, RMS-normed blocks with a
 * SwiGLU feed-forward, the 2x2 patch merger's two-layer MLP), seeded random weights. */
#include "engine/mtmd/clip_synth.h"

#include "engine/gguf/gguf.h"
#include "engine/kernels.h"
#include "engine/mtmd/clip_synth_gen.h"
#include "engine/quants/quants.h"
#include "util/checked.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Weight (n_out rows of n_in) and bias named prefix.weight / prefix.bias. */
static int mat(struct synth_gen *g, const char *prefix, int64_t n_in, int64_t n_out)
{
    char w[96], b[96];
    snprintf(w, sizeof w, "%s.weight", prefix);
    snprintf(b, sizeof b, "%s.bias", prefix);
    uint32_t type = g->type;
    if (n_in % quant_traits_of(type)->block_len != 0) type = QUANT_F16;
    const int64_t ne[4] = {n_in, n_out, 1, 1};
    int rc = synth_add(g, w, type, ne, sqrtf(3.0f / (float)n_in), 0.0f);
    return rc == ERR_OK ? synth_vec(g, b, n_out, 0.05f, 0.0f) : rc;
}

static int add_keys(struct synth_gen *g, const struct clip_synth_params *p)
{
    struct gguf_writer *w = g->w;
    // the published Qwen2.5-VL preprocessor's (CLIP's) mean and std
    const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    const float std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    int rc = gguf_writer_add_str(w, "general.architecture", "clip");
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "general.type", "clip-vision");
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "general.name", "synthetic");
    if (rc == ERR_OK) rc = gguf_writer_add_bool(w, "clip.has_vision_encoder", true);
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "clip.projector_type", p->projector);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.image_size", (uint32_t)p->image_size);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.patch_size", (uint32_t)p->patch_size);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.embedding_length", (uint32_t)p->n_embd);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.feed_forward_length", (uint32_t)p->n_ff);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "clip.vision.block_count", (uint32_t)p->n_layer);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.attention.head_count", (uint32_t)p->n_head);
    if (rc == ERR_OK)
        rc = gguf_writer_add_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "clip.vision.projection_dim", (uint32_t)p->n_out);
    if (rc == ERR_OK)
        rc = gguf_writer_add_arr(w, "clip.vision.image_mean", GGUF_VALUE_F32, mean, 3);
    if (rc == ERR_OK) rc = gguf_writer_add_arr(w, "clip.vision.image_std", GGUF_VALUE_F32, std, 3);
    if (rc == ERR_OK) rc = gguf_writer_add_bool(w, "clip.use_silu", true);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.n_wa_pattern", (uint32_t)p->n_wa_pattern);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.spatial_merge_size", (uint32_t)p->n_merge);
    if (rc != ERR_OK) return errmsg_set(g->err, rc, "metadata: %s", err_str(rc));
    return ERR_OK;
}

static int add_layer(struct synth_gen *g, const struct clip_synth_params *p, int il)
{
    const int64_t e = p->n_embd, f = p->n_ff;
    char n[64];
    snprintf(n, sizeof n, "v.blk.%d.ln1.weight", il);
    int rc = synth_vec(g, n, e, 0.1f, 1.0f);
    snprintf(n, sizeof n, "v.blk.%d.ln2.weight", il);
    if (rc == ERR_OK) rc = synth_vec(g, n, e, 0.1f, 1.0f);
    static const char *const stems[7] = {"attn_q", "attn_k",   "attn_v",  "attn_out",
                                         "ffn_up", "ffn_gate", "ffn_down"};
    for (int k = 0; k < 7 && rc == ERR_OK; k++) {
        snprintf(n, sizeof n, "v.blk.%d.%s", il, stems[k]);
        rc = mat(g, n, k == 6 ? f : e, k == 4 || k == 5 ? f : e);
    }
    return rc;
}

static int add_tensors(struct synth_gen *g, const struct clip_synth_params *p)
{
    const int64_t e = p->n_embd, pz = p->patch_size;
    const int64_t patch[4] = {pz, pz, 3, e};
    const float ps = sqrtf(3.0f / (float)(3 * pz * pz));
    int rc = synth_add(g, "v.patch_embd.weight", QUANT_F32, patch, ps, 0.0f);
    if (rc == ERR_OK) rc = synth_add(g, "v.patch_embd.weight.1", QUANT_F32, patch, ps, 0.0f);
    for (int il = 0; il < p->n_layer && rc == ERR_OK; il++)
        rc = add_layer(g, p, il);
    if (rc == ERR_OK) rc = synth_vec(g, "v.post_ln.weight", e, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = mat(g, "mm.0", 4 * e, 4 * e);
    if (rc == ERR_OK) rc = mat(g, "mm.2", 4 * e, p->n_out);
    return rc;
}

static int check(const struct clip_synth_params *p, uint32_t *type, struct errmsg *err)
{
    if (p->patch_size < 1 || p->patch_size > 64 || p->n_merge != 2)
        return errmsg_set(err, ERR_INVALID, "patch must be 1..64 and merge 2");
    if (p->n_embd < 1 || p->n_embd > 16384 || p->n_head < 1 || p->n_embd % p->n_head ||
        (p->n_embd / p->n_head) % 4 || p->n_layer < 1 || p->n_layer > 256 || p->n_ff < 1 ||
        p->n_ff > 65536 || p->n_ff == p->n_embd || p->n_out < 1 || p->n_out > 65536 ||
        p->n_wa_pattern < 0 || p->n_wa_pattern > p->n_layer)
        return errmsg_set(err, ERR_INVALID,
                          "bad width, heads (head size a multiple of 4), layers, ffn (not the "
                          "width), output width or window pattern");
    static const struct {
        const char *name;
        uint32_t type;
    } types[] = {{"f32", QUANT_F32}, {"f16", QUANT_F16}, {"q8_0", QUANT_Q8_0}};
    for (size_t i = 0; p->type && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(p->type, types[i].name) == 0) {
            *type = types[i].type;
            return ERR_OK;
        }
    return errmsg_set(err, ERR_INVALID, "type must be f32, f16 or q8_0");
}

int clip_synth_build_qwen2vl(const struct clip_synth_params *p, struct gguf_writer **out,
                             struct errmsg *err)
{
    struct synth_gen g = {.rng = p->seed, .err = err};
    int rc = check(p, &g.type, err);
    if (rc != ERR_OK) return rc;
    kernels_init();
    rc = gguf_writer_new(&g.w);
    if (rc != ERR_OK) return errmsg_set(err, rc, "out of memory");
    rc = add_keys(&g, p);
    if (rc == ERR_OK) rc = add_tensors(&g, p);
    if (rc != ERR_OK) {
        gguf_writer_free(g.w);
        return rc;
    }
    *out = g.w;
    return ERR_OK;
}
