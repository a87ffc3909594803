/* Flag and environment parsing, driven by one option table so every flag has exactly one
 * definition of its name, environment variable, value type, range and help text. */
#include "server/config.h"

#include "hub/hub.h"
#include "server/config_file.h"
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
    OPT_TUNING,       // llama-server tuning we do differently: accepted, listed in one warning
    OPT_TUNING_FLAG,  // the same, without a value
    OPT_REFUSED,      // needs what we cannot do: start-up fails with the help text as reason
    OPT_REFUSED_FLAG, // the same, without a value
    OPT_CONFIG,       // --config FILE: read before the environment and the other flags
};

struct opt {
    const char *name;  // long flag
    const char *alias; // other spellings, space-separated ("-t", "-hf -hfr"), or NULL
    const char *env;   // environment variable or NULL
    enum opt_kind kind;
    size_t offset; // field in struct server_config
    size_t size;   // bytes, for OPT_STRING
    long min, max; // for OPT_INT, OPT_INT64, OPT_FLOAT
    const char *help;
    const char *llama_env; // llama-server's LLAMA_ARG_* variable or NULL
    const char *choices;   // for OPT_CHOICE: "a|b|c"
};

/* Rows for llama-server flags that do not map onto anything here (help = the reason). */
/* Why a llama-server flag has no effect here (or is refused), shared by the rows below. */
#define WHY_SPECULATIVE      "speculative decoding is not implemented (it only changes speed)"
#define WHY_PLACEMENT        "placement and loading tuning: the engine's thread pool and mmap decide"
#define WHY_KV_CACHE         "KV-cache tuning: each instance keeps its own F16 cache and prefix"
#define WHY_SAMPLER          "sampler not implemented; server-wide default ignored"
#define WHY_PRESET           "presets download models, which is not supported"
#define WHY_TEMPLATE_PARSING "reasoning and parsing follow the template"
#define WHY_MMPROJ           "multimodal projector tuning (projectors run on the CPU)"
#define WHY_NO_WEBUI         "the built-in chat page is fixed: no other files, settings or tools"
#define WHY_DOWNLOAD         "downloading models is not supported; download the file and pass it with -m"

#define ROW_TUNING(name, alias, help)                                                              \
    {                                                                                              \
        name, alias, NULL, OPT_TUNING, 0, 0, 0, 0, help, NULL, NULL                                \
    }
#define ROW_TUNING_FLAG(name, alias, help)                                                         \
    {                                                                                              \
        name, alias, NULL, OPT_TUNING_FLAG, 0, 0, 0, 0, help, NULL, NULL                           \
    }
#define ROW_REFUSED(name, alias, help)                                                             \
    {                                                                                              \
        name, alias, NULL, OPT_REFUSED, 0, 0, 0, 0, help, NULL, NULL                               \
    }
#define ROW_REFUSED_FLAG(name, alias, help)                                                        \
    {                                                                                              \
        name, alias, NULL, OPT_REFUSED_FLAG, 0, 0, 0, 0, help, NULL, NULL                          \
    }

#define FIELD(f) offsetof(struct server_config, f), sizeof(((struct server_config *)0)->f)

#define GEN(f)                                                                                     \
    offsetof(struct server_config, gen_defaults.f),                                                \
        sizeof(((struct server_config *)0)->gen_defaults.f)

/* llama-server's flags keep its spelling and meaning (common/arg.cpp), including its
 * LLAMA_ARG_* variables; LLAMAPI_* variables win over those, flags over both. */
