/* Generation sessions: token events → text deltas. */
#include "api/generation/generate.h"

#include "api/client_watch.h"
#include "api/errors.h"
#include "api/metrics.h"
#include "text/stopstr.h"
#include "text/tokenizer/tokenizer.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define EVENTS_PER_STEP 64

struct gen_session {
    struct model *model;         // borrowed
    struct request *req;         // one reference
    const struct tokenizer *tok; // borrowed from the model
    struct tok_stream detok;
    struct stopstr *stops; // NULL when there are none
    struct reasoning_stream *reasoning;
    struct toolcall_stream *tools; // NULL unless parse_tools or harmony
    struct metrics *metrics;       // borrowed or NULL
    bool is_counted;               // admitted: its timings go to metrics at the end
    int n_step_events;             // events consumed by the last step
    int cursor;                    // events consumed
    int n_completion;              // tokens generated
    bool is_done;
    bool is_stop_string;      // ended at a stop string (the runtime may have run on a little)
    struct buf piece;         // scratch: one token's text
    struct buf text;          // scratch: this step's text, up to a stop string
    struct buf content;       // scratch: this step's content after reasoning split
    struct buf reasoning_out; // scratch: this step's reasoning
    struct gen_event events[EVENTS_PER_STEP];
    char warning[256]; // what was asked and not applied ("" when nothing)
};

int gen_session_start(struct model *m, const int32_t *prompt, int n_prompt,
                      const struct gen_params *params, const struct gen_options *opt,
                      struct gen_session **out, struct api_fail *f)
{
    const struct platform_model_desc *desc = model_desc(m);
    struct gen_session *s = mem_calloc(1, sizeof *s);
    if (!s) return api_failf(f, 500, NULL, NULL, "out of memory"), ERR_NOMEM;
    s->model = m;
    s->metrics = opt->metrics;
    s->tok = desc->tokenizer;
    tok_stream_init(&s->detok, s->tok, false);
    int max_events = desc->n_ctx - n_prompt;
    // With context shift, generation may pass the context: up to max_tokens, or (unbounded
    // as asked) one more context's worth.
    if (params->is_context_shift)
        max_events = params->max_tokens >= 0 ? params->max_tokens : desc->n_ctx;
    if (params->max_tokens >= 0 && params->max_tokens < max_events) max_events = params->max_tokens;
    if (max_events < 1) max_events = 1;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = request_new(REQUEST_GENERATE, prompt, n_prompt, params, max_events, &s->req);
    if (rc == ERR_OK && desc->is_text_io) {
        rc = request_set_text_prompt(s->req, opt->prompt_text ? opt->prompt_text : "",
                                     opt->prompt_text_len, opt->prompt_role);
        s->req->enable_thinking = opt->enable_thinking;
    }
    if (rc == ERR_OK && opt->has_slot) s->req->preferred_instance = opt->slot;
    for (int k = 0; k < opt->n_images; k++) {
        struct chat_image *im = &opt->images[k];
        unsigned char *rgb = im->rgb;
        float *pcm = im->pcm;
        im->rgb = NULL; // the request owns them from here, or they are freed now
        im->pcm = NULL;
        if (rc != ERR_OK) {
            mem_free(rgb);
            mem_free(pcm);
        } else if (pcm) {
            rc = request_add_audio(s->req, im->pos, desc->audio_window_tokens, im->n_windows, pcm,
                                   im->n_samples);
        } else {
            rc = request_add_image(s->req, im->pos, im->n_tok, rgb, im->w, im->h);
        }
    }
    if (rc == ERR_OK && opt->n_stops > 0)
        rc = stopstr_new(opt->stops, opt->n_stops, &s->stops, &err);
    if (rc == ERR_OK)
        rc = reasoning_stream_new(opt->reasoning, opt->reasoning_starts_inside, &s->reasoning);
    // Harmony output is a run of messages whatever the request: without tools its channels
    // still split, and calls the model makes on its own are dropped.
    const bool is_harmony = opt->tool_format == TOOLCALL_FORMAT_HARMONY;
    if (rc == ERR_OK && (opt->parse_tools || is_harmony))
        rc = toolcall_stream_new(opt->tool_format, &s->tools);
    if (rc == ERR_OK && is_harmony && !opt->parse_tools) toolcall_stream_drop_calls(s->tools);
    if (rc != ERR_OK) {
        gen_session_end(s);
        api_failf(f, 500, NULL, NULL, "cannot start generation: %s",
                  err.msg[0] ? err.msg : err_str(rc));
        return rc;
    }
    switch (model_submit(m, s->req)) {
    case POOL_ADMIT_RUN:
    case POOL_ADMIT_QUEUED:
        client_watch_track(m, s->req); // the HTTP layer ends it when its client leaves
        s->is_counted = s->metrics != NULL;
        metrics_request_started(s->metrics);
        *out = s;
        return ERR_OK;
    case POOL_ADMIT_FULL:
        metrics_request_rejected(s->metrics, METRICS_REJECT_QUEUE_FULL);
        api_failf(f, 429, "queue_full", NULL,
                  "All instances of model '%s' are busy and its queue is full; retry later.",
                  model_id(m));
        f->type = API_TYPE_RATE_LIMIT;
        break;
    case POOL_ADMIT_CLOSED:
        metrics_request_rejected(s->metrics, METRICS_REJECT_UNLOADING);
        api_failf(f, 404, "model_not_found", "model", "The model '%s' is being unloaded",
                  model_id(m));
        break;
    }
    s->is_done = true; // never ran: nothing to cancel
    gen_session_end(s);
    return ERR_BUSY;
}

