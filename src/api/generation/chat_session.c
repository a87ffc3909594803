/* Chat messages to a generation session or a token count. */
#include "api/generation/chat_session.h"

#include "api/generation/chat_prompt.h"
#include "api/generation/structured.h"
#include "text/chat_template.h"
#include "util/log.h"

#include <math.h>
#include <stdio.h>
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

static struct chat_prompt_opts prompt_opts(const struct chat_session_args *a)
{
    return (struct chat_prompt_opts){
        .messages = a->messages,
        .tools = a->tools && json_array_size(a->tools) > 0 ? a->tools : NULL,
        .enable_thinking = a->enable_thinking,
        .template_kwargs = a->template_kwargs,
        .media_path = a->media_path,
        .add_generation_prompt = true,
    };
}

static int build(const struct chat_session_args *a, bool is_count, struct chat_prompt *prompt,
                 struct api_fail *f)
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
    struct chat_prompt_opts po = prompt_opts(a);
    po.is_count = is_count;
    if (head) {
        po.messages = head;
        po.prefill = (struct str){prefill.data, prefill.len};
    }
    int rc = chat_prompt_build(a->model, &po, prompt, f);
    json_decref(head);
    buf_deinit(&prefill);
    return rc;
}

static bool po_has_tools(const struct chat_session_args *a)
{
    return a->tools && json_array_size(a->tools) > 0;
}

/* A text-IO model: the whole conversation rendered with the model's template, or (a model
 * whose runtime applies its own template) the last message's text and role. */
static int build_text(const struct chat_session_args *a, struct buf *text, const char **role,
                      struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(a->model);
    if (!chat_messages_validate(a->model, a->messages, a->media_path, f)) return ERR_INVALID;
    *role = "user";
    if (d->is_last_message_only) {
        if (po_has_tools(a))
            return api_failf(f, 400, "unsupported_parameter", "tools",
                             "The %s platform cannot show tools to this model: it has no chat "
                             "template of ours (tokenizer_config.json), so only the last "
                             "message is sent.",
                             model_platform(a->model)->id),
                   ERR_INVALID;
        const json_t *last = json_array_get(a->messages, json_array_size(a->messages) - 1);
        const char *r = json_string_value(json_object_get(last, "role"));
        const json_t *content = json_object_get(last, "content");
        if (!r || (strcmp(r, "user") != 0 && strcmp(r, "tool") != 0))
            return api_failf(f, 400, "invalid_value", "messages",
                             "The %s platform applies this model's own template to the last "
                             "message only, which must be a user or tool message.",
                             model_platform(a->model)->id),
                   ERR_INVALID;
        *role = strcmp(r, "tool") == 0 ? "tool" : "user";
        if (json_is_string(content))
            return buf_append(text, json_string_value(content), json_string_length(content));
        size_t i;
        const json_t *part;
        json_array_foreach(content, i, part)
        {
            const json_t *t = json_object_get(part, "text");
            if (json_is_string(t) && buf_append(text, json_string_value(t), json_string_length(t)))
                return ERR_NOMEM;
        }
        return ERR_OK;
    }
    struct chat_prompt_opts po = prompt_opts(a);
    struct chat_template_opts to = {
        .add_generation_prompt = true,
        .enable_thinking = po.enable_thinking,
        .bos_token = d->bos_text,
        .eos_token = d->eos_text,
        .extra = po.template_kwargs,
    };
    struct errmsg err;
    errmsg_clear(&err);
    int rc = chat_template_apply(d->chat_template, po.messages, po.tools, &to, text, &err);
    if (rc != ERR_OK)
        api_failf(f, rc == ERR_NOMEM ? 500 : 400, "template_error", "messages",
                  "The chat template failed: %s", err.msg[0] ? err.msg : err_str(rc));
    return rc;
}

static bool refuse(const struct chat_session_args *a, const char *param, const char *why,
                   struct api_fail *f)
{
    return api_failf(f, 400, "unsupported_parameter", param,
                     "The %s platform does not support '%s' (%s).", model_platform(a->model)->id,
                     param, why);
}

/* Whether the request body sets key (to anything but null). */
static bool body_sets(const json_t *body, const char *key)
{
    const json_t *v = body ? json_object_get(body, key) : NULL;
    return v && !json_is_null(v);
}

/* A platform whose sampling is fixed when the model loads (rkllm ABI 1.2): the sampling
 * fields a request (or the model's default_params) sets that its runtime will not apply —
 * values other than the load-time ones, and seed and min_p — are named in warn ("" when none)
 * rather than refused, since many clients send a temperature with every request. */
