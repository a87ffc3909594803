/* Tool-call extraction as one incremental state machine over the accumulated output; the
 * one-shot parser is the same machine fed once, so streaming and non-streaming cannot disagree.
 * JSON is validated and re-serialised with jansson. Markers and layouts follow the families'
 * chat templates (see /work/shared/templates: Qwen, Hermes 2 Pro, Llama 3.1, Mistral). */
#include "text/toolcall.h"

#include "text/holdback.h"
#include "text/json_text.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#define NAME_LEN_MAX 256 // bytes of a bare function name or call id (Mistral's [ARGS] form)

static const char HERMES_OPEN[] = "<tool_call>";
static const char HERMES_CLOSE[] = "</tool_call>";
static const char MISTRAL_OPEN[] = "[TOOL_CALLS]";
static const char MISTRAL_ARGS[] = "[ARGS]";
static const char MISTRAL_CALL_ID[] = "[CALL_ID]";
static const char PYTHON_TAG[] = "<|python_tag|>";
static const char LFM2_OPEN[] = "<|tool_call_start|>";
static const char LFM2_CLOSE[] = "<|tool_call_end|>";

enum state {
    ST_CONTENT,       // ordinary text; watching for the format's marker
    ST_WHOLE,         // the output began with a JSON value: maybe it is all calls
    ST_HERMES,        // inside <tool_call>, waiting for </tool_call>
    ST_MISTRAL_START, // after [TOOL_CALLS]: a JSON value or a bare name follows
    ST_MISTRAL_NAME,  // reading name up to [ARGS] or [CALL_ID]
    ST_MISTRAL_ID,    // reading the id up to [ARGS]
    ST_JSON_START,    // expecting the JSON value of a Mistral call
    ST_JSON,          // scanning that value to its end
    ST_PYTHON,        // after <|python_tag|>: the rest of the output is the call
    ST_LFM2,          // inside <|tool_call_start|>, waiting for <|tool_call_end|>
    ST_HARMONY_HEAD,  // a harmony message header, up to <|message|>
    ST_HARMONY_BODY,  // a harmony message's text (content or reasoning), up to its end
    ST_HARMONY_CALL,  // the arguments of a message to functions.NAME
    ST_HARMONY_SKIP,  // a message to a recipient that is not a declared function: dropped
};

enum step {
    STEP_WAIT,  // needs more text
    STEP_AGAIN, // made progress; run again
};

/* Finds where a JSON object/array ends without parsing it (jansson validates later). */
struct jscan {
    int depth;
    bool in_str, esc;
};

struct raw_event {
    enum toolcall_event_kind kind;
    size_t off, len; // CONTENT: slice of text
    int call;        // CALL: index into calls
};

/* Owned by the one thread driving the stream. */
struct toolcall_stream {
    enum toolcall_format fmt;
    struct buf text;    // the whole output so far
    size_t pos;         // bytes before pos are decided
    size_t mark;        // start of the construct being decided (its marker), for fallback
    size_t scan;        // resume point of the current scan
    size_t value_start; // first byte of the JSON value being scanned
    size_t name_off, name_len, id_off, id_len; // Mistral [ARGS] form
    enum state st;
    bool at_start;     // only whitespace so far: a leading JSON value is a candidate
    bool skip_ws;      // a call just ended: drop whitespace before the next content
    bool json_is_args; // ST_JSON: the value is the arguments of name/id above
    bool is_reasoning; // ST_HARMONY_BODY: an analysis message
    bool drop_calls;   // HARMONY: messages to functions.* are dropped (no tools declared)
    bool is_finished;
    int err; // sticky
    struct jscan js;
    struct toolcall *calls;
    int n_calls, cap_calls;
    struct raw_event *raw;
    int n_raw, cap_raw;
    struct toolcall_event *ev; // cap_raw entries, rebuilt from raw at the end of each call
};

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

/* ---- format detection ---- */

enum toolcall_format toolcall_format_detect(const char *src)
{
    if (!src) return TOOLCALL_FORMAT_GENERIC;
    if (strstr(src, "<|channel|>")) return TOOLCALL_FORMAT_HARMONY;
    // LFM2 templates list the tools between these (the newer ones write calls too)
    if (strstr(src, LFM2_OPEN) || strstr(src, "<|tool_list_start|>")) return TOOLCALL_FORMAT_LFM2;
    if (strstr(src, HERMES_OPEN)) return TOOLCALL_FORMAT_HERMES;
    if (strstr(src, MISTRAL_OPEN)) return TOOLCALL_FORMAT_MISTRAL;
    if (strstr(src, PYTHON_TAG) || strstr(src, "<|start_header_id|>"))
        return TOOLCALL_FORMAT_LLAMA3;
    return TOOLCALL_FORMAT_GENERIC;
}

const char *toolcall_format_name(enum toolcall_format f)
{
    switch (f) {
    case TOOLCALL_FORMAT_HERMES:
        return "hermes";
    case TOOLCALL_FORMAT_LLAMA3:
        return "llama3";
    case TOOLCALL_FORMAT_MISTRAL:
        return "mistral";
    case TOOLCALL_FORMAT_HARMONY:
        return "harmony";
    case TOOLCALL_FORMAT_LFM2:
        return "lfm2";
    case TOOLCALL_FORMAT_GENERIC:
        return "generic";
    }
    return "unknown";
}

/* ---- JSON helpers ---- */

static void jscan_init(struct jscan *j)
{
    *j = (struct jscan){0, false, false};
}

/* Scans s[*at..len). Returns true when the value that began at the first scanned byte has
 * closed; *at is then one past its end. */
static bool jscan_run(struct jscan *j, const char *s, size_t len, size_t *at)
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
static char *json_compact(const json_t *v)
{
    size_t n = json_text_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    if (n == 0) return NULL;
    char *p = mem_alloc(n + 1);
    if (!p) return NULL;
    json_text_dumpb(v, p, n, JSON_COMPACT | JSON_ENCODE_ANY);
    p[n] = '\0';
    return p;
}

/* Result of trying to turn text into calls: not calls (content), calls, or out of memory. */
enum parsed {
    PARSED_NO = 0,
    PARSED_OK = 1,
    PARSED_NOMEM = 2,
};

