/* Ollama messages and tool calls ↔ the chat machinery's OpenAI shapes. */
#include "api/ollama/convert.h"

#include "api/ids.h"
#include "api/ollama/common.h"
#include "text/json_text.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdio.h>
#include <string.h>

const char *ollama_image_mime(const char *b64)
{
    static const struct {
        const char *prefix; // base64 of the format's magic bytes
        const char *mime;
    } magic[] = {
        {"iVBORw0KGgo", "image/png"}, {"/9j/", "image/jpeg"}, {"R0lGOD", "image/gif"},
        {"UklGR", "image/webp"},      {"Qk", "image/bmp"},
    };
    for (size_t i = 0; i < sizeof magic / sizeof magic[0]; i++)
        if (strncmp(b64, magic[i].prefix, strlen(magic[i].prefix)) == 0) return magic[i].mime;
    return "image/png";
}

static json_t *image_part(const char *b64, struct api_fail *f)
{
    struct buf url;
    buf_init(&url);
    json_t *part = NULL;
    // Clients may send a data URL already; Ollama itself takes bare base64.
    if (strncmp(b64, "data:", 5) == 0
            ? buf_append_cstr(&url, b64) == ERR_OK
            : buf_printf(&url, "data:%s;base64,%s", ollama_image_mime(b64), b64) == ERR_OK)
        part = json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url", url.data);
    buf_deinit(&url);
    if (!part) api_failf(f, 500, NULL, NULL, "out of memory");
    return part;
}

json_t *ollama_content_json(const char *text, const json_t *images, const char *param,
                            struct api_fail *f)
{
    if (images && !json_is_null(images) && !json_is_array(images)) {
        api_failf(f, 400, "invalid_type", param, "%s.images must be an array of base64 strings",
                  param);
        return NULL;
    }
    if (json_array_size(images) == 0) {
        json_t *s = json_string(text);
        if (!s) api_failf(f, 400, "invalid_value", param, "%s.content is not valid UTF-8", param);
        return s;
    }
    json_t *parts = json_array();
    if (!parts ||
        json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", text)) != 0) {
        json_decref(parts);
        api_failf(f, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    size_t i;
    const json_t *img;
    json_array_foreach(images, i, img)
    {
        json_t *part = NULL;
        if (!json_is_string(img))
            api_failf(f, 400, "invalid_type", param, "%s.images[%zu] must be a base64 string",
                      param, i);
        else
            part = image_part(json_string_value(img), f);
        if (!part || json_array_append_new(parts, part) != 0) {
            json_decref(parts);
            if (!f->status) api_failf(f, 500, NULL, NULL, "out of memory");
            return NULL;
        }
    }
    return parts;
}

/* Ollama's tool_calls (arguments an object) as OpenAI's (arguments a JSON string). */
static json_t *calls_to_chat(const json_t *calls, const char *param, struct api_fail *f)
{
    if (!json_is_array(calls)) {
        api_failf(f, 400, "invalid_type", param, "%s.tool_calls must be an array", param);
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c)
    {
        const json_t *fn = json_object_get(c, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const json_t *args = json_object_get(fn, "arguments");
        if (!name || (args && !json_is_object(args) && !json_is_null(args))) {
            json_decref(out);
            api_failf(f, 400, "invalid_value", param,
                      "%s.tool_calls[%zu] must be {\"function\": {\"name\": …, \"arguments\": "
                      "{…}}}",
                      param, i);
            return NULL;
        }
        char *text = json_is_object(args) ? json_text_dumps(args, JSON_COMPACT) : NULL;
        const char *id = json_string_value(json_object_get(c, "id"));
        char made[48];
        if (!id) {
            snprintf(made, sizeof made, "call_%zu", i);
            id = made;
        }
        json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                 "function", "name", name, "arguments", text ? text : "{}");
        ollama_dumps_free(text);
        if (!call || json_array_append_new(out, call) != 0) {
            json_decref(out);
            api_failf(f, 500, NULL, NULL, "out of memory");
            return NULL;
        }
    }
    return out;
}

static bool is_role(const char *role)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(role, roles[i]) == 0) return true;
    return false;
}

