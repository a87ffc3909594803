/* The call list every format fills, and the JSON forms a call takes: one object, an array of
 * them, a {"tool_calls": …} wrapper, several values in a row; the values of XML-style
 * parameters. Validated and re-serialised with jansson. */
#include "text/toolcall/toolcall_internal.h"

#include "text/json_text.h"
#include "util/mem.h"

#include <string.h>

void tc_jscan_init(struct jscan *j)
{
    *j = (struct jscan){0, false, false};
}

/* Scans s[*at..len). Returns true when the value that began at the first scanned byte has
 * closed; *at is then one past its end. */
bool tc_jscan_run(struct jscan *j, const char *s, size_t len, size_t *at)
{
    for (size_t i = *at; i < len; i++) {
        char c = s[i];
        if (j->in_str) {
            if (j->esc)
                j->esc = false;
            else if (c == '\\')
                j->esc = true;
            else if (c == '"')
                j->in_str = false;
            continue;
        }
        if (c == '"') {
            j->in_str = true;
        } else if (c == '{' || c == '[') {
            j->depth++;
        } else if (c == '}' || c == ']') {
            if (--j->depth <= 0) {
                *at = i + 1;
                return true;
            }
        }
    }
    *at = len;
    return false;
}

/* Compact serialisation into mem_alloc'd storage. NULL on allocation failure. */
char *tc_json_compact(const json_t *v)
{
    size_t n = json_text_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    if (n == 0) return NULL;
    char *p = mem_alloc(n + 1);
    if (!p) return NULL;
    json_text_dumpb(v, p, n, JSON_COMPACT | JSON_ENCODE_ANY);
    p[n] = '\0';
    return p;
}

void tc_call_deinit(struct toolcall *c)
{
    mem_free(c->name);
    mem_free(c->arguments);
    mem_free(c->id);
}

void tc_calls_truncate(struct toolcall_stream *s, int n)
{
    while (s->n_calls > n)
        tc_call_deinit(&s->calls[--s->n_calls]);
}

/* Appends a call; takes ownership of name, args and id (freed on failure too). */
enum parsed tc_call_push(struct toolcall_stream *s, char *name, char *args, char *id)
{
    if (!name || !args) goto out_nomem;
    if (s->n_calls == s->cap_calls) {
        int cap = s->cap_calls ? s->cap_calls * 2 : 4;
        struct toolcall *n = mem_realloc(s->calls, (size_t)cap * sizeof *n);
        if (!n) goto out_nomem;
        s->calls = n;
        s->cap_calls = cap;
    }
    s->calls[s->n_calls++] = (struct toolcall){name, args, id};
    return PARSED_OK;
out_nomem:
    mem_free(name);
    mem_free(args);
    mem_free(id);
    return PARSED_NOMEM;
}

/* Arguments as compact object text: an object, a string holding one, or absent ("{}"). */
enum parsed tc_args_text(const json_t *args, char **out)
{
    json_t *owned = NULL;
    if (!args) {
        *out = mem_strdup("{}");
        return *out ? PARSED_OK : PARSED_NOMEM;
    }
    if (json_is_string(args)) {
        owned = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
        args = owned;
    }
    if (!json_is_object(args)) {
        json_decref(owned);
        return PARSED_NO;
    }
    *out = tc_json_compact(args);
    json_decref(owned);
    return *out ? PARSED_OK : PARSED_NOMEM;
}

/* One call object: {"name", "arguments"|"parameters", "id"?}, optionally wrapped as OpenAI's
 * {"type":"function","function":{...}}. */
