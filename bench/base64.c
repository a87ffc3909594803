/* Base64 throughput: base64_encode/base64_decode on embedding-sized buffers (raw f32 bytes),
 * against a straightforward bit-accumulator reference and memcpy measured in the same run.
 * Prints MB/s and the ratios; the ratios are the numbers to compare across machines. */
#include "util/base64.h"
#include "util/clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The textbook encoder: a bit accumulator, one output character at a time. */
static void encode_ref(const unsigned char *s, size_t n, char *d)
{
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc = acc << 8 | s[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            *d++ = alphabet[(acc >> bits) & 63];
        }
    }
    if (bits > 0) *d++ = alphabet[(acc << (6 - bits)) & 63];
    while (n % 3 && n++ % 3)
        *d++ = '=';
}

/* One 64-entry table lookup per character: the usual table-driven encoder. */
static void encode_sextets(const unsigned char *s, size_t n, char *d)
{
    size_t i = 0;
    for (; i + 3 <= n; i += 3, d += 4) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        d[0] = alphabet[v >> 18];
        d[1] = alphabet[(v >> 12) & 63];
        d[2] = alphabet[(v >> 6) & 63];
        d[3] = alphabet[v & 63];
    }
    if (n - i) encode_ref(s + i, n - i, d);
}

static double now_s(void)
{
    return (double)clock_now_ns() * 1e-9;
}

int main(int argc, char **argv)
{
    size_t n = 4096 * 4 * 64; // 64 embeddings of 4096 floats: 1 MiB
    int reps = argc > 1 ? atoi(argv[1]) : 50;
    unsigned char *src = malloc(n), *back = malloc(n);
    size_t enc_len;
    base64_encoded_len(n, &enc_len);
    char *enc = malloc(enc_len), *enc2 = malloc(enc_len);
    char *copy = malloc(enc_len);
    srand(7);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)rand();

    double t0 = now_s();
    for (int r = 0; r < reps; r++)
        encode_ref(src, n, enc2);
    double t_ref = now_s() - t0;
    t0 = now_s();
    for (int r = 0; r < reps; r++)
        encode_sextets(src, n, enc2);
    double t_sex = now_s() - t0;
    t0 = now_s();
    for (int r = 0; r < reps; r++)
        base64_encode(src, n, enc);
    double t_enc = now_s() - t0;
    t0 = now_s();
    size_t got = 0;
    struct errmsg e;
    for (int r = 0; r < reps; r++)
        base64_decode(enc, enc_len, back, n, BASE64_STRICT, &got, &e);
    double t_dec = now_s() - t0;
    t0 = now_s();
    for (int r = 0; r < reps; r++) {
        memcpy(copy, enc, enc_len);
        __asm__ volatile("" : : "r"(copy) : "memory");
    }
    double t_cpy = now_s() - t0;

    if (memcmp(enc, enc2, enc_len) != 0 || got != n || memcmp(back, src, n) != 0) {
        fprintf(stderr, "base64 bench: results differ\n");
        return 1;
    }
    double mb = (double)n * reps / 1e6;
    printf("base64 encode %.0f MB/s; bit-accumulator reference %.0f MB/s (%.2fx); sextet-table "
           "reference %.0f MB/s (%.2fx)\n",
           mb / t_enc, mb / t_ref, t_ref / t_enc, mb / t_sex, t_sex / t_enc);
    printf("base64 decode %.0f MB/s (output bytes); memcpy of the text %.0f MB/s\n", mb / t_dec,
           (double)enc_len * reps / 1e6 / t_cpy);
    free(src);
    free(back);
    free(enc);
    free(enc2);
    free(copy);
    return 0;
}
