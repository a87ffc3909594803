/* platforms, ps, load, unload, resize: one request each, printed as a table or raw JSON. */
#define _XOPEN_SOURCE 700 // realpath()
#include "cli/commands.h"

#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sends the request; on success leaves the parsed body in *out (NULL for non-JSON). Prints
 * errors itself. Returns the exit status. */
static int call(const struct cli_opts *o, const char *method, const char *path, const json_t *body,
                json_t **out)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct buf resp;
    buf_init(&resp);
    struct errmsg err;
    errmsg_clear(&err);
    int status = 0;
    int rc = client_request(&o->client, method, path, text, &status, &resp, &err);
    free(text);
    if (rc != ERR_OK) {
        fprintf(stderr, "llamapi: %s\n", err.msg[0] ? err.msg : err_str(rc));
        buf_deinit(&resp);
        return 1;
    }
    json_t *j = resp.data ? json_loads(resp.data, 0, NULL) : NULL;
    int exit_status = status >= 200 && status < 300 ? 0 : 1;
    if (o->is_json || !j) {
        printf("%s\n", resp.data ? resp.data : "");
    } else if (exit_status != 0) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        fprintf(stderr, "llamapi: server answered %d: %s\n", status, msg ? msg : resp.data);
    }
    buf_deinit(&resp);
    if (exit_status == 0 && out && !o->is_json)
        *out = j;
    else
        json_decref(j);
    return exit_status;
}

int cli_cmd_platforms(const struct cli_opts *o, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    json_t *j = NULL;
    int rc = call(o, "GET", "/v1/platforms", NULL, &j);
    if (!j) return rc;
    printf("%-10s %-28s %-9s %s\n", "ID", "NAME", "AVAILABLE", "CHIPS");
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(j, "platforms"), i, p)
    {
        char chips[512] = "";
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(p, "detected_chips"), k, c)
        {
            size_t len = strlen(chips);
            snprintf(chips + len, sizeof chips - len, "%s%s ×%lld", len ? ", " : "",
                     json_string_value(json_object_get(c, "chip_type")),
                     (long long)json_integer_value(json_object_get(c, "count")));
        }
        printf("%-10s %-28s %-9s %s\n", json_string_value(json_object_get(p, "id")),
               json_string_value(json_object_get(p, "display_name")),
               json_is_true(json_object_get(p, "available")) ? "yes" : "no", chips);
        const char *reason = json_string_value(json_object_get(p, "reason"));
        if (reason) printf("%-10s %s\n", "", reason); // why a vendor runtime is unavailable
    }
    json_decref(j);
    return 0;
}

int cli_cmd_ps(const struct cli_opts *o, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    json_t *j = NULL;
    int rc = call(o, "GET", "/v1/models", NULL, &j);
    if (!j) return rc;
    printf("%-24s %-10s %-9s %-10s %-8s %s\n", "ID", "KIND", "PLATFORM", "INSTANCES", "STATUS",
           "PATH");
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(j, "data"), i, m)
    {
        const char *status = json_string_value(json_object_get(m, "status"));
        printf("%-24s %-10s %-9s %-10lld %-8s %s\n", json_string_value(json_object_get(m, "id")),
               json_string_value(json_object_get(m, "model_kind")),
               json_string_value(json_object_get(m, "platform")),
               (long long)json_integer_value(json_object_get(m, "instance_count")),
               status ? status : "-", json_string_value(json_object_get(m, "model_path")));
    }
    json_decref(j);
    return 0;
}

static int parse_count(const char *flag, const char *v, long *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (end == v || *end) {
        fprintf(stderr, "llamapi: %s expects a number, got '%s'\n", flag, v);
        return 2;
    }
    *out = n;
    return 0;
}

void cli_model_path_arg(const char *arg, char *out, size_t cap)
{
    char resolved[PATH_MAX];
    if (realpath(arg, resolved))
        snprintf(out, cap, "%s", resolved);
    else
        snprintf(out, cap, "%s", arg);
}

void cli_default_id(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    snprintf(out, cap, "%s", base);
    size_t n = strlen(out);
    if (n > 5 && strcmp(out + n - 5, ".gguf") == 0) out[n - 5] = '\0';
}

