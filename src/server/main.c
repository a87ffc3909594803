/* llamapi-server: parse flags, start the HTTP front end, wait for SIGINT/SIGTERM, shut down
 * cleanly (stop accepting, end in-flight requests, free everything, exit 0). */
#define _XOPEN_SOURCE 700 // realpath()
#include "api/metrics.h"
#include "api/models/model_select.h"
#include "api/responses/response_store.h"
#include "core/manager.h"
#include "engine/threadpool.h"
#include "hub/hub.h"
#include "platform/platform.h"
#include "platform/vendor.h"
#include "media/media_path.h"
#include "server/config.h"
#include "server/http.h"
#include "server/presets.h"
#include "server/version.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mapguard.h"
#include "util/mem.h"
#include "util/thread.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* True when every address of the comma-separated list is a loopback one. */
static bool is_loopback(const char *hosts)
{
    for (const char *q = hosts; *q;) {
        while (*q == ' ' || *q == ',')
            q++;
        size_t n = strcspn(q, ", ");
        if (n == 0) break;
        bool is_lo = strncmp(q, "127.", 4) == 0 || (n == 9 && strncmp(q, "localhost", 9) == 0) ||
                     (n == 3 && strncmp(q, "::1", 3) == 0) ||
                     (n == 5 && strncmp(q, "[::1]", 5) == 0);
        if (!is_lo) return false;
        q += n;
    }
    return true;
}

/* Logs each address of the --host list as a URL (IPv6 in brackets), the first on the line
 * scripts read the port from. */
static void log_listening(const char *hosts, int port)
{
    char urls[1024] = "";
    size_t used = 0;
    for (const char *q = hosts; *q && used < sizeof urls;) {
        while (*q == ' ' || *q == ',')
            q++;
        int n = (int)strcspn(q, ", ");
        if (n == 0) break;
        bool is_v6 = memchr(q, ':', (size_t)n) && q[0] != '[';
        int w = snprintf(urls + used, sizeof urls - used, "%shttp://%s%.*s%s:%d",
                         used ? " and " : "", is_v6 ? "[" : "", n, q, is_v6 ? "]" : "", port);
        if (w < 0) break;
        used += (size_t)w;
        q += n;
    }
    log_info("llamapi-server %s listening on %s", LLAMAPI_VERSION, urls);
}

/* Blocks the shutdown signals in this thread (and every thread started later), so sigwait
 * below is the one place they arrive. */
static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP); // reloads --models-preset
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
    // A model file truncated under its mapping faults in whichever thread touches it next:
    // that model fails, the server does not (util/mapguard.h).
    if (mapguard_install() != ERR_OK) log_warn("cannot install the SIGBUS handler");
}

/* --pooling as the platform's value ("": the file's; the option table allows only names). */
static enum platform_pooling pooling_from(const char *s)
{
    enum platform_pooling p = PLATFORM_POOLING_DEFAULT;
    platform_pooling_parse(s, &p);
    return p;
}

/* Context per instance: -c is the total that the -np slots share, as in llama-server (each
 * slot gets -c / -np tokens; with --kv-unified any slot may fill all of it, so each instance
 * gets -c); 0 keeps each instance at the model's default. */
static int instance_ctx(const struct server_config *config)
{
    if (config->n_ctx <= 0) return 0;
    if (config->is_kv_unified) return config->n_ctx;
    int n = config->n_parallel > 0 ? config->n_parallel : 1;
    return config->n_ctx / n > 0 ? config->n_ctx / n : 1;
}

