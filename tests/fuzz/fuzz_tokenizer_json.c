/* libFuzzer target for tokenizer.json loading: the input is a tokenizer.json, a NUL byte, then
 * text. Any bytes must either load or fail with an error (never crash or leak), and a tokenizer
 * that loads must encode the text (with special tokens added and parsed) and decode the ids. */
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/tokenizer_json.h"
#include "util/buf.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json = (const char *)data;
    const char *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - json) : size;
    struct str text = {nul ? nul + 1 : "", nul ? size - json_len - 1 : 0};
    struct tokenizer *t = NULL;
    struct errmsg err = {{0}};
    struct tok_json_info info;
    if (tok_json_load(json, json_len, NULL, 0, &t, &info, &err) != ERR_OK) return 0;
    struct tok_ids ids;
    tok_ids_init(&ids);
    if (tok_encode(t, text, true, true, &ids) == ERR_OK) {
        struct buf out;
        buf_init(&out);
        (void)tok_decode(t, ids.ids, ids.n_ids, true, &out);
        buf_deinit(&out);
    }
    tok_ids_deinit(&ids);
    tok_free(t);
    return 0;
}
