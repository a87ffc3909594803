/* The CLI's HTTP client (libcurl): one request, the status and the whole body back. */
#ifndef CLI_CLIENT_H
#define CLI_CLIENT_H

#include "util/buf.h"
#include "util/err.h"

struct client {
    char base_url[512]; // "http://127.0.0.1:9265", no trailing slash
    char api_key[512];  // empty when none
};

/* Fills the base URL from host/port (either may be NULL: LLAMAPI_HOST, LLAMAPI_PORT, then the
 * defaults). host may be "h", "h:p" or a full "http://h:p" URL. Cannot fail. */
void client_init(struct client *c, const char *host, const char *port, const char *api_key);

/* Sends method path (e.g. "/v1/models") with an optional JSON body. ERR_OK with *status and
 * the body appended to out; ERR_IO when the server cannot be reached (err gives a one-line
 * hint); ERR_NOMEM. */
int client_request(const struct client *c, const char *method, const char *path,
                   const char *json_body, int *status, struct buf *out, struct errmsg *err);

#endif
