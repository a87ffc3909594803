/* GGUF writer: metadata is serialized as it is added; tensors are kept with their data and
 * laid out (offsets, padding) when the file is produced. Follows the GGUF layout the reader
 * in gguf.c accepts. */
#include "engine/gguf/gguf_write.h"

#include "util/buf.h"
#include "util/checked.h"
#include "util/mem.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct wtensor {
    char *name; // owned
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    void *data; // owned, size bytes
    size_t size;
};

struct gguf_writer {
    uint32_t version;
    uint32_t alignment;
    bool has_alignment;
    struct buf kv; // serialized key/value pairs
    int64_t n_kv;
    char **keys; // n_kv owned copies, for duplicate checks
    struct wtensor *tensors;
    int64_t n_tensors, tensors_cap;
};

int gguf_writer_new(struct gguf_writer **out)
{
    struct gguf_writer *w = mem_calloc(1, sizeof *w);
    if (!w) return ERR_NOMEM;
    w->version = 3;
    w->alignment = 32;
    buf_init(&w->kv);
    *out = w;
    return ERR_OK;
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++)
        mem_free(w->keys[i]);
    mem_free(w->keys);
    for (int64_t i = 0; i < w->n_tensors; i++) {
        mem_free(w->tensors[i].name);
        mem_free(w->tensors[i].data);
    }
    mem_free(w->tensors);
    buf_deinit(&w->kv);
    mem_free(w);
}

int gguf_writer_set_version(struct gguf_writer *w, uint32_t version)
{
    if (version < 1 || version > 3 || w->n_kv > 0 || w->n_tensors > 0) return ERR_INVALID;
    w->version = version;
    return ERR_OK;
}

static int put_count(struct buf *b, uint32_t version, uint64_t n)
{
    if (version == 1) {
        if (n > UINT32_MAX) return ERR_LIMIT;
        uint32_t v = (uint32_t)n;
        return buf_append(b, &v, 4);
    }
    return buf_append(b, &n, 8);
}

static int put_str(struct buf *b, uint32_t version, const char *s, size_t len)
{
    int rc = put_count(b, version, len);
    return rc == ERR_OK ? buf_append(b, s, len) : rc;
}

static bool has_key(const struct gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return true;
    return false;
}

/* Appends key + type; on any later failure the caller truncates kv back to mark. */
static int begin_kv(struct gguf_writer *w, const char *key, uint32_t type, size_t *mark)
{
    if (has_key(w, key)) return ERR_EXISTS;
    *mark = w->kv.len;
    int rc = put_str(&w->kv, w->version, key, strlen(key));
    if (rc == ERR_OK) rc = buf_append(&w->kv, &type, 4);
    return rc;
}

static int end_kv(struct gguf_writer *w, const char *key, size_t mark, int rc)
{
    char **keys = NULL;
    char *copy = NULL;
    if (rc == ERR_OK) {
        keys = mem_realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *keys);
        copy = mem_strdup(key);
        if (keys) w->keys = keys;
        if (!keys || !copy) rc = ERR_NOMEM;
    }
    if (rc != ERR_OK) {
        mem_free(copy);
        w->kv.len = mark;
        return rc;
    }
    w->keys[w->n_kv++] = copy;
    return ERR_OK;
}

int gguf_writer_add_scalar(struct gguf_writer *w, const char *key, enum gguf_value_type type,
                           const void *value)
{
    size_t es = gguf_value_size(type), mark = w->kv.len;
    if (es == 0) return ERR_INVALID;
    int rc = begin_kv(w, key, (uint32_t)type, &mark);
    if (rc == ERR_EXISTS) return rc;
    if (rc == ERR_OK) rc = buf_append(&w->kv, value, es);
    return end_kv(w, key, mark, rc);
}

int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
    return gguf_writer_add_scalar(w, key, GGUF_VALUE_U32, &v);
}

int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v)
{
    return gguf_writer_add_scalar(w, key, GGUF_VALUE_I32, &v);
}

int gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v)
{
    return gguf_writer_add_scalar(w, key, GGUF_VALUE_U64, &v);
}

int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v)
{
    return gguf_writer_add_scalar(w, key, GGUF_VALUE_F32, &v);
}

int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return gguf_writer_add_scalar(w, key, GGUF_VALUE_BOOL, &b);
}

int gguf_writer_add_strn(struct gguf_writer *w, const char *key, struct str v)
{
    size_t mark = w->kv.len;
    int rc = begin_kv(w, key, GGUF_VALUE_STRING, &mark);
    if (rc == ERR_EXISTS) return rc;
    if (rc == ERR_OK) rc = put_str(&w->kv, w->version, v.ptr ? v.ptr : "", v.len);
    return end_kv(w, key, mark, rc);
}

int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v)
{
    return gguf_writer_add_strn(w, key, str_from_cstr(v));
}

int gguf_writer_add_arr(struct gguf_writer *w, const char *key, enum gguf_value_type elem_type,
                        const void *elems, int64_t n)
{
    size_t es = gguf_value_size(elem_type), bytes, mark = w->kv.len;
    uint32_t et = (uint32_t)elem_type;
    if (es == 0 || n < 0 || !size_mul(es, (size_t)n, &bytes)) return ERR_INVALID;
    int rc = begin_kv(w, key, GGUF_VALUE_ARRAY, &mark);
    if (rc == ERR_EXISTS) return rc;
    if (rc == ERR_OK) rc = buf_append(&w->kv, &et, 4);
    if (rc == ERR_OK) rc = put_count(&w->kv, w->version, (uint64_t)n);
    if (rc == ERR_OK && bytes > 0) rc = buf_append(&w->kv, elems, bytes);
    return end_kv(w, key, mark, rc);
}

int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const struct str *elems,
                            int64_t n)
{
    size_t mark = w->kv.len;
    uint32_t et = GGUF_VALUE_STRING;
    if (n < 0) return ERR_INVALID;
    int rc = begin_kv(w, key, GGUF_VALUE_ARRAY, &mark);
    if (rc == ERR_EXISTS) return rc;
    if (rc == ERR_OK) rc = buf_append(&w->kv, &et, 4);
    if (rc == ERR_OK) rc = put_count(&w->kv, w->version, (uint64_t)n);
    for (int64_t i = 0; i < n && rc == ERR_OK; i++)
        rc = put_str(&w->kv, w->version, elems[i].ptr ? elems[i].ptr : "", elems[i].len);
    return end_kv(w, key, mark, rc);
}

int gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) return ERR_INVALID;
    if (w->has_alignment) return ERR_EXISTS;
    int rc = gguf_writer_add_u32(w, "general.alignment", alignment);
    if (rc != ERR_OK) return rc;
    w->alignment = alignment;
    w->has_alignment = true;
    return ERR_OK;
}

static int shape_bytes(uint32_t type, int n_dims, const int64_t *ne, size_t *out)
{
    int64_t block_len;
    size_t block_bytes, n = 1;
    if (gguf_type_size(type, &block_len, &block_bytes) != ERR_OK || n_dims < 1 ||
        n_dims > GGUF_MAX_DIMS)
        return ERR_INVALID;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 0 || !size_mul(n, (size_t)ne[d], &n)) return ERR_INVALID;
    if (ne[0] % block_len != 0) return ERR_INVALID;
    if (!size_mul(n / (size_t)block_len, block_bytes, out)) return ERR_INVALID;
    return ERR_OK;
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int n_dims,
                           const int64_t *ne, const void *data, size_t size)
{
    size_t expect;
    if (shape_bytes(type, n_dims, ne, &expect) != ERR_OK || expect != size) return ERR_INVALID;
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return ERR_EXISTS;
    if (w->n_tensors == w->tensors_cap) {
        int64_t cap = w->tensors_cap ? w->tensors_cap * 2 : 16;
        struct wtensor *t = mem_realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) return ERR_NOMEM;
        w->tensors = t;
        w->tensors_cap = cap;
    }
    struct wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = mem_strdup(name);
    t->data = mem_alloc(size);
    if (!t->name || !t->data) {
        mem_free(t->name);
        mem_free(t->data);
        return ERR_NOMEM;
    }
    if (size) memcpy(t->data, data, size);
    t->size = size;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    w->n_tensors++;
    return ERR_OK;
}

