/* The two entry points the api layer calls for multimodal chat content parts: an `image_url`
 * part's url and an `input_audio` part's {format, data}. Each fetches the bytes (data URL,
 * raw base64 or a file:// URL under the media path), validates them completely and reports
 * what is wrong in one message for a 400 `invalid_content_part`. Remote (http/https) URLs
 * are not fetched. */
#ifndef MEDIA_CONTENT_H
#define MEDIA_CONTENT_H

#include <stdbool.h>
#include <stddef.h>

#include "media/audio.h"
#include "media/image.h"
#include "media/media_path.h"
#include "util/err.h"
#include "util/str.h"

#define CONTENT_BYTES_MAX (20u << 20) // 20 MiB: largest decoded image or audio payload

struct content_limits {
    const struct media_path *media_path; // NULL or disabled: file:// URLs are refused
    size_t bytes_max;                    // encoded file size; 0 means CONTENT_BYTES_MAX
    const struct image_limits *image;    // NULL means image.h defaults
    const struct audio_limits *audio;    // NULL means audio.h defaults
};

/* Loads and validates the image an `image_url.url` names. Accepted forms:
 *   "data:image/<type>;base64,<data>"  (white space in <data> is skipped)
 *   "file://<path>"                    (see media_path.h; needs --media-path)
 *   "<raw base64>"                     (no scheme; as llama.cpp accepts)
 * The real format comes from the content (image.h). On success *info is set and, when rgb is
 * not NULL, *rgb gets width * height * 3 RGB8 bytes (caller frees with mem_free()).
 * Errors: those of data_url_decode(), media_path_read() and image_decode(), plus
 * ERR_UNSUPPORTED for other URL schemes and ERR_FORMAT for a data URL without ";base64" or
 * with a non-image media type. Messages start "image_url: " for the URL and its encoding and
 * "image: " for the image itself. lim may be NULL (defaults, local files refused).
 * Thread-safe. */
int content_image_load(struct str url, const struct content_limits *lim, struct image_info *info,
                       unsigned char **rgb, struct errmsg *e);

/* Validates an `input_audio` part: format ("wav"/"mp3") and data (base64; a
 * "data:audio/...;base64," URL is accepted too). On success *info is set and, when pcm is
 * not NULL, *pcm gets info->n_frames mono float32 samples (caller frees with mem_free()).
 * Errors: those of audio_format_parse(), base64 decoding (message "input_audio: data is not
 * valid base64 at offset N ...") and audio_decode(). lim may be NULL. Thread-safe. */
int content_audio_load(struct str format, struct str data, const struct content_limits *lim,
                       struct audio_info *info, float **pcm, struct errmsg *e);

#endif