/* Appends content events to plain, reasoning events (harmony) to reasoning, and records call
 * events in d. The calls themselves stay owned by the stream (valid until it is freed), so
 * pointers kept in d remain valid. */
static void collect_events(const struct toolcall_events *ev, struct buf *plain,
                           struct buf *reasoning, struct gen_delta *d)
{
    for (int i = 0; i < ev->n; i++) {
        const struct toolcall_event *e = &ev->ev[i];
        if (e->kind == TOOLCALL_EVENT_CONTENT) {
            buf_append(plain, e->content.ptr, e->content.len);
        } else if (e->kind == TOOLCALL_EVENT_REASONING) {
            buf_append(reasoning, e->content.ptr, e->content.len);
        } else if (d->n_calls < GEN_DELTA_MAX_CALLS) {
            d->calls[d->n_calls] = *e->call; // the array may move; the strings do not
            d->call_index[d->n_calls++] = e->index;
        }
    }
}

/* Appends s->piece to s->text through the stop strings; true when one matched (the text
 * then ends before it). */
static bool append_until_stop(struct gen_session *s, struct gen_delta *d)
{
    if (!s->stops) {
        buf_append(&s->text, s->piece.data, s->piece.len);
        return false;
    }
    struct stopstr_result sr;
    if (stopstr_feed(s->stops, s->piece.data ? s->piece.data : "", s->piece.len, &sr) != ERR_OK)
        return false; // the matcher's error is sticky: nothing more is emitted
    buf_append(&s->text, sr.emit.ptr, sr.emit.len);
    if (sr.stop_index < 0) return false;
    d->is_stop_string = true;
    d->stop_index = sr.stop_index;
    return true;
}

/* Detokenizes the step's events one token at a time through the stop strings, so a stop
 * string ends the answer at the token that completed it (tokens the model produced after it
 * in the same step are not part of the answer or its count). The text that may be emitted is
 * left in s->text; returns the number of events used. */
static int detokenize_until_stop(struct gen_session *s, int n, bool is_final, struct gen_delta *d)
{
    buf_clear(&s->text);
    for (int i = 0; i < n; i++) {
        buf_clear(&s->piece);
        if (s->events[i].token < 0) { // text-IO: the runtime's own text
            request_copy_text(s->req, &s->events[i], &s->piece);
        } else {
            tok_stream_push(&s->detok, s->events[i].token, &s->piece);
            if (is_final && i == n - 1) tok_stream_flush(&s->detok, &s->piece);
        }
        if (append_until_stop(s, d)) return i + 1;
    }
    if (n == 0 && is_final && s->tok) { // ended without a new event: what the detokenizer holds
        buf_clear(&s->piece);
        tok_stream_flush(&s->detok, &s->piece);
        if (append_until_stop(s, d)) return 0;
    }
    // At a natural end the held-back tail (a partial stop string) is emitted too.
    if (is_final && s->stops && !stopstr_is_stopped(s->stops)) {
        struct str tail = {"", 0};
        stopstr_flush(s->stops, &tail);
        buf_append(&s->text, tail.ptr, tail.len);
    }
    return n;
}