static size_t pad_to(size_t n, size_t a)
{
    return (a - n % a) % a;
}

static int put_padding(struct buf *b, size_t n)
{
    static const char zeros[64];
    int rc = ERR_OK;
    while (n > 0 && rc == ERR_OK) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        rc = buf_append(b, zeros, k);
        n -= k;
    }
    return rc;
}

/* Header, metadata and tensor table, padded to the alignment. */
static int put_header(const struct gguf_writer *w, struct buf *b)
{
    uint32_t v = w->version;
    int rc = buf_append(b, "GGUF", 4);
    if (rc == ERR_OK) rc = buf_append(b, &v, 4);
    if (rc == ERR_OK) rc = put_count(b, v, (uint64_t)w->n_tensors);
    if (rc == ERR_OK) rc = put_count(b, v, (uint64_t)w->n_kv);
    if (rc == ERR_OK && w->kv.len) rc = buf_append(b, w->kv.data, w->kv.len);
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors && rc == ERR_OK; i++) {
        const struct wtensor *t = &w->tensors[i];
        uint32_t nd = (uint32_t)t->n_dims;
        rc = put_str(b, v, t->name, strlen(t->name));
        if (rc == ERR_OK) rc = buf_append(b, &nd, 4);
        for (int d = 0; d < t->n_dims && rc == ERR_OK; d++)
            rc = put_count(b, v, (uint64_t)t->ne[d]);
        if (rc == ERR_OK) rc = buf_append(b, &t->type, 4);
        if (rc == ERR_OK) rc = buf_append(b, &offset, 8);
        offset += t->size + pad_to(t->size, w->alignment);
    }
    if (rc == ERR_OK && w->n_tensors > 0) rc = put_padding(b, pad_to(b->len, w->alignment));
    return rc;
}

int gguf_writer_to_memory(const struct gguf_writer *w, void **data, size_t *len)
{
    struct buf b;
    buf_init(&b);
    int rc = put_header(w, &b);
    for (int64_t i = 0; i < w->n_tensors && rc == ERR_OK; i++) {
        const struct wtensor *t = &w->tensors[i];
        if (t->size) rc = buf_append(&b, t->data, t->size);
        if (rc == ERR_OK) rc = put_padding(&b, pad_to(t->size, w->alignment));
    }
    if (rc == ERR_OK && b.len == 0) rc = buf_append(&b, "", 0);
    if (rc != ERR_OK) {
        buf_deinit(&b);
        return rc;
    }
    *len = b.len;
    *data = buf_steal(&b);
    return ERR_OK;
}

/* Streams tensor data straight from the writer so a large model is not held twice. */
int gguf_writer_to_file(const struct gguf_writer *w, const char *path, struct errmsg *err)
{
    struct buf b;
    buf_init(&b);
    int rc = put_header(w, &b);
    if (rc != ERR_OK) {
        buf_deinit(&b);
        return errmsg_set(err, rc, "building GGUF header: %s", err_str(rc));
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        buf_deinit(&b);
        return errmsg_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    }
    static const char zeros[64];
    bool ok = fwrite(b.data, 1, b.len, f) == b.len;
    for (int64_t i = 0; i < w->n_tensors && ok; i++) {
        const struct wtensor *t = &w->tensors[i];
        size_t pad = pad_to(t->size, w->alignment);
        ok = fwrite(t->data, 1, t->size, f) == t->size;
        while (ok && pad > 0) {
            size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            ok = fwrite(zeros, 1, k, f) == k;
            pad -= k;
        }
    }
    buf_deinit(&b);
    if (fclose(f) != 0) ok = false;
    if (!ok) return errmsg_set(err, ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return ERR_OK;
}
