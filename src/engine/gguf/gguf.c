/* GGUF reader: parses and validates the header, metadata and tensor table of a GGUF v1/v2/v3
 * file in one pass at open time, then answers lookups from that index. Follows the GGUF
 * specification of the ggml project (little-endian files only). */
#include "engine/gguf/gguf.h"

#include "engine/gguf/gguf_watch.h"
#include "util/checked.h"
#include "util/file.h"
#include "util/mapguard.h"
#include "util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Limits on what a file may declare. They are far above anything a real model uses and keep a
 * hostile file from making us allocate much more than its own size:
 *  - keys are short dotted names, so 64 KiB is generous;
 *  - string values hold chat templates and licences, which reach a few hundred KiB; 64 MiB;
 *  - tensor names are at most 63 bytes in ggml; we accept up to 1024;
 *  - string arrays (vocabularies, merges) need a 16-byte index entry per element, so they are
 *    capped at 2^24 elements; numeric arrays are used in place and capped at 2^30;
 *  - keys and tensors each at most 2^20. */
#define KEY_LEN_MAX     ((uint64_t)64 << 10)
#define STR_LEN_MAX     ((uint64_t)64 << 20)
#define NAME_LEN_MAX    1024u
#define STR_ARR_LEN_MAX ((uint64_t)1 << 24)
#define ARR_LEN_MAX     ((uint64_t)1 << 30)
#define TENSOR_HEAD_LEN 64 // bytes of each tensor in the change fingerprint
#define N_KV_MAX        ((uint64_t)1 << 20)
#define N_TENSORS_MAX   ((uint64_t)1 << 20)
#define ALIGNMENT_DEF   32u

struct kv {
    struct str name;     // borrowed from the mapping
    uint32_t type;       // enum gguf_value_type
    uint32_t elem_type;  // for arrays
    uint64_t n;          // array length (0 for scalars)
    const uint8_t *data; // scalar bytes, or first element of a numeric array
    struct str sval;     // string value
    struct str *strs;    // string array elements (n of them), owned
};

/* Immutable after open (watch has its own lock). */
struct gguf {
    const uint8_t *base;      // mapping or caller's bytes
    size_t len;               // bytes
    bool is_mapped;           // base came from mmap and is unmapped by gguf_close
    int guard;                // mapguard slot of the mapping, or -1
    struct gguf_watch *watch; // the mapped file's descriptor and fingerprint, or NULL
    uint32_t version;
    uint32_t alignment;
    size_t data_offset; // start of the tensor data section
    int64_t n_kv;
    struct kv *kvs; // n_kv entries
    int64_t n_tensors;
    struct gguf_tensor *tensors; // n_tensors entries
    uint32_t *kv_hash;           // open addressing; slot holds index + 1, 0 = empty
    uint32_t *tensor_hash;
    size_t kv_hash_cap; // power of two
    size_t tensor_hash_cap;
};

struct cursor {
    const uint8_t *p;
    size_t pos, len;
    uint32_t version;
};

struct type_size {
    uint16_t block_len;
    uint16_t block_bytes;
    const char *name;
};

/* ggml's on-disk type ids (ggml.h). Ids not listed were removed from the format. */
static const struct type_size type_sizes[] = {
    [0] = {1, 4, "f32"},         [1] = {1, 2, "f16"},         [2] = {32, 18, "q4_0"},
    [3] = {32, 20, "q4_1"},      [6] = {32, 22, "q5_0"},      [7] = {32, 24, "q5_1"},
    [8] = {32, 34, "q8_0"},      [9] = {32, 36, "q8_1"},      [10] = {256, 84, "q2_K"},
    [11] = {256, 110, "q3_K"},   [12] = {256, 144, "q4_K"},   [13] = {256, 176, "q5_K"},
    [14] = {256, 210, "q6_K"},   [15] = {256, 292, "q8_K"},   [16] = {256, 66, "iq2_xxs"},
    [17] = {256, 74, "iq2_xs"},  [18] = {256, 98, "iq3_xxs"}, [19] = {256, 50, "iq1_s"},
    [20] = {32, 18, "iq4_nl"},   [21] = {256, 110, "iq3_s"},  [22] = {256, 82, "iq2_s"},
    [23] = {256, 136, "iq4_xs"}, [24] = {1, 1, "i8"},         [25] = {1, 2, "i16"},
    [26] = {1, 4, "i32"},        [27] = {1, 8, "i64"},        [28] = {1, 8, "f64"},
    [29] = {256, 56, "iq1_m"},   [30] = {1, 2, "bf16"},       [34] = {256, 54, "tq1_0"},
    [35] = {256, 66, "tq2_0"},   [39] = {32, 17, "mxfp4"},
};

