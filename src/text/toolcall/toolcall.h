/* Tool-call parser for generated text, per model family: Hermes/Qwen `<tool_call>` blocks (JSON
 * objects, Qwen3.5's `<function=..><parameter=..>` XML, or GLM 4.x's `name<arg_key>..` pairs),
 * Llama 3.x JSON and `<|python_tag|>`, LFM2's `<|tool_call_start|>[name(k=v)]` Python calls,
 * Mistral `[TOOL_CALLS]` (JSON array, or
 * `name[CALL_ID]id[ARGS]{..}`), gpt-oss harmony messages to `functions.NAME`, and a generic fallback where the whole output is one call object
 * or an array of them (tried for every format but harmony). Produces OpenAI chat completions
 * `message.tool_calls` data (name, compact JSON arguments) plus the remaining content, in one go
 * or incrementally from text deltas. Not a grammar: it never constrains generation.
 *
 * Malformed calls are content: a block whose JSON does not parse, lacks a string "name", or
 * whose arguments are not a JSON object (or a string holding one) is emitted verbatim, markers
 * included. Whitespace between content and a call is dropped. XML and GLM parameter values
 * that parse as JSON (numbers, booleans, objects) are taken as JSON, others as strings; there is
 * no schema to say otherwise. */
#ifndef TEXT_TOOLCALL_H
#define TEXT_TOOLCALL_H

#include "util/str.h"

#include <stdbool.h>
#include <stddef.h>

enum toolcall_format {
    TOOLCALL_FORMAT_GENERIC = 0, // only the whole-output JSON fallback
    TOOLCALL_FORMAT_HERMES = 1,  // <tool_call>...</tool_call> (Hermes 2 Pro, Qwen 2.5-3.5, GLM 4.x)
    TOOLCALL_FORMAT_LLAMA3 = 2,  // {"name":..,"parameters":..} / <|python_tag|> (Llama 3.1-3.3)
    TOOLCALL_FORMAT_MISTRAL = 3, // [TOOL_CALLS] (Mistral Nemo, Small 3.x, Devstral)
    TOOLCALL_FORMAT_HARMONY = 4, // gpt-oss: the content after the reasoning stage is a run of
    // `[<|start|>assistant][ to=R]<|channel|>CH[ to=R][ [<|constrain|>]
    // json]<|message|>BODY[<|end|>|<|call|>]` messages (or plain
    // final text); R = functions.NAME makes BODY a call's arguments,
    // an analysis BODY is reasoning (REASONING events), commentary
    // and final BODYs are content, other recipients are dropped
    TOOLCALL_FORMAT_LFM2 = 5, // <|tool_call_start|>[name(k=v, ...), ...]<|tool_call_end|>
                              // (LFM2, LFM2.5: Python calls, keyword arguments)
};

/* Picks the format from a chat template's source: `<|channel|>` -> HARMONY,
 * `<|tool_call_start|>` or `<|tool_list_start|>` -> LFM2, `<tool_call>` -> HERMES, `[TOOL_CALLS]` -> MISTRAL, `<|python_tag|>` or the Llama 3 header tokens -> LLAMA3,
 * anything else (or NULL) -> GENERIC. Cannot fail. */
enum toolcall_format toolcall_format_detect(const char *template_src);

/* Lower-case name ("hermes"); static storage. Cannot fail. */
const char *toolcall_format_name(enum toolcall_format f);

struct toolcall {
    char *name;      // owned, NUL-terminated, non-empty
    char *arguments; // owned, compact JSON object text (jansson JSON_COMPACT), "{}" if absent
    char *id;        // owned or NULL: an id the model wrote ("id" field, Mistral [CALL_ID])
};

struct toolcall_result {
    char *content;          // owned, NUL-terminated; NULL when there is no content
    char *reasoning;        // owned, NUL-terminated; NULL when none (harmony analysis messages)
    struct toolcall *calls; // owned array of n_calls
    int n_calls;
};

/* Parses a complete output. On success *out holds the content and calls; release it with
 * toolcall_result_deinit(). Returns ERR_NOMEM (then *out is zeroed). text is borrowed for the
 * call. Thread-safe. */
int toolcall_parse(enum toolcall_format f, const char *text, size_t len,
                   struct toolcall_result *out);

/* Frees what toolcall_parse() put in r and zeroes it; a no-op on a zeroed result. */
void toolcall_result_deinit(struct toolcall_result *r);

/* ---- streaming ---- */

struct toolcall_stream;

enum toolcall_event_kind {
    TOOLCALL_EVENT_CONTENT = 0, // content delta: text that is definitely not part of a call
    TOOLCALL_EVENT_CALL = 1,    // one complete call
    TOOLCALL_EVENT_REASONING =
        2, // reasoning delta in `content` (HARMONY: a later analysis message)
};

struct toolcall_event {
    enum toolcall_event_kind kind;
    struct str content;          // CONTENT, REASONING: the delta (never empty)
    int index;                   // CALL: 0-based position among this output's calls
    const struct toolcall *call; // CALL: name, whole arguments, id
};

/* Events produced by one feed/finish; borrowed, valid until the next call on the stream. */
struct toolcall_events {
    const struct toolcall_event *ev;
    int n;
};

/* Creates an incremental parser. Text that may begin a call (a marker prefix, a JSON value at
 * the start of the output, the inside of a block) is held back until decided; a call is
 * reported once complete, with its whole arguments in one event (so a call that turns out
 * malformed can still become content). The concatenated content deltas and the calls equal
 * toolcall_parse() of the concatenated text, for any chunking. Returns ERR_INVALID for an
 * unknown format, ERR_NOMEM. Caller frees *out with toolcall_stream_free(). Not thread-safe. */
int toolcall_stream_new(enum toolcall_format f, struct toolcall_stream **out);

/* HARMONY: messages to functions.NAME are dropped like those to other recipients, as when the
 * request declared no tools (the reference's parser consumes such unsolicited calls), while
 * the channels still split into content and reasoning. Call before the first feed; other
 * formats ignore it. Cannot fail. */
void toolcall_stream_drop_calls(struct toolcall_stream *s);

/* Frees the stream and every call it reported. toolcall_stream_free(NULL) is a no-op. */
void toolcall_stream_free(struct toolcall_stream *s);

/* Feeds a text delta (borrowed for the call). Returns ERR_NOMEM (sticky), or ERR_INVALID after
 * toolcall_stream_finish(). */
int toolcall_stream_feed(struct toolcall_stream *s, const char *text, size_t len,
                         struct toolcall_events *out);

/* Ends the output: decides everything held back (unterminated blocks are calls when their body
 * parses, else content). Later feeds return ERR_INVALID. Sticky ERR_NOMEM. */
int toolcall_stream_finish(struct toolcall_stream *s, struct toolcall_events *out);

/* Calls reported so far; borrowed, valid until the next call on the stream. Cannot fail. */
const struct toolcall *toolcall_stream_calls(const struct toolcall_stream *s, int *n_calls);

#endif
