/* Built-in chat templates and the OpenAI-messages-to-template-context conversion. The built-in
 * formats follow the models' own Hugging Face templates (ChatML, Llama 3, Mistral v7-tekken,
 * Command R, Gemma); message normalization follows llama.cpp's common/chat.cpp. */
#include "text/chat_template.h"

#include "text/json_text.h"

#include <stdint.h>
#include <string.h>

static const struct {
    const char *name;
    const char *src;
} builtins[] = {
    {"chatml", "{%- for message in messages -%}\n"
               "{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ message['content'] ~ "
               "'<|im_end|>\\n' -}}\n"
               "{%- endfor -%}\n"
               "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n"},
    {"llama3", "{{- bos_token -}}\n"
               "{%- for message in messages -%}\n"
               "{{- '<|start_header_id|>' ~ message['role'] ~ '<|end_header_id|>\\n\\n' ~ "
               "(message['content'] | trim) ~ '<|eot_id|>' -}}\n"
               "{%- endfor -%}\n"
               "{%- if add_generation_prompt -%}"
               "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}\n"},
    {"mistral", "{{- bos_token -}}\n"
                "{%- for message in messages -%}\n"
                "{%- if message['role'] == 'system' -%}"
                "{{- '[SYSTEM_PROMPT]' ~ message['content'] ~ '[/SYSTEM_PROMPT]' -}}\n"
                "{%- elif message['role'] == 'user' -%}"
                "{{- '[INST]' ~ message['content'] ~ '[/INST]' -}}\n"
                "{%- else -%}{{- message['content'] ~ eos_token -}}{%- endif -%}\n"
                "{%- endfor -%}\n"},
    {"command-r", "{%- for message in messages -%}\n"
                  "{%- set role = {'system': 'SYSTEM', 'user': 'USER'}.get(message['role'], "
                  "'CHATBOT') -%}\n"
                  "{{- '<|START_OF_TURN_TOKEN|><|' ~ role ~ '_TOKEN|>' ~ (message['content'] | "
                  "trim) ~ '<|END_OF_TURN_TOKEN|>' -}}\n"
                  "{%- endfor -%}\n"
                  "{%- if add_generation_prompt -%}"
                  "{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}{%- endif -%}\n"},
    {"gemma", "{{- bos_token -}}\n"
              "{%- set ns = namespace(system='') -%}\n"
              "{%- for message in messages -%}\n"
              "{%- if message['role'] == 'system' -%}"
              "{%- set ns.system = ns.system ~ (message['content'] | trim) -%}\n"
              "{%- else -%}\n"
              "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
              "{{- '<start_of_turn>' ~ role ~ '\\n' -}}\n"
              "{%- if ns.system and role != 'model' -%}{{- ns.system ~ '\\n\\n' -}}"
              "{%- set ns.system = '' -%}{%- endif -%}\n"
              "{{- (message['content'] | trim) ~ '<end_of_turn>\\n' -}}\n"
              "{%- endif -%}\n"
              "{%- endfor -%}\n"
              "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}\n"},
};

#define N_BUILTINS (sizeof builtins / sizeof builtins[0])

const char *chat_template_builtin(const char *name)
{
    for (size_t i = 0; name && i < N_BUILTINS; i++)
        if (strcmp(builtins[i].name, name) == 0) return builtins[i].src;
    return NULL;
}

const char *chat_template_default(void)
{
    return builtins[0].src;
}

const char *chat_template_builtin_name(size_t i)
{
    return i < N_BUILTINS ? builtins[i].name : NULL;
}

/* Text parts joined with "\n", media_marker parts' text without a newline before or after
 * them (as llama.cpp joins them); other part types are dropped. NULL when out of memory. */
static json_t *join_parts(const json_t *parts)
{
    struct buf b;
    buf_init(&b);
    int rc = buf_reserve(&b, 64);
    size_t i;
    const json_t *p;
    bool after_marker = false;
    json_array_foreach(parts, i, p)
    {
        const char *type = json_string_value(json_object_get(p, "type"));
        const json_t *text = json_object_get(p, "text");
        const bool is_marker = type && strcmp(type, "media_marker") == 0;
        if (rc != ERR_OK || !json_is_string(text) ||
            (type && !is_marker && strcmp(type, "text") != 0))
            continue;
        if (b.len > 0 && !is_marker && !after_marker) rc = buf_append_byte(&b, '\n');
        if (rc == ERR_OK) rc = buf_append(&b, json_string_value(text), json_string_length(text));
        after_marker = is_marker;
    }
    json_t *r = rc == ERR_OK ? json_stringn(b.data ? b.data : "", b.len) : NULL;
    buf_deinit(&b);
    return r;
}