static void call_deinit(struct toolcall *c)
{
    mem_free(c->name);
    mem_free(c->arguments);
    mem_free(c->id);
}

static void calls_truncate(struct toolcall_stream *s, int n)
{
    while (s->n_calls > n)
        call_deinit(&s->calls[--s->n_calls]);
}

/* Appends a call; takes ownership of name, args and id (freed on failure too). */
static enum parsed call_push(struct toolcall_stream *s, char *name, char *args, char *id)
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
static enum parsed args_text(const json_t *args, char **out)
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
    *out = json_compact(args);
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
    enum parsed r = args_text(args, &a);
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
    return call_push(s, mem_strdup(json_string_value(name)), a, id_copy);
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
            calls_truncate(s, n0);
            return r;
        }
    }
    return PARSED_OK;
}

static enum parsed calls_from_text(struct toolcall_stream *s, const char *p, size_t n)
{
    json_t *v = json_loadb(p, n, 0, NULL);
    if (!v) return PARSED_NO;
    enum parsed r = calls_from_value(s, v);
    json_decref(v);
    return r;
}

/* One JSON value, or with allow_many several separated by whitespace or ';' (Llama 3 writes
 * "{..}; {..}", some Hermes models put several objects in one block). Nothing else. */
static enum parsed calls_from_values(struct toolcall_stream *s, const char *p, size_t n,
                                     bool allow_many)
{
    int n0 = s->n_calls;
    size_t i = 0;
    for (bool is_first = true;; is_first = false) {
        while (i < n && (is_ws(p[i]) || (!is_first && allow_many && p[i] == ';')))
            i++;
        if (i == n) return is_first ? PARSED_NO : PARSED_OK;
        struct jscan j;
        jscan_init(&j);
        size_t start = i;
        enum parsed r = PARSED_NO;
        if ((is_first || allow_many) && (p[i] == '{' || p[i] == '[') && jscan_run(&j, p, n, &i))
            r = calls_from_text(s, p + start, i - start);
        if (r != PARSED_OK) {
            calls_truncate(s, n0);
            return r;
        }
    }
}

/* ---- Qwen3.5 XML body: <function=NAME><parameter=KEY>VALUE</parameter>...</function> ---- */

static bool eat(const char *p, size_t n, size_t *i, const char *lit)
{
    size_t k = strlen(lit);
    if (n - *i < k || memcmp(p + *i, lit, k) != 0) return false;
    *i += k;
    return true;
}

static void skip_ws(const char *p, size_t n, size_t *i)
{
    while (*i < n && is_ws(p[*i]))
        (*i)++;
}

/* A parameter value: JSON when it parses as JSON (numbers, booleans, objects), else the text
 * as a string; one newline on each side belongs to the layout, as the template writes it. */
static json_t *xml_value(const char *p, size_t n)
{
    if (n > 0 && p[0] == '\n') p++, n--;
    if (n > 0 && p[n - 1] == '\n') n--;
    json_t *v = json_loadb(p, n, JSON_DECODE_ANY, NULL);
    return v ? v : json_stringn(p, n);
}

/* Sets obj[key] = v, taking ownership of v; the key is copied from p[0..n). */
static enum parsed set_member(json_t *obj, const char *p, size_t n, json_t *v)
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

/* Reads "<parameter=KEY>VALUE</parameter>" at *i into obj. */
static enum parsed xml_param(const char *p, size_t n, size_t *i, json_t *obj)
{
    if (!eat(p, n, i, "<parameter=")) return PARSED_NO;
    long gt = holdback_find(p, n, *i, ">", 1);
    long end = gt < 0 ? -1 : holdback_find(p, n, (size_t)gt + 1, "</parameter>", 12);
    if (end < 0 || (size_t)gt == *i) return PARSED_NO;
    json_t *v = xml_value(p + gt + 1, (size_t)end - (size_t)gt - 1);
    enum parsed r = set_member(obj, p + *i, (size_t)gt - *i, v);
    *i = (size_t)end + 12;
    return r;
}

static enum parsed calls_from_xml(struct toolcall_stream *s, const char *p, size_t n)
{
    size_t i = 0;
    if (!eat(p, n, &i, "<function=")) return PARSED_NO;
    long gt = holdback_find(p, n, i, ">", 1);
    if (gt < 0 || (size_t)gt == i || (size_t)gt - i > NAME_LEN_MAX) return PARSED_NO;
    size_t name_off = i, name_len = (size_t)gt - i;
    i = (size_t)gt + 1;
    json_t *obj = json_object();
    if (!obj) return PARSED_NOMEM;
    enum parsed r = PARSED_OK;
    for (;;) {
        skip_ws(p, n, &i);
        if (eat(p, n, &i, "</function>")) break;
        r = xml_param(p, n, &i, obj);
        if (r != PARSED_OK) goto out_obj;
    }
    skip_ws(p, n, &i);
    r = PARSED_NO;
    if (i == n) r = call_push(s, mem_strndup(p + name_off, name_len), json_compact(obj), NULL);
out_obj:
    json_decref(obj);
    return r;
}

/* ---- GLM 4.x body: NAME <arg_key>K</arg_key><arg_value>V</arg_value>... ---- */

/* Reads "<tag>TEXT</tag>" at *i (after whitespace); the text is p[*off..*off + *len). */
static bool tagged(const char *p, size_t n, size_t *i, const char *tag, size_t *off, size_t *len)
{
    char open[32], close[32];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    skip_ws(p, n, i);
    if (!eat(p, n, i, open)) return false;
    long end = holdback_find(p, n, *i, close, strlen(close));
    if (end < 0) return false;
    *off = *i;
    *len = (size_t)end - *i;
    *i = (size_t)end + strlen(close);
    return true;
}

