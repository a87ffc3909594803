/* POST /v1/chat/completions pieces shared with the endpoints built on the same machinery. */
#ifndef API_OPENAI_CHAT_H
#define API_OPENAI_CHAT_H

#include "api/api.h"
#include "api/generation/generate.h"
#include "api/models/model_select.h"

/* llama.cpp's `timings` object for a finished session. */
json_t *api_timings_json(struct gen_session *s);

/* llama-server's `prompt_progress` object {total, cache, processed, time_ms}. New reference,
 * or NULL when out of memory. */
json_t *api_progress_json(const struct request_progress *p);

/* OpenAI `usage` for a finished session (prompt_tokens_details.cached_tokens included). */
json_t *api_usage_json(struct gen_session *s);

#endif
