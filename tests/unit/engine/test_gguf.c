/* engine/gguf and engine/gguf_write: round trips through the writer, truncation at every byte,
 * hostile counts and sizes, the shared model files, and allocation failure at every step. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "util/buf.h"
#include "util/mapguard.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* A small file with keys of every type and three tensors; caller frees with mem_free(). */
static void *build_small(uint32_t version, size_t *len)
{
    struct gguf_writer *w;
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    assert_int_equal(gguf_writer_set_version(w, version), ERR_OK);
    assert_int_equal(gguf_writer_add_str(w, "general.architecture", "llama"), ERR_OK);
    assert_int_equal(gguf_writer_add_u32(w, "llama.block_count", 3), ERR_OK);
    assert_int_equal(gguf_writer_add_i32(w, "test.i32", -7), ERR_OK);
    assert_int_equal(gguf_writer_add_u64(w, "test.u64", 1ull << 40), ERR_OK);
    assert_int_equal(gguf_writer_add_f32(w, "test.f32", 0.5f), ERR_OK);
    assert_int_equal(gguf_writer_add_bool(w, "test.bool", true), ERR_OK);
    double d = 2.25;
    assert_int_equal(gguf_writer_add_scalar(w, "test.f64", GGUF_VALUE_F64, &d), ERR_OK);
    int8_t i8 = -3;
    assert_int_equal(gguf_writer_add_scalar(w, "test.i8", GGUF_VALUE_I8, &i8), ERR_OK);
    const struct str toks[3] = {{"<s>", 3}, {"", 0}, {"ab", 2}};
    assert_int_equal(gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3), ERR_OK);
    const float scores[3] = {0.0f, -1.5f, 2.0f};
    assert_int_equal(gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_VALUE_F32, scores, 3),
                     ERR_OK);
    const int32_t types[3] = {3, 1, -1};
    assert_int_equal(gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_VALUE_I32, types, 3),
                     ERR_OK);
    assert_int_equal(gguf_writer_add_u32(w, "llama.block_count", 4), ERR_EXISTS);
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne_a[2] = {4, 2}, ne_b[1] = {8}, ne_c[1] = {4};
    assert_int_equal(gguf_writer_add_tensor(w, "a", 0, 2, ne_a, a, sizeof a), ERR_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "b", 0, 1, ne_b, a, sizeof a), ERR_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "c", 0, 1, ne_c, a, 16), ERR_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "a", 0, 1, ne_c, a, 16), ERR_EXISTS);
    assert_int_equal(gguf_writer_add_tensor(w, "d", 0, 1, ne_c, a, 15), ERR_INVALID);
    void *data;
    assert_int_equal(gguf_writer_to_memory(w, &data, len), ERR_OK);
    gguf_writer_free(w);
    return data;
}

