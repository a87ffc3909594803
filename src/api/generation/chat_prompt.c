/* Chat message validation, template rendering and prompt tokenization. */
#include "api/generation/chat_prompt.h"

#include "media/audio_resample.h"
#include "media/content.h"
#include "platform/request.h"
#include "text/json_text.h"
#include "text/chat_template.h"
#include "util/checked.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

static bool role_known(const char *r)
{
    return strcmp(r, "system") == 0 || strcmp(r, "developer") == 0 || strcmp(r, "user") == 0 ||
           strcmp(r, "assistant") == 0 || strcmp(r, "tool") == 0;
}

static bool unsupported_modality(const struct model *m, const char *modality, const char *param,
                                 struct api_fail *f)
{
    return api_failf(f, 400, "unsupported_content_part_type", param,
                     "The model '%s' does not accept %s input.", model_id(m), modality);
}

static bool validate_part(const struct model *m, const json_t *part, const char *param,
                          const struct media_path *media_path, struct api_fail *f)
{
    if (!json_is_object(part))
        return api_failf(f, 400, "invalid_content_part", param,
                         "'%s' must be an object with a 'type'", param);
    const char *type = json_string_value(json_object_get(part, "type"));
    if (!type)
        return api_failf(f, 400, "invalid_content_part", param, "'%s.type' must be a string",
                         param);
    struct content_limits lim = {.media_path = media_path};
    struct errmsg err;
    errmsg_clear(&err);
    if (strcmp(type, "text") == 0) {
        if (!json_is_string(json_object_get(part, "text")))
            return api_failf(f, 400, "invalid_content_part", param, "'%s.text' must be a string",
                             param);
        return true;
    }
    if (strcmp(type, "image_url") == 0) {
        const json_t *iu = json_object_get(part, "image_url");
        const json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
        if (!json_is_string(url))
            return api_failf(f, 400, "invalid_content_part", param,
                             "'%s.image_url.url' must be a string", param);
        struct str u = {json_string_value(url), json_string_length(url)};
        struct image_info info;
        if (content_image_load(u, &lim, &info, NULL, &err) != ERR_OK)
            return api_failf(f, 400, "invalid_content_part", param, "%s", err.msg);
        return model_desc(m)->has_vision || unsupported_modality(m, "image", param, f);
    }
    if (strcmp(type, "input_audio") == 0) {
        const json_t *ia = json_object_get(part, "input_audio");
        const json_t *data = json_object_get(ia, "data"), *fmt = json_object_get(ia, "format");
        if (!json_is_string(data) || !json_is_string(fmt))
            return api_failf(f, 400, "invalid_content_part", param,
                             "'%s.input_audio' needs string 'data' and 'format'", param);
        struct str d = {json_string_value(data), json_string_length(data)};
        struct str fm = {json_string_value(fmt), json_string_length(fmt)};
        struct audio_info info;
        if (content_audio_load(fm, d, &lim, &info, NULL, &err) != ERR_OK)
            return api_failf(f, 400, "invalid_content_part", param, "%s", err.msg);
        return model_desc(m)->has_audio || unsupported_modality(m, "audio", param, f);
    }
    return api_failf(f, 400, "unsupported_content_part_type", param,
                     "Content part type '%.64s' is not supported (text, image_url, input_audio).",
                     type);
}