static const struct type_size *type_size_of(uint32_t type)
{
    if (type >= sizeof type_sizes / sizeof type_sizes[0] || type_sizes[type].block_len == 0)
        return NULL;
    return &type_sizes[type];
}

const char *gguf_type_name(uint32_t type)
{
    const struct type_size *ts = type_size_of(type);
    return ts ? ts->name : NULL;
}

int gguf_type_size(uint32_t type, int64_t *block_len, size_t *block_bytes)
{
    const struct type_size *ts = type_size_of(type);
    if (!ts) return ERR_UNSUPPORTED;
    *block_len = ts->block_len;
    *block_bytes = ts->block_bytes;
    return ERR_OK;
}

/* Bytes of one scalar of a value type, 0 for string/array/unknown. */
static size_t value_size(uint32_t type)
{
    switch (type) {
    case GGUF_VALUE_U8:
    case GGUF_VALUE_I8:
    case GGUF_VALUE_BOOL:
        return 1;
    case GGUF_VALUE_U16:
    case GGUF_VALUE_I16:
        return 2;
    case GGUF_VALUE_U32:
    case GGUF_VALUE_I32:
    case GGUF_VALUE_F32:
        return 4;
    case GGUF_VALUE_U64:
    case GGUF_VALUE_I64:
    case GGUF_VALUE_F64:
        return 8;
    default:
        return 0;
    }
}

size_t gguf_value_size(enum gguf_value_type type)
{
    return value_size((uint32_t)type);
}

/* ---- cursor over untrusted bytes: every read checks the remaining length ---- */

static bool cur_take(struct cursor *c, size_t n, const uint8_t **out)
{
    if (n > c->len - c->pos) return false;
    *out = c->p + c->pos;
    c->pos += n;
    return true;
}

static bool cur_u32(struct cursor *c, uint32_t *out)
{
    const uint8_t *b;
    if (!cur_take(c, 4, &b)) return false;
    memcpy(out, b, 4);
    return true;
}

static bool cur_u64(struct cursor *c, uint64_t *out)
{
    const uint8_t *b;
    if (!cur_take(c, 8, &b)) return false;
    memcpy(out, b, 8);
    return true;
}

/* A count or length: u32 in v1, u64 from v2 on. */
static bool cur_count(struct cursor *c, uint64_t *out)
{
    if (c->version == 1) {
        uint32_t v;
        if (!cur_u32(c, &v)) return false;
        *out = v;
        return true;
    }
    return cur_u64(c, out);
}

/* Reads a string; ERR_FORMAT when truncated, ERR_LIMIT when longer than cap. */
static int cur_str(struct cursor *c, uint64_t cap, struct str *out)
{
    uint64_t n;
    const uint8_t *b;
    if (!cur_count(c, &n)) return ERR_FORMAT;
    if (n > cap) return ERR_LIMIT;
    if (!cur_take(c, (size_t)n, &b)) return ERR_FORMAT;
    out->ptr = (const char *)b;
    out->len = (size_t)n;
    return ERR_OK;
}

/* ---- name hash (FNV-1a) for duplicate detection and lookups ---- */

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static size_t hash_cap_for(int64_t n)
{
    size_t cap = 8;
    while (cap < (size_t)n * 2)
        cap <<= 1;
    return cap;
}

typedef struct str (*name_at_fn)(const struct gguf *g, uint32_t idx);

static struct str kv_name_at(const struct gguf *g, uint32_t idx)
{
    return g->kvs[idx].name;
}

static struct str tensor_name_at(const struct gguf *g, uint32_t idx)
{
    return g->tensors[idx].name;
}

/* Slot index where name lives, or the empty slot where it would go. */
static size_t hash_probe(const struct gguf *g, const uint32_t *tab, size_t cap, name_at_fn at,
                         const char *name, size_t len)
{
    size_t i = (size_t)hash_name(name, len) & (cap - 1);
    while (tab[i] != 0) {
        struct str s = at(g, tab[i] - 1);
        if (s.len == len && memcmp(s.ptr, name, len) == 0) return i;
        i = (i + 1) & (cap - 1);
    }
    return i;
}

static int64_t hash_find(const struct gguf *g, const uint32_t *tab, size_t cap, name_at_fn at,
                         const char *name)
{
    if (!tab) return -1;
    size_t i = hash_probe(g, tab, cap, at, name, strlen(name));
    return tab[i] ? (int64_t)tab[i] - 1 : -1;
}

/* ---- parsing ---- */

