/* The chat page's static files (see webui.h). Not a general file server: only the names the
 * build embedded exist, so no path from a request ever reaches the filesystem. */
#include "api/webui/webui.h"

#include "api/errors.h"
#include "api/webui/webui_assets.h"

#include <string.h>

_Static_assert(sizeof WEBUI_CSP <= sizeof(((struct api_response *)0)->headers[0].value),
               "the policy must fit a response header value");

/* The embedded file named name (name_len bytes, not NUL-terminated), or NULL. */
static const struct webui_asset *asset_find(const char *name, size_t name_len)
{
    size_t n;
    const struct webui_asset *a = webui_assets(&n);
    for (size_t i = 0; i < n; i++)
        if (strlen(a[i].name) == name_len && memcmp(a[i].name, name, name_len) == 0) return &a[i];
    return NULL;
}

static void not_found(const struct api_request *req, struct api_response *resp)
{
    // The same answer as a path no route knows (server/http.c), so --no-webui leaves / as
    // it was before the page existed.
    api_error(resp, 404, API_TYPE_INVALID_REQUEST, "not_found", NULL, "Invalid URL (%s %.400s)",
              req->method, req->path);
}

void api_webui(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp)
{
    const bool is_root = strcmp(req->path, "/") == 0;
    const struct webui_asset *a = is_root ? asset_find("index.html", strlen("index.html"))
                                          : asset_find(req->path_param.ptr, req->path_param.len);
    if (ctx->is_webui_disabled || !a) {
        not_found(req, resp);
        return;
    }
    buf_clear(&resp->body);
    if (buf_append(&resp->body, a->data, a->len) != 0) {
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    resp->status = 200;
    resp->content_type = a->content_type;
    api_response_add_header(resp, "Content-Security-Policy", WEBUI_CSP);
    api_response_add_header(resp, "X-Content-Type-Options", "nosniff");
    api_response_add_header(resp, "Referrer-Policy", "no-referrer");
    // Small files: always revalidated, so a rebuilt server never runs yesterday's script.
    api_response_add_header(resp, "Cache-Control", "no-cache");
}