/* tool_call_id: a string; tool_calls: an array of objects (either may be absent or null). */
static bool validate_tool_fields(const json_t *msg, const char *param, struct api_fail *f)
{
    char p[96];
    const json_t *id = json_object_get(msg, "tool_call_id");
    snprintf(p, sizeof p, "%s.tool_call_id", param);
    if (id && !json_is_null(id) && !json_is_string(id))
        return api_failf(f, 400, "invalid_type", p,
                         "Invalid type for '%s': expected a string, but got %s.", p,
                         v_type_name(id));
    const json_t *calls = json_object_get(msg, "tool_calls");
    snprintf(p, sizeof p, "%s.tool_calls", param);
    if (calls && !json_is_null(calls) && !json_is_array(calls))
        return api_failf(f, 400, "invalid_type", p,
                         "Invalid type for '%s': expected an array, but got %s.", p,
                         v_type_name(calls));
    size_t k;
    const json_t *call;
    json_array_foreach(calls, k, call)
    {
        if (json_is_object(call)) continue;
        char cp[128];
        snprintf(cp, sizeof cp, "%s[%zu]", p, k);
        return api_failf(f, 400, "invalid_type", cp,
                         "Invalid type for '%s': expected an object, but got %s.", cp,
                         v_type_name(call));
    }
    return true;
}

static bool validate_message(const struct model *m, const json_t *msg, size_t i,
                             const struct media_path *media_path, struct api_fail *f)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%zu]", i);
    if (!json_is_object(msg))
        return api_failf(f, 400, "invalid_type", param,
                         "Invalid type for '%s': expected an object, but got %s.", param,
                         v_type_name(msg));
    const json_t *role = json_object_get(msg, "role");
    char rparam[80];
    snprintf(rparam, sizeof rparam, "%s.role", param);
    if (!json_is_string(role) || !role_known(json_string_value(role)))
        return api_failf(f, 400, "invalid_value", rparam,
                         "'%s' must be one of system, developer, user, assistant, tool", rparam);
    const char *r = json_string_value(role);
    if (!validate_tool_fields(msg, param, f)) return false;
    const json_t *content = json_object_get(msg, "content");
    char cparam[80];
    snprintf(cparam, sizeof cparam, "%s.content", param);
    bool may_be_null = strcmp(r, "assistant") == 0 || strcmp(r, "tool") == 0;
    if (!content || json_is_null(content)) {
        if (may_be_null) return true;
        return api_failf(f, 400, "invalid_value", cparam, "'%s' is required for role '%s'", cparam,
                         r);
    }
    if (json_is_string(content)) return true;
    if (!json_is_array(content))
        return api_failf(f, 400, "invalid_type", cparam,
                         "Invalid type for '%s': expected a string or an array of parts, but "
                         "got %s.",
                         cparam, v_type_name(content));
    size_t k;
    const json_t *part;
    json_array_foreach(content, k, part)
    {
        char pparam[128];
        snprintf(pparam, sizeof pparam, "%s[%zu]", cparam, k);
        if (!validate_part(m, part, pparam, media_path, f)) return false;
    }
    return true;
}

bool chat_messages_validate(const struct model *m, const json_t *messages,
                            const struct media_path *media_path, struct api_fail *f)
{
    if (!messages)
        return api_failf(f, 400, "missing_required_parameter", "messages",
                         "Missing required parameter: 'messages'.");
    if (!json_is_array(messages))
        return api_failf(f, 400, "invalid_type", "messages",
                         "Invalid type for 'messages': expected an array, but got %s.",
                         v_type_name(messages));
    if (json_array_size(messages) == 0)
        return api_failf(f, 400, "invalid_value", "messages",
                         "'messages' must contain at least one message");
    size_t i;
    const json_t *msg;
    json_array_foreach(messages, i, msg)
    {
        if (!validate_message(m, msg, i, media_path, f)) return false;
    }
    return true;
}

/* The most prompt text the context can hold (SIZE_MAX: no bound for this tokenizer). */
static size_t text_max(const struct platform_model_desc *d)
{
    return tok_text_bytes_max(d->tokenizer, d->n_ctx > 0 ? (size_t)d->n_ctx : 0);
}

/* A text longer than the context's tokens can stand for: refused without tokenizing it. */
static int fail_text_too_long(const struct platform_model_desc *d, struct api_fail *f)
{
    api_fail_context_over(f, "messages", d->n_ctx);
    return ERR_LIMIT;
}

