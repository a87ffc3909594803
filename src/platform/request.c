/* Requests and their event buffers. */
#include "platform/request.h"

#include "util/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

void gen_params_defaults(struct gen_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = -1;
    p->max_tokens = -1;
    p->n_batch = 2048; // llama-server's -b default
    p->mirostat_tau = 5.0f;
    p->mirostat_eta = 0.1f;
}

int request_new(enum request_kind kind, const int32_t *prompt, int n_prompt,
                const struct gen_params *params, int max_events, struct request **out)
{
    if (n_prompt < 0 || max_events < 0) return ERR_INVALID;
    struct request *r = mem_calloc(1, sizeof *r);
    if (!r) return ERR_NOMEM;
    r->kind = kind;
    r->params = *params;
    r->params.grammar = NULL;
    r->instance = -1;
    r->preferred_instance = -1;
    r->enable_thinking = -1;
    r->prompt = mem_calloc((size_t)n_prompt + 1, sizeof *r->prompt);
    r->events = mem_calloc((size_t)max_events + 1, sizeof *r->events);
    if (params->grammar) r->params.grammar = mem_strdup(params->grammar);
    bool ok = r->prompt && r->events && (!params->grammar || r->params.grammar);
    if (ok && mutex_init(&r->mu) == ERR_OK) {
        if (cond_init(&r->cv) == ERR_OK) {
            if (n_prompt) memcpy(r->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
            r->n_prompt = n_prompt;
            r->events_cap = max_events;
            atomic_init(&r->refs, 1);
            atomic_init(&r->is_cancelled, false);
            *out = r;
            return ERR_OK;
        }
        mutex_deinit(&r->mu);
    }
    mem_free(r->params.grammar);
    mem_free(r->prompt);
    mem_free(r->events);
    mem_free(r);
    return ERR_NOMEM;
}

int request_set_inputs(struct request *r, const int *lens, int n)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (lens[i] < 1) return ERR_INVALID;
        total += lens[i];
    }
    if (n < 1 || total != r->n_prompt) return ERR_INVALID;
    int *copy = mem_alloc((size_t)n * sizeof *copy);
    if (!copy) return ERR_NOMEM;
    memcpy(copy, lens, (size_t)n * sizeof *copy);
    mem_free(r->input_lens);
    r->input_lens = copy;
    r->n_inputs = n;
    return ERR_OK;
}

void request_retain(struct request *r)
{
    atomic_fetch_add(&r->refs, 1);
}

void request_release(struct request *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
    cond_deinit(&r->cv);
    mutex_deinit(&r->mu);
    mem_free(r->params.grammar);
    mem_free(r->prompt);
    mem_free(r->events);
    mem_free(r->embedding);
    mem_free(r->input_lens);
    mem_free(r->prompt_text);
    mem_free(r->text);
    mem_free(r->progress);
    for (int i = 0; i < r->n_images; i++) {
        mem_free(r->images[i].rgb);
        if (r->images[i].window == 0) mem_free(r->images[i].pcm);
    }
    mem_free(r->images);
    mem_free(r);
}

uint64_t request_image_hash(const unsigned char *rgb, uint32_t w, uint32_t h)
{
    uint64_t x = 14695981039346656037ull;
    const uint32_t dims[2] = {w, h};
    const unsigned char *d = (const unsigned char *)dims;
    for (size_t i = 0; i < sizeof dims; i++)
        x = (x ^ d[i]) * 1099511628211ull;
    const size_t n = (size_t)w * (size_t)h * 3;
    for (size_t i = 0; i < n; i++)
        x = (x ^ rgb[i]) * 1099511628211ull;
    return x;
}

