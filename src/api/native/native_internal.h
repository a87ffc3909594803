/* Shared between the llama.cpp-compatible endpoint files (native*.c, rerank.c): model selection,
 * request parameters, and the generation call that /completion, /infill and /v1/completions
 * drive. Not for other files. */
#ifndef API_NATIVE_INTERNAL_H
#define API_NATIVE_INTERNAL_H

#include "api/generation/generate.h"
#include "api/native/native_prompt.h"
#include "api/generation/params.h"
#include "core/model.h"

/* Which models an endpoint serves. A model must have a tokenizer and satisfy `fits`; a request
 * that names none gets the first ready model that satisfies `prefer`, else (any_ready) the
 * first ready model, else the first model — waited for while it loads, then refused with
 * "The model '<id>' <refusal>" when it does not fit. */
struct native_fit {
    bool (*fits)(const struct platform_model_desc *d);
    bool (*prefer)(const struct platform_model_desc *d);
    bool any_ready;
    const char *refusal;
};

/* The model a request names: `model` in the body (when body is not NULL), else the query
 * argument `model`, else the one fit picks; autoloaded when the router may. A new reference,
 * or NULL with f filled: 404 model_not_found (unknown, none loaded, or gone while waited for),
 * 503 model_loading, 400 wrong_model_type. */
struct model *native_model_acquire_fit(const struct api_ctx *ctx, const struct api_request *req,
                                       const json_t *body, const struct native_fit *fit,
                                       struct api_fail *f);

/* native_model_acquire_fit for the models of one kind. */
struct model *native_model_acquire(const struct api_ctx *ctx, const struct api_request *req,
                                   const json_t *body, enum model_kind kind, struct api_fail *f);

/* The same for endpoints that only need the model's tokenizer (/tokenize, /detokenize) or
 * describe it (/props, /slots), as llama-server serves them for embedding models too: any
 * kind of model that has one; unnamed, the first ready chat model, else the first ready
 * model, else the first model. 404 model_not_found also when the model was unloaded or
 * failed to load while the request waited for it. */
struct model *native_model_acquire_tokenizer(const struct api_ctx *ctx,
                                             const struct api_request *req, const json_t *body,
                                             struct api_fail *f);

/* A tokenizer callback over the model's tokenizer (borrowed while the model is held), with
 * the text bound of the model's context. */
void native_tokenizer_of(const struct model *m, struct native_tokenizer *out);

/* The request fields of /completion-style bodies, after merging. */
struct native_params {
    struct gen_request_params p;
    bool is_stream;
    bool return_tokens;
    bool cache_prompt;    // accepted; the cpu platform always reuses the longest prefix
    int id_slot;          // preferred instance (used when idle), -1 when absent
    int n_keep;           // accepted; the context is never shifted
    bool is_predict_none; // n_predict 0: evaluate nothing, answer empty
    struct buf grammar;   // GBNF from grammar/json_schema/response_format (owned); p.gen.grammar
                          // points into it
    json_t *body;         // a reference on the request body p.stops point into: a stream
                          // outlives the handler that owned the body
};

/* Parses and merges every generation field of body (server defaults <- model default_params
 * <- body) with names for max tokens and stop. llama.cpp's spellings are accepted: negative
 * n_predict/max_tokens (no limit), negative temperature (greedy), logit_bias arrays,
 * repeat_last_n -1 (the context size); grammar/json_schema (and response_format) become a
 * GBNF constraint. 400 on any bad field. True when valid; free with native_params_deinit()
 * either way. */
bool native_params_parse(const struct api_ctx *ctx, const struct model *m, json_t *body,
                         const struct params_names *names, struct native_params *out,
                         struct api_fail *f);

/* Frees the grammar. A zeroed struct is a no-op. */
void native_params_deinit(struct native_params *np);

/* A running generation and what its answer needs. Owned by one HTTP thread (or the SSE
 * producer after hand-over). */
struct native_call {
    struct model *model;         // one reference
    struct gen_session *session; // NULL until started (or for n_predict 0)
    struct native_params np;
    struct tok_ids prompt;
    json_t *tokens;            // generated ids (all steps unless streaming)
    json_t *probs;             // completion_probabilities entries (n_probs > 0) or NULL
    json_t *step_tokens;       // the last step's ids
    json_t *step_probs;        // the last step's probabilities, or NULL
    struct buf content;        // whole text (non-streaming)
    const char *stopping_word; // borrowed from the request, or NULL
    const char *finish_reason; // when done
    bool is_done;
    bool has_new_line;   // the generated text holds a newline (llama-server's has_new_line)
    bool is_oai;         // /v1/completions shapes
    bool include_usage;  // oai streaming: a usage chunk before [DONE]
    int oai_logprobs;    // /v1/completions `logprobs` (alternatives per token), -1 when absent
    int oai_text_offset; // characters of completion text already described by logprobs
    char id[48];
    int64_t created;
};

/* Allocates a call holding m (takes the reference). NULL on allocation failure (m is
 * released). */
struct native_call *native_call_new(struct model *m);
/* Ends the session and frees everything. NULL is a no-op. */
void native_call_free(void *call);

/* Checks the context and starts generation of c->prompt with c->np. 400
 * context_length_exceeded, 429 queue_full, … ERR_OK or an error with f filled. */
int native_call_start(const struct api_ctx *ctx, struct native_call *c, struct api_fail *f);

/* Runs one step: waits up to timeout_ms, sets c->step_tokens/step_probs to the step's ids and
 * probabilities (appending them to c->tokens/probs unless streaming), and fills d. False on timeout. After is_done, c->finish_reason
 * is set (NULL on error) and c->stopping_word when a stop string ended it. */
bool native_call_step(struct native_call *c, int timeout_ms, struct gen_delta *d);

/* llama.cpp's stop_type: "eos", "word", "limit" (or "none" while running). Static. */
const char *native_stop_type(const struct native_call *c);

/* llama.cpp's generation_settings for the merged parameters. New reference or NULL. */
json_t *native_settings_json(const struct model *m, const struct native_params *np);

#endif
