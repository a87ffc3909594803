/* The platform interface: an inference runtime that can run some model formats on some
 * hardware. Our engine is the `cpu` platform; vendor runtimes (NPUs) implement the same table.
 * Discovery (what runs here, which chips, which platform claims a path) and the model
 * lifecycle (load, instances, submit, unload). The core layer owns pools and queues; a
 * platform only runs requests on the instance index it is given. */
#ifndef PLATFORM_PLATFORM_H
#define PLATFORM_PLATFORM_H

#include "platform/request.h"
#include "text/reasoning.h"
#include "text/toolcall/toolcall.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLATFORM_CHIP_NAME_CAP 128

struct platform_chip {
    char chip_type[PLATFORM_CHIP_NAME_CAP]; // e.g. "Intel(R) Xeon(R) Processor", "Cortex-A76"
    int count;                              // cores of this type
};

enum model_kind {
    MODEL_KIND_CHAT = 0,
    MODEL_KIND_EMBEDDING = 1,
};

/* How an embedding model pools its final hidden states into one vector per input; the
 * values after DEFAULT follow llama.cpp's `<arch>.pooling_type` order. */
enum platform_pooling {
    PLATFORM_POOLING_DEFAULT = 0, // the file's <arch>.pooling_type; when absent mean for
                                  // encoders, last for decoders
    PLATFORM_POOLING_NONE,        // per-token vectors, unnormalized (cpu: encoders)
    PLATFORM_POOLING_MEAN,
    PLATFORM_POOLING_CLS,
    PLATFORM_POOLING_LAST,
    PLATFORM_POOLING_RANK, // a reranker's classification head: scores per input instead of
                           // a vector (cpu: bert encoders, qwen3 decoders)
};

/* Called by the platform (on its own thread, holding none of its locks) after it finished the
 * request running on instance; the core then gives the instance its next request. */
typedef void (*platform_done_fn)(void *owner, int instance);

struct platform_load_args {
    const char *path;              // a model file or directory the platform claimed
    int n_ctx;                     // context per instance; 0 = the model's, capped at 4096
    int n_threads;                 // compute threads; 0 = thread_default_count()
    int force_embedding;           // 1: serve a decoder as an embedding model
    enum platform_pooling pooling; // embedding models only (ignored for chat models)
    const char *chat_template;     // a built-in template's name or Jinja source used instead of
                                   // the model's (borrowed for the call), or NULL
    const char *mmproj_path;       // a multimodal projector GGUF (borrowed for the call), or
                                   // NULL: the cpu platform looks for mmproj-*.gguf beside a
                                   // model in a model directory
    platform_done_fn on_done;      // never NULL
    void *owner;                   // passed to on_done
};

struct tokenizer;
struct jinja_template;

/* Request features a platform cannot honour; a request that uses one is refused with 400
 * unsupported_parameter naming the parameter and the platform (never silently ignored). */
enum platform_unsupported {
    PLATFORM_UNSUPPORTED_GRAMMAR = 1 << 0,    // grammar, json_schema, response_format with a
                                              // schema, a forced tool_choice
    PLATFORM_UNSUPPORTED_LOGPROBS = 1 << 1,   // logprobs, top_logprobs, n_probs
    PLATFORM_UNSUPPORTED_N = 1 << 2,          // n > 1
    PLATFORM_UNSUPPORTED_LOGIT_BIAS = 1 << 3, // logit_bias
    PLATFORM_UNSUPPORTED_MIN_P = 1 << 4,      // min_p
    PLATFORM_UNSUPPORTED_SEED = 1 << 5,       // seed
};

/* Sampling values fixed when an instance was created (a runtime without per-request
 * sampling); a request asking for other values is refused. */
struct platform_sampling {
    float temperature, top_p, repeat_penalty, frequency_penalty, presence_penalty;
    int top_k;
};