static int tokenize_text(const struct model *m, const char *text, size_t len, bool is_bounded,
                         struct tok_ids *out, struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(m);
    const size_t max = is_bounded ? text_max(d) : SIZE_MAX;
    if (len > max) return fail_text_too_long(d, f);
    // Templates that write the BOS text themselves would get a second BOS from the vocab's
    // add_bos; tokenize that text as given instead.
    size_t bos_len = d->bos_text ? strlen(d->bos_text) : 0;
    bool has_bos = bos_len && len >= bos_len && memcmp(text, d->bos_text, bos_len) == 0;
    struct str s = {text, len};
    int rc = tok_encode(d->tokenizer, s, !has_bos, true, out);
    if (rc != ERR_OK) {
        api_failf(f, 500, NULL, NULL, "tokenization failed: %s", err_str(rc));
        return rc;
    }
    if ((int64_t)out->n_ids + 1 > d->n_ctx) {
        api_fail_context(f, "messages", out->n_ids, d->n_ctx);
        return ERR_LIMIT;
    }
    if (out->n_ids == 0) {
        api_failf(f, 400, "invalid_value", "messages", "the prompt is empty");
        return ERR_INVALID;
    }
    return ERR_OK;
}

int chat_prompt_tokenize(const struct model *m, const char *text, size_t len, struct tok_ids *out,
                         struct api_fail *f)
{
    return tokenize_text(m, text, len, true, out, f);
}

static bool is_image_part(const json_t *part)
{
    const char *type = json_string_value(json_object_get(part, "type"));
    return type && strcmp(type, "image_url") == 0;
}

static bool is_audio_part(const json_t *part)
{
    const char *type = json_string_value(json_object_get(part, "type"));
    return type && strcmp(type, "input_audio") == 0;
}

/* Decodes an audio part (validated before), resampled to 16 kHz, into the prompt's list. */
static int take_audio(const json_t *part, const struct media_path *media_path,
                      struct chat_prompt *out, struct api_fail *f)
{
    const json_t *ia = json_object_get(part, "input_audio");
    const json_t *data = json_object_get(ia, "data"), *fmt = json_object_get(ia, "format");
    struct str d = {json_string_value(data), json_string_length(data)};
    struct str fm = {json_string_value(fmt), json_string_length(fmt)};
    struct content_limits lim = {.media_path = media_path};
    struct audio_info info;
    float *src = NULL, *pcm = NULL;
    size_t n = 0;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = content_audio_load(fm, d, &lim, &info, &src, &err);
    if (rc != ERR_OK)
        return api_failf(f, rc == ERR_NOMEM ? 500 : 400, "invalid_content_part", "messages", "%s",
                         err.msg),
               rc;
    rc = audio_resample(src, (size_t)info.n_frames, info.sample_rate_hz, 16000, &pcm, &n);
    mem_free(src);
    struct chat_image *im =
        rc == ERR_OK ? mem_realloc(out->images, (size_t)(out->n_images + 1) * sizeof *im) : NULL;
    if (!im) {
        mem_free(pcm);
        return api_failf(f, 500, NULL, NULL, "cannot resample the audio: %s",
                         err_str(rc == ERR_OK ? ERR_NOMEM : rc)),
               rc == ERR_OK ? ERR_NOMEM : rc;
    }
    out->images = im;
    im[out->n_images++] = (struct chat_image){.pcm = pcm, .n_samples = n};
    return ERR_OK;
}

/* Decodes an image part (validated before) into the prompt's list. */
static int take_image(const json_t *part, const struct media_path *media_path,
                      struct chat_prompt *out, struct api_fail *f)
{
    const json_t *iu = json_object_get(part, "image_url");
    const json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
    struct str u = {json_string_value(url), json_string_length(url)};
    struct content_limits lim = {.media_path = media_path};
    struct image_info info;
    unsigned char *rgb = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = content_image_load(u, &lim, &info, &rgb, &err);
    if (rc != ERR_OK)
        return api_failf(f, rc == ERR_NOMEM ? 500 : 400, "invalid_content_part", "messages", "%s",
                         err.msg),
               rc;
    struct chat_image *im = mem_realloc(out->images, (size_t)(out->n_images + 1) * sizeof *im);
    if (!im) {
        mem_free(rgb);
        return api_failf(f, 500, NULL, NULL, "out of memory"), ERR_NOMEM;
    }
    out->images = im;
    im[out->n_images++] = (struct chat_image){.rgb = rgb, .w = info.width, .h = info.height};
    return ERR_OK;
}

