/* Responses stream events, in the order OpenAI's Responses API streams them. */
#include "api/responses/responses_stream.h"

#include "api/ids.h"
#include "api/generation/sse.h"
#include "util/err.h"

#include <stdio.h>

enum { ITEM_NONE = 0, ITEM_REASONING = 1, ITEM_MESSAGE = 2 };

int responses_stream_init(struct responses_stream *st)
{
    *st = (struct responses_stream){0};
    buf_init(&st->text);
    st->output = json_array();
    return st->output ? ERR_OK : ERR_NOMEM;
}

void responses_stream_deinit(struct responses_stream *st)
{
    json_decref(st->output);
    st->output = NULL;
    buf_deinit(&st->text);
}

int responses_stream_event(struct responses_stream *st, const char *type, json_t *j,
                           struct buf *out)
{
    json_t *o = j ? json_pack("{s:s, s:i}", "type", type, "sequence_number", st->seq++) : NULL;
    if (o && json_object_update(o, j) != 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(j);
    return sse_append_json(out, type, o);
}

static int output_index(const struct responses_stream *st)
{
    return (int)json_array_size(st->output);
}

static json_t *part_json(int kind, struct str text)
{
    if (kind == ITEM_REASONING)
        return json_pack("{s:s, s:s%}", "type", "reasoning_text", "text", text.ptr, text.len);
    return json_pack("{s:s, s:s%, s:[], s:[]}", "type", "output_text", "text", text.ptr, text.len,
                     "annotations", "logprobs");
}

/* Emits item.done for item (consumed) and keeps it in the output. */
static int finish_item(struct responses_stream *st, int idx, json_t *item, struct buf *out)
{
    int rc =
        responses_stream_event(st, "response.output_item.done",
                               json_pack("{s:i, s:O}", "output_index", idx, "item", item), out);
    if (rc == ERR_OK && json_array_append_new(st->output, item) != 0) return ERR_NOMEM;
    if (rc != ERR_OK) json_decref(item);
    return rc;
}

static int close_item(struct responses_stream *st, struct buf *out)
{
    if (st->open == ITEM_NONE) return ERR_OK;
    bool is_reasoning = st->open == ITEM_REASONING;
    struct str text = {st->text.data ? st->text.data : "", st->text.len};
    int idx = output_index(st);
    int rc = responses_stream_event(
        st, is_reasoning ? "response.reasoning_text.done" : "response.output_text.done",
        json_pack("{s:s, s:i, s:i, s:s%}", "item_id", st->item_id, "output_index", idx,
                  "content_index", 0, "text", text.ptr, text.len),
        out);
    if (rc == ERR_OK)
        rc = responses_stream_event(st, "response.content_part.done",
                                    json_pack("{s:s, s:i, s:i, s:o}", "item_id", st->item_id,
                                              "output_index", idx, "content_index", 0, "part",
                                              part_json(st->open, text)),
                                    out);
    json_t *item =
        is_reasoning ? responses_reasoning_item(st->item_id, text)
                     : responses_message_item(st->item_id,
                                              st->is_incomplete ? "incomplete" : "completed", text);
    if (rc == ERR_OK)
        rc = finish_item(st, idx, item, out);
    else
        json_decref(item);
    buf_clear(&st->text);
    st->open = ITEM_NONE;
    return rc;
}

static int open_item(struct responses_stream *st, int kind, struct buf *out)
{
    if (st->open == kind) return ERR_OK;
    int rc = close_item(st, out);
    if (rc != ERR_OK) return rc;
    bool is_reasoning = kind == ITEM_REASONING;
    api_make_id(is_reasoning ? "rs_" : "msg_", st->item_id, sizeof st->item_id);
    struct str none = {NULL, 0};
    json_t *item = is_reasoning ? responses_reasoning_item(st->item_id, none)
                                : responses_message_item(st->item_id, "in_progress", none);
    int idx = output_index(st);
    st->open = kind;
    rc = responses_stream_event(st, "response.output_item.added",
                                json_pack("{s:i, s:o}", "output_index", idx, "item", item), out);
    struct str empty = {"", 0};
    if (rc == ERR_OK)
        rc = responses_stream_event(st, "response.content_part.added",
                                    json_pack("{s:s, s:i, s:i, s:o}", "item_id", st->item_id,
                                              "output_index", idx, "content_index", 0, "part",
                                              part_json(kind, empty)),
                                    out);
    return rc;
}

static int item_delta(struct responses_stream *st, int kind, struct str s, struct buf *out)
{
    int rc = open_item(st, kind, out);
    if (rc == ERR_OK) rc = buf_append(&st->text, s.ptr, s.len);
    if (rc != ERR_OK) return rc;
    json_t *j = json_pack("{s:s, s:i, s:i, s:s%}", "item_id", st->item_id, "output_index",
                          output_index(st), "content_index", 0, "delta", s.ptr, s.len);
    if (j && kind == ITEM_MESSAGE) json_object_set_new(j, "logprobs", json_array());
    return responses_stream_event(
        st, kind == ITEM_REASONING ? "response.reasoning_text.delta" : "response.output_text.delta",
        j, out);
}

static int call_item(struct responses_stream *st, const struct toolcall *tc, struct buf *out)
{
    int rc = close_item(st, out);
    char id[48], call_id[48];
    api_make_id("fc_", id, sizeof id);
    snprintf(call_id, sizeof call_id, "%s", tc->id ? tc->id : "");
    if (!tc->id) api_make_id("call_", call_id, sizeof call_id);
    int idx = output_index(st);
    if (rc == ERR_OK)
        rc = responses_stream_event(
            st, "response.output_item.added",
            json_pack("{s:i, s:o}", "output_index", idx, "item",
                      responses_function_call_item(id, call_id, tc->name, "", "in_progress")),
            out);
    if (rc == ERR_OK)
        rc = responses_stream_event(st, "response.function_call_arguments.delta",
                                    json_pack("{s:s, s:i, s:s}", "item_id", id, "output_index", idx,
                                              "delta", tc->arguments),
                                    out);
    if (rc == ERR_OK)
        rc = responses_stream_event(st, "response.function_call_arguments.done",
                                    json_pack("{s:s, s:i, s:s, s:s}", "item_id", id, "output_index",
                                              idx, "name", tc->name, "arguments", tc->arguments),
                                    out);
    if (rc != ERR_OK) return rc;
    return finish_item(
        st, idx, responses_function_call_item(id, call_id, tc->name, tc->arguments, "completed"),
        out);
}

int responses_stream_delta(struct responses_stream *st, const struct responses_output *o,
                           struct buf *out)
{
    int rc = ERR_OK;
    if (o->reasoning.len) rc = item_delta(st, ITEM_REASONING, o->reasoning, out);
    if (rc == ERR_OK && o->text.len) rc = item_delta(st, ITEM_MESSAGE, o->text, out);
    for (int i = 0; rc == ERR_OK && i < o->n_calls; i++)
        rc = call_item(st, &o->calls[i], out);
    return rc;
}

int responses_stream_close(struct responses_stream *st, struct buf *out)
{
    int rc = ERR_OK;
    if (output_index(st) == 0 && st->open == ITEM_NONE) rc = open_item(st, ITEM_MESSAGE, out);
    return rc == ERR_OK ? close_item(st, out) : rc;
}
