/* Llama 3.1's <|python_tag|>: JSON calls, a built-in tool's "tool.call(k=v, …)" in Python
 * syntax, or else code for the "python" tool (as llama.cpp maps the code interpreter). */
#include "text/toolcall/toolcall_internal.h"

#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <string.h>

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
enum parsed tc_py_kwargs(const char *p, size_t n, size_t *i, json_t *obj)
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
        if (r == PARSED_OK) r = tc_set_member(obj, p + k0, klen, v);
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
    enum parsed r = tc_py_kwargs(p, n, &i, obj);
    skip_ws(p, n, &i);
    if (r == PARSED_OK)
        r = i == n ? tc_call_push(s, mem_strndup(p, name_len), tc_json_compact(obj), NULL)
                   : PARSED_NO;
    json_decref(obj);
    return r;
}

/* JSON call(s), a built-in tool call, or else code for the "python" tool (as llama.cpp maps the
 * code interpreter). */
enum parsed tc_calls_from_python_tag(struct toolcall_stream *s, const char *p, size_t n)
{
    size_t i = 0;
    skip_ws(p, n, &i);
    while (n > i && is_ws(p[n - 1]))
        n--;
    p += i;
    n -= i;
    if (n == 0) return PARSED_NO;
    enum parsed r = p[0] == '{' || p[0] == '[' ? tc_calls_from_values(s, p, n, true) : PARSED_NO;
    if (r == PARSED_NO) r = calls_from_python_call(s, p, n);
    if (r != PARSED_NO) return r;
    json_t *obj = json_pack("{s:s%}", "code", p, n);
    if (!obj) return PARSED_NOMEM;
    r = tc_call_push(s, mem_strdup("python"), tc_json_compact(obj), NULL);
    json_decref(obj);
    return r;
}

int tc_step_python(struct toolcall_stream *s, bool is_final, enum step *out)
{
    *out = STEP_WAIT;
    if (!is_final) return ERR_OK;
    int n0 = s->n_calls;
    enum parsed r = tc_calls_from_python_tag(s, s->text.data + s->pos, s->text.len - s->pos);
    *out = STEP_AGAIN;
    return tc_settle(s, r, n0, s->text.len);
}