static enum parsed calls_from_glm(struct toolcall_stream *s, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && is_ident(p[i]))
        i++;
    size_t name_len = i;
    if (name_len == 0 || name_len > NAME_LEN_MAX) return PARSED_NO;
    json_t *obj = json_object();
    if (!obj) return PARSED_NOMEM;
    enum parsed r = PARSED_OK;
    for (;;) {
        skip_ws(p, n, &i);
        if (i == n) break;
        size_t k_off, k_len, v_off, v_len;
        if (!tagged(p, n, &i, "arg_key", &k_off, &k_len) ||
            !tagged(p, n, &i, "arg_value", &v_off, &v_len)) {
            r = PARSED_NO;
            break;
        }
        r = set_member(obj, p + k_off, k_len, xml_value(p + v_off, v_len));
        if (r != PARSED_OK) break;
    }
    if (r == PARSED_OK) r = call_push(s, mem_strndup(p, name_len), json_compact(obj), NULL);
    json_decref(obj);
    return r;
}

/* A <tool_call> body. GLM's layout is accepted only when the name follows the tag directly
 * and the block was closed, so prose like "use <tool_call> tags" cut off by the end of the
 * output is not mistaken for a call without arguments. */
static enum parsed calls_from_hermes(struct toolcall_stream *s, const char *p, size_t n,
                                     bool is_closed)
{
    size_t i = 0;
    skip_ws(p, n, &i);
    while (n > i && is_ws(p[n - 1]))
        n--;
    if (n - i >= 10 && memcmp(p + i, "<function=", 10) == 0) return calls_from_xml(s, p + i, n - i);
    if (i < n && p[i] != '{' && p[i] != '[')
        return i == 0 && is_closed ? calls_from_glm(s, p, n) : PARSED_NO;
    return calls_from_values(s, p + i, n - i, true);
}

/* ---- Llama 3.1 <|python_tag|> body ---- */

/* A Python string literal ('..' or ".."), with the common escapes, into *out. */
static enum parsed py_string(const char *p, size_t n, size_t *i, json_t **out)
{
    char q = p[*i];
    struct buf b;
    buf_init(&b);
    for (size_t k = *i + 1; k < n; k++) {
        char c = p[k];
        if (c == q) {
            *out = json_stringn(b.data ? b.data : "", b.len);
            buf_deinit(&b);
            *i = k + 1;
            return *out ? PARSED_OK : PARSED_NO;
        }
        if (c == '\\' && k + 1 < n) {
            c = p[++k];
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        if (buf_append_byte(&b, c) != ERR_OK) {
            buf_deinit(&b);
            return PARSED_NOMEM;
        }
    }
    buf_deinit(&b);
    return PARSED_NO;
}

/* A keyword value into *out: a string literal, or a bare token read as JSON (numbers) or
 * Python's True/False/None. */
static enum parsed py_value(const char *p, size_t n, size_t *i, json_t **out)
{
    if (*i < n && (p[*i] == '"' || p[*i] == '\'')) return py_string(p, n, i, out);
    size_t k = *i;
    while (k < n && p[k] != ',' && p[k] != ')' && !is_ws(p[k]))
        k++;
    size_t len = k - *i;
    const char *t = p + *i;
    *i = k;
    if (len == 4 && memcmp(t, "True", 4) == 0)
        *out = json_true();
    else if (len == 5 && memcmp(t, "False", 5) == 0)
        *out = json_false();
    else if (len == 4 && memcmp(t, "None", 4) == 0)
        *out = json_null();
    else
        *out = len ? json_loadb(t, len, JSON_DECODE_ANY, NULL) : NULL;
    return *out ? PARSED_OK : PARSED_NO;
}

/* Fills obj from "k=v, k2=v2" up to the closing parenthesis; *i ends after it. */
static enum parsed py_kwargs(const char *p, size_t n, size_t *i, json_t *obj)
{
    for (bool is_first = true;; is_first = false) {
        skip_ws(p, n, i);
        if (eat(p, n, i, ")")) return PARSED_OK;
        if (!is_first && !eat(p, n, i, ",")) return PARSED_NO;
        skip_ws(p, n, i);
        size_t k0 = *i;
        while (*i < n && is_ident(p[*i]) && p[*i] != '.')
            (*i)++;
        size_t klen = *i - k0;
        skip_ws(p, n, i);
        if (klen == 0 || !eat(p, n, i, "=")) return PARSED_NO;
        skip_ws(p, n, i);
        json_t *v = NULL;
        enum parsed r = py_value(p, n, i, &v);
        if (r == PARSED_OK) r = set_member(obj, p + k0, klen, v);
        if (r != PARSED_OK) return r;
    }
}

/* "tool.call(k=v, ...)" as written by the Llama 3.1 template for built-in tools. */
static enum parsed calls_from_python_call(struct toolcall_stream *s, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && is_ident(p[i]))
        i++;
    if (i < 6 || i > NAME_LEN_MAX || memcmp(p + i - 5, ".call", 5) != 0 || i >= n || p[i] != '(')
        return PARSED_NO;
    size_t name_len = i - 5;
    i++;
    json_t *obj = json_object();
    if (!obj) return PARSED_NOMEM;
    enum parsed r = py_kwargs(p, n, &i, obj);
    skip_ws(p, n, &i);
    if (r == PARSED_OK)
        r = i == n ? call_push(s, mem_strndup(p, name_len), json_compact(obj), NULL) : PARSED_NO;
    json_decref(obj);
    return r;
}

/* An LFM2 block's body: a Python list of calls, [name(k=v, ...), ...], as its template writes
 * them; a JSON body (when a system prompt asked for JSON) is read as JSON calls. */
static enum parsed calls_from_lfm2(struct toolcall_stream *s, const char *p, size_t n,
                                   bool is_closed)
{
    size_t i = 0;
    skip_ws(p, n, &i);
    while (n > i && is_ws(p[n - 1]))
        n--;
    if (!is_closed) return PARSED_NO;
    if (i < n && p[i] == '{') return calls_from_values(s, p + i, n - i, true);
    const size_t open = i;
    if (!eat(p, n, &i, "[")) return PARSED_NO;
    skip_ws(p, n, &i);
    if (i < n && p[i] == '{') return calls_from_values(s, p + open, n - open, true);
    for (bool is_first = true;; is_first = false) {
        skip_ws(p, n, &i);
        if (eat(p, n, &i, "]")) return i == n && !is_first ? PARSED_OK : PARSED_NO;
        if (!is_first && !eat(p, n, &i, ",")) return PARSED_NO;
        skip_ws(p, n, &i);
        const size_t k0 = i;
        while (i < n && is_ident(p[i]))
            i++;
        const size_t name_len = i - k0;
        if (name_len == 0 || name_len > NAME_LEN_MAX || !eat(p, n, &i, "(")) return PARSED_NO;
        json_t *obj = json_object();
        if (!obj) return PARSED_NOMEM;
        enum parsed r = py_kwargs(p, n, &i, obj);
        if (r == PARSED_OK)
            r = call_push(s, mem_strndup(p + k0, name_len), json_compact(obj), NULL);
        json_decref(obj);
        if (r != PARSED_OK) return r;
    }
}