int32_t request_image_token(uint64_t hash, int j)
{
    const uint64_t v = (hash + (uint64_t)j * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    return -1 - (int32_t)(v >> 33); // 31 bits: -2^31 .. -1
}

int request_add_image(struct request *r, int pos, int n_tok, unsigned char *rgb, uint32_t w,
                      uint32_t h)
{
    const int prev_end =
        r->n_images ? r->images[r->n_images - 1].pos + r->images[r->n_images - 1].n_tok : 0;
    const uint64_t hash = request_image_hash(rgb, w, h);
    bool ok = n_tok >= 1 && pos >= prev_end && pos <= r->n_prompt - n_tok;
    for (int j = 0; ok && j < n_tok; j++)
        ok = r->prompt[pos + j] == request_image_token(hash, j);
    if (!ok) {
        mem_free(rgb);
        return ERR_INVALID;
    }
    struct request_image *im = mem_realloc(r->images, (size_t)(r->n_images + 1) * sizeof *im);
    if (!im) {
        mem_free(rgb);
        return ERR_NOMEM;
    }
    r->images = im;
    im[r->n_images++] = (struct request_image){
        .pos = pos, .n_tok = n_tok, .hash = hash, .rgb = rgb, .w = w, .h = h};
    return ERR_OK;
}

uint64_t request_audio_window_key(uint64_t clip_hash, int w)
{
    const uint64_t x = (14695981039346656037ull ^ clip_hash) * 1099511628211ull;
    return (x ^ ((uint64_t)w + 1) * 0x9E3779B97F4A7C15ull) * 1099511628211ull;
}

uint64_t request_audio_hash(const float *pcm, size_t n_samples)
{
    uint64_t x = 14695981039346656037ull;
    const unsigned char *d = (const unsigned char *)pcm;
    for (size_t i = 0; i < n_samples * sizeof(float); i++)
        x = (x ^ d[i]) * 1099511628211ull;
    return (x ^ 0xA0D10ull) * 1099511628211ull; // never an image's hash of the same bytes
}

int request_add_audio(struct request *r, int pos, int n_tok, int n_windows, float *pcm,
                      size_t n_samples)
{
    const int prev_end =
        r->n_images ? r->images[r->n_images - 1].pos + r->images[r->n_images - 1].n_tok : 0;
    const uint64_t clip = request_audio_hash(pcm, n_samples);
    int64_t n_all = (int64_t)n_tok * n_windows;
    bool ok = n_tok >= 1 && n_windows >= 1 && pos >= prev_end && n_all <= r->n_prompt - pos;
    for (int w = 0; ok && w < n_windows; w++) {
        const uint64_t h = request_audio_window_key(clip, w);
        for (int j = 0; ok && j < n_tok; j++)
            ok = r->prompt[pos + w * n_tok + j] == request_image_token(h, j);
    }
    struct request_image *im =
        ok ? mem_realloc(r->images, (size_t)(r->n_images + n_windows) * sizeof *im) : NULL;
    if (!im) {
        mem_free(pcm);
        return ok ? ERR_NOMEM : ERR_INVALID;
    }
    r->images = im;
    for (int w = 0; w < n_windows; w++)
        im[r->n_images++] = (struct request_image){.pos = pos + w * n_tok,
                                                   .n_tok = n_tok,
                                                   .hash = request_audio_window_key(clip, w),
                                                   .pcm = pcm,
                                                   .n_samples = n_samples,
                                                   .clip_hash = clip,
                                                   .window = w};
    return ERR_OK;
}

void request_mark_started(struct request *r)
{
    mutex_lock(&r->mu);
    r->is_started = true;
    mutex_unlock(&r->mu);
}

int request_push_event(struct request *r, const struct gen_event *ev)
{
    int rc = ERR_OK;
    mutex_lock(&r->mu);
    if (r->n_events >= r->events_cap)
        rc = ERR_LIMIT;
    else
        r->events[r->n_events++] = *ev;
    cond_broadcast(&r->cv);
    mutex_unlock(&r->mu);
    return rc;
}

int request_push_text(struct request *r, const char *text, size_t len)
{
    int rc = ERR_OK;
    mutex_lock(&r->mu);
    if (r->n_events >= r->events_cap || len > UINT32_MAX || r->text_len > UINT32_MAX - len) {
        rc = ERR_LIMIT;
    } else if (r->text_len + len > r->text_cap) {
        size_t cap = r->text_cap ? r->text_cap : 256;
        while (cap < r->text_len + len)
            cap = cap > SIZE_MAX / 2 ? r->text_len + len : cap * 2;
        char *grown = mem_realloc(r->text, cap);
        if (!grown)
            rc = ERR_NOMEM;
        else
            r->text = grown, r->text_cap = cap;
    }
    if (rc == ERR_OK) {
        memcpy(r->text + r->text_len, text, len);
        r->events[r->n_events++] = (struct gen_event){
            .token = -1, .text_off = (uint32_t)r->text_len, .text_len = (uint32_t)len};
        r->text_len += len;
    }
    cond_broadcast(&r->cv);
    mutex_unlock(&r->mu);
    return rc;
}

int request_copy_text(struct request *r, const struct gen_event *ev, struct buf *out)
{
    mutex_lock(&r->mu);
    int rc = ERR_OK;
    if ((size_t)ev->text_off + ev->text_len <= r->text_len)
        rc = buf_append(out, r->text + ev->text_off, ev->text_len);
    mutex_unlock(&r->mu);
    return rc;
}

int request_set_text_prompt(struct request *r, const char *text, size_t len, const char *role)
{
    char *copy = mem_alloc(len + 1);
    if (!copy) return ERR_NOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    mem_free(r->prompt_text);
    r->prompt_text = copy;
    r->prompt_text_len = len;
    snprintf(r->prompt_role, sizeof r->prompt_role, "%s", role ? role : "user");
    return ERR_OK;
}

int request_set_embedding(struct request *r, const float *v, int n)
{
    float *copy = mem_alloc((size_t)n * sizeof *copy);
    if (!copy) return ERR_NOMEM;
    memcpy(copy, v, (size_t)n * sizeof *copy);
    mutex_lock(&r->mu);
    mem_free(r->embedding);
    r->embedding = copy;
    r->n_embedding = n;
    mutex_unlock(&r->mu);
    return ERR_OK;
}

void request_set_timings(struct request *r, const struct request_timings *t)
{
    mutex_lock(&r->mu);
    r->timings = *t;
    mutex_unlock(&r->mu);
}

void request_finish(struct request *r, enum finish_reason reason, int error_status,
                    const char *message)
{
    mutex_lock(&r->mu);
    if (r->finish == FINISH_NONE) {
        r->finish = reason;
        r->error_status = error_status;
        if (message) errmsg_set(&r->err, ERR_INVALID, "%s", message);
    }
    cond_broadcast(&r->cv);
    mutex_unlock(&r->mu);
}

void request_outcome_fail(struct request_outcome *o, int status, const char *msg)
{
    if (o->reason != FINISH_NONE) return;
    o->reason = FINISH_ERROR;
    o->error_status = status;
    snprintf(o->error_msg, sizeof o->error_msg, "%s", msg ? msg : "");
}

void request_deliver(struct request *r, const struct request_outcome *o)
{
    bool is_error = o->reason == FINISH_ERROR;
    request_finish(r, o->reason, is_error ? o->error_status : 0, is_error ? o->error_msg : NULL);
    request_release(r);
}

int request_wait_events(struct request *r, int *cursor, struct gen_event *out, int max,
                        int timeout_ms, enum finish_reason *finish)
{
    mutex_lock(&r->mu);
    while (r->n_events <= *cursor && r->finish == FINISH_NONE &&
           r->n_progress_read == r->n_progress) {
        if (timeout_ms < 0) {
            cond_wait(&r->cv, &r->mu);
        } else if (cond_wait_ms(&r->cv, &r->mu, timeout_ms) == ERR_TIMEOUT) {
            break;
        }
    }
    int n = 0;
    while (n < max && *cursor < r->n_events)
        out[n++] = r->events[(*cursor)++];
    // Report the outcome only once every event before it has been handed out.
    *finish = *cursor < r->n_events ? FINISH_NONE : r->finish;
    mutex_unlock(&r->mu);
    return n;
}

void request_push_progress(struct request *r, const struct request_progress *p)
{
    if (!r->params.is_return_progress) return;
    mutex_lock(&r->mu);
    if (r->n_progress == r->progress_cap) {
        int cap = r->progress_cap ? r->progress_cap * 2 : 8;
        struct request_progress *grown =
            cap > r->progress_cap ? mem_realloc(r->progress, (size_t)cap * sizeof *grown) : NULL;
        if (grown) r->progress = grown, r->progress_cap = cap;
    }
    if (r->n_progress < r->progress_cap)
        r->progress[r->n_progress++] = *p;
    else if (r->n_progress > r->n_progress_read)
        r->progress[r->n_progress - 1] = *p;
    cond_broadcast(&r->cv);
    mutex_unlock(&r->mu);
}

int request_take_progress(struct request *r, struct request_progress *out, int max)
{
    mutex_lock(&r->mu);
    int n = 0;
    while (n < max && r->n_progress_read < r->n_progress)
        out[n++] = r->progress[r->n_progress_read++];
    mutex_unlock(&r->mu);
    return n;
}

void request_cancel(struct request *r)
{
    atomic_store(&r->is_cancelled, true);
}

enum finish_reason request_outcome(struct request *r, int *error_status, struct errmsg *err,
                                   struct request_timings *timings)
{
    mutex_lock(&r->mu);
    enum finish_reason f = r->finish;
    if (error_status) *error_status = r->error_status;
    if (err) *err = r->err;
    if (timings) *timings = r->timings;
    mutex_unlock(&r->mu);
    return f;
}
