/* Tool-call extraction as one incremental state machine over the accumulated output; the
 * one-shot parser is the same machine fed once, so streaming and non-streaming cannot disagree.
 * This file holds format detection, the events, the states every format shares (content, a
 * leading JSON value) and the public API; each format family's states are in a file of its
 * own (hermes.c, llama3.c, lfm2.c, mistral.c, harmony.c), the call list and JSON forms in
 * calls.c; the block between two markers (Hermes, LFM2) is one step here, tc_step_block. */
#include "text/toolcall/toolcall_internal.h"

#include "text/holdback.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <string.h>

enum toolcall_format toolcall_format_detect(const char *src)
{
    if (!src) return TOOLCALL_FORMAT_GENERIC;
    if (strstr(src, "<|channel|>")) return TOOLCALL_FORMAT_HARMONY;
    // LFM2 templates list the tools between these (the newer ones write calls too)
    if (strstr(src, LFM2_OPEN) || strstr(src, "<|tool_list_start|>")) return TOOLCALL_FORMAT_LFM2;
    if (strstr(src, HERMES_OPEN)) return TOOLCALL_FORMAT_HERMES;
    if (strstr(src, MISTRAL_OPEN)) return TOOLCALL_FORMAT_MISTRAL;
    if (strstr(src, PYTHON_TAG) || strstr(src, "<|start_header_id|>"))
        return TOOLCALL_FORMAT_LLAMA3;
    return TOOLCALL_FORMAT_GENERIC;
}

const char *toolcall_format_name(enum toolcall_format f)
{
    switch (f) {
    case TOOLCALL_FORMAT_HERMES:
        return "hermes";
    case TOOLCALL_FORMAT_LLAMA3:
        return "llama3";
    case TOOLCALL_FORMAT_MISTRAL:
        return "mistral";
    case TOOLCALL_FORMAT_HARMONY:
        return "harmony";
    case TOOLCALL_FORMAT_LFM2:
        return "lfm2";
    case TOOLCALL_FORMAT_GENERIC:
        return "generic";
    }
    return "unknown";
}

int tc_raw_push(struct toolcall_stream *s, struct raw_event e)
{
    if (s->n_raw == s->cap_raw) {
        int cap = s->cap_raw ? s->cap_raw * 2 : 8;
        struct raw_event *r = mem_realloc(s->raw, (size_t)cap * sizeof *r);
        if (!r) return ERR_NOMEM;
        s->raw = r;
        struct toolcall_event *ev = mem_realloc(s->ev, (size_t)cap * sizeof *ev);
        if (!ev) return ERR_NOMEM; // raw grew; cap_raw stays, so the next push retries ev
        s->ev = ev;
        s->cap_raw = cap;
    }
    s->raw[s->n_raw++] = e;
    return ERR_OK;
}

int tc_emit_content(struct toolcall_stream *s, size_t from, size_t to)
{
    if (to <= from) return ERR_OK;
    // Adjacent slices merge, so one feed yields one delta per run of content.
    struct raw_event *last = s->n_raw ? &s->raw[s->n_raw - 1] : NULL;
    if (last && last->kind == TOOLCALL_EVENT_CONTENT && last->off + last->len == from) {
        last->len += to - from;
        return ERR_OK;
    }
    return tc_raw_push(s, (struct raw_event){TOOLCALL_EVENT_CONTENT, from, to - from, -1});
}

int tc_emit_reasoning(struct toolcall_stream *s, size_t from, size_t to)
{
    if (to <= from) return ERR_OK;
    struct raw_event *last = s->n_raw ? &s->raw[s->n_raw - 1] : NULL;
    if (last && last->kind == TOOLCALL_EVENT_REASONING && last->off + last->len == from) {
        last->len += to - from;
        return ERR_OK;
    }
    return tc_raw_push(s, (struct raw_event){TOOLCALL_EVENT_REASONING, from, to - from, -1});
}

int tc_emit_calls_from(struct toolcall_stream *s, int first)
{
    for (int i = first; i < s->n_calls; i++) {
        int rc = tc_raw_push(s, (struct raw_event){TOOLCALL_EVENT_CALL, 0, 0, i});
        if (rc != ERR_OK) return rc;
    }
    return ERR_OK;
}

