/* Response helpers shared by every handler. */
#include "api/api.h"

#include "text/json_text.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

static void respond_oom(struct api_response *resp)
{
    static const char msg[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                              "\"server_error\",\"param\":null,\"code\":null}}";
    buf_clear(&resp->body);
    resp->status = 500;
    resp->content_type = "application/json";
    if (buf_append(&resp->body, msg, sizeof msg - 1) != 0) resp->content_type = "text/plain";
}

void api_respond_json(struct api_response *resp, int status, json_t *j)
{
    char *text = j ? json_text_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text) {
        respond_oom(resp);
        return;
    }
    buf_clear(&resp->body);
    resp->status = status;
    resp->content_type = "application/json";
    int rc = buf_append_cstr(&resp->body, text);
    free(text); // jansson's allocator is libc malloc
    if (rc != 0) respond_oom(resp);
}

void api_respond_text(struct api_response *resp, int status, const char *content_type,
                      const char *text)
{
    buf_clear(&resp->body);
    resp->status = status;
    resp->content_type = content_type;
    if (buf_append_cstr(&resp->body, text) != 0) respond_oom(resp);
}

void api_response_add_header(struct api_response *resp, const char *name, const char *value)
{
    if (resp->n_headers >= API_MAX_HEADERS) return;
    resp->headers[resp->n_headers].name = name;
    snprintf(resp->headers[resp->n_headers].value, sizeof resp->headers[0].value, "%s", value);
    resp->n_headers++;
}
