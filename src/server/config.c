/* Flag and environment parsing, driven by one option table so every flag has exactly one
 * definition of its name, environment variable, value type, range and help text. */
#include "server/config.h"

#include "util/mem.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt_kind {
    OPT_STRING,  // into a fixed char array
    OPT_INT,     // bounded integer
    OPT_FLAG,    // sets a bool
    OPT_API_KEY, // appends a key
    OPT_KEY_FILE,
    OPT_MODEL,   // appends a model path
    OPT_LOG_FORMAT,
    OPT_VERBOSE,
    OPT_HELP,
    OPT_VERSION,
};

struct opt {
    const char *name;  // long flag
    const char *alias; // short flag or NULL
    const char *env;   // environment variable or NULL
    enum opt_kind kind;
    size_t offset;     // field in struct server_config
    size_t size;       // bytes, for OPT_STRING
    long min, max;     // for OPT_INT
    const char *help;
};

#define FIELD(f) offsetof(struct server_config, f), sizeof(((struct server_config *)0)->f)

static const struct opt options[] = {
    {"--host", NULL, "LLAMAPI_HOST", OPT_STRING, FIELD(host), 0, 0, "address to bind"},
    {"--port", NULL, "LLAMAPI_PORT", OPT_INT, FIELD(port), 0, 65535, "TCP port (0 = any free port)"},
    {"--api-key", NULL, "LLAMAPI_API_KEY", OPT_API_KEY, 0, 0, 0, 0,
     "require this key (repeatable)"},
    {"--api-key-file", NULL, "LLAMAPI_API_KEY_FILE", OPT_KEY_FILE, 0, 0, 0, 0,
     "read keys from a file, one per line"},
    {"--threads", "-t", "LLAMAPI_THREADS", OPT_INT, FIELD(n_threads), 0, 1024,
     "engine threads (0 = physical cores)"},
    {"--max-connections", NULL, "LLAMAPI_MAX_CONNECTIONS", OPT_INT, FIELD(max_connections), 1,
     65536, "concurrent connections"},
    {"--timeout", "-to", "LLAMAPI_TIMEOUT", OPT_INT, FIELD(timeout_s), 1, 86400,
     "idle connection timeout in seconds"},
    {"--models-dir", NULL, "LLAMAPI_MODELS_DIR", OPT_STRING, FIELD(models_dir), 0, 0,
     "where model names are resolved"},
    {"--request-queue-size", NULL, "LLAMAPI_REQUEST_QUEUE_SIZE", OPT_INT,
     FIELD(request_queue_size), 0, 1000000, "default queue capacity per model"},
    {"--model", "-m", "LLAMAPI_MODEL", OPT_MODEL, 0, 0, 0, 0, "load a GGUF at start-up"},
    {"--alias", "-a", "LLAMAPI_ALIAS", OPT_STRING, FIELD(alias), 0, 0,
     "model id of the first --model (default: its file name)"},
    {"--parallel", "-np", "LLAMAPI_PARALLEL", OPT_INT, FIELD(n_parallel), 1, 64,
     "instances of each --model"},
    {"--ctx-size", "-c", "LLAMAPI_CTX_SIZE", OPT_INT, FIELD(n_ctx), 0, 1 << 20,
     "context per instance (0 = the model's, capped at 4096)"},
    {"--memory-limit", NULL, "LLAMAPI_MEMORY_LIMIT", OPT_INT, FIELD(memory_limit_mib), 0,
     1 << 24, "MiB for instance KV caches (0 = 75% of available memory)"},
    {"--media-path", NULL, "LLAMAPI_MEDIA_PATH", OPT_STRING, FIELD(media_path), 0, 0,
     "directory file:// image parts may read from (default: none)"},
    {"--log-format", NULL, "LLAMAPI_LOG_FORMAT", OPT_LOG_FORMAT, 0, 0, 0, 0,
     "access log format: text or json"},
    {"--log-disable", NULL, "LLAMAPI_LOG_DISABLE", OPT_FLAG, FIELD(log_disable), 0, 0,
     "no logging"},
    {"--verbose", "-v", "LLAMAPI_VERBOSE", OPT_VERBOSE, 0, 0, 0, 0, "debug logging"},
    {"--help", "-h", NULL, OPT_HELP, 0, 0, 0, 0, "show this help"},
    {"--version", NULL, NULL, OPT_VERSION, 0, 0, 0, 0, "show the version"},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

static void default_models_dir(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    if (geteuid() == 0)
        snprintf(out, cap, "/var/lib/llamapi/models");
    else if (xdg && *xdg)
        snprintf(out, cap, "%s/llamapi/models", xdg);
    else if (home && *home)
        snprintf(out, cap, "%s/.local/share/llamapi/models", home);
    else
        snprintf(out, cap, "/var/lib/llamapi/models");
}

void config_defaults(struct server_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 9265;
    c->max_connections = 256;
    c->max_connections_per_ip = 32;
    c->timeout_s = 60;
    c->request_queue_size = 32;
    c->n_parallel = 1;
    default_models_dir(c->models_dir, sizeof c->models_dir);
}

void config_deinit(struct server_config *c)
{
    for (int i = 0; i < c->n_api_keys; i++)
        mem_free(c->api_keys[i]);
    for (int i = 0; i < c->n_model_paths; i++)
        mem_free(c->model_paths[i]);
    c->n_api_keys = 0;
    c->n_model_paths = 0;
}

static int add_api_key(struct server_config *c, const char *key, size_t len, struct errmsg *err)
{
    if (len == 0)
        return errmsg_set(err, ERR_INVALID, "--api-key: the key is empty");
    if (c->n_api_keys >= CONFIG_MAX_API_KEYS)
        return errmsg_set(err, ERR_INVALID, "at most %d API keys", CONFIG_MAX_API_KEYS);
    char *copy = mem_strndup(key, len);
    if (!copy)
        return ERR_NOMEM;
    c->api_keys[c->n_api_keys++] = copy;
    return ERR_OK;
}

static int read_key_file(struct server_config *c, const char *path, struct errmsg *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return errmsg_set(err, ERR_INVALID, "--api-key-file: cannot open '%s': %s", path,
                          strerror(errno));
    char line[1024];
    int rc = ERR_OK;
    while (rc == ERR_OK && fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        while (len && (line[len - 1] == ' ' || line[len - 1] == '\t'))
            len--;
        if (len == 0 || line[0] == '#')
            continue;
        rc = add_api_key(c, line, len, err);
    }
    fclose(f);
    return rc;
}

static int parse_int(const struct opt *o, const char *v, long *out, struct errmsg *err)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0')
        return errmsg_set(err, ERR_INVALID, "%s: '%s' is not an integer", o->name, v);
    if (n < o->min || n > o->max)
        return errmsg_set(err, ERR_INVALID, "%s: %ld is out of range [%ld, %ld]", o->name, n,
                          o->min, o->max);
    *out = n;
    return ERR_OK;
}

