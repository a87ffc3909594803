/* Base64 encode and strict decode (RFC 4648 section 4). The decoder takes four characters at a
 * time while they are all in the alphabet and drops to a per-character path only for white
 * space, padding and errors, so MIME-wrapped input costs one slow step per line. */
#include "util/base64.h"

#include "util/checked.h"
#include "util/mem.h"

#include <stdint.h>
#include <string.h>

static const char enc_table[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

enum {
    DEC_BAD = 0x80,   // not in the alphabet
    DEC_SPACE = 0x81, // ' ', '\t', '\r', '\n'
    DEC_PAD = 0x82,   // '='
};

// Values 0..63 for alphabet characters; 0x80 bad, 0x81 white space, 0x82 padding.
static const uint8_t dec_table[256] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x81, 0x80, 0x80, 0x81, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x3e, 0x80, 0x80, 0x80, 0x3f,
    0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x80, 0x80, 0x80, 0x82, 0x80, 0x80,
    0x80, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
    0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
};

int base64_encoded_len(size_t src_len, size_t *out_len)
{
    size_t groups = src_len / 3 + (src_len % 3 != 0);
    size_t n;
    if (!size_mul(groups, 4, &n)) return ERR_LIMIT;
    *out_len = n;
    return ERR_OK;
}

/* Alphabet character of sextet v, as a constant expression so the pair table below is built
 * by the compiler. */
#define B64_CHAR(v)                                                                                \
    ((v) < 26    ? 'A' + (v)                                                                       \
     : (v) < 52  ? 'a' + (v)-26                                                                    \
     : (v) < 62  ? '0' + (v)-52                                                                    \
     : (v) == 62 ? '+'                                                                             \
                 : '/')
#define B64_PAIR(i)                                                                                \
    {                                                                                              \
        B64_CHAR((i) >> 6), B64_CHAR((i)&63)                                                       \
    }
#define B64_PAIR4(i)  B64_PAIR(i), B64_PAIR((i) + 1), B64_PAIR((i) + 2), B64_PAIR((i) + 3)
#define B64_PAIR16(i) B64_PAIR4(i), B64_PAIR4((i) + 4), B64_PAIR4((i) + 8), B64_PAIR4((i) + 12)
#define B64_PAIR64(i)                                                                              \
    B64_PAIR16(i), B64_PAIR16((i) + 16), B64_PAIR16((i) + 32), B64_PAIR16((i) + 48)
#define B64_PAIR256(i)                                                                             \
    B64_PAIR64(i), B64_PAIR64((i) + 64), B64_PAIR64((i) + 128), B64_PAIR64((i) + 192)
#define B64_PAIR1024(i)                                                                            \
    B64_PAIR256(i), B64_PAIR256((i) + 256), B64_PAIR256((i) + 512), B64_PAIR256((i) + 768)

// The two characters for each 12-bit value: half the lookups and stores of a sextet table.
static const char enc_pairs[4096][2] = {B64_PAIR1024(0), B64_PAIR1024(1024), B64_PAIR1024(2048),
                                        B64_PAIR1024(3072)};

void base64_encode(const void *src, size_t src_len, char *dst)
{
    const unsigned char *s = src;
    size_t i = 0;
    // Hot loop for embeddings: one 24-bit group, two 12-bit pair lookups.
    for (; i + 3 <= src_len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        memcpy(dst, enc_pairs[v >> 12], 2);
        memcpy(dst + 2, enc_pairs[v & 0xfff], 2);
        dst += 4;
    }
    size_t rest = src_len - i;
    if (rest == 0) return;
    uint32_t v = (uint32_t)s[i] << 16 | (rest == 2 ? (uint32_t)s[i + 1] << 8 : 0);
    dst[0] = enc_table[v >> 18];
    dst[1] = enc_table[(v >> 12) & 63];
    dst[2] = rest == 2 ? enc_table[(v >> 6) & 63] : '=';
    dst[3] = '=';
}