static int parse_array(struct cursor *c, struct kv *kv, struct errmsg *err)
{
    uint32_t et;
    uint64_t n;
    if (!cur_u32(c, &et) || !cur_count(c, &n))
        return errmsg_set(err, ERR_FORMAT, "key '%.*s': array header truncated", (int)kv->name.len,
                          kv->name.ptr);
    kv->elem_type = et;
    kv->n = n;
    if (et == GGUF_VALUE_STRING) {
        if (n > STR_ARR_LEN_MAX)
            return errmsg_set(err, ERR_LIMIT, "key '%.*s': string array of %llu elements",
                              (int)kv->name.len, kv->name.ptr, (unsigned long long)n);
        // Each element needs at least its length field: reject before allocating the index.
        size_t min_elem = c->version == 1 ? 4 : 8;
        if (n > (c->len - c->pos) / min_elem)
            return errmsg_set(err, ERR_FORMAT, "key '%.*s': array extends past end of file",
                              (int)kv->name.len, kv->name.ptr);
        kv->strs = mem_calloc(n ? (size_t)n : 1, sizeof *kv->strs);
        if (!kv->strs)
            return errmsg_set(err, ERR_NOMEM, "out of memory reading key '%.*s'", (int)kv->name.len,
                              kv->name.ptr);
        for (uint64_t i = 0; i < n; i++) {
            int rc = cur_str(c, STR_LEN_MAX, &kv->strs[i]);
            if (rc != ERR_OK)
                return errmsg_set(err, rc, "key '%.*s': element %llu %s", (int)kv->name.len,
                                  kv->name.ptr, (unsigned long long)i,
                                  rc == ERR_LIMIT ? "too long" : "extends past end of file");
        }
        return ERR_OK;
    }
    size_t es = value_size(et);
    if (es == 0)
        return errmsg_set(err, ERR_FORMAT, "key '%.*s': unsupported array element type %u",
                          (int)kv->name.len, kv->name.ptr, et);
    if (n > ARR_LEN_MAX)
        return errmsg_set(err, ERR_LIMIT, "key '%.*s': array of %llu elements", (int)kv->name.len,
                          kv->name.ptr, (unsigned long long)n);
    if (!cur_take(c, (size_t)n * es, &kv->data)) // n * es < 2^33: no overflow
        return errmsg_set(err, ERR_FORMAT, "key '%.*s': array extends past end of file",
                          (int)kv->name.len, kv->name.ptr);
    return ERR_OK;
}

static int parse_kv(struct cursor *c, struct kv *kv, int64_t idx, struct errmsg *err)
{
    int rc = cur_str(c, KEY_LEN_MAX, &kv->name);
    if (rc != ERR_OK)
        return errmsg_set(err, rc, "key #%lld: name %s", (long long)idx,
                          rc == ERR_LIMIT ? "too long" : "extends past end of file");
    if (!cur_u32(c, &kv->type))
        return errmsg_set(err, ERR_FORMAT, "key '%.*s': type extends past end of file",
                          (int)kv->name.len, kv->name.ptr);
    if (kv->type == GGUF_VALUE_STRING) {
        rc = cur_str(c, STR_LEN_MAX, &kv->sval);
        if (rc != ERR_OK)
            return errmsg_set(err, rc, "key '%.*s': string value %s", (int)kv->name.len,
                              kv->name.ptr,
                              rc == ERR_LIMIT ? "too long" : "extends past end of file");
        return ERR_OK;
    }
    if (kv->type == GGUF_VALUE_ARRAY) return parse_array(c, kv, err);
    size_t es = value_size(kv->type);
    if (es == 0)
        return errmsg_set(err, ERR_FORMAT, "key '%.*s': unknown value type %u", (int)kv->name.len,
                          kv->name.ptr, kv->type);
    if (!cur_take(c, es, &kv->data))
        return errmsg_set(err, ERR_FORMAT, "key '%.*s': value extends past end of file",
                          (int)kv->name.len, kv->name.ptr);
    return ERR_OK;
}

static int index_kvs(struct gguf *g, struct errmsg *err)
{
    g->kv_hash_cap = hash_cap_for(g->n_kv);
    g->kv_hash = mem_calloc(g->kv_hash_cap, sizeof *g->kv_hash);
    if (!g->kv_hash) return errmsg_set(err, ERR_NOMEM, "out of memory indexing keys");
    for (int64_t i = 0; i < g->n_kv; i++) {
        struct str s = g->kvs[i].name;
        size_t slot = hash_probe(g, g->kv_hash, g->kv_hash_cap, kv_name_at, s.ptr, s.len);
        if (g->kv_hash[slot])
            return errmsg_set(err, ERR_FORMAT, "duplicate key '%.*s'", (int)s.len, s.ptr);
        g->kv_hash[slot] = (uint32_t)i + 1;
    }
    return ERR_OK;
}