/* JSON call(s), a built-in tool call, or else code for the "python" tool (as llama.cpp maps the
 * code interpreter). */
static enum parsed calls_from_python_tag(struct toolcall_stream *s, const char *p, size_t n)
{
    size_t i = 0;
    skip_ws(p, n, &i);
    while (n > i && is_ws(p[n - 1]))
        n--;
    p += i;
    n -= i;
    if (n == 0) return PARSED_NO;
    enum parsed r = p[0] == '{' || p[0] == '[' ? calls_from_values(s, p, n, true) : PARSED_NO;
    if (r == PARSED_NO) r = calls_from_python_call(s, p, n);
    if (r != PARSED_NO) return r;
    json_t *obj = json_pack("{s:s%}", "code", p, n);
    if (!obj) return PARSED_NOMEM;
    r = call_push(s, mem_strdup("python"), json_compact(obj), NULL);
    json_decref(obj);
    return r;
}

/* The arguments of a Mistral "[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}" call. */
static enum parsed call_from_mistral_args(struct toolcall_stream *s, const char *p, size_t n)
{
    json_t *v = json_loadb(p, n, 0, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        return PARSED_NO;
    }
    char *args = json_compact(v);
    json_decref(v);
    const char *t = s->text.data;
    char *id = NULL;
    if (s->id_len > 0 && !(id = mem_strndup(t + s->id_off, s->id_len))) {
        mem_free(args);
        return PARSED_NOMEM;
    }
    return call_push(s, mem_strndup(t + s->name_off, s->name_len), args, id);
}

/* ---- events ---- */

static int raw_push(struct toolcall_stream *s, struct raw_event e)
{
    if (s->n_raw == s->cap_raw) {
        int cap = s->cap_raw ? s->cap_raw * 2 : 8;
        struct raw_event *r = mem_realloc(s->raw, (size_t)cap * sizeof *r);
        if (!r) return ERR_NOMEM;
        s->raw = r;
        struct toolcall_event *ev = mem_realloc(s->ev, (size_t)cap * sizeof *ev);
        if (!ev) return ERR_NOMEM; // raw grew; cap_raw stays, so the next push retries ev
        s->ev = ev;
        s->cap_raw = cap;
    }
    s->raw[s->n_raw++] = e;
    return ERR_OK;
}

static int emit_content(struct toolcall_stream *s, size_t from, size_t to)
{
    if (to <= from) return ERR_OK;
    // Adjacent slices merge, so one feed yields one delta per run of content.
    struct raw_event *last = s->n_raw ? &s->raw[s->n_raw - 1] : NULL;
    if (last && last->kind == TOOLCALL_EVENT_CONTENT && last->off + last->len == from) {
        last->len += to - from;
        return ERR_OK;
    }
    return raw_push(s, (struct raw_event){TOOLCALL_EVENT_CONTENT, from, to - from, -1});
}

static int emit_calls_from(struct toolcall_stream *s, int first)
{
    for (int i = first; i < s->n_calls; i++) {
        int rc = raw_push(s, (struct raw_event){TOOLCALL_EVENT_CALL, 0, 0, i});
        if (rc != ERR_OK) return rc;
    }
    return ERR_OK;
}

/* ---- the state machine ---- */

struct marker {
    const char *text;
    size_t len;
    enum state next;
};

static bool format_marker(enum toolcall_format f, struct marker *m)
{
    switch (f) {
    case TOOLCALL_FORMAT_HERMES:
        *m = (struct marker){HERMES_OPEN, sizeof HERMES_OPEN - 1, ST_HERMES};
        return true;
    case TOOLCALL_FORMAT_MISTRAL:
        *m = (struct marker){MISTRAL_OPEN, sizeof MISTRAL_OPEN - 1, ST_MISTRAL_START};
        return true;
    case TOOLCALL_FORMAT_LLAMA3:
        *m = (struct marker){PYTHON_TAG, sizeof PYTHON_TAG - 1, ST_PYTHON};
        return true;
    case TOOLCALL_FORMAT_LFM2:
        *m = (struct marker){LFM2_OPEN, sizeof LFM2_OPEN - 1, ST_LFM2};
        return true;
    case TOOLCALL_FORMAT_HARMONY: // its own content step
    case TOOLCALL_FORMAT_GENERIC:
        break;
    }
    return false;
}

/* The decided outcome of a construct: calls (then whitespace after it is dropped) or, when
 * the text did not parse as calls, the construct's bytes [mark, end) as content. */
static int settle(struct toolcall_stream *s, enum parsed r, int first_call, size_t end)
{
    if (r == PARSED_NOMEM) return ERR_NOMEM;
    int rc = r == PARSED_OK ? emit_calls_from(s, first_call) : emit_content(s, s->mark, end);
    s->pos = end;
    s->skip_ws = r == PARSED_OK;
    s->st = ST_CONTENT;
    return rc;
}

/* At the start of the output: a JSON value may be the whole answer as calls. */
static enum step content_at_start(struct toolcall_stream *s, const struct marker *mk,
                                  bool has_marker, bool is_final)
{
    const char *t = s->text.data;
    size_t len = s->text.len, i = s->pos;
    skip_ws(t, len, &i);
    if (i == len) return is_final ? (s->at_start = false, STEP_AGAIN) : STEP_WAIT;
    if (has_marker && holdback_partial_len(t + i, len - i, mk->text, mk->len) == len - i &&
        !is_final)
        return STEP_WAIT; // could still be the marker
    s->at_start = false;
    if ((t[i] == '{' || t[i] == '[') &&
        !(has_marker && len - i >= mk->len && memcmp(t + i, mk->text, mk->len) == 0)) {
        s->mark = s->pos;
        s->value_start = s->scan = i;
        jscan_init(&s->js);
        s->st = ST_WHOLE;
    }
    return STEP_AGAIN;
}

