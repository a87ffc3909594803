/* A generation or embedding request and its token stream: the unit of work a platform runs.
 * (It lives in platform/ rather than core/ because platforms write into it and may not
 * include core/.) Shared by the HTTP thread that
 * created it (reader) and the platform thread that runs it (writer); reference-counted, so
 * either side may finish first. The event buffer is sized for the whole answer at creation,
 * so the writer never blocks on a slow reader and never allocates per token. */
#ifndef PLATFORM_REQUEST_H
#define PLATFORM_REQUEST_H

#include "util/buf.h"
#include "util/err.h"
#include "util/thread.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The SLOT kinds act on one instance's prompt cache (llama-server's slot save/restore/erase):
 * they run only on the instance preferred_instance names (elsewhere they fail 503, busy).
 * SAVE pushes the cached tokens as events; ERASE pushes them too, then empties the cache;
 * RESTORE makes the cache hold its prompt (computing what is not cached yet). */
enum request_kind {
    REQUEST_GENERATE = 0,
    REQUEST_EMBED = 1,
    REQUEST_SLOT_SAVE = 2,
    REQUEST_SLOT_RESTORE = 3,
    REQUEST_SLOT_ERASE = 4,
};

enum finish_reason {
    FINISH_NONE = 0,      // still running
    FINISH_STOP = 1,      // end-of-generation token or a stop string
    FINISH_LENGTH = 2,    // max_tokens or the context is full
    FINISH_CANCELLED = 3, // client went away or the model was unloaded
    FINISH_ERROR = 4,     // see err
};

#define GEN_MAX_LOGIT_BIAS 1024

/* Sampling and limits, after merging server defaults ← model default_params ← request. */
struct gen_params {
    float temperature;    // <= 0: greedy
    int top_k;            // 0: off
    float top_p;          // 1: off
    float min_p;          // 0: off
    float repeat_penalty; // 1: off
    int repeat_last_n;    // tokens considered by the penalties
    float frequency_penalty;
    float presence_penalty;
    int64_t seed;                // -1: random
    int max_tokens;              // -1: until a stop or the context is full
    int n_probs;                 // top log-probabilities to report per token (0: none)
    bool is_post_sampling_probs; // report them from the distribution drawn from (after the chain)
    bool ignore_eos; // end-of-generation tokens are never sampled (banned), unless a grammar runs
    bool is_context_shift;   // a full context drops the older half (after n_keep) and goes on
    int n_keep;              // tokens kept at the start on a shift (-1: the whole prompt)
    int n_batch;             // prompt tokens an instance feeds per step at most (-b); 0: any
    bool is_return_progress; // record prompt progress points (request_push_progress)
    int mirostat;            // 0 off, 1 or 2: Mirostat v1/v2 instead of top-k/top-p/min-p
    float mirostat_tau;      // target surprise (bits)
    float mirostat_eta;      // learning rate
    int n_logit_bias;
    struct {
        int32_t token;
        float bias; // -INFINITY bans the token
    } logit_bias[GEN_MAX_LOGIT_BIAS];
    char *grammar; // GBNF text (owned) or NULL
};

#define GEN_MAX_PROBS 20

/* One step of output: a token (token-IO platforms), or a piece of text (text-IO platforms,
 * which tokenize inside their runtime: token is -1 and the text is bytes
 * [text_off, text_off + text_len) of the request's text, read with request_copy_text). */
struct gen_event {
    int32_t token;
    uint32_t text_off, text_len;
    float logprob; // of the chosen token (when n_probs > 0); natural log of its probability
    bool is_post;  // the probabilities are post-sampling (is_post_sampling_probs)
    int n_probs;
    struct {
        int32_t token;
        float logprob;
    } top[GEN_MAX_PROBS];
};

/* How far a request's prompt is (llama-server's prompt_progress): of total prompt tokens,
 * cache came from the instance's cache and processed (cache included) are in it now. */
struct request_progress {
    int total;
    int cache;
    int processed;
    double time_ms; // since the request started on its instance
};

struct request_timings {
    int n_prompt; // prompt tokens evaluated (excluding cached)
    int n_cached; // prompt tokens reused from the instance's cache
    int n_predicted;
    double prompt_ms;
    double predicted_ms;
};

