/* An Ollama request's sampling and output fields as the request body the shared parameter
 * merge reads (OpenAI/llama.cpp names): `options` (temperature, top_k, top_p, min_p, seed,
 * num_predict, stop, repeat_penalty, repeat_last_n, presence/frequency_penalty, mirostat*,
 * num_ctx and the runner options accepted) and `format` ("json" or a JSON schema) as
 * response_format. Pure JSON to JSON, so the mapping is tested without a model. */
#ifndef API_OLLAMA_OPTIONS_H
#define API_OLLAMA_OPTIONS_H

#include "api/validate.h"

/* Builds *out, a new object holding the translated fields, from the Ollama request req
 * (borrowed). Also carried over, as llamapi extensions, when req has them at its top level:
 * grammar, json_schema, logit_bias, tool_choice, parallel_tool_calls. 400 with Ollama's kind
 * of message (the option named) on a wrong type or value; 500 out of memory. On failure *out
 * is NULL. Caller decrefs *out. */
bool ollama_options_to_body(const json_t *req, json_t **out, struct api_fail *f);

#endif
