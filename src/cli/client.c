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

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    struct buf *out = userdata;
    return buf_append(out, data, size * n) == ERR_OK ? size * n : 0;
}

int client_request(const struct client *c, const char *method, const char *path,
                   const char *json_body, int *status, struct buf *out, struct errmsg *err)
{
    CURL *curl = curl_easy_init();
    if (!curl) return ERR_NOMEM;
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
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
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
    if (cc != CURLE_OK)
        return errmsg_set(err, ERR_IO, "request to %s failed: %s", url, curl_easy_strerror(cc));
    *status = (int)code;
    return ERR_OK;
}
