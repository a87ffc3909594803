/* Typed, range-checked reads of request fields. Each getter leaves *out untouched when the
 * field is absent (so callers pre-fill defaults), and on a wrong type or range fills the
 * failure with the field's name as `param` and a message saying what was expected. */
#ifndef API_VALIDATE_H
#define API_VALIDATE_H

#include "api/api.h"

#include <stdbool.h>
#include <stdint.h>

struct api_fail {
    int status;       // HTTP status (400 unless said otherwise)
    const char *type; // API_TYPE_* (static)
    const char *code; // static or NULL
    char param[128];  // field path, e.g. "default_params.temperature"
    char message[768];
    int n_prompt_tokens; // with n_ctx > 0: the prompt that did not fit (llama-server's fields)
    int n_ctx;           // the context it did not fit in; 0: not a context failure
};

/* Records a failure; returns false so validators can `return api_failf(...)`. */
bool api_failf(struct api_fail *f, int status, const char *code, const char *param, const char *fmt,
               ...) __attribute__((format(printf, 5, 6)));

/* A prompt of n_prompt tokens that leaves no room in a context of n_ctx: 400
 * exceed_context_size_error / context_length_exceeded naming param, with llama-server's
 * message and its n_prompt_tokens and n_ctx fields. Returns false. */
bool api_fail_context(struct api_fail *f, const char *param, size_t n_prompt, int n_ctx);

/* The same for a prompt refused before it was counted, being longer than n_ctx tokens can
 * stand for: the message says "more than n_ctx tokens"; n_prompt_tokens is n_ctx + 1. */
bool api_fail_context_over(struct api_fail *f, const char *param, int n_ctx);

/* The request was abandoned while its handler was still preparing it (its client closed the
 * connection, or the server is stopping): 503 request_cancelled. Returns false. */
bool api_fail_cancelled(struct api_fail *f);

/* Turns a failure into an error response. */
/* Responds with f as an OpenAI-style error; 429 and 503 also get Retry-After: 1. */
void api_fail_respond(const struct api_fail *f, struct api_response *resp);

/* The end of a handler that built its answer j (consumed) after steps that set ok: 200 with j;
 * without j, the failure f when a step failed, else 500 out of memory (building j failed). */
void api_respond_result(struct api_response *resp, json_t *j, bool ok, const struct api_fail *f);

/* Getters: true when absent or valid (writing *out only when present and valid). `name` is
 * the param reported on failure. Integers must be JSON integers; numbers accept both. */
bool v_int(const json_t *obj, const char *key, const char *name, int64_t min, int64_t max,
           int64_t *out, struct api_fail *f);
bool v_number(const json_t *obj, const char *key, const char *name, double min, double max,
              double *out, struct api_fail *f);
bool v_bool(const json_t *obj, const char *key, const char *name, bool *out, struct api_fail *f);
/* *out is borrowed from obj. max_len bounds the byte length. */
bool v_string(const json_t *obj, const char *key, const char *name, size_t max_len,
              const char **out, struct api_fail *f);

/* Requires the key to be present; false with a "missing required parameter" failure. */
bool v_require(const json_t *obj, const char *key, const char *name, struct api_fail *f);

/* Shared failure helpers for request translations (Anthropic, Responses). Each returns
 * false (NULL for v_need_string) so callers can return it directly.
 * v_fail_nomem: 500 "out of memory". v_fail_type: 400 invalid_type naming param and the
 * expected type. v_need_string: the string member key of obj (param.key on failure).
 * v_append_new: appends v (consumed) to arr; v NULL means a failure already recorded in f,
 * or else out of memory. */
bool v_fail_nomem(struct api_fail *f);
bool v_fail_type(struct api_fail *f, const char *param, const char *expected, const json_t *v);
const char *v_need_string(const json_t *obj, const char *key, const char *param,
                          struct api_fail *f);
bool v_append_new(json_t *arr, json_t *v, struct api_fail *f);

/* JSON type name as OpenAI reports it ("string", "integer", "object", …). */
const char *v_type_name(const json_t *v);

#endif
