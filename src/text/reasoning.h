/* Splits generated text into reasoning and content (OpenAI-compatible
 * `message.reasoning_content`, as llama.cpp's server returns it) for the families' thinking
 * markers: <think>..</think>, <seed:think>..</seed:think>, <|START_THINKING|>..<|END_THINKING|>,
 * [THINK]..[/THINK], Apriel's reasoning-then-"[BEGIN FINAL RESPONSE]", and gpt-oss's harmony
 * channels (analysis is reasoning, final is content). Works in one go or
 * on streamed deltas, holding back partial markers. Not a tool-call parser (run that on the
 * content afterwards). */
#ifndef TEXT_REASONING_H
#define TEXT_REASONING_H

#include "util/str.h"

#include <stdbool.h>
#include <stddef.h>

enum reasoning_format {
    REASONING_FORMAT_NONE = 0,      // no reasoning markers: everything is content
    REASONING_FORMAT_THINK = 1,     // <think> ... </think> (Qwen3, QwQ, DeepSeek R1, GLM, SmolLM3)
    REASONING_FORMAT_SEED = 2,      // <seed:think> ... </seed:think> (ByteDance Seed-OSS)
    REASONING_FORMAT_COMMAND_R = 3, // <|START_THINKING|> ... <|END_THINKING|> (Command R7B)
    REASONING_FORMAT_MISTRAL = 4,   // [THINK] ... [/THINK] (Magistral)
    REASONING_FORMAT_APRIEL = 5,    // reasoning, then [BEGIN FINAL RESPONSE] (Apriel Thinker)
    REASONING_FORMAT_HARMONY = 6,   // <|channel|>analysis<|message|> ... <|end|>, then the
                                    // final channel's message (gpt-oss); the headers
                                    // <|start|>assistant<|channel|>final<|message|> are dropped
};

/* Picks the format from a chat template's source by the markers it mentions; NONE when it
 * mentions none (or src is NULL). Cannot fail. */
enum reasoning_format reasoning_format_detect(const char *src);

/* True when the rendered prompt (the generation prompt included) leaves the model inside a
 * reasoning block, so the output starts as reasoning and only the closing marker appears: the
 * prompt ends (ignoring whitespace) with the opening marker, or the format has none (APRIEL).
 * Cannot fail. */
bool reasoning_prompt_opens(enum reasoning_format f, const char *prompt, size_t len);

/* Reasoning is recognised only at the very start of the output (after whitespace), or from the
 * start when starts_inside; a marker later in the content is content. Whitespace at the edges
 * of the reasoning and at the start of the content after it is dropped. An unclosed block is
 * all reasoning. */
struct reasoning_result {
    char *reasoning; // owned, NUL-terminated; NULL when there is none
    char *content;   // owned, NUL-terminated; NULL when empty
};

/* Splits a complete output. Returns ERR_INVALID for an unknown format, ERR_NOMEM (then *out
 * is zeroed). Release with reasoning_result_deinit(). Thread-safe. */
int reasoning_split(enum reasoning_format f, bool starts_inside, const char *text, size_t len,
                    struct reasoning_result *out);

/* Frees and zeroes r; a no-op on a zeroed result. */
void reasoning_result_deinit(struct reasoning_result *r);

/* ---- streaming ---- */

struct reasoning_stream;

/* What one feed/finish decided; both borrowed, valid until the next call on the stream. Within
 * one call all reasoning comes before all content. */
struct reasoning_delta {
    struct str reasoning;
    struct str content;
};

/* Creates a splitter; the concatenated deltas equal reasoning_split() of the concatenated text
 * for any chunking, and never end inside a UTF-8 code point before finish. Returns
 * ERR_INVALID, ERR_NOMEM. Caller frees *out with reasoning_stream_free(). Not thread-safe. */
int reasoning_stream_new(enum reasoning_format f, bool starts_inside,
                         struct reasoning_stream **out);

/* Frees the stream. reasoning_stream_free(NULL) is a no-op. */
void reasoning_stream_free(struct reasoning_stream *s);

/* Feeds a delta (borrowed for the call). ERR_NOMEM (sticky); ERR_INVALID after finish. */
int reasoning_stream_feed(struct reasoning_stream *s, const char *text, size_t len,
                          struct reasoning_delta *out);

/* Ends the output, releasing what was held back. Sticky errors as above. */
int reasoning_stream_finish(struct reasoning_stream *s, struct reasoning_delta *out);

/* True while the output is inside a reasoning block (for clients that show a spinner).
 * Cannot fail. */
bool reasoning_stream_is_inside(const struct reasoning_stream *s);

#endif
