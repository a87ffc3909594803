/* One running /api/chat or /api/generate request and its answer in Ollama's shapes: NDJSON
 * lines as the generation goes (the default) or one object at the end (`stream: false`),
 * ending with done, done_reason and the timings in nanoseconds. Owned by one HTTP thread,
 * then by the stream. */
#ifndef API_OLLAMA_CALL_H
#define API_OLLAMA_CALL_H

#include "api/generation/generate.h"
#include "api/generation/params.h"
#include "api/ollama/common.h"
#include "text/tokenizer/tokenizer.h"

struct ollama_call {
    struct model *model; // one reference
    struct gen_session *session;
    json_t *body; // the translated request body (one reference): params.stops point into it
    struct gen_request_params params;
    char name[MODEL_ID_CAP]; // the model name as the client sent it (echoed in "model")
    bool is_chat;            // a message object (chat) or a response string (generate)
    int think;               // -1 unset, 0: thinking dropped from the answer, 1
    bool want_context;       // generate: answer `context` (prompt and answer tokens)
    int64_t start_ns;        // monotonic: the request arrived
    int64_t loaded_ns;       // monotonic: its model was resolved (load_duration)
    struct buf content;      // whole answers: accumulated
    struct buf thinking;
    struct tok_ids answer_ids; // generate: the answer's tokens, for `context`
    int top_logprobs;          // alternatives per token with logprobs: true; -1: no logprobs
    json_t *logprobs;          // entries not yet sent (array) or NULL without logprobs
};

/* A zeroed call with the start time taken; NULL when out of memory. */
struct ollama_call *ollama_call_new(bool is_chat);

/* Frees the call (ends its session). NULL is a no-op. */
void ollama_call_free(void *call);

/* Merges the sampling parameters: server defaults ← the model's default_params ← c->body
 * (set by the caller from ollama_options_to_body). False with f filled. */
bool ollama_call_params(const struct api_ctx *ctx, struct ollama_call *c, struct api_fail *f);

/* The request fields every generating route shares: model (acquired into c->model, a chat
 * model), stream (*is_stream), think, keep_alive (checked, not applied), logprobs and
 * top_logprobs (0–20), options and format (translated into c->body), then the sampling merge. False with f filled (400, 404, 503). */
bool ollama_call_begin(const struct api_ctx *ctx, const json_t *req, struct ollama_call *c,
                       bool *is_stream, struct api_fail *f);

/* Answers a started call (c->session set): streamed when is_stream (resp takes the call),
 * else whole (the call is freed here). */
void ollama_call_respond(struct ollama_call *c, bool is_stream, struct api_response *resp);

/* Ollama's `think`: a bool or "low"/"medium"/"high"/"max" (as true). Writes *out -1 when absent,
 * else 0 or 1. 400 on another value. */
bool ollama_think_parse(const json_t *body, int *out, struct api_fail *f);

/* `stream`: true unless the body says false. 400 when it is not a bool. */
bool ollama_stream_parse(const json_t *body, bool *out, struct api_fail *f);

/* Refuses think: true for a model whose template has no reasoning markers, as Ollama does:
 * 400 "\"NAME\" does not support thinking". */
bool ollama_think_check(const struct ollama_call *c, struct api_fail *f);

/* An answer for a request that generates nothing (an empty prompt or message list loads the
 * model in Ollama): done at once with done_reason reason ("load" or "unload"). */
void ollama_respond_empty(const struct ollama_call *c, const char *reason,
                          struct api_response *resp);

#endif