/* Loads the -m models; a failure is fatal, as for llama-server. */
static int load_startup_models(const struct server_config *config, struct manager *manager)
{
    for (int i = 0; i < config->n_model_paths; i++) {
        char path[MODEL_PATH_CAP], id[MODEL_ID_CAP];
        if (!realpath(config->model_paths[i], path)) {
            log_error("--model %s: %s", config->model_paths[i], strerror(errno));
            return 1;
        }
        if (i == 0 && config->alias[0]) {
            api_alias_first(config->alias, id, sizeof id);
        } else {
            const char *base = strrchr(path, '/');
            snprintf(id, sizeof id, "%.255s", base ? base + 1 : path);
            size_t n = strlen(id);
            if (n > 5 && strcmp(id + n - 5, ".gguf") == 0) id[n - 5] = '\0';
        }
        struct manager_load args = {.id = id,
                                    .path = path,
                                    .n_instances = config->n_parallel,
                                    .queue_size = -1,
                                    .n_ctx = instance_ctx(config),
                                    .force_embedding = config->force_embedding,
                                    .pooling = pooling_from(config->pooling),
                                    .mmproj_path =
                                        i == 0 && config->mmproj[0] ? config->mmproj : NULL};
        int actual = 0;
        enum load_failure why;
        struct errmsg err;
        errmsg_clear(&err);
        if (manager_load(manager, &args, &actual, &why, &err) != ERR_OK) {
            log_error("--model %s: %s", path, err.msg);
            return 1;
        }
    }
    return 0;
}

/* The --models-preset models: read and loaded at start (any failure is fatal, as for -m),
 * read again on SIGHUP (a bad file or a failed load is logged and the server keeps serving
 * what it has). loaded is what the last sync left loaded. */
struct presets_state {
    const struct server_config *config;
    struct manager *manager;
    struct preset_list *want, *loaded; // heap: each list is ~280 KiB
};

static int presets_reload(struct presets_state *ps, bool is_start)
{
    const struct server_config *c = ps->config;
    if (!c->models_preset[0]) {
        if (!is_start) log_info("SIGHUP: no --models-preset to read again");
        return 0;
    }
    struct errmsg err;
    errmsg_clear(&err);
    if (presets_read(c->models_preset, ps->want, &err) != ERR_OK) {
        log_error("--models-preset: %s%s", err.msg, is_start ? "" : " (models left as they were)");
        return 1;
    }
    struct preset_defaults d = {.n_parallel = c->n_parallel,
                                .n_ctx = c->n_ctx,
                                .is_kv_unified = c->is_kv_unified,
                                .is_embedding = c->force_embedding,
                                .is_reranking = c->reranking,
                                .pooling = c->pooling};
    int n_failed = presets_sync(ps->manager, ps->want, ps->loaded, &d);
    log_info("--models-preset %s: %d model(s) loaded from it, %d failed", c->models_preset,
             ps->loaded->n, n_failed);
    return n_failed ? 1 : 0;
}

#define TEMPLATE_FILE_MAX (1u << 20) // bytes of a --chat-template-file

/* The contents of a --chat-template-file (NUL-terminated), or NULL after logging why.
 * Caller frees with mem_free(). */