static int step_content(struct toolcall_stream *s, bool is_final, enum step *out)
{
    struct marker mk = {0};
    bool has_marker = format_marker(s->fmt, &mk);
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_WAIT;
    if (s->skip_ws) {
        skip_ws(t, len, &s->pos);
        if (s->pos == len) return ERR_OK;
        s->skip_ws = false;
    }
    if (s->at_start) {
        *out = content_at_start(s, &mk, has_marker, is_final);
        return ERR_OK;
    }
    long m = has_marker ? holdback_find(t, len, s->pos, mk.text, mk.len) : -1;
    if (m >= 0) {
        size_t end = (size_t)m;
        while (end > s->pos && is_ws(t[end - 1]))
            end--;
        int rc = emit_content(s, s->pos, end);
        s->mark = end; // the whitespace comes back if the call turns out to be content
        s->pos = s->scan = (size_t)m + mk.len;
        s->st = mk.next;
        *out = STEP_AGAIN;
        return rc;
    }
    size_t cut = len;
    if (!is_final) {
        cut -= has_marker ? holdback_partial_len(t + s->pos, len - s->pos, mk.text, mk.len) : 0;
        while (cut > s->pos && is_ws(t[cut - 1]))
            cut--; // whitespace before a marker is dropped, so it waits too
        cut = holdback_utf8_cut(t, len, cut);
        cut = cut < s->pos ? s->pos : cut;
    }
    int rc = emit_content(s, s->pos, cut);
    s->pos = cut;
    return rc;
}

static int step_whole(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_WAIT;
    bool is_closed = s->js.depth <= 0 && s->scan > s->value_start;
    if (!is_closed) is_closed = jscan_run(&s->js, t, len, &s->scan);
    if (is_closed) {
        // Text after the value (other than Llama's ';'-separated calls) means it is content.
        size_t i = s->scan;
        skip_ws(t, len, &i);
        if (i < len && !(s->fmt == TOOLCALL_FORMAT_LLAMA3 && t[i] == ';')) {
            *out = STEP_AGAIN;
            return settle(s, PARSED_NO, 0, s->scan);
        }
    }
    if (!is_final) return ERR_OK;
    int n0 = s->n_calls;
    enum parsed r = calls_from_values(s, t + s->value_start, len - s->value_start,
                                      s->fmt == TOOLCALL_FORMAT_LLAMA3);
    *out = STEP_AGAIN;
    return settle(s, r, n0, len);
}

typedef enum parsed (*block_fn)(struct toolcall_stream *s, const char *p, size_t n, bool is_closed);

/* A block from its opening marker (already passed) to close: its body goes to parse. */
static int step_block(struct toolcall_stream *s, bool is_final, enum step *out, const char *close,
                      block_fn parse)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    const size_t close_len = strlen(close);
    // Resume where the last search stopped, so a long body fed token by token stays linear.
    size_t from = s->scan > s->pos ? s->scan : s->pos;
    long m = holdback_find(t, len, from, close, close_len);
    *out = STEP_WAIT;
    if (m < 0 && !is_final) {
        s->scan = len >= close_len ? len - close_len + 1 : 0;
        return ERR_OK;
    }
    size_t body_end = m >= 0 ? (size_t)m : len;
    size_t end = m >= 0 ? (size_t)m + close_len : len;
    int n0 = s->n_calls;
    enum parsed r = parse(s, t + s->pos, body_end - s->pos, m >= 0);
    *out = STEP_AGAIN;
    return settle(s, r, n0, end);
}

static int step_python(struct toolcall_stream *s, bool is_final, enum step *out)
{
    *out = STEP_WAIT;
    if (!is_final) return ERR_OK;
    int n0 = s->n_calls;
    enum parsed r = calls_from_python_tag(s, s->text.data + s->pos, s->text.len - s->pos);
    *out = STEP_AGAIN;
    return settle(s, r, n0, s->text.len);
}

static int step_mistral_start(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    skip_ws(t, len, &s->pos);
    *out = STEP_AGAIN;
    if (s->pos == len) {
        if (!is_final) *out = STEP_WAIT;
        return is_final ? settle(s, PARSED_NO, 0, len) : ERR_OK;
    }
    char c = t[s->pos];
    if (c == '[' || c == '{') {
        s->json_is_args = false;
        s->st = ST_JSON_START;
    } else if (is_ident(c)) {
        s->name_off = s->scan = s->pos;
        s->id_len = 0;
        s->st = ST_MISTRAL_NAME;
    } else {
        return settle(s, PARSED_NO, 0, s->pos);
    }
    return ERR_OK;
}

/* Reads identifier bytes from s->scan up to the next marker. Returns STEP_WAIT for more text,
 * else STEP_AGAIN with the state advanced (or settled as content). */
static int step_mistral_word(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len, start = s->st == ST_MISTRAL_NAME ? s->name_off : s->id_off;
    while (s->scan < len && is_ident(t[s->scan]) && s->scan - start <= NAME_LEN_MAX)
        s->scan++;
    size_t i = s->scan, rest = len - i, wlen = i - start;
    *out = STEP_AGAIN;
    if (wlen > NAME_LEN_MAX || (i < len && (t[i] != '[' || wlen == 0)))
        return settle(s, PARSED_NO, 0, i);
    bool may_args = holdback_partial_len(t + i, rest, MISTRAL_ARGS, 6) == rest;
    bool may_id =
        s->st == ST_MISTRAL_NAME && holdback_partial_len(t + i, rest, MISTRAL_CALL_ID, 9) == rest;
    if ((rest == 0 || may_args || may_id) && !is_final) {
        *out = STEP_WAIT;
        return ERR_OK;
    }
    if (s->st == ST_MISTRAL_NAME)
        s->name_len = wlen;
    else
        s->id_len = wlen;
    if (rest >= 6 && memcmp(t + i, MISTRAL_ARGS, 6) == 0) {
        s->pos = i + 6;
        s->json_is_args = true;
        s->st = ST_JSON_START;
    } else if (s->st == ST_MISTRAL_NAME && rest >= 9 && memcmp(t + i, MISTRAL_CALL_ID, 9) == 0) {
        s->id_off = s->scan = i + 9;
        s->st = ST_MISTRAL_ID;
    } else {
        return settle(s, PARSED_NO, 0, is_final ? len : i);
    }
    return ERR_OK;
}