static int parse_kvs(struct gguf *g, struct cursor *c, uint64_t n_kv, struct errmsg *err)
{
    if (n_kv > N_KV_MAX)
        return errmsg_set(err, ERR_LIMIT, "%llu metadata keys (limit %llu)",
                          (unsigned long long)n_kv, (unsigned long long)N_KV_MAX);
    // A key takes at least 4 + 4 + 1 bytes (v1) / 8 + 4 + 1: check before allocating.
    if (n_kv > (c->len - c->pos) / 9)
        return errmsg_set(err, ERR_FORMAT, "%llu metadata keys cannot fit in the file",
                          (unsigned long long)n_kv);
    g->kvs = mem_calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
    if (!g->kvs) return errmsg_set(err, ERR_NOMEM, "out of memory reading metadata");
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t)i + 1; // so gguf_close frees what was parsed so far
        int rc = parse_kv(c, &g->kvs[i], (int64_t)i, err);
        if (rc != ERR_OK) return rc;
    }
    return index_kvs(g, err);
}

static int read_alignment(struct gguf *g, struct errmsg *err)
{
    g->alignment = ALIGNMENT_DEF;
    int64_t idx = gguf_find_key(g, "general.alignment");
    if (idx < 0) return ERR_OK;
    const struct kv *kv = &g->kvs[idx];
    if (kv->type != GGUF_VALUE_U32)
        return errmsg_set(err, ERR_FORMAT, "key 'general.alignment': type %u, expected u32",
                          kv->type);
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)) != 0)
        return errmsg_set(err, ERR_FORMAT, "key 'general.alignment': %u is not a power of two", a);
    g->alignment = a;
    return ERR_OK;
}

static int parse_tensor_info(struct cursor *c, struct gguf_tensor *t, uint64_t *offset, int64_t idx,
                             struct errmsg *err)
{
    uint32_t n_dims;
    int rc = cur_str(c, NAME_LEN_MAX, &t->name);
    if (rc != ERR_OK)
        return errmsg_set(err, rc, "tensor #%lld: name %s", (long long)idx,
                          rc == ERR_LIMIT ? "too long" : "extends past end of file");
    const int nl = (int)t->name.len;
    const char *np = t->name.ptr;
    if (!cur_u32(c, &n_dims))
        return errmsg_set(err, ERR_FORMAT, "tensor '%.*s': truncated", nl, np);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return errmsg_set(err, ERR_FORMAT, "tensor '%.*s': %u dimensions (1..%d allowed)", nl, np,
                          n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && !cur_count(c, &ne)) // dims are u32 in v1 like all counts
            return errmsg_set(err, ERR_FORMAT, "tensor '%.*s': truncated", nl, np);
        if (ne > INT64_MAX)
            return errmsg_set(err, ERR_FORMAT, "tensor '%.*s': dimension %d is negative", nl, np,
                              d);
        t->ne[d] = (int64_t)ne;
    }
    if (!cur_u32(c, &t->type) || !cur_u64(c, offset))
        return errmsg_set(err, ERR_FORMAT, "tensor '%.*s': truncated", nl, np);
    return ERR_OK;
}

/* Size of a tensor in bytes, with every product checked. */
static int tensor_size(const struct gguf_tensor *t, size_t *out, struct errmsg *err)
{
    const int nl = (int)t->name.len;
    const char *np = t->name.ptr;
    const struct type_size *ts = type_size_of(t->type);
    if (!ts)
        return errmsg_set(err, ERR_UNSUPPORTED, "tensor '%.*s': unknown type %u", nl, np, t->type);
    uint64_t nelem = 1, bytes;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (!u64_mul(nelem, (uint64_t)t->ne[d], &nelem) || nelem > INT64_MAX)
            return errmsg_set(err, ERR_FORMAT, "tensor '%.*s': element count overflows", nl, np);
    // Early quantizers packed blocks across row ends (ffn_down rows of 172 in Q8_0): such a
    // tensor is still well-formed as a whole, so it opens; the model loader rejects rows that
    // are not whole blocks.
    if (nelem % ts->block_len != 0)
        return errmsg_set(err, ERR_FORMAT,
                          "tensor '%.*s': %llu elements is not a multiple of the %s block size %u",
                          nl, np, (unsigned long long)nelem, ts->name, ts->block_len);
    if (!u64_mul(nelem / ts->block_len, ts->block_bytes, &bytes) || bytes > SIZE_MAX)
        return errmsg_set(err, ERR_FORMAT, "tensor '%.*s': byte size overflows", nl, np);
    *out = (size_t)bytes;
    return ERR_OK;
}