static char *read_template_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        log_error("--chat-template-file %s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = mem_alloc(TEMPLATE_FILE_MAX + 1);
    size_t n = text ? fread(text, 1, TEMPLATE_FILE_MAX + 1, f) : 0;
    bool is_ok = text && !ferror(f) && n <= TEMPLATE_FILE_MAX && n > 0;
    fclose(f);
    if (!is_ok) {
        log_error("--chat-template-file %s: %s", path,
                  !text    ? "out of memory"
                  : n == 0 ? "empty or unreadable"
                           : "larger than 1 MiB");
        mem_free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

/* Hands the vendor settings to the platforms and opens their runtimes. */
static void start_platforms(const struct server_config *config)
{
    struct vendor_config vc;
    memset(&vc, 0, sizeof vc);
    snprintf(vc.sysfs_root, sizeof vc.sysfs_root, "%s", config->sysfs_root);
    snprintf(vc.rkllm_lib, sizeof vc.rkllm_lib, "%s", config->rkllm_lib);
    snprintf(vc.rknn_lib, sizeof vc.rknn_lib, "%s", config->rknn_lib);
    snprintf(vc.rknn3_lib, sizeof vc.rknn3_lib, "%s", config->rknn3_lib);
    snprintf(vc.rkllm_abi, sizeof vc.rkllm_abi, "%s", config->rkllm_abi);
    vendor_configure(&vc);
    platform_start_all();
}

#define FD_RESERVE 256 // descriptors kept for model files, logs and the server's own

/* Every connection is a descriptor: raises the soft limit towards what --max-connections
 * needs (up to the hard limit), and says so when the hard limit is lower. */
static void raise_fd_limit(int max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = (rlim_t)max_connections + FD_RESERVE;
    if (rl.rlim_cur >= want) return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < want)
        log_warn("open files limited to %llu (ulimit -n): fewer than --max-connections %d "
                 "connections fit; the rest wait in the listen backlog",
                 (unsigned long long)rl.rlim_cur, max_connections);
}

struct deadline_guard {
    sigset_t set;
    double deadline_ms;
};

/* Watches the rest of the shutdown: a second signal exits at once (status 1), and reaching
 * the deadline exits 0 whatever is still being torn down (a stuck load, a slow unload), so
 * the process never outlives its --shutdown-timeout. */
static void *deadline_guard_main(void *arg)
{
    const struct deadline_guard *g = arg;
    for (;;) {
        double left_ms = g->deadline_ms - clock_now_ms();
        if (left_ms <= 0) break;
        struct timespec ts = {(time_t)(left_ms / 1000), (long)((int64_t)left_ms % 1000) * 1000000};
        int sig = sigtimedwait(&g->set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            log_warn("second %s: exiting now", sig == SIGINT ? "SIGINT" : "SIGTERM");
            _exit(1);
        }
    }
    log_warn("shutdown timeout reached: exiting now");
    _exit(0);
    return NULL;
}

static void start_deadline_guard(const sigset_t *set, double deadline_ms)
{
    static struct deadline_guard guard; // lives until the process exits
    guard.set = *set;
    guard.deadline_ms = deadline_ms;
    pthread_t t;
    if (pthread_create(&t, NULL, deadline_guard_main, &guard) == 0) pthread_detach(t);
}

/* The hub options every hub user of the server starts from (-hf here; hf:// model paths,
 * Ollama's pull and autoload through api_ctx.hub): built once from the flags, so the API layer
 * never reads the server's configuration. Borrows c's strings. */
static struct hub_opts hub_opts_of(const struct server_config *c)
{
    return (struct hub_opts){.hub_url = c->hub_url,
                             .token = c->hf_token[0] ? c->hf_token : NULL,
                             .models_dir = c->models_dir,
                             .is_offline = c->is_offline,
                             .n_retries = 3,
                             .retry_delay_ms = 1000};
}

static int serve(const struct server_config *config)
{
    int n_threads = config->n_threads;
    if (config->cpu_mask[0]) {
        struct cpu_mask mask;
        if (thread_cpu_mask_parse(config->cpu_mask, &mask) != ERR_OK) {
            log_error("--cpu-mask %s: not a hexadecimal CPU mask with at least one CPU (e.g. f0)",
                      config->cpu_mask);
            return 1;
        }
        threadpool_set_cpu_mask(&mask); // before any model's pool exists
        if (n_threads == 0) n_threads = thread_cpu_mask_count(&mask);
    }
    sigset_t set;
    block_signals(&set);
    start_platforms(config);
    raise_fd_limit(config->max_connections);
    struct manager_config mc = {
        .default_queue_size = config->request_queue_size,
        .n_threads = n_threads,
        .memory_limit = (uint64_t)config->memory_limit_mib << 20,
        .models_max = config->models_max,
    };
    snprintf(mc.models_dir, sizeof mc.models_dir, "%s", config->models_dir);
    char *file_template = NULL; // freed after the manager, which borrows it
    if (config->chat_template_file[0] &&
        !(file_template = read_template_file(config->chat_template_file)))
        return 1;
    mc.chat_template = file_template              ? file_template
                       : config->chat_template[0] ? config->chat_template
                                                  : NULL;
    struct manager *manager = NULL;
    if (manager_new(&mc, &manager) != ERR_OK) {
        log_error("out of memory");
        mem_free(file_template);
        return 1;
    }
    atomic_bool is_starting; // read by HTTP threads while the -m models load; outlives them
    atomic_init(&is_starting, config->n_model_paths > 0 || config->models_preset[0]);

    struct media_path media;
    media_path_init_disabled(&media);
    struct errmsg merr;
    errmsg_clear(&merr);
    if (config->media_path[0] && media_path_init(&media, config->media_path, &merr) != ERR_OK) {
        log_error("--media-path: %s", merr.msg);
        manager_free(manager);
        mem_free(file_template);
        return 1;
    }
    struct metrics metrics; // outlives the HTTP server, which is stopped first
    metrics_init(&metrics);
    const struct hub_opts hub = hub_opts_of(config);
    struct api_ctx ctx = {
        .manager = manager,
        .hub = &hub,
        .started_unix_s = clock_unix_s(),
        .gen_defaults = &config->gen_defaults,
        .metrics = &metrics,
        .version = LLAMAPI_VERSION,
        .is_metrics_enabled = config->metrics_enabled,
        .is_cors_proxy_enabled = config->cors_proxy_enabled,
        .is_slots_disabled = config->slots_disabled,
        .load_instances = config->n_parallel,
        .load_n_ctx = instance_ctx(config),
        .models_dir = config->models_dir,
        // Like llama-server, requests load models themselves only in router mode (no -m).
        .is_autoload_disabled = config->no_models_autoload || config->n_model_paths > 0,
        .media_path = &media,
        .is_starting = &is_starting,
        .model_aliases = config->alias,
        .model_tags = config->tags,
        .is_single_model = config->n_model_paths == 1,
        .is_verbose = config->verbosity > 0,
        .slot_save_path = config->slot_save_path[0] ? config->slot_save_path : NULL,
        .is_webui_disabled = config->is_webui_disabled,
    };
    if (response_store_new(&ctx.responses) != ERR_OK) {
        log_error("out of memory");
        manager_free(manager);
        media_path_deinit(&media);
        mem_free(file_template);
        return 1;
    }
    struct http_server *http = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    if (http_server_start(config, &ctx, &http, &err) != ERR_OK) {
        log_error("%s", err.msg);
        response_store_free(ctx.responses);
        manager_free(manager);
        media_path_deinit(&media);
        mem_free(file_template);
        return 1;
    }
    if (!is_loopback(config->host) && config->n_api_keys == 0)
        log_warn("listening on %s without --api-key: anyone who can reach it can use it",
                 config->host);
    // HTTP is up while start-up models load: /health answers, the models show as loading,
    // and requests for them wait until they are ready.
    log_listening(config->host, http_server_port(http));
    if (!config->is_webui_disabled) log_info("chat page: open that address in a browser");
    if (config->cors_proxy_enabled)
        log_warn("--ui-mcp-proxy: /cors-proxy is on; every client that may call this server can "
                 "make it fetch what this host reaches");
    struct presets_state presets = {config, manager, mem_alloc(sizeof(struct preset_list)),
                                    mem_alloc(sizeof(struct preset_list))};
    int startup_rc = presets.want && presets.loaded ? 0 : 1;
    if (startup_rc == 0) {
        presets.loaded->n = 0;
        startup_rc = load_startup_models(config, manager);
    }
    if (startup_rc == 0) startup_rc = presets_reload(&presets, true);
    atomic_store(&is_starting, false);
    if (startup_rc != 0) {
        http_server_stop(http);
        response_store_free(ctx.responses);
        manager_free(manager);
        media_path_deinit(&media);
        mem_free(file_template);
        mem_free(presets.want);
        mem_free(presets.loaded);
        return 1;
    }
    log_info("ready");
    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
        log_info("received SIGHUP: reading --models-preset again");
        presets_reload(&presets, false);
    }
    log_info("received %s, shutting down (at most %d s; a second signal exits at once)",
             sig == SIGINT ? "SIGINT" : "SIGTERM", config->shutdown_timeout_s);
    const double deadline_ms = clock_now_ms() + config->shutdown_timeout_s * 1000.0;
    start_deadline_guard(&set, deadline_ms);
    http_server_begin_shutdown(http);
    if (!http_server_wait_idle(http, (int)(deadline_ms - clock_now_ms()))) {
        // A handler still holds its connection; tearing down under it is not safe.
        log_warn("requests still running at the shutdown deadline: exiting now");
        _exit(0);
    }
    // Every handler has answered; models go before the HTTP server so a vendor runtime's
    // abort and destroy run while the process is still whole.
    manager_unload_all(manager);
    http_server_stop(http);
    response_store_free(ctx.responses);
    manager_free(manager);
    platform_stop_all();
    media_path_deinit(&media);
    mem_free(file_template);
    mem_free(presets.want);
    mem_free(presets.loaded);
    return 0;
}