static bool truthy(const char *v)
{
    return strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "on") == 0 ||
           strcmp(v, "yes") == 0;
}

static bool takes_value(const struct opt *o)
{
    return o->kind != OPT_FLAG && o->kind != OPT_VERBOSE && o->kind != OPT_HELP &&
           o->kind != OPT_VERSION;
}

/* Applies one option; value is NULL for flags given on the command line. */
static int apply(struct server_config *c, const struct opt *o, const char *value,
                 struct errmsg *err)
{
    char *field = (char *)c + o->offset;
    switch (o->kind) {
    case OPT_STRING:
        if (strlen(value) >= o->size)
            return errmsg_set(err, ERR_INVALID, "%s: value too long", o->name);
        memcpy(field, value, strlen(value) + 1);
        return ERR_OK;
    case OPT_INT: {
        long n = 0;
        int rc = parse_int(o, value, &n, err);
        if (rc == ERR_OK)
            *(int *)(void *)field = (int)n;
        return rc;
    }
    case OPT_FLAG:
        *(bool *)(void *)field = value ? truthy(value) : true;
        return ERR_OK;
    case OPT_API_KEY:
        return add_api_key(c, value, strlen(value), err);
    case OPT_KEY_FILE:
        return read_key_file(c, value, err);
    case OPT_MODEL:
        if (c->n_model_paths >= CONFIG_MAX_MODELS)
            return errmsg_set(err, ERR_INVALID, "at most %d --model flags", CONFIG_MAX_MODELS);
        c->model_paths[c->n_model_paths] = mem_strdup(value);
        if (!c->model_paths[c->n_model_paths])
            return ERR_NOMEM;
        c->n_model_paths++;
        return ERR_OK;
    case OPT_LOG_FORMAT:
        if (strcmp(value, "text") == 0)
            c->log_format = LOG_FORMAT_TEXT;
        else if (strcmp(value, "json") == 0)
            c->log_format = LOG_FORMAT_JSON;
        else
            return errmsg_set(err, ERR_INVALID, "%s: expected 'text' or 'json', got '%s'",
                              o->name, value);
        return ERR_OK;
    case OPT_VERBOSE:
        c->verbosity = value ? truthy(value) : 1;
        return ERR_OK;
    case OPT_HELP:
    case OPT_VERSION:
        return ERR_OK;
    }
    return ERR_INVALID;
}

