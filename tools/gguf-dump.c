/* gguf-dump: prints a GGUF file's header, metadata (arrays abbreviated) and tensor table. */
#include "engine/gguf/gguf.h"
#include "util/err.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define ARRAY_SHOW 8   // elements printed per array
#define STR_SHOW   120 // bytes of a string value printed

static void print_str(struct str s)
{
    putchar('"');
    for (size_t i = 0; i < s.len && i < STR_SHOW; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
    if (s.len > STR_SHOW) printf("... (%zu bytes)", s.len);
}

static void print_num(enum gguf_value_type t, const void *p)
{
    int64_t i;
    double d;
    switch (t) {
    case GGUF_VALUE_F32: {
        float f;
        memcpy(&f, p, 4);
        printf("%g", (double)f);
        return;
    }
    case GGUF_VALUE_F64:
        memcpy(&d, p, 8);
        printf("%g", d);
        return;
    case GGUF_VALUE_BOOL:
        printf("%s", *(const uint8_t *)p ? "true" : "false");
        return;
    case GGUF_VALUE_U64: {
        uint64_t u;
        memcpy(&u, p, 8);
        printf("%" PRIu64, u);
        return;
    }
    default:
        break;
    }
    size_t n = gguf_value_size(t);
    uint64_t raw = 0;
    memcpy(&raw, p, n);
    bool is_signed =
        t == GGUF_VALUE_I8 || t == GGUF_VALUE_I16 || t == GGUF_VALUE_I32 || t == GGUF_VALUE_I64;
    if (is_signed && n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~(uint64_t)0 << (8 * n);
    i = (int64_t)raw;
    printf(is_signed ? "%" PRId64 : "%" PRIu64, i);
}

static const char *type_word(enum gguf_value_type t)
{
    static const char *const names[] = {"u8",   "i8",  "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "str", "array", "u64", "i64", "f64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static void print_array(const struct gguf *g, const char *key)
{
    enum gguf_value_type et;
    int64_t n;
    gguf_get_arr(g, key, &et, &n);
    printf("[%s x %" PRId64 "] [", type_word(et), n);
    const void *data = NULL;
    if (et != GGUF_VALUE_STRING) gguf_get_arr_data(g, key, &et, &n, &data);
    for (int64_t i = 0; i < n && i < ARRAY_SHOW; i++) {
        if (i) fputs(", ", stdout);
        struct str s;
        if (et == GGUF_VALUE_STRING && gguf_get_arr_str(g, key, i, &s) == ERR_OK)
            print_str(s);
        else if (data)
            print_num(et, (const uint8_t *)data + (size_t)i * gguf_value_size(et));
    }
    printf("%s]", n > ARRAY_SHOW ? ", ..." : "");
}

static void print_kvs(const struct gguf *g)
{
    printf("metadata: %" PRId64 " keys\n", gguf_key_count(g));
    for (int64_t i = 0; i < gguf_key_count(g); i++) {
        struct str name = gguf_key_name(g, i);
        char key[512];
        snprintf(key, sizeof key, "%.*s", (int)name.len, name.ptr);
        enum gguf_value_type t = gguf_key_type(g, i);
        printf("  %-44s %-5s = ", key, type_word(t));
        struct str s;
        if (t == GGUF_VALUE_STRING && gguf_get_str(g, key, &s) == ERR_OK)
            print_str(s);
        else if (t == GGUF_VALUE_ARRAY)
            print_array(g, key);
        else
            print_num(t, gguf_key_raw(g, i));
        putchar('\n');
    }
}

static void print_tensors(const struct gguf *g)
{
    printf("tensors: %" PRId64 " (data at offset %zu, alignment %u)\n", gguf_tensor_count(g),
           gguf_data_offset(g), gguf_alignment(g));
    for (int64_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        char shape[96];
        int len = snprintf(shape, sizeof shape, "[%" PRId64, t->ne[0]);
        for (int d = 1; d < t->n_dims; d++)
            len += snprintf(shape + len, sizeof shape - (size_t)len, ", %" PRId64, t->ne[d]);
        snprintf(shape + len, sizeof shape - (size_t)len, "]");
        size_t off =
            (size_t)((const uint8_t *)t->data - (const uint8_t *)gguf_tensor_at(g, 0)->data);
        printf("  %5" PRId64 " %-40.*s %-8s %-22s %12zu bytes  +%zu\n", i, (int)t->name.len,
               t->name.ptr, gguf_type_name(t->type), shape, t->size, off);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: gguf-dump FILE.gguf\nPrints the header, metadata (arrays abbreviated "
                "to %d elements) and tensor table.\n",
                ARRAY_SHOW);
        return argc == 2 ? 0 : 2;
    }
    struct gguf *g;
    struct errmsg err = {{0}};
    if (gguf_open(argv[1], &g, &err) != ERR_OK) {
        fprintf(stderr, "gguf-dump: %s\n", err.msg);
        return 1;
    }
    printf("%s: GGUF v%u, %zu bytes\n", argv[1], gguf_version(g), gguf_file_size(g));
    print_kvs(g);
    print_tensors(g);
    gguf_close(g);
    return 0;
}
