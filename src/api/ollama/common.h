/* What every Ollama handler shares: the error responses, model names (Ollama's
 * `name:tag` onto llamapi's model ids), timestamps and the model `details` object. */
#ifndef API_OLLAMA_COMMON_H
#define API_OLLAMA_COMMON_H

#include "api/validate.h"
#include "core/model.h"
#include "core/registry.h"

#define OLLAMA_TIME_CAP 40 // "2026-12-02T00:30:15.123456789Z" and a NUL

/* Frees text from json_dumps / json_text_dumps with jansson's own deallocator (tests route
 * jansson through mem_). NULL is a no-op. */
void ollama_dumps_free(char *text);

/* Sets resp to Ollama's error object with status; message printf-formatted. */
void ollama_error(struct api_response *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Responds with a failure from the shared validators in Ollama's shape: f's status (400 when
 * unset) and message; 429 and 503 also get Retry-After: 1. */
void ollama_fail_respond(const struct api_fail *f, struct api_response *resp);

/* The current time as Ollama writes created_at (RFC 3339 in UTC, Go's RFC3339Nano: up to nine
 * fraction digits, trailing zeros dropped). Cannot fail. */
void ollama_time_now(char out[OLLAMA_TIME_CAP]);

/* The time unix_s (seconds) in the same form. Cannot fail. */
void ollama_time_unix(int64_t unix_s, char out[OLLAMA_TIME_CAP]);

/* The Ollama name of a model id: the id itself when it carries a tag (a ':' after its last
 * '/'), else id + ":latest". Cannot fail; truncates to cap - 1 bytes. */
void ollama_name_of(const char *id, char *out, size_t cap);

/* Whether name is a Hugging Face name as Ollama writes one, `hf.co/org/repo[:tag]` or
 * `huggingface.co/…`; then its hub reference (`org/repo[:tag]`, without a `:latest` tag, which
 * means the default choice) goes to out. False for other names and when it does not fit in
 * cap. Cannot fail otherwise. */
bool ollama_hub_ref(const char *name, char *out, size_t cap);

/* The model an Ollama name stands for, acquired: the id as given, then without ":latest",
 * then with its ":tag" written "-tag" (qwen2.5:0.5b → qwen2.5-0.5b), then one of --alias's
 * names; a hub name (ollama_hub_ref) not loaded but whose files are under --models-dir is
 * loaded under that name first (unless autoload is off; never downloaded). Unlike the OpenAI routes, a server with one model does not answer every name with
 * it: an unknown name is Ollama's 404. NULL with f filled: 400 "model is required" for an
 * empty name, 404 "model 'NAME' not found" otherwise, 503 while it loads. A model of the
 * other kind is 400 naming what it cannot do. The caller releases the reference. */
struct model *ollama_model_acquire(const struct api_ctx *ctx, const char *name,
                                   enum model_kind kind, struct api_fail *f);

/* The model name a request gives in "model" (or the older "name"); NULL with f filled when
 * it is not a string (400). An absent name is "". */
const char *ollama_request_name(const json_t *body, struct api_fail *f);

/* Ollama's `details` object for a model: format gguf, family (architecture), parameter size
 * ("494.03M", "7.6B"), quantization level ("Q4_K_M" when the file says, else "unknown"),
 * context and embedding length. New reference or NULL. */
json_t *ollama_details_json(const struct platform_model_desc *d, const char *path);

#endif
