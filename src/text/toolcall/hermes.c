/* The <tool_call> family (Hermes 2 Pro, Qwen 2.5/3): JSON bodies, Qwen3.5's XML body
 * <function=NAME><parameter=KEY>VALUE</parameter>…</function>, and GLM 4.x's
 * NAME <arg_key>K</arg_key><arg_value>V</arg_value>…; markers and layouts as the families' chat
 * templates write them. */
#include "text/toolcall/toolcall_internal.h"

#include "text/holdback.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

/* Reads "<parameter=KEY>VALUE</parameter>" at *i into obj. */
static enum parsed xml_param(const char *p, size_t n, size_t *i, json_t *obj)
{
    if (!eat(p, n, i, "<parameter=")) return PARSED_NO;
    long gt = holdback_find(p, n, *i, ">", 1);
    long end = gt < 0 ? -1 : holdback_find(p, n, (size_t)gt + 1, "</parameter>", 12);
    if (end < 0 || (size_t)gt == *i) return PARSED_NO;
    json_t *v = tc_xml_value(p + gt + 1, (size_t)end - (size_t)gt - 1);
    enum parsed r = tc_set_member(obj, p + *i, (size_t)gt - *i, v);
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
    if (i == n)
        r = tc_call_push(s, mem_strndup(p + name_off, name_len), tc_json_compact(obj), NULL);
out_obj:
    json_decref(obj);
    return r;
}

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
        r = tc_set_member(obj, p + k_off, k_len, tc_xml_value(p + v_off, v_len));
        if (r != PARSED_OK) break;
    }
    if (r == PARSED_OK) r = tc_call_push(s, mem_strndup(p, name_len), tc_json_compact(obj), NULL);
    json_decref(obj);
    return r;
}

/* A <tool_call> body. GLM's layout is accepted only when the name follows the tag directly
 * and the block was closed, so prose like "use <tool_call> tags" cut off by the end of the
 * output is not mistaken for a call without arguments. */
enum parsed tc_calls_from_hermes(struct toolcall_stream *s, const char *p, size_t n, bool is_closed)
{
    size_t i = 0;
    skip_ws(p, n, &i);
    while (n > i && is_ws(p[n - 1]))
        n--;
    if (n - i >= 10 && memcmp(p + i, "<function=", 10) == 0) return calls_from_xml(s, p + i, n - i);
    if (i < n && p[i] != '{' && p[i] != '[')
        return i == 0 && is_closed ? calls_from_glm(s, p, n) : PARSED_NO;
    return tc_calls_from_values(s, p + i, n - i, true);
}