/* -hf (with -hff): the hub model, cached or downloaded into --models-dir, becomes the first
 * start-up model (so --alias names it). Returns 0, or 1 after logging why. */
static int add_hub_model(struct server_config *c)
{
    if (!c->hf_repo[0]) return 0;
    char ref[sizeof c->hf_repo + sizeof c->hf_file + 2], path[PATH_MAX];
    size_t repo_len = strcspn(c->hf_repo, ":");
    if (c->hf_file[0]) // a file of the repository: the quant part does not apply
        snprintf(ref, sizeof ref, "%.*s/%s", (int)repo_len, c->hf_repo, c->hf_file);
    else
        snprintf(ref, sizeof ref, "%s", c->hf_repo);
    struct hub_log_progress progress = {0};
    struct hub_opts o = hub_opts_of(c);
    o.progress = hub_log_progress;
    o.progress_user = &progress;
    enum hub_failure why;
    struct errmsg err;
    errmsg_clear(&err);
    if (hub_resolve(&o, ref, path, sizeof path, &why, &err) != ERR_OK) {
        log_error("--hf-repo %s: %s", ref, err.msg);
        return 1;
    }
    int part, n_parts;
    hub_split_info(path, NULL, 0, &part, &n_parts);
    if (n_parts > 1) {
        log_error("--hf-repo %s: %s is split in %d files (downloaded); models load from one GGUF "
                  "file: merge the parts (llama-gguf-split --merge) and pass the result with -m",
                  ref, path, n_parts);
        return 1;
    }
    if (c->n_model_paths >= CONFIG_MAX_MODELS) {
        log_error("--hf-repo: at most %d models at start-up", CONFIG_MAX_MODELS);
        return 1;
    }
    char *copy = mem_strdup(path);
    if (!copy) return 1;
    memmove(c->model_paths + 1, c->model_paths, (size_t)c->n_model_paths * sizeof copy);
    c->model_paths[0] = copy;
    c->n_model_paths++;
    log_info("--hf-repo %s: %s", ref, path);
    return 0;
}

