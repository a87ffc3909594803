/* Route table matching by method and path. Pure logic (no I/O) so it is unit-tested alone.
 * A pattern is an exact path or a prefix ending in "{id}", which matches the non-empty rest of
 * the path (slashes included, since model ids such as "org/name" contain them). */
#ifndef SERVER_ROUTES_H
#define SERVER_ROUTES_H

#include "api/api.h"

#include <stdbool.h>
#include <stddef.h>

enum route_body {
    ROUTE_BODY_NONE = 0, // body ignored
    ROUTE_BODY_JSON = 1, // body must be a JSON object; parsed before the handler runs
};

struct route {
    const char *method;     // "GET", "POST", "DELETE"
    const char *pattern;    // "/v1/models" or "/v1/models/{id}"
    api_handler_fn handler; // never NULL
    enum route_body body;
    bool is_public;         // reachable without an API key (/health, the chat page)
    enum api_family family; // whose API the route serves: the shape of its errors
};

enum route_match {
    ROUTE_MATCH_OK = 0,         // *out is the route
    ROUTE_MATCH_NO_PATH = 1,    // no pattern matches the path
    ROUTE_MATCH_BAD_METHOD = 2, // the path exists for other methods (listed in allow)
};

/* Finds the route for method+path. Exact patterns win over "{id}" patterns. On
 * ROUTE_MATCH_OK writes *out and *param (the {id} part, empty for exact routes, borrowed from
 * path). On ROUTE_MATCH_BAD_METHOD writes a comma-separated method list to allow (always
 * NUL-terminated, truncated to allow_cap). Cannot fail otherwise. */
enum route_match route_find(const struct route *table, size_t n_routes, const char *method,
                            const char *path, const struct route **out, struct str *param,
                            char *allow, size_t allow_cap);

/* The API family of path: that of the routes matching it (any method), else that of the routes
 * under its longest directory holding any ("/api/" for "/api/nothing", "/v1/messages/" for
 * "/v1/messages/x") when they agree, else API_FAMILY_OPENAI. So an unknown path errs in the
 * shape its neighbours use, with no list of prefixes beside the table. Cannot fail. */
enum api_family route_family(const struct route *table, size_t n_routes, const char *path);

/* True when the raw request target's path (before any '?') holds a control byte (0x00-0x1F,
 * 0x7F), written raw or %-encoded. Such a path is refused with 400: libmicrohttpd decodes the
 * path into a C string, so "/metrics%00.css" would otherwise be routed as "/metrics", past a
 * proxy's rules for "*.css". Cannot fail. */
bool route_path_has_control(const char *uri);

/* The query parameter that makes a public route need the key after all, or NULL: health's
 * "model" (which ids are loaded is not public; plain /health is). Static. */
const char *route_private_query(const struct route *r);

/* The server's route table (static storage). */
const struct route *routes_table(size_t *n_routes);

#endif