/* What a loaded model is, for /v1/models, the memory budget and the API layer's text work.
 * Pointers are borrowed from the platform model: valid while a reference to the model is
 * held; the objects they point to are immutable and thread-safe. */
struct platform_model_desc {
    const struct tokenizer *tokenizer;          // NULL for platforms that tokenize internally
    const struct jinja_template *chat_template; // compiled; the model's or the ChatML fallback
    const char *chat_template_src;              // its source text
    // What the template implies for the output, read by every request: filled from
    // chat_template_src once when the model loads (platform_desc_detect_formats), as scanning
    // a template of tens of kilobytes per request is work that never changes its answer.
    enum toolcall_format tool_format;       // how tool calls are written (GENERIC: none known)
    enum reasoning_format reasoning_format; // its thinking markers (NONE: no split)
    const char *bos_text, *eos_text;        // special token texts for templates ("" if none)
    enum model_kind kind;
    int n_ctx; // context per instance
    int n_ctx_train;
    int n_vocab;
    int n_embd;        // hidden width (the length of an embedding model's vectors)
    bool is_per_token; // pooling none: a vector per token of every input, unnormalized
    int n_cls_out;     // rerankers (embedding kind, pooling rank): scores per input, the first
                       // is the relevance score; 0 for every other model
    // Rerankers: how a (query, document) pair becomes one input, as llama.cpp's server lays
    // it out. With a template, its {query} and {document} are replaced and the result is
    // tokenized with special tokens parsed and none added; else the input is
    // [bos] query [eos] [sep] document [eos], each bracketed id present when the vocab's
    // add_bos / add_eos / add_sep flag says so (eos falls back to sep), -1 when left out.
    const char *rerank_template; // tokenizer.chat_template.rerank, or NULL
    int32_t rerank_bos, rerank_eos, rerank_sep;
    int64_t n_params;
    uint64_t file_size;      // bytes
    uint64_t instance_bytes; // memory one more instance costs
    char arch[32];
    char description[160]; // what the model is, when its file says
    // Text-IO platforms tokenize inside their runtime: tokenizer is NULL, a request carries
    // its prompt as text (request_set_text_prompt) and its output as text events.
    bool is_text_io;
    bool is_last_message_only; // text-IO without a chat template of ours: only the last
                               // message is sent and the runtime applies its own template
    unsigned unsupported;      // enum platform_unsupported bits
    const struct platform_sampling *fixed_sampling; // NULL: sampling is per request
    const char *abi;                                // the runtime ABI in use ("1.2"), or NULL
    // Image input through a multimodal projector: each image becomes image_tokens embeddings
    // placed between the texts image_begin and image_end (tokenized with special tokens).
    bool has_vision;
    int image_tokens;
    const char *image_begin, *image_end; // "" when the family has none
    char projector[24];                  // the projector type ("gemma3"), "" without one
    // Projectors whose images keep their own size (image_tokens 0): the positions a w x h
    // image takes, or ERR_INVALID with err saying why.
    // Thread-safe; ctx is image_ctx. NULL for fixed-size projectors.
    int (*image_tokens_of)(const void *ctx, uint32_t w, uint32_t h, int *n_tok, struct errmsg *err);
    const void *image_ctx;
    // Audio input through an audio projector: a clip (16 kHz mono) of n samples becomes
    // audio_n_windows(n) windows of audio_window_tokens embeddings, placed back to back
    // between the texts audio_begin and audio_end.
    bool has_audio;
    int audio_window_tokens;
    int64_t (*audio_n_windows)(size_t n_samples); // NULL without audio
    const char *audio_begin, *audio_end;          // "" when the family has none
};

struct platform_model;

/* How a model's failure message starts when its file changed on disk while it was loaded
 * (the api layer answers these with the code model_file_changed). The path and what to do
 * follow. */
#define PLATFORM_MSG_FILE_CHANGED "the model file changed on disk while loaded"