static const struct opt options[] = {
    {"--host", NULL, "LLAMAPI_HOST", OPT_STRING, FIELD(host), 0, 0,
     "addresses to bind, comma-separated (IPv4, IPv6 or a name in /etc/hosts)", "LLAMA_ARG_HOST",
     NULL},
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
    {"--max-connections-per-address", NULL, "LLAMAPI_MAX_CONNECTIONS_PER_ADDRESS", OPT_INT,
     FIELD(max_connections_per_ip), 0, 1 << 20,
     "connections from one client address (0 = no limit; behind a reverse proxy every client "
     "shares its address)",
     NULL, NULL},
    {"--header-timeout", NULL, "LLAMAPI_HEADER_TIMEOUT", OPT_INT, FIELD(header_timeout_s), 1, 3600,
     "seconds for a request's line and headers to arrive, however slowly they trickle", NULL, NULL},
    {"--min-body-rate", NULL, "LLAMAPI_MIN_BODY_RATE", OPT_INT, FIELD(min_body_rate), 0, 1 << 30,
     "bytes per second a request body must average after a grace of --header-timeout (0 = no "
     "minimum)",
     NULL, NULL},
    {"--shutdown-timeout", NULL, "LLAMAPI_SHUTDOWN_TIMEOUT", OPT_INT, FIELD(shutdown_timeout_s), 1,
     3600, "seconds from SIGTERM/SIGINT to exit; a second signal exits at once", NULL, NULL},
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
     "model id of the first --model (default: its file name); a comma-separated list gives it "
     "several names (the id is the first in sorted order)",
     "LLAMA_ARG_ALIAS", NULL},
    {"--tags", NULL, "LLAMAPI_TAGS", OPT_STRING, FIELD(tags), 0, 0,
     "comma-separated tags of the first --model, listed in GET /v1/models", "LLAMA_ARG_TAGS", NULL},
    {"--parallel", "-np", "LLAMAPI_PARALLEL", OPT_INT, FIELD(n_parallel), 1, 64,
     "instances of each --model", "LLAMA_ARG_N_PARALLEL", NULL},
    {"--ctx-size", "-c", "LLAMAPI_CTX_SIZE", OPT_INT, FIELD(n_ctx), 0, 1 << 20,
     "context of the -np instances together, as in llama-server: each gets -c / -np tokens "
     "(0 = each gets the model's, capped at 4096)",
     "LLAMA_ARG_CTX_SIZE", NULL},
    {"--batch-size", "-b", NULL, OPT_INT, GEN(n_batch), 1, 1 << 20,
     "prompt tokens a request feeds per step at most (default 2048; a step holds 512 in all)",
     "LLAMA_ARG_BATCH", NULL},
    {"--ubatch-size", "-ub", NULL, OPT_INT, FIELD(n_ubatch), 1, 1 << 20,
     "physical batch size (accepted)", "LLAMA_ARG_UBATCH", NULL},
    {"--n-predict", "-n --predict", NULL, OPT_INT, GEN(max_tokens), -1, INT32_MAX,
     "default tokens to generate (-1 = until a stop)", "LLAMA_ARG_N_PREDICT", NULL},
    {"--temp", "--temperature", NULL, OPT_FLOAT, GEN(temperature), 0, 2, "default temperature",
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
    {"--embedding", "--embeddings", NULL, OPT_FLAG, FIELD(force_embedding), 0, 0,
     "serve the --model models as embedding models", "LLAMA_ARG_EMBEDDINGS", NULL},
    {"--pooling", NULL, NULL, OPT_CHOICE, FIELD(pooling), 0, 0,
     "pooling of the --model embedding models (default: the file's; else mean for encoders, "
     "last for decoders; none: per-token vectors on /embedding, encoders only; rank: rerankers)",
     "LLAMA_ARG_POOLING", "none|mean|cls|last|rank"},
    {"--reranking", "--rerank", NULL, OPT_FLAG, FIELD(reranking), 0, 0,
     "serve the --model models as rerankers (embedding models with pooling rank) for "
     "/v1/rerank",
     "LLAMA_ARG_RERANKING", NULL},
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
    {"--rkllm-lib", NULL, "LLAMAPI_RKLLM_LIB", OPT_STRING, FIELD(rkllm_lib), 0, 0,
     "RKLLM runtime library for the rkllm platform (default librkllmrt.so, searched as the "
     "dynamic loader does)",
     NULL, NULL},
    {"--rknn-lib", NULL, "LLAMAPI_RKNN_LIB", OPT_STRING, FIELD(rknn_lib), 0, 0,
     "RKNN runtime library for the rknn2 platform (default librknnrt.so)", NULL, NULL},
    {"--rknn3-lib", NULL, "LLAMAPI_RKNN3_LIB", OPT_STRING, FIELD(rknn3_lib), 0, 0,
     "RKNN3 runtime library for the rknn3 platform (default librknn3_api.so)", NULL, NULL},
    {"--rkllm-abi", NULL, "LLAMAPI_RKLLM_ABI", OPT_CHOICE, FIELD(rkllm_abi), 0, 0,
     "RKLLM runtime ABI, overriding the one detected from the library (1.2: runtimes "
     "1.2.1-1.2.3, 1.3: 1.3.0)",
     NULL, "1.2|1.3"},
    {"--sysfs-root", NULL, "LLAMAPI_SYSFS_ROOT", OPT_STRING, FIELD(sysfs_root), 0, 0,
     "read host files (device tree, NPU driver version) under this directory (default /)", NULL,
     NULL},
    {"--reasoning-format", NULL, NULL, OPT_CHOICE, FIELD(reasoning_format), 0, 0,
     "reasoning output format (accepted; detected from the template)", NULL,
     "none|deepseek|deepseek-legacy|auto"},
    {"--cont-batching", "-cb", NULL, OPT_FLAG, 0, 0, 0, 0, "continuous batching (always on)",
     "LLAMA_ARG_CONT_BATCHING", NULL},
    {"--no-cont-batching", "-nocb", NULL, OPT_FLAG, 0, 0, 0, 0, "accepted; batching stays on", NULL,
     NULL},
    {"--no-webui", "--no-ui", "LLAMAPI_NO_WEBUI", OPT_FLAG, FIELD(is_webui_disabled), 0, 0,
     "no chat page on GET / (404 as any unknown path)", NULL, NULL},
    {"--webui", "--ui", NULL, OPT_FLAG_NEG, FIELD(is_webui_disabled), 0, 0,
     "serve the chat page on GET / (the default)", "LLAMA_ARG_UI", NULL},
    {"--n-gpu-layers", "-ngl --gpu-layers", NULL, OPT_GPU, 0, 0, 0, 0, "GPU only: no effect",
     "LLAMA_ARG_N_GPU_LAYERS", NULL},
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
    {"--no-kv-offload", "-nkvo", NULL, OPT_TUNING_FLAG, 0, 0, 0, 0, "GPU only: no effect", NULL,
     NULL},
    ROW_TUNING_FLAG("--kv-offload", "-kvo", "GPU only: no effect"),
    {"--memory-limit", NULL, "LLAMAPI_MEMORY_LIMIT", OPT_INT, FIELD(memory_limit_mib), 0, 1 << 24,
     "MiB for instance KV caches (0 = 75% of available memory)", NULL, NULL},
    {"--media-path", NULL, "LLAMAPI_MEDIA_PATH", OPT_STRING, FIELD(media_path), 0, 0,
     "directory file:// image parts may read from (default: none)", NULL, NULL},
    {"--log-format", NULL, "LLAMAPI_LOG_FORMAT", OPT_LOG_FORMAT, 0, 0, 0, 0,
     "access log format: text or json", NULL, NULL},
    {"--log-disable", NULL, "LLAMAPI_LOG_DISABLE", OPT_FLAG, FIELD(log_disable), 0, 0, "no logging",
     NULL, NULL},
    {"--verbose", "-v --log-verbose", "LLAMAPI_VERBOSE", OPT_VERBOSE, 0, 0, 0, 0,
     "debug logging, and a __verbose object (prompt, generated text) in chat answers", NULL, NULL},
    ROW_TUNING("--log-verbosity", "-lv --verbosity", "logging: see --verbose"),
    {"--help", "-h --usage", NULL, OPT_HELP, 0, 0, 0, 0, "show this help", NULL, NULL},
    {"--version", NULL, NULL, OPT_VERSION, 0, 0, 0, 0, "show the version", NULL, NULL},
    {"--config", NULL, NULL, OPT_CONFIG, 0, 0, 0, 0,
     "read flags from FILE first: one 'key = value' line per flag (key: the long flag without "
     "dashes; true/false for switches); the environment and command-line flags override it",
     NULL, NULL},
    {"--models-preset", NULL, "LLAMAPI_MODELS_PRESET", OPT_STRING, FIELD(models_preset), 0, 0,
     "INI file of models to load at start, one [id] section each (model, parallel, ctx-size, "
     "…); SIGHUP reads it again: new models load, removed ones unload, the rest keep serving",
     "LLAMA_ARG_MODELS_PRESET", NULL},
    {"--slot-save-path", NULL, "LLAMAPI_SLOT_SAVE_PATH", OPT_STRING, FIELD(slot_save_path), 0, 0,
     "directory for POST /slots/{id}?action=save|restore (off without it)", NULL, NULL},
    {"--context-shift", NULL, NULL, OPT_FLAG, GEN(is_context_shift), 0, 0,
     "when a generation fills the context, drop the older half after the first tokens and go "
     "on (default: off: it ends with finish_reason length)",
     "LLAMA_ARG_CONTEXT_SHIFT", NULL},
    {"--no-context-shift", NULL, NULL, OPT_FLAG_NEG, GEN(is_context_shift), 0, 0,
     "a generation that fills the context ends (default)", NULL, NULL},
    {"--cors-origins", NULL, "LLAMAPI_CORS_ORIGINS", OPT_STRING, FIELD(cors_origins), 0, 0,
     "comma-separated origins CORS answers allow: '*', 'localhost' (any loopback origin) or "
     "exact origins (default: '*', or 'localhost' with --tools)",
     "LLAMA_ARG_CORS_ORIGINS", NULL},
    {"--kv-unified", "-kvu", NULL, OPT_FLAG, FIELD(is_kv_unified), 0, 0,
     "every instance may use the whole -c context (llama-server's unified KV cache; here each "
     "instance still has its own cache, so memory is -np times -c)",
     "LLAMA_ARG_KV_UNIFIED", NULL},
    {"--no-kv-unified", "-no-kvu", NULL, OPT_FLAG_NEG, FIELD(is_kv_unified), 0, 0,
     "each instance gets -c / -np tokens (default)", NULL, NULL},
    {"--cors-methods", NULL, NULL, OPT_STRING, FIELD(cors_methods), 0, 0,
     "Access-Control-Allow-Methods of preflight answers (default: GET, POST, DELETE, OPTIONS)",
     "LLAMA_ARG_CORS_METHODS", NULL},
    {"--cors-headers", NULL, NULL, OPT_STRING, FIELD(cors_headers), 0, 0,
     "Access-Control-Allow-Headers of preflight answers (default: *; browsers need "
     "Authorization named to send it cross-origin)",
     "LLAMA_ARG_CORS_HEADERS", NULL},
    {"--cors-credentials", NULL, NULL, OPT_FLAG_NEG, FIELD(is_cors_no_credentials), 0, 0,
     "allow credentials: origins '*' then reflects the request's Origin (default)",
     "LLAMA_ARG_CORS_CREDENTIALS", NULL},
    {"--no-cors-credentials", NULL, NULL, OPT_FLAG, FIELD(is_cors_no_credentials), 0, 0,
     "no credentials: origins '*' answers '*'", NULL, NULL},
    {"--tools", NULL, NULL, OPT_STRING, FIELD(tools), 0, 0,
     "accepted; there are no server-side tools (CORS then defaults to localhost origins)",
     "LLAMA_ARG_TOOLS", NULL},
    {"--mirostat", NULL, NULL, OPT_INT, GEN(mirostat), 0, 2,
     "default Mirostat: 0 off, 1 or 2 (replaces top-k/top-p/min-p)", NULL, NULL},
    {"--mirostat-lr", NULL, NULL, OPT_FLOAT, GEN(mirostat_eta), 0, 1,
     "default Mirostat learning rate (eta, 0.1)", NULL, NULL},
    {"--mirostat-ent", NULL, NULL, OPT_FLOAT, GEN(mirostat_tau), 0, 100,
     "default Mirostat target entropy (tau, 5.0)", NULL, NULL},
    {"--ignore-eos", NULL, NULL, OPT_FLAG, GEN(ignore_eos), 0, 0,
     "default ignore_eos: end-of-generation tokens are never sampled", NULL, NULL},
    /* Models from a Hugging Face-compatible hub (src/hub/): -hf and hf:// model paths. */
    {"--hf-repo", "-hf -hfr", "LLAMAPI_HF_REPO", OPT_STRING, FIELD(hf_repo), 0, 0,
     "load org/repo[:QUANT] from the hub at start-up (downloaded into --models-dir unless there)",
     "LLAMA_ARG_HF_REPO", NULL},
    {"--hf-file", "-hff", "LLAMAPI_HF_FILE", OPT_STRING, FIELD(hf_file), 0, 0,
     "with --hf-repo: this file of the repository instead of the quant choice", "LLAMA_ARG_HF_FILE",
     NULL},
    {"--hf-token", "-hft", "HF_TOKEN", OPT_STRING, FIELD(hf_token), 0, 0,
     "bearer token for the hub (gated and private models)", NULL, NULL},
    {"--hub-url", NULL, "LLAMAPI_HUB_URL", OPT_STRING, FIELD(hub_url), 0, 0,
     "the hub's address (default $MODEL_ENDPOINT, $HF_ENDPOINT or https://huggingface.co)", NULL,
     NULL},
    {"--offline", NULL, "LLAMAPI_OFFLINE", OPT_FLAG, FIELD(is_offline), 0, 0,
     "never download: hub models only from what --models-dir holds", "LLAMA_ARG_OFFLINE", NULL},
    ROW_REFUSED_FLAG(
        "--cache-list", "-cl",
        "there is no model cache (models are files given with -m or under --models-dir)"),
    ROW_REFUSED_FLAG("--completion-bash", NULL, "not available"),
    ROW_TUNING("--threads-batch", "-tb", WHY_PLACEMENT),
    ROW_TUNING("--cpu-mask", "-C", WHY_PLACEMENT),
    ROW_TUNING("--cpu-range", "-Cr", WHY_PLACEMENT),
    ROW_TUNING("--cpu-strict", NULL, WHY_PLACEMENT),
    ROW_TUNING("--prio", NULL, WHY_PLACEMENT),
    ROW_TUNING("--poll", NULL, WHY_PLACEMENT),
    ROW_TUNING("--cpu-mask-batch", "-Cb", WHY_PLACEMENT),
    ROW_TUNING("--cpu-range-batch", "-Crb", WHY_PLACEMENT),
    ROW_TUNING("--cpu-strict-batch", NULL, WHY_PLACEMENT),
    ROW_TUNING("--prio-batch", NULL, WHY_PLACEMENT),
    ROW_TUNING("--poll-batch", NULL, WHY_PLACEMENT),
    ROW_TUNING("--lookup-cache-static", "-lcs", WHY_KV_CACHE),
    ROW_TUNING("--lookup-cache-dynamic", "-lcd", WHY_KV_CACHE),
    ROW_TUNING("--kv-unified-per-slot", NULL, WHY_KV_CACHE),
    ROW_TUNING("--keep", NULL, WHY_KV_CACHE),
    ROW_TUNING_FLAG("--swa-full", NULL, WHY_KV_CACHE),
    ROW_TUNING("--swa-checkpoints", "-ctxcp --ctx-checkpoints", WHY_KV_CACHE),
    ROW_TUNING("--checkpoint-min-step", "-cms", WHY_KV_CACHE),
    ROW_TUNING("--cache-ram", "-cram", WHY_KV_CACHE),
    ROW_TUNING_FLAG("--cache-idle-slots", NULL, WHY_KV_CACHE),
    ROW_TUNING_FLAG("--no-cache-idle-slots", NULL, WHY_KV_CACHE),
    ROW_TUNING_FLAG("--perf", NULL, WHY_PLACEMENT),
    ROW_TUNING_FLAG("--no-perf", NULL, WHY_PLACEMENT),
    ROW_TUNING_FLAG("--escape", "-e", "command-line tool option"),
    ROW_TUNING_FLAG("--no-escape", NULL, "command-line tool option"),
    ROW_TUNING("--reverse-prompt", "-r", "command-line tool option"),
    ROW_TUNING_FLAG("--special", "-sp", WHY_SPECULATIVE),
    ROW_TUNING_FLAG("--warmup", NULL, WHY_PLACEMENT),
    ROW_TUNING_FLAG("--no-warmup", NULL, WHY_PLACEMENT),
    ROW_TUNING_FLAG("--spm-infill", NULL, "command-line tool option"),
    ROW_TUNING("--samplers", NULL, WHY_SAMPLER),
    ROW_TUNING("--sampling-seq", "--sampler-seq", WHY_SAMPLER),
    ROW_TUNING("--top-n-sigma", "--top-nsigma", WHY_SAMPLER),
    ROW_TUNING("--xtc-probability", NULL, WHY_SAMPLER),
    ROW_TUNING("--xtc-threshold", NULL, WHY_SAMPLER),
    ROW_TUNING("--typical-p", "--typical", WHY_SAMPLER),
    ROW_TUNING("--dry-multiplier", NULL, WHY_SAMPLER),
    ROW_TUNING("--dry-base", NULL, WHY_SAMPLER),
    ROW_TUNING("--dry-allowed-length", NULL, WHY_SAMPLER),
    ROW_TUNING("--dry-penalty-last-n", NULL, WHY_SAMPLER),
    ROW_TUNING("--dry-sequence-breaker", NULL, WHY_SAMPLER),
    ROW_TUNING("--adaptive-target", NULL, WHY_SAMPLER),
    ROW_TUNING("--adaptive-decay", NULL, WHY_SAMPLER),
    ROW_TUNING("--dynatemp-range", NULL, WHY_SAMPLER),
    ROW_TUNING("--dynatemp-exp", NULL, WHY_SAMPLER),
    ROW_REFUSED("--logit-bias", "-l",
                "a server-wide logit bias is not supported; send \"logit_bias\" per request"),
    ROW_REFUSED("--grammar", NULL,
                "a server-wide grammar is not supported; send \"grammar\" per request"),
    ROW_REFUSED("--grammar-file", NULL,
                "a server-wide grammar is not supported; send \"grammar\" per request"),
    ROW_REFUSED("--json-schema", "-j",
                "a server-wide JSON schema is not supported; send \"json_schema\" per request"),
    ROW_REFUSED("--json-schema-file", "-jf",
                "a server-wide JSON schema is not supported; send \"json_schema\" per request"),
    ROW_TUNING_FLAG("--backend-sampling", "-bs", "sampling always runs on the CPU"),
    ROW_REFUSED("--rope-scaling", NULL, "overriding the model's RoPE scaling is not supported"),
    ROW_REFUSED("--rope-scale", NULL, "overriding the model's RoPE scaling is not supported"),
    ROW_REFUSED("--rope-freq-base", NULL, "overriding the model's RoPE scaling is not supported"),
    ROW_REFUSED("--rope-freq-scale", NULL, "overriding the model's RoPE scaling is not supported"),
    ROW_REFUSED("--yarn-orig-ctx", NULL, "YaRN overrides are not supported"),
    ROW_REFUSED("--yarn-ext-factor", NULL, "YaRN overrides are not supported"),
    ROW_REFUSED("--yarn-attn-factor", NULL, "YaRN overrides are not supported"),
    ROW_REFUSED("--yarn-beta-slow", NULL, "YaRN overrides are not supported"),
    ROW_REFUSED("--yarn-beta-fast", NULL, "YaRN overrides are not supported"),
    ROW_TUNING_FLAG("--repack", NULL, WHY_PLACEMENT),
    ROW_TUNING_FLAG("--no-repack", "-nr", WHY_PLACEMENT),
    ROW_TUNING_FLAG("--no-host", NULL, WHY_PLACEMENT),
    ROW_TUNING("--cache-type-k", "-ctk", WHY_KV_CACHE),
    ROW_TUNING("--cache-type-v", "-ctv", WHY_KV_CACHE),
    ROW_TUNING("--defrag-thold", "-dt", WHY_KV_CACHE),
    {"--mmproj", "-mm", "LLAMAPI_MMPROJ", OPT_STRING, FIELD(mmproj), 0, 0,
     "multimodal projector GGUF of the first --model (image input; default: an mmproj-*.gguf "
     "beside it in its model directory)",
     "LLAMA_ARG_MMPROJ", NULL},
    ROW_REFUSED("--mmproj-url", "-mmu", WHY_DOWNLOAD),
    ROW_TUNING_FLAG("--mmproj-auto", NULL, WHY_MMPROJ),
    ROW_TUNING_FLAG("--no-mmproj-auto", "--no-mmproj", WHY_MMPROJ),
    ROW_TUNING_FLAG("--mmproj-offload", NULL, WHY_MMPROJ),
    ROW_TUNING_FLAG("--no-mmproj-offload", NULL, WHY_MMPROJ),
    ROW_TUNING("--image-min-tokens", NULL, WHY_MMPROJ),
    ROW_TUNING("--image-max-tokens", NULL, WHY_MMPROJ),
    ROW_TUNING("--mtmd-batch-max-tokens", NULL, WHY_MMPROJ),
    ROW_TUNING("--video-fps", NULL, WHY_MMPROJ),
    ROW_TUNING("--video-timestamp-interval", NULL, WHY_MMPROJ),
    ROW_TUNING("--video-ffmpeg-dir", NULL, WHY_MMPROJ),
    ROW_REFUSED("--rpc", NULL, "RPC back ends are not supported"),
    ROW_TUNING("--load-mode", "-lm", WHY_PLACEMENT),
    ROW_TUNING("--lazy-mode", "-lzm", WHY_PLACEMENT),
    ROW_TUNING("--numa", NULL, WHY_PLACEMENT),
    ROW_REFUSED_FLAG("--list-devices", NULL,
                     "the cpu platform has no devices to list (see GET /v1/platforms)"),
    ROW_TUNING("--override-tensor", "-ot", WHY_PLACEMENT),
    ROW_TUNING_FLAG("--cpu-moe", "-cmoe", WHY_PLACEMENT),
    ROW_TUNING("--n-cpu-moe", "-ncmoe", WHY_PLACEMENT),
    ROW_TUNING("--n-cpu-ffn", "-ncffn", WHY_PLACEMENT),
    ROW_TUNING("--fit", "-fit", WHY_PLACEMENT),
    ROW_TUNING("--fit-target", "-fitt", WHY_PLACEMENT),
    ROW_TUNING("--fit-ctx", "-fitc", WHY_PLACEMENT),
    ROW_TUNING_FLAG("--check-tensors", NULL, WHY_PLACEMENT),
    ROW_REFUSED("--override-kv", NULL, "overriding model metadata is not supported"),
    ROW_TUNING_FLAG("--op-offload", NULL, WHY_PLACEMENT),
    ROW_TUNING_FLAG("--no-op-offload", NULL, WHY_PLACEMENT),
    ROW_REFUSED("--lora", NULL, "LoRA adapters are not supported"),
    ROW_REFUSED("--lora-scaled", NULL, "LoRA adapters are not supported"),
    ROW_REFUSED("--control-vector", NULL, "control vectors are not supported"),
    ROW_REFUSED("--control-vector-scaled", NULL, "control vectors are not supported"),
    ROW_REFUSED("--control-vector-layer-range", NULL, "control vectors are not supported"),
    ROW_REFUSED("--model-url", "-mu", WHY_DOWNLOAD),
    ROW_REFUSED("--docker-repo", "-dr", WHY_DOWNLOAD),
    ROW_TUNING("--embd-normalize", NULL, "command-line tool option"),
    ROW_TUNING_FLAG("--reuse-port", NULL, "HTTP tuning: libmicrohttpd's own"),
    ROW_TUNING("--path", NULL, WHY_NO_WEBUI),
    ROW_REFUSED("--api-prefix", NULL, "an API path prefix is not supported"),
    ROW_TUNING("--webui-config", "--ui-config", WHY_NO_WEBUI),
    ROW_TUNING("--webui-config-file", "--ui-config-file", WHY_NO_WEBUI),
    {"--ui-mcp-proxy", "--webui-mcp-proxy", NULL, OPT_FLAG, FIELD(cors_proxy_enabled), 0, 0,
     "serve GET/POST /cors-proxy?url=http://… (off by default: it lets every client with access "
     "reach what this host reaches; plain-HTTP targets only)",
     "LLAMA_ARG_UI_MCP_PROXY", NULL},
    {"--no-ui-mcp-proxy", "--no-webui-mcp-proxy", NULL, OPT_FLAG_NEG, FIELD(cors_proxy_enabled), 0,
     0, "no /cors-proxy (the default)", NULL, NULL},
    ROW_TUNING("--tools-runtime", NULL, WHY_NO_WEBUI),
    ROW_REFUSED("--mcp-servers-config", NULL, "MCP servers are not supported"),
    ROW_REFUSED("--mcp-servers-json", NULL, "MCP servers are not supported"),
    ROW_TUNING_FLAG("--agent", "-ag", WHY_NO_WEBUI),
    ROW_TUNING_FLAG("--no-agent", "-no-ag", WHY_NO_WEBUI),
    ROW_REFUSED("--ssl-key-file", NULL,
                "TLS is not supported; put a TLS-terminating proxy in front"),
    ROW_REFUSED("--ssl-cert-file", NULL,
                "TLS is not supported; put a TLS-terminating proxy in front"),
    ROW_REFUSED("--chat-template-kwargs", NULL,
                "server-wide chat-template arguments are not supported; send "
                "\"chat_template_kwargs\" per request"),
    ROW_TUNING("--sse-ping-interval", NULL, "HTTP tuning: libmicrohttpd's own"),
    ROW_TUNING("--threads-http", NULL, "HTTP tuning: libmicrohttpd's own"),
    ROW_TUNING_FLAG("--cache-prompt", NULL, WHY_KV_CACHE),
    ROW_TUNING_FLAG("--no-cache-prompt", NULL, WHY_KV_CACHE),
    ROW_TUNING("--cache-reuse", NULL, WHY_KV_CACHE),
    ROW_TUNING("--reasoning", "-rea", WHY_TEMPLATE_PARSING),
    ROW_TUNING("--reasoning-effort", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING("--reasoning-budget", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING("--reasoning-budget-message", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING_FLAG("--reasoning-preserve", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING_FLAG("--no-reasoning-preserve", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING_FLAG("--skip-chat-parsing", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING_FLAG("--no-skip-chat-parsing", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING_FLAG("--prefill-assistant", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING_FLAG("--no-prefill-assistant", NULL, WHY_TEMPLATE_PARSING),
    ROW_TUNING("--slot-prompt-similarity", "-sps", WHY_KV_CACHE),
    ROW_REFUSED_FLAG("--lora-init-without-apply", NULL, "LoRA adapters are not supported"),
    ROW_TUNING("--sleep-idle-seconds", NULL, "idle models stay loaded (see --models-max)"),
    ROW_TUNING("--log-file", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING_FLAG("--log-jsonl", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING_FLAG("--no-log-jsonl", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING("--log-prompts-dir", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING("--log-colors", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING_FLAG("--log-prefix", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING_FLAG("--no-log-prefix", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING_FLAG("--log-timestamps", NULL, "logging: see --log-format and --verbose"),
    ROW_TUNING_FLAG("--no-log-timestamps", NULL, "logging: see --log-format and --verbose"),
    ROW_REFUSED("--hf-repo-draft", "--spec-draft-hf -hfd -hfrd",
                "downloading models is not supported"),
    ROW_TUNING("--threads-draft", "--spec-draft-threads -td", WHY_SPECULATIVE),
    ROW_TUNING("--threads-batch-draft", "--spec-draft-threads-batch -tbd", WHY_SPECULATIVE),
    ROW_TUNING("--cpu-mask-draft", "--spec-draft-cpu-mask -Cd", WHY_SPECULATIVE),
    ROW_TUNING("--cpu-range-draft", "--spec-draft-cpu-range -Crd", WHY_SPECULATIVE),
    ROW_TUNING("--cpu-strict-draft", "--spec-draft-cpu-strict", WHY_SPECULATIVE),
    ROW_TUNING("--prio-draft", "--spec-draft-prio", WHY_SPECULATIVE),
    ROW_TUNING("--poll-draft", "--spec-draft-poll", WHY_SPECULATIVE),
    ROW_TUNING("--cpu-mask-batch-draft", "--spec-draft-cpu-mask-batch -Cbd", WHY_SPECULATIVE),
    ROW_TUNING("--cpu-strict-batch-draft", "--spec-draft-cpu-strict-batch", WHY_SPECULATIVE),
    ROW_TUNING("--prio-batch-draft", "--spec-draft-prio-batch", WHY_SPECULATIVE),
    ROW_TUNING("--poll-batch-draft", "--spec-draft-poll-batch", WHY_SPECULATIVE),
    ROW_TUNING("--cache-type-k-draft", "--spec-draft-type-k -ctkd", WHY_SPECULATIVE),
    ROW_TUNING("--cache-type-v-draft", "--spec-draft-type-v -ctvd", WHY_SPECULATIVE),
    ROW_TUNING("--override-tensor-draft", "--spec-draft-override-tensor -otd", WHY_SPECULATIVE),
    ROW_TUNING_FLAG("--cpu-moe-draft", "--spec-draft-cpu-moe -cmoed", WHY_SPECULATIVE),
    ROW_TUNING("--n-cpu-moe-draft", "--spec-draft-n-cpu-moe --spec-draft-ncmoe -ncmoed",
               WHY_SPECULATIVE),
    ROW_TUNING("--spec-draft-n-max", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-draft-n-min", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-synth-len", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-synth-rates", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--draft-p-split", "--spec-draft-p-split", WHY_SPECULATIVE),
    ROW_TUNING("--draft-p-min", "--spec-draft-p-min", WHY_SPECULATIVE),
    ROW_TUNING_FLAG("--spec-draft-backend-sampling", NULL, WHY_SPECULATIVE),
    ROW_TUNING_FLAG("--no-spec-draft-backend-sampling", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--device-draft", "--spec-draft-device -devd", WHY_SPECULATIVE),
    ROW_TUNING("--n-gpu-layers-draft", "--spec-draft-ngl -ngld --gpu-layers-draft",
               WHY_SPECULATIVE),
    ROW_TUNING("--model-draft", "--spec-draft-model -md", WHY_SPECULATIVE),
    ROW_TUNING("--spec-type", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-mod-n-min", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-mod-n-max", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-mod-n-match", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-simple-size-n", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-simple-size-m", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-simple-min-hits", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-map-k-size-n", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-map-k-size-m", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-map-k-min-hits", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-map-k4v-size-n", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-map-k4v-size-m", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-map-k4v-min-hits", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--draft-max", "--draft --draft-n", WHY_SPECULATIVE),
    ROW_TUNING("--draft-n-min", "--draft-min", WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-size-n", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-size-m", NULL, WHY_SPECULATIVE),
    ROW_TUNING("--spec-ngram-min-hits", NULL, WHY_SPECULATIVE),
    ROW_REFUSED_FLAG("--embd-gemma-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--fim-qwen-1.5b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--fim-qwen-3b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--fim-qwen-7b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--fim-qwen-7b-spec", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--fim-qwen-14b-spec", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--fim-qwen-30b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--gpt-oss-20b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--gpt-oss-120b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--vision-gemma-4b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--vision-gemma-12b-default", NULL, WHY_PRESET),
    ROW_REFUSED_FLAG("--spec-default", NULL, WHY_PRESET),
};

#define N_OPTIONS (sizeof options / sizeof options[0])

void config_defaults(struct server_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 9265;
    c->max_connections = 4096;
    c->max_connections_per_ip = 1024;
    c->header_timeout_s = 10;
    c->min_body_rate = 1024;
    c->timeout_s = 60;
    c->shutdown_timeout_s = 5;
    c->request_queue_size = 32;
    c->n_parallel = 1;
    snprintf(c->cors_methods, sizeof c->cors_methods, "GET, POST, DELETE, OPTIONS");
    snprintf(c->cors_headers, sizeof c->cors_headers, "*");
    gen_params_defaults(&c->gen_defaults);
    hub_default_models_dir(c->models_dir, sizeof c->models_dir); // where pull downloads too
    hub_default_url(c->hub_url, sizeof c->hub_url);
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
           o->kind != OPT_HELP && o->kind != OPT_VERSION && o->kind != OPT_GPU &&
           o->kind != OPT_TUNING_FLAG && o->kind != OPT_REFUSED_FLAG;
}

/* Adds a flag to the list the start-up warning names (once; a full list is cut short). */
static void note_ignored(struct server_config *c, const char *name)
{
    size_t len = strlen(c->ignored_flags), n = strlen(name);
    const char *hit = strstr(c->ignored_flags, name);
    if (hit && (hit[n] == '\0' || hit[n] == ' ')) return;
    if (len + n + 2 >= sizeof c->ignored_flags) return;
    snprintf(c->ignored_flags + len, sizeof c->ignored_flags - len, "%s%s", len ? " " : "", name);
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
    case OPT_TUNING:
    case OPT_TUNING_FLAG:
        note_ignored(c, o->name);
        return ERR_OK;
    case OPT_REFUSED:
    case OPT_REFUSED_FLAG:
        return errmsg_set(err, ERR_UNSUPPORTED, "%s: %s", o->name, o->help);
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
    case OPT_CONFIG:
        return ERR_OK;
    }
    return ERR_INVALID;
}

/* True when the space-separated list names holds the len bytes at arg. */
static bool names_have(const char *names, const char *arg, size_t len)
{
    for (const char *p = names; p && *p;) {
        size_t n = strcspn(p, " ");
        if (n == len && strncmp(p, arg, len) == 0) return true;
        p += n + (p[n] == ' ');
    }
    return false;
}

/* The option spelled arg[0..name_len), where '_' reads as '-' as llama-server reads it
 * (--backend_sampling); NULL when there is none. */
static const struct opt *find_option(const char *arg, size_t name_len)
{
    char name[64];
    if (name_len >= sizeof name) return NULL;
    for (size_t i = 0; i < name_len; i++)
        name[i] = arg[i] == '_' ? '-' : arg[i];
    name[name_len] = '\0';
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct opt *o = &options[i];
        if (names_have(o->name, name, name_len) || names_have(o->alias, name, name_len)) return o;
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

static bool is_switch(const struct opt *o)
{
    return o->kind == OPT_FLAG || o->kind == OPT_FLAG_NEG || o->kind == OPT_VERBOSE ||
           o->kind == OPT_TUNING_FLAG || o->kind == OPT_REFUSED_FLAG;
}

int config_set(struct server_config *c, const char *key, const char *value, struct errmsg *err)
{
    const struct opt *o = NULL;
    for (size_t i = 0; i < N_OPTIONS && !o; i++)
        if (strncmp(options[i].name, "--", 2) == 0 && strcmp(options[i].name + 2, key) == 0)
            o = &options[i];
    if (!o) return errmsg_set(err, ERR_INVALID, "unknown key '%s'", key);
    if (o->kind == OPT_HELP || o->kind == OPT_VERSION || o->kind == OPT_CONFIG)
        return errmsg_set(err, ERR_INVALID, "'%s' cannot be set in a config file", key);
    if (is_switch(o)) {
        bool is_true = strcmp(value, "true") == 0;
        if (!is_true && strcmp(value, "false") != 0)
            return errmsg_set(err, ERR_INVALID, "%s: expected true or false, got '%s'", key, value);
        // A switch that only records or refuses its presence does nothing when false.
        if (!is_true && (o->kind == OPT_TUNING_FLAG || o->kind == OPT_REFUSED_FLAG)) return ERR_OK;
    } else if (!*value && o->kind != OPT_STRING && o->kind != OPT_GPU) {
        return errmsg_set(err, ERR_INVALID, "%s: needs a value", key);
    }
    return apply(c, o, value, err);
}

static int set_from_file(void *ctx, const char *section, const char *key, const char *value,
                         struct errmsg *err)
{
    (void)section; // sections are refused for --config
    return config_set(ctx, key, value, err);
}

/* The value of the last --config flag (either spelling), or NULL. */
static const char *config_flag(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            path = argv[i] + 9;
    }
    return path;
}

int config_parse(struct server_config *c, int argc, char **argv, struct errmsg *err)
{
    // The file is read first so that the environment and the flags override it.
    const char *file = config_flag(argc, argv);
    int rc = file ? config_file_read(file, false, set_from_file, c, err) : ERR_OK;
    if (rc == ERR_OK && file) snprintf(c->config_file, sizeof c->config_file, "%s", file);
    if (rc == ERR_OK) rc = apply_environment(c, err);
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
    // As llama-server: with --tools, CORS defaults to loopback origins only.
    if (rc == ERR_OK && !c->cors_origins[0])
        snprintf(c->cors_origins, sizeof c->cors_origins, "%s", c->tools[0] ? "localhost" : "*");
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
        char names[160];
        size_t k = 0;
        for (const char *p = o->alias; p && *p && k + 3 < sizeof names; p++) {
            if (*p == ' ') names[k++] = ',';
            names[k++] = *p;
        }
        snprintf(names + k, sizeof names - k, "%s%s%s", o->alias ? ", " : "", o->name,
                 takes_value(o) ? " V" : "");
        const char *env = o->env ? o->env : o->llama_env;
        const char *note = o->kind == OPT_TUNING || o->kind == OPT_TUNING_FLAG     ? "accepted, no "
                                                                                     "effect: "
                           : o->kind == OPT_REFUSED || o->kind == OPT_REFUSED_FLAG ? "refused: "
                                                                                   : "";
        n += (size_t)snprintf(out + n, cap - n, "  %-28s %s%s%s%s%s\n", names, note, o->help,
                              env ? " (" : "", env ? env : "", env ? ")" : "");
    }
}
