/* Server configuration: defaults, then LLAMAPI_* environment variables, then flags. Filled
 * once at start-up and immutable afterwards (shared read-only by every thread). */
#ifndef SERVER_CONFIG_H
#define SERVER_CONFIG_H

#include "platform/request.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>

#define CONFIG_MAX_API_KEYS 16
#define CONFIG_MAX_MODELS   16

enum log_format {
    LOG_FORMAT_TEXT = 0,
    LOG_FORMAT_JSON = 1,
};

struct server_config {
    char host[256];
    int port;
    char *api_keys[CONFIG_MAX_API_KEYS]; // owned copies
    int n_api_keys;
    int n_threads;       // engine threads per model; 0 = big cores on big.LITTLE, else physical
    char cpu_mask[300];  // --cpu-mask: hex CPU mask compute threads are pinned to; "" = none
    int max_connections; // total concurrent connections
    int max_connections_per_ip; // --max-connections-per-address; 0: no limit
    int min_body_rate;          // body bytes per second, averaged after a grace (0: no minimum)
    int header_timeout_s;       // request line + headers, from accept (or the request line)
    int timeout_s;              // idle connection timeout
    int shutdown_timeout_s;     // SIGTERM to exit, at most
    char models_dir[1024];
    char hf_repo[512];      // -hf org/repo[:QUANT]: a start-up model from the hub ("" = none)
    char hf_file[512];      // -hff: a file of --hf-repo instead of the quant choice ("" = none)
    char hf_token[512];     // --hf-token (HF_TOKEN): the hub's bearer token ("" = none)
    char hub_url[512];      // --hub-url: the hub's address, no trailing '/'
    bool is_offline;        // --offline: hub models only from models_dir, never downloaded
    int request_queue_size; // default queue capacity per model
    enum log_format log_format;
    int verbosity; // 0 normal, 1 verbose (debug)
    bool log_disable;
    char *model_paths[CONFIG_MAX_MODELS]; // -m, owned copies
    int n_model_paths;
    char alias[256];                // -a: id of the first -m model (default: file name)
    int n_parallel;                 // -np: instances of each -m model
    int n_ctx;                      // -c: context per instance (0: model default, capped at 4096)
    int memory_limit_mib;           // budget for instance KV caches (0: 75% of available memory)
    char media_path[1024];          // root for file:// image parts; empty: local files refused
    struct gen_params gen_defaults; // --temp, --top-k, -n, …: sampling defaults for requests
    bool metrics_enabled;           // --metrics: GET /metrics
    bool cors_proxy_enabled;        // --ui-mcp-proxy: GET/POST /cors-proxy
    bool slots_disabled;            // --no-slots: GET /slots answers 501
    bool props_enabled;             // --props (accepted; POST /props is not implemented)
    bool force_embedding;           // --embedding(s): serve the -m models as embedding models
    bool reranking;                 // --reranking: sets force_embedding and pooling "rank"
    bool no_models_autoload;        // --no-models-autoload: requests never load models themselves
    int models_max;                 // --models-max (accepted; 0 = unlimited)
    int n_ubatch;                   // -ub (accepted)
    char pooling[16];               // --pooling: none, mean, cls, last, rank, or "" (the file's)
    char reasoning_format[32];      // --reasoning-format (accepted: none, deepseek, auto, …)
    char chat_template[8192];       // --chat-template: a built-in name or Jinja source, every model
    char chat_template_file[1024];  // --chat-template-file FILE
    char rkllm_lib[1024];           // --rkllm-lib: the RKLLM runtime ("": librkllmrt.so)
    char rknn_lib[1024];            // --rknn-lib: the RKNN runtime ("": librknnrt.so)
    char rknn3_lib[1024];           // --rknn3-lib: the RKNN3 runtime ("": librknn3_api.so)
    char rkllm_abi[8];              // --rkllm-abi: 1.2 or 1.3 (models' model.json "abi" wins)
    char sysfs_root[1024];          // --sysfs-root: host files are read under this ("/")
    char tags[256];                 // --tags: comma-separated tags of the first -m model
    char mmproj[4096];              // --mmproj: multimodal projector of the first -m model
    char slot_save_path[1024];      // --slot-save-path DIR ("": POST /slots/{id} is off)
    bool is_kv_unified;             // --kv-unified: each instance gets the whole -c
    char cors_origins[1024];        // --cors-origins: "*", "localhost" or exact origins (never "")
    char cors_methods[256];         // --cors-methods: preflight Allow-Methods
    char cors_headers[256];         // --cors-headers: preflight Allow-Headers
    bool is_cors_no_credentials;    // --no-cors-credentials: origins "*" answers "*"
    char tools[256];                // --tools (accepted; only its CORS default applies)
    char ignored_flags[1024];       // llama-server flags accepted without effect, space-separated
    char config_file[1024];         // --config FILE that was read ("" = none)
    char models_preset[1024];       // --models-preset FILE: models loaded at start and on SIGHUP
    bool is_webui_disabled;         // --no-webui: no chat page on GET /
};

enum config_parse_result {
    CONFIG_PARSE_OK = 0,      // run the server
    CONFIG_PARSE_HELP = 1,    // --help was given
    CONFIG_PARSE_VERSION = 2, // --version was given
};

/* Sets every field to its default. Cannot fail (an unreadable environment gives the
 * documented fallbacks). */
void config_defaults(struct server_config *c);

/* Applies LLAMAPI_* environment variables, then argv[1..argc-1]. Returns a config_parse_result
 * (>= 0) or ERR_INVALID with err naming the flag and what is wrong (unknown flag, missing or
 * malformed value, unreadable --api-key-file). ERR_NOMEM on allocation failure. */
int config_parse(struct server_config *c, int argc, char **argv, struct errmsg *err);

/* Sets one option as a config file line `key = value` does: key is a long flag without its
 * dashes ("port", "api-key"); switches take exactly true or false; repeatable options append.
 * ERR_OK, or ERR_INVALID / ERR_UNSUPPORTED with err saying what is wrong (unknown key, bad
 * value, a key a file cannot set such as help or config), ERR_NOMEM. */
int config_set(struct server_config *c, const char *key, const char *value, struct errmsg *err);

/* Frees the owned strings. A no-op on a defaulted config. */
void config_deinit(struct server_config *c);

/* Writes the usage text (every flag, its environment variable and default). */
void config_usage(const char *prog, char *out, size_t out_cap);

#endif
