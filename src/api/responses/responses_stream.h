/* The Responses API's typed stream events for one response: output items opened, filled and
 * closed in order (reasoning → response.reasoning_text.*, message → response.output_text.*,
 * each function call → response.function_call_arguments.*), every event numbered by
 * sequence_number from 0. Formatting only: the caller drives it with generated deltas. */
#ifndef API_RESPONSES_STREAM_H
#define API_RESPONSES_STREAM_H

#include "api/responses/responses_convert.h"
#include "util/buf.h"

struct responses_stream {
    int seq;            // the next sequence_number
    json_t *output;     // owned: finished output items, in order
    int open;           // 0 none, 1 reasoning, 2 message: the item being written
    char item_id[48];   // its id
    struct buf text;    // its text so far
    bool is_incomplete; // set before responses_stream_close when the answer was cut short: the
                        // last message item then says "incomplete"
};

/* Starts with seq 0 and no output. ERR_NOMEM. Release with responses_stream_deinit(). */
int responses_stream_init(struct responses_stream *st);

/* Frees the output and buffers; a zeroed struct is a no-op. */
void responses_stream_deinit(struct responses_stream *st);

/* Appends `event: type` with data {"type", "sequence_number", …j} (j consumed). ERR_NOMEM. */
int responses_stream_event(struct responses_stream *st, const char *type, json_t *j,
                           struct buf *out);

/* Appends one step's events: reasoning and text go into an open item of their kind (closing
 * the other first: *.done, content_part.done, output_item.done; then output_item.added and
 * content_part.added for the new one), each complete call becomes a whole function_call item
 * (added, one arguments delta, arguments done, item done). ERR_NOMEM. */
int responses_stream_delta(struct responses_stream *st, const struct responses_output *o,
                           struct buf *out);

/* Closes the open item; an output with no item at all gets an empty message first. After
 * this, st->output is the response's whole output. ERR_NOMEM. */
int responses_stream_close(struct responses_stream *st, struct buf *out);

#endif
