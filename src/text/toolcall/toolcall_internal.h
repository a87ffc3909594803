/* Internals of the tool-call state machine shared by its files (text/toolcall/): the stream,
 * its states, the call list and the helpers every format uses. Never include this from outside
 * text/toolcall/. */
#ifndef TEXT_TOOLCALL_INTERNAL_H
#define TEXT_TOOLCALL_INTERNAL_H

#include "text/toolcall/toolcall.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define NAME_LEN_MAX 256 // bytes of a bare function name or call id (Mistral's [ARGS] form)

#define HERMES_OPEN     "<tool_call>"
#define HERMES_CLOSE    "</tool_call>"
#define MISTRAL_OPEN    "[TOOL_CALLS]"
#define MISTRAL_ARGS    "[ARGS]"
#define MISTRAL_CALL_ID "[CALL_ID]"
#define PYTHON_TAG      "<|python_tag|>"
#define LFM2_OPEN       "<|tool_call_start|>"
#define LFM2_CLOSE      "<|tool_call_end|>"

enum state {
    ST_CONTENT,       // ordinary text; watching for the format's marker
    ST_WHOLE,         // the output began with a JSON value: maybe it is all calls
    ST_HERMES,        // inside <tool_call>, waiting for </tool_call>
    ST_MISTRAL_START, // after [TOOL_CALLS]: a JSON value or a bare name follows
    ST_MISTRAL_NAME,  // reading name up to [ARGS] or [CALL_ID]
    ST_MISTRAL_ID,    // reading the id up to [ARGS]
    ST_JSON_START,    // expecting the JSON value of a Mistral call
    ST_JSON,          // scanning that value to its end
    ST_PYTHON,        // after <|python_tag|>: the rest of the output is the call
    ST_LFM2,          // inside <|tool_call_start|>, waiting for <|tool_call_end|>
    ST_HARMONY_HEAD,  // a harmony message header, up to <|message|>
    ST_HARMONY_BODY,  // a harmony message's text (content or reasoning), up to its end
    ST_HARMONY_CALL,  // the arguments of a message to functions.NAME
    ST_HARMONY_SKIP,  // a message to a recipient that is not a declared function: dropped
};

enum step {
    STEP_WAIT,  // needs more text
    STEP_AGAIN, // made progress; run again
};

/* Finds where a JSON object/array ends without parsing it (jansson validates later). */
struct jscan {
    int depth;
    bool in_str, esc;
};

struct raw_event {
    enum toolcall_event_kind kind;
    size_t off, len; // CONTENT: slice of text
    int call;        // CALL: index into calls
};

/* Owned by the one thread driving the stream. */
struct toolcall_stream {
    enum toolcall_format fmt;
    struct buf text;    // the whole output so far
    size_t pos;         // bytes before pos are decided
    size_t mark;        // start of the construct being decided (its marker), for fallback
    size_t scan;        // resume point of the current scan
    size_t value_start; // first byte of the JSON value being scanned
    size_t name_off, name_len, id_off, id_len; // Mistral [ARGS] form
    enum state st;
    bool at_start;     // only whitespace so far: a leading JSON value is a candidate
    bool skip_ws;      // a call just ended: drop whitespace before the next content
    bool json_is_args; // ST_JSON: the value is the arguments of name/id above
    bool is_reasoning; // ST_HARMONY_BODY: an analysis message
    bool drop_calls;   // HARMONY: messages to functions.* are dropped (no tools declared)
    bool is_finished;
    int err; // sticky
    struct jscan js;
    struct toolcall *calls;
    int n_calls, cap_calls;
    struct raw_event *raw;
    int n_raw, cap_raw;
    struct toolcall_event *ev; // cap_raw entries, rebuilt from raw at the end of each call
};

/* Result of trying to turn text into calls: not calls (content), calls, or out of memory. */
enum parsed {
    PARSED_NO = 0,
    PARSED_OK = 1,
    PARSED_NOMEM = 2,
};

static inline bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline bool is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

/* Consumes the literal lit at p[*i] when it is there. */
static inline bool eat(const char *p, size_t n, size_t *i, const char *lit)
{
    size_t k = strlen(lit);
    if (n - *i < k || memcmp(p + *i, lit, k) != 0) return false;
    *i += k;
    return true;
}

static inline void skip_ws(const char *p, size_t n, size_t *i)
{
    while (*i < n && is_ws(p[*i]))
        (*i)++;
}

/* calls.c: JSON scanning, the call list, JSON call forms */
void tc_jscan_init(struct jscan *j);
bool tc_jscan_run(struct jscan *j, const char *s, size_t len, size_t *at);
char *tc_json_compact(const json_t *v);
void tc_call_deinit(struct toolcall *c);
void tc_calls_truncate(struct toolcall_stream *s, int n);
enum parsed tc_call_push(struct toolcall_stream *s, char *name, char *args, char *id);
enum parsed tc_args_text(const json_t *args, char **out);
enum parsed tc_calls_from_text(struct toolcall_stream *s, const char *p, size_t n);
enum parsed tc_calls_from_values(struct toolcall_stream *s, const char *p, size_t n,
                                 bool allow_many);
json_t *tc_xml_value(const char *p, size_t n);
enum parsed tc_set_member(json_t *obj, const char *p, size_t n, json_t *v);

/* toolcall.c: events and the outcome of a construct */
int tc_raw_push(struct toolcall_stream *s, struct raw_event e);
int tc_emit_content(struct toolcall_stream *s, size_t from, size_t to);
int tc_emit_reasoning(struct toolcall_stream *s, size_t from, size_t to);
int tc_emit_calls_from(struct toolcall_stream *s, int first);
int tc_settle(struct toolcall_stream *s, enum parsed r, int first_call, size_t end);

/* A block from its opening marker (already passed) to close: its body, and whether close was
 * seen, go to parse (toolcall.c). */
typedef enum parsed (*tc_block_fn)(struct toolcall_stream *s, const char *p, size_t n,
                                   bool is_closed);
int tc_step_block(struct toolcall_stream *s, bool is_final, enum step *out, const char *close,
                  tc_block_fn parse);

/* The format families' states: each returns ERR_OK or an error, and *out says whether the
 * machine should run again (STEP_AGAIN) or wait for more text (STEP_WAIT). */
enum parsed tc_calls_from_hermes(struct toolcall_stream *s, const char *p, size_t n,
                                 bool is_closed);
int tc_step_python(struct toolcall_stream *s, bool is_final, enum step *out); // llama3.c
enum parsed tc_calls_from_python_tag(struct toolcall_stream *s, const char *p, size_t n);
enum parsed tc_py_kwargs(const char *p, size_t n, size_t *i, json_t *obj);
enum parsed tc_calls_from_lfm2(struct toolcall_stream *s, const char *p, size_t n, // lfm2.c
                               bool is_closed);
int tc_step_mistral_start(struct toolcall_stream *s, bool is_final, enum step *out); // mistral.c
int tc_step_mistral_word(struct toolcall_stream *s, bool is_final, enum step *out);
int tc_step_json(struct toolcall_stream *s, bool is_final, enum step *out);
enum parsed tc_call_from_mistral_args(struct toolcall_stream *s, const char *p, size_t n);
int tc_step_harmony_content(struct toolcall_stream *s, bool is_final, enum step *out); // harmony.c
int tc_step_harmony_head(struct toolcall_stream *s, bool is_final, enum step *out);
int tc_step_harmony_body(struct toolcall_stream *s, bool is_final, enum step *out);

#endif
