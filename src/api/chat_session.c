/* Chat messages to a generation session or a token count. */
#include "api/chat_session.h"

#include "api/chat_prompt.h"
#include "api/structured.h"

#include <string.h>

static bool is_assistant(const json_t *msg)
{
    const char *role = json_string_value(json_object_get(msg, "role"));
    return role && strcmp(role, "assistant") == 0;
}

/* The prefill text of a last assistant message without tool calls: its string content, or its
 * text parts joined by blank lines. False when it is not one (nothing to continue). */
static bool prefill_text(const json_t *msg, struct buf *out)
{
    const json_t *content = json_object_get(msg, "content");
    if (!is_assistant(msg) || json_array_size(json_object_get(msg, "tool_calls")) > 0) return false;
    if (json_is_string(content))
        return buf_append(out, json_string_value(content), json_string_length(content)) == ERR_OK;
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const json_t *text = json_object_get(part, "text");
        if (!json_is_string(text)) continue;
        if (out->len) buf_append_cstr(out, "\n\n");
        buf_append(out, json_string_value(text), json_string_length(text));
    }
    return json_is_array(content);
}

/* As llama-server continues a last assistant message: the conversation before it with the
 * generation prompt, then its text; two assistant messages at the end are refused. *head is
 * the shortened message list (caller decrefs). False with f filled. */
static bool split_prefill(const json_t *msgs, json_t **head, struct buf *text, struct api_fail *f)
{
    size_t n = json_array_size(msgs);
    *head = NULL;
    if (n == 0 || !prefill_text(json_array_get(msgs, n - 1), text)) return true;
    if (n >= 2 && is_assistant(json_array_get(msgs, n - 2)))
        return api_failf(f, 400, "invalid_value", "messages",
                         "Cannot have 2 or more assistant messages at the end of the list.");
    *head = json_array();
    for (size_t i = 0; *head && i + 1 < n; i++)
        json_array_append(*head, json_array_get(msgs, i));
    return *head || api_failf(f, 500, NULL, NULL, "out of memory");
}

static int build(const struct chat_session_args *a, struct chat_prompt *prompt, struct api_fail *f)
{
    buf_init(&prompt->text);
    tok_ids_init(&prompt->ids);
    if (!chat_messages_validate(a->model, a->messages, a->media_path, f)) return ERR_INVALID;
    json_t *head = NULL;
    struct buf prefill;
    buf_init(&prefill);
    if (a->is_prefill && !split_prefill(a->messages, &head, &prefill, f)) {
        buf_deinit(&prefill);
        return ERR_INVALID;
    }
    struct chat_prompt_opts po = {
        .messages = head ? head : a->messages,
        .tools = a->tools && json_array_size(a->tools) > 0 ? a->tools : NULL,
        .enable_thinking = a->enable_thinking,
        .template_kwargs = a->template_kwargs,
        .media_path = a->media_path,
        .add_generation_prompt = true,
        .prefill = {head ? prefill.data : "", head ? prefill.len : 0},
    };
    int rc = chat_prompt_build(a->model, &po, prompt, f);
    json_decref(head);
    buf_deinit(&prefill);
    return rc;
}

/* The GBNF the request asks for, appended to g (nothing when unconstrained). */
static bool grammar_for(const struct chat_session_args *a, enum toolcall_format format,
                        struct buf *g, struct api_fail *f)
{
    if (a->structured && !structured_from_body(a->structured, g, f)) return false;
    bool has_tools = a->tools && json_array_size(a->tools) > 0;
    if (g->len == 0 && has_tools && a->tool_choice)
        return structured_tool_grammar(a->tools, a->tool_choice, a->is_parallel, format, g, f);
    return true;
}

int chat_session_start(const struct chat_session_args *a, struct gen_session **out, int *n_prompt,
                       struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(a->model);
    enum toolcall_format format = toolcall_format_detect(d->chat_template_src);
    struct buf grammar;
    buf_init(&grammar);
    struct chat_prompt prompt;
    buf_init(&prompt.text);
    tok_ids_init(&prompt.ids);
    int rc = grammar_for(a, format, &grammar, f) ? build(a, &prompt, f) : ERR_INVALID;
    if (rc != ERR_OK) {
        chat_prompt_deinit(&prompt);
        buf_deinit(&grammar);
        return rc;
    }
    enum reasoning_format rf = reasoning_format_detect(d->chat_template_src);
    const char *text = prompt.text.data ? prompt.text.data : "";
    struct gen_options opt = {
        .stops = a->params->stops,
        .n_stops = a->params->n_stops,
        .parse_tools = a->tools && json_array_size(a->tools) > 0,
        .tool_format = format,
        .reasoning = rf,
        .reasoning_starts_inside = reasoning_prompt_opens(rf, text, prompt.text.len),
        .metrics = a->metrics,
    };
    // The request copies the parameters and the grammar, so this copy may point at ours.
    struct gen_params gen = a->params->gen;
    gen.grammar = grammar.len ? grammar.data : NULL;
    rc = gen_session_start(a->model, prompt.ids.ids, (int)prompt.ids.n_ids, &gen, &opt, out, f);
    if (rc == ERR_OK) *n_prompt = (int)prompt.ids.n_ids;
    chat_prompt_deinit(&prompt);
    buf_deinit(&grammar);
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
