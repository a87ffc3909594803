/* Our own C mirror of the RKNN3 runtime ABI (librknn3_api.so, RKNN3 SDK 1.0, RK1820/RK1828
 * coprocessors): device enumeration, the context calls that load a model set (X.rknn +
 * X.weight), the LLM query, and the session calls that run chat, embedding and reranker
 * models with host-side tokenization and embedding lookup. Written from the published
 * layouts; it is not the vendor header and declares no symbols — the runtime is opened with
 * dlopen and every call goes through struct rknn3_fns. Enums are 32-bit integers here. */
#ifndef PLATFORM_RKNN3_ABI_H
#define PLATFORM_RKNN3_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__arm__) || (defined(__riscv) && __riscv_xlen == 32)
typedef uint32_t rknn3_context;
#else
typedef uint64_t rknn3_context;
#endif

#define RKNN3_MAX_DIMS        16
#define RKNN3_MAX_NAME_LEN    256
#define RKNN3_MAX_DEVS        64
#define RKNN3_MAX_DEV_LEN     64
#define RKNN3_MAX_NPU_NODES   128
#define RKNN3_MAX_SPECIAL_IDS 64

enum {
    RKNN3_SUCCESS = 0,
    RKNN3_ERR_FAIL = -1,
    RKNN3_ERR_DEVICE_UNAVAILABLE = -10,
    RKNN3_ERR_TARGET_PLATFORM_UNMATCH = -12,
    RKNN3_ERR_INCOMPATIBLE_VERSION = -18,
};

enum {
    RKNN3_QUERY_IN_OUT_NUM = 0,
    RKNN3_QUERY_SDK_VERSION = 5,
    RKNN3_QUERY_LLM_CONFIG = 17,
};

/* Tensor element types (the ones outputs are read in). */
enum {
    RKNN3_TENSOR_FLOAT32 = 0,
    RKNN3_TENSOR_FLOAT16 = 1,
};

enum {
    RKNN3_LLM_INPUT_PROMPT = 0,
    RKNN3_LLM_INPUT_TOKEN = 1,
    RKNN3_LLM_INPUT_EMBED = 2,
};

/* Result callback states (numbered differently from librkllmrt's). */
enum {
    RKNN3_RUN_NORMAL = 0,
    RKNN3_RUN_WAITING = 1,
    RKNN3_RUN_FINISH = 2,
    RKNN3_RUN_STOP = 3,
    RKNN3_RUN_MAX_NEW_TOKEN_REACHED = 4,
    RKNN3_RUN_ERROR = 5,
    RKNN3_RUN_PAUSE = 6,
    RKNN3_RUN_RESUME = 7,
};

/* Output callback states. */
enum {
    RKNN3_OUTPUT_PREFILL_PROCESSING = 0,
    RKNN3_OUTPUT_PREFILL_FINISHED = 1,
    RKNN3_OUTPUT_DECODE_PROCESSING = 2,
    RKNN3_OUTPUT_DECODE_FINISHED = 3,
};

/* The model's task (RKNN3_QUERY_LLM_CONFIG). */
enum {
    RKNN3_LLM_TASK_GENERATE = 0,
    RKNN3_LLM_TASK_EMBEDDING = 1,
    RKNN3_LLM_TASK_RERANKER = 2,
};

enum { RKNN3_KVCACHE_CLEAR_ALL = 0 };

/* ---- devices ---- */

struct rknn3_node_mem {
    uint64_t total; // bytes
    uint64_t free;  // bytes
};

struct rknn3_dev_mem {
    uint32_t node_num;
    uint64_t sys_total; // bytes of the device's memory
    uint64_t sys_free;
    struct rknn3_node_mem node[RKNN3_MAX_NPU_NODES];
};

struct rknn3_device {
    char id[RKNN3_MAX_DEV_LEN];   // e.g. a PCI address "0000:01:00.0"
    char type[RKNN3_MAX_DEV_LEN]; // the transport: "PCIE", "USB"
    struct rknn3_dev_mem mem;
};

struct rknn3_devices {
    uint32_t n_devices;
    struct rknn3_device devices[RKNN3_MAX_DEVS];
};

/* ---- context ---- */

struct rknn3_init_extend {
    char *device_id; // NULL: the only device
    uint8_t reserved[128];
};

struct rknn3_config {
    int32_t priority;
    uint32_t run_timeout_ms; // 0: none
    uint32_t run_core_mask;  // 0: auto
    uint8_t user_mem_weight;
    uint8_t user_mem_internal;
    uint8_t user_sram;
    uint8_t reserved[128];
};

