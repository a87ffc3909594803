/* libFuzzer target for the tokenizers: any bytes, with either special-token mode, must encode
 * with every vocab kind (SPM, byte-level BPE under several pre-tokenizers, WordPiece), and the
 * ids must decode and stream back without errors. The first input byte picks the options.
 *   clang -fsanitize=fuzzer,address -Isrc -D_POSIX_C_SOURCE=200809L tests/fuzz/fuzz_tokenizer.c \
 *         <every .c of src/text and src/util> -lpcre2-8 -lutf8proc -lpthread -o fuzz_tokenizer */
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/vocab.h"
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_TOK 300

static char g_text[N_TOK][16];
static struct str g_tokens[N_TOK];
static int32_t g_types[N_TOK];
static float g_scores[N_TOK];
static struct tokenizer *g_tok[5];

static const char *const k_pieces[] = {
    "\xe2\x96\x81", "\xe2\x96\x81the", "th",  "he",    "e", "<s>",
    "</s>",         "<|end|>",         "##s", "[UNK]", "a", "aa"};
static const char *const k_merges[] = {"t h", "th e", "a a", "aa aa", "\xc4\xa0 t"};
static const char *const k_pre[] = {"llama3", "qwen2", "deepseek-llm", "default"};

/* One token table for every kind: 256 byte-ish tokens then a few pieces and specials. */
static void build(void)
{
    int n = 0;
    for (int b = 0; b < 256; b++, n++) {
        snprintf(g_text[n], sizeof g_text[n], "<0x%02X>", b);
        g_types[n] = 6;
    }
    for (size_t i = 0; i < sizeof k_pieces / sizeof k_pieces[0]; i++, n++) {
        snprintf(g_text[n], sizeof g_text[n], "%s", k_pieces[i]);
        g_types[n] = (i >= 5 && i <= 7) ? 3 : 1;
        g_scores[n] = -(float)i;
    }
    for (int i = 0; i < n; i++)
        g_tokens[i] = str_from_cstr(g_text[i]);
    struct str merges[5];
    for (int i = 0; i < 5; i++)
        merges[i] = str_from_cstr(k_merges[i]);
    for (int k = 0; k < 5; k++) {
        struct vocab v;
        enum vocab_kind kind = k == 0   ? VOCAB_KIND_LLAMA
                               : k == 4 ? VOCAB_KIND_BERT
                                        : VOCAB_KIND_GPT2;
        vocab_init_defaults(&v, kind, str_from_cstr(k >= 1 && k <= 3 ? k_pre[k - 1] : ""));
        v.n_tokens = n;
        v.tokens = g_tokens;
        v.token_types = g_types;
        v.scores = g_scores;
        v.merges = merges;
        v.n_merges = 5;
        v.unk_id = 256 + 9;
        struct errmsg err;
        if (tok_new(&v, &g_tok[k], &err) != ERR_OK) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_tok[0]) build();
    if (size == 0) return 0;
    unsigned opt = data[0];
    struct str text = {(const char *)data + 1, size - 1};
    for (int k = 0; k < 5; k++) {
        struct tok_ids ids;
        tok_ids_init(&ids);
        if (tok_encode(g_tok[k], text, opt & 1, (opt >> 1) & 1, &ids) != ERR_OK) abort();
        struct buf out;
        buf_init(&out);
        if (tok_decode(g_tok[k], ids.ids, ids.n_ids, (opt >> 2) & 1, &out) != ERR_OK) abort();
        struct tok_stream s;
        tok_stream_init(&s, g_tok[k], (opt >> 3) & 1);
        for (size_t i = 0; i < ids.n_ids; i++) {
            if (tok_stream_push(&s, ids.ids[i], &out) != ERR_OK) abort();
        }
        if (tok_stream_flush(&s, &out) != ERR_OK) abort();
        buf_deinit(&out);
        tok_ids_deinit(&ids);
    }
    return 0;
}
