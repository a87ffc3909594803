/* The cpu platform's image path (see cpu_vision.h). */
#include "platform/cpu/cpu_vision.h"

#include "engine/mtmd/clip.h"
#include "engine/mtmd/clip_qwen2vl.h"
#include "platform/cpu/cpu.h"
#include "platform/cpu/cpu_audio.h"
#include "util/log.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define CPU_VISION_CACHE 8 // images whose embeddings are kept; more than a batch holds

struct cached {
    uint64_t hash; // request_image_hash
    uint32_t w, h;
    float *embd;  // (n_tok, n_embd), NULL when the entry is empty
    int n_tok;    // its rows
    int cap;      // rows allocated
    int64_t used; // tick of the last use (LRU)
};

/* Immutable after load except the cache and counters (scheduler thread). */
struct cpu_vision {
    struct clip_model *clip;   // fixed-size image projectors (gemma3), or NULL
    struct clip_qwen2vl *qwen; // qwen2.5vl_merger (images keep their size), or NULL
    struct cpu_audio *audio;   // an audio projector (its windows use the cache below), or NULL
    char path[4096];           // the projector's file, named when it changes on disk
    int n_tok, n_embd;         // n_tok: per image or window, 0 when it depends on the size
    float *pixels;             // (3, image_size, image_size) scratch
    struct cached cache[CPU_VISION_CACHE];
    int64_t tick, n_encoded, n_hits;
};

/* Qwen2.5-VL's projector: its images keep their size, so the count is per image. */
static int load_qwen2vl(struct cpu_vision *v, const char *path, int n_embd, struct errmsg *err)
{
    struct errmsg qerr;
    errmsg_clear(&qerr);
    int rc = clip_qwen2vl_load(path, &v->qwen, &qerr);
    if (rc != ERR_OK)
        return rc == ERR_UNSUPPORTED ? rc : errmsg_set(err, rc, "%s: %s", path, qerr.msg);
    const struct clip_qwen2vl_info *in = clip_qwen2vl_get_info(v->qwen);
    v->n_embd = in->n_out_embd;
    if (in->n_out_embd != n_embd)
        return errmsg_set(err, ERR_INVALID,
                          "%s: the projector's embeddings are %d wide but the model's %d; it "
                          "belongs to another model",
                          path, in->n_out_embd, n_embd);
    log_info("projector %s: qwen2.5vl_merger, images at their own size, one embedding per %dx%d "
             "pixels",
             path, 2 * in->patch_size, 2 * in->patch_size);
    return ERR_OK;
}

static int image_tokens_of(const void *ctx, uint32_t w, uint32_t h, int *n_tok, struct errmsg *err)
{
    int gw, gh;
    return cpu_vision_image_grid(ctx, w, h, n_tok, &gw, &gh, err);
}

int cpu_vision_image_grid(const struct cpu_vision *v, uint32_t w, uint32_t h, int *n_tok,
                          int *grid_w, int *grid_h, struct errmsg *err)
{
    *grid_w = *grid_h = 0;
    *n_tok = v->n_tok;
    if (!v->qwen) return ERR_OK;
    uint32_t rw, rh;
    if (clip_qwen2vl_image_size(v->qwen, w, h, &rw, &rh, n_tok) != ERR_OK)
        return errmsg_set(err, ERR_INVALID, "a %ux%u image cannot be resized for the projector", w,
                          h);
    const uint32_t f = 2 * (uint32_t)clip_qwen2vl_get_info(v->qwen)->patch_size;
    *grid_w = (int)(rw / f);
    *grid_h = (int)(rh / f);
    return ERR_OK;
}

/* Preprocesses and encodes one image with the Qwen2.5-VL projector (scratch per image). */
static int encode_qwen2vl(struct cpu_vision *v, struct threadpool *tp,
                          const struct request_image *im, float *out)
{
    uint32_t rw, rh;
    int n;
    int rc = clip_qwen2vl_image_size(v->qwen, im->w, im->h, &rw, &rh, &n);
    if (rc != ERR_OK) return rc;
    float *px = mem_alloc(sizeof(float) * 3 * (size_t)rw * (size_t)rh);
    if (!px) return ERR_NOMEM;
    rc = clip_qwen2vl_preprocess(v->qwen, im->rgb, im->w, im->h, px);
    if (rc == ERR_OK) rc = clip_qwen2vl_encode(v->qwen, tp, px, rw, rh, out);
    mem_free(px);
    return rc;
}