static void check_small(const struct gguf *g, uint32_t version)
{
    assert_int_equal(gguf_version(g), version);
    assert_int_equal(gguf_key_count(g), 11);
    struct str s;
    uint32_t u;
    int64_t i;
    float f;
    bool b;
    assert_int_equal(gguf_get_str(g, "general.architecture", &s), ERR_OK);
    assert_true(str_eq_cstr(s, "llama"));
    assert_int_equal(gguf_get_u32(g, "llama.block_count", &u), ERR_OK);
    assert_int_equal(u, 3);
    assert_int_equal(gguf_get_i64(g, "test.i32", &i), ERR_OK);
    assert_int_equal(i, -7);
    assert_int_equal(gguf_get_u32(g, "test.i32", &u), ERR_FORMAT); // negative
    assert_int_equal(gguf_get_u32(g, "test.u64", &u), ERR_FORMAT); // too big
    assert_int_equal(gguf_get_i64(g, "test.u64", &i), ERR_OK);
    assert_true(i == (int64_t)1 << 40);
    assert_int_equal(gguf_get_i64(g, "test.i8", &i), ERR_OK);
    assert_int_equal(i, -3);
    assert_int_equal(gguf_get_f32(g, "test.f32", &f), ERR_OK);
    assert_true(f == 0.5f);
    assert_int_equal(gguf_get_f32(g, "test.f64", &f), ERR_OK);
    assert_true(f == 2.25f);
    assert_int_equal(gguf_get_f32(g, "test.i32", &f), ERR_FORMAT);
    assert_int_equal(gguf_get_bool(g, "test.bool", &b), ERR_OK);
    assert_true(b);
    assert_int_equal(gguf_get_str(g, "test.bool", &s), ERR_FORMAT);
    assert_int_equal(gguf_get_str(g, "nope", &s), ERR_NOT_FOUND);
    enum gguf_value_type et;
    int64_t n;
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), ERR_OK);
    assert_int_equal(et, GGUF_VALUE_STRING);
    assert_int_equal(n, 3);
    assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 2, &s), ERR_OK);
    assert_true(str_eq_cstr(s, "ab"));
    assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &s), ERR_OK);
    assert_int_equal(s.len, 0);
    assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 3, &s), ERR_INVALID);
    assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.scores", 0, &s), ERR_FORMAT);
    double dv;
    assert_int_equal(gguf_get_arr_f64(g, "tokenizer.ggml.scores", 1, &dv), ERR_OK);
    assert_true(dv == -1.5);
    assert_int_equal(gguf_get_arr_i64(g, "tokenizer.ggml.token_type", 2, &i), ERR_OK);
    assert_int_equal(i, -1);
    assert_int_equal(gguf_get_arr_i64(g, "tokenizer.ggml.scores", 0, &i), ERR_FORMAT);
    const void *raw;
    assert_int_equal(gguf_get_arr_data(g, "tokenizer.ggml.scores", &et, &n, &raw), ERR_OK);
    assert_memory_equal(raw, ((float[]){0.0f, -1.5f, 2.0f}), 12);
    assert_int_equal(gguf_tensor_count(g), 3);
    const struct gguf_tensor *t = gguf_find_tensor(g, "a");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 4);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->size, 32);
    assert_int_equal(((uintptr_t)t->data - (uintptr_t)gguf_tensor_at(g, 0)->data) % 32, 0);
    assert_true(((const float *)t->data)[7] == 8.0f);
    t = gguf_find_tensor(g, "c");
    assert_non_null(t);
    assert_true(((const float *)t->data)[3] == 4.0f);
    assert_null(gguf_find_tensor(g, "e"));
    assert_null(gguf_tensor_at(g, 3));
}

static void test_roundtrip_all_versions(void **state)
{
    (void)state;
    for (uint32_t v = 1; v <= 3; v++) {
        size_t len;
        void *data = build_small(v, &len);
        struct gguf *g;
        struct errmsg err = {{0}};
        assert_int_equal(gguf_open_memory(data, len, &g, &err), ERR_OK);
        check_small(g, v);
        gguf_close(g);
        mem_free(data);
    }
}

static void test_alignment_honoured(void **state)
{
    (void)state;
    struct gguf_writer *w;
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    assert_int_equal(gguf_writer_set_alignment(w, 3), ERR_INVALID);
    assert_int_equal(gguf_writer_set_alignment(w, 256), ERR_OK);
    uint8_t x[3] = {1, 2, 3};
    int64_t ne = 3;
    assert_int_equal(gguf_writer_add_tensor(w, "x", 24, 1, &ne, x, 3), ERR_OK); // i8
    assert_int_equal(gguf_writer_add_tensor(w, "y", 24, 1, &ne, x, 3), ERR_OK);
    void *data;
    size_t len;
    assert_int_equal(gguf_writer_to_memory(w, &data, &len), ERR_OK);
    gguf_writer_free(w);
    struct gguf *g;
    assert_int_equal(gguf_open_memory(data, len, &g, NULL), ERR_OK);
    assert_int_equal(gguf_alignment(g), 256);
    assert_int_equal(gguf_data_offset(g) % 256, 0);
    const struct gguf_tensor *t = gguf_find_tensor(g, "y");
    assert_int_equal((const uint8_t *)t->data - (const uint8_t *)data, gguf_data_offset(g) + 256);
    gguf_close(g);
    mem_free(data);
}