/* A copy of one message whose image (and audio) parts are media markers, its images appended
 * to out. */
static int message_with_markers(const json_t *msg, const struct media_path *media_path,
                                struct chat_prompt *out, json_t **copy, struct api_fail *f)
{
    const json_t *content = json_object_get(msg, "content");
    json_t *c = json_copy(json_unconst(msg)), *parts = json_array();
    int rc = c && parts ? ERR_OK : ERR_NOMEM;
    size_t k;
    const json_t *part;
    json_array_foreach(content, k, part)
    {
        if (rc != ERR_OK) break;
        const bool is_audio = is_audio_part(part);
        if (!is_image_part(part) && !is_audio) {
            rc = json_array_append(parts, json_unconst(part)) == 0 ? ERR_OK : ERR_NOMEM;
            continue;
        }
        rc = is_audio ? take_audio(part, media_path, out, f) : take_image(part, media_path, out, f);
        json_t *marker = rc == ERR_OK ? json_pack("{s:s, s:s}", "type", "media_marker", "text",
                                                  CHAT_MEDIA_MARKER)
                                      : NULL;
        if (rc == ERR_OK && (!marker || json_array_append_new(parts, marker) != 0)) rc = ERR_NOMEM;
    }
    if (rc == ERR_OK && json_object_set(c, "content", parts) != 0) rc = ERR_NOMEM;
    json_decref(parts);
    if (rc != ERR_OK) {
        json_decref(c);
        if (rc == ERR_NOMEM && !f->status) api_failf(f, 500, NULL, NULL, "out of memory");
        return rc;
    }
    *copy = c;
    return ERR_OK;
}

/* messages with every image part replaced by a media marker (a new array), or NULL with rc
 * ERR_OK when there is no image. */
static int messages_with_markers(const json_t *messages, const struct media_path *media_path,
                                 struct chat_prompt *out, json_t **copy, struct api_fail *f)
{
    *copy = NULL;
    json_t *arr = json_array();
    if (!arr) return api_failf(f, 500, NULL, NULL, "out of memory"), ERR_NOMEM;
    int rc = ERR_OK;
    size_t i;
    const json_t *msg;
    json_array_foreach(messages, i, msg)
    {
        const json_t *content = json_object_get(msg, "content");
        json_t *c = NULL;
        if (json_is_array(content)) rc = message_with_markers(msg, media_path, out, &c, f);
        if (rc != ERR_OK) break;
        if (json_array_append_new(arr, c ? c : json_incref(json_unconst(msg))) != 0) {
            api_failf(f, 500, NULL, NULL, "out of memory");
            rc = ERR_NOMEM;
            break;
        }
    }
    if (rc != ERR_OK || out->n_images == 0) {
        json_decref(arr);
        return rc;
    }
    *copy = arr;
    return ERR_OK;
}

/* The next CHAT_MEDIA_MARKER in [p, end), or NULL. */
static const char *find_marker(const char *p, const char *end, size_t mlen)
{
    for (; (size_t)(end - p) >= mlen; p++)
        if (memcmp(p, CHAT_MEDIA_MARKER, mlen) == 0) return p;
    return NULL;
}

static int encode_piece(const struct tokenizer *t, const char *s, size_t len, bool add_special,
                        struct tok_ids *ids, struct api_fail *f)
{
    int rc = tok_encode(t, (struct str){s, len}, add_special, true, ids);
    if (rc != ERR_OK) api_failf(f, 500, NULL, NULL, "tokenization failed: %s", err_str(rc));
    return rc;
}