struct rknn3_io_num {
    uint32_t n_input;
    uint32_t n_output;
};

struct rknn3_sdk_version {
    char api_version[256];
    char drv_version[256];
};

struct rknn3_attn_kv_lens {
    int32_t attention_type;
    uint32_t n_lens;
    int32_t lens[16];
};

/* RKNN3_QUERY_LLM_CONFIG. The strings belong to the runtime. */
struct rknn3_llm_config {
    char *chat_template;
    uint32_t vocab_size;
    uint32_t embedding_dim;
    uint32_t max_ctx_len;
    uint32_t max_position_embeddings;
    int32_t kvcache_store_method;
    int32_t kvcache_dtype;
    uint32_t kvcache_group_size;
    uint32_t kvcache_residual_depth;
    char *model_type;
    int32_t task_type; // RKNN3_LLM_TASK_*
    uint8_t rope_cache_host_storage;
    uint32_t n_attention_kvcache_lens;
    struct rknn3_attn_kv_lens attention_kvcache_lens[3];
    uint8_t reserved[127];
};

/* ---- tensors (what the output callback hands over) ---- */

struct rknn3_tensor_mem {
    void *virt_addr;
    uint64_t phys_addr;
    int32_t fd;
    uint64_t buffer_id;
    uint64_t offset;
    uint64_t size; // bytes
    uint64_t flags;
    int32_t core_id;
    void *priv_data;
    int32_t mem_type;
};

struct rknn3_tensor_attr {
    uint32_t index;
    char name[RKNN3_MAX_NAME_LEN];
    uint32_t n_dims;
    uint32_t shape[RKNN3_MAX_DIMS];
    uint64_t aligned_size;
    uint32_t n_stride;
    uint64_t stride[RKNN3_MAX_DIMS + 1];
    uint32_t n_elems;
    int32_t dtype; // RKNN3_TENSOR_*
    int32_t layout;
    int32_t qnt_type;
    float qnt_scale;
    int32_t qnt_zero_point;
    uint32_t n_orig_dims;
    uint32_t orig_shape[RKNN3_MAX_DIMS];
    int32_t orig_layout;
    int32_t core_id;
};

struct rknn3_tensor {
    struct rknn3_tensor_mem *mem;
    struct rknn3_tensor_attr *attr;
};

/* ---- sessions ---- */

struct rknn3_sampling {
    int32_t top_k;
    float top_p;
    float temperature;
    float repeat_penalty;
    float frequency_penalty;
    float presence_penalty;
};

struct rknn3_vocab_info {
    int32_t vocab_size;
    int32_t special_bos_id[RKNN3_MAX_SPECIAL_IDS];
    int32_t special_eos_id[RKNN3_MAX_SPECIAL_IDS];
    int32_t n_special_bos_id;
    int32_t n_special_eos_id;
    int32_t linefeed_id;
    bool skip_special_token;
    bool ignore_eos_token;
    uint8_t reserved[64];
};

struct rknn3_llm_param {
    char *logits_name; // NULL: the only output
    int32_t max_context_len;
    struct rknn3_sampling sampling;
    struct rknn3_vocab_info vocab;
    uint8_t extend_reserved[128];
};

/* An input of token ids (RKNN3_LLM_INPUT_TOKEN) or text. */
struct rknn3_llm_tensor {
    const char *name;
    const char *prompt;
    void *embed; // float16 rows
    int32_t *tokens;
    uint64_t n_tokens;
    bool enable_thinking;
};

/* Only its size matters here: it is the largest member of the input union. */
struct rknn3_llm_multimodal {
    const char *name;
    const char *prompt;
    int32_t *tokens;
    uint64_t n_tokens;
    bool enable_thinking;
    struct {
        void *embed;
        uint64_t n_tokens, n;
        const char *start, *end, *content;
        uint64_t width, height;
    } image;
    struct {
        void *embed;
        uint64_t n_tokens, n;
        const char *start, *end, *content;
    } audio;
    struct {
        void *embed;
        uint64_t n_frame_tokens, n_frame_per_video, n;
        const char *start, *end, *content;
        uint64_t frame_width, frame_height;
    } video;
};

struct rknn3_llm_input {
    const char *role; // "user", "tool"
    int32_t input_type;
    union {
        struct rknn3_llm_tensor llm;
        struct rknn3_llm_multimodal multimodal;
        struct rknn3_tensor aux;
    } u;
};

struct rknn3_infer_param {
    int32_t keep_history; // 0: every run starts from an empty cache
    int32_t max_new_tokens;
    bool prefill_only;     // embeddings and rerankers: no decode
    bool disable_sampling; // with prefill_only: outputs only
    uint8_t reserved[128];
};