/* Parses string arguments of each tool call into objects where they hold a JSON object. */
static int normalize_tool_calls(json_t *msg)
{
    json_t *calls = json_object_get(msg, "tool_calls");
    size_t i;
    json_t *call;
    if (!json_is_array(calls)) return ERR_OK;
    json_t *copy = json_deep_copy(calls);
    if (!copy) return ERR_NOMEM;
    json_array_foreach(copy, i, call)
    {
        json_t *fn = json_object_get(call, "function");
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_string(args)) continue;
        json_t *parsed =
            json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
        if (json_is_object(parsed)) json_object_set(fn, "arguments", parsed);
        json_decref(parsed);
    }
    int rc = json_object_set_new(msg, "tool_calls", copy) == 0 ? ERR_OK : ERR_NOMEM;
    return rc;
}

static int normalize_message(const json_t *in, json_t **out, struct errmsg *err, size_t idx)
{
    if (!json_is_object(in))
        return errmsg_set(err, ERR_INVALID, "messages[%zu] must be an object", idx);
    const json_t *content = json_object_get(in, "content");
    if (json_is_string(content) && !json_is_array(json_object_get(in, "tool_calls"))) {
        // nothing to normalize: shared, not copied (a long conversation is not held twice)
        *out = json_incref(json_unconst(in));
        return ERR_OK;
    }
    json_t *m = json_copy(json_unconst(in)); // shallow: values are shared, replaced below
    if (!m) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = ERR_OK;
    if (json_is_array(content)) {
        json_t *s = join_parts(content);
        rc = s && json_object_set_new(m, "content", s) == 0 ? ERR_OK : ERR_NOMEM;
    } else if (json_is_null(content)) {
        rc = json_object_set_new(m, "content", json_string("")) == 0 ? ERR_OK : ERR_NOMEM;
    }
    if (rc == ERR_OK) rc = normalize_tool_calls(m);
    if (rc != ERR_OK) {
        json_decref(m);
        return errmsg_set(err, rc, "out of memory");
    }
    *out = m;
    return ERR_OK;
}

static int set_str(json_t *ctx, const char *key, const char *v)
{
    return json_object_set_new(ctx, key, json_string(v ? v : "")) == 0 ? ERR_OK : ERR_NOMEM;
}

int chat_template_context(const json_t *messages, const json_t *tools,
                          const struct chat_template_opts *opts, json_t **out, struct errmsg *err)
{
    struct chat_template_opts dflt = {.enable_thinking = -1};
    if (!opts) opts = &dflt;
    if (!json_is_array(messages)) return errmsg_set(err, ERR_INVALID, "messages must be an array");
    if (tools && !json_is_array(tools) && !json_is_null(tools))
        return errmsg_set(err, ERR_INVALID, "tools must be an array");
    json_t *ctx = json_object(), *msgs = json_array();
    int rc = ctx && msgs ? ERR_OK : ERR_NOMEM;
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m)
    {
        json_t *nm = NULL;
        if (rc != ERR_OK) break;
        if (opts->keep_raw_messages)
            nm = json_incref(json_unconst(m));
        else if ((rc = normalize_message(m, &nm, err, i)) != ERR_OK)
            break;
        if (json_array_append_new(msgs, nm) != 0) rc = ERR_NOMEM;
    }
    if (rc == ERR_OK) rc = json_object_set(ctx, "messages", msgs) == 0 ? ERR_OK : ERR_NOMEM;
    if (rc == ERR_OK && json_is_array(tools) && json_array_size(tools) > 0)
        rc = json_object_set(ctx, "tools", json_unconst(tools)) == 0 ? ERR_OK : ERR_NOMEM;
    if (rc == ERR_OK)
        rc = json_object_set_new(ctx, "add_generation_prompt",
                                 json_boolean(opts->add_generation_prompt)) == 0
                 ? ERR_OK
                 : ERR_NOMEM;
    if (rc == ERR_OK) rc = set_str(ctx, "bos_token", opts->bos_token);
    if (rc == ERR_OK) rc = set_str(ctx, "eos_token", opts->eos_token);
    if (rc == ERR_OK && opts->enable_thinking >= 0)
        rc = json_object_set_new(ctx, "enable_thinking", json_boolean(opts->enable_thinking)) == 0
                 ? ERR_OK
                 : ERR_NOMEM;
    if (rc == ERR_OK && json_is_object(opts->extra))
        rc = json_object_update(ctx, json_unconst(opts->extra)) == 0 ? ERR_OK : ERR_NOMEM;
    json_decref(msgs);
    if (rc != ERR_OK) {
        json_decref(ctx);
        if (rc == ERR_NOMEM) errmsg_set(err, ERR_NOMEM, "out of memory");
        return rc;
    }
    *out = ctx;
    return ERR_OK;
}

int chat_template_apply(const struct jinja_template *t, const json_t *messages, const json_t *tools,
                        const struct chat_template_opts *opts, struct buf *out, struct errmsg *err)
{
    json_t *ctx = NULL;
    int rc = chat_template_context(messages, tools, opts, &ctx, err);
    if (rc != ERR_OK) return rc;
    const struct jinja_render_opts ro = {.max_out_bytes = opts->max_out_bytes,
                                         .is_out_over = opts->is_out_over};
    rc = jinja_template_render_opts(t, ctx, &ro, out, err);
    json_decref(ctx);
    return rc;
}
