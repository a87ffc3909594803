/* Error bodies in each API family's shape: OpenAI's {"error":{"message","type","param","code"}}
 * (also llama.cpp's and llamapi's own routes), Anthropic's and Ollama's. Every error the API
 * and the server return goes through here so the shapes and the status/type pairs stay
 * consistent. */
#ifndef API_ERRORS_H
#define API_ERRORS_H

#include "api/api.h"

/* The error types the API uses, with their usual statuses. */
#define API_TYPE_INVALID_REQUEST "invalid_request_error"     // 400, 404, 405, 413
#define API_TYPE_AUTHENTICATION  "authentication_error"      // 401
#define API_TYPE_NOT_FOUND       "not_found_error"           // 404 for models/resources
#define API_TYPE_RATE_LIMIT      "rate_limit_exceeded"       // 429
#define API_TYPE_SERVER          "server_error"              // 500
#define API_TYPE_NOT_IMPLEMENTED "not_implemented_error"     // 501
#define API_TYPE_UNAVAILABLE     "unavailable_error"         // 503
#define API_TYPE_EXCEED_CONTEXT  "exceed_context_size_error" // 400: llama-server's type

/* The code of every answer the server gives while it stops (503). */
#define API_CODE_SHUTTING_DOWN "server_shutting_down"
/* The code of a request to a model whose file changed on disk while it was loaded (500). */
#define API_CODE_MODEL_FILE_CHANGED "model_file_changed"

/* Builds the error object. param and code may be NULL (they become JSON null). Returns a new
 * reference or NULL on allocation failure. */
json_t *api_error_json(const char *type, const char *code, const char *param, const char *message);

/* The error of a request that ended in an error outcome (status from the platform or the core,
 * 0 meaning 500): server_error from 500 on, else invalid_request_error; a 404 means the model
 * went away (it was unloaded while the request waited or ran) and says model_not_found; a 503
 * means the server is stopping (unavailable_error, server_shutting_down). */
json_t *api_outcome_error_json(int status, const char *message);
/* The code such an outcome carries (model_not_found, server_shutting_down, model_file_changed
 * for a platform message that starts with PLATFORM_MSG_FILE_CHANGED), or NULL. Static. */
const char *api_outcome_code(int status, const char *message);
void api_outcome_error(struct api_response *resp, int status, const char *message);

/* Anthropic's error type for an HTTP status (400 invalid_request_error, 401
 * authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
 * rate_limit_error, 503 overloaded_error, other 5xx api_error). Static. Cannot fail. */
const char *api_error_anthropic_type(int status);

/* Anthropic's {"type":"error","error":{"type":…,"message":…}} (message made valid UTF-8). New
 * reference or NULL on allocation failure. */
json_t *api_error_anthropic_json(const char *type, const char *message);

/* Ollama's {"error": message} (message made valid UTF-8). New reference or NULL on allocation
 * failure. */
json_t *api_error_ollama_json(const char *message);

/* Sets resp to an error with status in family's shape: OpenAI's carries type and code (either
 * may be NULL), Anthropic's the type its status has there, Ollama's the message alone. An
 * unset family answers as OpenAI. On allocation failure resp becomes a plain 500. */
void api_error_for(struct api_response *resp, enum api_family family, int status, const char *type,
                   const char *code, const char *message);

/* Sets resp to an error with the given status; message is printf-formatted. */
void api_error(struct api_response *resp, int status, const char *type, const char *code,
               const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif
