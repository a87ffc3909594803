/* Field validation helpers. */
#include "api/validate.h"

#include "api/errors.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool api_failf(struct api_fail *f, int status, const char *code, const char *param, const char *fmt,
               ...)
{
    f->status = status;
    f->type = status == 404   ? API_TYPE_INVALID_REQUEST
              : status >= 500 ? API_TYPE_SERVER
                              : API_TYPE_INVALID_REQUEST;
    f->code = code;
    f->n_prompt_tokens = f->n_ctx = 0;
    snprintf(f->param, sizeof f->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    return false;
}

bool api_fail_context(struct api_fail *f, const char *param, size_t n_prompt, int n_ctx)
{
    api_failf(f, 400, "context_length_exceeded", param,
              "request (%zu tokens) exceeds the available context size (%d tokens), try "
              "increasing it",
              n_prompt, n_ctx);
    f->type = API_TYPE_EXCEED_CONTEXT;
    f->n_prompt_tokens = n_prompt > INT32_MAX ? INT32_MAX : (int)n_prompt;
    f->n_ctx = n_ctx;
    return false;
}

bool api_fail_context_over(struct api_fail *f, const char *param, int n_ctx)
{
    api_failf(f, 400, "context_length_exceeded", param,
              "request (more than %d tokens) exceeds the available context size (%d tokens), "
              "try increasing it",
              n_ctx, n_ctx);
    f->type = API_TYPE_EXCEED_CONTEXT;
    f->n_prompt_tokens = n_ctx < INT32_MAX ? n_ctx + 1 : INT32_MAX;
    f->n_ctx = n_ctx;
    return false;
}

bool api_fail_cancelled(struct api_fail *f)
{
    api_failf(f, 503, "request_cancelled", NULL,
              "The request was cancelled before it started (the client closed the connection "
              "or the server is stopping).");
    f->type = API_TYPE_UNAVAILABLE;
    return false;
}

void api_fail_respond(const struct api_fail *f, struct api_response *resp)
{
    json_t *j = api_error_json(f->type ? f->type : API_TYPE_INVALID_REQUEST, f->code,
                               f->param[0] ? f->param : NULL, f->message);
    json_t *inner = json_object_get(j, "error");
    if (inner && f->n_ctx > 0) {
        json_object_set_new(inner, "n_prompt_tokens", json_integer(f->n_prompt_tokens));
        json_object_set_new(inner, "n_ctx", json_integer(f->n_ctx));
    }
    api_respond_json(resp, f->status ? f->status : 400, j);
    // Both mean "not now": a full queue, or a model loading or no room to load one.
    if (f->status == 429 || f->status == 503) api_response_add_header(resp, "Retry-After", "1");
}

void api_respond_result(struct api_response *resp, json_t *j, bool ok, const struct api_fail *f)
{
    if (j)
        api_respond_json(resp, 200, j);
    else if (ok)
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
    else
        api_fail_respond(f, resp);
}

const char *v_type_name(const json_t *v)
{
    if (!v) return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

bool v_require(const json_t *obj, const char *key, const char *name, struct api_fail *f)
{
    if (json_object_get(obj, key)) return true;
    return api_failf(f, 400, "missing_required_parameter", name,
                     "Missing required parameter: '%s'.", name);
}

bool v_int(const json_t *obj, const char *key, const char *name, int64_t min, int64_t max,
           int64_t *out, struct api_fail *f)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return true;
    if (!json_is_integer(v))
        return api_failf(f, 400, "invalid_type", name,
                         "Invalid type for '%s': expected an integer, but got %s.", name,
                         v_type_name(v));
    json_int_t n = json_integer_value(v);
    if (n < min || n > max)
        return api_failf(f, 400, "invalid_value", name,
                         "Invalid value for '%s': %lld is out of range [%lld, %lld].", name,
                         (long long)n, (long long)min, (long long)max);
    *out = n;
    return true;
}

bool v_number(const json_t *obj, const char *key, const char *name, double min, double max,
              double *out, struct api_fail *f)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return true;
    if (!json_is_number(v))
        return api_failf(f, 400, "invalid_type", name,
                         "Invalid type for '%s': expected a number, but got %s.", name,
                         v_type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < min || x > max)
        return api_failf(f, 400, "invalid_value", name,
                         "Invalid value for '%s': %g is out of range [%g, %g].", name, x, min, max);
    *out = x;
    return true;
}

bool v_bool(const json_t *obj, const char *key, const char *name, bool *out, struct api_fail *f)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return true;
    if (!json_is_boolean(v))
        return api_failf(f, 400, "invalid_type", name,
                         "Invalid type for '%s': expected a boolean, but got %s.", name,
                         v_type_name(v));
    *out = json_is_true(v);
    return true;
}

bool v_string(const json_t *obj, const char *key, const char *name, size_t max_len,
              const char **out, struct api_fail *f)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return true;
    if (!json_is_string(v))
        return api_failf(f, 400, "invalid_type", name,
                         "Invalid type for '%s': expected a string, but got %s.", name,
                         v_type_name(v));
    if (json_string_length(v) > max_len)
        return api_failf(f, 400, "string_above_max_length", name,
                         "Invalid '%s': string too long (%zu bytes; at most %zu).", name,
                         json_string_length(v), max_len);
    *out = json_string_value(v);
    return true;
}

bool v_fail_nomem(struct api_fail *f)
{
    return api_failf(f, 500, NULL, NULL, "out of memory");
}

bool v_fail_type(struct api_fail *f, const char *param, const char *expected, const json_t *v)
{
    return api_failf(f, 400, "invalid_type", param,
                     "Invalid type for '%s': expected %s, but got %s.", param, expected,
                     v_type_name(v));
}

const char *v_need_string(const json_t *obj, const char *key, const char *param, struct api_fail *f)
{
    char name[192];
    snprintf(name, sizeof name, "%s.%s", param, key);
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v)) {
        v_fail_type(f, name, "a string", v);
        return NULL;
    }
    return json_string_value(v);
}

bool v_append_new(json_t *arr, json_t *v, struct api_fail *f)
{
    if (v && json_array_append_new(arr, v) == 0) return true;
    return f->status ? false : v_fail_nomem(f);
}