/* Runs this step's kept text through reasoning and tool-call parsing. */
static void process_text(struct gen_session *s, bool is_final, struct gen_delta *d)
{
    struct str kept = {s->text.data ? s->text.data : "", s->text.len};
    struct reasoning_delta rd = {{"", 0}, {"", 0}};
    buf_clear(&s->content);
    buf_clear(&s->reasoning_out);
    if (kept.len) reasoning_stream_feed(s->reasoning, kept.ptr, kept.len, &rd);
    buf_append(&s->reasoning_out, rd.reasoning.ptr, rd.reasoning.len);
    buf_append(&s->content, rd.content.ptr, rd.content.len);
    if (is_final && reasoning_stream_finish(s->reasoning, &rd) == ERR_OK) {
        buf_append(&s->reasoning_out, rd.reasoning.ptr, rd.reasoning.len);
        buf_append(&s->content, rd.content.ptr, rd.content.len);
    }
    d->reasoning =
        (struct str){s->reasoning_out.data ? s->reasoning_out.data : "", s->reasoning_out.len};
    d->content = (struct str){s->content.data ? s->content.data : "", s->content.len};
    if (!s->tools) return;
    // Content goes through the tool-call parser, which holds back what may start a call.
    struct buf plain;
    buf_init(&plain);
    struct toolcall_events ev = {0};
    if (d->content.len) toolcall_stream_feed(s->tools, d->content.ptr, d->content.len, &ev);
    collect_events(&ev, &plain, &s->reasoning_out, d);
    if (is_final) {
        toolcall_stream_finish(s->tools, &ev);
        collect_events(&ev, &plain, &s->reasoning_out, d);
    }
    d->reasoning =
        (struct str){s->reasoning_out.data ? s->reasoning_out.data : "", s->reasoning_out.len};
    buf_clear(&s->content);
    buf_append(&s->content, plain.data ? plain.data : "", plain.len);
    buf_deinit(&plain);
    d->content = (struct str){s->content.data ? s->content.data : "", s->content.len};
}

static const char *finish_name(struct gen_session *s, enum finish_reason f, bool stop_string)
{
    int n_calls = 0;
    if (s->tools) toolcall_stream_calls(s->tools, &n_calls);
    if (n_calls > 0) return "tool_calls";
    if (stop_string) return "stop";
    return f == FINISH_LENGTH ? "length" : "stop";
}

/* Waits for a cancelled request to end (the platform checks at its next step), dropping the
 * tokens it made meanwhile, so its timings are final when the answer is written. */
static void wait_stopped(struct gen_session *s)
{
    struct gen_event scratch[8];
    int cursor = s->cursor;
    enum finish_reason fin = FINISH_NONE;
    while (fin == FINISH_NONE)
        request_wait_events(s->req, &cursor, scratch, 8, -1, &fin);
}

