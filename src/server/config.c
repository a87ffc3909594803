/* Flag and environment parsing, driven by one option table so every flag has exactly one
 * definition of its name, environment variable, value type, range and help text. */
#include "server/config.h"

#include "util/log.h"
#include "util/mem.h"

#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt_kind {
    OPT_STRING,   // into a fixed char array
    OPT_INT,      // bounded integer
    OPT_INT64,    // bounded int64_t
    OPT_FLOAT,    // bounded float
    OPT_FLAG,     // sets a bool
    OPT_FLAG_NEG, // clears a bool (from the environment: sets it to the value's negation)
    OPT_CHOICE,   // a string from the '|'-separated list in `choices`
    OPT_GPU,      // accepted for llama-server compatibility, no effect (value optional)
    OPT_API_KEY,  // appends a key
    OPT_KEY_FILE,
    OPT_MODEL, // appends a model path
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
    size_t offset; // field in struct server_config
    size_t size;   // bytes, for OPT_STRING
    long min, max; // for OPT_INT, OPT_INT64, OPT_FLOAT
    const char *help;
    const char *llama_env; // llama-server's LLAMA_ARG_* variable or NULL
    const char *choices;   // for OPT_CHOICE: "a|b|c"
};

#define FIELD(f) offsetof(struct server_config, f), sizeof(((struct server_config *)0)->f)

#define GEN(f)                                                                                     \
    offsetof(struct server_config, gen_defaults.f),                                                \
        sizeof(((struct server_config *)0)->gen_defaults.f)

/* llama-server's flags keep its spelling and meaning (common/arg.cpp), including its
 * LLAMA_ARG_* variables; LLAMAPI_* variables win over those, flags over both. */
