/* Stop strings -> reasoning -> tool calls, with each stage's borrowed output copied into the
 * parser's own buffers so one call can run a stage twice (feed, then finish on a stop). */
#include "text/chatparse.h"

#include "text/stopstr.h"
#include "util/buf.h"
#include "util/mem.h"

/* Owned by the one thread driving the message. */
struct chatparse {
    struct stopstr *stop;
    struct reasoning_stream *reason;
    struct toolcall_stream *tools; // NULL when calls are not parsed
    bool is_done;                  // stopped or finished: later calls produce nothing
    int err;                       // sticky
    struct buf rbuf;               // this call's reasoning
    struct buf cbuf;               // this call's content bytes (when tools is NULL, or copies)
    struct toolcall_event *ev;     // this call's events; content points into cbuf
    size_t *ev_off;                // content offsets into cbuf, resolved at the end of a call
    int n_ev, cap_ev;
};

int chatparse_new(const struct chatparse_params *p, struct chatparse **out, struct errmsg *e)
{
    struct chatparse *c = mem_calloc(1, sizeof *c);
    if (!c) return errmsg_set(e, ERR_NOMEM, "out of memory");
    buf_init(&c->rbuf);
    buf_init(&c->cbuf);
    int rc = stopstr_new(p->stops, p->n_stops, &c->stop, e); // fills e itself
    if (rc == ERR_OK) {
        rc = reasoning_stream_new(p->reasoning_format, p->starts_in_reasoning, &c->reason);
        if (rc == ERR_OK && p->parse_tool_calls)
            rc = toolcall_stream_new(p->tool_format, &c->tools);
        if (rc != ERR_OK)
            errmsg_set(e, rc, rc == ERR_NOMEM ? "out of memory" : "unknown output format");
    }
    if (rc != ERR_OK) {
        chatparse_free(c);
        return rc;
    }
    *out = c;
    return ERR_OK;
}

void chatparse_free(struct chatparse *c)
{
    if (!c) return;
    stopstr_free(c->stop);
    reasoning_stream_free(c->reason);
    toolcall_stream_free(c->tools);
    buf_deinit(&c->rbuf);
    buf_deinit(&c->cbuf);
    mem_free(c->ev);
    mem_free(c->ev_off);
    mem_free(c);
}

bool chatparse_is_stopped(const struct chatparse *c)
{
    return stopstr_is_stopped(c->stop);
}

const struct toolcall *chatparse_calls(const struct chatparse *c, int *n_calls)
{
    if (!c->tools) {
        *n_calls = 0;
        return NULL;
    }
    return toolcall_stream_calls(c->tools, n_calls);
}

/* Appends an event; content bytes are copied into cbuf. */
static int push_event(struct chatparse *c, const struct toolcall_event *e)
{
    if (c->n_ev == c->cap_ev) {
        int cap = c->cap_ev ? c->cap_ev * 2 : 8;
        struct toolcall_event *ev = mem_realloc(c->ev, (size_t)cap * sizeof *ev);
        if (!ev) return ERR_NOMEM;
        c->ev = ev;
        size_t *off = mem_realloc(c->ev_off, (size_t)cap * sizeof *off);
        if (!off) return ERR_NOMEM; // ev grew; cap_ev stays, so the next push retries
        c->ev_off = off;
        c->cap_ev = cap;
    }
    if (e->kind == TOOLCALL_EVENT_REASONING) // harmony: a later analysis message
        return buf_append(&c->rbuf, e->content.ptr, e->content.len) ? ERR_NOMEM : ERR_OK;
    c->ev[c->n_ev] = *e;
    c->ev_off[c->n_ev] = c->cbuf.len;
    if (e->kind == TOOLCALL_EVENT_CONTENT && buf_append(&c->cbuf, e->content.ptr, e->content.len))
        return ERR_NOMEM;
    c->n_ev++;
    return ERR_OK;
}

/* Passes one reasoning-stage delta on: reasoning into rbuf, content through the tool parser
 * (or straight through) into the event list. */
static int route(struct chatparse *c, const struct reasoning_delta *d, bool is_final)
{
    if (d->reasoning.len && buf_append(&c->rbuf, d->reasoning.ptr, d->reasoning.len))
        return ERR_NOMEM;
    if (!c->tools) {
        struct toolcall_event e = {.kind = TOOLCALL_EVENT_CONTENT, .content = d->content};
        return d->content.len ? push_event(c, &e) : ERR_OK;
    }
    struct toolcall_events tev;
    int rc = toolcall_stream_feed(c->tools, d->content.ptr, d->content.len, &tev);
    for (int i = 0; rc == ERR_OK && i < tev.n; i++)
        rc = push_event(c, &tev.ev[i]);
    if (rc == ERR_OK && is_final) rc = toolcall_stream_finish(c->tools, &tev);
    for (int i = 0; rc == ERR_OK && is_final && i < tev.n; i++)
        rc = push_event(c, &tev.ev[i]);
    return rc;
}

/* Runs text (already past the stop-string stage) through the rest; on is_final also ends the
 * reasoning and tool stages. */
static int run_rest(struct chatparse *c, struct str text, bool is_final)
{
    struct reasoning_delta d;
    int rc = reasoning_stream_feed(c->reason, text.ptr, text.len, &d);
    if (rc == ERR_OK) rc = route(c, &d, false);
    if (rc == ERR_OK && is_final) rc = reasoning_stream_finish(c->reason, &d);
    if (rc == ERR_OK && is_final) rc = route(c, &d, true);
    return rc;
}

static void begin(struct chatparse *c, struct chatparse_delta *out)
{
    *out = (struct chatparse_delta){{"", 0}, NULL, 0, -1};
    buf_clear(&c->rbuf);
    buf_clear(&c->cbuf);
    c->n_ev = 0;
}

/* Resolves content pointers now that cbuf will not move until the next call. */
static int publish(struct chatparse *c, struct chatparse_delta *out, int rc)
{
    if (rc != ERR_OK) return c->err = rc;
    int n_calls = 0;
    const struct toolcall *calls = chatparse_calls(c, &n_calls);
    for (int i = 0; i < c->n_ev; i++) {
        // Calls are looked up by index: the tool stage may have grown its array since.
        if (c->ev[i].kind == TOOLCALL_EVENT_CONTENT)
            c->ev[i].content.ptr = c->cbuf.data + c->ev_off[i];
        else
            c->ev[i].call = &calls[c->ev[i].index];
    }
    out->reasoning = (struct str){c->rbuf.len ? c->rbuf.data : "", c->rbuf.len};
    out->ev = c->ev;
    out->n_ev = c->n_ev;
    return ERR_OK;
}

int chatparse_feed(struct chatparse *c, const char *text, size_t len, struct chatparse_delta *out)
{
    begin(c, out);
    if (c->err) return c->err;
    if (c->is_done) return ERR_OK;
    struct stopstr_result sr;
    int rc = stopstr_feed(c->stop, text, len, &sr);
    if (rc == ERR_OK) {
        c->is_done = sr.stop_index >= 0;
        out->stop_index = sr.stop_index;
        rc = run_rest(c, sr.emit, c->is_done);
    }
    return publish(c, out, rc);
}

int chatparse_finish(struct chatparse *c, struct chatparse_delta *out)
{
    begin(c, out);
    if (c->err) return c->err;
    if (c->is_done) return ERR_OK;
    c->is_done = true;
    struct str tail;
    int rc = stopstr_flush(c->stop, &tail);
    if (rc == ERR_OK) rc = run_rest(c, tail, true);
    return publish(c, out, rc);
}
