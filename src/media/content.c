/* image_url and input_audio content parts: fetch the bytes, then validate them. */
#include "media/content.h"

#include "media/data_url.h"
#include "util/base64.h"
#include "util/mem.h"

#include <string.h>

/* Copies e's message behind a prefix ("image_url: "), keeping the code. */
static int prefixed(struct errmsg *e, int rc, const char *prefix)
{
    if (!e) return rc;
    char inner[ERRMSG_CAP];
    memcpy(inner, e->msg, sizeof inner);
    return errmsg_set(e, rc, "%s%s", prefix, inner);
}

/* RFC 3986 scheme ("ALPHA *( ALPHA / DIGIT / + / - / . ) :"). ':' is not in the base64
 * alphabet, so raw base64 never looks like one. */
static bool has_scheme(struct str url)
{
    for (size_t i = 0; i < url.len && i < 32; i++) {
        char c = url.ptr[i];
        bool is_alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (c == ':') return i > 0;
        if (!is_alpha && (i == 0 || !((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')))
            return false;
    }
    return false;
}

static size_t bytes_max_of(const struct content_limits *lim)
{
    return lim && lim->bytes_max ? lim->bytes_max : CONTENT_BYTES_MAX;
}

/* Bytes and claimed media type from a data URL, raw base64 or file URL. */
static int image_fetch(struct str url, const struct content_limits *lim, unsigned char **bytes,
                       size_t *len, struct str *mime, struct errmsg *e)
{
    int shown = (int)(url.len > 16 ? 16 : url.len);
    if (data_url_is(url)) {
        struct data_url u;
        int rc = data_url_parse(url, &u, e);
        if (rc != ERR_OK) return prefixed(e, rc, "image_url: ");
        // RFC 2397: an omitted type means text/plain. image_decode() judges the others.
        if (u.mime.len == 0)
            return errmsg_set(e, ERR_FORMAT, "image_url: data URL has no media type (text/plain)");
        *mime = u.mime;
        rc = data_url_decode(&u, bytes_max_of(lim), bytes, len, e);
        return rc == ERR_OK ? rc : prefixed(e, rc, "image_url: ");
    }
    if (media_path_is_file_url(url)) {
        int rc =
            media_path_read(lim ? lim->media_path : NULL, url, bytes_max_of(lim), bytes, len, e);
        return rc == ERR_OK ? rc : prefixed(e, rc, "image_url: ");
    }
    if (has_scheme(url))
        return errmsg_set(e, ERR_UNSUPPORTED,
                          "image_url: URL scheme of '%.*s...' not supported (use a data: URL)",
                          shown, url.ptr);
    struct errmsg inner;
    errmsg_clear(&inner);
    int rc = base64_decode_alloc(url.ptr, url.len, bytes_max_of(lim), BASE64_SKIP_SPACE, bytes, len,
                                 &inner);
    if (rc != ERR_OK)
        return errmsg_set(e, rc, "image_url: %s%s", rc == ERR_FORMAT ? "data is " : "", inner.msg);
    return ERR_OK;
}

int content_image_load(struct str url, const struct content_limits *lim, struct image_info *info,
                       unsigned char **rgb, struct errmsg *e)
{
    if (url.len == 0) return errmsg_set(e, ERR_FORMAT, "image_url: url is empty");
    unsigned char *bytes = NULL;
    size_t len = 0;
    struct str mime = {NULL, 0};
    int rc = image_fetch(url, lim, &bytes, &len, &mime, e);
    if (rc != ERR_OK) return rc;
    struct image_input in = {
        .data = bytes, .len = len, .mime = mime, .limits = lim ? lim->image : NULL};
    rc = image_decode(&in, info, rgb, e);
    mem_free(bytes);
    return rc;
}

int content_audio_load(struct str format, struct str data, const struct content_limits *lim,
                       struct audio_info *info, float **pcm, struct errmsg *e)
{
    enum audio_format fmt;
    int rc = audio_format_parse(format, &fmt, e);
    if (rc != ERR_OK) return rc;
    struct data_url u = {.data = data, .is_base64 = true};
    if (data_url_is(data) && (rc = data_url_parse(data, &u, e)) != ERR_OK)
        return prefixed(e, rc, "input_audio: ");
    if (u.mime.len && !str_has_prefix(u.mime, "audio/"))
        return errmsg_set(e, ERR_FORMAT, "input_audio: data URL media type '%.*s' is not audio",
                          (int)(u.mime.len > 64 ? 64 : u.mime.len), u.mime.ptr);
    unsigned char *bytes = NULL;
    size_t len = 0;
    rc = data_url_decode(&u, bytes_max_of(lim), &bytes, &len, e);
    if (rc != ERR_OK) return prefixed(e, rc, "input_audio: ");
    struct audio_input in = {
        .data = bytes, .len = len, .format = fmt, .limits = lim ? lim->audio : NULL};
    rc = audio_decode(&in, info, pcm, e);
    mem_free(bytes);
    return rc;
}
