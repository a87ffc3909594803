/* POST /api/chat: Ollama's chat request translated into chat messages, tools, structured
 * output and sampling parameters, run through chat_session as the Anthropic and Responses
 * translations are. */
#include "api/ollama/handlers.h"

#include "api/chat_session.h"
#include "api/ollama/call.h"
#include "api/ollama/convert.h"

#include <stdio.h>
#include <string.h>

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
    int n_prompt = 0;
    return chat_session_start(&a, &c->session, &n_prompt, f) == ERR_OK;
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
