/* OpenAI-style error bodies: {"error":{"message","type","param","code"}}. Every error the API
 * returns goes through here so the shape and the status/type pairs stay consistent. */
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

/* Sets resp to an error with the given status; message is printf-formatted. */
void api_error(struct api_response *resp, int status, const char *type, const char *code,
               const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif
