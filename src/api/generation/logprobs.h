/* Per-token log-probabilities as JSON, in the two shapes clients expect: llama.cpp's
 * `completion_probabilities` entries ({id, token, bytes, logprob, top_logprobs}) and OpenAI's
 * `logprobs.content` entries ({token, logprob, bytes, top_logprobs}). */
#ifndef API_LOGPROBS_H
#define API_LOGPROBS_H

#include "platform/request.h"
#include "text/tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdbool.h>

/* A JSON string of len bytes of token text; bytes that are not UTF-8 become U+FFFD (a token
 * may hold part of a character). NULL on allocation failure. */
json_t *api_text_json(const char *s, size_t len);

/* One entry per event: the chosen token and up to max_top of its alternatives (-1: as many as
 * the event has). with_ids adds each token's id (llama.cpp's shape); in that shape an event
 * with post-sampling probabilities reports "prob"/"top_probs" as llama-server does. NULL on
 * allocation failure. */
json_t *api_logprobs_json(const struct tokenizer *tok, const struct gen_event *ev, int n,
                          int max_top, bool with_ids);

#endif
