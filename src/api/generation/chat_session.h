/* OpenAI-style messages and tools to a running generation or a token count: validation,
 * template, tokenization and gen_session_start in one call, for the endpoints that translate
 * their own request shapes into chat messages (Anthropic Messages, OpenAI Responses) and for
 * the token-counting endpoints. Not a request parser: callers build the messages. */
#ifndef API_CHAT_SESSION_H
#define API_CHAT_SESSION_H

#include "api/generation/generate.h"
#include "api/generation/params.h"

struct chat_session_args {
    struct model *model;                     // borrowed for the call
    json_t *messages;                        // OpenAI chat messages (borrowed)
    json_t *tools;                           // OpenAI chat tools (borrowed) or NULL: none shown
    const struct gen_request_params *params; // merged sampling; stops borrowed
    int enable_thinking;                     // -1 unset (template default), 0, 1
    const json_t *template_kwargs;           // extra template variables (borrowed) or NULL
    const struct media_path *media_path;     // local files allowed under it; NULL: refused
    const json_t *structured;  // object with response_format / grammar / json_schema fields
                               // (borrowed) or NULL: no constraint asked
    const json_t *tool_choice; // OpenAI form ("required", {"type":"function",…}) or NULL
    bool is_parallel;          // a forced tool choice may produce several calls
    bool is_prefill;           // a last assistant message is continued, not closed (llama-server's
                               // prefill; also continue_final_message)
    struct metrics *metrics;   // server counters or NULL
};

/* Validates the messages, renders and tokenizes the prompt, builds the grammar (structured
 * output, else a forced tool choice in the model's tool-call format) and submits it. On success *out is
 * the caller's (end it with gen_session_end()) and *n_prompt the prompt's token count. Errors
 * (f filled): those of chat_messages_validate, structured_from_body, structured_tool_grammar,
 * chat_prompt_build and gen_session_start. */
int chat_session_start(const struct chat_session_args *a, struct gen_session **out, int *n_prompt,
                       struct api_fail *f);

/* The request fields a platform cannot honour that must be refused before the generic
 * validation reads them (n > 1, whose range check would call it invalid, and logit_bias, whose
 * token ids mean nothing to a runtime that tokenizes itself): 400 unsupported_parameter naming
 * the field and the platform. True when the body may go on. */
bool chat_session_precheck(const struct model *m, const json_t *body, struct api_fail *f);

/* Renders and tokenizes as chat_session_start would, without generating; *n_tokens is the
 * prompt's length, also when it exceeds the context (counting is what the caller asked).
 * a->params is unused. Errors as chat_messages_validate and chat_prompt_build. */
int chat_session_count(const struct chat_session_args *a, int *n_tokens, struct api_fail *f);

/* Whether the prompt chat_session_start would build fits the context (leaving room for one
 * token), without generating; it stops as early as chat_prompt_build does. ERR_OK with *fits,
 * or the errors of chat_messages_validate and chat_prompt_build other than the context's. For
 * the routes that drop old messages until a conversation fits. */
int chat_session_fits(const struct chat_session_args *a, bool *fits, struct api_fail *f);

/* Adds the session's warning (what the runtime will not apply) to resp as an
 * x-llamapi-warning header; nothing when there is none. */
void chat_session_add_warning(const struct gen_session *s, struct api_response *resp);

#endif