static int parse_tensors(struct gguf *g, struct cursor *c, uint64_t n, struct errmsg *err)
{
    if (n > N_TENSORS_MAX)
        return errmsg_set(err, ERR_LIMIT, "%llu tensors (limit %llu)", (unsigned long long)n,
                          (unsigned long long)N_TENSORS_MAX);
    // A tensor info takes at least 4 + 4 + 4 + 4 + 8 bytes.
    if (n > (c->len - c->pos) / 24)
        return errmsg_set(err, ERR_FORMAT, "%llu tensors cannot fit in the file",
                          (unsigned long long)n);
    size_t cnt = n ? (size_t)n : 1;
    g->tensors = mem_calloc(cnt, sizeof *g->tensors);
    uint64_t *offsets = mem_calloc(cnt, sizeof *offsets);
    int rc = ERR_OK;
    if (!g->tensors || !offsets) {
        rc = errmsg_set(err, ERR_NOMEM, "out of memory reading the tensor table");
        goto out_free_offsets;
    }
    for (uint64_t i = 0; i < n && rc == ERR_OK; i++)
        rc = parse_tensor_info(c, &g->tensors[i], &offsets[i], (int64_t)i, err);
    if (rc != ERR_OK) goto out_free_offsets;
    g->n_tensors = (int64_t)n;
    // The data section starts at the next multiple of the alignment.
    size_t start = c->pos, pad = (g->alignment - start % g->alignment) % g->alignment;
    g->data_offset = start + pad;
    if (n > 0 && g->data_offset > g->len) {
        rc = errmsg_set(err, ERR_FORMAT, "tensor data section starts past end of file");
        goto out_free_offsets;
    }
    for (uint64_t i = 0; i < n && rc == ERR_OK; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        size_t size = 0;
        uint64_t begin, end;
        rc = tensor_size(t, &size, err);
        if (rc != ERR_OK) break;
        if (offsets[i] % g->alignment != 0)
            rc = errmsg_set(err, ERR_FORMAT, "tensor '%.*s': offset %llu is not aligned to %u",
                            (int)t->name.len, t->name.ptr, (unsigned long long)offsets[i],
                            g->alignment);
        else if (!u64_add(g->data_offset, offsets[i], &begin) || !u64_add(begin, size, &end) ||
                 end > g->len)
            rc = errmsg_set(err, ERR_FORMAT, "tensor '%.*s': data ends past end of file",
                            (int)t->name.len, t->name.ptr);
        else {
            t->data = g->base + begin;
            t->size = size;
        }
    }
out_free_offsets:
    mem_free(offsets);
    return rc;
}

static int index_tensors(struct gguf *g, struct errmsg *err)
{
    g->tensor_hash_cap = hash_cap_for(g->n_tensors);
    g->tensor_hash = mem_calloc(g->tensor_hash_cap, sizeof *g->tensor_hash);
    if (!g->tensor_hash) return errmsg_set(err, ERR_NOMEM, "out of memory indexing tensors");
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct str s = g->tensors[i].name;
        size_t slot =
            hash_probe(g, g->tensor_hash, g->tensor_hash_cap, tensor_name_at, s.ptr, s.len);
        if (g->tensor_hash[slot])
            return errmsg_set(err, ERR_FORMAT, "duplicate tensor name '%.*s'", (int)s.len, s.ptr);
        g->tensor_hash[slot] = (uint32_t)i + 1;
    }
    return ERR_OK;
}

static int parse_header(struct gguf *g, struct cursor *c, struct errmsg *err)
{
    const uint8_t *magic;
    uint64_t n_tensors, n_kv;
    if (!cur_take(c, 4, &magic) || !cur_u32(c, &g->version))
        return errmsg_set(err, ERR_FORMAT, "file too short for a GGUF header");
    if (memcmp(magic, "GGUF", 4) != 0)
        return errmsg_set(err, ERR_FORMAT, "not a GGUF file (bad magic)");
    if (g->version < 1 || g->version > 3) {
        // A byte-swapped version means a big-endian file.
        return errmsg_set(err, ERR_UNSUPPORTED, "GGUF version %u is not supported%s", g->version,
                          g->version > 0xffff ? " (big-endian file?)" : "");
    }
    c->version = g->version;
    if (!cur_count(c, &n_tensors) || !cur_count(c, &n_kv))
        return errmsg_set(err, ERR_FORMAT, "file too short for a GGUF header");
    int rc = parse_kvs(g, c, n_kv, err);
    if (rc == ERR_OK) rc = read_alignment(g, err);
    if (rc == ERR_OK) rc = parse_tensors(g, c, n_tensors, err);
    if (rc == ERR_OK) rc = index_tensors(g, err);
    return rc;
}

