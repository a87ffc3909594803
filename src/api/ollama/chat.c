/* POST /api/chat: Ollama's chat request translated into chat messages, tools, structured
 * output and sampling parameters, run through chat_session as the Anthropic and Responses
 * translations are. */
#include "api/ollama/handlers.h"

#include "api/generation/chat_session.h"
#include "api/ollama/call.h"
#include "api/ollama/convert.h"

#include <stdio.h>
#include <string.h>

/* Removes the first message that is not a system message and not the last one. False when
 * there is none (nothing left to drop). */
static bool drop_oldest(json_t *messages)
{
    size_t n = json_array_size(messages);
    for (size_t i = 0; i + 1 < n; i++) {
        const char *role = json_string_value(json_object_get(json_array_get(messages, i), "role"));
        if (role && strcmp(role, "system") == 0) continue;
        return json_array_remove(messages, i) == 0;
    }
    return false;
}

static bool start_chat(const struct api_ctx *ctx, const json_t *req, struct ollama_call *c,
                       json_t *messages, struct api_fail *f)
{
    json_t *tools = json_object_get(req, "tools");
    if (!ollama_tools_check(tools, f)) return false;
    const json_t *parallel = json_object_get(c->body, "parallel_tool_calls");
    struct chat_session_args a = {
        .model = c->model,
        .messages = messages,
        .tools = json_array_size(tools) > 0 ? tools : NULL,
        .params = &c->params,
        .enable_thinking = c->think >= 0 ? c->think : c->params.enable_thinking,
        .media_path = NULL, // Ollama sends images inline; no file:// reads on this route
        .structured = c->body,
        .tool_choice = json_object_get(c->body, "tool_choice"),
        .is_parallel = !json_is_false(parallel),
        .is_prefill = true, // Ollama continues a last assistant message
        .metrics = ctx->metrics,
    };
    bool is_truncate = true; // Ollama's default
    if (!v_bool(req, "truncate", "truncate", &is_truncate, f)) return false;
    int n_prompt = 0;
    for (;;) {
        if (chat_session_start(&a, &c->session, &n_prompt, f) == ERR_OK) return true;
        // Over the context: as Ollama truncates, drop the oldest message that is neither a
        // system message nor the last, and try again.
        if (!is_truncate || f->n_ctx == 0 || !drop_oldest(messages)) return false;
        *f = (struct api_fail){0};
    }
}

void api_ollama_chat(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    struct api_fail f = {0};
    struct ollama_call *c = ollama_call_new(true);
    if (!c) {
        ollama_error(resp, 500, "out of memory");
        return;
    }
    bool is_stream = true;
    json_t *messages = NULL;
    bool ok = ollama_call_begin(ctx, req->json, c, &is_stream, &f) &&
              (messages = ollama_messages_to_chat(json_object_get(req->json, "messages"), &f));
    if (ok && json_array_size(messages) == 0) {
        // Ollama loads the model and answers done at once (done_reason "load"); here it is
        // loaded already.
        ollama_respond_empty(c, "load", resp);
        json_decref(messages);
        ollama_call_free(c);
        return;
    }
    ok = ok && start_chat(ctx, req->json, c, messages, &f);
    json_decref(messages);
    if (!ok) {
        ollama_fail_respond(&f, resp);
        ollama_call_free(c);
        return;
    }
    ollama_call_respond(c, is_stream, resp);
}
