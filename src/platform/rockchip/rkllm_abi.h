/* Our C mirrors of the RKLLM runtime's structs (librkllmrt.so), one set per ABI we speak:
 * 1.2 (runtime releases 1.2.1 to 1.2.3, identical layouts) and 1.3 (1.3.0). Written from the
 * public header's field lists; the sizes and key offsets below are the ones that header gives
 * on LP64 (x86-64 and aarch64), so a mistake here fails the build instead of corrupting a
 * call. Names are ours. Shared with the fake runtime in tests/fakes/. */
#ifndef PLATFORM_RKLLM_ABI_H
#define PLATFORM_RKLLM_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Callback states and input/inference kinds (the same numbers in both ABIs). */
enum {
    RKLLM_STATE_NORMAL = 0,
    RKLLM_STATE_WAITING = 1, // the text so far ends inside a UTF-8 character
    RKLLM_STATE_FINISH = 2,
    RKLLM_STATE_ERROR = 3,
};
enum {
    RKLLM_INPUT_PROMPT = 0,
    RKLLM_INPUT_TOKEN = 1,
    RKLLM_INPUT_EMBED = 2,
    RKLLM_INPUT_MULTIMODAL = 3,
};
enum { RKLLM_MODE_GENERATE = 0 };

struct rkllm_extend {
    int32_t base_domain_id; // memory domain of the handle: distinct per instance
    int8_t embed_flash;
    int8_t enabled_cpus_num;
    uint32_t enabled_cpus_mask;
    uint8_t n_batch;
    int8_t use_cross_attn;
    uint8_t reserved[104];
};

/* The sampling fields both ABIs share, in this order. */
#define RKLLM_SAMPLING_FIELDS                                                                      \
    float top_p;                                                                                   \
    float temperature;                                                                             \
    float repeat_penalty;                                                                          \
    float frequency_penalty;                                                                       \
    float presence_penalty;                                                                        \
    int32_t mirostat;                                                                              \
    float mirostat_tau;                                                                            \
    float mirostat_eta;

struct rkllm12_param {
    const char *model_path;
    int32_t max_context_len;
    int32_t max_new_tokens;
    int32_t top_k;
    int32_t n_keep;
    RKLLM_SAMPLING_FIELDS
    bool skip_special_token;
    bool is_async;
    const char *img_start;
    const char *img_end;
    const char *img_content;
    struct rkllm_extend extend_param;
};

struct rkllm13_param {
    const char *model_path;
    int32_t max_context_len;
    int32_t max_new_tokens;
    int32_t top_k;
    int32_t n_keep;
    RKLLM_SAMPLING_FIELDS
    bool skip_special_token;
    bool ignore_eos_token;
    bool is_async;
    struct rkllm_extend extend_param;
};

struct rkllm_token_input {
    int32_t *input_ids;
    size_t n_tokens;
};

struct rkllm12_multimodal {
    char *prompt;
    float *image_embed;
    size_t n_image_tokens, n_image, image_width, image_height;
};

struct rkllm13_multimodal {
    char *prompt;
    struct {
        float *embed;
        size_t n_tokens, n_images;
        const char *start, *end, *content;
        size_t width, height;
    } image;
    struct {
        float *embed;
        size_t n_frame_tokens, n_frames_per_video, n_videos;
        const char *start, *end, *content;
        size_t frame_width, frame_height;
    } video;
};

struct rkllm12_input {
    const char *role; // "user" or "tool"
    bool enable_thinking;
    int32_t input_type; // RKLLM_INPUT_*
    union {
        const char *prompt;
        struct rkllm_token_input tokens; // also the embedding input's shape
        struct rkllm12_multimodal multimodal;
    } u;
};

struct rkllm13_input {
    const char *role;
    bool enable_thinking;
    int32_t input_type;
    union {
        const char *prompt;
        struct rkllm_token_input tokens;
        struct rkllm13_multimodal multimodal;
    } u;
};

struct rkllm13_sampling {
    int32_t top_k;
    RKLLM_SAMPLING_FIELDS
};

struct rkllm12_infer {
    int32_t mode; // RKLLM_MODE_*
    void *lora;
    void *prompt_cache;
    int32_t keep_history; // 0: every run starts from an empty context
};

struct rkllm13_infer {
    int32_t mode;
    void *lora;
    void *prompt_cache;
    struct rkllm13_sampling *sampling; // NULL: the init-time values
    int32_t keep_history;
    int32_t max_new_tokens; // <= 0: the init-time value
};

struct rkllm_perf {
    float prefill_time_ms;
    int32_t prefill_tokens;
    float generate_time_ms;
    int32_t generate_tokens;
    float memory_usage_mb;
};

struct rkllm_result {
    const char *text; // this callback's text (may be NULL)
    int32_t token_id;
    struct {
        const float *hidden_states;
        int32_t embd_size, num_tokens;
    } last_hidden_layer;
    struct {
        const float *logits;
        int32_t vocab_size, num_tokens;
    } logits;
    struct rkllm_perf perf; // filled in the FINISH callback
};

/* The result callback: 0 continues. */
typedef int (*rkllm_result_fn)(struct rkllm_result *result, void *userdata, int state);

/* ABI 1.3 passes its callbacks in a struct (1.2 passes the result callback itself). */
struct rkllm13_callbacks {
    rkllm_result_fn result;
    void *result_userdata;
    void *tokenizer; // unused: the model carries its tokenizer
    void *tokenizer_userdata;
    void *embed; // unused: the model carries its embedding table
    void *embed_userdata;
};

/* rkllm_createDefaultParam returns the param struct by value; both ABIs' structs are returned
 * through a hidden result pointer (larger than 16 bytes on SysV x86-64 and AAPCS64), so we call
 * it as returning this larger struct: the runtime writes its own size into our room. */
struct rkllm_param_room {
    union {
        struct rkllm12_param p12;
        struct rkllm13_param p13;
        unsigned char bytes[1024];
    } u;
};

#if defined(__LP64__)
_Static_assert(sizeof(struct rkllm12_param) == 208, "rkllm 1.2 RKLLMParam");
_Static_assert(offsetof(struct rkllm12_param, extend_param) == 88, "rkllm 1.2 extend_param");
_Static_assert(sizeof(struct rkllm13_param) == 184, "rkllm 1.3 RKLLMParam");
_Static_assert(offsetof(struct rkllm13_param, extend_param) == 60, "rkllm 1.3 extend_param");
_Static_assert(sizeof(struct rkllm12_input) == 64, "rkllm 1.2 RKLLMInput");
_Static_assert(sizeof(struct rkllm13_input) == 160, "rkllm 1.3 RKLLMInput");
_Static_assert(sizeof(struct rkllm12_infer) == 32, "rkllm 1.2 RKLLMInferParam");
_Static_assert(offsetof(struct rkllm12_infer, keep_history) == 24, "rkllm 1.2 keep_history");
_Static_assert(sizeof(struct rkllm13_infer) == 40, "rkllm 1.3 RKLLMInferParam");
_Static_assert(offsetof(struct rkllm13_infer, keep_history) == 32, "rkllm 1.3 keep_history");
_Static_assert(sizeof(struct rkllm_result) == 72, "rkllm RKLLMResult");
_Static_assert(sizeof(struct rkllm13_sampling) == 36, "rkllm 1.3 RKLLMSamplingParam");
_Static_assert(sizeof(struct rkllm13_callbacks) == 48, "rkllm 1.3 RKLLMCallback");
#endif

#endif
