/* GET / and GET /webui/{file}: the chat page compiled into the binary (web/, embedded at build
 * time by tools/embed-web.sh). Static files only, with a strict Content-Security-Policy: the
 * page talks to this server alone. Public routes (a browser loads the page before it knows an
 * API key; the page asks for the key and sends it on every API call). */
#ifndef API_WEBUI_WEBUI_H
#define API_WEBUI_WEBUI_H

#include "api/api.h"

/* The Content-Security-Policy every page file is served with. */
#define WEBUI_CSP                                                                                  \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "                \
    "img-src 'self' blob: data:; media-src 'self' blob: data:; base-uri 'none'; "                  \
    "form-action 'none'; frame-ancestors 'none'"

/* Serves index.html for "/" and the named file for "/webui/{file}"; 404 not_found (as for any
 * unknown path) for a file that is not embedded and for every path when ctx->is_webui_disabled
 * (--no-webui). Thread-safe (reads static data only); an allocation failure gives a 500. */
void api_webui(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp);

#endif
