/* Reasoning/content split as a three-state machine (start, inside, content) over a pending
 * buffer that keeps only undecided bytes. The one-shot split is the stream fed once. Markers
 * come from the chat templates in /work/shared/templates. */
#include "text/reasoning.h"

#include "text/holdback.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <string.h>

struct markers {
    const char *open, *close; // open is "" for APRIEL: the prompt opens the block
};

static const struct markers MARKERS[] = {
    [REASONING_FORMAT_NONE] = {"", ""},
    [REASONING_FORMAT_THINK] = {"<think>", "</think>"},
    [REASONING_FORMAT_SEED] = {"<seed:think>", "</seed:think>"},
    [REASONING_FORMAT_COMMAND_R] = {"<|START_THINKING|>", "<|END_THINKING|>"},
    [REASONING_FORMAT_MISTRAL] = {"[THINK]", "[/THINK]"},
    [REASONING_FORMAT_APRIEL] = {"", "[BEGIN FINAL RESPONSE]"},
    [REASONING_FORMAT_HARMONY] = {"<|channel|>analysis<|message|>", "<|end|>"},
};

/* Harmony: the headers that may precede the final channel's text, longest first. */
static const char *const HARMONY_HEADS[] = {"<|start|>assistant<|channel|>final<|message|>",
                                            "<|channel|>final<|message|>"};

enum state {
    ST_START,   // nothing but whitespace yet: an opening marker may come
    ST_INSIDE,  // reasoning
    ST_CONTENT, // everything else
};

/* Owned by the one thread driving the stream. */
struct reasoning_stream {
    enum reasoning_format fmt;
    const char *open, *close;
    size_t open_len, close_len;
    enum state st;
    bool skip_ws; // drop whitespace before the next reasoning/content byte
    bool is_finished;
    bool head_pending; // harmony: a final-channel header may still start the content
    int err;           // sticky
    struct buf pend;   // undecided bytes; [0..emitted) were handed out by the last call
    size_t emitted;
};

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

enum reasoning_format reasoning_format_detect(const char *src)
{
    if (!src) return REASONING_FORMAT_NONE;
    if (strstr(src, "<|channel|>")) return REASONING_FORMAT_HARMONY;
    // Most specific first: "<seed:think>" also contains "think>".
    static const enum reasoning_format order[] = {
        REASONING_FORMAT_SEED,   REASONING_FORMAT_COMMAND_R, REASONING_FORMAT_MISTRAL,
        REASONING_FORMAT_APRIEL, REASONING_FORMAT_THINK,
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (strstr(src, MARKERS[order[i]].close)) return order[i];
    }
    return REASONING_FORMAT_NONE;
}

bool reasoning_prompt_opens(enum reasoning_format f, const char *prompt, size_t len)
{
    if ((unsigned)f > REASONING_FORMAT_HARMONY || f == REASONING_FORMAT_NONE) return false;
    const char *open = MARKERS[f].open;
    size_t n = strlen(open);
    if (n == 0) return true;
    while (len > 0 && is_ws(prompt[len - 1]))
        len--;
    return len >= n && memcmp(prompt + len - n, open, n) == 0;
}

int reasoning_stream_new(enum reasoning_format f, bool starts_inside, struct reasoning_stream **out)
{
    if ((unsigned)f > REASONING_FORMAT_HARMONY) return ERR_INVALID;
    struct reasoning_stream *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->fmt = f;
    s->open = MARKERS[f].open;
    s->close = MARKERS[f].close;
    s->open_len = strlen(s->open);
    s->close_len = strlen(s->close);
    if (f == REASONING_FORMAT_NONE)
        s->st = ST_CONTENT;
    else if (starts_inside || s->open_len == 0)
        s->st = ST_INSIDE;
    else
        s->st = ST_START;
    s->skip_ws = s->st == ST_INSIDE;
    s->head_pending = f == REASONING_FORMAT_HARMONY;
    buf_init(&s->pend);
    *out = s;
    return ERR_OK;
}

void reasoning_stream_free(struct reasoning_stream *s)
{
    if (!s) return;
    buf_deinit(&s->pend);
    mem_free(s);
}

bool reasoning_stream_is_inside(const struct reasoning_stream *s)
{
    return s->st == ST_INSIDE;
}

/* Skips whitespace at *pos if skip_ws is set. Returns false when the text ran out. */
static bool skip_leading_ws(struct reasoning_stream *s, size_t *pos)
{
    if (!s->skip_ws) return true;
    while (*pos < s->pend.len && is_ws(s->pend.data[*pos]))
        (*pos)++;
    if (*pos == s->pend.len) return false;
    s->skip_ws = false;
    return true;
}

/* ST_START: returns true to run again (state changed), false to wait. */
static bool step_start(struct reasoning_stream *s, size_t *pos, bool is_final)
{
    const char *t = s->pend.data;
    size_t len = s->pend.len, i = *pos;
    while (i < len && is_ws(t[i]))
        i++;
    size_t rest = len - i;
    if (rest >= s->open_len && memcmp(t + i, s->open, s->open_len) == 0) {
        *pos = i + s->open_len;
        s->st = ST_INSIDE;
        s->skip_ws = true;
        return true;
    }
    bool may_open = holdback_partial_len(t + i, rest, s->open, s->open_len) == rest;
    if (may_open && !is_final) return false; // includes rest == 0: only whitespace so far
    s->st = ST_CONTENT;
    return true;
}

