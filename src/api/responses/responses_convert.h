/* OpenAI Responses API shapes in chat-completions terms: input items (messages with
 * input_text/input_image/output_text parts, function_call, function_call_output, reasoning)
 * to chat messages, tools to chat tools, and the generated answer to output items. Pure JSON
 * work, no model: the handlers are in responses.c. */
#ifndef API_RESPONSES_CONVERT_H
#define API_RESPONSES_CONVERT_H

#include "api/validate.h"
#include "text/toolcall/toolcall.h"
#include "util/str.h"

/* A Responses request in chat-completions terms. */
struct responses_chat {
    json_t *messages;    // new reference: instructions (as system) + history
    json_t *history;     // new reference: the previous conversation + this input, no
                         // instructions (what is stored, with the answer, for the next turn)
    json_t *tools;       // new reference or NULL (also for tool_choice "none")
    int enable_thinking; // from reasoning.effort: -1 absent, 0 none/minimal, 1 otherwise
    json_t *tool_choice; // new reference or NULL: "required" or {"type":"function",
                         // "function":{"name"}}, which the grammar enforces
    bool is_parallel;    // parallel_tool_calls (default true)
    json_t *structured;  // new reference or NULL: {response_format: text.format, grammar,
                         // json_schema} for structured_from_body
};

/* Translates body's instructions, input, tools, tool_choice and reasoning, after previous (a
 * stored conversation of chat messages, borrowed, or NULL). 400 failures name the field
 * (invalid_type, invalid_value, unsupported_value for non-function tools, background,
 * conversation and file images); 500 on allocation failure. On
 * success the caller releases out with responses_chat_deinit(). */
bool responses_to_chat(const json_t *body, const json_t *previous, struct responses_chat *out,
                       struct api_fail *f);

/* Appends the chat messages for Responses items (the `input` array shape; output items are
 * valid items too) to messages. param names the array in failures. */
bool responses_items_to_chat(const json_t *items, const char *param, json_t *messages,
                             struct api_fail *f);

/* Drops the references; a zeroed struct is a no-op. */
void responses_chat_deinit(struct responses_chat *c);

/* Output items. text.ptr NULL: a message still in progress, with content []. NULL on
 * allocation failure. */
json_t *responses_message_item(const char *id, const char *status, struct str text);
/* text.ptr NULL: content [] (in progress). */
json_t *responses_reasoning_item(const char *id, struct str text);
json_t *responses_function_call_item(const char *id, const char *call_id, const char *name,
                                     const char *arguments, const char *status);

/* A finished answer's pieces (borrowed). */
struct responses_output {
    struct str reasoning;
    struct str text;
    const struct toolcall *calls;
    int n_calls;
    bool is_incomplete; // cut short (max_output_tokens): the message item says "incomplete"
};

/* The output array: a reasoning item (when there is reasoning), a message (when there is text
 * or nothing else; status "incomplete" when the output was cut short, as OpenAI marks it),
 * one function_call per call (call_id from the call's id or a new "call_…"). Item ids are new
 * ("rs_…", "msg_…", "fc_…"). NULL on allocation failure. */
json_t *responses_output_json(const struct responses_output *o);

#endif