int base64_encode_buf(struct buf *b, const void *src, size_t src_len)
{
    size_t n;
    int rc = base64_encoded_len(src_len, &n);
    if (rc == ERR_OK) rc = buf_reserve(b, n);
    if (rc != ERR_OK) return rc;
    base64_encode(src, src_len, b->data + b->len);
    b->len += n;
    b->data[b->len] = '\0';
    return ERR_OK;
}

size_t base64_decoded_len_max(size_t src_len)
{
    // At most SIZE_MAX / 4 + 1 groups, so three bytes per group cannot overflow.
    return (src_len / 4 + (src_len % 4 != 0)) * 3;
}

/* Decoder state shared by the fast loop, the padding check and the final group. */
struct dec {
    const unsigned char *src;
    size_t src_len;
    unsigned char *dst;
    size_t dst_cap;
    size_t pos;      // next source offset
    size_t out;      // bytes written
    size_t last_off; // offset of the last alphabet character seen
    uint32_t acc;    // pending sextets, most recent in the low bits
    int n_acc;       // pending sextets (0..3)
    int flags;
};

static int bad_char(struct dec *d, size_t off, const char *why, struct errmsg *e)
{
    unsigned c = d->src[off];
    if (c >= 0x21 && c <= 0x7e)
        return errmsg_set(e, ERR_FORMAT, "not valid base64 at offset %zu (%s '%c')", off, why,
                          (int)c);
    return errmsg_set(e, ERR_FORMAT, "not valid base64 at offset %zu (%s 0x%02x)", off, why, c);
}

static int no_room(struct dec *d, struct errmsg *e)
{
    return errmsg_set(e, ERR_LIMIT, "base64 data decodes to more than %zu bytes", d->dst_cap);
}

/* Consumes whole groups of four alphabet characters; stops at anything else. */
static int dec_fast(struct dec *d, struct errmsg *e)
{
    const unsigned char *s = d->src;
    while (d->pos + 4 <= d->src_len) {
        uint32_t a = dec_table[s[d->pos]], b = dec_table[s[d->pos + 1]];
        uint32_t c = dec_table[s[d->pos + 2]], x = dec_table[s[d->pos + 3]];
        if ((a | b | c | x) & 0x80) return ERR_OK;
        if (d->dst_cap - d->out < 3) return no_room(d, e);
        uint32_t v = a << 18 | b << 12 | c << 6 | x;
        d->dst[d->out] = (unsigned char)(v >> 16);
        d->dst[d->out + 1] = (unsigned char)(v >> 8);
        d->dst[d->out + 2] = (unsigned char)v;
        d->out += 3;
        d->last_off = d->pos + 3;
        d->pos += 4;
    }
    return ERR_OK;
}

/* Writes the 1 or 2 bytes of a final partial group, rejecting non-zero leftover bits. */
static int dec_final(struct dec *d, struct errmsg *e)
{
    if (d->n_acc == 0) return ERR_OK;
    if (d->n_acc == 1) return bad_char(d, d->last_off, "final group of one character", e);
    int n_bytes = d->n_acc - 1;
    int spare_bits = d->n_acc * 6 - n_bytes * 8;
    if (d->acc & ((1u << spare_bits) - 1))
        return bad_char(d, d->last_off, "non-zero trailing bits in", e);
    if (d->dst_cap - d->out < (size_t)n_bytes) return no_room(d, e);
    uint32_t v = d->acc >> spare_bits;
    if (n_bytes == 2) d->dst[d->out++] = (unsigned char)(v >> 8);
    d->dst[d->out++] = (unsigned char)v;
    return ERR_OK;
}

/* At the first '=': exactly 4 - n_acc of them (white space allowed between when skipping),
 * then nothing but white space. */