/* What /v1/platforms says beyond availability (vendor platforms; "" when not applicable). */
struct platform_status {
    char reason[512];        // why the platform is unavailable
    char library[1024];      // the runtime library it uses (path or name)
    char driver_version[64]; // the NPU driver's version when readable
    char abi[16];            // the runtime ABI it speaks ("1.3")
};

struct platform {
    const char *id;           // stable id used in the API ("cpu")
    const char *display_name; // human-readable
    /* Called once at start-up, after vendor_configure (vendor platforms open their runtime
     * library here). May be NULL. Cannot fail: a failure makes the platform unavailable. */
    void (*start)(void);
    /* Releases what start acquired. May be NULL. */
    void (*stop)(void);
    /* True when this host can run the platform. Cannot fail. */
    bool (*is_available)(void);
    /* Fills the status (zeroed by the caller). May be NULL. */
    void (*status)(struct platform_status *out);
    /* Writes up to max chips; returns how many (0 when none can be detected). */
    int (*detect_chips)(struct platform_chip *out, int max);
    /* True when the platform recognises the model at path (a file or a directory). */
    bool (*claims)(const char *path);

    /* Loads the model with no instances yet. ERR_FORMAT/ERR_IO/ERR_UNSUPPORTED/ERR_NOMEM with
     * err saying why. The caller frees with unload(). */
    int (*load)(const struct platform_load_args *a, struct platform_model **out,
                struct errmsg *err);
    void (*describe)(const struct platform_model *m, struct platform_model_desc *out);
    /* Creates instance number `instance` (its KV cache and scratch). ERR_NOMEM. */
    int (*add_instance)(struct platform_model *m, int instance, struct errmsg *err);
    /* Frees an idle instance. */
    void (*remove_instance)(struct platform_model *m, int instance);
    /* Starts r on an idle instance. The platform retains r until it calls on_done. An
     * embedding request finishes with r's embedding holding n_inputs rows of n_embd floats
     * (n_cls_out scores for a reranker; with is_per_token n_prompt rows, one per token). */
    void (*submit)(struct platform_model *m, int instance, struct request *r);
    /* How many leading tokens of `tokens` the idle instance already holds in its cache (0 when
     * it keeps none). Used to route a request to the instance that can reuse most. Called from
     * any thread while the instance is idle; must not block. May be NULL (no cache). */
    int (*cached_prefix)(struct platform_model *m, int instance, const int32_t *tokens, int n);
    /* True when the model can run no more requests until it is loaded again (cpu: its file
     * changed on disk, PLATFORM_MSG_FILE_CHANGED); why then says so. Sticky. Called from any
     * thread, per request: must be cheap and must not block on running work. May be NULL
     * (never fails). */
    bool (*is_failed)(struct platform_model *m, struct errmsg *why);
    /* Frees the model; every instance is idle or removed. NULL is a no-op. */
    void (*unload)(struct platform_model *m);
};

/* All compiled-in platforms, in detection order (static storage). Cannot fail. */
const struct platform *const *platform_list(size_t *n_platforms);

/* The platform with this id, or NULL. */
const struct platform *platform_find(const char *id);

/* The platform that runs the model at path (platform/detect.c's rules), or NULL when none
 * or several could. */
const struct platform *platform_detect(const char *path);

/* Calls every platform's start hook / stop hook, once, at start-up / exit. */
void platform_start_all(void);
void platform_stop_all(void);

/* Fills d's template-derived fields (tool_format, reasoning_format) from d->chat_template_src
 * (NULL: GENERIC and NONE). The model's loader calls it once, after the platform's describe,
 * so every platform's models get them and none detects them itself. Cannot fail. */
void platform_desc_detect_formats(struct platform_model_desc *d);

/* A pooling by its llama.cpp name ("none", "mean", "cls", "last", "rank"). ERR_OK or
 * ERR_INVALID (unknown name; *out untouched). */
int platform_pooling_parse(const char *name, enum platform_pooling *out);

#endif
