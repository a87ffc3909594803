/* Generation parameters as the API sees them: validation of a model's default_params and,
 * for each request, the merge server defaults ← model default_params ← request fields. */
#ifndef API_PARAMS_H
#define API_PARAMS_H

#include "api/validate.h"
#include "platform/request.h"

#define PARAMS_MAX_STOP     16  // stop strings per request
#define PARAMS_STOP_MAX_LEN 256 // bytes per stop string

/* Checks a default_params object: known keys only (a misspelt key would silently do nothing),
 * each with its type and range. True when valid. */
bool params_validate_defaults(json_t *dp, struct api_fail *f);

/* The stop strings in a `stop` value (string or array of strings), validated. Borrowed from
 * the JSON. Returns the count (0..PARAMS_MAX_STOP) or -1 with f filled. */
int params_stop_list(const json_t *stop, const char *name, const char **out, struct api_fail *f);

/* The sampling fields every generating endpoint shares, after merging. */
struct gen_request_params {
    struct gen_params gen;              // sampler settings and limits
    const char *stops[PARAMS_MAX_STOP]; // borrowed from the request or model JSON
    int n_stops;
    int enable_thinking; // -1 unset, 0, 1
};

/* Names of the request fields for one API dialect (OpenAI, llama.cpp native, Anthropic). */
struct params_names {
    const char *max_tokens;     // "max_tokens"
    const char *max_tokens_alt; // "max_completion_tokens" (wins when both) or NULL
    const char *stop;           // "stop"
};

/* Merges server defaults <- model default_params <- request (body). Every field's type and
 * range is checked; failures name the field. n_vocab bounds logit_bias ids. True when valid. */
bool params_merge(const json_t *default_params, const json_t *body,
                  const struct params_names *names, int n_vocab, struct gen_request_params *out,
                  struct api_fail *f);

/* params_merge starting from base — the server's defaults from its flags (--temp, --top-k,
 * -n, …) — instead of gen_params_defaults(); base NULL is the same as params_merge. base is
 * copied except its grammar (the result's grammar is NULL). */
bool params_merge_base(const struct gen_params *base, const json_t *default_params,
                       const json_t *body, const struct params_names *names, int n_vocab,
                       struct gen_request_params *out, struct api_fail *f);

/* llama-server's sampling extensions, on any generation endpoint: mirostat (0, 1, 2),
 * mirostat_tau (> 0 – 100), mirostat_eta (0–1), ignore_eos, repeat_last_n (−1 = n_ctx),
 * return_progress (prompt progress points; streams show them), written into g over what it
 * holds. 400 invalid_type / invalid_value naming the field. */
bool params_llama_extras(const json_t *body, int n_ctx, struct gen_params *g, struct api_fail *f);

#endif