static const char load_usage[] = "usage: llamapi load PATH|NAME [--id ID] [--instances N] "
                                 "[--queue-size N] [--embedding] [--pooling mean|cls|last]\n";

int cli_cmd_load(const struct cli_opts *o, int argc, char **argv)
{
    const char *model = NULL, *id = NULL, *pooling = NULL;
    long instances = 1, queue = -1;
    bool embedding = false;
    for (int i = 0; i < argc; i++) {
        int bad = 0;
        if ((strcmp(argv[i], "--id") == 0 || strcmp(argv[i], "-a") == 0) && i + 1 < argc)
            id = argv[++i];
        else if ((strcmp(argv[i], "--instances") == 0 || strcmp(argv[i], "-n") == 0) &&
                 i + 1 < argc)
            bad = parse_count(argv[i], argv[i + 1], &instances), i++;
        else if (strcmp(argv[i], "--queue-size") == 0 && i + 1 < argc)
            bad = parse_count(argv[i], argv[i + 1], &queue), i++;
        else if (strcmp(argv[i], "--embedding") == 0)
            embedding = true;
        else if (strcmp(argv[i], "--pooling") == 0 && i + 1 < argc)
            pooling = argv[++i]; // the server checks the name
        else if (argv[i][0] != '-' && !model)
            model = argv[i];
        else
            bad = 2;
        if (bad) {
            fputs(load_usage, stderr);
            return 2;
        }
    }
    if (!model) {
        fputs(load_usage, stderr);
        return 2;
    }
    char path[PATH_MAX], default_id[256];
    cli_model_path_arg(model, path, sizeof path);
    cli_default_id(model, default_id, sizeof default_id);
    json_t *body = json_pack("{s:s, s:s, s:I}", "model_id", id ? id : default_id, "model_path",
                             path, "instance_count", (json_int_t)instances);
    if (queue >= 0) json_object_set_new(body, "request_queue_size", json_integer(queue));
    if (embedding) json_object_set_new(body, "embedding", json_true());
    if (pooling) json_object_set_new(body, "pooling", json_string(pooling));
    int rc = cli_post_load(o, body, stdout);
    json_decref(body);
    return rc;
}

int cli_post_load(const struct cli_opts *o, const json_t *body, FILE *say)
{
    json_t *j = NULL;
    int rc = call(o, "POST", "/v1/models/load", body, &j);
    if (j) fprintf(say, "%s\n", json_string_value(json_object_get(j, "message")));
    json_decref(j);
    return rc;
}

int cli_model_status(const struct cli_opts *o, const char *id)
{
    char *escaped = curl_easy_escape(NULL, id, 0);
    if (!escaped) return -1;
    char path[1024];
    snprintf(path, sizeof path, "/v1/models/%s", escaped);
    curl_free(escaped);
    struct buf resp;
    buf_init(&resp);
    struct errmsg err;
    errmsg_clear(&err);
    int status = 0;
    int rc = client_request(&o->client, "GET", path, NULL, &status, &resp, &err);
    buf_deinit(&resp);
    if (rc == ERR_OK) return status;
    fprintf(stderr, "llamapi: %s\n", err.msg[0] ? err.msg : err_str(rc));
    return -1;
}

int cli_cmd_unload(const struct cli_opts *o, int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "usage: llamapi unload ID\n");
        return 2;
    }
    json_t *body = json_pack("{s:s}", "model_id", argv[0]);
    json_t *j = NULL;
    int rc = call(o, "POST", "/v1/models/unload", body, &j);
    json_decref(body);
    if (j) printf("%s\n", json_string_value(json_object_get(j, "message")));
    json_decref(j);
    return rc;
}

int cli_cmd_resize(const struct cli_opts *o, int argc, char **argv)
{
    long n;
    if (argc != 2 || parse_count("INSTANCES", argv[1], &n) != 0) {
        fprintf(stderr, "usage: llamapi resize ID INSTANCES\n");
        return 2;
    }
    json_t *body = json_pack("{s:s, s:I}", "model_id", argv[0], "instance_count", (json_int_t)n);
    json_t *j = NULL;
    int rc = call(o, "POST", "/v1/models/resize", body, &j);
    json_decref(body);
    if (j) printf("%s\n", json_string_value(json_object_get(j, "message")));
    json_decref(j);
    return rc;
}
