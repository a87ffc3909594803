/* libFuzzer target for the GBNF compiler and matcher: any bytes must compile or fail with a
 * code and a message; a compiled grammar must take random continuations and masks without
 * fault. The first bytes up to a NUL are the grammar, the rest is input for the matcher.
 *   clang -fsanitize=fuzzer,address,undefined -Isrc -D_POSIX_C_SOURCE=200809L \
 *         tests/fuzz/fuzz_gbnf.c src/text/grammar/gbnf.c src/text/grammar/grammar.c src/util/[a-z]*.c -o fuzz_gbnf */
#include "text/grammar/gbnf.h"
#include "text/grammar/grammar.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t g_len = nul ? (size_t)(nul - data) : size;
    struct gbnf *g;
    struct errmsg err;
    if (gbnf_compile((const char *)data, g_len, &g, &err) != ERR_OK) return 0;
    struct grammar_state *st;
    if (grammar_state_new(g, &st) == ERR_OK) {
        // a tiny vocabulary: every byte, plus the input split in pieces of 3
        static const char *pieces[256];
        static size_t lens[256];
        static char bytes[256];
        for (int b = 0; b < 256; b++) {
            bytes[b] = (char)b;
            pieces[b] = &bytes[b];
            lens[b] = 1;
        }
        int32_t eog = 0;
        struct grammar_vocab_params p = {pieces, lens, 256, &eog, 1};
        struct grammar_vocab *gv;
        if (grammar_vocab_new(&p, &gv) == ERR_OK) {
            uint32_t mask[8];
            const uint8_t *in = nul ? nul + 1 : data + size;
            size_t n_in = (size_t)(data + size - in);
            for (size_t i = 0; i < n_in; i += 3) {
                grammar_mask(st, gv, mask);
                size_t n = n_in - i < 3 ? n_in - i : 3;
                if (grammar_state_accept_bytes(st, in + i, n) != ERR_OK) break;
            }
            (void)grammar_state_can_end(st);
            grammar_vocab_free(gv);
        }
        grammar_state_free(st);
    }
    gbnf_free(g);
    return 0;
}