/* An audio projector in the slot: one cache entry per 30 s window (cpu_audio.h). */
static int load_audio(const char *path, int n_embd, int max_batch, struct cpu_vision **out,
                      struct errmsg *err)
{
    struct cpu_vision *v = mem_calloc(1, sizeof *v);
    if (!v) return errmsg_set(err, ERR_NOMEM, "out of memory");
    struct errmsg cerr;
    errmsg_clear(&cerr);
    int rc = cpu_audio_load(path, &v->audio, &cerr);
    if (rc != ERR_OK) {
        errmsg_set(err, rc, "%s: %s", path, cerr.msg);
        goto out_free;
    }
    v->n_tok = cpu_audio_window_tokens(v->audio);
    v->n_embd = cpu_audio_n_embd(v->audio);
    if (v->n_embd != n_embd) {
        rc = errmsg_set(err, ERR_INVALID,
                        "%s: the projector's embeddings are %d wide but the model's %d; it "
                        "belongs to another model",
                        path, v->n_embd, n_embd);
        goto out_free;
    }
    if (v->n_tok > max_batch) {
        rc = errmsg_set(err, ERR_INVALID, "%s: %d positions per audio window exceed a batch of %d",
                        path, v->n_tok, max_batch);
        goto out_free;
    }
    *out = v;
    return ERR_OK;
out_free:
    cpu_vision_free(v);
    return rc;
}

/* The projector file at mmproj_path, image or audio. */
static int load_projector(const char *mmproj_path, int n_embd, int max_batch,
                          struct cpu_vision **out, struct errmsg *err)
{
    if (cpu_audio_claims(mmproj_path)) return load_audio(mmproj_path, n_embd, max_batch, out, err);
    struct cpu_vision *v = mem_calloc(1, sizeof *v);
    if (!v) return errmsg_set(err, ERR_NOMEM, "out of memory");
    struct errmsg cerr;
    errmsg_clear(&cerr);
    int rc = clip_load(mmproj_path, &v->clip, &cerr);
    if (rc == ERR_UNSUPPORTED) {
        rc = load_qwen2vl(v, mmproj_path, n_embd, err);
        if (rc != ERR_UNSUPPORTED) goto out_qwen;
    }
    if (rc != ERR_OK) {
        errmsg_set(err, rc, "%s: %s", mmproj_path, cerr.msg);
        goto out_free;
    }
    const struct clip_info *in = clip_get_info(v->clip);
    v->n_tok = in->n_out_tokens;
    v->n_embd = in->n_out_embd;
    if (in->n_out_embd != n_embd) {
        rc = errmsg_set(err, ERR_INVALID,
                        "%s: the projector's embeddings are %d wide but the model's %d; it "
                        "belongs to another model",
                        mmproj_path, in->n_out_embd, n_embd);
        goto out_free;
    }
    if (in->n_out_tokens > max_batch) {
        rc = errmsg_set(err, ERR_INVALID, "%s: %d positions per image exceed a batch of %d",
                        mmproj_path, in->n_out_tokens, max_batch);
        goto out_free;
    }
    v->pixels = mem_alloc(sizeof(float) * 3 * (size_t)in->image_size * (size_t)in->image_size);
    if (!v->pixels) {
        rc = errmsg_set(err, ERR_NOMEM, "out of memory");
        goto out_free;
    }
    log_info("projector %s: %s, %dx%d images, %d embeddings each", mmproj_path, in->projector_name,
             in->image_size, in->image_size, in->n_out_tokens);
    *out = v;
    return ERR_OK;
out_qwen:
    if (rc == ERR_OK) {
        *out = v;
        return ERR_OK;
    }
out_free:
    cpu_vision_free(v);
    return rc;
}

int cpu_vision_load(const char *mmproj_path, const char *model_path, int n_embd, int max_batch,
                    struct cpu_vision **out, struct errmsg *err)
{
    char found[4096];
    *out = NULL;
    if (!mmproj_path || !mmproj_path[0]) {
        int n = cpu_find_mmproj(model_path, found, sizeof found);
        if (n == 0) return ERR_OK;
        if (n > 1)
            return errmsg_set(err, ERR_INVALID,
                              "%s holds %d mmproj-*.gguf projectors; name one with mmproj_path",
                              model_path, n);
        mmproj_path = found;
    }
    int rc = load_projector(mmproj_path, n_embd, max_batch, out, err);
    if (rc == ERR_OK) snprintf((*out)->path, sizeof(*out)->path, "%s", mmproj_path);
    return rc;
}

bool cpu_vision_is_changed(const struct cpu_vision *v, struct errmsg *why)
{
    if (!v) return false;
    bool is_changed = v->clip    ? clip_is_changed(v->clip)
                      : v->qwen  ? clip_qwen2vl_is_changed(v->qwen)
                      : v->audio ? cpu_audio_is_changed(v->audio)
                                 : false;
    if (is_changed) cpu_file_changed_msg(v->path, why);
    return is_changed;
}

