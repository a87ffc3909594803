/* libFuzzer target: llama.cpp prompt and logit_bias values (api/native_prompt) from arbitrary
 * JSON, with a byte-per-token fake tokenizer; the first byte picks the parser and flags.
 * Build and run: make fuzz (seeds in tests/fuzz/corpus/fuzz_native_prompt). */
#include "api/native/native_prompt.h"
#include "util/mem.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static int encode(const void *ctx, struct str text, bool add_special, bool parse_special,
                  struct tok_ids *out)
{
    (void)ctx, (void)parse_special;
    if (add_special && tok_ids_push(out, 1) != ERR_OK) return ERR_NOMEM;
    for (size_t i = 0; i < text.len; i++)
        if (tok_ids_push(out, (unsigned char)text.ptr[i]) != ERR_OK) return ERR_NOMEM;
    return ERR_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 1) return 0;
    json_error_t jerr;
    json_t *j = json_loadb((const char *)data + 1, len - 1, JSON_DECODE_ANY, &jerr);
    if (!j) return 0;
    struct native_tokenizer t = {.encode = encode, .ctx = NULL, .n_vocab = 300};
    struct api_fail f = {0};
    if (data[0] & 1) {
        struct gen_params *g = mem_calloc(1, sizeof *g);
        if (g) native_logit_bias_parse(j, &t, g, &f);
        mem_free(g);
    } else {
        struct tok_ids ids;
        tok_ids_init(&ids);
        native_prompt_parse(j, "prompt", &t, data[0] & 2, data[0] & 4, &ids, &f);
        tok_ids_deinit(&ids);
    }
    json_decref(j);
    return 0;
}