static int step_json(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_AGAIN;
    if (s->st == ST_JSON_START) {
        skip_ws(t, len, &s->pos);
        if (s->pos == len) {
            if (!is_final) *out = STEP_WAIT;
            return is_final ? settle(s, PARSED_NO, 0, len) : ERR_OK;
        }
        char c = t[s->pos];
        if (c != '{' && (c != '[' || s->json_is_args)) return settle(s, PARSED_NO, 0, s->pos);
        s->value_start = s->scan = s->pos;
        jscan_init(&s->js);
        s->st = ST_JSON;
    }
    if (!jscan_run(&s->js, t, len, &s->scan)) {
        if (!is_final) *out = STEP_WAIT;
        return is_final ? settle(s, PARSED_NO, 0, len) : ERR_OK;
    }
    int n0 = s->n_calls;
    const char *v = t + s->value_start;
    size_t vlen = s->scan - s->value_start;
    enum parsed r =
        s->json_is_args ? call_from_mistral_args(s, v, vlen) : calls_from_text(s, v, vlen);
    return settle(s, r, n0, s->scan);
}

/* ---- gpt-oss harmony: messages `[<|start|>ROLE[ to=R]]<|channel|>CH[ to=R][ [<|constrain|>]T]
 * <|message|>BODY<|end|>` (or <|call|>, <|return|>); facts from the gpt-oss chat template and the
 * reference's parser. A recipient `functions.NAME` makes the body the arguments of a call to
 * NAME, in either header position; analysis bodies are reasoning, commentary (preambles) and
 * final bodies are content, and messages to any other recipient (built-in tools the request did
 * not declare) are dropped. ---- */

static const char HARMONY_START[] = "<|start|>";
static const char HARMONY_CHANNEL[] = "<|channel|>";
static const char HARMONY_MESSAGE[] = "<|message|>";
static const char *const HARMONY_ENDS[] = {"<|end|>", "<|call|>", "<|return|>"};
#define HARMONY_N_ENDS   3
#define HARMONY_HEAD_MAX 512 // bytes of a header before <|message|>; longer is not a header

/* Earliest of the n markers in t[from..len): its offset (or -1) and which one. */
static long find_any(const char *t, size_t len, size_t from, const char *const *mk, int n,
                     int *which)
{
    long best = -1;
    for (int k = 0; k < n; k++) {
        long m = holdback_find(t, len, from, mk[k], strlen(mk[k]));
        if (m >= 0 && (best < 0 || m < best)) best = m, *which = k;
    }
    return best;
}

/* Longest tail of t[from..len) that may still become one of the markers. */
static size_t partial_any(const char *t, size_t len, size_t from, const char *const *mk, int n)
{
    size_t hold = 0;
    for (int k = 0; k < n; k++) {
        size_t h = holdback_partial_len(t + from, len - from, mk[k], strlen(mk[k]));
        hold = h > hold ? h : hold;
    }
    return hold;
}

/* Reads ` to=RECIPIENT` at *i (spaces first); true when one was there. */
static bool harmony_recipient(const char *p, size_t n, size_t *i, size_t *off, size_t *len)
{
    size_t k = *i;
    skip_ws(p, n, &k);
    if (!eat(p, n, &k, "to=")) return false;
    size_t start = k;
    while (k < n && is_ident(p[k]))
        k++;
    if (k == start) return false;
    *off = start, *len = k - start, *i = k;
    return true;
}

struct harmony_head {
    size_t to_off, to_len; // recipient within the header (to_len 0: none)
    bool is_analysis;
};

/* Parses a header h[0..n) (the text before <|message|>). False when it is not one. */
static bool harmony_head_parse(const char *h, size_t n, struct harmony_head *out)
{
    size_t i = 0, off = 0, len = 0;
    *out = (struct harmony_head){0, 0, false};
    if (eat(h, n, &i, HARMONY_START)) {
        while (i < n && is_ident(h[i]))
            i++; // the role
    }
    if (harmony_recipient(h, n, &i, &off, &len)) out->to_off = off, out->to_len = len;
    // A stray "<|channel|>commentary[ to=assistant]" may precede the real channel: last wins.
    while (eat(h, n, &i, HARMONY_CHANNEL)) {
        size_t ch = i;
        while (i < n && is_ident(h[i]))
            i++;
        out->is_analysis = i - ch == 8 && memcmp(h + ch, "analysis", 8) == 0;
        if (harmony_recipient(h, n, &i, &off, &len)) out->to_off = off, out->to_len = len;
    }
    skip_ws(h, n, &i);
    eat(h, n, &i, "<|constrain|>");
    while (i < n && is_ident(h[i]))
        i++; // the content type ("json")
    skip_ws(h, n, &i);
    if (out->to_len == 9 && memcmp(h + out->to_off, "assistant", 9) == 0) out->to_len = 0;
    return i == n;
}

/* Ordinary text: a header starts at <|start|> or <|channel|>, or, at the very start of the
 * output, at "to=" (the generation prompt ended with "<|start|>assistant"). */
