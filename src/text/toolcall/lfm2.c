/* LFM2's <|tool_call_start|>[name(k=v, …), …]<|tool_call_end|>: Python calls with keyword
 * arguments, read with the Llama 3 built-in calls' keyword reader (llama3.c), as LFM2 and
 * LFM2.5's templates write them. */
#include "text/toolcall/toolcall_internal.h"

#include "util/mem.h"

/* An LFM2 block's body: a Python list of calls, [name(k=v, ...), ...], as its template writes
 * them; a JSON body (when a system prompt asked for JSON) is read as JSON calls. */
enum parsed tc_calls_from_lfm2(struct toolcall_stream *s, const char *p, size_t n, bool is_closed)
{
    size_t i = 0;
    skip_ws(p, n, &i);
    while (n > i && is_ws(p[n - 1]))
        n--;
    if (!is_closed) return PARSED_NO;
    if (i < n && p[i] == '{') return tc_calls_from_values(s, p + i, n - i, true);
    const size_t open = i;
    if (!eat(p, n, &i, "[")) return PARSED_NO;
    skip_ws(p, n, &i);
    if (i < n && p[i] == '{') return tc_calls_from_values(s, p + open, n - open, true);
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
        enum parsed r = tc_py_kwargs(p, n, &i, obj);
        if (r == PARSED_OK)
            r = tc_call_push(s, mem_strndup(p + k0, name_len), tc_json_compact(obj), NULL);
        json_decref(obj);
        if (r != PARSED_OK) return r;
    }
}
