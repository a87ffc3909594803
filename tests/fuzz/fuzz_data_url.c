/* libFuzzer target: data_url_parse() + data_url_decode(), and the base64 round trip: whatever
 * decodes must re-encode to a string that decodes to the same bytes.
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -D_POSIX_C_SOURCE=200809L \
 *   tests/fuzz/fuzz_data_url.c src/media/data_url.c src/util/{base64,buf,mem,err,log}.c \
 *   -o fuzz_data_url */
#include "media/data_url.h"
#include "util/base64.h"
#include "util/mem.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static void check_round_trip(const unsigned char *bytes, size_t n)
{
    size_t enc_len, back_len;
    if (base64_encoded_len(n, &enc_len) != ERR_OK) abort();
    char *enc = mem_alloc(enc_len + 1);
    unsigned char *back = mem_alloc(n + 1);
    if (enc && back) {
        struct errmsg e;
        base64_encode(bytes, n, enc);
        if (base64_decode(enc, enc_len, back, n, BASE64_STRICT, &back_len, &e) != ERR_OK ||
            back_len != n || memcmp(back, bytes, n) != 0)
            abort(); // the encoder's output must always decode back
    }
    mem_free(enc);
    mem_free(back);
}

/* Strict decoding accepts one spelling per byte string: re-encoding gives the input back,
 * up to the optional padding. */
static void check_canonical(struct str in, const unsigned char *bytes, size_t n)
{
    size_t enc_len;
    if (base64_encoded_len(n, &enc_len) != ERR_OK) abort();
    char *enc = mem_alloc(enc_len + 1);
    if (!enc) return;
    base64_encode(bytes, n, enc);
    size_t a = in.len, b = enc_len;
    while (a > 0 && in.ptr[a - 1] == '=')
        a--;
    while (b > 0 && enc[b - 1] == '=')
        b--;
    if (a != b || memcmp(in.ptr, enc, a) != 0) abort();
    mem_free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    struct str url = {(const char *)data, len};
    struct data_url u;
    struct errmsg e;
    if (data_url_parse(url, &u, &e) == ERR_OK) {
        if (u.data.ptr < url.ptr || u.data.ptr + u.data.len > url.ptr + url.len)
            abort(); // the slice must stay inside the input
        unsigned char *bytes = NULL;
        size_t n = 0;
        if (data_url_decode(&u, 1u << 16, &bytes, &n, &e) == ERR_OK) check_round_trip(bytes, n);
        mem_free(bytes);
    }
    // The raw input as strict base64 too.
    unsigned char *bytes = NULL;
    size_t n = 0;
    if (base64_decode_alloc(url.ptr, url.len, 1u << 16, BASE64_STRICT, &bytes, &n, &e) == ERR_OK) {
        check_round_trip(bytes, n);
        check_canonical(url, bytes, n);
    }
    mem_free(bytes);
    return 0;
}
