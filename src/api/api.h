/* The contract between the HTTP layer (server/) and the endpoint handlers (api/): a parsed
 * request in, a response out. Handlers never see libmicrohttpd; the server never sees JSON
 * semantics beyond parsing the body. */
#ifndef API_API_H
#define API_API_H

#include "util/buf.h"
#include "util/str.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct manager;
struct media_path;
struct response_store;
struct hub_opts;
struct gen_params;
struct metrics;

/* What every handler may read. Immutable after start-up except through the objects' own
 * locks (the registry is guarded by its mutex). */
struct api_ctx {
    struct manager *manager;               // models; borrowed, own locks
    const struct hub_opts *hub;            // the hub and models folder (-hf, hf:// paths,
                                           // Ollama pulls); NULL: no hub; immutable
    int64_t started_unix_s;                // server start time
    const struct media_path *media_path;   // where file:// parts may be read; immutable
    const atomic_bool *is_starting;        // true while the -m models load (NULL: never)
    const struct gen_params *gen_defaults; // server sampling defaults (flags); NULL: built-in
    struct metrics *metrics;               // server counters (atomics); NULL: not counted
    const char *version;                   // build version (static) or NULL
    bool is_metrics_enabled;               // --metrics: GET /metrics answers
    bool is_slots_disabled;                // --no-slots: GET /slots is 501
    int load_instances;                    // instances for POST /models/load (-np; 0: 1)
    int load_n_ctx;                        // context for POST /models/load (-c; 0: model's)
    const char *models_dir;                // --models-dir (borrowed, immutable) or NULL
    bool is_autoload_disabled;             // --no-models-autoload, or -m given (not router mode)
    struct response_store *responses;      // Responses-API memory (own mutex) or NULL: none kept
    const char *model_aliases;             // --alias: comma-separated names of the first -m model
    const char *model_tags;                // --tags: comma-separated tags of that model
    bool is_single_model;       // started with one -m and no router: any name serves that model
    bool is_verbose;            // --verbose: chat answers carry __verbose
    const char *slot_save_path; // --slot-save-path directory (borrowed) or NULL: slot actions off
    bool is_webui_disabled;     // --no-webui: GET / and /webui/* are 404
    bool is_cors_proxy_enabled; // --ui-mcp-proxy: /cors-proxy relays (else 403)
};

/* Returns the value of a request header (case-insensitive name) or NULL. */
typedef const char *(*api_header_fn)(void *conn, const char *name);
/* Returns the value of a query-string argument or NULL. */
typedef const char *(*api_query_fn)(void *conn, const char *name);
/* Called once per request header with its name and value (borrowed for the call). */
typedef void (*api_header_visit_fn)(void *arg, const char *name, const char *value);
/* Calls visit for every request header, in order of arrival. */
typedef void (*api_headers_fn)(void *conn, api_header_visit_fn visit, void *arg);

struct api_request {
    const char *method;     // "GET", "POST", …
    const char *path;       // URL path without the query string
    struct str path_param;  // the {id} part of a pattern route; empty otherwise
    const char *body;       // raw body bytes (NUL-terminated); empty string when none
    size_t body_len;        // bytes
    json_t *json;           // parsed body for JSON routes (borrowed; NULL otherwise)
    api_header_fn header;   // header lookup
    api_query_fn query;     // query-string lookup
    api_headers_fn headers; // every header (NULL where the caller has none to list)
    void *conn;             // opaque argument for header/query
};

#define API_MAX_HEADERS 4

/* A streaming body: read() fills up to max bytes and returns the count, 0 when it has nothing
 * yet (it may block until it has), or -1 at the end of the stream. free() runs once when the
 * connection is done with it, also after a client disconnect. */
struct api_stream {
    long (*read)(void *cls, char *out, size_t max);
    void (*free)(void *cls);
    void *cls;
};

struct api_response {
    int status;               // HTTP status
    const char *content_type; // static string
    struct buf body;          // the whole body unless stream.read is set
    struct api_stream stream; // set by streaming handlers
    int n_headers;
    struct {
        const char *name; // static string
        char value[256];  // a Content-Security-Policy needs more than 128
    } headers[API_MAX_HEADERS];
};

/* The API a route belongs to, which decides the shape of its errors, also those the server
 * raises before the handler runs (404, 405, 401, 413, 503). llama.cpp's native routes and
 * llamapi's own answer in OpenAI's shape. */
enum api_family {
    API_FAMILY_NONE = 0,  // unset; a table row without a family (answers as OpenAI)
    API_FAMILY_OPENAI,    // {"error":{"message","type","param","code"}}
    API_FAMILY_ANTHROPIC, // {"type":"error","error":{"type","message"}}
    API_FAMILY_OLLAMA,    // {"error":"message"}
};

typedef void (*api_handler_fn)(const struct api_ctx *ctx, const struct api_request *req,
                               struct api_response *resp);

/* Sets a JSON body (takes ownership of j and frees it) with the given status. On allocation
 * failure the response becomes a plain 500. */
void api_respond_json(struct api_response *resp, int status, json_t *j);

/* Sets a text body with the given content type (static string). */
void api_respond_text(struct api_response *resp, int status, const char *content_type,
                      const char *text);

/* Adds a response header (name static; value copied, truncated to 255 bytes). Ignored when
 * API_MAX_HEADERS are already set. */
void api_response_add_header(struct api_response *resp, const char *name, const char *value);

#endif