struct marker {
    const char *text;
    size_t len;
    enum state next;
};

static bool format_marker(enum toolcall_format f, struct marker *m)
{
    switch (f) {
    case TOOLCALL_FORMAT_HERMES:
        *m = (struct marker){HERMES_OPEN, sizeof HERMES_OPEN - 1, ST_HERMES};
        return true;
    case TOOLCALL_FORMAT_MISTRAL:
        *m = (struct marker){MISTRAL_OPEN, sizeof MISTRAL_OPEN - 1, ST_MISTRAL_START};
        return true;
    case TOOLCALL_FORMAT_LLAMA3:
        *m = (struct marker){PYTHON_TAG, sizeof PYTHON_TAG - 1, ST_PYTHON};
        return true;
    case TOOLCALL_FORMAT_LFM2:
        *m = (struct marker){LFM2_OPEN, sizeof LFM2_OPEN - 1, ST_LFM2};
        return true;
    case TOOLCALL_FORMAT_HARMONY: // its own content step
    case TOOLCALL_FORMAT_GENERIC:
        break;
    }
    return false;
}

/* The decided outcome of a construct: calls (then whitespace after it is dropped) or, when
 * the text did not parse as calls, the construct's bytes [mark, end) as content. */
int tc_settle(struct toolcall_stream *s, enum parsed r, int first_call, size_t end)
{
    if (r == PARSED_NOMEM) return ERR_NOMEM;
    int rc = r == PARSED_OK ? tc_emit_calls_from(s, first_call) : tc_emit_content(s, s->mark, end);
    s->pos = end;
    s->skip_ws = r == PARSED_OK;
    s->st = ST_CONTENT;
    return rc;
}

/* At the start of the output: a JSON value may be the whole answer as calls. */
static enum step content_at_start(struct toolcall_stream *s, const struct marker *mk,
                                  bool has_marker, bool is_final)
{
    const char *t = s->text.data;
    size_t len = s->text.len, i = s->pos;
    skip_ws(t, len, &i);
    if (i == len) return is_final ? (s->at_start = false, STEP_AGAIN) : STEP_WAIT;
    if (has_marker && holdback_partial_len(t + i, len - i, mk->text, mk->len) == len - i &&
        !is_final)
        return STEP_WAIT; // could still be the marker
    s->at_start = false;
    if ((t[i] == '{' || t[i] == '[') &&
        !(has_marker && len - i >= mk->len && memcmp(t + i, mk->text, mk->len) == 0)) {
        s->mark = s->pos;
        s->value_start = s->scan = i;
        tc_jscan_init(&s->js);
        s->st = ST_WHOLE;
    }
    return STEP_AGAIN;
}

static int step_content(struct toolcall_stream *s, bool is_final, enum step *out)
{
    struct marker mk = {0};
    bool has_marker = format_marker(s->fmt, &mk);
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_WAIT;
    if (s->skip_ws) {
        skip_ws(t, len, &s->pos);
        if (s->pos == len) return ERR_OK;
        s->skip_ws = false;
    }
    if (s->at_start) {
        *out = content_at_start(s, &mk, has_marker, is_final);
        return ERR_OK;
    }
    long m = has_marker ? holdback_find(t, len, s->pos, mk.text, mk.len) : -1;
    if (m >= 0) {
        size_t end = (size_t)m;
        while (end > s->pos && is_ws(t[end - 1]))
            end--;
        int rc = tc_emit_content(s, s->pos, end);
        s->mark = end; // the whitespace comes back if the call turns out to be content
        s->pos = s->scan = (size_t)m + mk.len;
        s->st = mk.next;
        *out = STEP_AGAIN;
        return rc;
    }
    size_t cut = len;
    if (!is_final) {
        cut -= has_marker ? holdback_partial_len(t + s->pos, len - s->pos, mk.text, mk.len) : 0;
        while (cut > s->pos && is_ws(t[cut - 1]))
            cut--; // whitespace before a marker is dropped, so it waits too
        cut = holdback_utf8_cut(t, len, cut);
        cut = cut < s->pos ? s->pos : cut;
    }
    int rc = tc_emit_content(s, s->pos, cut);
    s->pos = cut;
    return rc;
}