static const struct opt options[] = {
    {"--host", NULL, "LLAMAPI_HOST", OPT_STRING, FIELD(host), 0, 0, "address to bind",
     "LLAMA_ARG_HOST", NULL},
    {"--port", NULL, "LLAMAPI_PORT", OPT_INT, FIELD(port), 0, 65535, "TCP port (0 = any free port)",
     "LLAMA_ARG_PORT", NULL},
    {"--api-key", NULL, "LLAMAPI_API_KEY", OPT_API_KEY, 0, 0, 0, 0, "require this key (repeatable)",
     "LLAMA_API_KEY", NULL},
    {"--api-key-file", NULL, "LLAMAPI_API_KEY_FILE", OPT_KEY_FILE, 0, 0, 0, 0,
     "read keys from a file, one per line", "LLAMA_ARG_API_KEY_FILE", NULL},
    {"--threads", "-t", "LLAMAPI_THREADS", OPT_INT, FIELD(n_threads), 0, 1024,
     "engine threads (0 = the big cores of a big.LITTLE CPU, else physical cores)",
     "LLAMA_ARG_THREADS", NULL},
    {"--cpu-mask", "-C", "LLAMAPI_CPU_MASK", OPT_STRING, FIELD(cpu_mask), 0, 0,
     "pin engine threads to these CPUs (hex mask, bit i = CPU i; e.g. f0)", NULL, NULL},
    {"--max-connections", NULL, "LLAMAPI_MAX_CONNECTIONS", OPT_INT, FIELD(max_connections), 1,
     65536, "concurrent connections", NULL, NULL},
    {"--timeout", "-to", "LLAMAPI_TIMEOUT", OPT_INT, FIELD(timeout_s), 1, 86400,
     "idle connection timeout in seconds", "LLAMA_ARG_TIMEOUT", NULL},
    {"--models-dir", NULL, "LLAMAPI_MODELS_DIR", OPT_STRING, FIELD(models_dir), 0, 0,
     "where model names are resolved", "LLAMA_ARG_MODELS_DIR", NULL},
    {"--models-max", NULL, "LLAMAPI_MODELS_MAX", OPT_INT, FIELD(models_max), 0, 64,
     "models loaded at once; loading one more unloads the least recently used idle model (0 = no "
     "limit)",
     "LLAMA_ARG_MODELS_MAX", NULL},
    {"--no-models-autoload", NULL, NULL, OPT_FLAG, FIELD(no_models_autoload), 0, 0,
     "requests naming a model under --models-dir do not load it", NULL, NULL},
    {"--models-autoload", NULL, NULL, OPT_FLAG_NEG, FIELD(no_models_autoload), 0, 0,
     "without -m, requests naming a model under --models-dir load it (default)",
     "LLAMA_ARG_MODELS_AUTOLOAD", NULL},
    {"--request-queue-size", NULL, "LLAMAPI_REQUEST_QUEUE_SIZE", OPT_INT, FIELD(request_queue_size),
     0, 1000000, "default queue capacity per model", NULL, NULL},
    {"--model", "-m", "LLAMAPI_MODEL", OPT_MODEL, 0, 0, 0, 0, "load a GGUF at start-up",
     "LLAMA_ARG_MODEL", NULL},
    {"--alias", "-a", "LLAMAPI_ALIAS", OPT_STRING, FIELD(alias), 0, 0,
     "model id of the first --model (default: its file name)", "LLAMA_ARG_ALIAS", NULL},
    {"--parallel", "-np", "LLAMAPI_PARALLEL", OPT_INT, FIELD(n_parallel), 1, 64,
     "instances of each --model", "LLAMA_ARG_N_PARALLEL", NULL},
    {"--ctx-size", "-c", "LLAMAPI_CTX_SIZE", OPT_INT, FIELD(n_ctx), 0, 1 << 20,
     "context per instance (0 = the model's, capped at 4096)", "LLAMA_ARG_CTX_SIZE", NULL},
    {"--batch-size", "-b", NULL, OPT_INT, FIELD(n_batch), 1, 1 << 20,
     "logical batch size (accepted; the engine sizes its own batches)", "LLAMA_ARG_BATCH", NULL},
    {"--ubatch-size", "-ub", NULL, OPT_INT, FIELD(n_ubatch), 1, 1 << 20,
     "physical batch size (accepted)", "LLAMA_ARG_UBATCH", NULL},
    {"--n-predict", "-n", NULL, OPT_INT, GEN(max_tokens), -1, INT32_MAX,
     "default tokens to generate (-1 = until a stop)", "LLAMA_ARG_N_PREDICT", NULL},
    {"--temp", NULL, NULL, OPT_FLOAT, GEN(temperature), 0, 2, "default temperature",
     "LLAMA_ARG_TEMPERATURE", NULL},
    {"--top-k", NULL, NULL, OPT_INT, GEN(top_k), 0, 1000000, "default top_k (0 = off)",
     "LLAMA_ARG_TOP_K", NULL},
    {"--top-p", NULL, NULL, OPT_FLOAT, GEN(top_p), 0, 1, "default top_p (1 = off)",
     "LLAMA_ARG_TOP_P", NULL},
    {"--min-p", NULL, NULL, OPT_FLOAT, GEN(min_p), 0, 1, "default min_p (0 = off)",
     "LLAMA_ARG_MIN_P", NULL},
    {"--repeat-penalty", NULL, NULL, OPT_FLOAT, GEN(repeat_penalty), 0, 10,
     "default repeat penalty (1 = off)", "LLAMA_ARG_REPEAT_PENALTY", NULL},
    {"--repeat-last-n", NULL, NULL, OPT_INT, GEN(repeat_last_n), 0, 1 << 20,
     "default tokens the penalties look back", NULL, NULL},
    {"--presence-penalty", NULL, NULL, OPT_FLOAT, GEN(presence_penalty), -2, 2,
     "default presence penalty", "LLAMA_ARG_PRESENCE_PENALTY", NULL},
    {"--frequency-penalty", NULL, NULL, OPT_FLOAT, GEN(frequency_penalty), -2, 2,
     "default frequency penalty", "LLAMA_ARG_FREQUENCY_PENALTY", NULL},
    {"--seed", "-s", NULL, OPT_INT64, GEN(seed), -1, 4294967295L,
     "default sampling seed (-1 = random)", NULL, NULL},
    {"--embedding", NULL, NULL, OPT_FLAG, FIELD(force_embedding), 0, 0,
     "serve the --model models as embedding models", "LLAMA_ARG_EMBEDDINGS", NULL},
    {"--embeddings", NULL, NULL, OPT_FLAG, FIELD(force_embedding), 0, 0, "same as --embedding",
     NULL, NULL},
    {"--pooling", NULL, NULL, OPT_CHOICE, FIELD(pooling), 0, 0,
     "pooling of the --model embedding models (default: the file's; else mean for encoders, "
     "last for decoders; none: per-token vectors on /embedding, encoders only; rank: rerankers)",
     "LLAMA_ARG_POOLING", "none|mean|cls|last|rank"},
    {"--reranking", NULL, NULL, OPT_FLAG, FIELD(reranking), 0, 0,
     "serve the --model models as rerankers (embedding models with pooling rank) for "
     "/v1/rerank",
     "LLAMA_ARG_RERANKING", NULL},
    {"--rerank", NULL, NULL, OPT_FLAG, FIELD(reranking), 0, 0, "same as --reranking", NULL, NULL},
    {"--metrics", NULL, "LLAMAPI_METRICS", OPT_FLAG, FIELD(metrics_enabled), 0, 0,
     "enable GET /metrics (Prometheus)", "LLAMA_ARG_ENDPOINT_METRICS", NULL},
    {"--slots", NULL, NULL, OPT_FLAG_NEG, FIELD(slots_disabled), 0, 0,
     "enable GET /slots (default)", "LLAMA_ARG_ENDPOINT_SLOTS", NULL},
    {"--no-slots", NULL, NULL, OPT_FLAG, FIELD(slots_disabled), 0, 0, "disable GET /slots", NULL,
     NULL},
    {"--props", NULL, NULL, OPT_FLAG, FIELD(props_enabled), 0, 0,
     "allow POST /props (accepted; nothing is settable yet)", "LLAMA_ARG_ENDPOINT_PROPS", NULL},
    {"--jinja", NULL, NULL, OPT_FLAG, 0, 0, 0, 0, "Jinja chat templates (always on)",
     "LLAMA_ARG_JINJA", NULL},
    {"--no-jinja", NULL, NULL, OPT_FLAG, 0, 0, 0, 0, "accepted; templates are always Jinja", NULL,
     NULL},
    {"--chat-template", NULL, NULL, OPT_STRING, FIELD(chat_template), 0, 0,
     "built-in template for every model: chatml, llama3, mistral, gemma", "LLAMA_ARG_CHAT_TEMPLATE",
     NULL},
    {"--chat-template-file", NULL, NULL, OPT_STRING, FIELD(chat_template_file), 0, 0,
     "Jinja template file for every model", "LLAMA_ARG_CHAT_TEMPLATE_FILE", NULL},
    {"--reasoning-format", NULL, NULL, OPT_CHOICE, FIELD(reasoning_format), 0, 0,
     "reasoning output format (accepted; detected from the template)", NULL,
     "none|deepseek|deepseek-legacy|auto"},
    {"--cont-batching", "-cb", NULL, OPT_FLAG, 0, 0, 0, 0, "continuous batching (always on)",
     "LLAMA_ARG_CONT_BATCHING", NULL},
    {"--no-cont-batching", "-nocb", NULL, OPT_FLAG, 0, 0, 0, 0, "accepted; batching stays on", NULL,
     NULL},
    {"--no-ui", NULL, NULL, OPT_FLAG, 0, 0, 0, 0, "accepted; there is no web UI", NULL, NULL},
    {"--no-webui", NULL, NULL, OPT_FLAG, 0, 0, 0, 0, "accepted; there is no web UI", NULL, NULL},
    {"--n-gpu-layers", "-ngl", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect",
     "LLAMA_ARG_N_GPU_LAYERS", NULL},
    {"--gpu-layers", NULL, NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect", NULL, NULL},
    {"--flash-attn", "-fa", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect",
     "LLAMA_ARG_FLASH_ATTN", NULL},
    {"--split-mode", "-sm", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect",
     "LLAMA_ARG_SPLIT_MODE", NULL},
    {"--main-gpu", "-mg", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect", "LLAMA_ARG_MAIN_GPU",
     NULL},
    {"--tensor-split", "-ts", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect",
     "LLAMA_ARG_TENSOR_SPLIT", NULL},
    {"--device", "-dev", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect", "LLAMA_ARG_DEVICE",
     NULL},
    {"--no-kv-offload", "-nkvo", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect", NULL, NULL},
    {"--memory-limit", NULL, "LLAMAPI_MEMORY_LIMIT", OPT_INT, FIELD(memory_limit_mib), 0, 1 << 24,
     "MiB for instance KV caches (0 = 75% of available memory)", NULL, NULL},
    {"--media-path", NULL, "LLAMAPI_MEDIA_PATH", OPT_STRING, FIELD(media_path), 0, 0,
     "directory file:// image parts may read from (default: none)", NULL, NULL},
    {"--log-format", NULL, "LLAMAPI_LOG_FORMAT", OPT_LOG_FORMAT, 0, 0, 0, 0,
     "access log format: text or json", NULL, NULL},
    {"--log-disable", NULL, "LLAMAPI_LOG_DISABLE", OPT_FLAG, FIELD(log_disable), 0, 0, "no logging",
     NULL, NULL},
    {"--verbose", "-v", "LLAMAPI_VERBOSE", OPT_VERBOSE, 0, 0, 0, 0, "debug logging", NULL, NULL},
    {"--help", "-h", NULL, OPT_HELP, 0, 0, 0, 0, "show this help", NULL, NULL},
    {"--version", NULL, NULL, OPT_VERSION, 0, 0, 0, 0, "show the version", NULL, NULL},
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
    gen_params_defaults(&c->gen_defaults);
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
    if (len == 0) return errmsg_set(err, ERR_INVALID, "--api-key: the key is empty");
    if (c->n_api_keys >= CONFIG_MAX_API_KEYS)
        return errmsg_set(err, ERR_INVALID, "at most %d API keys", CONFIG_MAX_API_KEYS);
    char *copy = mem_strndup(key, len);
    if (!copy) return ERR_NOMEM;
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
        if (len == 0 || line[0] == '#') continue;
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

static int apply_int64(const struct opt *o, const char *v, char *field, struct errmsg *err)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end != '\0')
        return errmsg_set(err, ERR_INVALID, "%s: '%s' is not an integer", o->name, v);
    if (n < o->min || n > o->max)
        return errmsg_set(err, ERR_INVALID, "%s: %lld is out of range [%ld, %ld]", o->name, n,
                          o->min, o->max);
    int64_t x = n;
    memcpy(field, &x, sizeof x);
    return ERR_OK;
}

static int apply_float(const struct opt *o, const char *v, char *field, struct errmsg *err)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !isfinite(d))
        return errmsg_set(err, ERR_INVALID, "%s: '%s' is not a number", o->name, v);
    if (d < (double)o->min || d > (double)o->max)
        return errmsg_set(err, ERR_INVALID, "%s: %g is out of range [%ld, %ld]", o->name, d, o->min,
                          o->max);
    float x = (float)d;
    memcpy(field, &x, sizeof x);
    return ERR_OK;
}

