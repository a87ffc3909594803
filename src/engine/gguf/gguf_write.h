/* GGUF writer: builds a GGUF file (v3 by default; v1/v2 for tests) in memory from metadata
 * keys of every value type and tensors with their data, then writes it to a file or hands the
 * bytes back. Used by the synthetic-model tool and tests; not for the serving path. */
#ifndef ENGINE_GGUF_WRITE_H
#define ENGINE_GGUF_WRITE_H

#include "engine/gguf/gguf.h"
#include "util/str.h"

#include <stddef.h>
#include <stdint.h>

struct gguf_writer;

/* A new empty writer (version 3, alignment 32). ERR_OK or ERR_NOMEM. Caller frees with
 * gguf_writer_free(). Not thread-safe; one owner. */
int gguf_writer_new(struct gguf_writer **out);
/* Frees everything. gguf_writer_free(NULL) is a no-op. */
void gguf_writer_free(struct gguf_writer *w);

/* File version 1, 2 or 3 (v1 writes u32 counts, lengths and dims). ERR_INVALID otherwise.
 * Call before adding anything. */
int gguf_writer_set_version(struct gguf_writer *w, uint32_t version);
/* Data alignment; also adds the general.alignment key. ERR_INVALID unless a power of two;
 * ERR_EXISTS when already set. */
int gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment);

/* Metadata. Keys are copied. Every adder returns ERR_OK, ERR_EXISTS (the key was already
 * added), ERR_INVALID (bad type for the adder) or ERR_NOMEM. */
int gguf_writer_add_scalar(struct gguf_writer *w, const char *key, enum gguf_value_type type,
                           const void *value); // value points at one element of the type
int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v);
int gguf_writer_add_strn(struct gguf_writer *w, const char *key, struct str v);
/* A numeric or bool array: n packed elements of gguf_value_size(elem_type) bytes each. */
int gguf_writer_add_arr(struct gguf_writer *w, const char *key, enum gguf_value_type elem_type,
                        const void *elems, int64_t n);
/* A string array. */
int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const struct str *elems,
                            int64_t n);

/* A tensor: name, ggml type id, n_dims (1..4) dims ne[0] innermost, and its data (size must be
 * the exact byte size of that shape and type; the bytes are copied). ERR_OK, ERR_EXISTS,
 * ERR_INVALID (bad shape, type or size), ERR_NOMEM. */
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int n_dims,
                           const int64_t *ne, const void *data, size_t size);

/* Serializes into a new buffer. ERR_OK or ERR_NOMEM/ERR_LIMIT; on success *data (caller frees
 * with mem_free()) and *len. The writer stays usable. */
int gguf_writer_to_memory(const struct gguf_writer *w, void **data, size_t *len);
/* Writes the file (created or truncated). ERR_OK, ERR_IO (message in err), ERR_NOMEM. */
int gguf_writer_to_file(const struct gguf_writer *w, const char *path, struct errmsg *err);

#endif