static int open_bytes(const void *data, size_t len, bool is_mapped, struct gguf **out,
                      struct errmsg *err)
{
    struct gguf *g = mem_calloc(1, sizeof *g);
    if (!g) return errmsg_set(err, ERR_NOMEM, "out of memory opening GGUF");
    g->guard = -1;
    g->base = data;
    g->len = len;
    struct cursor c = {.p = data, .pos = 0, .len = len};
    int rc = parse_header(g, &c, err);
    if (rc != ERR_OK) {
        gguf_close(g); // does not unmap: is_mapped is still false
        return rc;
    }
    g->is_mapped = is_mapped;
    *out = g;
    return ERR_OK;
}

int gguf_open_memory(const void *data, size_t len, struct gguf **out, struct errmsg *err)
{
    if (!data && len > 0) return errmsg_set(err, ERR_INVALID, "no data");
    return open_bytes(data ? data : "", len, false, out, err);
}

/* The fingerprint of a mapped file: its header and tensor index, and the first bytes of every
 * tensor (a rewrite with the same layout still changes those). Takes ownership of fd. */
static int watch_file(struct gguf *g, int fd, const char *path, struct errmsg *err)
{
    size_t n_spans, bytes;
    if (!size_add((size_t)g->n_tensors, 1, &n_spans) ||
        !size_mul(n_spans, sizeof(struct gguf_watch_span), &bytes)) {
        close(fd);
        return errmsg_set(err, ERR_LIMIT, "%s: too many tensors", path);
    }
    struct gguf_watch_span *spans = mem_alloc(bytes);
    if (!spans) {
        close(fd);
        return errmsg_set(err, ERR_NOMEM, "out of memory opening GGUF");
    }
    spans[0] = (struct gguf_watch_span){0, g->data_offset < g->len ? g->data_offset : g->len};
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)((const uint8_t *)t->data - g->base);
        uint64_t len = t->size < TENSOR_HEAD_LEN ? t->size : TENSOR_HEAD_LEN;
        spans[i + 1] = (struct gguf_watch_span){off, len};
    }
    int rc = gguf_watch_new(fd, spans, (int64_t)n_spans, &g->watch);
    mem_free(spans);
    if (rc == ERR_NOMEM) return errmsg_set(err, rc, "out of memory opening GGUF");
    if (rc != ERR_OK) return errmsg_set(err, rc, "%s changed while it was being loaded", path);
    return ERR_OK;
}

/* The mapping is read-only and private, without MAP_POPULATE: populating would read the whole
 * file (gigabytes) before the first use, even for tools that only read metadata; pages fault in
 * on first touch and the OS may drop them under pressure. The mapping is registered with the
 * SIGBUS guard before anything reads it: a file truncated under us gives zero pages and a
 * faulted mark (gguf_is_changed), not a dead process. The descriptor stays open for the
 * change checks. The open never blocks: a FIFO or device path is refused (util/file.h). */
int gguf_open(const char *path, struct gguf **out, struct errmsg *err)
{
    int fd;
    int rc = file_open_regular(path, &fd, err);
    if (rc == ERR_NOT_FOUND) rc = ERR_IO; // this reader's code for a file it cannot open
    if (rc != ERR_OK) return rc;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return errmsg_set(err, ERR_FORMAT, "%s: an empty file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return errmsg_set(err, ERR_LIMIT, "%s: file too large to map", path);
    }
    size_t len = (size_t)st.st_size;
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return errmsg_set(err, ERR_IO, "%s: mmap: %s", path, strerror(e));
    }
    int guard = mapguard_add(p, len);
    struct gguf *g;
    rc = open_bytes(p, len, false, &g, err);
    if (rc != ERR_OK) {
        close(fd);
        goto out_unmap;
    }
    g->is_mapped = true;
    g->guard = guard;
    rc = watch_file(g, fd, path, err);
    if (rc == ERR_OK && mapguard_has_faulted(guard))
        rc = errmsg_set(err, ERR_IO, "%s was truncated while it was being loaded", path);
    if (rc != ERR_OK) {
        gguf_close(g); // unmaps and forgets the guard
        return rc;
    }
    *out = g;
    return ERR_OK;
out_unmap:
    mapguard_remove(guard);
    munmap(p, len);
    return rc;
}

bool gguf_is_changed(const struct gguf *g)
{
    if (mapguard_has_faulted(g->guard)) return true;
    return g->watch && gguf_watch_is_changed(g->watch);
}

void gguf_close(struct gguf *g)
{
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++)
        mem_free(g->kvs[i].strs);
    mem_free(g->kvs);
    mem_free(g->tensors);
    mem_free(g->kv_hash);
    mem_free(g->tensor_hash);
    gguf_watch_free(g->watch);
    mapguard_remove(g->guard);
    if (g->is_mapped) munmap((void *)(uintptr_t)g->base, g->len);
    mem_free(g);
}

uint32_t gguf_version(const struct gguf *g)
{
    return g->version;
}