struct request {
    atomic_int refs;
    enum request_kind kind;
    int32_t *prompt; // owned; n_prompt tokens
    int n_prompt;
    struct gen_params params;
    char *prompt_text;        // text-IO platforms: the prompt as text (owned) or NULL;
    size_t prompt_text_len;   // prompt/n_prompt are then empty
    char prompt_role[16];     // the role the text is sent as ("user", "tool")
    int enable_thinking;      // -1 unset, 0, 1 (runtimes that take it as an input flag)
    int *input_lens;          // REQUEST_EMBED: (n_inputs) token counts of the inputs that
    int n_inputs;             // prompt concatenates (owned); NULL/0: the prompt is one input
    atomic_bool is_cancelled; // set by the reader or by unload; checked every step
    int instance;             // instance index while running, -1 otherwise (owned by the pool)
    int preferred_instance;   // run here when it is idle (llama.cpp's id_slot); -1: any

    /* Guarded by mu. */
    struct mutex mu;
    struct cond cv;
    struct gen_event *events; // (events_cap) written by the platform
    int n_events;
    int events_cap;
    char *text; // (text_cap) text events' bytes, appended by the platform
    size_t text_len, text_cap;
    float *embedding; // (n_embedding) for REQUEST_EMBED
    int n_embedding;
    enum finish_reason finish;
    int error_status; // HTTP status for FINISH_ERROR (429, 500, …)
    struct errmsg err;
    struct request_timings timings;
    bool is_started;                   // an instance picked it up
    struct request_progress *progress; // (progress_cap) with params.is_return_progress
    int n_progress, progress_cap;
    int n_progress_read; // handed to the reader so far

    struct request_image *images; // (n_images) in prompt order, owned; set before submitting
    int n_images;
};

/* An image of the prompt: its pixels, and the n_tok placeholder positions from pos on that
 * its embeddings fill (request_image_token ids). An audio clip is one item per 30 s window
 * (pcm set, rgb NULL): the window's positions, its samples shared by the clip's items. */
struct request_image {
    int pos;            // first prompt position
    int n_tok;          // positions
    uint64_t hash;      // request_image_hash of the pixels; audio: request_audio_window_key
    unsigned char *rgb; // (w * h * 3) RGB8, owned (mem_alloc); NULL for audio
    uint32_t w, h;      // pixels
    float *pcm;         // audio: the clip's 16 kHz mono samples, owned by its window 0 item
    size_t n_samples;   // audio: samples in pcm
    uint64_t clip_hash; // audio: request_audio_hash of the whole clip
    int window;         // audio: which 30 s window, 0-based
};

/* Creates a request owning a copy of the prompt, with room for max_events events. refs = 1
 * (the creator's). ERR_NOMEM. The params are copied; params->grammar, when set, is copied. */
int request_new(enum request_kind kind, const int32_t *prompt, int n_prompt,
                const struct gen_params *params, int max_events, struct request **out);

/* REQUEST_EMBED: the prompt holds n inputs back to back, lens[i] tokens each, embedded
 * separately; the embedding is then n rows of n_embd floats in input order. Call before
 * submitting. ERR_INVALID (n < 1, a length < 1, or the lengths do not add up to n_prompt),
 * ERR_NOMEM. */
int request_set_inputs(struct request *r, const int *lens, int n);

/* Adds an image whose embeddings fill prompt positions pos .. pos + n_tok - 1, which must hold
 * request_image_token(hash, 0 .. n_tok - 1). Takes ownership of rgb (mem_alloc'd, freed with
 * the request, also on failure). Images must come in prompt order without overlapping. Call
 * before submitting. ERR_INVALID (positions outside the prompt, out of order, or not holding
 * the placeholders), ERR_NOMEM. */
int request_add_image(struct request *r, int pos, int n_tok, unsigned char *rgb, uint32_t w,
                      uint32_t h);

/* Adds an audio clip of n_windows 30 s windows whose embeddings fill prompt positions pos ..
 * pos + n_windows * n_tok - 1, window after window; window w's position j must hold
 * request_image_token(request_audio_window_key(request_audio_hash(pcm, n_samples), w), j). Takes ownership of pcm (16 kHz mono,
 * mem_alloc'd, freed with the request, also on failure). Same order rules and errors as
 * request_add_image. */
int request_add_audio(struct request *r, int pos, int n_tok, int n_windows, float *pcm,
                      size_t n_samples);

/* 64-bit FNV-1a of a clip's samples, and the key of its window w (0-based) drawn from it:
 * what tells clips and windows apart in the prompt cache and the embedding cache. Cannot
 * fail. */
