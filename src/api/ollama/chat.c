/* POST /api/chat: Ollama's chat request translated into chat messages, tools, structured
 * output and sampling parameters, run through chat_session as the Anthropic and Responses
 * translations are. */
#include "api/ollama/handlers.h"

#include "api/client_watch.h"
#include "api/generation/chat_session.h"
#include "api/ollama/call.h"
#include "api/ollama/convert.h"

#include <stdio.h>
#include <string.h>

/* How many messages truncation may drop: those that are neither a system message nor the
 * last, oldest first. */
static size_t n_droppable(const json_t *messages)
{
    size_t n = json_array_size(messages), k = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        const char *role = json_string_value(json_object_get(json_array_get(messages, i), "role"));
        if (!role || strcmp(role, "system") != 0) k++;
    }
    return k;
}

/* messages without their n_drop oldest droppable ones (a new array), or NULL: out of memory. */
static json_t *without_oldest(const json_t *messages, size_t n_drop)
{
    json_t *out = json_array();
    size_t n = json_array_size(messages);
    for (size_t i = 0; out && i < n; i++) {
        json_t *msg = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(msg, "role"));
        if (i + 1 < n && n_drop > 0 && (!role || strcmp(role, "system") != 0)) {
            n_drop--;
            continue;
        }
        if (json_array_append(out, msg) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

/* Whether the conversation fits after dropping n_drop messages. False with f filled on a
 * failure other than the context's (or when the client has gone). */
static bool fits_after(struct chat_session_args a, const json_t *messages, size_t n_drop,
                       bool *fits, struct api_fail *f)
{
    if (client_watch_is_abandoned()) return api_fail_cancelled(f);
    json_t *msgs = without_oldest(messages, n_drop);
    if (!msgs) return api_failf(f, 500, NULL, NULL, "out of memory");
    a.messages = msgs;
    int rc = chat_session_fits(&a, fits, f);
    json_decref(msgs);
    return rc == ERR_OK;
}

/* Ollama's truncate: the fewest oldest droppable messages whose removal makes the prompt fit
 * (a binary search, since fewer messages never need more tokens: O(n log n) in the
 * conversation's length, where dropping one at a time re-rendered it n times). When even
 * dropping all of them does not fit, all of them; start_chat then reports the context. */
static bool n_to_drop(const struct chat_session_args *a, const json_t *messages, size_t *out,
                      struct api_fail *f)
{
    size_t lo = 1, hi = n_droppable(messages);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        bool fits = false;
        if (!fits_after(*a, messages, mid, &fits, f)) return false;
        if (fits)
            hi = mid;
        else
            lo = mid + 1;
    }
    *out = hi;
    return true;
}

static bool start_chat(const struct api_ctx *ctx, const json_t *req, struct ollama_call *c,
                       json_t *messages, struct api_fail *f)
{
    json_t *tools = json_object_get(req, "tools");
    if (!ollama_tools_check(tools, f)) return false;
    const json_t *parallel = json_object_get(c->body, "parallel_tool_calls");
    struct chat_session_args a = {
        .model = c->model,
        .messages = messages,
        .tools = json_array_size(tools) > 0 ? tools : NULL,
        .params = &c->params,
        .enable_thinking = c->think >= 0 ? c->think : c->params.enable_thinking,
        .media_path = NULL, // Ollama sends images inline; no file:// reads on this route
        .structured = c->body,
        .tool_choice = json_object_get(c->body, "tool_choice"),
        .is_parallel = !json_is_false(parallel),
        .is_prefill = true, // Ollama continues a last assistant message
        .metrics = ctx->metrics,
    };
    bool is_truncate = true; // Ollama's default
    if (!v_bool(req, "truncate", "truncate", &is_truncate, f)) return false;
    int n_prompt = 0;
    if (chat_session_start(&a, &c->session, &n_prompt, f) == ERR_OK) return true;
    // Over the context: as Ollama truncates, drop the oldest messages that are neither system
    // messages nor the last, as few as make it fit.
    size_t n_drop = 0;
    if (!is_truncate || f->n_ctx == 0 || n_droppable(messages) == 0) return false;
    *f = (struct api_fail){0};
    if (!n_to_drop(&a, messages, &n_drop, f)) return false;
    if (client_watch_is_abandoned()) return api_fail_cancelled(f);
    json_t *kept = without_oldest(messages, n_drop);
    if (!kept) return api_failf(f, 500, NULL, NULL, "out of memory");
    a.messages = kept;
    bool ok = chat_session_start(&a, &c->session, &n_prompt, f) == ERR_OK;
    json_decref(kept);
    return ok;
}

void api_ollama_chat(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    struct api_fail f = {0};
    struct ollama_call *c = ollama_call_new(true);
    if (!c) {
        ollama_error(resp, 500, "out of memory");
        return;
    }
    bool is_stream = true;
    json_t *messages = NULL;
    bool ok = ollama_call_begin(ctx, req->json, c, &is_stream, &f) &&
              (messages = ollama_messages_to_chat(json_object_get(req->json, "messages"), &f));
    if (ok && json_array_size(messages) == 0) {
        // Ollama loads the model and answers done at once (done_reason "load"); here it is
        // loaded already.
        ollama_respond_empty(c, "load", resp);
        json_decref(messages);
        ollama_call_free(c);
        return;
    }
    ok = ok && start_chat(ctx, req->json, c, messages, &f);
    json_decref(messages);
    if (!ok) {
        ollama_fail_respond(&f, resp);
        ollama_call_free(c);
        return;
    }
    chat_session_add_warning(c->session, resp); // what the runtime will not apply
    ollama_call_respond(c, is_stream, resp);
}
