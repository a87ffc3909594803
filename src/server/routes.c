/* Route matching. The table is small (tens of entries), so a linear scan is the clearest
 * structure and costs nothing next to a request. */
#include "server/routes.h"

#include "api/handlers.h"
#include "api/ollama/handlers.h"
#include "api/webui/webui.h"
#include "api/proxy/cors_proxy.h"

#include <string.h>

/* Returns 2 for an exact match, 1 for a pattern match (writing *param), 0 for none. */
static int pattern_match(const char *pattern, const char *path, struct str *param)
{
    const char *brace = strstr(pattern, "{id}");
    if (!brace) return strcmp(pattern, path) == 0 ? 2 : 0;
    size_t prefix_len = (size_t)(brace - pattern);
    if (strncmp(pattern, path, prefix_len) != 0 || path[prefix_len] == '\0') return 0;
    param->ptr = path + prefix_len;
    param->len = strlen(path + prefix_len);
    return 1;
}

static void allow_append(char *allow, size_t cap, const char *method)
{
    size_t len = strlen(allow);
    if (strstr(allow, method)) return;
    const char *sep = len ? ", " : "";
    if (len + strlen(sep) + strlen(method) + 1 > cap) return;
    strcat(allow, sep);
    strcat(allow, method);
}

enum route_match route_find(const struct route *table, size_t n_routes, const char *method,
                            const char *path, const struct route **out, struct str *param,
                            char *allow, size_t allow_cap)
{
    const struct route *best = NULL;
    int best_score = 0;
    struct str best_param = {"", 0};
    bool path_known = false;
    if (allow_cap) allow[0] = '\0';
    for (size_t i = 0; i < n_routes; i++) {
        struct str p = {"", 0};
        int score = pattern_match(table[i].pattern, path, &p);
        if (!score) continue;
        path_known = true;
        if (strcmp(table[i].method, method) != 0) {
            if (allow_cap) allow_append(allow, allow_cap, table[i].method);
            continue;
        }
        if (score > best_score) {
            best = &table[i];
            best_score = score;
            best_param = p;
        }
    }
    if (best) {
        *out = best;
        *param = best_param;
        return ROUTE_MATCH_OK;
    }
    return path_known ? ROUTE_MATCH_BAD_METHOD : ROUTE_MATCH_NO_PATH;
}

/* The family of the routes whose pattern starts with dir (dir_len bytes, ending in '/'):
 * NONE when no route does, OPENAI when they disagree. */
static enum api_family family_under(const struct route *table, size_t n_routes, const char *dir,
                                    size_t dir_len)
{
    enum api_family family = API_FAMILY_NONE;
    for (size_t i = 0; i < n_routes; i++) {
        if (strncmp(table[i].pattern, dir, dir_len) != 0) continue;
        if (family != API_FAMILY_NONE && family != table[i].family) return API_FAMILY_OPENAI;
        family = table[i].family;
    }
    return family;
}

enum api_family route_family(const struct route *table, size_t n_routes, const char *path)
{
    struct str param;
    for (size_t i = 0; i < n_routes; i++)
        if (pattern_match(table[i].pattern, path, &param)) return table[i].family;
    // Directories from the longest down; "/" (every route) and none say nothing.
    size_t len = strlen(path);
    while (len > 1) {
        while (len > 1 && path[len - 1] != '/')
            len--;
        if (len <= 1) break;
        enum api_family family = family_under(table, n_routes, path, len);
        if (family != API_FAMILY_NONE) return family;
        len--;
    }
    return API_FAMILY_OPENAI;
}