/* The fields beside content: thinking, tool_calls (assistant); tool_name, tool_call_id. */
static bool extra_fields(const json_t *msg, const char *param, json_t *out, struct api_fail *f)
{
    json_t *thinking = json_object_get(msg, "thinking");
    if (json_is_string(thinking) && json_string_length(thinking) > 0)
        json_object_set(out, "reasoning_content", thinking);
    const json_t *calls = json_object_get(msg, "tool_calls");
    if (calls && !json_is_null(calls)) {
        json_t *c = calls_to_chat(calls, param, f);
        if (!c) return false;
        json_object_set_new(out, "tool_calls", c);
    }
    json_t *tool_name = json_object_get(msg, "tool_name");
    if (json_is_string(tool_name)) json_object_set(out, "name", tool_name);
    json_t *id = json_object_get(msg, "tool_call_id");
    if (json_is_string(id))
        json_object_set(out, "tool_call_id", id);
    else if (json_is_string(tool_name)) // templates that show results by id see the name
        json_object_set(out, "tool_call_id", tool_name);
    return true;
}

static json_t *message_to_chat(const json_t *msg, size_t i, struct api_fail *f)
{
    char param[48];
    snprintf(param, sizeof param, "messages[%zu]", i);
    if (!json_is_object(msg)) {
        api_failf(f, 400, "invalid_type", param, "%s must be an object", param);
        return NULL;
    }
    const json_t *role = json_object_get(msg, "role");
    const json_t *content = json_object_get(msg, "content");
    if (!json_is_string(role) || !is_role(json_string_value(role))) {
        api_failf(f, 400, "invalid_value", param, "%s.role must be system, user, assistant or tool",
                  param);
        return NULL;
    }
    if (content && !json_is_null(content) && !json_is_string(content)) {
        api_failf(f, 400, "invalid_type", param, "%s.content must be a string", param);
        return NULL;
    }
    const char *text = json_is_string(content) ? json_string_value(content) : "";
    json_t *c = ollama_content_json(text, json_object_get(msg, "images"), param, f);
    json_t *out = c ? json_pack("{s:O, s:o}", "role", role, "content", c) : NULL;
    if (c && !out) api_failf(f, 500, NULL, NULL, "out of memory");
    if (out && !extra_fields(msg, param, out, f)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *ollama_messages_to_chat(const json_t *messages, struct api_fail *f)
{
    if (messages && !json_is_null(messages) && !json_is_array(messages)) {
        api_failf(f, 400, "invalid_type", "messages", "messages must be an array, not %s",
                  v_type_name(messages));
        return NULL;
    }
    json_t *out = json_array();
    if (!out) {
        api_failf(f, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m)
    {
        json_t *c = message_to_chat(m, i, f);
        if (!c || json_array_append_new(out, c) != 0) {
            json_decref(out);
            if (!f->status) api_failf(f, 500, NULL, NULL, "out of memory");
            return NULL;
        }
    }
    return out;
}

bool ollama_tools_check(const json_t *tools, struct api_fail *f)
{
    if (!tools || json_is_null(tools)) return true;
    if (!json_is_array(tools))
        return api_failf(f, 400, "invalid_type", "tools", "tools must be an array, not %s",
                         v_type_name(tools));
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        const json_t *fn = json_object_get(t, "function");
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")) ||
            (type && strcmp(type, "function") != 0))
            return api_failf(f, 400, "invalid_value", "tools",
                             "tools[%zu] must be {\"type\": \"function\", \"function\": "
                             "{\"name\": …, \"parameters\": {…}}}",
                             i);
    }
    return true;
}

json_t *ollama_tool_call_json(const struct toolcall *tc, int index)
{
    json_t *args = json_loads(tc->arguments ? tc->arguments : "{}", 0, NULL);
    if (!json_is_object(args)) { // the parser promises an object; stay valid regardless
        json_decref(args);
        args = json_object();
    }
    char id[48];
    if (tc->id)
        snprintf(id, sizeof id, "%s", tc->id);
    else
        api_make_id("call_", id, sizeof id);
    return json_pack("{s:s, s:{s:i, s:s, s:o}}", "id", id, "function", "index", index, "name",
                     tc->name, "arguments", args);
}