static int step_harmony_content(struct toolcall_stream *s, bool is_final, enum step *out)
{
    static const char *const heads[] = {HARMONY_START, HARMONY_CHANNEL};
    const char *t = s->text.data;
    size_t len = s->text.len;
    *out = STEP_WAIT;
    if (s->skip_ws) {
        skip_ws(t, len, &s->pos);
        if (s->pos == len) return ERR_OK;
        s->skip_ws = false;
    }
    if (s->at_start) {
        size_t i = s->pos;
        skip_ws(t, len, &i);
        if (i == len && !is_final) return ERR_OK;
        if (!is_final && holdback_partial_len(t + i, len - i, "to=", 3) == len - i) return ERR_OK;
        s->at_start = false;
        if (len - i >= 3 && memcmp(t + i, "to=", 3) == 0) {
            s->mark = s->pos;
            s->st = ST_HARMONY_HEAD;
            *out = STEP_AGAIN;
            return ERR_OK;
        }
    }
    int which = 0;
    long m = find_any(t, len, s->pos, heads, 2, &which);
    if (m >= 0) {
        size_t end = (size_t)m;
        while (end > s->pos && is_ws(t[end - 1]))
            end--;
        int rc = emit_content(s, s->pos, end);
        s->mark = end;
        s->pos = (size_t)m;
        s->st = ST_HARMONY_HEAD;
        *out = STEP_AGAIN;
        return rc;
    }
    size_t cut = len;
    if (!is_final) {
        cut -= partial_any(t, len, s->pos, heads, 2);
        while (cut > s->pos && is_ws(t[cut - 1]))
            cut--;
        cut = holdback_utf8_cut(t, len, cut);
        cut = cut < s->pos ? s->pos : cut;
    }
    int rc = emit_content(s, s->pos, cut);
    s->pos = cut;
    return rc;
}

/* Waits for <|message|>, then decides what the message is. */
static int step_harmony_head(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    const size_t mlen = sizeof HARMONY_MESSAGE - 1;
    long m = holdback_find(t, len, s->pos, HARMONY_MESSAGE, mlen);
    *out = STEP_AGAIN;
    if (m < 0) {
        if (!is_final && len - s->pos <= HARMONY_HEAD_MAX) return *out = STEP_WAIT, ERR_OK;
        // Not a header after all: its first byte is content, the rest is looked at again.
        return settle(s, PARSED_NO, 0, s->pos + 1);
    }
    struct harmony_head h;
    if ((size_t)m - s->pos > HARMONY_HEAD_MAX ||
        !harmony_head_parse(t + s->pos, (size_t)m - s->pos, &h))
        return settle(s, PARSED_NO, 0, s->pos + 1);
    const size_t fl = sizeof "functions." - 1;
    bool is_call =
        h.to_len > fl && memcmp(t + s->pos + h.to_off, "functions.", fl) == 0 && !s->drop_calls;
    s->name_off = s->pos + h.to_off + (is_call ? fl : 0);
    s->name_len = h.to_len - (is_call ? fl : 0);
    s->pos = s->scan = (size_t)m + mlen;
    s->is_reasoning = h.is_analysis;
    s->st = is_call ? ST_HARMONY_CALL : h.to_len ? ST_HARMONY_SKIP : ST_HARMONY_BODY;
    s->skip_ws = s->st == ST_HARMONY_BODY;
    return ERR_OK;
}

static int emit_reasoning(struct toolcall_stream *s, size_t from, size_t to)
{
    if (to <= from) return ERR_OK;
    struct raw_event *last = s->n_raw ? &s->raw[s->n_raw - 1] : NULL;
    if (last && last->kind == TOOLCALL_EVENT_REASONING && last->off + last->len == from) {
        last->len += to - from;
        return ERR_OK;
    }
    return raw_push(s, (struct raw_event){TOOLCALL_EVENT_REASONING, from, to - from, -1});
}

/* The body of a message to functions.NAME: a JSON object (or a string holding one) is the
 * arguments; anything else leaves the message as content. */
static enum parsed call_from_harmony(struct toolcall_stream *s, const char *p, size_t n)
{
    if (s->name_len == 0 || s->name_len > NAME_LEN_MAX) return PARSED_NO;
    json_t *v = json_loadb(p, n, JSON_DECODE_ANY, NULL);
    char *a = NULL;
    enum parsed r = v ? args_text(v, &a) : PARSED_NO;
    json_decref(v);
    if (r != PARSED_OK) return r;
    char *name = mem_alloc(s->name_len + 1);
    if (name) {
        memcpy(name, s->text.data + s->name_off, s->name_len);
        name[s->name_len] = '\0';
    }
    return call_push(s, name, a, NULL);
}

/* A message's body up to its end marker: emitted as it comes (BODY), decided whole (CALL) or
 * dropped (SKIP). */
static int step_harmony_body(struct toolcall_stream *s, bool is_final, enum step *out)
{
    const char *t = s->text.data;
    size_t len = s->text.len;
    if (s->skip_ws) {
        skip_ws(t, len, &s->pos);
        s->scan = s->pos;
        if (s->pos < len) s->skip_ws = false;
    }
    int which = 0;
    long m = find_any(t, len, s->scan, HARMONY_ENDS, HARMONY_N_ENDS, &which);
    size_t body_end = m >= 0 ? (size_t)m : len;
    if (m < 0 && !is_final) body_end -= partial_any(t, len, s->scan, HARMONY_ENDS, HARMONY_N_ENDS);
    *out = m >= 0 || is_final ? STEP_AGAIN : STEP_WAIT;
    size_t end = m >= 0 ? (size_t)m + strlen(HARMONY_ENDS[which]) : len;
    if (s->st == ST_HARMONY_CALL) {
        s->scan = body_end > s->pos ? body_end : s->pos; // resume the search here
        if (*out == STEP_WAIT) return ERR_OK;
        int n0 = s->n_calls;
        enum parsed r = call_from_harmony(s, t + s->pos, body_end - s->pos);
        return settle(s, r, n0, end);
    }
    size_t cut = body_end;
    while (cut > s->pos && is_ws(t[cut - 1]))
        cut--; // trailing whitespace waits: it is dropped if the message ends next
    if (*out == STEP_WAIT) cut = holdback_utf8_cut(t, len, cut);
    cut = cut < s->pos ? s->pos : cut;
    int rc = ERR_OK;
    if (s->st == ST_HARMONY_BODY)
        rc = s->is_reasoning ? emit_reasoning(s, s->pos, cut) : emit_content(s, s->pos, cut);
    s->pos = s->scan = cut;
    if (*out == STEP_AGAIN) {
        s->pos = end;
        s->skip_ws = true;
        s->st = ST_CONTENT;
    }
    return rc;
}

