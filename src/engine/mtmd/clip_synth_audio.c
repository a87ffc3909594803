/* Synthetic Ultravox projector GGUFs (see clip_synth_audio.h). Tensor names and shapes follow
 * the reference's clip-audio layout: a.conv1d.{1,2}, a.position_embd, a.blk.N.*, a.post_ln,
 * mm.a.norm_pre, mm.a.mlp.{1,2}, mm.a.norm_mid. */
#include "engine/mtmd/clip_synth_audio.h"

#include "engine/gguf/gguf.h"
#include "engine/kernels.h"
#include "engine/mtmd/clip_synth_gen.h"
#include "engine/quants/quants.h"
#include "util/checked.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N_POS 1500 // encoder frames in one 30 s window (3000 mel frames, conv stride 2)

struct clip_synth_audio_params clip_synth_audio_params_default(void)
{
    return (struct clip_synth_audio_params){.n_mel = 80,
                                            .n_embd = 64,
                                            .n_layer = 2,
                                            .n_head = 4,
                                            .n_ff = 128,
                                            .n_stack = 4,
                                            .n_proj_ff = 128,
                                            .n_out = 128,
                                            .type = "f32",
                                            .seed = 1};
}

/* Weight (n_out rows of n_in, in the block type) and, when has_bias, its bias. */
static int lin(struct synth_gen *g, const char *wname, const char *bname, int64_t n_in,
               int64_t n_out)
{
    const int64_t ne[4] = {n_in, n_out, 1, 1};
    int rc = synth_add(g, wname, g->type, ne, sqrtf(3.0f / (float)n_in), 0.0f);
    return rc == ERR_OK && bname ? synth_vec(g, bname, n_out, 0.05f, 0.0f) : rc;
}

static int add_keys(struct synth_gen *g, const struct clip_synth_audio_params *p)
{
    struct gguf_writer *w = g->w;
    int rc = gguf_writer_add_str(w, "general.architecture", "clip");
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "general.type", "clip-audio");
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "general.name", "synthetic");
    if (rc == ERR_OK) rc = gguf_writer_add_bool(w, "clip.has_audio_encoder", true);
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "clip.projector_type", "ultravox");
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.audio.embedding_length", (uint32_t)p->n_embd);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.audio.feed_forward_length", (uint32_t)p->n_ff);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "clip.audio.block_count", (uint32_t)p->n_layer);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.audio.attention.head_count", (uint32_t)p->n_head);
    if (rc == ERR_OK) rc = gguf_writer_add_f32(w, "clip.audio.attention.layer_norm_epsilon", 1e-5f);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "clip.audio.projection_dim", (uint32_t)p->n_out);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "clip.audio.num_mel_bins", (uint32_t)p->n_mel);
    if (rc == ERR_OK)
        rc = gguf_writer_add_u32(w, "clip.audio.projector.stack_factor", (uint32_t)p->n_stack);
    if (rc != ERR_OK) return errmsg_set(g->err, rc, "metadata: %s", err_str(rc));
    return ERR_OK;
}

static int add_conv(struct synth_gen *g, int i, int64_t n_in, int64_t n_out)
{
    char w[32], b[32];
    snprintf(w, sizeof w, "a.conv1d.%d.weight", i);
    snprintf(b, sizeof b, "a.conv1d.%d.bias", i);
    const int64_t kne[4] = {3, n_in, n_out, 1}; // (kernel, in channels, out channels)
    const int64_t bne[4] = {1, n_out, 1, 1};
    int rc = synth_add(g, w, QUANT_F32, kne, sqrtf(3.0f / (float)(3 * n_in)), 0.0f);
    return rc == ERR_OK ? synth_add(g, b, QUANT_F32, bne, 0.05f, 0.0f) : rc;
}

static int add_block(struct synth_gen *g, const struct clip_synth_audio_params *p, int il)
{
    static const char *const lins[6] = {"attn_q",   "attn_k", "attn_v",
                                        "attn_out", "ffn_up", "ffn_down"};
    const int64_t e = p->n_embd;
    char n[64], b[64];
    int rc = ERR_OK;
    for (int k = 0; k < 4 && rc == ERR_OK; k++) {
        snprintf(n, sizeof n, "a.blk.%d.ln%d.%s", il, 1 + k / 2, k % 2 ? "bias" : "weight");
        rc = synth_vec(g, n, e, 0.1f, k % 2 ? 0.0f : 1.0f);
    }
    for (int k = 0; k < 6 && rc == ERR_OK; k++) {
        snprintf(n, sizeof n, "a.blk.%d.%s.weight", il, lins[k]);
        snprintf(b, sizeof b, "a.blk.%d.%s.bias", il, lins[k]);
        const int64_t n_in = k == 5 ? p->n_ff : e, n_out = k == 4 ? p->n_ff : e;
        rc = lin(g, n, k == 1 ? NULL : b, n_in, n_out); // Whisper's key projection has no bias
    }
    return rc;
}

static int add_tensors(struct synth_gen *g, const struct clip_synth_audio_params *p)
{
    const int64_t e = p->n_embd, stacked = (int64_t)p->n_embd * p->n_stack;
    const int64_t pos[4] = {e, N_POS, 1, 1};
    int rc = add_conv(g, 1, p->n_mel, e);
    if (rc == ERR_OK) rc = add_conv(g, 2, e, e);
    if (rc == ERR_OK) rc = synth_add(g, "a.position_embd.weight", QUANT_F32, pos, 0.5f, 0.0f);
    for (int il = 0; il < p->n_layer && rc == ERR_OK; il++)
        rc = add_block(g, p, il);
    if (rc == ERR_OK) rc = synth_vec(g, "a.post_ln.weight", e, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = synth_vec(g, "a.post_ln.bias", e, 0.05f, 0.0f);
    if (rc == ERR_OK) rc = synth_vec(g, "mm.a.norm_pre.weight", stacked, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = lin(g, "mm.a.mlp.1.weight", NULL, stacked, 2 * (int64_t)p->n_proj_ff);
    if (rc == ERR_OK) rc = synth_vec(g, "mm.a.norm_mid.weight", p->n_proj_ff, 0.1f, 1.0f);
    if (rc == ERR_OK) rc = lin(g, "mm.a.mlp.2.weight", NULL, p->n_proj_ff, p->n_out);
    return rc;
}

static int check(const struct clip_synth_audio_params *p, uint32_t *type, struct errmsg *err)
{
    if (p->n_mel < 1 || p->n_mel > 512)
        return errmsg_set(err, ERR_INVALID, "mel bins must be 1..512");
    if (p->n_embd < 1 || p->n_embd > 16384 || p->n_head < 1 || p->n_embd % p->n_head ||
        p->n_layer < 1 || p->n_layer > 256 || p->n_ff < 1 || p->n_ff > 65536 || p->n_out < 1 ||
        p->n_out > 65536 || p->n_stack < 1 || p->n_stack > 64 || p->n_proj_ff < 1 ||
        p->n_proj_ff > 65536)
        return errmsg_set(err, ERR_INVALID, "bad width, heads, layers, ffn, stack or output");
    if (p->type && strcmp(p->type, "f32") == 0)
        *type = QUANT_F32;
    else if (p->type && strcmp(p->type, "f16") == 0)
        *type = QUANT_F16;
    else
        return errmsg_set(err, ERR_INVALID, "type must be f32 or f16");
    return ERR_OK;
}

int clip_synth_audio_build(const struct clip_synth_audio_params *p, struct gguf_writer **out,
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