static void test_truncation_every_byte(void **state)
{
    (void)state;
    for (uint32_t v = 1; v <= 3; v += 2) {
        size_t len;
        uint8_t *data = build_small(v, &len);
        struct gguf *g;
        assert_int_equal(gguf_open_memory(data, len, &g, NULL), ERR_OK);
        const struct gguf_tensor *last = gguf_tensor_at(g, 2);
        size_t end = (size_t)((const uint8_t *)last->data - data) + last->size;
        gguf_close(g);
        for (size_t cut = 0; cut < end; cut++) {
            // A fresh copy of exactly cut bytes, so ASan catches any read past it.
            uint8_t *copy = mem_alloc(cut ? cut : 1);
            memcpy(copy, data, cut);
            struct errmsg err = {{0}};
            int rc = gguf_open_memory(copy, cut, &g, &err);
            if (rc != ERR_FORMAT) fail_msg("cut at %zu of %zu: rc %d (%s)", cut, end, rc, err.msg);
            assert_true(err.msg[0] != '\0');
            mem_free(copy);
        }
        mem_free(data);
    }
}

/* ---- hand-made hostile files ---- */

static void put(struct buf *b, const void *p, size_t n)
{
    assert_int_equal(buf_append(b, p, n), ERR_OK);
}

static void put_u32(struct buf *b, uint32_t v)
{
    put(b, &v, 4);
}

static void put_u64(struct buf *b, uint64_t v)
{
    put(b, &v, 8);
}

static void put_s(struct buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void header(struct buf *b, uint64_t n_tensors, uint64_t n_kv)
{
    buf_init(b);
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}

/* One tensor info with the given dims/type/offset, then padding and data_len bytes. */
static void tensor_file(struct buf *b, const char *name, int n_dims, const uint64_t *ne,
                        uint32_t type, uint64_t offset, size_t data_len)
{
    header(b, 1, 0);
    put_s(b, name);
    put_u32(b, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++)
        put_u64(b, ne[d]);
    put_u32(b, type);
    put_u64(b, offset);
    while (b->len % 32)
        put(b, "", 1);
    for (size_t i = 0; i < data_len; i++)
        put(b, "\x01", 1);
}

static int open_buf(struct buf *b, struct errmsg *err)
{
    struct gguf *g = NULL;
    int rc = gguf_open_memory(b->data, b->len, &g, err);
    gguf_close(g);
    buf_deinit(b);
    return rc;
}

static void test_hostile_values(void **state)
{
    (void)state;
    struct buf b;
    struct errmsg err;

    header(&b, 0, 1ull << 63); // huge key count
    assert_int_equal(open_buf(&b, &err), ERR_LIMIT);
    header(&b, 1ull << 63, 0); // huge tensor count
    assert_int_equal(open_buf(&b, &err), ERR_LIMIT);
    header(&b, 1000, 0); // plausible count, no room
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);

    header(&b, 0, 1); // key length past EOF
    put_u64(&b, 1000);
    put(&b, "abc", 3);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    header(&b, 0, 1); // key length 2^63
    put_u64(&b, 1ull << 63);
    put(&b, "0123456789abcdef", 16);
    assert_int_equal(open_buf(&b, &err), ERR_LIMIT);
    header(&b, 0, 1); // string value length past EOF
    put_s(&b, "k");
    put_u32(&b, GGUF_VALUE_STRING);
    put_u64(&b, 10);
    put(&b, "abc", 3);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'k'"));
    header(&b, 0, 1); // unknown value type
    put_s(&b, "k");
    put_u32(&b, 13);
    put_u64(&b, 0);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    assert_non_null(strstr(err.msg, "unknown value type"));
    header(&b, 0, 1); // array of 2^62 u32
    put_s(&b, "k");
    put_u32(&b, GGUF_VALUE_ARRAY);
    put_u32(&b, GGUF_VALUE_U32);
    put_u64(&b, 1ull << 62);
    assert_int_equal(open_buf(&b, &err), ERR_LIMIT);
    header(&b, 0, 1); // string array longer than the file
    put_s(&b, "k");
    put_u32(&b, GGUF_VALUE_ARRAY);
    put_u32(&b, GGUF_VALUE_STRING);
    put_u64(&b, 1000000);
    put_u64(&b, 0);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    header(&b, 0, 1); // nested array
    put_s(&b, "k");
    put_u32(&b, GGUF_VALUE_ARRAY);
    put_u32(&b, GGUF_VALUE_ARRAY);
    put_u64(&b, 1);
    put_u64(&b, 0);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    header(&b, 0, 2); // duplicate key
    put_s(&b, "k");
    put_u32(&b, GGUF_VALUE_U8);
    put(&b, "\x01", 1);
    put_s(&b, "k");
    put_u32(&b, GGUF_VALUE_U8);
    put(&b, "\x01", 1);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    assert_non_null(strstr(err.msg, "duplicate key 'k'"));
    header(&b, 0, 1); // alignment not a power of two
    put_s(&b, "general.alignment");
    put_u32(&b, GGUF_VALUE_U32);
    put_u32(&b, 24);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);

    uint64_t ok[2] = {4, 2};
    tensor_file(&b, "t", 2, ok, 0, 0, 32); // sanity: this one is valid
    assert_int_equal(open_buf(&b, &err), ERR_OK);
    tensor_file(&b, "blk.3.attn_q.weight", 2, ok, 0, 0, 31);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    assert_string_equal(err.msg, "tensor 'blk.3.attn_q.weight': data ends past end of file");
    tensor_file(&b, "t", 2, ok, 0, 1ull << 63, 32); // offset past EOF
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    tensor_file(&b, "t", 2, ok, 0, UINT64_MAX - 31, 32); // offset + start overflows
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    tensor_file(&b, "t", 2, ok, 0, 4, 64); // misaligned
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    tensor_file(&b, "t", 2, ok, 77, 0, 32); // unknown type
    assert_int_equal(open_buf(&b, &err), ERR_UNSUPPORTED);
    tensor_file(&b, "t", 2, ok, 4, 0, 32); // removed type id
    assert_int_equal(open_buf(&b, &err), ERR_UNSUPPORTED);
    uint64_t big[4] = {1ull << 32, 1ull << 32, 1ull << 32, 1};
    tensor_file(&b, "t", 4, big, 0, 0, 32); // element count overflows
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    uint64_t big2[2] = {1ull << 40, 1ull << 22};
    tensor_file(&b, "t", 2, big2, 0, 0, 32); // byte size overflows
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    uint64_t neg[1] = {1ull << 63};
    tensor_file(&b, "t", 1, neg, 0, 0, 32);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    uint64_t odd[1] = {33};
    tensor_file(&b, "t", 1, odd, 2, 0, 64); // q4_0 tensor not a multiple of 32
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    uint64_t five[5] = {4, 2, 1, 1, 1};
    tensor_file(&b, "t", 5, five, 0, 0, 32); // too many dims
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    tensor_file(&b, "t", 0, ok, 0, 0, 32);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);

    header(&b, 2, 0); // duplicate tensor names
    for (int i = 0; i < 2; i++) {
        put_s(&b, "t");
        put_u32(&b, 1);
        put_u64(&b, 4);
        put_u32(&b, 0);
        put_u64(&b, 0);
    }
    while (b.len % 32)
        put(&b, "", 1);
    put(&b, "0123456789abcdef", 16);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    assert_non_null(strstr(err.msg, "duplicate tensor name 't'"));

    buf_init(&b); // bad magic, bad version
    put(&b, "GGUG\x03\0\0\0", 8);
    put_u64(&b, 0);
    put_u64(&b, 0);
    assert_int_equal(open_buf(&b, &err), ERR_FORMAT);
    header(&b, 0, 0);
    b.data[4] = 4;
    assert_int_equal(open_buf(&b, &err), ERR_UNSUPPORTED);
    assert_int_equal(gguf_open_memory(NULL, 0, &(struct gguf *){NULL}, &err), ERR_FORMAT);
}

