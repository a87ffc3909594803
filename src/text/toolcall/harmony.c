/* gpt-oss harmony: messages `[<|start|>ROLE[ to=R]]<|channel|>CH[ to=R][ [<|constrain|>]T]
 * <|message|>BODY<|end|>` (or <|call|>, <|return|>); facts from the gpt-oss chat template and the
 * reference's parser. A recipient `functions.NAME` makes the body the arguments of a call to
 * NAME, in either header position; analysis bodies are reasoning, commentary (preambles) and
 * final bodies are content, and messages to any other recipient (built-in tools the request did
 * not declare) are dropped. */
#include "text/toolcall/toolcall_internal.h"

#include "text/holdback.h"
#include "util/err.h"
#include "util/mem.h"

#include <string.h>

static const char HARMONY_START[] = "<|start|>";
static const char HARMONY_CHANNEL[] = "<|channel|>";
static const char HARMONY_MESSAGE[] = "<|message|>";
static const char *const HARMONY_ENDS[] = {"<|end|>", "<|call|>", "<|return|>"};
#define HARMONY_N_ENDS   3
#define HARMONY_HEAD_MAX 512 // bytes of a header before <|message|>; longer is not a header

/* Earliest of the n markers in t[from..len): its offset (or -1) and which one. */
static long find_any(const char *t, size_t len, size_t from, const char *const *mk, int n,
                     int *which)
{
    long best = -1;
    for (int k = 0; k < n; k++) {
        long m = holdback_find(t, len, from, mk[k], strlen(mk[k]));
        if (m >= 0 && (best < 0 || m < best)) best = m, *which = k;
    }
    return best;
}

/* Longest tail of t[from..len) that may still become one of the markers. */
static size_t partial_any(const char *t, size_t len, size_t from, const char *const *mk, int n)
{
    size_t hold = 0;
    for (int k = 0; k < n; k++) {
        size_t h = holdback_partial_len(t + from, len - from, mk[k], strlen(mk[k]));
        hold = h > hold ? h : hold;
    }
    return hold;
}

/* Reads ` to=RECIPIENT` at *i (spaces first); true when one was there. */
static bool harmony_recipient(const char *p, size_t n, size_t *i, size_t *off, size_t *len)
{
    size_t k = *i;
    skip_ws(p, n, &k);
    if (!eat(p, n, &k, "to=")) return false;
    size_t start = k;
    while (k < n && is_ident(p[k]))
        k++;
    if (k == start) return false;
    *off = start, *len = k - start, *i = k;
    return true;
}

struct harmony_head {
    size_t to_off, to_len; // recipient within the header (to_len 0: none)
    bool is_analysis;
};

/* Parses a header h[0..n) (the text before <|message|>). False when it is not one. */
static bool harmony_head_parse(const char *h, size_t n, struct harmony_head *out)
{
    size_t i = 0, off = 0, len = 0;
    *out = (struct harmony_head){0, 0, false};
    if (eat(h, n, &i, HARMONY_START)) {
        while (i < n && is_ident(h[i]))
            i++; // the role
    }
    if (harmony_recipient(h, n, &i, &off, &len)) out->to_off = off, out->to_len = len;
    // A stray "<|channel|>commentary[ to=assistant]" may precede the real channel: last wins.
    while (eat(h, n, &i, HARMONY_CHANNEL)) {
        size_t ch = i;
        while (i < n && is_ident(h[i]))
            i++;
        out->is_analysis = i - ch == 8 && memcmp(h + ch, "analysis", 8) == 0;
        if (harmony_recipient(h, n, &i, &off, &len)) out->to_off = off, out->to_len = len;
    }
    skip_ws(h, n, &i);
    eat(h, n, &i, "<|constrain|>");
    while (i < n && is_ident(h[i]))
        i++; // the content type ("json")
    skip_ws(h, n, &i);
    if (out->to_len == 9 && memcmp(h + out->to_off, "assistant", 9) == 0) out->to_len = 0;
    return i == n;
}

/* Ordinary text: a header starts at <|start|> or <|channel|>, or, at the very start of the
 * output, at "to=" (the generation prompt ended with "<|start|>assistant"). */
int tc_step_harmony_content(struct toolcall_stream *s, bool is_final, enum step *out)
{
    static const char *const heads[] = {HARMONY_START, HARMONY_CHANNEL};
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_WAIT;
    if (s->skip_ws) {
        skip_ws(t, len, &s->pos);
        if (s->pos == len) return ERR_OK;
        s->skip_ws = false;
    }
    if (s->at_start) {
        size_t i = s->pos;
        skip_ws(t, len, &i);
        if (i == len && !is_final) return ERR_OK;
        if (!is_final && holdback_partial_len(t + i, len - i, "to=", 3) == len - i) return ERR_OK;
        s->at_start = false;
        if (len - i >= 3 && memcmp(t + i, "to=", 3) == 0) {
            s->mark = s->pos;
            s->st = ST_HARMONY_HEAD;
            *out = STEP_AGAIN;
            return ERR_OK;
        }
    }
    int which = 0;
    long m = find_any(t, len, s->pos, heads, 2, &which);
    if (m >= 0) {
        size_t end = (size_t)m;
        while (end > s->pos && is_ws(t[end - 1]))
            end--;
        int rc = tc_emit_content(s, s->pos, end);
        s->mark = end;
        s->pos = (size_t)m;
        s->st = ST_HARMONY_HEAD;
        *out = STEP_AGAIN;
        return rc;
    }
    size_t cut = len;
    if (!is_final) {
        cut -= partial_any(t, len, s->pos, heads, 2);
        while (cut > s->pos && is_ws(t[cut - 1]))
            cut--;
        cut = holdback_utf8_cut(t, len, cut);
        cut = cut < s->pos ? s->pos : cut;
    }
    int rc = tc_emit_content(s, s->pos, cut);
    s->pos = cut;
    return rc;
}