static void note_fixed_sampling(const struct chat_session_args *a, char *warn, size_t cap)
{
    const struct platform_model_desc *d = model_desc(a->model);
    const struct platform_sampling *fx = d->fixed_sampling;
    warn[0] = '\0';
    if (!fx) return;
    const struct {
        const char *name;
        double fixed;
    } fields[] = {
        {"temperature", fx->temperature},
        {"top_p", fx->top_p},
        {"top_k", fx->top_k},
        {"repeat_penalty", fx->repeat_penalty},
        {"frequency_penalty", fx->frequency_penalty},
        {"presence_penalty", fx->presence_penalty},
        {"seed", NAN}, // never applied
        {"min_p", NAN},
    };
    const json_t *sources[2] = {a->structured, model_default_params(a->model)};
    size_t used =
        (size_t)snprintf(warn, cap, "%s ABI %s applies sampling fixed at load; not applied:",
                         model_platform(a->model)->id, d->abi ? d->abi : "");
    bool any = false;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && used < cap; i++) {
        for (int k = 0; k < 2; k++) {
            const json_t *v = sources[k] ? json_object_get(sources[k], fields[i].name) : NULL;
            if (!json_is_number(v)) continue;
            if (!isnan(fields[i].fixed) && fabs(json_number_value(v) - fields[i].fixed) < 1e-6)
                continue;
            used +=
                (size_t)snprintf(warn + used, cap - used, "%s %s%s=%g", any ? "," : "",
                                 k ? "default_params." : "", fields[i].name, json_number_value(v));
            any = true;
            break;
        }
    }
    if (!any) warn[0] = '\0';
}

/* What the model's platform cannot do, refused by name rather than ignored. */
static bool check_supported(const struct chat_session_args *a, const struct buf *grammar,
                            struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(a->model);
    const json_t *body = a->structured;
    unsigned no = d->unsupported;
    if ((no & PLATFORM_UNSUPPORTED_GRAMMAR) && grammar->len > 0) {
        static const char *const fields[] = {"grammar", "json_schema", "response_format"};
        const char *param = "tool_choice"; // a forced tool call is the other source
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (body_sets(body, fields[i])) {
                param = fields[i];
                break;
            }
        return refuse(a, param, "its runtime cannot constrain output", f);
    }
    if ((no & PLATFORM_UNSUPPORTED_LOGPROBS) && a->params->gen.n_probs > 0)
        return refuse(a, "logprobs", "its runtime does not report probabilities", f);
    if ((no & PLATFORM_UNSUPPORTED_LOGIT_BIAS) && a->params->gen.n_logit_bias > 0)
        return refuse(a, "logit_bias", "its runtime takes no token biases", f);
    bool is_fixed = d->fixed_sampling != NULL; // seed and min_p are then warned about
    if ((no & PLATFORM_UNSUPPORTED_MIN_P) && !is_fixed && body_sets(body, "min_p"))
        return refuse(a, "min_p", "its runtime has no min-p sampling", f);
    if ((no & PLATFORM_UNSUPPORTED_SEED) && !is_fixed && body_sets(body, "seed"))
        return refuse(a, "seed", "its runtime takes no sampling seed", f);
    return true;
}

/* The GBNF the request asks for, appended to g (nothing when unconstrained). */
static bool grammar_for(const struct chat_session_args *a, enum toolcall_format format,
                        struct buf *g, struct api_fail *f)
{
    if (a->structured && !structured_from_body(a->structured, g, f)) return false;
    bool has_tools = a->tools && json_array_size(a->tools) > 0;
    if (!has_tools && structured_tool_choice_forces(a->tool_choice))
        return api_failf(f, 400, "invalid_value", "tool_choice",
                         "'tool_choice' forces a tool call, but 'tools' names no tool.");
    if (g->len == 0 && has_tools && a->tool_choice)
        return structured_tool_grammar(a->tools, a->tool_choice, a->is_parallel, format, g, f);
    return true;
}