void cpu_vision_free(struct cpu_vision *v)
{
    if (!v) return;
    for (int i = 0; i < CPU_VISION_CACHE; i++)
        mem_free(v->cache[i].embd);
    mem_free(v->pixels);
    clip_free(v->clip);
    clip_qwen2vl_free(v->qwen);
    cpu_audio_free(v->audio);
    mem_free(v);
}

void cpu_vision_describe(const struct cpu_vision *v, struct platform_model_desc *out)
{
    out->has_vision = v != NULL && (v->clip != NULL || v->qwen != NULL);
    out->image_tokens = v && v->clip ? v->n_tok : 0; // 0 for qwen: counted per image
    out->image_begin = "";
    out->image_end = "";
    out->projector[0] = '\0';
    out->image_tokens_of = NULL;
    out->image_ctx = NULL;
    if (!v) return;
    if (v->audio) {
        cpu_audio_describe(v->audio, out);
        return;
    }
    if (v->qwen) {
        snprintf(out->projector, sizeof out->projector, "qwen2.5vl_merger");
        out->image_begin = "<|vision_start|>";
        out->image_end = "<|vision_end|>";
        out->image_tokens_of = image_tokens_of;
        out->image_ctx = v;
        return;
    }
    const struct clip_info *in = clip_get_info(v->clip);
    snprintf(out->projector, sizeof out->projector, "%s", in->projector_name);
    if (in->projector == CLIP_PROJECTOR_GEMMA3) {
        out->image_begin = "<start_of_image>";
        out->image_end = "<end_of_image>";
    }
}

bool cpu_vision_needs_mrope(const struct cpu_vision *v)
{
    return v && v->qwen;
}

bool cpu_vision_is_noncausal(const struct cpu_vision *v)
{
    return v && v->clip && clip_get_info(v->clip)->projector == CLIP_PROJECTOR_GEMMA3;
}

int cpu_vision_embed(struct cpu_vision *v, struct threadpool *tp, const struct request_image *im,
                     const float **out, struct errmsg *err)
{
    int n_tok = v->n_tok, gw = 0, gh = 0;
    if (v->qwen && cpu_vision_image_grid(v, im->w, im->h, &n_tok, &gw, &gh, err) != ERR_OK)
        return ERR_INVALID;
    if (im->n_tok != n_tok)
        return errmsg_set(err, ERR_INVALID, "an image takes %d positions, not %d", n_tok,
                          im->n_tok);
    if ((im->pcm != NULL) != (v->audio != NULL))
        return errmsg_set(err, ERR_INVALID, "this projector takes %s, not %s",
                          v->audio ? "audio" : "images", v->audio ? "images" : "audio");
    v->tick++;
    struct cached *victim = &v->cache[0];
    for (int i = 0; i < CPU_VISION_CACHE; i++) {
        struct cached *c = &v->cache[i];
        if (c->embd && c->used && c->hash == im->hash && c->w == im->w && c->h == im->h) {
            c->used = v->tick;
            v->n_hits++;
            *out = c->embd;
            return ERR_OK;
        }
        if (!c->embd || (victim->embd && c->used < victim->used)) victim = c;
    }
    if (victim->embd && victim->cap < n_tok) {
        mem_free(victim->embd);
        victim->embd = NULL;
    }
    if (!victim->embd) {
        victim->embd = mem_alloc(sizeof(float) * (size_t)n_tok * (size_t)v->n_embd);
        if (!victim->embd) return errmsg_set(err, ERR_NOMEM, "out of memory for an image");
        victim->cap = n_tok;
    }
    victim->used = 0; // invalid until encoded
    victim->hash = 0;
    victim->n_tok = n_tok;
    int rc = v->audio  ? cpu_audio_encode(v->audio, tp, im, victim->embd)
             : v->qwen ? encode_qwen2vl(v, tp, im, victim->embd)
                       : clip_preprocess(v->clip, im->rgb, im->w, im->h, v->pixels);
    if (rc == ERR_OK && v->clip) rc = clip_encode(v->clip, tp, v->pixels, victim->embd);
    if (rc != ERR_OK) {
        mem_free(victim->embd);
        victim->embd = NULL;
        return errmsg_set(err, rc, "cannot encode the image: %s", err_str(rc));
    }
    victim->hash = im->hash;
    victim->w = im->w;
    victim->h = im->h;
    victim->used = v->tick;
    v->n_encoded++;
    *out = victim->embd;
    return ERR_OK;
}

void cpu_vision_counts(const struct cpu_vision *v, int64_t *n_encoded, int64_t *n_hits)
{
    *n_encoded = v ? v->n_encoded : 0;
    *n_hits = v ? v->n_hits : 0;
}
