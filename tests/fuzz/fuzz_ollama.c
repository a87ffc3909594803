/* libFuzzer target: the Ollama request translations on arbitrary JSON — options and format
 * into the shared parameter fields, messages (images, tool calls, tool results) into chat
 * messages, the tools check, think and stream. Run with `make fuzz`. */
#include "api/ollama/call.h"
#include "api/ollama/convert.h"
#include "api/ollama/options.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    json_t *body = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    struct api_fail f = {0};
    json_t *out = NULL;
    if (ollama_options_to_body(body, &out, &f)) json_decref(out);
    json_decref(ollama_messages_to_chat(json_object_get(body, "messages"), &f));
    ollama_tools_check(json_object_get(body, "tools"), &f);
    int think;
    bool is_stream;
    ollama_think_parse(body, &think, &f);
    ollama_stream_parse(body, &is_stream, &f);
    json_decref(body);
    return 0;
}