static int apply_choice(const struct opt *o, const char *v, char *field, struct errmsg *err)
{
    size_t n = strlen(v);
    for (const char *p = o->choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0 && n < o->size) {
            memcpy(field, v, n + 1);
            return ERR_OK;
        }
        p = bar ? bar + 1 : p + len;
    }
    return errmsg_set(err, ERR_INVALID, "%s: '%s' is not one of %s", o->name, v, o->choices);
}

static bool truthy(const char *v)
{
    return strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "on") == 0 ||
           strcmp(v, "yes") == 0;
}

static bool takes_value(const struct opt *o)
{
    return o->kind != OPT_FLAG && o->kind != OPT_FLAG_NEG && o->kind != OPT_VERBOSE &&
           o->kind != OPT_HELP && o->kind != OPT_VERSION && o->kind != OPT_GPU;
}

/* GPU flags take a value in llama-server (-ngl 99, -fa on) but some older spellings did not
 * (-fa alone): the next argument is their value unless it looks like another flag. */
static bool takes_optional_value(const struct opt *o, const char *next)
{
    return o->kind == OPT_GPU && next && (next[0] != '-' || (next[1] >= '0' && next[1] <= '9'));
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
        if (rc == ERR_OK) *(int *)(void *)field = (int)n;
        return rc;
    }
    case OPT_INT64:
        return apply_int64(o, value, field, err);
    case OPT_FLOAT:
        return apply_float(o, value, field, err);
    case OPT_FLAG:
        if (o->size) // flags without a field are accepted and do nothing
            *(bool *)(void *)field = value ? truthy(value) : true;
        return ERR_OK;
    case OPT_FLAG_NEG:
        *(bool *)(void *)field = value ? !truthy(value) : false;
        return ERR_OK;
    case OPT_CHOICE:
        return apply_choice(o, value, field, err);
    case OPT_GPU:
        log_warn("%s has no effect: the cpu platform has no GPU", o->name);
        return ERR_OK;
    case OPT_API_KEY:
        return add_api_key(c, value, strlen(value), err);
    case OPT_KEY_FILE:
        return read_key_file(c, value, err);
    case OPT_MODEL:
        if (c->n_model_paths >= CONFIG_MAX_MODELS)
            return errmsg_set(err, ERR_INVALID, "at most %d --model flags", CONFIG_MAX_MODELS);
        c->model_paths[c->n_model_paths] = mem_strdup(value);
        if (!c->model_paths[c->n_model_paths]) return ERR_NOMEM;
        c->n_model_paths++;
        return ERR_OK;
    case OPT_LOG_FORMAT:
        if (strcmp(value, "text") == 0)
            c->log_format = LOG_FORMAT_TEXT;
        else if (strcmp(value, "json") == 0)
            c->log_format = LOG_FORMAT_JSON;
        else
            return errmsg_set(err, ERR_INVALID, "%s: expected 'text' or 'json', got '%s'", o->name,
                              value);
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