/* ST_INSIDE: reasoning runs to the closing marker; the slice goes to *r. */
static bool step_inside(struct reasoning_stream *s, size_t *pos, bool is_final, struct str *r)
{
    const char *t = s->pend.data;
    size_t len = s->pend.len;
    if (!skip_leading_ws(s, pos)) return false;
    long m = holdback_find(t, len, *pos, s->close, s->close_len);
    size_t end = m >= 0 ? (size_t)m : len;
    if (m < 0 && !is_final)
        end = holdback_utf8_cut(
            t, len, len - holdback_partial_len(t + *pos, len - *pos, s->close, s->close_len));
    size_t cut = end;
    while (cut > *pos && is_ws(t[cut - 1]))
        cut--; // trailing whitespace waits: it is dropped if the block closes next
    if (cut > *pos) *r = (struct str){t + *pos, cut - *pos};
    if (m >= 0) {
        *pos = (size_t)m + s->close_len;
        s->st = ST_CONTENT;
        s->skip_ws = true;
        return true;
    }
    *pos = is_final ? len : cut;
    return false;
}

/* Harmony: skips a final-channel header at *pos. Returns false to wait (the text so far could
 * still become one). */
static bool skip_head(struct reasoning_stream *s, size_t *pos, bool is_final)
{
    const char *t = s->pend.data + *pos;
    const size_t rest = s->pend.len - *pos;
    for (size_t i = 0; i < sizeof HARMONY_HEADS / sizeof HARMONY_HEADS[0]; i++) {
        const size_t n = strlen(HARMONY_HEADS[i]);
        if (rest >= n && memcmp(t, HARMONY_HEADS[i], n) == 0) {
            *pos += n;
            s->head_pending = false;
            return true;
        }
        if (!is_final && rest < n && memcmp(t, HARMONY_HEADS[i], rest) == 0) return false;
    }
    s->head_pending = false;
    return true;
}

static void step_content(struct reasoning_stream *s, size_t *pos, bool is_final, struct str *c)
{
    size_t len = s->pend.len;
    if (!skip_leading_ws(s, pos)) return;
    if (s->head_pending) {
        if (!skip_head(s, pos, is_final)) return;
        s->skip_ws = true; // the final text's own leading whitespace goes too
        if (!skip_leading_ws(s, pos)) return;
    }
    size_t cut = is_final ? len : holdback_utf8_cut(s->pend.data, len, len);
    if (cut > *pos) *c = (struct str){s->pend.data + *pos, cut - *pos};
    *pos = cut > *pos ? cut : *pos;
}

static int run(struct reasoning_stream *s, const char *text, size_t len, bool is_final,
               struct reasoning_delta *out)
{
    *out = (struct reasoning_delta){{"", 0}, {"", 0}};
    if (s->err) return s->err;
    if (s->is_finished) return ERR_INVALID;
    if (s->emitted) {
        memmove(s->pend.data, s->pend.data + s->emitted, s->pend.len - s->emitted);
        s->pend.len -= s->emitted;
        s->emitted = 0;
    }
    if (len && buf_append(&s->pend, text, len) != ERR_OK) return s->err = ERR_NOMEM;
    s->is_finished = is_final;
    size_t pos = 0;
    bool again = s->pend.len > 0;
    while (again) {
        if (s->st == ST_START)
            again = step_start(s, &pos, is_final);
        else if (s->st == ST_INSIDE)
            again = step_inside(s, &pos, is_final, &out->reasoning);
        else
            step_content(s, &pos, is_final, &out->content), again = false;
    }
    s->emitted = pos;
    return ERR_OK;
}

int reasoning_stream_feed(struct reasoning_stream *s, const char *text, size_t len,
                          struct reasoning_delta *out)
{
    return run(s, text, len, false, out);
}

int reasoning_stream_finish(struct reasoning_stream *s, struct reasoning_delta *out)
{
    return run(s, NULL, 0, true, out);
}

void reasoning_result_deinit(struct reasoning_result *r)
{
    mem_free(r->reasoning);
    mem_free(r->content);
    *r = (struct reasoning_result){NULL, NULL};
}

/* Appends a delta's parts to the two buffers. */
static int collect(const struct reasoning_delta *d, struct buf *r, struct buf *c)
{
    if (d->reasoning.len && buf_append(r, d->reasoning.ptr, d->reasoning.len) != ERR_OK)
        return ERR_NOMEM;
    if (d->content.len && buf_append(c, d->content.ptr, d->content.len) != ERR_OK) return ERR_NOMEM;
    return ERR_OK;
}

int reasoning_split(enum reasoning_format f, bool starts_inside, const char *text, size_t len,
                    struct reasoning_result *out)
{
    *out = (struct reasoning_result){NULL, NULL};
    struct reasoning_stream *s = NULL;
    int rc = reasoning_stream_new(f, starts_inside, &s);
    if (rc != ERR_OK) return rc;
    struct buf r, c;
    buf_init(&r);
    buf_init(&c);
    struct reasoning_delta d;
    rc = reasoning_stream_feed(s, text, len, &d);
    if (rc == ERR_OK) rc = collect(&d, &r, &c);
    if (rc == ERR_OK) rc = reasoning_stream_finish(s, &d);
    if (rc == ERR_OK) rc = collect(&d, &r, &c);
    if (rc == ERR_OK) {
        out->reasoning = buf_steal(&r);
        out->content = buf_steal(&c);
    }
    buf_deinit(&r);
    buf_deinit(&c);
    reasoning_stream_free(s);
    return rc;
}
