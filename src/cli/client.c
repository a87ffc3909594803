/* libcurl wrapper for the CLI. */
#include "cli/client.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void client_init(struct client *c, const char *host, const char *port, const char *api_key)
{
    if (!host) host = getenv("LLAMAPI_HOST");
    if (!port) port = getenv("LLAMAPI_PORT");
    if (!api_key) api_key = getenv("LLAMAPI_API_KEY");
    if (!host || !*host) host = "127.0.0.1";
    const char *scheme = strstr(host, "://") ? "" : "http://";
    bool has_port = strchr(strstr(host, "://") ? strstr(host, "://") + 3 : host, ':') != NULL;
    if (has_port || (port == NULL && strstr(host, "://")))
        snprintf(c->base_url, sizeof c->base_url, "%s%s", scheme, host);
    else
        snprintf(c->base_url, sizeof c->base_url, "%s%s:%s", scheme, host,
                 port && *port ? port : "9265");
    size_t n = strlen(c->base_url);
    if (n && c->base_url[n - 1] == '/') c->base_url[n - 1] = '\0';
    snprintf(c->api_key, sizeof c->api_key, "%s", api_key ? api_key : "");
}

/* Where a transfer's body goes: collected in a buffer, or handed to a callback. */
struct sink {
    CURL *curl;
    struct buf *out;
    client_data_fn on_data;
    void *ctx;
    bool is_stopped; // on_data asked to stop
};

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    struct sink *s = userdata;
    if (s->out) return buf_append(s->out, data, size * n) == ERR_OK ? size * n : 0;
    long code = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
    if (s->on_data(s->ctx, (int)code, data, size * n)) return size * n;
    s->is_stopped = true;
    return 0;
}

static int perform(const struct client *c, const char *method, const char *path,
                   const char *json_body, struct sink *sink, int *status, struct errmsg *err)
{
    CURL *curl = curl_easy_init();
    if (!curl) return ERR_NOMEM;
    sink->curl = curl;
    char url[1024], auth[600];
    snprintf(url, sizeof url, "%s%s", c->base_url, path);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (c->api_key[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->api_key);
        headers = curl_slist_append(headers, auth);
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 5L);
    if (json_body) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json_body);
    CURLcode cc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
        return errmsg_set(err, ERR_IO,
                          "no server at %s (start one with `llamapi serve`, or set --host/"
                          "LLAMAPI_HOST)",
                          c->base_url);
    if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && sink->is_stopped))
        return errmsg_set(err, ERR_IO, "request to %s failed: %s", url, curl_easy_strerror(cc));
    *status = (int)code;
    return ERR_OK;
}

int client_request(const struct client *c, const char *method, const char *path,
                   const char *json_body, int *status, struct buf *out, struct errmsg *err)
{
    struct sink sink = {.out = out};
    return perform(c, method, path, json_body, &sink, status, err);
}

int client_stream(const struct client *c, const char *method, const char *path,
                  const char *json_body, client_data_fn on_data, void *ctx, int *status,
                  struct errmsg *err)
{
    struct sink sink = {.on_data = on_data, .ctx = ctx};
    return perform(c, method, path, json_body, &sink, status, err);
}