/* Token ids of one callback. The host detokenizes. */
struct rknn3_result {
    int32_t *token_ids;
    int32_t num_tokens;
};

typedef int (*rknn3_result_fn)(void *userdata, struct rknn3_result *result, int32_t state);
typedef int (*rknn3_sampling_fn)(void *userdata, void *logits, char *logits_name);
/* Fills embed (len bytes: n_tokens rows of float16) with the rows of tokens. 0 on success. */
typedef int (*rknn3_embed_fn)(void *userdata, int32_t *tokens, uint64_t n_tokens, void *embed,
                              uint64_t len);
typedef int (*rknn3_tokenizer_fn)(void *userdata, const char *text, int32_t text_len,
                                  int32_t *tokens, int32_t n_tokens_max);
typedef int (*rknn3_output_fn)(void *userdata, struct rknn3_tensor *outputs, uint32_t n_outputs,
                               int32_t state);

struct rknn3_callbacks {
    rknn3_result_fn result;
    void *result_userdata;
    rknn3_sampling_fn sampling;
    void *sampling_userdata;
    rknn3_tokenizer_fn tokenizer;
    void *tokenizer_userdata;
    rknn3_embed_fn embed;
    void *embed_userdata;
    rknn3_output_fn output;
    void *output_userdata;
    struct rknn3_tensor *output_tensors;
    uint32_t n_output_tensors;
    void *input; // input callback, unused here (its parameter is passed by value)
    void *input_userdata;
    int32_t *input_tensors_index;
    uint32_t n_input_tensors;
};

/* The calls, resolved with dlsym by these names (rknn3.c's symbol table). */
struct rknn3_fns {
    int (*find_devices)(struct rknn3_devices *devs);
    int (*init)(rknn3_context *ctx, struct rknn3_init_extend *ext);
    int (*load_model_from_path)(rknn3_context ctx, const char *model, const char *weight);
    int (*model_init)(rknn3_context ctx, struct rknn3_config *cfg);
    int (*query)(rknn3_context ctx, int32_t cmd, void *info, uint64_t size);
    int (*destroy)(rknn3_context ctx);
    void *(*session_init)(rknn3_context ctx, struct rknn3_llm_param *params, int n_params);
    int (*session_set_callback)(void *session, struct rknn3_callbacks *cb);
    int (*session_set_chat_template)(void *session, const char *system, const char *prefix,
                                     const char *postfix);
    int (*session_set_llm_param)(void *session, struct rknn3_llm_param *params, int n_params);
    int (*session_run)(void *session, struct rknn3_llm_input *inputs, uint32_t n_inputs,
                       struct rknn3_infer_param *param);
    int (*session_stop)(void *session);
    int (*session_clear_kvcache)(void *session, int32_t policy);
    int (*session_destroy)(void *session);
};

#if defined(__LP64__)
_Static_assert(sizeof(struct rknn3_dev_mem) == 2072, "rknn3_dev_mem_info layout");
_Static_assert(sizeof(struct rknn3_device) == 2200, "rknn3_device layout");
_Static_assert(offsetof(struct rknn3_devices, devices) == 8, "rknn3_devices layout");
_Static_assert(sizeof(struct rknn3_init_extend) == 136, "rknn3_init_extend layout");
_Static_assert(sizeof(struct rknn3_config) == 144, "rknn3_config layout");
_Static_assert(offsetof(struct rknn3_llm_config, task_type) == 48, "rknn3_llm_config layout");
_Static_assert(offsetof(struct rknn3_tensor_attr, aligned_size) == 328, "rknn3_tensor_attr");
_Static_assert(offsetof(struct rknn3_tensor_attr, n_elems) == 480, "rknn3_tensor_attr layout");
_Static_assert(offsetof(struct rknn3_tensor_mem, size) == 40, "rknn3_tensor_mem layout");
_Static_assert(offsetof(struct rknn3_llm_param, vocab) == 36, "rknn3_llm_param layout");
_Static_assert(sizeof(struct rknn3_vocab_info) == 596, "rknn3_vocab_info layout");
_Static_assert(offsetof(struct rknn3_llm_input, u) == 16, "rknn3_llm_input layout");
_Static_assert(sizeof(struct rknn3_infer_param) == 140, "rknn3_llm_infer_param layout");
_Static_assert(offsetof(struct rknn3_callbacks, embed) == 48, "RKLLMCallback layout");
_Static_assert(offsetof(struct rknn3_callbacks, output_tensors) == 80, "RKLLMCallback layout");
#endif

#endif
