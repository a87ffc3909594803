/* GET /health: the HTTP server is up. Plain text so load balancers and curl read it as is. */
#include "api/handlers.h"

void api_health(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp)
{
    (void)ctx;
    (void)req;
    api_respond_text(resp, 200, "text/plain; charset=utf-8", "ok");
}
