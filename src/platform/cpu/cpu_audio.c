/* The cpu platform's audio path (see cpu_audio.h). */
#include "platform/cpu/cpu_audio.h"

#include "engine/gguf/gguf.h"
#include "engine/mtmd/audio_mel.h"
#include "engine/mtmd/clip_audio.h"
#include "util/checked.h"
#include "util/log.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

/* Immutable after load except the spectrogram kept (scheduler thread). */
struct cpu_audio {
    struct clip_audio *clip;
    float *mel;         // (n_mel_windows, n_mel, AUDIO_MEL_WINDOW) of the clip last encoded
    uint64_t mel_clip;  // request_audio_hash of that clip; valid when mel is not NULL
    size_t mel_samples; // its length in samples
    int64_t n_mel_windows;
    int64_t n_mels; // spectrograms computed
};

bool cpu_audio_claims(const char *path)
{
    struct gguf *g = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    if (gguf_open(path, &g, &err) != ERR_OK) return false;
    struct str s;
    bool is_audio = gguf_get_str(g, "general.type", &s) == ERR_OK && s.len == 10 &&
                    memcmp(s.ptr, "clip-audio", 10) == 0;
    gguf_close(g);
    return is_audio;
}

int cpu_audio_load(const char *path, struct cpu_audio **out, struct errmsg *err)
{
    struct cpu_audio *a = mem_calloc(1, sizeof *a);
    if (!a) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = clip_audio_load(path, &a->clip, err);
    if (rc != ERR_OK) {
        mem_free(a);
        return rc;
    }
    const struct clip_audio_info *in = clip_audio_get_info(a->clip);
    log_info("audio projector %s: %s, %d mel bins, %d embeddings per 30 s", path,
             in->projector_name, in->n_mel, in->n_window_tokens);
    *out = a;
    return ERR_OK;
}

void cpu_audio_free(struct cpu_audio *a)
{
    if (!a) return;
    mem_free(a->mel);
    clip_audio_free(a->clip);
    mem_free(a);
}

bool cpu_audio_is_changed(const struct cpu_audio *a)
{
    return clip_audio_is_changed(a->clip);
}

int cpu_audio_window_tokens(const struct cpu_audio *a)
{
    return clip_audio_get_info(a->clip)->n_window_tokens;
}

int cpu_audio_n_embd(const struct cpu_audio *a)
{
    return clip_audio_get_info(a->clip)->n_out_embd;
}

void cpu_audio_describe(const struct cpu_audio *a, struct platform_model_desc *out)
{
    out->has_audio = true;
    out->audio_window_tokens = cpu_audio_window_tokens(a);
    out->audio_n_windows = audio_mel_n_windows;
    // The reference's mtmd puts no text around an Ultravox clip (mtmd.cpp: aud_beg/aud_end
    // stay empty for PROJECTOR_TYPE_ULTRAVOX); its windows follow each other directly.
    out->audio_begin = "";
    out->audio_end = "";
    snprintf(out->projector, sizeof out->projector, "%s",
             clip_audio_get_info(a->clip)->projector_name);
}

/* The spectrogram of item's clip in a->mel, computed unless it is the one kept. */
static int clip_mel(struct cpu_audio *a, const struct request_image *item)
{
    if (a->mel && a->mel_clip == item->clip_hash && a->mel_samples == item->n_samples)
        return ERR_OK;
    mem_free(a->mel);
    a->mel = NULL;
    const int n_mel = clip_audio_get_info(a->clip)->n_mel;
    const int64_t n_win = audio_mel_n_windows(item->n_samples);
    size_t n;
    if (!size_mul((size_t)n_win, (size_t)n_mel * AUDIO_MEL_WINDOW, &n) ||
        n > SIZE_MAX / sizeof(float))
        return ERR_NOMEM;
    float *mel = mem_alloc(n * sizeof(float));
    if (!mel) return ERR_NOMEM;
    int rc = audio_mel_compute(item->pcm, item->n_samples, n_mel, mel);
    if (rc != ERR_OK) {
        mem_free(mel);
        return rc;
    }
    a->mel = mel;
    a->mel_clip = item->clip_hash;
    a->mel_samples = item->n_samples;
    a->n_mel_windows = n_win;
    a->n_mels++;
    return ERR_OK;
}

int cpu_audio_encode(struct cpu_audio *a, struct threadpool *tp, const struct request_image *item,
                     float *out)
{
    if (!item->pcm || item->window < 0 || item->window >= audio_mel_n_windows(item->n_samples))
        return ERR_INVALID;
    int rc = clip_mel(a, item);
    if (rc != ERR_OK) return rc;
    const size_t per = (size_t)clip_audio_get_info(a->clip)->n_mel * AUDIO_MEL_WINDOW;
    return clip_audio_encode_window(a->clip, tp, a->mel + (size_t)item->window * per, out);
}

int64_t cpu_audio_n_mels(const struct cpu_audio *a)
{
    return a ? a->n_mels : 0;
}