bool gen_session_next(struct gen_session *s, int timeout_ms, struct gen_delta *d)
{
    memset(d, 0, sizeof *d);
    s->n_step_events = 0;
    d->content = d->reasoning = (struct str){"", 0};
    d->stop_index = -1;
    if (s->is_done) {
        d->is_done = true;
        return true;
    }
    enum finish_reason fin;
    const int cursor = s->cursor;
    int n = request_wait_events(s->req, &s->cursor, s->events, EVENTS_PER_STEP, timeout_ms, &fin);
    // Taken after the events: the platform records a prompt's progress before its tokens, so
    // every point older than these events is in this step too.
    d->n_progress = request_take_progress(s->req, d->progress, GEN_DELTA_MAX_PROGRESS);
    if (d->n_progress == GEN_DELTA_MAX_PROGRESS && (n > 0 || fin != FINISH_NONE)) {
        // More points may wait, all older than these events: send these alone and hand the
        // events out again after the rest (a fast prompt queues many before a reader wakes).
        s->cursor = cursor;
        return true;
    }
    if (n == 0 && fin == FINISH_NONE) return d->n_progress > 0;
    bool is_final = fin != FINISH_NONE;
    int used = detokenize_until_stop(s, n, is_final, d);
    s->n_step_events = used;
    s->n_completion += used;
    process_text(s, is_final || d->is_stop_string, d);
    if (d->is_stop_string) {
        // The stop string ended the answer: stop the model now and finish here.
        request_cancel(s->req);
        wait_stopped(s);
        s->is_stop_string = true;
        is_final = true;
        fin = FINISH_STOP;
    }
    if (!is_final) return true;
    s->is_done = true;
    d->is_done = true;
    if (fin == FINISH_ERROR || fin == FINISH_CANCELLED) {
        struct errmsg err;
        int status = 500;
        request_outcome(s->req, &status, &err, NULL);
        d->error_status = status ? status : 500;
        snprintf(d->error_message, sizeof d->error_message, "%s",
                 fin == FINISH_CANCELLED ? "generation was cancelled" : err.msg);
        return true;
    }
    d->finish_reason = finish_name(s, fin, d->is_stop_string);
    return true;
}

int gen_session_n_prompt(const struct gen_session *s)
{
    if (!s->req->prompt_text) return s->req->n_prompt;
    // Text-IO: the runtime counted the prompt (its perf, in the timings).
    struct request_timings t;
    request_outcome(s->req, NULL, NULL, &t);
    return t.n_prompt + t.n_cached;
}

const int32_t *gen_session_prompt(const struct gen_session *s, int *n)
{
    *n = s->req->n_prompt;
    return s->req->prompt;
}

int gen_session_n_completion(const struct gen_session *s)
{
    if (!s->req->prompt_text || s->is_stop_string || !s->is_done) return s->n_completion;
    // Text-IO: the runtime's count (its perf); a character split over two tokens is one event.
    struct request_timings t;
    request_outcome(s->req, NULL, NULL, &t);
    return t.n_predicted;
}

int gen_session_instance(const struct gen_session *s)
{
    // Written by the pool before the platform started the request; read after it finished,
    // which the request's mutex orders.
    return s->req ? s->req->instance : -1;
}

void gen_session_timings(struct gen_session *s, struct request_timings *out)
{
    request_outcome(s->req, NULL, NULL, out);
    // After a stop string the model may have run a few tokens more in its last step; the
    // answer (and so predicted_n, as usage) ends at the token that completed the stop.
    if (s->is_done && (!s->req->prompt_text || s->is_stop_string) &&
        out->n_predicted > s->n_completion)
        out->n_predicted = s->n_completion;
}

const struct gen_event *gen_session_events(const struct gen_session *s, int *n)
{
    *n = s->n_step_events;
    return s->events;
}

const struct toolcall *gen_session_calls(const struct gen_session *s, int *n)
{
    *n = 0;
    return s->tools ? toolcall_stream_calls(s->tools, n) : NULL;
}

const char *gen_session_warning(const struct gen_session *s)
{
    return s->warning[0] ? s->warning : NULL;
}

void gen_session_set_warning(struct gen_session *s, const char *warning)
{
    snprintf(s->warning, sizeof s->warning, "%s", warning);
}

void gen_session_end(struct gen_session *s)
{
    if (!s) return;
    if (s->req && request_outcome(s->req, NULL, NULL, NULL) == FINISH_NONE)
        model_abandon(s->model, s->req);
    if (s->is_counted) {
        struct request_timings t;
        request_outcome(s->req, NULL, NULL, &t);
        metrics_request_finished(s->metrics, &t);
    }
    request_release(s->req);
    stopstr_free(s->stops);
    reasoning_stream_free(s->reasoning);
    toolcall_stream_free(s->tools);
    buf_deinit(&s->piece);
    buf_deinit(&s->text);
    buf_deinit(&s->content);
    buf_deinit(&s->reasoning_out);
    mem_free(s);
}
