/* libFuzzer target: the Anthropic Messages and OpenAI Responses request translations on
 * arbitrary JSON (the first byte chooses the dialect; for Responses, a top-level "prev" array
 * stands in for a stored conversation). Run with `make fuzz`. */
#include "api/anthropic.h"
#include "api/responses/responses_convert.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 1) return 0;
    json_t *body = json_loadb((const char *)data + 1, len - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    struct api_fail f = {0};
    if (data[0] & 1) {
        struct anthropic_chat c;
        if (anthropic_to_chat(body, &c, &f)) anthropic_chat_deinit(&c);
    } else {
        const json_t *prev = json_object_get(body, "prev");
        struct responses_chat c;
        if (responses_to_chat(body, json_is_array(prev) ? prev : NULL, &c, &f)) {
            // The answer's items read back into history, as the store does.
            json_t *input = json_object_get(body, "input");
            if (json_is_array(input)) responses_items_to_chat(input, "output", c.history, &f);
            responses_chat_deinit(&c);
        }
    }
    json_decref(body);
    return 0;
}
