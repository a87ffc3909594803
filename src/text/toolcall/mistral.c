/* Mistral's [TOOL_CALLS]: a JSON array of calls, or name[CALL_ID]id[ARGS]{…} one at a time. */
#include "text/toolcall/toolcall_internal.h"

#include "text/holdback.h"
#include "util/err.h"
#include "util/mem.h"

#include <string.h>

/* The arguments of a Mistral "[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}" call. */
enum parsed tc_call_from_mistral_args(struct toolcall_stream *s, const char *p, size_t n)
{
    json_t *v = json_loadb(p, n, 0, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        return PARSED_NO;
    }
    char *args = tc_json_compact(v);
    json_decref(v);
    const char *t = s->text.data;
    char *id = NULL;
    if (s->id_len > 0 && !(id = mem_strndup(t + s->id_off, s->id_len))) {
        mem_free(args);
        return PARSED_NOMEM;
    }
    return tc_call_push(s, mem_strndup(t + s->name_off, s->name_len), args, id);
}

int tc_step_mistral_start(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    skip_ws(t, len, &s->pos);
    *out = STEP_AGAIN;
    if (s->pos == len) {
        if (!is_final) *out = STEP_WAIT;
        return is_final ? tc_settle(s, PARSED_NO, 0, len) : ERR_OK;
    }
    char c = t[s->pos];
    if (c == '[' || c == '{') {
        s->json_is_args = false;
        s->st = ST_JSON_START;
    } else if (is_ident(c)) {
        s->name_off = s->scan = s->pos;
        s->id_len = 0;
        s->st = ST_MISTRAL_NAME;
    } else {
        return tc_settle(s, PARSED_NO, 0, s->pos);
    }
    return ERR_OK;
}

/* Reads identifier bytes from s->scan up to the next marker. Returns STEP_WAIT for more text,
 * else STEP_AGAIN with the state advanced (or settled as content). */
int tc_step_mistral_word(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len, start = s->st == ST_MISTRAL_NAME ? s->name_off : s->id_off;
    while (s->scan < len && is_ident(t[s->scan]) && s->scan - start <= NAME_LEN_MAX)
        s->scan++;
    size_t i = s->scan, rest = len - i, wlen = i - start;
    *out = STEP_AGAIN;
    if (wlen > NAME_LEN_MAX || (i < len && (t[i] != '[' || wlen == 0)))
        return tc_settle(s, PARSED_NO, 0, i);
    bool may_args = holdback_partial_len(t + i, rest, MISTRAL_ARGS, 6) == rest;
    bool may_id =
        s->st == ST_MISTRAL_NAME && holdback_partial_len(t + i, rest, MISTRAL_CALL_ID, 9) == rest;
    if ((rest == 0 || may_args || may_id) && !is_final) {
        *out = STEP_WAIT;
        return ERR_OK;
    }
    if (s->st == ST_MISTRAL_NAME)
        s->name_len = wlen;
    else
        s->id_len = wlen;
    if (rest >= 6 && memcmp(t + i, MISTRAL_ARGS, 6) == 0) {
        s->pos = i + 6;
        s->json_is_args = true;
        s->st = ST_JSON_START;
    } else if (s->st == ST_MISTRAL_NAME && rest >= 9 && memcmp(t + i, MISTRAL_CALL_ID, 9) == 0) {
        s->id_off = s->scan = i + 9;
        s->st = ST_MISTRAL_ID;
    } else {
        return tc_settle(s, PARSED_NO, 0, is_final ? len : i);
    }
    return ERR_OK;
}

int tc_step_json(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_AGAIN;
    if (s->st == ST_JSON_START) {
        skip_ws(t, len, &s->pos);
        if (s->pos == len) {
            if (!is_final) *out = STEP_WAIT;
            return is_final ? tc_settle(s, PARSED_NO, 0, len) : ERR_OK;
        }
        char c = t[s->pos];
        if (c != '{' && (c != '[' || s->json_is_args)) return tc_settle(s, PARSED_NO, 0, s->pos);
        s->value_start = s->scan = s->pos;
        tc_jscan_init(&s->js);
        s->st = ST_JSON;
    }
    if (!tc_jscan_run(&s->js, t, len, &s->scan)) {
        if (!is_final) *out = STEP_WAIT;
        return is_final ? tc_settle(s, PARSED_NO, 0, len) : ERR_OK;
    }
    int n0 = s->n_calls;
    const char *v = t + s->value_start;
    size_t vlen = s->scan - s->value_start;
    enum parsed r =
        s->json_is_args ? tc_call_from_mistral_args(s, v, vlen) : tc_calls_from_text(s, v, vlen);
    return tc_settle(s, r, n0, s->scan);
}
