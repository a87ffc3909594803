/* libFuzzer target for the GGUF reader: any bytes must open cleanly or fail with a code, and
 * every accessor on an opened file must stay in bounds.
 *   clang -fsanitize=fuzzer,address -Isrc -D_POSIX_C_SOURCE=200809L tests/fuzz/fuzz_gguf.c \
 *         src/engine/gguf/gguf.c src/util/[a-z]*.c -o fuzz_gguf */
#include "engine/gguf/gguf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf *g;
    struct errmsg err;
    if (gguf_open_memory(data, size, &g, &err) != ERR_OK) return 0;
    volatile uint64_t sink = 0;
    for (int64_t i = 0; i < gguf_key_count(g); i++) {
        char key[256];
        struct str name = gguf_key_name(g, i);
        size_t n = name.len < sizeof key - 1 ? name.len : sizeof key - 1;
        memcpy(key, name.ptr, n);
        key[n] = '\0';
        enum gguf_value_type et;
        int64_t len;
        struct str s;
        if (gguf_get_arr(g, key, &et, &len) == ERR_OK && len > 0) {
            double d;
            if (gguf_get_arr_str(g, key, len - 1, &s) == ERR_OK)
                sink += s.len ? (uint8_t)s.ptr[s.len - 1] : 0;
            if (gguf_get_arr_f64(g, key, len - 1, &d) == ERR_OK) sink += (uint64_t)(d != 0);
        } else if (gguf_get_str(g, key, &s) == ERR_OK) {
            sink += s.len ? (uint8_t)s.ptr[0] : 0;
        }
    }
    for (int64_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->size) sink += ((const uint8_t *)t->data)[t->size - 1];
    }
    (void)sink;
    gguf_close(g);
    return 0;
}
