/* Synthetic projector GGUFs (see clip_synth.h). */
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

struct clip_synth_params clip_synth_params_default(void)
{
    return (struct clip_synth_params){.projector = "gemma3",
                                      .image_size = 32,
                                      .patch_size = 2,
                                      .n_embd = 128,
                                      .n_layer = 4,
                                      .n_head = 4,
                                      .n_ff = 512,
                                      .n_merge = 1,
                                      .n_out = 128,
                                      .type = "f16",
                                      .seed = 1};
}

/* A weight matrix (n_out rows of n_in) and its bias; rows that do not fit the type's blocks
 * fall back to f16, as the reference's quantizer does. */
static int mat(struct synth_gen *g, int il, const char *stem, int64_t n_in, int64_t n_out)
{
    char w[96], b[96];
    snprintf(w, sizeof w, "v.blk.%d.%s.weight", il, stem);
    snprintf(b, sizeof b, "v.blk.%d.%s.bias", il, stem);
    uint32_t type = g->type;
    if (n_in % quant_traits_of(type)->block_len != 0) type = QUANT_F16;
    const int64_t ne[4] = {n_in, n_out, 1, 1};
    int rc = synth_add(g, w, type, ne, sqrtf(3.0f / (float)n_in), 0.0f);
    return rc == ERR_OK ? synth_vec(g, b, n_out, 0.05f, 0.0f) : rc;
}

static int add_keys(struct synth_gen *g, const struct clip_synth_params *p)
{
    struct gguf_writer *w = g->w;
    const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.5f, 0.5f, 0.5f};
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
    if (rc == ERR_OK) rc = gguf_writer_add_bool(w, "clip.use_gelu", true);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.vision.projector.scale_factor", (uint32_t)p->n_merge);
    if (rc != ERR_OK) return errmsg_set(g->err, rc, "metadata: %s", err_str(rc));
    return ERR_OK;
}

static int add_tensors(struct synth_gen *g, const struct clip_synth_params *p)
{
    const int64_t e = p->n_embd, side = p->image_size / p->patch_size;
    const int64_t proj[4] = {p->n_out, e, 1, 1};
    const int64_t patch[4] = {p->patch_size, p->patch_size, 3, e};
    const int64_t pos[4] = {e, side * side, 1, 1};
    int rc =
        synth_add(g, "mm.input_projection.weight", QUANT_F16, proj, sqrtf(3.0f / (float)e), 0.0f);
    if (rc == ERR_OK) rc = synth_vec(g, "mm.soft_emb_norm.weight", e, 0.1f, 1.0f);
    if (rc == ERR_OK)
        rc = synth_add(g, "v.patch_embd.weight", QUANT_F32, patch,
                       sqrtf(3.0f / (float)(3 * p->patch_size * p->patch_size)), 0.0f);
    if (rc == ERR_OK) rc = synth_vec(g, "v.patch_embd.bias", e, 0.05f, 0.0f);
    if (rc == ERR_OK) rc = synth_add(g, "v.position_embd.weight", QUANT_F32, pos, 0.5f, 0.0f);
    for (int il = 0; il < p->n_layer && rc == ERR_OK; il++) {
        char n[64];
        static const char *const norms[4] = {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"};
        for (int k = 0; k < 4 && rc == ERR_OK; k++) {
            snprintf(n, sizeof n, "v.blk.%d.%s", il, norms[k]);
            rc = synth_vec(g, n, e, 0.1f, k % 2 ? 0.0f : 1.0f);
        }
        if (rc == ERR_OK) rc = mat(g, il, "attn_q", e, e);
        if (rc == ERR_OK) rc = mat(g, il, "attn_k", e, e);
        if (rc == ERR_OK) rc = mat(g, il, "attn_v", e, e);
        if (rc == ERR_OK) rc = mat(g, il, "attn_out", e, e);
        if (rc == ERR_OK) rc = mat(g, il, "ffn_up", e, p->n_ff);
        if (rc == ERR_OK) rc = mat(g, il, "ffn_down", p->n_ff, e);
    }
    if (rc == ERR_OK) rc = synth_vec(g, "v.post_ln.weight", e, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = synth_vec(g, "v.post_ln.bias", e, 0.05f, 0.0f);
    return rc;
}

static int check(const struct clip_synth_params *p, uint32_t *type, struct errmsg *err)
{
    if (!p->projector || strcmp(p->projector, "gemma3") != 0)
        return errmsg_set(err, ERR_INVALID, "projector must be gemma3");
    if (p->patch_size < 1 || p->image_size < p->patch_size || p->image_size % p->patch_size ||
        p->image_size / p->patch_size > 128)
        return errmsg_set(err, ERR_INVALID,
                          "image_size must be a multiple of patch_size, at "
                          "most 128 patches per side");
    const int side = p->image_size / p->patch_size;
    if (p->n_merge < 1 || side % p->n_merge)
        return errmsg_set(err, ERR_INVALID, "merge must divide the %d patches per side", side);
    if (p->n_embd < 1 || p->n_embd > 16384 || p->n_head < 1 || p->n_embd % p->n_head ||
        p->n_layer < 1 || p->n_layer > 256 || p->n_ff < 1 || p->n_ff > 65536 || p->n_out < 1 ||
        p->n_out > 65536)
        return errmsg_set(err, ERR_INVALID, "bad width, heads, layers, ffn or output width");
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

int clip_synth_build(const struct clip_synth_params *p, struct gguf_writer **out,
                     struct errmsg *err)
{
    if (p->projector && strcmp(p->projector, "qwen2.5vl_merger") == 0)
        return clip_synth_build_qwen2vl(p, out, err);
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
