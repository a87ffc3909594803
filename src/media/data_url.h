/* Parser for data URLs (RFC 2397): "data:[<mediatype>][;base64],<data>". Zero-copy: the result
 * points into the caller's string. Percent-encoded (non-base64) payloads are parsed but not
 * decoded here; media payloads must be base64. Not a general URL parser. */
#ifndef MEDIA_DATA_URL_H
#define MEDIA_DATA_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"
#include "util/str.h"

#define DATA_URL_DECODED_MAX (20u << 20) // 20 MiB: largest payload data_url_decode() accepts

struct data_url {
    struct str mime; // "type/subtype" as written (compare case-insensitively); empty if omitted
    struct str
        params;      // the ";name=value" parameters after the type, without ";base64"; may be empty
    bool is_base64;  // the ";base64" flag was present (last parameter, any letter case)
    struct str data; // everything after the first ',' (still encoded); may be empty
};

/* True when url starts with "data:" (letter case ignored). Cannot fail. */
bool data_url_is(struct str url);

/* Splits url into *out (slices borrowed from url; valid while url's bytes are). Rules: the
 * scheme is "data:" in any case; the media type, when present, is token "/" token (RFC 9110
 * tchar set); each parameter is ";attribute=value" except the final ";base64"; the first ','
 * ends the header. Errors (ERR_FORMAT, with e naming the problem): no "data:" prefix, no ',',
 * malformed media type or parameter. Thread-safe. */
int data_url_parse(struct str url, struct data_url *out, struct errmsg *e);

/* True when u's media type equals mime ("image/png"), ignoring letter case. Cannot fail. */
bool data_url_mime_is(const struct data_url *u, const char *mime);

/* Decodes u's base64 payload (ASCII white space is skipped, since some clients wrap lines)
 * into a new buffer of at most max_len bytes (0 means DATA_URL_DECODED_MAX). On success *out
 * (caller frees with mem_free()) and *out_len are set. Errors: ERR_UNSUPPORTED when the URL is
 * not ";base64"; ERR_FORMAT "data is not valid base64 at offset N (...)" (offset within the
 * data part); ERR_LIMIT when the payload decodes to more than max_len bytes (checked before
 * allocating); ERR_NOMEM. */
int data_url_decode(const struct data_url *u, size_t max_len, unsigned char **out, size_t *out_len,
                    struct errmsg *e);

#endif