int chat_session_start(const struct chat_session_args *a, struct gen_session **out, int *n_prompt,
                       struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(a->model);
    enum toolcall_format format = d->tool_format;
    struct buf grammar;
    buf_init(&grammar);
    struct chat_prompt prompt = {0};
    buf_init(&prompt.text);
    tok_ids_init(&prompt.ids);
    const char *role = "user";
    int rc = grammar_for(a, format, &grammar, f) && check_supported(a, &grammar, f) ? ERR_OK
                                                                                    : ERR_INVALID;
    if (rc == ERR_OK)
        rc = d->is_text_io ? build_text(a, &prompt.text, &role, f) : build(a, false, &prompt, f);
    if (rc != ERR_OK) {
        chat_prompt_deinit(&prompt);
        buf_deinit(&grammar);
        return rc;
    }
    enum reasoning_format rf = d->reasoning_format;
    const char *text = prompt.text.data ? prompt.text.data : "";
    struct gen_options opt = {
        .stops = a->params->stops,
        .n_stops = a->params->n_stops,
        .parse_tools = a->tools && json_array_size(a->tools) > 0,
        .tool_format = format,
        .reasoning = rf,
        .reasoning_starts_inside = reasoning_prompt_opens(rf, text, prompt.text.len),
        .metrics = a->metrics,
        .prompt_text = text,
        .prompt_text_len = prompt.text.len,
        .prompt_role = role,
        .enable_thinking = a->enable_thinking,
        .images = prompt.images,
        .n_images = prompt.n_images,
    };
    // The request copies the parameters and the grammar, so this copy may point at ours.
    struct gen_params gen = a->params->gen;
    gen.grammar = grammar.len ? grammar.data : NULL;
    rc = gen_session_start(a->model, prompt.ids.ids, (int)prompt.ids.n_ids, &gen, &opt, out, f);
    if (rc == ERR_OK) *n_prompt = (int)prompt.ids.n_ids;
    char warn[256];
    note_fixed_sampling(a, warn, sizeof warn);
    if (rc == ERR_OK && warn[0]) {
        log_warn("model %s: %s", model_id(a->model), warn);
        gen_session_set_warning(*out, warn);
    }
    chat_prompt_deinit(&prompt);
    buf_deinit(&grammar);
    return rc;
}

bool chat_session_precheck(const struct model *m, const json_t *body, struct api_fail *f)
{
    unsigned no = model_desc(m)->unsupported;
    const json_t *n = json_object_get(body, "n");
    if ((no & PLATFORM_UNSUPPORTED_N) && json_is_integer(n) && json_integer_value(n) > 1)
        return api_failf(f, 400, "unsupported_parameter", "n",
                         "The %s platform does not support 'n' > 1 (one answer per request).",
                         model_platform(m)->id);
    const json_t *lb = json_object_get(body, "logit_bias");
    if ((no & PLATFORM_UNSUPPORTED_LOGIT_BIAS) && lb && !json_is_null(lb) &&
        !(json_is_object(lb) && json_object_size(lb) == 0) &&
        !(json_is_array(lb) && json_array_size(lb) == 0))
        return api_failf(f, 400, "unsupported_parameter", "logit_bias",
                         "The %s platform does not support 'logit_bias' (its runtime takes no "
                         "token biases).",
                         model_platform(m)->id);
    return true;
}

int chat_session_count(const struct chat_session_args *a, int *n_tokens, struct api_fail *f)
{
    if (model_desc(a->model)->is_text_io)
        return api_failf(f, 400, "unsupported_platform", "model",
                         "The model '%s' runs on the %s platform, whose runtime tokenizes "
                         "internally: counting tokens is not available.",
                         model_id(a->model), model_platform(a->model)->id),
               ERR_UNSUPPORTED;
    struct chat_prompt prompt = {0};
    int rc = build(a, true, &prompt, f);
    // Over the context is an error for generation, but the count is still the answer here.
    if (rc == ERR_LIMIT && prompt.ids.n_ids > 0) rc = ERR_OK;
    if (rc == ERR_OK) *n_tokens = (int)prompt.ids.n_ids;
    chat_prompt_deinit(&prompt);
    return rc;
}

int chat_session_fits(const struct chat_session_args *a, bool *fits, struct api_fail *f)
{
    struct chat_prompt prompt = {0};
    int rc = build(a, false, &prompt, f);
    chat_prompt_deinit(&prompt);
    *fits = rc == ERR_OK;
    if (rc == ERR_LIMIT && f->n_ctx > 0) { // over the context: an answer, not a failure
        *f = (struct api_fail){0};
        rc = ERR_OK;
    }
    return rc;
}

void chat_session_add_warning(const struct gen_session *s, struct api_response *resp)
{
    const char *warning = gen_session_warning(s);
    if (warning) api_response_add_header(resp, "x-llamapi-warning", warning);
}
