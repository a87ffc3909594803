/* From an OpenAI `messages` array to prompt tokens: every message and content part validated
 * (images and audio decoded to prove they are real and within limits), the model's chat
 * template rendered, the text tokenized with special tokens parsed, the context checked.
 * Shared by chat completions and the endpoints that translate into it (Anthropic, Responses). */
#ifndef API_CHAT_PROMPT_H
#define API_CHAT_PROMPT_H

#include "api/validate.h"
#include "core/model.h"
#include "text/tokenizer/tokenizer.h"

struct media_path;

struct chat_prompt_opts {
    json_t *messages;                    // borrowed array
    json_t *tools;                       // borrowed array or NULL (hidden when tool_choice is none)
    int enable_thinking;                 // -1 unset, 0, 1
    const json_t *template_kwargs;       // extra template variables or NULL
    const struct media_path *media_path; // local files allowed under it; NULL: refused
    bool add_generation_prompt;
    struct str prefill; // text appended to the rendered prompt (an assistant prefill) or empty
    bool is_count;      // the prompt is counted, not run: no early stop at the context's end
};

/* The text the template sees where an image part was, and where its positions go. */
#define CHAT_MEDIA_MARKER "<__media__>"

/* An image of the prompt (models with a projector): its pixels and its placeholder run; or
 * an audio clip (pcm set, rgb NULL): its samples and its windows' placeholder runs. */
struct chat_image {
    unsigned char *rgb; // (w * h * 3) RGB8, owned (mem_alloc) until handed to a request
    uint32_t w, h;      // pixels
    int pos;            // first of its positions in ids (audio: of the
                        // n_windows * audio_window_tokens positions)
    int n_tok;          // image: its positions (the model's image_tokens, or its own count)
    float *pcm;         // audio: 16 kHz mono samples, owned like rgb; NULL for an image
    size_t n_samples;   // audio: samples in pcm
    int n_windows;      // audio: 30 s windows (the model's audio_n_windows), set with pos
};

struct chat_prompt {
    struct buf text;           // the rendered prompt
    struct tok_ids ids;        // its tokens; an image's positions hold request_image_token ids
    struct chat_image *images; // (n_images) in prompt order, owned
    int n_images;
};

/* Checks messages[] (roles system/developer/user/assistant/tool; content string, parts
 * array, or null for assistant/tool calls; parts text, image_url, input_audio). 400 codes:
 * invalid_type, invalid_value, invalid_content_part, unsupported_content_part_type (also a
 * valid image/audio for a model without that modality; the message names model and modality).
 * True when valid. */
bool chat_messages_validate(const struct model *m, const json_t *messages,
                            const struct media_path *media_path, struct api_fail *f);

/* Renders and tokenizes (call chat_messages_validate first). For a model with vision, image
 * parts are decoded and rendered as CHAT_MEDIA_MARKER; the text around them is tokenized
 * piece by piece and each image takes image_begin, image_tokens placeholders and image_end
 * (as the reference's multimodal tokenizer lays it out). 400 template_error when the
 * template raises or fails, 400 invalid_value when the text itself holds the marker, 400
 * context_length_exceeded when the prompt leaves no room for one token. Unless o->is_count,
 * rendering stops as soon as the text is longer than the context's tokens can stand for
 * (tok_text_bytes_max), and such a text is refused before it is tokenized, so a prompt that
 * cannot fit costs memory in proportion to the context, not to the request. ERR_OK or an
 * error with f filled. Caller frees with chat_prompt_deinit(). */
int chat_prompt_build(const struct model *m, const struct chat_prompt_opts *o,
                      struct chat_prompt *out, struct api_fail *f);

/* Tokenizes already-rendered text the way chat prompts are (BOS per the vocab unless the text
 * starts with it; special tokens parsed), and checks the context; a text too long to fit is
 * refused (400 context_length_exceeded) before it is tokenized. */
int chat_prompt_tokenize(const struct model *m, const char *text, size_t len, struct tok_ids *out,
                         struct api_fail *f);

void chat_prompt_deinit(struct chat_prompt *p);

#endif