/* Runs the machine until it needs more text. A flat dispatch over the states. */
static int advance(struct toolcall_stream *s, bool is_final)
{
    enum step st = STEP_AGAIN;
    int rc = ERR_OK;
    while (rc == ERR_OK && st == STEP_AGAIN) {
        switch (s->st) {
        case ST_CONTENT:
            rc = s->fmt == TOOLCALL_FORMAT_HARMONY ? step_harmony_content(s, is_final, &st)
                                                   : step_content(s, is_final, &st);
            break;
        case ST_HARMONY_HEAD:
            rc = step_harmony_head(s, is_final, &st);
            break;
        case ST_HARMONY_BODY:
        case ST_HARMONY_CALL:
        case ST_HARMONY_SKIP:
            rc = step_harmony_body(s, is_final, &st);
            break;
        case ST_WHOLE:
            rc = step_whole(s, is_final, &st);
            break;
        case ST_HERMES:
            rc = step_block(s, is_final, &st, HERMES_CLOSE, calls_from_hermes);
            break;
        case ST_LFM2:
            rc = step_block(s, is_final, &st, LFM2_CLOSE, calls_from_lfm2);
            break;
        case ST_MISTRAL_START:
            rc = step_mistral_start(s, is_final, &st);
            break;
        case ST_MISTRAL_NAME:
        case ST_MISTRAL_ID:
            rc = step_mistral_word(s, is_final, &st);
            break;
        case ST_JSON_START:
        case ST_JSON:
            rc = step_json(s, is_final, &st);
            break;
        case ST_PYTHON:
            rc = step_python(s, is_final, &st);
            break;
        }
        if (is_final && s->st == ST_CONTENT && s->pos == s->text.len) break;
    }
    return rc;
}

/* ---- public API ---- */

int toolcall_stream_new(enum toolcall_format f, struct toolcall_stream **out)
{
    if ((unsigned)f > TOOLCALL_FORMAT_LFM2) return ERR_INVALID;
    struct toolcall_stream *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->fmt = f;
    s->st = ST_CONTENT;
    s->at_start = true;
    buf_init(&s->text);
    *out = s;
    return ERR_OK;
}

void toolcall_stream_drop_calls(struct toolcall_stream *s)
{
    s->drop_calls = true;
}

void toolcall_stream_free(struct toolcall_stream *s)
{
    if (!s) return;
    calls_truncate(s, 0);
    mem_free(s->calls);
    mem_free(s->raw);
    mem_free(s->ev);
    buf_deinit(&s->text);
    mem_free(s);
}

/* Turns raw events into the public view; pointers are taken only now, after the last
 * append, so they stay valid until the next call. */
static void publish(struct toolcall_stream *s, struct toolcall_events *out)
{
    for (int i = 0; i < s->n_raw; i++) {
        const struct raw_event *r = &s->raw[i];
        struct toolcall_event *e = &s->ev[i];
        *e = (struct toolcall_event){.kind = r->kind, .index = r->call};
        if (r->kind != TOOLCALL_EVENT_CALL)
            e->content = (struct str){s->text.data + r->off, r->len};
        else
            e->call = &s->calls[r->call];
    }
    out->ev = s->ev;
    out->n = s->n_raw;
}

static int run(struct toolcall_stream *s, const char *text, size_t len, bool is_final,
               struct toolcall_events *out)
{
    *out = (struct toolcall_events){NULL, 0};
    if (s->err) return s->err;
    if (s->is_finished) return ERR_INVALID;
    s->n_raw = 0;
    int rc = len ? buf_append(&s->text, text, len) : ERR_OK;
    if (rc == ERR_OK && s->text.len > 0) rc = advance(s, is_final);
    if (rc != ERR_OK) return s->err = rc;
    s->is_finished = is_final;
    publish(s, out);
    return ERR_OK;
}

int toolcall_stream_feed(struct toolcall_stream *s, const char *text, size_t len,
                         struct toolcall_events *out)
{
    return run(s, text, len, false, out);
}

int toolcall_stream_finish(struct toolcall_stream *s, struct toolcall_events *out)
{
    return run(s, NULL, 0, true, out);
}

const struct toolcall *toolcall_stream_calls(const struct toolcall_stream *s, int *n_calls)
{
    *n_calls = s->n_calls;
    return s->calls;
}

void toolcall_result_deinit(struct toolcall_result *r)
{
    for (int i = 0; i < r->n_calls; i++)
        call_deinit(&r->calls[i]);
    mem_free(r->calls);
    mem_free(r->content);
    mem_free(r->reasoning);
    *r = (struct toolcall_result){0};
}

static int append_content(struct buf *b, struct buf *r, const struct toolcall_events *ev)
{
    for (int i = 0; i < ev->n; i++) {
        const struct toolcall_event *e = &ev->ev[i];
        struct buf *to = e->kind == TOOLCALL_EVENT_CONTENT     ? b
                         : e->kind == TOOLCALL_EVENT_REASONING ? r
                                                               : NULL;
        if (to && buf_append(to, e->content.ptr, e->content.len)) return ERR_NOMEM;
    }
    return ERR_OK;
}

int toolcall_parse(enum toolcall_format f, const char *text, size_t len,
                   struct toolcall_result *out)
{
    *out = (struct toolcall_result){0};
    struct toolcall_stream *s = NULL;
    int rc = toolcall_stream_new(f, &s);
    if (rc != ERR_OK) return rc;
    struct toolcall_events ev;
    struct buf content, reasoning;
    buf_init(&content);
    buf_init(&reasoning);
    rc = toolcall_stream_feed(s, text, len, &ev);
    rc = rc == ERR_OK ? append_content(&content, &reasoning, &ev) : rc;
    if (rc == ERR_OK) rc = toolcall_stream_finish(s, &ev);
    rc = rc == ERR_OK ? append_content(&content, &reasoning, &ev) : rc;
    if (rc == ERR_OK) {
        out->content = buf_steal(&content);
        out->reasoning = buf_steal(&reasoning);
        out->calls = s->calls;
        out->n_calls = s->n_calls;
        s->calls = NULL; // handed over
        s->n_calls = 0;
    }
    buf_deinit(&content);
    buf_deinit(&reasoning);
    toolcall_stream_free(s);
    return rc;
}