static void test_alloc_failure_every_step(void **state)
{
    (void)state;
    size_t len;
    void *data = build_small(3, &len);
    int64_t live = mem_live_count();
    bool done = false;
    for (int64_t n = 0; !done && n < 1000; n++) {
        struct gguf *g = NULL;
        mem_fail_after(n);
        int rc = gguf_open_memory(data, len, &g, NULL);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            check_small(g, 3);
            gguf_close(g);
            done = true;
        } else {
            assert_int_equal(rc, ERR_NOMEM);
        }
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(done);
    // The writer under the same treatment.
    done = false;
    for (int64_t n = 0; !done && n < 1000; n++) {
        struct gguf_writer *w = NULL;
        mem_fail_after(n);
        int rc = gguf_writer_new(&w);
        if (rc == ERR_OK) rc = gguf_writer_add_str(w, "a", "b");
        const struct str s[1] = {{"x", 1}};
        if (rc == ERR_OK) rc = gguf_writer_add_arr_str(w, "c", s, 1);
        int64_t ne = 1;
        float f = 1;
        if (rc == ERR_OK) rc = gguf_writer_add_tensor(w, "t", 0, 1, &ne, &f, 4);
        void *out = NULL;
        size_t out_len;
        if (rc == ERR_OK) rc = gguf_writer_to_memory(w, &out, &out_len);
        mem_fail_after(-1);
        if (rc == ERR_OK)
            done = true;
        else
            assert_int_equal(rc, ERR_NOMEM);
        mem_free(out);
        gguf_writer_free(w);
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(done);
    mem_free(data);
}

static void test_write_file(void **state)
{
    (void)state;
    struct gguf_writer *w;
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    assert_int_equal(gguf_writer_add_str(w, "general.architecture", "qwen2"), ERR_OK);
    uint16_t h[32] = {0};
    int64_t ne = 32;
    assert_int_equal(gguf_writer_add_tensor(w, "h", 1, 1, &ne, h, sizeof h), ERR_OK);
    struct errmsg err;
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
    struct gguf *g;
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    assert_int_equal(gguf_tensor_count(g), 1);
    assert_int_equal(gguf_find_tensor(g, "h")->size, 64);
    gguf_close(g);
    unlink(path);
    assert_int_equal(gguf_open("/nonexistent/x.gguf", &g, &err), ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/x.gguf"));
}

static void test_shared_models(void **state)
{
    (void)state;
    static const char *files[] = {
        "../shared/models/llama/stories260K.gguf",
        "../shared/models/llama/tinyllamas-stories-260k-f32.gguf",
        "../shared/models/llama/tinyllamas-stories-260k-q8_0.gguf",
        "../shared/models/llama/stories260K-Q4_0.gguf",
        "../shared/models/llama/llama-2-tiny-random.gguf",
    };
    static const uint32_t versions[] = {3, 1, 2, 3, 3};
    static const uint32_t ctx[] = {2048, 512, 512, 2048, 4096};
    if (access(files[0], R_OK) != 0) {
        printf("skip: ../shared/models absent\n");
        skip();
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct gguf *g;
        struct errmsg err = {{0}};
        if (gguf_open(files[i], &g, &err) != ERR_OK) fail_msg("%s: %s", files[i], err.msg);
        assert_int_equal(gguf_version(g), versions[i]);
        struct str arch;
        uint32_t u;
        assert_int_equal(gguf_get_str(g, "general.architecture", &arch), ERR_OK);
        assert_true(str_eq_cstr(arch, "llama"));
        assert_int_equal(gguf_get_u32(g, "llama.context_length", &u), ERR_OK);
        assert_int_equal(u, ctx[i]);
        enum gguf_value_type et;
        int64_t n;
        assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), ERR_OK);
        assert_int_equal(n, i == 4 ? 32000 : 512);
        struct str tok;
        assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &tok), ERR_OK);
        assert_true(str_eq_cstr(tok, "<s>"));
        if (i < 4) {
            assert_int_equal(gguf_get_u32(g, "llama.embedding_length", &u), ERR_OK);
            assert_int_equal(u, 64);
            assert_int_equal(gguf_get_u32(g, "llama.block_count", &u), ERR_OK);
            assert_int_equal(u, 5);
            assert_int_equal(gguf_tensor_count(g), 48);
            const struct gguf_tensor *t = gguf_find_tensor(g, "blk.4.ffn_down.weight");
            assert_non_null(t);
            assert_int_equal(t->ne[0], 172);
            assert_int_equal(t->ne[1], 64);
        }
        gguf_close(g);
    }
}