/* The positions an image takes: the model's fixed count, or (projectors whose images keep
 * their size) its own, which must fit one batch. */
static int image_positions(const struct platform_model_desc *d, struct chat_image *im,
                           struct api_fail *f)
{
    im->n_tok = d->image_tokens;
    if (!d->image_tokens_of) return ERR_OK;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = d->image_tokens_of(d->image_ctx, im->w, im->h, &im->n_tok, &err);
    if (rc != ERR_OK)
        api_failf(f, 400, "invalid_content_part", "messages", "%s",
                  err.msg[0] ? err.msg : err_str(rc));
    return rc;
}

/* An audio clip's begin text, each window's placeholders back to back (the reference's mtmd
 * makes one chunk per 30 s window with nothing between), and its end text; im->pos and
 * im->n_windows set. The context is checked first so a long clip fails before its
 * placeholders are written. */
static int place_audio(const struct platform_model_desc *d, struct chat_image *im,
                       struct tok_ids *ids, struct api_fail *f)
{
    im->n_windows = (int)d->audio_n_windows(im->n_samples);
    const int64_t n_all = (int64_t)im->n_windows * d->audio_window_tokens;
    if ((int64_t)ids->n_ids + n_all + 1 > d->n_ctx) {
        api_fail_context(f, "messages", (int)((int64_t)ids->n_ids + n_all), d->n_ctx);
        return ERR_LIMIT;
    }
    int rc = encode_piece(d->tokenizer, d->audio_begin, strlen(d->audio_begin), false, ids, f);
    const uint64_t clip = request_audio_hash(im->pcm, im->n_samples);
    im->pos = (int)ids->n_ids;
    for (int w = 0; rc == ERR_OK && w < im->n_windows; w++) {
        const uint64_t h = request_audio_window_key(clip, w);
        for (int j = 0; rc == ERR_OK && j < d->audio_window_tokens; j++)
            if (tok_ids_push(ids, request_image_token(h, j)) != ERR_OK) rc = ERR_NOMEM;
    }
    if (rc == ERR_OK)
        rc = encode_piece(d->tokenizer, d->audio_end, strlen(d->audio_end), false, ids, f);
    return rc;
}

/* The rendered text with images: the pieces between markers tokenized one by one with
 * special tokens parsed (BOS before the first, per the vocab, unless the text writes it), each
 * marker replaced by image_begin, the image's placeholders and image_end. */
static int tokenize_with_images(const struct model *m, struct chat_prompt *out, struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(m);
    const char *text = out->text.data ? out->text.data : "", *end = text + out->text.len;
    const size_t mlen = strlen(CHAT_MEDIA_MARKER);
    size_t bos_len = d->bos_text ? strlen(d->bos_text) : 0;
    bool has_bos = bos_len && out->text.len >= bos_len && memcmp(text, d->bos_text, bos_len) == 0;
    int rc = ERR_OK, k = 0;
    for (const char *p = text; rc == ERR_OK;) {
        const char *hit = find_marker(p, end, mlen);
        const char *stop = hit ? hit : end;
        rc = encode_piece(d->tokenizer, p, (size_t)(stop - p), p == text && !has_bos, &out->ids, f);
        if (rc != ERR_OK || !hit) break;
        if (k == out->n_images)
            return api_failf(f, 400, "invalid_value", "messages",
                             "the messages' text holds the media marker '%s'", CHAT_MEDIA_MARKER),
                   ERR_INVALID;
        struct chat_image *im = &out->images[k++];
        if (im->pcm) {
            rc = place_audio(d, im, &out->ids, f);
            p = hit + mlen;
            continue;
        }
        rc = image_positions(d, im, f);
        if (rc == ERR_OK)
            rc = encode_piece(d->tokenizer, d->image_begin, strlen(d->image_begin), false,
                              &out->ids, f);
        const uint64_t h = request_image_hash(im->rgb, im->w, im->h);
        im->pos = (int)out->ids.n_ids;
        for (int j = 0; rc == ERR_OK && j < im->n_tok; j++)
            if (tok_ids_push(&out->ids, request_image_token(h, j)) != ERR_OK) rc = ERR_NOMEM;
        if (rc == ERR_OK)
            rc =
                encode_piece(d->tokenizer, d->image_end, strlen(d->image_end), false, &out->ids, f);
        p = hit + mlen;
    }
    if (rc == ERR_NOMEM && !f->status) api_failf(f, 500, NULL, NULL, "out of memory");
    if (rc != ERR_OK) return rc;
    if (k != out->n_images)
        return api_failf(f, 400, "invalid_value", "messages",
                         "the chat template dropped %d of the %d images", out->n_images - k,
                         out->n_images),
               ERR_INVALID;
    if ((int64_t)out->ids.n_ids + 1 > d->n_ctx) {
        api_fail_context(f, "messages", out->ids.n_ids, d->n_ctx);
        return ERR_LIMIT;
    }
    return ERR_OK;
}

