/* Ollama's conversation shapes to and from the chat machinery's (OpenAI) ones: messages with
 * base64 `images`, `tool_calls` whose arguments are objects, `thinking`, tool results named
 * by `tool_name`; and a found tool call back in Ollama's shape. */
#ifndef API_OLLAMA_CONVERT_H
#define API_OLLAMA_CONVERT_H

#include "api/validate.h"
#include "text/toolcall/toolcall.h"

/* The media type of a base64 image from its first bytes (PNG, JPEG, GIF, WebP, BMP), or
 * "image/png" when unknown (the decoder then says what is wrong). Cannot fail. */
const char *ollama_image_mime(const char *b64);

/* One Ollama user/system message's content and images as an OpenAI content value: the
 * string when there are no images, else [text part, image_url parts with data URLs].
 * images may be NULL. param names the message ("messages[2]"). New reference, or NULL with
 * f filled (400 on a non-string image, 500 out of memory). */
json_t *ollama_content_json(const char *text, const json_t *images, const char *param,
                            struct api_fail *f);

/* Ollama messages (borrowed) as a new OpenAI messages array. 400 naming the message on a
 * wrong shape (role, content, images, tool_calls). NULL with f filled. */
json_t *ollama_messages_to_chat(const json_t *messages, struct api_fail *f);

/* tools: an array of {"type":"function","function":{name, description, parameters}} (the
 * OpenAI shape, which Ollama uses), checked; borrowed back, or NULL when absent or empty.
 * False with f filled on a wrong shape. */
bool ollama_tools_check(const json_t *tools, struct api_fail *f);

/* A parsed call as Ollama's {"id", "function": {"index", "name", "arguments": {…}}}. New
 * reference or NULL. */
json_t *ollama_tool_call_json(const struct toolcall *tc, int index);

#endif
