/* POST /v1/chat/completions/input_tokens: the prompt length of a chat completion body, as
 * llama-server answers it ({"object":"response.input_tokens","input_tokens":N}), without
 * generating. */
#include "api/generation/chat_session.h"
#include "api/errors.h"
#include "api/handlers.h"
#include "api/openai_chat.h"

#include <string.h>

/* The tools to render: an array, unless tool_choice is "none". */
static bool chat_tools(json_t *body, json_t **out, struct api_fail *f)
{
    json_t *tools = json_object_get(body, "tools");
    const char *choice = json_string_value(json_object_get(body, "tool_choice"));
    *out = NULL;
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return api_failf(f, 400, "invalid_type", "tools",
                         "Invalid type for 'tools': expected an array, but got %s.",
                         v_type_name(tools));
    if (json_is_array(tools) && !(choice && strcmp(choice, "none") == 0)) *out = tools;
    return true;
}

void api_chat_input_tokens(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp)
{
    static const struct params_names names = {"max_tokens", "max_completion_tokens", "stop"};
    struct api_fail f = {0};
    struct model *m = api_resolve_model(ctx, req->json, MODEL_KIND_CHAT, &f);
    struct gen_request_params p;
    json_t *tools = NULL;
    int n = 0;
    bool ok = m &&
              params_merge_base(ctx->gen_defaults, model_default_params(m), req->json, &names,
                                model_desc(m)->n_vocab, &p, &f) &&
              chat_tools(req->json, &tools, &f);
    if (ok) {
        const json_t *kwargs = json_object_get(req->json, "chat_template_kwargs");
        struct chat_session_args a = {
            .model = m,
            .media_path = ctx->media_path,
            .messages = json_object_get(req->json, "messages"),
            .tools = tools,
            .enable_thinking = p.enable_thinking,
            .template_kwargs = json_is_object(kwargs) ? kwargs : NULL,
        };
        ok = chat_session_count(&a, &n, &f) == ERR_OK;
    }
    if (ok)
        api_respond_json(
            resp, 200,
            json_pack("{s:s, s:i}", "object", "response.input_tokens", "input_tokens", n));
    else
        api_fail_respond(&f, resp);
    if (m) model_release(m);
}
