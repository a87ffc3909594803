/* libFuzzer target for the Jinja interpreter: any bytes must parse or fail with a code, and any
 * parsed template must render or fail within the step and memory limits, over a fixed context.
 *   clang -fsanitize=fuzzer,address -Isrc -D_POSIX_C_SOURCE=200809L tests/fuzz/fuzz_jinja.c \
 *         src/text/jinja*.c src/util/[a-z]*.c -ljansson -lutf8proc -lm -lpthread -o fuzz_jinja */
#include "text/jinja/jinja.h"
#include "util/buf.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", "
    "\"content\": \"hi \\u00e9\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
    "[{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, true]}}}]}], "
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
    "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *ctx;
    if (!ctx) ctx = json_loads(CONTEXT, 0, NULL);
    struct jinja_template *t;
    struct errmsg err;
    if (jinja_template_new((const char *)data, size, &t, &err) != ERR_OK) return 0;
    struct buf out;
    buf_init(&out);
    struct jinja_render_opts opts = {.max_steps = 200000, .max_bytes = 16u << 20};
    (void)jinja_template_render_opts(t, ctx, &opts, &out, &err);
    buf_deinit(&out);
    jinja_template_free(t);
    return 0;
}