int main(int argc, char **argv)
{
    struct server_config config;
    config_defaults(&config);
    struct errmsg err;
    errmsg_clear(&err);
    int rc = config_parse(&config, argc, argv, &err);
    if (rc < 0) {
        fprintf(stderr, "llamapi-server: %s\n", err.msg[0] ? err.msg : "invalid arguments");
        config_deinit(&config);
        return 2;
    }
    if (rc == CONFIG_PARSE_HELP || rc == CONFIG_PARSE_VERSION) {
        static char usage[64 * 1024];
        if (rc == CONFIG_PARSE_HELP)
            config_usage("llamapi-server", usage, sizeof usage);
        else
            snprintf(usage, sizeof usage, "llamapi-server %s\n", LLAMAPI_VERSION);
        fputs(usage, stdout);
        config_deinit(&config);
        return 0;
    }
    log_set_level(config.log_disable ? LOG_LEVEL_OFF
                  : config.verbosity ? LOG_LEVEL_DEBUG
                                     : LOG_LEVEL_INFO);
    if (config.ignored_flags[0])
        log_warn("llama-server flags with no effect here (tuning done differently, see --help): "
                 "%s",
                 config.ignored_flags);
    curl_global_init(CURL_GLOBAL_DEFAULT); // before any thread: the hub client uses libcurl
    int status = add_hub_model(&config);
    if (status == 0) status = serve(&config);
    curl_global_cleanup();
    config_deinit(&config);
    return status;
}