static const struct route table[] = {
    {"GET", "/health", api_health, ROUTE_BODY_NONE, true, API_FAMILY_OPENAI},
    {"GET", "/v1/health", api_health, ROUTE_BODY_NONE, true, API_FAMILY_OPENAI},
    {"GET", "/v1/platforms", api_platforms_list, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"GET", "/v1/models", api_models_list, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"GET", "/v1/models/{id}", api_models_get, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"POST", "/v1/models/load", api_models_load, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/models/resize", api_models_resize, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/models/unload", api_models_unload, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/chat/completions", api_chat_completions, ROUTE_BODY_JSON, false,
     API_FAMILY_OPENAI},
    {"POST", "/chat/completions", api_chat_completions, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/completions", api_completions, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/completion", api_native_completion, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/completions", api_native_completion, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/infill", api_native_infill, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/tokenize", api_native_tokenize, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/detokenize", api_native_detokenize, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/apply-template", api_native_apply_template, ROUTE_BODY_JSON, false,
     API_FAMILY_OPENAI},
    {"GET", "/props", api_native_props, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"GET", "/slots", api_native_slots, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"POST", "/slots/{id}", api_native_slot_action, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"GET", "/metrics", api_native_metrics, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"GET", "/models", api_router_models, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"POST", "/models/load", api_router_load, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/models/unload", api_router_unload, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/chat/completions/input_tokens", api_chat_input_tokens, ROUTE_BODY_JSON, false,
     API_FAMILY_OPENAI},
    {"POST", "/chat/completions/input_tokens", api_chat_input_tokens, ROUTE_BODY_JSON, false,
     API_FAMILY_OPENAI},
    {"POST", "/v1/messages", api_anthropic_messages, ROUTE_BODY_JSON, false, API_FAMILY_ANTHROPIC},
    {"POST", "/v1/messages/count_tokens", api_anthropic_count_tokens, ROUTE_BODY_JSON, false,
     API_FAMILY_ANTHROPIC},
    {"POST", "/v1/responses", api_responses_create, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/responses", api_responses_create, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/responses/input_tokens", api_responses_input_tokens, ROUTE_BODY_JSON, false,
     API_FAMILY_OPENAI},
    {"POST", "/responses/input_tokens", api_responses_input_tokens, ROUTE_BODY_JSON, false,
     API_FAMILY_OPENAI},
    {"POST", "/v1/embeddings", api_embeddings, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/embedding", api_native_embeddings, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/embeddings", api_native_embeddings, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/rerank", api_rerank, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/reranking", api_rerank, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/rerank", api_rerank, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/reranking", api_rerank, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    // Ollama's API (api/ollama/)
    {"GET", "/api/version", api_ollama_version, ROUTE_BODY_NONE, false, API_FAMILY_OLLAMA},
    {"GET", "/api/tags", api_ollama_tags, ROUTE_BODY_NONE, false, API_FAMILY_OLLAMA},
    {"GET", "/api/ps", api_ollama_ps, ROUTE_BODY_NONE, false, API_FAMILY_OLLAMA},
    {"POST", "/api/show", api_ollama_show, ROUTE_BODY_JSON, false, API_FAMILY_OLLAMA},
    {"POST", "/api/chat", api_ollama_chat, ROUTE_BODY_JSON, false, API_FAMILY_OLLAMA},
    {"POST", "/api/generate", api_ollama_generate, ROUTE_BODY_JSON, false, API_FAMILY_OLLAMA},
    {"POST", "/api/embed", api_ollama_embed, ROUTE_BODY_JSON, false, API_FAMILY_OLLAMA},
    {"POST", "/api/embeddings", api_ollama_embeddings, ROUTE_BODY_JSON, false, API_FAMILY_OLLAMA},
    {"POST", "/api/pull", api_ollama_pull, ROUTE_BODY_JSON, false, API_FAMILY_OLLAMA},
    {"GET", "/", api_webui, ROUTE_BODY_NONE, true,
     API_FAMILY_OPENAI}, // the chat page: a browser comes keyless
    {"GET", "/webui/{id}", api_webui, ROUTE_BODY_NONE, true, API_FAMILY_OPENAI},
    {"GET", "/cors-proxy", api_cors_proxy, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"POST", "/cors-proxy", api_cors_proxy, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
};

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool is_control(unsigned v)
{
    return v < 0x20 || v == 0x7F;
}

bool route_path_has_control(const char *uri)
{
    for (const char *p = uri; *p && *p != '?'; p++) {
        if (is_control((unsigned char)*p)) return true;
        if (*p != '%') continue;
        int hi = hex_value(p[1]), lo = hi >= 0 ? hex_value(p[2]) : -1;
        if (lo >= 0 && is_control((unsigned)(hi * 16 + lo))) return true;
    }
    return false;
}

const char *route_private_query(const struct route *r)
{
    return r->handler == api_health ? "model" : NULL;
}

const struct route *routes_table(size_t *n_routes)
{
    *n_routes = sizeof table / sizeof table[0];
    return table;
}
