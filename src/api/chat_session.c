/* Chat messages to a generation session or a token count. */
#include "api/chat_session.h"

#include "api/chat_prompt.h"

static int build(const struct chat_session_args *a, struct chat_prompt *prompt, struct api_fail *f)
{
    buf_init(&prompt->text);
    tok_ids_init(&prompt->ids);
    if (!chat_messages_validate(a->model, a->messages, NULL, f)) return ERR_INVALID;
    struct chat_prompt_opts po = {
        .messages = a->messages,
        .tools = a->tools && json_array_size(a->tools) > 0 ? a->tools : NULL,
        .enable_thinking = a->enable_thinking,
        .template_kwargs = a->template_kwargs,
        .add_generation_prompt = true,
    };
    return chat_prompt_build(a->model, &po, prompt, f);
}

int chat_session_start(const struct chat_session_args *a, struct gen_session **out, int *n_prompt,
                       struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(a->model);
    struct chat_prompt prompt;
    int rc = build(a, &prompt, f);
    if (rc != ERR_OK) {
        chat_prompt_deinit(&prompt);
        return rc;
    }
    enum reasoning_format rf = reasoning_format_detect(d->chat_template_src);
    const char *text = prompt.text.data ? prompt.text.data : "";
    struct gen_options opt = {
        .stops = a->params->stops,
        .n_stops = a->params->n_stops,
        .parse_tools = a->tools && json_array_size(a->tools) > 0,
        .tool_format = toolcall_format_detect(d->chat_template_src),
        .reasoning = rf,
        .reasoning_starts_inside = reasoning_prompt_opens(rf, text, prompt.text.len),
    };
    rc = gen_session_start(a->model, prompt.ids.ids, (int)prompt.ids.n_ids, &a->params->gen, &opt,
                           out, f);
    if (rc == ERR_OK) *n_prompt = (int)prompt.ids.n_ids;
    chat_prompt_deinit(&prompt);
    return rc;
}

int chat_session_count(const struct chat_session_args *a, int *n_tokens, struct api_fail *f)
{
    struct chat_prompt prompt;
    int rc = build(a, &prompt, f);
    // Over the context is an error for generation, but the count is still the answer here.
    if (rc == ERR_LIMIT && prompt.ids.n_ids > 0) rc = ERR_OK;
    if (rc == ERR_OK) *n_tokens = (int)prompt.ids.n_ids;
    chat_prompt_deinit(&prompt);
    return rc;
}