size_t gguf_file_size(const struct gguf *g)
{
    return g->len;
}

uint32_t gguf_alignment(const struct gguf *g)
{
    return g->alignment;
}

size_t gguf_data_offset(const struct gguf *g)
{
    return g->data_offset;
}

int64_t gguf_key_count(const struct gguf *g)
{
    return g->n_kv;
}

struct str gguf_key_name(const struct gguf *g, int64_t idx)
{
    if (idx < 0 || idx >= g->n_kv) {
        struct str none = {"", 0};
        return none;
    }
    return g->kvs[idx].name;
}

enum gguf_value_type gguf_key_type(const struct gguf *g, int64_t idx)
{
    if (idx < 0 || idx >= g->n_kv) return (enum gguf_value_type) - 1;
    return (enum gguf_value_type)g->kvs[idx].type;
}

int64_t gguf_find_key(const struct gguf *g, const char *key)
{
    return hash_find(g, g->kv_hash, g->kv_hash_cap, kv_name_at, key);
}

/* Reads one numeric/bool element at p of type t as int64 (ok) or reports a float type. */
static bool elem_i64(uint32_t t, const uint8_t *p, int64_t *out, bool *is_u64_big)
{
    *is_u64_big = false;
    switch (t) {
    case GGUF_VALUE_U8:
        *out = p[0];
        return true;
    case GGUF_VALUE_BOOL:
        *out = p[0] != 0;
        return true;
    case GGUF_VALUE_I8:
        *out = (int8_t)p[0];
        return true;
    case GGUF_VALUE_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        *out = v;
        return true;
    }
    case GGUF_VALUE_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        *out = v;
        return true;
    }
    case GGUF_VALUE_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        *out = v;
        return true;
    }
    case GGUF_VALUE_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        *out = v;
        return true;
    }
    case GGUF_VALUE_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        *out = v;
        return true;
    }
    case GGUF_VALUE_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        *is_u64_big = v > INT64_MAX;
        *out = (int64_t)(v & INT64_MAX);
        return !*is_u64_big;
    }
    default:
        return false;
    }
}

static bool elem_f64(uint32_t t, const uint8_t *p, double *out)
{
    if (t == GGUF_VALUE_F32) {
        float v;
        memcpy(&v, p, 4);
        *out = v;
        return true;
    }
    if (t == GGUF_VALUE_F64) {
        memcpy(out, p, 8);
        return true;
    }
    if (t == GGUF_VALUE_U64) {
        uint64_t v;
        memcpy(&v, p, 8);
        *out = (double)v;
        return true;
    }
    int64_t i;
    bool big;
    if (!elem_i64(t, p, &i, &big)) return false;
    *out = (double)i;
    return true;
}

static const struct kv *kv_lookup(const struct gguf *g, const char *key)
{
    int64_t idx = gguf_find_key(g, key);
    return idx < 0 ? NULL : &g->kvs[idx];
}

static bool is_integer_type(uint32_t t)
{
    return t <= GGUF_VALUE_I32 || t == GGUF_VALUE_U64 || t == GGUF_VALUE_I64;
}

int gguf_get_i64(const struct gguf *g, const char *key, int64_t *out)
{
    const struct kv *kv = kv_lookup(g, key);
    int64_t v;
    bool big;
    if (!kv) return ERR_NOT_FOUND;
    if (!is_integer_type(kv->type) || !elem_i64(kv->type, kv->data, &v, &big)) return ERR_FORMAT;
    *out = v;
    return ERR_OK;
}

int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out)
{
    int64_t v;
    int rc = gguf_get_i64(g, key, &v);
    if (rc != ERR_OK) return rc;
    if (v < 0 || v > UINT32_MAX) return ERR_FORMAT;
    *out = (uint32_t)v;
    return ERR_OK;
}

int gguf_get_f32(const struct gguf *g, const char *key, float *out)
{
    const struct kv *kv = kv_lookup(g, key);
    double v;
    if (!kv) return ERR_NOT_FOUND;
    if ((kv->type != GGUF_VALUE_F32 && kv->type != GGUF_VALUE_F64) ||
        !elem_f64(kv->type, kv->data, &v))
        return ERR_FORMAT;
    *out = (float)v;
    return ERR_OK;
}

int gguf_get_bool(const struct gguf *g, const char *key, bool *out)
{
    const struct kv *kv = kv_lookup(g, key);
    if (!kv) return ERR_NOT_FOUND;
    if (kv->type != GGUF_VALUE_BOOL) return ERR_FORMAT;
    *out = kv->data[0] != 0;
    return ERR_OK;
}

