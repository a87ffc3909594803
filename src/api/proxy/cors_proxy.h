/* GET/POST /cors-proxy?url=…: llama-server's proxy for browser clients that cannot reach a
 * server across origins (its web UI's MCP client), served only with --ui-mcp-proxy (403
 * feature_disabled otherwise, as llama-server answers). Plain-HTTP targets (http:// URLs)
 * only: an https:// target is 501 (this server has no TLS client), any other scheme, and a
 * URL with credentials, 400. Only the request headers the client names explicitly
 * (`x-llama-server-proxy-header-NAME: value`) are forwarded, never its own Authorization,
 * cookies or API keys. Redirects are answered as they come, not followed. The target's
 * answer is relayed whole (status, Content-Type, body) once it has arrived. */
#ifndef API_PROXY_CORS_PROXY_H
#define API_PROXY_CORS_PROXY_H

#include "api/api.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

/* A parsed target URL; host and path borrow nothing (copied), path_len bytes of path. */
struct cors_proxy_target {
    bool is_https;
    char host[256];  // without IPv6 brackets
    char port[8];    // decimal, "80"/"443" when the URL has none
    char path[4096]; // origin-form request target: "/" when the URL has no path; query kept
};

/* Parses an http(s) URL into t. ERR_INVALID with err naming the problem: another scheme, no
 * host, credentials (user@), a bad port, a host or path with spaces or control bytes, a
 * path over 4095 bytes. Cannot fail otherwise; t is written only on success. */
int cors_proxy_parse_url(const char *url, struct cors_proxy_target *t, struct errmsg *err);

/* The route handler (GET and POST). Blocks the calling worker until the target answers, at
 * most 10 s to connect and 60 s per read or write. */
void api_cors_proxy(const struct api_ctx *ctx, const struct api_request *req,
                    struct api_response *resp);

#endif