static int dec_padding(struct dec *d, struct errmsg *e)
{
    if (d->n_acc < 2) return bad_char(d, d->pos, "unexpected padding", e);
    int n_pad_want = 4 - d->n_acc, n_pad = 0;
    for (; d->pos < d->src_len; d->pos++) {
        uint8_t v = dec_table[d->src[d->pos]];
        if (v == DEC_SPACE && (d->flags & BASE64_SKIP_SPACE)) continue;
        if (v == DEC_PAD && n_pad < n_pad_want) {
            n_pad++;
            continue;
        }
        return bad_char(d, d->pos,
                        n_pad < n_pad_want ? "incomplete padding at" : "data after padding", e);
    }
    if (n_pad < n_pad_want)
        return errmsg_set(e, ERR_FORMAT, "not valid base64 at offset %zu (incomplete padding)",
                          d->src_len);
    return dec_final(d, e);
}

int base64_decode(const char *src, size_t src_len, void *dst, size_t dst_cap, int flags,
                  size_t *out_len, struct errmsg *e)
{
    struct dec d = {.src = (const unsigned char *)src,
                    .src_len = src_len,
                    .dst = dst,
                    .dst_cap = dst_cap,
                    .flags = flags};
    int rc = ERR_OK;
    while (rc == ERR_OK && d.pos < src_len) {
        if (d.n_acc == 0) {
            rc = dec_fast(&d, e);
            if (rc != ERR_OK || d.pos >= src_len) break;
        }
        uint8_t v = dec_table[d.src[d.pos]];
        if (v < 64) {
            d.acc = d.acc << 6 | v;
            d.last_off = d.pos++;
            if (++d.n_acc == 4) {
                if (d.dst_cap - d.out < 3) return no_room(&d, e);
                d.dst[d.out] = (unsigned char)(d.acc >> 16);
                d.dst[d.out + 1] = (unsigned char)(d.acc >> 8);
                d.dst[d.out + 2] = (unsigned char)d.acc;
                d.out += 3;
                d.acc = 0;
                d.n_acc = 0;
            }
        } else if (v == DEC_SPACE && (flags & BASE64_SKIP_SPACE)) {
            d.pos++;
        } else if (v == DEC_PAD) {
            rc = dec_padding(&d, e);
            if (rc == ERR_OK) *out_len = d.out;
            return rc;
        } else {
            return bad_char(&d, d.pos, "character", e);
        }
    }
    if (rc == ERR_OK) rc = dec_final(&d, e);
    if (rc == ERR_OK) *out_len = d.out;
    return rc;
}

/* Exact decoded size assuming the input is well formed: alphabet characters (white space not
 * counted when it is skipped, trailing '=' never) times 6 bits, rounded down to bytes. */
static size_t decoded_len_exact(const char *src, size_t src_len, int flags)
{
    size_t n = src_len;
    if (flags & BASE64_SKIP_SPACE) {
        n = 0;
        for (size_t i = 0; i < src_len; i++)
            n += dec_table[(unsigned char)src[i]] != DEC_SPACE;
    }
    // Trailing '=' (and spaces between them) are not data.
    size_t i = src_len;
    while (i > 0 && n > 0) {
        uint8_t v = dec_table[(unsigned char)src[i - 1]];
        if (v == DEC_PAD)
            n--;
        else if (!(v == DEC_SPACE && (flags & BASE64_SKIP_SPACE)))
            break;
        i--;
    }
    return n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
}

int base64_decode_alloc(const char *src, size_t src_len, size_t max_len, int flags,
                        unsigned char **out, size_t *out_len, struct errmsg *e)
{
    size_t cap = base64_decoded_len_max(src_len);
    if (cap > max_len) {
        cap = decoded_len_exact(src, src_len, flags);
        if (cap > max_len)
            return errmsg_set(e, ERR_LIMIT, "base64 data decodes to %zu bytes, limit is %zu", cap,
                              max_len);
    }
    unsigned char *p = mem_alloc(cap ? cap : 1);
    if (!p) return errmsg_set(e, ERR_NOMEM, "out of memory decoding %zu bytes of base64", src_len);
    size_t n;
    int rc = base64_decode(src, src_len, p, cap, flags, &n, e);
    if (rc != ERR_OK) {
        mem_free(p);
        return rc;
    }
    *out = p;
    *out_len = n;
    return ERR_OK;
}