/* A file of one F32 tensor of n floats (value i at i) at path; returns the tensor's offset. */
static size_t write_one_tensor(const char *path, int64_t n)
{
    struct gguf_writer *w;
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    assert_int_equal(gguf_writer_add_str(w, "general.architecture", "llama"), ERR_OK);
    float *v = mem_alloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i;
    assert_int_equal(gguf_writer_add_tensor(w, "t", 0, 1, &n, v, (size_t)n * sizeof *v), ERR_OK);
    struct errmsg err;
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
    mem_free(v);
    struct gguf *g;
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    size_t off = gguf_data_offset(g);
    gguf_close(g);
    return off;
}

static void temp_path(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

/* Times alone are not a change; bytes rewritten in place with the same size are, and stay so. */
static void test_change_in_place(void **state)
{
    (void)state;
    char path[] = "/tmp/test_gguf_change_XXXXXX";
    temp_path(path);
    size_t off = write_one_tensor(path, 1024);
    struct gguf *g;
    struct errmsg err;
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    assert_false(gguf_is_changed(g));
    struct timespec later[2] = {{.tv_sec = 2000000000}, {.tv_sec = 2000000000}};
    assert_int_equal(utimensat(AT_FDCWD, path, later, 0), 0); // touch: same bytes
    assert_false(gguf_is_changed(g));
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    const float other = 42.0f;
    assert_int_equal(pwrite(fd, &other, sizeof other, (off_t)off), (ssize_t)sizeof other);
    assert_true(gguf_is_changed(g));
    assert_int_equal(pwrite(fd, &(float){0.0f}, sizeof other, (off_t)off), (ssize_t)sizeof other);
    close(fd);
    assert_true(gguf_is_changed(g)); // sticky, even with the old bytes back
    gguf_close(g);
    // Another size is a change without reading anything.
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    assert_int_equal(truncate(path, (off_t)off + 64), 0);
    assert_true(gguf_is_changed(g));
    gguf_close(g);
    // A rename over the path leaves the mapped inode alone: no change.
    write_one_tensor(path, 1024);
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    char other_path[] = "/tmp/test_gguf_other_XXXXXX";
    temp_path(other_path);
    write_one_tensor(other_path, 2048);
    assert_int_equal(rename(other_path, path), 0);
    assert_false(gguf_is_changed(g));
    gguf_close(g);
    unlink(path);
}

/* A file truncated under its mapping: touching the lost pages reads zeros instead of killing
 * the process, and the reader reports the change. */
static void test_truncated_mapping(void **state)
{
    (void)state;
    assert_int_equal(mapguard_install(), ERR_OK);
    char path[] = "/tmp/test_gguf_trunc_XXXXXX";
    temp_path(path);
    const int64_t n = 64 * 1024; // 256 KiB of data: pages well past the cut
    size_t off = write_one_tensor(path, n);
    struct gguf *g;
    struct errmsg err;
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    const volatile float *t = gguf_find_tensor(g, "t")->data;
    assert_true(t[n - 1] == (float)(n - 1)); // resident now
    assert_int_equal(truncate(path, (off_t)off), 0);
    assert_true(t[n - 1] == 0.0f); // would be SIGBUS without the guard
    assert_true(gguf_is_changed(g));
    gguf_close(g);
    unlink(path);
}

/* Special files are refused at once: a FIFO would block the open until a writer came. */
static void test_special_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_gguf_dir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[sizeof dir + 16];
    snprintf(fifo, sizeof fifo, "%s/pipe.gguf", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    struct gguf *g;
    struct errmsg err;
    assert_int_equal(gguf_open(fifo, &g, &err), ERR_INVALID);
    assert_non_null(strstr(err.msg, "a FIFO"));
    assert_int_equal(gguf_open(dir, &g, &err), ERR_INVALID);
    assert_non_null(strstr(err.msg, "a directory"));
    assert_int_equal(gguf_open("/dev/null", &g, &err), ERR_INVALID);
    assert_non_null(strstr(err.msg, "a device"));
    unlink(fifo);
    rmdir(dir);
}

/* Opening from a file fails cleanly at every allocation, the change watch's included. */
static void test_open_file_alloc_failures(void **state)
{
    (void)state;
    char path[] = "/tmp/test_gguf_alloc_XXXXXX";
    temp_path(path);
    write_one_tensor(path, 256);
    int64_t live = mem_live_count();
    bool done = false;
    for (int64_t n = 0; !done && n < 1000; n++) {
        struct gguf *g = NULL;
        struct errmsg err;
        mem_fail_after(n);
        int rc = gguf_open(path, &g, &err);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            done = true;
            assert_false(gguf_is_changed(g));
            gguf_close(g);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
        }
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(done);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_versions),
        cmocka_unit_test(test_alignment_honoured),
        cmocka_unit_test(test_truncation_every_byte),
        cmocka_unit_test(test_hostile_values),
        cmocka_unit_test(test_alloc_failure_every_step),
        cmocka_unit_test(test_write_file),
        cmocka_unit_test(test_shared_models),
        cmocka_unit_test(test_change_in_place),
        cmocka_unit_test(test_truncated_mapping),
        cmocka_unit_test(test_special_files),
        cmocka_unit_test(test_open_file_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
