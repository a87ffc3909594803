/* Image validation for multimodal chat parts: sniffs PNG, JPEG and WebP by their magic bytes and
 * decodes the whole image (libpng, libjpeg-turbo, libwebp) to prove it is real and complete,
 * within size limits checked from the header before any pixel memory is allocated. Not a
 * general image library: no GIF/BMP/TIFF, no animation, no color management.
 *
 * Format policy: the content decides. A data URL that says image/png but holds a JPEG is
 * accepted as JPEG (as OpenAI does); a claimed type that is not image/... is refused. */
#ifndef MEDIA_IMAGE_H
#define MEDIA_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/str.h"

#define IMAGE_WIDTH_MAX      8192u     // pixels
#define IMAGE_HEIGHT_MAX     8192u     // pixels
#define IMAGE_PIXELS_MAX     40000000u // width * height (40 MP)
#define IMAGE_JPEG_SCANS_MAX 256       // progressive scans; more is a CPU-exhaustion pattern

enum image_format {
    IMAGE_FORMAT_UNKNOWN = 0,
    IMAGE_FORMAT_PNG,
    IMAGE_FORMAT_JPEG,
    IMAGE_FORMAT_WEBP,
};

struct image_limits {
    uint32_t width_max;  // pixels; 0 means IMAGE_WIDTH_MAX
    uint32_t height_max; // pixels; 0 means IMAGE_HEIGHT_MAX
    uint64_t pixels_max; // width * height; 0 means IMAGE_PIXELS_MAX
};

struct image_input {
    const void *data;                  // borrowed; the encoded file
    size_t len;                        // bytes
    struct str mime;                   // claimed media type ("image/png"); empty = none claimed
    const struct image_limits *limits; // NULL means the defaults above
};

struct image_info {
    enum image_format format; // the real format, from the content
    uint32_t width;           // pixels, >= 1
    uint32_t height;          // pixels, >= 1
    uint32_t channels;        // in the source: 1 gray, 2 gray+alpha, 3 color, 4 color+alpha
                              // (a CMYK JPEG counts 4)
};

/* The format the first bytes announce, or IMAGE_FORMAT_UNKNOWN. Looks at most 12 bytes; does
 * not prove the rest is valid. Cannot fail. */
enum image_format image_sniff(const void *data, size_t len);

/* The format a media type names ("image/png", "image/jpeg", "image/jpg", "image/webp"; letter
 * case ignored), or IMAGE_FORMAT_UNKNOWN. Cannot fail. */
enum image_format image_format_from_mime(struct str mime);

/* "PNG", "JPEG", "WebP" or "unknown". Static string; cannot fail. */
const char *image_format_name(enum image_format f);

/* Validates in->data as a complete image and writes *info on success. When rgb is not NULL,
 * also returns the pixels: width * height * 3 bytes, RGB8, rows top to bottom, alpha dropped;
 * caller frees *rgb with mem_free(). With rgb NULL no full-image buffer is kept (rows are
 * decoded one at a time, WebP into a thumbnail), so validation costs little memory.
 * Errors, each with a message in e starting "image: ":
 *   ERR_UNSUPPORTED  claimed type is not an image, or the content is not PNG/JPEG/WebP (a
 *                    GIF, BMP, ... is named), or an animated WebP
 *   ERR_FORMAT       corrupt or truncated data ("image: PNG data truncated"), empty data,
 *                    claimed png/jpeg/webp but unrecognizable content
 *   ERR_LIMIT        width, height or pixel count over the limits (checked from the header,
 *                    before decoding), or too many progressive JPEG scans
 *   ERR_NOMEM        an allocation failed
 * Thread-safe (no shared state); hostile input is handled without crashing. */
int image_decode(const struct image_input *in, struct image_info *info, unsigned char **rgb,
                 struct errmsg *e);

#endif
