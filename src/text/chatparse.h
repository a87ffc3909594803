/* The chat-completion output pipeline for one generated message: stop strings first (on the
 * raw text, as llama.cpp and OpenAI apply them), then the reasoning split, then tool calls on
 * what is left. Streams in OpenAI chat completions delta order (reasoning_content, content,
 * tool_calls). A thin composition of text/stopstr, text/reasoning and text/toolcall; not a
 * detokenizer (feed it complete UTF-8 where possible; partial code points are held anyway). */
#ifndef TEXT_CHATPARSE_H
#define TEXT_CHATPARSE_H

#include "text/reasoning.h"
#include "text/toolcall/toolcall.h"
#include "util/err.h"
#include "util/str.h"

#include <stdbool.h>
#include <stddef.h>

struct chatparse_params {
    const char *const *stops;               // n_stops stop strings; borrowed during _new only
    int n_stops;                            // 0..STOPSTR_MAX_STOPS
    enum reasoning_format reasoning_format; // REASONING_FORMAT_NONE: no split
    bool starts_in_reasoning;               // the prompt opened the block (reasoning_prompt_opens)
    bool parse_tool_calls;                  // false: content passes through untouched
    enum toolcall_format tool_format;       // used when parse_tool_calls
};

/* What one feed/finish decided; everything borrowed, valid until the next call on the parser.
 * ev holds content deltas and complete calls in output order (see text/toolcall.h). */
struct chatparse_delta {
    struct str reasoning; // reasoning_content delta (may be empty)
    const struct toolcall_event *ev;
    int n_ev;
    int stop_index; // index of the stop string that ended the output in this call, or -1
};

struct chatparse;

/* Creates a parser. Returns the stopstr_new() errors (ERR_LIMIT, ERR_INVALID, with e filled),
 * ERR_INVALID for an unknown format, ERR_NOMEM. Caller frees *out with chatparse_free(). One
 * parser per generated message (per choice); not thread-safe. */
int chatparse_new(const struct chatparse_params *p, struct chatparse **out, struct errmsg *e);

/* Frees the parser and its calls. chatparse_free(NULL) is a no-op. */
void chatparse_free(struct chatparse *c);

/* Feeds decoded text. When a stop string completes, the output is finished right here (held
 * text is decided, unterminated calls are settled) and chatparse_is_stopped() turns true: stop
 * generating; later feeds return nothing. Returns ERR_NOMEM (sticky). */
int chatparse_feed(struct chatparse *c, const char *text, size_t len, struct chatparse_delta *out);

/* Ends the output (end-of-generation token, max_tokens); a no-op after a stop. Sticky errors. */
int chatparse_finish(struct chatparse *c, struct chatparse_delta *out);

/* True once a stop string matched. Cannot fail. */
bool chatparse_is_stopped(const struct chatparse *c);

/* The calls found so far, for the final message and finish_reason "tool_calls"; borrowed,
 * valid until the next call on the parser. Cannot fail. */
const struct toolcall *chatparse_calls(const struct chatparse *c, int *n_calls);

#endif
