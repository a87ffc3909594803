/* Chat templates around the Jinja interpreter: a few named built-in templates (ChatML is the
 * fallback when a model ships none) and the render context built from OpenAI-style messages
 * and tools the way Hugging Face's apply_chat_template passes them. Not a tool-call parser. */
#ifndef TEXT_CHAT_TEMPLATE_H
#define TEXT_CHAT_TEMPLATE_H

#include "text/jinja/jinja.h"
#include "util/buf.h"
#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Jinja source of a built-in template by name ("chatml", "llama3", "mistral", "gemma"), or
 * NULL for an unknown name. The string is static. */
const char *chat_template_builtin(const char *name);

/* The template used when a model has no tokenizer.chat_template: ChatML. Static. */
const char *chat_template_default(void);

/* Name i of the built-ins, 0..n-1; NULL past the end. Static. */
const char *chat_template_builtin_name(size_t i);

struct chat_template_opts {
    bool add_generation_prompt; // end with the assistant header
    int enable_thinking;        // -1 = leave unset (the template's default), 0 = false, 1 = true
    const char *bos_token;      // NULL = ""
    const char *eos_token;      // NULL = ""
    const json_t *extra;        // object of extra template variables (chat_template_kwargs) or NULL
    bool keep_raw_messages;     // true: pass messages exactly as given (no normalization below)
    size_t max_out_bytes;       // out may reach this many bytes before ERR_LIMIT; 0 = the
                                // interpreter's default (jinja_render_opts.max_out_bytes)
    bool *is_out_over;          // set true when rendering stopped there; may be NULL
};

/* Builds the variables for jinja_template_render: messages, tools (when tools is a non-empty
 * array), add_generation_prompt, bos_token, eos_token, enable_thinking (when set) and every key
 * of opts->extra. Unless keep_raw_messages, messages are normalized as llama.cpp does for
 * templates: content arrays of text parts are joined with "\n" into one string (other part
 * types are dropped), a null content becomes "", and tool_calls[].function.arguments given as
 * a JSON string holding an object is parsed into that object. messages must be an array of
 * objects (borrowed). ERR_INVALID (message in err names the bad field) or ERR_NOMEM. On
 * success *out is a new object the caller releases with json_decref(). Thread-safe. */
int chat_template_context(const json_t *messages, const json_t *tools,
                          const struct chat_template_opts *opts, json_t **out, struct errmsg *err);

/* chat_template_context + jinja_template_render into out (appended). Errors as both. */
int chat_template_apply(const struct jinja_template *t, const json_t *messages, const json_t *tools,
                        const struct chat_template_opts *opts, struct buf *out, struct errmsg *err);

#endif
