/* Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens): the request is
 * translated into OpenAI chat messages and tools and runs through the chat machinery; the
 * answer is rendered in Anthropic's message, stream-event and error shapes. The translation
 * functions are exported for tests; the handlers are in api/handlers.h. */
#ifndef API_ANTHROPIC_H
#define API_ANTHROPIC_H

#include "api/validate.h"
#include "text/toolcall/toolcall.h"
#include "util/buf.h"
#include "util/str.h"

/* A Messages request in chat-completions terms. */
struct anthropic_chat {
    json_t *messages;    // new reference: OpenAI chat messages
    json_t *tools;       // new reference or NULL: OpenAI tools (NULL also for tool_choice none)
    int enable_thinking; // from `thinking`: -1 absent, 0 disabled, 1 enabled
    json_t *tool_choice; // new reference or NULL: "required" (any) or {"type":"function",
                         // "function":{"name"}} (tool), which the grammar enforces
    bool is_parallel;    // false with tool_choice.disable_parallel_tool_use
};

/* Translates body's system, messages, tools, tool_choice and thinking. system: a string or
 * text blocks. messages: role user/assistant, content a string or blocks text, image (base64
 * source only), tool_use (→ assistant tool_calls), tool_result (→ a tool message; is_error
 * prefixes "Error: "), thinking (→ reasoning_content), redacted_thinking (dropped). False with
 * f filled (400 invalid_type, invalid_value, unsupported_content_part_type; 500 on allocation
 * failure). On success the caller releases out with anthropic_chat_deinit(). */
bool anthropic_to_chat(const json_t *body, struct anthropic_chat *out, struct api_fail *f);

/* Drops the references; a zeroed struct is a no-op. */
void anthropic_chat_deinit(struct anthropic_chat *c);

/* A finished answer's pieces (borrowed). */
struct anthropic_output {
    struct str reasoning;
    struct str text;
    const struct toolcall *calls;
    int n_calls;
};

/* The `content` array: a thinking block (signature ""), a text block (also when nothing else
 * was produced, so content is never empty), one tool_use block per call with `input` parsed
 * from the arguments (the call's id, or a new "toolu_…"). NULL on allocation failure. */
json_t *anthropic_content_json(const struct anthropic_output *o);

/* ---- streaming events ---- */

enum anthropic_block {
    ANTHROPIC_BLOCK_NONE = 0,
    ANTHROPIC_BLOCK_THINKING = 1,
    ANTHROPIC_BLOCK_TEXT = 2,
};

/* The event writer of one streamed message; zero it to start. */
struct anthropic_stream {
    int n_blocks; // content blocks started and stopped (the open one's index)
    int open;     // enum anthropic_block being written
};

/* Appends message_start (empty content, usage.input_tokens = n_prompt) and a ping. ERR_NOMEM. */
int anthropic_stream_start(const char *id, const char *model, int n_prompt, struct buf *out);

/* Appends one step's events: reasoning as thinking_delta and text as text_delta into the open
 * block of that kind (closing the other kind first: content_block_stop, then
 * content_block_start), and each complete call as its own tool_use block (start with input {},
 * one input_json_delta holding the whole arguments, stop). ERR_NOMEM. */
int anthropic_stream_delta(struct anthropic_stream *st, const struct anthropic_output *o,
                           struct buf *out);

/* Closes the open block (writing an empty text block when the message has none), then
 * message_delta {delta:{stop_reason, stop_sequence}, usage} and message_stop. stop_sequence
 * (NULL: null) and usage are consumed. ERR_NOMEM. */
int anthropic_stream_finish(struct anthropic_stream *st, const char *stop_reason,
                            json_t *stop_sequence, json_t *usage, struct buf *out);

/* A chat finish reason as an Anthropic stop_reason: tool_calls → tool_use, length →
 * max_tokens, stop on a stop string → stop_sequence, else end_turn. Static. Cannot fail. */
const char *anthropic_stop_reason(const char *finish_reason, bool is_stop_string);

#endif
