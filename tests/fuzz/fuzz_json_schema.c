/* libFuzzer target for JSON Schema -> GBNF: any JSON document must convert or fail with a
 * code, and every converted grammar must compile (a failure to compile is a converter bug).
 *   clang -fsanitize=fuzzer,address,undefined -Isrc -D_POSIX_C_SOURCE=200809L \
 *         tests/fuzz/fuzz_json_schema.c src/text/grammar/gbnf.c src/text/grammar/json_regex.c \
 *         src/text/grammar/json_schema.c src/util/[a-z]*.c -ljansson -o fuzz_json_schema */
#include "text/grammar/gbnf.h"
#include "text/grammar/json_schema.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *schema = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!schema) return 0;
    struct buf text;
    buf_init(&text);
    struct errmsg err;
    if (json_schema_to_gbnf(schema, &text, &err) == ERR_OK) {
        struct gbnf *g = NULL;
        int rc = gbnf_compile(text.data, text.len, &g, &err);
        // a grammar the parser rejects for its syntax is a converter bug; an empty language or
        // nested nullable repetitions from a pattern are the schema's (json_schema_compile says
        // ERR_UNSUPPORTED for them)
        if (rc == ERR_FORMAT && !strstr(err.msg, "can match nothing") &&
            !strstr(err.msg, "left-recursive"))
            abort();
        gbnf_free(g);
    }
    buf_deinit(&text);
    json_decref(schema);
    return 0;
}
