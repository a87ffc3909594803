/* Our own C mirror of the RKNN runtime ABI (librknnrt.so, RKNPU2 SDK 2.x): the structs, enum
 * values and calls the rknn2 embedding platform uses, laid out as the runtime expects them.
 * Written from the published layouts; it is not the vendor header and declares no symbols —
 * the runtime is opened with dlopen and every call goes through struct rknn2_fns. Enums are
 * plain 32-bit integers here, as the C compilers the runtime targets lay them out. */
#ifndef PLATFORM_RKNN2_ABI_H
#define PLATFORM_RKNN2_ABI_H

#include <stddef.h>
#include <stdint.h>

/* The context handle: 32-bit on 32-bit ARM, 64-bit elsewhere (aarch64, x86-64 test hosts). */
#if defined(__arm__)
typedef uint32_t rknn2_context;
#else
typedef uint64_t rknn2_context;
#endif

#define RKNN2_MAX_DIMS     16
#define RKNN2_MAX_NAME_LEN 256

/* Return codes (0 success, negative failure). */
enum {
    RKNN2_SUCC = 0,
    RKNN2_ERR_FAIL = -1,
    RKNN2_ERR_TIMEOUT = -2,
    RKNN2_ERR_DEVICE_UNAVAILABLE = -3,
    RKNN2_ERR_MALLOC_FAIL = -4,
    RKNN2_ERR_PARAM_INVALID = -5,
    RKNN2_ERR_MODEL_INVALID = -6,
    RKNN2_ERR_CTX_INVALID = -7,
    RKNN2_ERR_INPUT_INVALID = -8,
    RKNN2_ERR_OUTPUT_INVALID = -9,
    RKNN2_ERR_DEVICE_UNMATCH = -10,
    RKNN2_ERR_TARGET_PLATFORM_UNMATCH = -13,
};

/* rknn_query commands used here. */
enum {
    RKNN2_QUERY_IN_OUT_NUM = 0,
    RKNN2_QUERY_INPUT_ATTR = 1,
    RKNN2_QUERY_OUTPUT_ATTR = 2,
    RKNN2_QUERY_SDK_VERSION = 5,
};

/* Tensor element types. */
enum {
    RKNN2_TENSOR_FLOAT32 = 0,
    RKNN2_TENSOR_FLOAT16 = 1,
    RKNN2_TENSOR_INT8 = 2,
    RKNN2_TENSOR_UINT8 = 3,
    RKNN2_TENSOR_INT16 = 4,
    RKNN2_TENSOR_UINT16 = 5,
    RKNN2_TENSOR_INT32 = 6,
    RKNN2_TENSOR_UINT32 = 7,
    RKNN2_TENSOR_INT64 = 8,
    RKNN2_TENSOR_BOOL = 9,
    RKNN2_TENSOR_INT4 = 10,
    RKNN2_TENSOR_BFLOAT16 = 11,
};

/* Tensor layouts. */
enum {
    RKNN2_TENSOR_NCHW = 0,
    RKNN2_TENSOR_NHWC = 1,
    RKNN2_TENSOR_NC1HWC2 = 2,
    RKNN2_TENSOR_UNDEFINED = 3,
};

/* NPU core masks for rknn_set_core_mask. */
enum {
    RKNN2_NPU_CORE_AUTO = 0,
    RKNN2_NPU_CORE_0 = 1,
    RKNN2_NPU_CORE_1 = 2,
    RKNN2_NPU_CORE_2 = 4,
    RKNN2_NPU_CORE_0_1 = 3,
    RKNN2_NPU_CORE_0_1_2 = 7,
    RKNN2_NPU_CORE_ALL = 0xffff,
};

/* RKNN2_QUERY_IN_OUT_NUM. */
struct rknn2_io_num {
    uint32_t n_input;
    uint32_t n_output;
};

/* RKNN2_QUERY_INPUT_ATTR / OUTPUT_ATTR: set index, the runtime fills the rest. */
struct rknn2_tensor_attr {
    uint32_t index;                // in: which input/output
    uint32_t n_dims;               // valid entries of dims
    uint32_t dims[RKNN2_MAX_DIMS]; // shape, outermost first
    char name[RKNN2_MAX_NAME_LEN]; // NUL-terminated
    uint32_t n_elems;              // product of dims
    uint32_t size;                 // bytes
    int32_t fmt;                   // RKNN2_TENSOR_NCHW…
    int32_t type;                  // RKNN2_TENSOR_FLOAT32…
    int32_t qnt_type;              // quantization kind
    int8_t fl;                     // fractional length (dynamic fixed point)
    int32_t zp;                    // zero point (affine)
    float scale;                   // scale (affine)
    uint32_t w_stride;             // read-only
    uint32_t size_with_stride;     // bytes including stride
    uint8_t pass_through;          // raw input, no conversion
    uint32_t h_stride;             // write-only
};

/* RKNN2_QUERY_SDK_VERSION. */
struct rknn2_sdk_version {
    char api_version[256];
    char drv_version[256];
};

/* One input for rknn_inputs_set. With pass_through 0 the runtime converts buf (of type and
 * fmt) to the model's input type. */
struct rknn2_input {
    uint32_t index;
    void *buf;
    uint32_t size; // bytes of buf
    uint8_t pass_through;
    int32_t type;
    int32_t fmt;
};

/* One output for rknn_outputs_get. With is_prealloc 0 the runtime allocates buf and
 * rknn_outputs_release frees it; want_float asks for float32 values. */
struct rknn2_output {
    uint8_t want_float;
    uint8_t is_prealloc;
    uint32_t index;
    void *buf;
    uint32_t size; // bytes of buf
};

/* The calls, resolved with dlsym by these names (rknn2.c's symbol table). The extend
 * arguments are always NULL here, so their structs are not mirrored. */
struct rknn2_fns {
    int (*init)(rknn2_context *ctx, void *model, uint32_t size, uint32_t flag, void *extend);
    int (*query)(rknn2_context ctx, int32_t cmd, void *info, uint32_t size);
    int (*inputs_set)(rknn2_context ctx, uint32_t n, struct rknn2_input *inputs);
    int (*run)(rknn2_context ctx, void *extend);
    int (*outputs_get)(rknn2_context ctx, uint32_t n, struct rknn2_output *outputs, void *extend);
    int (*outputs_release)(rknn2_context ctx, uint32_t n, struct rknn2_output *outputs);
    int (*set_core_mask)(rknn2_context ctx, int32_t mask);
    int (*destroy)(rknn2_context ctx);
};

#if defined(__LP64__)
_Static_assert(sizeof(struct rknn2_tensor_attr) == 376, "rknn_tensor_attr is 376 bytes on LP64");
_Static_assert(offsetof(struct rknn2_tensor_attr, n_elems) == 328, "rknn_tensor_attr layout");
_Static_assert(offsetof(struct rknn2_tensor_attr, zp) == 352, "rknn_tensor_attr layout");
_Static_assert(offsetof(struct rknn2_tensor_attr, h_stride) == 372, "rknn_tensor_attr layout");
_Static_assert(sizeof(struct rknn2_input) == 32, "rknn_input is 32 bytes on LP64");
_Static_assert(offsetof(struct rknn2_input, type) == 24, "rknn_input layout");
_Static_assert(sizeof(struct rknn2_output) == 24, "rknn_output is 24 bytes on LP64");
_Static_assert(offsetof(struct rknn2_output, buf) == 8, "rknn_output layout");
_Static_assert(sizeof(struct rknn2_sdk_version) == 512, "rknn_sdk_version layout");
#endif

#endif
