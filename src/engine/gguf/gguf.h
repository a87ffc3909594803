/* GGUF reader (v1, v2, v3): the file is mmapped read-only and every count, length, offset,
 * dimension, type and alignment is validated with overflow-safe arithmetic at open time, so the
 * accessors below never over-read. Tensor data is used in place. Not a writer (see gguf_write.h). */
#ifndef ENGINE_GGUF_H
#define ENGINE_GGUF_H

#include "util/err.h"
#include "util/str.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gguf_value_type {
    GGUF_VALUE_U8 = 0,
    GGUF_VALUE_I8 = 1,
    GGUF_VALUE_U16 = 2,
    GGUF_VALUE_I16 = 3,
    GGUF_VALUE_U32 = 4,
    GGUF_VALUE_I32 = 5,
    GGUF_VALUE_F32 = 6,
    GGUF_VALUE_BOOL = 7,
    GGUF_VALUE_STRING = 8,
    GGUF_VALUE_ARRAY = 9,
    GGUF_VALUE_U64 = 10,
    GGUF_VALUE_I64 = 11,
    GGUF_VALUE_F64 = 12,
};

#define GGUF_MAX_DIMS 4

struct gguf_tensor {
    struct str name;           // borrowed from the mapping; not NUL-terminated
    uint32_t type;             // ggml type id (enum quant_type), validated as known
    int n_dims;                // 1..GGUF_MAX_DIMS
    int64_t ne[GGUF_MAX_DIMS]; // elements per dimension, ne[0] innermost; unused dims are 1.
                               // The total is a multiple of the type's block length; ne[0]
                               // may not be in files from early quantizers (check rows).
    const void *data;          // into the mapping, aligned to the file's alignment
    size_t size;               // bytes
};

struct gguf;

/* Opens and validates a file. ERR_INVALID (a directory, FIFO or device: never opened in a way
 * that blocks), ERR_IO (missing, cannot open/map, or changed while opening),
 * ERR_FORMAT (empty or malformed, message in err names the key or tensor), ERR_UNSUPPORTED
 * (unknown version or tensor type), ERR_LIMIT, ERR_NOMEM. On success *out is the caller's;
 * free with gguf_close(). Keeps the file's descriptor open until then. Thread-safe once open:
 * all accessors are read-only. */
int gguf_open(const char *path, struct gguf **out, struct errmsg *err);

/* True once the mapped file is known to have changed under the reader: truncated (a page
 * fault on the mapping, caught by util/mapguard, or a smaller size), grown, or rewritten in
 * place (gguf_watch.h says what is compared). From then on tensor data may be zeros or
 * another file's bytes: results computed from it must be discarded. Sticky. Costs one fstat.
 * Thread-safe. Always false for gguf_open_memory readers. */
bool gguf_is_changed(const struct gguf *g);

/* Same over bytes already in memory (borrowed; must outlive the reader). For fuzzing/tests. */
int gguf_open_memory(const void *data, size_t len, struct gguf **out, struct errmsg *err);

/* Unmaps and frees. gguf_close(NULL) is a no-op. */
void gguf_close(struct gguf *g);

uint32_t gguf_version(const struct gguf *g);
size_t gguf_file_size(const struct gguf *g);
/* general.alignment (default 32) and the byte offset where the tensor data section starts. */
uint32_t gguf_alignment(const struct gguf *g);
size_t gguf_data_offset(const struct gguf *g);

/* ggml's name of a tensor type id ("q4_K"), or NULL when the id is unknown. Cannot fail. */
const char *gguf_type_name(uint32_t type);
/* Elements per block and bytes per block of a tensor type id: ERR_OK, or ERR_UNSUPPORTED for
 * an unknown id. Knows every ggml type, including ones the engine has no kernels for. */
int gguf_type_size(uint32_t type, int64_t *block_len, size_t *block_bytes);
/* Bytes of one scalar of a value type; 0 for STRING, ARRAY and unknown types. */
size_t gguf_value_size(enum gguf_value_type type);

/* Metadata keys by index, 0..gguf_key_count()-1. */
int64_t gguf_key_count(const struct gguf *g);
struct str gguf_key_name(const struct gguf *g, int64_t idx);
enum gguf_value_type gguf_key_type(const struct gguf *g, int64_t idx);

/* The raw little-endian bytes of key idx's scalar value, or the packed elements of its numeric
 * array; NULL for strings, string arrays and idx out of range. Borrowed, possibly unaligned. */
const void *gguf_key_raw(const struct gguf *g, int64_t idx);

/* Index of a key, or -1. */
int64_t gguf_find_key(const struct gguf *g, const char *key);

/* Typed getters: ERR_OK, ERR_NOT_FOUND (no such key) or ERR_FORMAT (wrong type, or an integer
 * out of the target's range). Integer getters accept any integer type that fits; gguf_get_f32
 * accepts F32 and F64. */
int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out);
int gguf_get_i64(const struct gguf *g, const char *key, int64_t *out);
int gguf_get_f32(const struct gguf *g, const char *key, float *out);
int gguf_get_bool(const struct gguf *g, const char *key, bool *out);
int gguf_get_str(const struct gguf *g, const char *key, struct str *out);

/* Arrays: element type and count. ERR_OK, ERR_NOT_FOUND, ERR_FORMAT (not an array). */
int gguf_get_arr(const struct gguf *g, const char *key, enum gguf_value_type *elem_type,
                 int64_t *n);
/* A numeric or bool array in place: *data points at n packed little-endian elements of
 * gguf_value_size(elem_type) bytes each, borrowed from the mapping and possibly unaligned
 * (read with memcpy). ERR_OK, ERR_NOT_FOUND, ERR_FORMAT (not an array, or of strings). */
int gguf_get_arr_data(const struct gguf *g, const char *key, enum gguf_value_type *elem_type,
                      int64_t *n, const void **data);
/* Element i of a string array (ERR_OK, ERR_NOT_FOUND, ERR_FORMAT, ERR_INVALID for i out of
 * range). The slice is borrowed from the mapping. */
int gguf_get_arr_str(const struct gguf *g, const char *key, int64_t i, struct str *out);
/* Element i of a numeric or bool array converted to double / int64 (same codes). */
int gguf_get_arr_f64(const struct gguf *g, const char *key, int64_t i, double *out);
int gguf_get_arr_i64(const struct gguf *g, const char *key, int64_t i, int64_t *out);

/* Tensors by index, 0..gguf_tensor_count()-1, or by name (NULL when absent). Borrowed; valid
 * until gguf_close(). */
int64_t gguf_tensor_count(const struct gguf *g);
const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, int64_t idx);
const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name);
/* The tensor `blk.<layer>.<name>` (layer >= 0) or `<name>` (layer < 0), or NULL; the full name
 * is written to full (cap bytes, truncated) for messages. */
const struct gguf_tensor *gguf_find_layer_tensor(const struct gguf *g, const char *name, int layer,
                                                 char *full, size_t cap);
/* The tensor's name as a C string in buf (at most 80 characters), for messages. */
const char *gguf_tensor_name(const struct gguf_tensor *t, char *buf, size_t cap);
/* Elements in all tensors (the model's parameter count). */
int64_t gguf_param_count(const struct gguf *g);

#endif