/* Waits for <|message|>, then decides what the message is. */
int tc_step_harmony_head(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    const size_t mlen = sizeof HARMONY_MESSAGE - 1;
    long m = holdback_find(t, len, s->pos, HARMONY_MESSAGE, mlen);
    *out = STEP_AGAIN;
    if (m < 0) {
        if (!is_final && len - s->pos <= HARMONY_HEAD_MAX) return *out = STEP_WAIT, ERR_OK;
        // Not a header after all: its first byte is content, the rest is looked at again.
        return tc_settle(s, PARSED_NO, 0, s->pos + 1);
    }
    struct harmony_head h;
    if ((size_t)m - s->pos > HARMONY_HEAD_MAX ||
        !harmony_head_parse(t + s->pos, (size_t)m - s->pos, &h))
        return tc_settle(s, PARSED_NO, 0, s->pos + 1);
    const size_t fl = sizeof "functions." - 1;
    bool is_call =
        h.to_len > fl && memcmp(t + s->pos + h.to_off, "functions.", fl) == 0 && !s->drop_calls;
    s->name_off = s->pos + h.to_off + (is_call ? fl : 0);
    s->name_len = h.to_len - (is_call ? fl : 0);
    s->pos = s->scan = (size_t)m + mlen;
    s->is_reasoning = h.is_analysis;
    s->st = is_call ? ST_HARMONY_CALL : h.to_len ? ST_HARMONY_SKIP : ST_HARMONY_BODY;
    s->skip_ws = s->st == ST_HARMONY_BODY;
    return ERR_OK;
}

/* The body of a message to functions.NAME: a JSON object (or a string holding one) is the
 * arguments; anything else leaves the message as content. */
static enum parsed call_from_harmony(struct toolcall_stream *s, const char *p, size_t n)
{
    if (s->name_len == 0 || s->name_len > NAME_LEN_MAX) return PARSED_NO;
    json_t *v = json_loadb(p, n, JSON_DECODE_ANY, NULL);
    char *a = NULL;
    enum parsed r = v ? tc_args_text(v, &a) : PARSED_NO;
    json_decref(v);
    if (r != PARSED_OK) return r;
    char *name = mem_alloc(s->name_len + 1);
    if (name) {
        memcpy(name, s->text.data + s->name_off, s->name_len);
        name[s->name_len] = '\0';
    }
    return tc_call_push(s, name, a, NULL);
}

/* A message's body up to its end marker: emitted as it comes (BODY), decided whole (CALL) or
 * dropped (SKIP). */
int tc_step_harmony_body(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    if (s->skip_ws) {
        skip_ws(t, len, &s->pos);
        s->scan = s->pos;
        if (s->pos < len) s->skip_ws = false;
    }
    int which = 0;
    long m = find_any(t, len, s->scan, HARMONY_ENDS, HARMONY_N_ENDS, &which);
    size_t body_end = m >= 0 ? (size_t)m : len;
    if (m < 0 && !is_final) body_end -= partial_any(t, len, s->scan, HARMONY_ENDS, HARMONY_N_ENDS);
    *out = m >= 0 || is_final ? STEP_AGAIN : STEP_WAIT;
    size_t end = m >= 0 ? (size_t)m + strlen(HARMONY_ENDS[which]) : len;
    if (s->st == ST_HARMONY_CALL) {
        s->scan = body_end > s->pos ? body_end : s->pos; // resume the search here
        if (*out == STEP_WAIT) return ERR_OK;
        int n0 = s->n_calls;
        enum parsed r = call_from_harmony(s, t + s->pos, body_end - s->pos);
        return tc_settle(s, r, n0, end);
    }
    size_t cut = body_end;
    while (cut > s->pos && is_ws(t[cut - 1]))
        cut--; // trailing whitespace waits: it is dropped if the message ends next
    if (*out == STEP_WAIT) cut = holdback_utf8_cut(t, len, cut);
    cut = cut < s->pos ? s->pos : cut;
    int rc = ERR_OK;
    if (s->st == ST_HARMONY_BODY)
        rc = s->is_reasoning ? tc_emit_reasoning(s, s->pos, cut) : tc_emit_content(s, s->pos, cut);
    s->pos = s->scan = cut;
    if (*out == STEP_AGAIN) {
        s->pos = end;
        s->skip_ws = true;
        s->st = ST_CONTENT;
    }
    return rc;
}
