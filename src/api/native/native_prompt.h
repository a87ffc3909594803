/* llama.cpp's native request shapes that need more than a type check: a `prompt` given as a
 * string, a token array, a mixed array of ids and strings, or {"prompt_string": …}; and
 * `logit_bias` as an object or as [[id or text, bias or false], …]. Pure: strings are
 * tokenized through a callback, so the rules are tested without a model. */
#ifndef API_NATIVE_PROMPT_H
#define API_NATIVE_PROMPT_H

#include "api/validate.h"
#include "platform/request.h"
#include "text/tokenizer/tokenizer.h"

/* Appends the tokens of text to out (add_special: the vocab's BOS/EOS rules). ERR_NOMEM or
 * another error code; out is unchanged on failure. */
typedef int (*native_encode_fn)(const void *ctx, struct str text, bool add_special,
                                bool parse_special, struct tok_ids *out);

struct native_tokenizer {
    native_encode_fn encode;
    const void *ctx;       // passed to encode
    int n_vocab;           // token ids must be in [0, n_vocab)
    int n_ctx;             // the context a prompt must fit (for the error message)
    size_t text_bytes_max; // a prompt string longer than this cannot fit n_ctx tokens, and a
                           // prompt already n_ctx tokens long takes no more: both refused
                           // unencoded (tok_text_bytes_max); 0 = no bound
};

#define NATIVE_PROMPT_MAX_TOKENS (1 << 22) // ids in one prompt array

/* Tokenizes a prompt value (borrowed), reported as `name` on failure:
 * - "text": tokenized with add_special and parse_special;
 * - [ids…]: taken as given (no BOS added);
 * - [ids and strings…]: concatenated; only a string in first position gets add_special;
 * - {"prompt_string": P}: as P; a non-empty "multimodal_data" is 400 invalid_value (no
 *   model here reads media through this field);
 * - an array of exactly one of the above: that prompt (llama.cpp's list of prompts; more
 *   than one is 400 invalid_value here: /completion answers a list whole by parsing each
 *   item, see native_prompt_count).
 * 400 invalid_type / invalid_value (id outside the vocab, empty array), 400
 * context_length_exceeded for text past t->text_bytes_max, 500 when encoding fails. Appends
 * to out; ERR_OK or an error with f filled. */
/* How many prompts a `prompt` value holds: an array without token ids at its top is
 * llama-server's list of prompts (["a", [1, 2], {prompt_string}]); anything else is one. */
size_t native_prompt_count(const json_t *prompt);

int native_prompt_parse(const json_t *prompt, const char *name, const struct native_tokenizer *t,
                        bool add_special, bool parse_special, struct tok_ids *out,
                        struct api_fail *f);

/* Adds llama.cpp-style logit biases (borrowed value, field name "logit_bias") to g:
 * {"15043": 1.0, "Hello": -0.5} or [[15043, 1.0], ["Hello", false], …]. A text key biases
 * every token of its tokenization (no BOS, specials as text); false bans the token
 * (-INFINITY), as do biases <= -100. Numbers outside [-100, 100] are 400 invalid_value; more
 * than GEN_MAX_LOGIT_BIAS entries in total, 400. True when valid (g->n_logit_bias grows). */
bool native_logit_bias_parse(json_t *lb, const struct native_tokenizer *t, struct gen_params *g,
                             struct api_fail *f);

/* Appends s to out with every byte that does not start a valid UTF-8 character (shortest
 * form, no surrogates, at most U+10FFFF) replaced by U+FFFD, so detokenized text of arbitrary
 * ids can be a JSON string. ERR_NOMEM. */
int native_utf8_sanitize(const char *s, size_t len, struct buf *out);

#endif
