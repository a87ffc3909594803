/* Request-body JSON checks: a depth pre-scan, then jansson with duplicate keys rejected. */
#include "server/http.h"

#include <stdio.h>

bool http_json_depth_ok(const char *body, size_t len, int max_depth)
{
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return false;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return true;
}

int http_parse_json_body(const char *body, size_t len, json_t **out, struct errmsg *err)
{
    if (len == 0)
        return errmsg_set(err, ERR_FORMAT, "request body is empty; expected a JSON object");
    if (!http_json_depth_ok(body, len, HTTP_JSON_DEPTH))
        return errmsg_set(err, ERR_LIMIT, "JSON nesting is deeper than %d levels", HTTP_JSON_DEPTH);
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return errmsg_set(err, ERR_FORMAT,
                          "invalid JSON in request body at line %d, column %d (byte %d): %s",
                          je.line, je.column, je.position, je.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return errmsg_set(err, ERR_FORMAT, "request body must be a JSON object");
    }
    *out = j;
    return ERR_OK;
}
