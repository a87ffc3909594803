/* Ollama's error object, names, timestamps and model details. */
#define _XOPEN_SOURCE 700 // realpath()
#include "api/ollama/common.h"

#include "api/errors.h"
#include "api/models/model_select.h"
#include "core/manager.h"
#include "hub/hub.h"
#include "util/log.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ollama_dumps_free(char *text)
{
    json_free_t jfree = free;
    json_get_alloc_funcs(NULL, &jfree);
    if (text) jfree(text);
}

void ollama_error(struct api_response *resp, int status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_error_for(resp, API_FAMILY_OLLAMA, status, NULL, NULL, msg);
}

void ollama_fail_respond(const struct api_fail *f, struct api_response *resp)
{
    int status = f->status ? f->status : 400;
    api_error_for(resp, API_FAMILY_OLLAMA, status, NULL, NULL,
                  f->message[0] ? f->message : "error");
    if (status == 429 || status == 503) api_response_add_header(resp, "Retry-After", "1");
}

/* RFC 3339 in UTC with the fraction Go's RFC3339Nano writes: trailing zeros dropped, no
 * fraction at all on a whole second. */
static void format_time(const struct timespec *ts, char out[OLLAMA_TIME_CAP])
{
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    // Fields bounded so the text always fits (a year past 9999 is clamped).
    int year = tm.tm_year + 1900 > 9999 ? 9999 : tm.tm_year + 1900 < 0 ? 0 : tm.tm_year + 1900;
    char frac[12] = "";
    int ns = (int)(ts->tv_nsec % 1000000000);
    if (ns > 0) {
        snprintf(frac, sizeof frac, ".%09d", ns);
        for (size_t n = strlen(frac); frac[n - 1] == '0'; n--)
            frac[n - 1] = '\0';
    }
    snprintf(out, OLLAMA_TIME_CAP, "%04d-%02d-%02dT%02d:%02d:%02d%sZ", year, (tm.tm_mon + 1) % 100,
             tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100, frac);
}

void ollama_time_now(char out[OLLAMA_TIME_CAP])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    format_time(&ts, out);
}

void ollama_time_unix(int64_t unix_s, char out[OLLAMA_TIME_CAP])
{
    struct timespec ts = {.tv_sec = (time_t)unix_s, .tv_nsec = 0};
    format_time(&ts, out);
}

/* The ':' that starts a tag: after the last '/', so "host:port/name" is not a tag. */
static const char *tag_colon(const char *name)
{
    const char *slash = strrchr(name, '/');
    return strchr(slash ? slash + 1 : name, ':');
}

void ollama_name_of(const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", id, tag_colon(id) ? "" : ":latest");
}

const char *ollama_request_name(const json_t *body, struct api_fail *f)
{
    const json_t *v = json_object_get(body, "model");
    if (!v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0))
        v = json_object_get(body, "name");
    if (!v || json_is_null(v)) return "";
    if (!json_is_string(v)) {
        api_failf(f, 400, "invalid_type", "model", "model must be a string, not %s",
                  v_type_name(v));
        return NULL;
    }
    return json_string_value(v);
}

/* True when name is one of the comma-separated items of list. */
static bool in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list ? list : ""; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, name, len) == 0) return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* Tries the spellings of name in turn; NULL when none is a registered model. */
static struct model *acquire_by_name(const struct api_ctx *ctx, const char *name)
{
    struct registry *reg = manager_registry(ctx->manager);
    char cand[3][MODEL_ID_CAP];
    int n = 0;
    snprintf(cand[n++], MODEL_ID_CAP, "%s", name);
    const char *colon = tag_colon(name);
    if (colon && strcmp(colon, ":latest") == 0)
        snprintf(cand[n++], MODEL_ID_CAP, "%.*s", (int)(colon - name), name);
    else if (colon)
        snprintf(cand[n++], MODEL_ID_CAP, "%.*s-%s", (int)(colon - name), name, colon + 1);
    for (int i = 0; i < n; i++) {
        struct model *m = registry_acquire(reg, cand[i]);
        if (m) return m;
    }
    // --alias names (and start-up models not registered yet) through the shared lookup, which
    // in single-model mode answers any name: only a real alias is taken from it.
    for (int i = 0; i < n; i++) {
        struct model *m = api_acquire_model(ctx, cand[i]);
        if (m && (strcmp(model_id(m), cand[i]) == 0 || in_list(ctx->model_aliases, cand[i])))
            return m;
        if (m) model_release(m);
    }
    return NULL;
}

bool ollama_hub_ref(const char *name, char *out, size_t cap)
{
    static const char *const hosts[] = {"hf.co/", "huggingface.co/"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        size_t n = strlen(hosts[i]);
        if (strncmp(name, hosts[i], n) != 0) continue;
        const char *ref = name + n;
        const char *colon = strrchr(ref, ':');
        size_t len = colon && strcmp(colon, ":latest") == 0 ? (size_t)(colon - ref) : strlen(ref);
        if (len >= cap) return false;
        snprintf(out, cap, "%.*s", (int)len, ref);
        return true;
    }
    return false;
}