static enum parsed call_from_object(struct toolcall_stream *s, const json_t *obj)
{
    const json_t *fn = json_object_get(obj, "function");
    if (json_is_object(fn) && json_is_string(json_object_get(fn, "name"))) obj = fn;
    const json_t *name = json_object_get(obj, "name");
    if (!json_is_string(name) || json_string_length(name) == 0) return PARSED_NO;
    const json_t *args = json_object_get(obj, "arguments");
    if (!args) args = json_object_get(obj, "parameters");
    char *a = NULL;
    enum parsed r = tc_args_text(args, &a);
    if (r != PARSED_OK) return r;
    const json_t *id = json_object_get(obj, "id");
    char *id_copy = NULL;
    if (json_is_string(id) && json_string_length(id) > 0) {
        id_copy = mem_strdup(json_string_value(id));
        if (!id_copy) {
            mem_free(a);
            return PARSED_NOMEM;
        }
    }
    return tc_call_push(s, mem_strdup(json_string_value(name)), a, id_copy);
}

/* A call object, an array of them, or a {"tool_calls": [...]} / {"tool_call": {...}} wrapper.
 * All or nothing: on PARSED_NO no call is left behind. */
static enum parsed calls_from_value(struct toolcall_stream *s, const json_t *v)
{
    if (json_is_object(v)) {
        const json_t *w = json_object_get(v, "tool_calls");
        if (!w) w = json_object_get(v, "tool_call");
        if (w && !json_object_get(v, "name"))
            return json_is_object(w) || json_is_array(w) ? calls_from_value(s, w) : PARSED_NO;
        return call_from_object(s, v);
    }
    if (!json_is_array(v) || json_array_size(v) == 0) return PARSED_NO;
    int n0 = s->n_calls;
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        enum parsed r = json_is_object(e) ? call_from_object(s, e) : PARSED_NO;
        if (r != PARSED_OK) {
            tc_calls_truncate(s, n0);
            return r;
        }
    }
    return PARSED_OK;
}

enum parsed tc_calls_from_text(struct toolcall_stream *s, const char *p, size_t n)
{
    json_t *v = json_loadb(p, n, 0, NULL);
    if (!v) return PARSED_NO;
    enum parsed r = calls_from_value(s, v);
    json_decref(v);
    return r;
}

/* One JSON value, or with allow_many several separated by whitespace or ';' (Llama 3 writes
 * "{..}; {..}", some Hermes models put several objects in one block). Nothing else. */
enum parsed tc_calls_from_values(struct toolcall_stream *s, const char *p, size_t n,
                                 bool allow_many)
{
    int n0 = s->n_calls;
    size_t i = 0;
    for (bool is_first = true;; is_first = false) {
        while (i < n && (is_ws(p[i]) || (!is_first && allow_many && p[i] == ';')))
            i++;
        if (i == n) return is_first ? PARSED_NO : PARSED_OK;
        struct jscan j;
        tc_jscan_init(&j);
        size_t start = i;
        enum parsed r = PARSED_NO;
        if ((is_first || allow_many) && (p[i] == '{' || p[i] == '[') && tc_jscan_run(&j, p, n, &i))
            r = tc_calls_from_text(s, p + start, i - start);
        if (r != PARSED_OK) {
            tc_calls_truncate(s, n0);
            return r;
        }
    }
}

/* A parameter value: JSON when it parses as JSON (numbers, booleans, objects), else the text
 * as a string; one newline on each side belongs to the layout, as the template writes it. */
json_t *tc_xml_value(const char *p, size_t n)
{
    if (n > 0 && p[0] == '\n') p++, n--;
    if (n > 0 && p[n - 1] == '\n') n--;
    json_t *v = json_loadb(p, n, JSON_DECODE_ANY, NULL);
    return v ? v : json_stringn(p, n);
}

/* Sets obj[key] = v, taking ownership of v; the key is copied from p[0..n). */
enum parsed tc_set_member(json_t *obj, const char *p, size_t n, json_t *v)
{
    if (!v) return PARSED_NO;
    char *key = mem_strndup(p, n);
    if (!key) {
        json_decref(v);
        return PARSED_NOMEM;
    }
    int rc = json_object_set_new(obj, key, v);
    mem_free(key);
    return rc == 0 ? PARSED_OK : PARSED_NO;
}