int gguf_get_str(const struct gguf *g, const char *key, struct str *out)
{
    const struct kv *kv = kv_lookup(g, key);
    if (!kv) return ERR_NOT_FOUND;
    if (kv->type != GGUF_VALUE_STRING) return ERR_FORMAT;
    *out = kv->sval;
    return ERR_OK;
}

int gguf_get_arr(const struct gguf *g, const char *key, enum gguf_value_type *elem_type, int64_t *n)
{
    const struct kv *kv = kv_lookup(g, key);
    if (!kv) return ERR_NOT_FOUND;
    if (kv->type != GGUF_VALUE_ARRAY) return ERR_FORMAT;
    *elem_type = (enum gguf_value_type)kv->elem_type;
    *n = (int64_t)kv->n;
    return ERR_OK;
}

int gguf_get_arr_data(const struct gguf *g, const char *key, enum gguf_value_type *elem_type,
                      int64_t *n, const void **data)
{
    const struct kv *kv = kv_lookup(g, key);
    if (!kv) return ERR_NOT_FOUND;
    if (kv->type != GGUF_VALUE_ARRAY || kv->elem_type == GGUF_VALUE_STRING) return ERR_FORMAT;
    *elem_type = (enum gguf_value_type)kv->elem_type;
    *n = (int64_t)kv->n;
    *data = kv->data;
    return ERR_OK;
}

/* The array key's element i, or an error code through *rc. */
static const struct kv *arr_elem(const struct gguf *g, const char *key, int64_t i, int *rc)
{
    const struct kv *kv = kv_lookup(g, key);
    *rc = ERR_OK;
    if (!kv)
        *rc = ERR_NOT_FOUND;
    else if (kv->type != GGUF_VALUE_ARRAY)
        *rc = ERR_FORMAT;
    else if (i < 0 || (uint64_t)i >= kv->n)
        *rc = ERR_INVALID;
    return *rc == ERR_OK ? kv : NULL;
}

int gguf_get_arr_str(const struct gguf *g, const char *key, int64_t i, struct str *out)
{
    int rc;
    const struct kv *kv = arr_elem(g, key, i, &rc);
    if (!kv) return rc;
    if (kv->elem_type != GGUF_VALUE_STRING) return ERR_FORMAT;
    *out = kv->strs[i];
    return ERR_OK;
}

int gguf_get_arr_f64(const struct gguf *g, const char *key, int64_t i, double *out)
{
    int rc;
    const struct kv *kv = arr_elem(g, key, i, &rc);
    if (!kv) return rc;
    if (kv->elem_type == GGUF_VALUE_STRING ||
        !elem_f64(kv->elem_type, kv->data + (size_t)i * value_size(kv->elem_type), out))
        return ERR_FORMAT;
    return ERR_OK;
}

int gguf_get_arr_i64(const struct gguf *g, const char *key, int64_t i, int64_t *out)
{
    int rc;
    bool big;
    const struct kv *kv = arr_elem(g, key, i, &rc);
    if (!kv) return rc;
    if (!is_integer_type(kv->elem_type) && kv->elem_type != GGUF_VALUE_BOOL) return ERR_FORMAT;
    if (!elem_i64(kv->elem_type, kv->data + (size_t)i * value_size(kv->elem_type), out, &big))
        return ERR_FORMAT;
    return ERR_OK;
}

const void *gguf_key_raw(const struct gguf *g, int64_t idx)
{
    if (idx < 0 || idx >= g->n_kv) return NULL;
    const struct kv *kv = &g->kvs[idx];
    if (kv->type == GGUF_VALUE_STRING ||
        (kv->type == GGUF_VALUE_ARRAY && kv->elem_type == GGUF_VALUE_STRING))
        return NULL;
    return kv->data;
}

int64_t gguf_tensor_count(const struct gguf *g)
{
    return g->n_tensors;
}

const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, int64_t idx)
{
    if (idx < 0 || idx >= g->n_tensors) return NULL;
    return &g->tensors[idx];
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name)
{
    int64_t idx = hash_find(g, g->tensor_hash, g->tensor_hash_cap, tensor_name_at, name);
    return idx < 0 ? NULL : &g->tensors[idx];
}

const struct gguf_tensor *gguf_find_layer_tensor(const struct gguf *g, const char *name, int layer,
                                                 char *full, size_t cap)
{
    if (layer >= 0)
        snprintf(full, cap, "blk.%d.%s", layer, name);
    else
        snprintf(full, cap, "%s", name);
    return gguf_find_tensor(g, full);
}

const char *gguf_tensor_name(const struct gguf_tensor *t, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.*s", (int)(t->name.len > 80 ? 80 : t->name.len), t->name.ptr);
    return buf;
}

int64_t gguf_param_count(const struct gguf *g)
{
    int64_t n = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; // each bounded when the file was read
    }
    return n;
}