/* Applies one family of variables: llama-server's (is_llama) or ours. */
static int apply_env_family(struct server_config *c, bool is_llama, struct errmsg *err)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct opt *o = &options[i];
        const char *name = is_llama ? o->llama_env : o->env;
        const char *v = name ? getenv(name) : NULL;
        if (!v || !*v) continue;
        int rc = apply(c, o, v, err);
        if (rc != ERR_OK) {
            char inner[ERRMSG_CAP];
            snprintf(inner, sizeof inner, "%s", err ? err->msg : "");
            return errmsg_set(err, rc, "environment %s: %s", name, inner);
        }
    }
    return ERR_OK;
}

static int apply_environment(struct server_config *c, struct errmsg *err)
{
    int rc = apply_env_family(c, true, err);
    return rc == ERR_OK ? apply_env_family(c, false, err) : rc;
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
        if (!o) return errmsg_set(err, ERR_INVALID, "unknown flag '%s' (see --help)", arg);
        const char *value = eq ? eq + 1 : NULL;
        if (!value && i + 1 < argc && takes_optional_value(o, argv[i + 1])) value = argv[++i];
        if (takes_value(o) && !value) {
            if (i + 1 >= argc)
                return errmsg_set(err, ERR_INVALID, "%s needs a value (see --help)", o->name);
            value = argv[++i];
        }
        if (o->kind == OPT_HELP) result = CONFIG_PARSE_HELP;
        if (o->kind == OPT_VERSION && result == CONFIG_PARSE_OK) result = CONFIG_PARSE_VERSION;
        rc = apply(c, o, value, err);
    }
    // As llama-server: --reranking is an embedding model with the reranker's pooling.
    if (rc == ERR_OK && c->reranking) {
        c->force_embedding = true;
        snprintf(c->pooling, sizeof c->pooling, "rank");
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
        const char *env = o->env ? o->env : o->llama_env;
        n += (size_t)snprintf(out + n, cap - n, "  %-28s %s%s%s%s\n", names, o->help,
                              env ? " (" : "", env ? env : "", env ? ")" : "");
    }
}