static const struct opt *find_option(const char *arg, size_t name_len)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct opt *o = &options[i];
        if ((strlen(o->name) == name_len && strncmp(o->name, arg, name_len) == 0) ||
            (o->alias && strlen(o->alias) == name_len && strncmp(o->alias, arg, name_len) == 0))
            return o;
    }
    return NULL;
}

static int apply_environment(struct server_config *c, struct errmsg *err)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct opt *o = &options[i];
        const char *v = o->env ? getenv(o->env) : NULL;
        if (!v || !*v)
            continue;
        int rc = apply(c, o, v, err);
        if (rc != ERR_OK) {
            char inner[ERRMSG_CAP];
            snprintf(inner, sizeof inner, "%s", err ? err->msg : "");
            return errmsg_set(err, rc, "environment %s: %s", o->env, inner);
        }
    }
    return ERR_OK;
}

int config_parse(struct server_config *c, int argc, char **argv, struct errmsg *err)
{
    int rc = apply_environment(c, err);
    int result = CONFIG_PARSE_OK;
    for (int i = 1; rc == ERR_OK && i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const struct opt *o = find_option(arg, name_len);
        if (!o)
            return errmsg_set(err, ERR_INVALID, "unknown flag '%s' (see --help)", arg);
        const char *value = eq ? eq + 1 : NULL;
        if (takes_value(o) && !value) {
            if (i + 1 >= argc)
                return errmsg_set(err, ERR_INVALID, "%s needs a value (see --help)", o->name);
            value = argv[++i];
        }
        if (o->kind == OPT_HELP)
            result = CONFIG_PARSE_HELP;
        if (o->kind == OPT_VERSION && result == CONFIG_PARSE_OK)
            result = CONFIG_PARSE_VERSION;
        rc = apply(c, o, value, err);
    }
    return rc == ERR_OK ? result : rc;
}

void config_usage(const char *prog, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "usage: %s [flags]\n\nflags (environment):\n", prog);
    for (size_t i = 0; i < N_OPTIONS && n < cap; i++) {
        const struct opt *o = &options[i];
        char names[64];
        snprintf(names, sizeof names, "%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "",
                 o->name, takes_value(o) ? " V" : "");
        n += (size_t)snprintf(out + n, cap - n, "  %-28s %s%s%s%s\n", names, o->help,
                              o->env ? " (" : "", o->env ? o->env : "", o->env ? ")" : "");
    }
}