static int step_whole(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_WAIT;
    bool is_closed = s->js.depth <= 0 && s->scan > s->value_start;
    if (!is_closed) is_closed = tc_jscan_run(&s->js, t, len, &s->scan);
    if (is_closed) {
        // Text after the value (other than Llama's ';'-separated calls) means it is content.
        size_t i = s->scan;
        skip_ws(t, len, &i);
        if (i < len && !(s->fmt == TOOLCALL_FORMAT_LLAMA3 && t[i] == ';')) {
            *out = STEP_AGAIN;
            return tc_settle(s, PARSED_NO, 0, s->scan);
        }
    }
    if (!is_final) return ERR_OK;
    int n0 = s->n_calls;
    enum parsed r = tc_calls_from_values(s, t + s->value_start, len - s->value_start,
                                         s->fmt == TOOLCALL_FORMAT_LLAMA3);
    *out = STEP_AGAIN;
    return tc_settle(s, r, n0, len);
}

int tc_step_block(struct toolcall_stream *s, bool is_final, enum step *out, const char *close,
                  tc_block_fn parse)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    const size_t close_len = strlen(close);
    // Resume where the last search stopped, so a long body fed token by token stays linear.
    size_t from = s->scan > s->pos ? s->scan : s->pos;
    long m = holdback_find(t, len, from, close, close_len);
    *out = STEP_WAIT;
    if (m < 0 && !is_final) {
        s->scan = len >= close_len ? len - close_len + 1 : 0;
        return ERR_OK;
    }
    size_t body_end = m >= 0 ? (size_t)m : len;
    size_t end = m >= 0 ? (size_t)m + close_len : len;
    int n0 = s->n_calls;
    enum parsed r = parse(s, t + s->pos, body_end - s->pos, m >= 0);
    *out = STEP_AGAIN;
    return tc_settle(s, r, n0, end);
}

/* Runs the machine until it needs more text. A flat dispatch over the states. */
static int advance(struct toolcall_stream *s, bool is_final)
{
    enum step st = STEP_AGAIN;
    int rc = ERR_OK;
    while (rc == ERR_OK && st == STEP_AGAIN) {
        switch (s->st) {
        case ST_CONTENT:
            rc = s->fmt == TOOLCALL_FORMAT_HARMONY ? tc_step_harmony_content(s, is_final, &st)
                                                   : step_content(s, is_final, &st);
            break;
        case ST_HARMONY_HEAD:
            rc = tc_step_harmony_head(s, is_final, &st);
            break;
        case ST_HARMONY_BODY:
        case ST_HARMONY_CALL:
        case ST_HARMONY_SKIP:
            rc = tc_step_harmony_body(s, is_final, &st);
            break;
        case ST_WHOLE:
            rc = step_whole(s, is_final, &st);
            break;
        case ST_HERMES:
            rc = tc_step_block(s, is_final, &st, HERMES_CLOSE, tc_calls_from_hermes);
            break;
        case ST_LFM2:
            rc = tc_step_block(s, is_final, &st, LFM2_CLOSE, tc_calls_from_lfm2);
            break;
        case ST_MISTRAL_START:
            rc = tc_step_mistral_start(s, is_final, &st);
            break;
        case ST_MISTRAL_NAME:
        case ST_MISTRAL_ID:
            rc = tc_step_mistral_word(s, is_final, &st);
            break;
        case ST_JSON_START:
        case ST_JSON:
            rc = tc_step_json(s, is_final, &st);
            break;
        case ST_PYTHON:
            rc = tc_step_python(s, is_final, &st);
            break;
        }
        if (is_final && s->st == ST_CONTENT && s->pos == s->text.len) break;
    }
    return rc;
}

int toolcall_stream_new(enum toolcall_format f, struct toolcall_stream **out)
{
    if ((unsigned)f > TOOLCALL_FORMAT_LFM2) return ERR_INVALID;
    struct toolcall_stream *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->fmt = f;
    s->st = ST_CONTENT;
    s->at_start = true;
    buf_init(&s->text);
    *out = s;
    return ERR_OK;
}