uint64_t request_audio_hash(const float *pcm, size_t n_samples);
uint64_t request_audio_window_key(uint64_t clip_hash, int w);

/* 64-bit FNV-1a of an image's dimensions and RGB8 pixels: the key that finds a repeated image
 * (its embeddings are not computed twice) and that makes its placeholders differ from another
 * image's. Cannot fail. */
uint64_t request_image_hash(const unsigned char *rgb, uint32_t w, uint32_t h);

/* The placeholder id prompt position j of an image takes: negative (never a vocabulary id) and
 * drawn from the hash, so two different images' placeholders differ (but for a 2^-31 chance
 * per position) and a prompt cache never reuses one image's positions for another's. Cannot
 * fail. */
int32_t request_image_token(uint64_t hash, int j);

/* Reference counting; the last request_release frees everything. NULL is a no-op. */
void request_retain(struct request *r);
void request_release(struct request *r);

/* Writer side (platform thread). request_push_event returns ERR_LIMIT when the buffer is full
 * (the caller then finishes with FINISH_LENGTH). request_finish records the outcome, wakes the
 * reader; later calls are ignored (the first outcome sticks). */
void request_mark_started(struct request *r);
int request_push_event(struct request *r, const struct gen_event *ev);
int request_set_embedding(struct request *r, const float *v, int n);
/* Text-IO platforms: appends one text event (len > 0 bytes, complete UTF-8 the caller
 * checked). ERR_LIMIT when the event buffer is full, ERR_NOMEM. Never blocks on the reader
 * (takes the request's lock briefly). */
int request_push_text(struct request *r, const char *text, size_t len);
void request_finish(struct request *r, enum finish_reason reason, int error_status,
                    const char *message);

/* How a request ended, held by the platform until it may wake the reader: a platform
 * returns the instance to its pool first, so a client that sends its next request as soon as
 * this one answers finds the instance (and its prompt cache) free instead of busy. */
struct request_outcome {
    enum finish_reason reason; // FINISH_NONE while running
    int error_status;          // for FINISH_ERROR
    char error_msg[ERRMSG_CAP];
};

/* Records a failure in o unless an outcome is already set (the first one sticks). */
void request_outcome_fail(struct request_outcome *o, int status, const char *msg);

/* request_finish with o, then request_release: the platform's last act on r. */
void request_deliver(struct request *r, const struct request_outcome *o);

/* Writer side, params.is_return_progress only (otherwise a no-op): records a progress point
 * and wakes the reader. Cannot fail: when the list cannot grow, the point replaces the last
 * one unread (the reader then sees fewer points, the newest always). */
void request_push_progress(struct request *r, const struct request_progress *p);

/* Reader side: copies up to max progress points not handed out yet, in order; returns how
 * many. request_wait_events returns when there are some. Cannot fail. */
int request_take_progress(struct request *r, struct request_progress *out, int max);

/* Records the timings (writer side). */
void request_set_timings(struct request *r, const struct request_timings *t);

/* Reader side (HTTP thread). Waits until there are events beyond *cursor or the request
 * finished, up to timeout_ms (-1: no limit). Copies up to max new events into out, advances
 * *cursor, and returns the number copied; *finish is the outcome so far (FINISH_NONE while
 * running). Returns 0 with FINISH_NONE on timeout, or when only progress points arrived
 * (request_take_progress). */
int request_wait_events(struct request *r, int *cursor, struct gen_event *out, int max,
                        int timeout_ms, enum finish_reason *finish);

/* Appends the text of event ev (a text event from request_wait_events) to out. ERR_OK,
 * ERR_NOMEM. Reader side. */
int request_copy_text(struct request *r, const struct gen_event *ev, struct buf *out);

/* Text-IO platforms: sets the prompt text (copied) and the role it is sent as. Call before
 * submitting. ERR_NOMEM. */
int request_set_text_prompt(struct request *r, const char *text, size_t len, const char *role);

/* Asks the platform to stop at its next step. Thread-safe; idempotent. */
void request_cancel(struct request *r);

/* The outcome (FINISH_NONE while running) and its details, copied under the lock. */
enum finish_reason request_outcome(struct request *r, int *error_status, struct errmsg *err,
                                   struct request_timings *timings);

/* Default sampling parameters (llama.cpp's defaults). Cannot fail. */
void gen_params_defaults(struct gen_params *p);

#endif