int chat_prompt_build(const struct model *m, const struct chat_prompt_opts *o,
                      struct chat_prompt *out, struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(m);
    buf_init(&out->text);
    tok_ids_init(&out->ids);
    out->images = NULL;
    out->n_images = 0;
    json_t *with_markers = NULL;
    if (d->has_vision || d->has_audio) {
        int mrc = messages_with_markers(o->messages, o->media_path, out, &with_markers, f);
        if (mrc != ERR_OK) return mrc;
    }
    // A marker stands for an image's tokens (at least one), so the bound grows by its text.
    size_t max = o->is_count ? SIZE_MAX : text_max(d), marker_bytes;
    bool is_over = false;
    if (max != SIZE_MAX &&
        (!size_mul((size_t)out->n_images, strlen(CHAT_MEDIA_MARKER), &marker_bytes) ||
         !size_add(max, marker_bytes, &max)))
        max = SIZE_MAX;
    struct chat_template_opts to = {
        .add_generation_prompt = o->add_generation_prompt,
        .enable_thinking = o->enable_thinking,
        .bos_token = d->bos_text,
        .eos_token = d->eos_text,
        .extra = o->template_kwargs,
        .max_out_bytes = max != SIZE_MAX ? max : 0,
        .is_out_over = &is_over,
    };
    struct errmsg err;
    errmsg_clear(&err);
    int rc = chat_template_apply(d->chat_template, with_markers ? with_markers : o->messages,
                                 o->tools, &to, &out->text, &err);
    json_decref(with_markers);
    if (rc == ERR_LIMIT && is_over) return fail_text_too_long(d, f);
    if (rc != ERR_OK) {
        api_failf(f, rc == ERR_NOMEM ? 500 : 400, "template_error", "messages",
                  "The chat template failed: %s", err.msg[0] ? err.msg : err_str(rc));
        return rc;
    }
    if (o->prefill.len && buf_append(&out->text, o->prefill.ptr, o->prefill.len) != ERR_OK)
        return api_failf(f, 500, NULL, NULL, "out of memory"), ERR_NOMEM;
    if (out->text.len > max) return fail_text_too_long(d, f);
    if (out->n_images > 0) return tokenize_with_images(m, out, f);
    // A count is tokenized in full, even past the context (the count is the answer).
    return tokenize_text(m, out->text.data ? out->text.data : "", out->text.len, !o->is_count,
                         &out->ids, f);
}

void chat_prompt_deinit(struct chat_prompt *p)
{
    buf_deinit(&p->text);
    tok_ids_deinit(&p->ids);
    for (int i = 0; i < p->n_images; i++) {
        mem_free(p->images[i].rgb);
        mem_free(p->images[i].pcm);
    }
    mem_free(p->images);
    p->images = NULL;
    p->n_images = 0;
}
