/* Base64 with the standard alphabet (RFC 4648 section 4), not base64url. Encoding always pads.
 * Decoding is strict: padding is optional, but when present it must be correct and final; any
 * byte outside the alphabet is an error unless BASE64_SKIP_SPACE allows ASCII white space;
 * non-zero bits in the last character are rejected (RFC 4648 section 3.5), so every byte
 * string has exactly one accepted unpadded and one padded encoding. */
#ifndef UTIL_BASE64_H
#define UTIL_BASE64_H

#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"

enum base64_flags {
    BASE64_STRICT = 0,         // only alphabet characters and final '=' padding
    BASE64_SKIP_SPACE = 1 << 0 // ignore ' ', '\t', '\r', '\n' anywhere (MIME-wrapped lines)
};

/* Encoded size of src_len bytes, padding included (4 * ceil(src_len / 3)), into *out_len.
 * Returns ERR_OK, or ERR_LIMIT when the size does not fit in size_t. */
int base64_encoded_len(size_t src_len, size_t *out_len);

/* Encodes src_len bytes of src into dst, which must have room for base64_encoded_len() bytes.
 * Writes no NUL. src may be NULL when src_len is 0. Cannot fail; thread-safe. */
void base64_encode(const void *src, size_t src_len, char *dst);

/* Appends the encoding of src to b (which stays NUL-terminated). Returns ERR_OK, ERR_NOMEM or
 * ERR_LIMIT; on failure b is unchanged. */
int base64_encode_buf(struct buf *b, const void *src, size_t src_len);

/* Upper bound on the decoded size of src_len characters (3 * ceil(src_len / 4)); the exact size
 * is smaller when there is padding or white space. Cannot fail or overflow. */
size_t base64_decoded_len_max(size_t src_len);

/* Decodes src (src_len characters, need not be NUL-terminated) into dst, which has room for
 * dst_cap bytes; writes the decoded length to *out_len on success. Errors:
 *   ERR_FORMAT  a character outside the alphabet, misplaced or excess '=', a final group of
 *               one character, or non-zero trailing bits; e says "not valid base64 at offset N
 *               (...)" where N is the offset in src of the first bad character.
 *   ERR_LIMIT   the decoded bytes do not fit in dst_cap; e says so.
 * dst contents are unspecified after an error. Thread-safe. */
int base64_decode(const char *src, size_t src_len, void *dst, size_t dst_cap, int flags,
                  size_t *out_len, struct errmsg *e);

/* Decodes src into a new buffer of at most max_len bytes. On success *out (caller frees with
 * mem_free()) and *out_len are set; an empty input gives a 1-byte allocation and *out_len 0.
 * Errors: as base64_decode(), ERR_LIMIT when the input could decode to more than max_len bytes
 * (checked before allocating, from the character count), ERR_NOMEM. */
int base64_decode_alloc(const char *src, size_t src_len, size_t max_len, int flags,
                        unsigned char **out, size_t *out_len, struct errmsg *e);

#endif