/* A hub name whose files are already under --models-dir (pulled before) is loaded under that
 * name, as the router loads NAME.gguf: with the server's -np and -c. Never downloads (a chat
 * that waits out a download would surprise; /api/pull is for that). NULL when the name is not
 * a hub name, autoload is off, nothing matches locally or the load fails (logged). */
static struct model *autoload_hub(const struct api_ctx *ctx, const char *name)
{
    char ref[HUB_REPO_CAP + HUB_QUANT_CAP + HUB_FILE_CAP], file[PATH_MAX], path[PATH_MAX];
    if (!ctx->hub || ctx->is_autoload_disabled || strlen(name) >= MODEL_ID_CAP ||
        !ollama_hub_ref(name, ref, sizeof ref))
        return NULL;
    struct hub_opts o = *ctx->hub;
    o.is_offline = true; // a name in a request never starts a download
    enum hub_failure why;
    struct errmsg err;
    errmsg_clear(&err);
    int part, n_parts;
    if (hub_resolve(&o, ref, file, sizeof file, &why, &err) != ERR_OK) return NULL;
    hub_split_info(file, NULL, 0, &part, &n_parts);
    if (n_parts > 1 || !realpath(file, path)) return NULL; // the GGUF reader maps one file
    struct manager_load args = {.id = name,
                                .path = path,
                                .n_instances = ctx->load_instances > 0 ? ctx->load_instances : 1,
                                .queue_size = -1,
                                .n_ctx = ctx->load_n_ctx};
    int actual = 0;
    enum load_failure load_why = LOAD_FAIL_NONE;
    if (manager_load(ctx->manager, &args, &actual, &load_why, &err) != ERR_OK &&
        load_why != LOAD_FAIL_EXISTS) {
        log_warn("autoload of '%s' failed: %s", name, err.msg);
        return NULL;
    }
    log_info("autoloaded model '%s' from %s", name, path);
    return registry_acquire(manager_registry(ctx->manager), name);
}

struct model *ollama_model_acquire(const struct api_ctx *ctx, const char *name,
                                   enum model_kind kind, struct api_fail *f)
{
    if (!name || !name[0]) {
        api_failf(f, 400, "invalid_value", "model", "model is required");
        return NULL;
    }
    struct model *m = acquire_by_name(ctx, name);
    if (!m) m = autoload_hub(ctx, name);
    if (!m) {
        api_failf(f, 404, "model_not_found", "model", "model '%.200s' not found", name);
        return NULL;
    }
    if (!api_model_wait_ready(m, f)) {
        model_release(m);
        if (f->status == 404)
            api_failf(f, 404, "model_not_found", "model", "model '%.200s' not found", name);
        return NULL;
    }
    enum model_kind have = model_desc(m)->kind;
    if (have != kind) {
        model_release(m);
        api_failf(f, 400, "wrong_model_type", "model", "\"%.200s\" does not support %s", name,
                  kind == MODEL_KIND_EMBEDDING ? "embeddings" : "chat");
        return NULL;
    }
    return m;
}

/* "494.03M", "7.6B": Ollama's parameter_size. */
static void param_size(int64_t n, char *out, size_t cap)
{
    if (n >= 1000000000)
        snprintf(out, cap, "%.1fB", (double)n / 1e9);
    else if (n >= 1000000)
        snprintf(out, cap, "%.2fM", (double)n / 1e6);
    else
        snprintf(out, cap, "%.2fK", (double)n / 1e3);
}

/* The quantization named in the file name (Q4_K_M, q8_0, f16…), upper-cased; "unknown" when
 * it names none: the GGUF's file type is not kept once the model is loaded. */
static void quant_level(const char *path, char *out, size_t cap)
{
    static const char *const names[] = {"IQ4_NL", "IQ4_XS", "Q2_K",   "Q3_K_S", "Q3_K_M",
                                        "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
                                        "Q6_K",   "Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",
                                        "Q8_0",   "BF16",   "F16",    "F32",    "MXFP4"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char up[256];
    size_t i = 0;
    for (; base[i] && i + 1 < sizeof up; i++)
        up[i] = (char)toupper((unsigned char)base[i]);
    up[i] = '\0';
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strstr(up, names[k])) {
            snprintf(out, cap, "%s", names[k]);
            return;
        }
    snprintf(out, cap, "unknown");
}

json_t *ollama_details_json(const struct platform_model_desc *d, const char *path)
{
    char size[32], quant[16];
    param_size(d->n_params, size, sizeof size);
    quant_level(path, quant, sizeof quant);
    const char *family = d->arch[0] ? d->arch : "unknown";
    return json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s, s:i, s:i}", "parent_model", "", "format",
                     "gguf", "family", family, "families", family, "parameter_size", size,
                     "quantization_level", quant, "context_length", d->n_ctx, "embedding_length",
                     d->n_embd);
}