void toolcall_stream_drop_calls(struct toolcall_stream *s)
{
    s->drop_calls = true;
}

void toolcall_stream_free(struct toolcall_stream *s)
{
    if (!s) return;
    tc_calls_truncate(s, 0);
    mem_free(s->calls);
    mem_free(s->raw);
    mem_free(s->ev);
    buf_deinit(&s->text);
    mem_free(s);
}

/* Turns raw events into the public view; pointers are taken only now, after the last
 * append, so they stay valid until the next call. */
static void publish(struct toolcall_stream *s, struct toolcall_events *out)
{
    for (int i = 0; i < s->n_raw; i++) {
        const struct raw_event *r = &s->raw[i];
        struct toolcall_event *e = &s->ev[i];
        *e = (struct toolcall_event){.kind = r->kind, .index = r->call};
        if (r->kind != TOOLCALL_EVENT_CALL)
            e->content = (struct str){s->text.data + r->off, r->len};
        else
            e->call = &s->calls[r->call];
    }
    out->ev = s->ev;
    out->n = s->n_raw;
}

static int run(struct toolcall_stream *s, const char *text, size_t len, bool is_final,
               struct toolcall_events *out)
{
    *out = (struct toolcall_events){NULL, 0};
    if (s->err) return s->err;
    if (s->is_finished) return ERR_INVALID;
    s->n_raw = 0;
    int rc = len ? buf_append(&s->text, text, len) : ERR_OK;
    if (rc == ERR_OK && s->text.len > 0) rc = advance(s, is_final);
    if (rc != ERR_OK) return s->err = rc;
    s->is_finished = is_final;
    publish(s, out);
    return ERR_OK;
}

int toolcall_stream_feed(struct toolcall_stream *s, const char *text, size_t len,
                         struct toolcall_events *out)
{
    return run(s, text, len, false, out);
}

int toolcall_stream_finish(struct toolcall_stream *s, struct toolcall_events *out)
{
    return run(s, NULL, 0, true, out);
}

const struct toolcall *toolcall_stream_calls(const struct toolcall_stream *s, int *n_calls)
{
    *n_calls = s->n_calls;
    return s->calls;
}

void toolcall_result_deinit(struct toolcall_result *r)
{
    for (int i = 0; i < r->n_calls; i++)
        tc_call_deinit(&r->calls[i]);
    mem_free(r->calls);
    mem_free(r->content);
    mem_free(r->reasoning);
    *r = (struct toolcall_result){0};
}

static int append_content(struct buf *b, struct buf *r, const struct toolcall_events *ev)
{
    for (int i = 0; i < ev->n; i++) {
        const struct toolcall_event *e = &ev->ev[i];
        struct buf *to = e->kind == TOOLCALL_EVENT_CONTENT     ? b
                         : e->kind == TOOLCALL_EVENT_REASONING ? r
                                                               : NULL;
        if (to && buf_append(to, e->content.ptr, e->content.len)) return ERR_NOMEM;
    }
    return ERR_OK;
}

int toolcall_parse(enum toolcall_format f, const char *text, size_t len,
                   struct toolcall_result *out)
{
    *out = (struct toolcall_result){0};
    struct toolcall_stream *s = NULL;
    int rc = toolcall_stream_new(f, &s);
    if (rc != ERR_OK) return rc;
    struct toolcall_events ev;
    struct buf content, reasoning;
    buf_init(&content);
    buf_init(&reasoning);
    rc = toolcall_stream_feed(s, text, len, &ev);
    rc = rc == ERR_OK ? append_content(&content, &reasoning, &ev) : rc;
    if (rc == ERR_OK) rc = toolcall_stream_finish(s, &ev);
    rc = rc == ERR_OK ? append_content(&content, &reasoning, &ev) : rc;
    if (rc == ERR_OK) {
        out->content = buf_steal(&content);
        out->reasoning = buf_steal(&reasoning);
        out->calls = s->calls;
        out->n_calls = s->n_calls;
        s->calls = NULL; // handed over
        s->n_calls = 0;
    }
    buf_deinit(&content);
    buf_deinit(&reasoning);
    toolcall_stream_free(s);
    return rc;
}
