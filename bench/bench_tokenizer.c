/* Tokenizer throughput: encode and decode MB/s on the qwen2 (byte-level BPE) and llama-spm
 * (SentencePiece) vocabularies over ~1 MiB of mixed text built from their golden inputs, plus
 * the 256 KiB / 1 MiB time ratio (linear scaling gives ~4). The reference measured in the
 * same run is a UTF-8 code point count over the same bytes. Skips when ../shared is absent. */
#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "util/buf.h"
#include "util/clock.h"

#include <stdio.h>
#include <string.h>

#define TEXT_BYTES (1u << 20)

static int load_text(const char *path, struct buf *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct buf seed;
    buf_init(&seed);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_append(&seed, chunk, n);
    fclose(f);
    while (seed.len > 0 && out->len < TEXT_BYTES)
        buf_append(out, seed.data, seed.len);
    buf_deinit(&seed);
    return out->len ? 0 : -1;
}

static double reference_ms(const char *s, size_t len)
{
    double t0 = clock_now_ms();
    volatile size_t n_cp = 0;
    for (int rep = 0; rep < 8; rep++) {
        size_t c = 0;
        for (size_t i = 0; i < len; i++)
            c += ((unsigned char)s[i] & 0xc0) != 0x80;
        n_cp += c;
    }
    return (clock_now_ms() - t0) / 8;
}

static double encode_ms(const struct tokenizer *t, const char *s, size_t len, size_t *n_ids)
{
    struct tok_ids ids;
    tok_ids_init(&ids);
    double t0 = clock_now_ms();
    tok_encode(t, (struct str){s, len}, false, false, &ids);
    double ms = clock_now_ms() - t0;
    *n_ids = ids.n_ids;
    tok_ids_deinit(&ids);
    return ms;
}

static void bench_vocab(const char *name)
{
    char path[256], inp[300];
    snprintf(path, sizeof path, "../shared/models/vocab/ggml-vocab-%s.gguf", name);
    snprintf(inp, sizeof inp, "%s.inp", path);
    struct buf text;
    buf_init(&text);
    struct tokenizer *t = NULL;
    struct errmsg err = {{0}};
    if (load_text(inp, &text) != 0 || vocab_tokenizer_from_file(path, &t, &err) != ERR_OK) {
        printf("skip: %s unavailable %s\n", path, err.msg);
        buf_deinit(&text);
        return;
    }
    size_t n_ids, n_small;
    double ref = reference_ms(text.data, text.len);
    double small = encode_ms(t, text.data, text.len / 4, &n_small);
    double enc = encode_ms(t, text.data, text.len, &n_ids);
    struct tok_ids ids;
    tok_ids_init(&ids);
    tok_encode(t, (struct str){text.data, text.len}, false, false, &ids);
    struct buf out;
    buf_init(&out);
    double t0 = clock_now_ms();
    tok_decode(t, ids.ids, ids.n_ids, false, &out);
    double dec = clock_now_ms() - t0;
    double mb = (double)text.len / (1024.0 * 1024.0);
    printf("%-10s %.2f MiB -> %zu tokens | encode %7.1f ms %6.2f MB/s | decode %6.1f ms %7.1f "
           "MB/s | 1/4 size %5.1f ms (x%.2f) | reference %.2f ms (encode = %.0fx reference)\n",
           name, mb, n_ids, enc, mb / (enc / 1000), dec, mb / (dec / 1000), small, enc / small, ref,
           enc / ref);
    buf_deinit(&out);
    tok_ids_deinit(&ids);
    tok_free(t);
    buf_deinit(&text);
}

int main(void)
{
    bench_vocab("qwen2");
    bench_vocab("llama-spm");
    bench_vocab("llama-bpe");
    bench_vocab("bert-bge");
    return 0;
}
