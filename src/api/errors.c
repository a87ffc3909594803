/* Error objects in the OpenAI, Anthropic and Ollama shapes. */
#include "api/errors.h"

#include "platform/platform.h"

#include <stdarg.h>
#include <utf8proc.h>
#include <stdio.h>
#include <string.h>

/* Messages may quote user input; replace bytes that are not valid UTF-8 so the error itself
 * is always valid JSON. */
static json_t *string_lossy(const char *s)
{
    char clean[1024];
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && n + 4 < sizeof clean) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t len = utf8proc_iterate(p, -1, &cp);
        if (len <= 0) {
            clean[n++] = '?';
            p++;
            continue;
        }
        for (utf8proc_ssize_t i = 0; i < len; i++)
            clean[n++] = (char)p[i];
        p += len;
    }
    clean[n] = '\0';
    return json_string(clean);
}

static json_t *str_or_null(const char *s)
{
    return s ? string_lossy(s) : json_null();
}

json_t *api_error_json(const char *type, const char *code, const char *param, const char *message)
{
    json_t *inner = json_pack("{s:o?, s:s, s:o?, s:o?}", "message", string_lossy(message), "type",
                              type, "param", str_or_null(param), "code", str_or_null(code));
    if (!inner) return NULL;
    return json_pack("{s:o}", "error", inner);
}

void api_error(struct api_response *resp, int status, const char *type, const char *code,
               const char *param, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    api_respond_json(resp, status, api_error_json(type, code, param, message));
}

const char *api_error_anthropic_type(int status)
{
    switch (status) {
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 503:
        return "overloaded_error";
    default:
        return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

json_t *api_error_anthropic_json(const char *type, const char *message)
{
    json_t *msg = string_lossy(message);
    return msg ? json_pack("{s:s, s:{s:s, s:o}}", "type", "error", "error", "type", type, "message",
                           msg)
               : NULL;
}

json_t *api_error_ollama_json(const char *message)
{
    json_t *msg = string_lossy(message);
    return msg ? json_pack("{s:o}", "error", msg) : NULL;
}

void api_error_for(struct api_response *resp, enum api_family family, int status, const char *type,
                   const char *code, const char *message)
{
    switch (family) {
    case API_FAMILY_ANTHROPIC:
        api_respond_json(resp, status,
                         api_error_anthropic_json(api_error_anthropic_type(status), message));
        return;
    case API_FAMILY_OLLAMA:
        api_respond_json(resp, status, api_error_ollama_json(message));
        return;
    case API_FAMILY_NONE:
    case API_FAMILY_OPENAI:
        break;
    }
    api_respond_json(resp, status, api_error_json(type, code, NULL, message));
}

static int outcome_status(int status)
{
    return status >= 400 ? status : 500;
}

const char *api_outcome_code(int status, const char *message)
{
    status = outcome_status(status);
    if (status == 404) return "model_not_found";
    // The one outcome that ends in 503 is the server stopping under the request.
    if (status == 503) return API_CODE_SHUTTING_DOWN;
    // An outcome carries a status and a message only; this one failure is told by the
    // message the platform layer fixes for it.
    static const char changed[] = PLATFORM_MSG_FILE_CHANGED;
    if (message && strncmp(message, changed, sizeof changed - 1) == 0)
        return API_CODE_MODEL_FILE_CHANGED;
    return NULL;
}

json_t *api_outcome_error_json(int status, const char *message)
{
    status = outcome_status(status);
    const char *code = api_outcome_code(status, message);
    if (status == 404) return api_error_json(API_TYPE_INVALID_REQUEST, code, "model", message);
    if (status == 503) return api_error_json(API_TYPE_UNAVAILABLE, code, NULL, message);
    return api_error_json(status >= 500 ? API_TYPE_SERVER : API_TYPE_INVALID_REQUEST, code, NULL,
                          message);
}

void api_outcome_error(struct api_response *resp, int status, const char *message)
{
    api_respond_json(resp, outcome_status(status), api_outcome_error_json(status, message));
    if (status == 503) api_response_add_header(resp, "Retry-After", "1");
}
