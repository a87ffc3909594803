/* The CLI's HTTP client (libcurl): one request, the status and the whole body back, or the body
 * handed over as it arrives (streamed answers). */
#ifndef CLI_CLIENT_H
#define CLI_CLIENT_H

#include "util/buf.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

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

/* Receives the body as it arrives, with the response status (the headers are in by then);
 * returns false to stop the transfer. */
typedef bool (*client_data_fn)(void *ctx, int status, const char *data, size_t n);

/* client_request with the body handed to on_data as it arrives instead of collected; a
 * transfer that on_data stopped still returns ERR_OK. */
int client_stream(const struct client *c, const char *method, const char *path,
                  const char *json_body, client_data_fn on_data, void *ctx, int *status,
                  struct errmsg *err);

#endif
