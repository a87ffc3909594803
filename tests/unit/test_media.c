/* media/: data URLs, image and audio validation, media-path confinement and the content-part
 * entry points. Every test file is generated here with the same Debian libraries (libpng,
 * libjpeg, libwebp, libsndfile; MP3 through libsndfile's LAME encoder), then truncated,
 * bit-flipped and patched to lie about its size. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media/audio.h"
#include "media/content.h"
#include "media/data_url.h"
#include "media/image.h"
#include "media/media_path.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>
#include <sndfile.h>
#include <webp/encode.h>

/* ---- fixtures: encoders into memory ---- */

struct blob {
    unsigned char *p; // malloc'd (not mem_alloc: fixtures stay out of the leak counts)
    size_t len;
};

static void blob_free(struct blob *b)
{
    free(b->p);
    b->p = NULL;
    b->len = 0;
}

static struct blob blob_copy(const struct blob *b)
{
    struct blob c = {malloc(b->len ? b->len : 1), b->len};
    assert_non_null(c.p);
    memcpy(c.p, b->p, b->len);
    return c;
}

/* A deterministic test pattern: w * h * ch bytes. */
static unsigned char *pattern(uint32_t w, uint32_t h, int ch)
{
    unsigned char *px = malloc((size_t)w * h * (size_t)ch);
    assert_non_null(px);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (int c = 0; c < ch; c++)
                px[((size_t)y * w + x) * (size_t)ch + (size_t)c] =
                    (unsigned char)(c == 3 ? 200 : (x * 16 + y * 8 + (uint32_t)c * 80) & 0xff);
    return px;
}

/* A smooth pattern for lossy codecs: w * h * ch bytes. */
static unsigned char *smooth(uint32_t w, uint32_t h, int ch)
{
    unsigned char *px = malloc((size_t)w * h * (size_t)ch);
    assert_non_null(px);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (int c = 0; c < ch; c++)
                px[((size_t)y * w + x) * (size_t)ch + (size_t)c] =
                    (unsigned char)(40 + x * 3 + y * 2 + (uint32_t)c * 50);
    return px;
}

static void png_write_cb(png_structp png, png_bytep data, size_t n)
{
    struct blob *b = png_get_io_ptr(png);
    b->p = realloc(b->p, b->len + n);
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void png_flush_cb(png_structp png)
{
    (void)png;
}

/* color: PNG_COLOR_TYPE_RGB, _GRAY, _RGB_ALPHA; depth 8 or 16. */
static struct blob make_png(uint32_t w, uint32_t h, int color, int depth, int interlace)
{
    int ch = color == PNG_COLOR_TYPE_RGB ? 3 : color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : 1;
    unsigned char *px = pattern(w, h, ch);
    struct blob b = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    assert_non_null(info);
    if (setjmp(png_jmpbuf(png))) fail_msg("libpng write failed");
    png_set_write_fn(png, &b, png_write_cb, png_flush_cb);
    png_set_IHDR(png, info, w, h, depth, color, interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    size_t stride = (size_t)w * (size_t)ch * (size_t)(depth / 8);
    unsigned char *row = malloc(stride);
    int n_passes = png_set_interlace_handling(png);
    for (int pass = 0; pass < n_passes; pass++) {
        for (uint32_t y = 0; y < h; y++) {
            for (size_t i = 0; i < (size_t)w * (size_t)ch; i++) {
                unsigned char v = px[(size_t)y * w * (size_t)ch + i];
                if (depth == 16) {
                    row[2 * i] = v;
                    row[2 * i + 1] = 0x55;
                } else {
                    row[i] = v;
                }
            }
            png_write_row(png, row);
        }
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    free(px);
    return b;
}

static struct blob make_jpeg(uint32_t w, uint32_t h, bool is_gray, bool is_progressive)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *mem = NULL;
    unsigned long mem_len = 0;
    jpeg_mem_dest(&c, &mem, &mem_len);
    c.image_width = w;
    c.image_height = h;
    c.input_components = is_gray ? 1 : 3;
    c.in_color_space = is_gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    if (is_progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    unsigned char *px = smooth(w, h, c.input_components);
    while (c.next_scanline < h) {
        JSAMPROW row = px + (size_t)c.next_scanline * w * (size_t)c.input_components;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(px);
    struct blob b = {malloc(mem_len), mem_len};
    memcpy(b.p, mem, mem_len);
    free(mem);
    return b;
}

static struct blob make_webp(uint32_t w, uint32_t h, bool is_lossless, bool has_alpha)
{
    unsigned char *px = pattern(w, h, has_alpha ? 4 : 3), *out = NULL;
    int stride = (int)w * (has_alpha ? 4 : 3);
    size_t n;
    if (is_lossless)
        n = has_alpha ? WebPEncodeLosslessRGBA(px, (int)w, (int)h, stride, &out)
                      : WebPEncodeLosslessRGB(px, (int)w, (int)h, stride, &out);
    else
        n = has_alpha ? WebPEncodeRGBA(px, (int)w, (int)h, stride, 90, &out)
                      : WebPEncodeRGB(px, (int)w, (int)h, stride, 90, &out);
    assert_true(n > 0);
    struct blob b = {malloc(n), n};
    memcpy(b.p, out, n);
    WebPFree(out);
    free(px);
    return b;
}

/* libsndfile writes through a seekable memory file (it rewrites the header at close). */
struct wfile {
    struct blob b;
    sf_count_t pos;
};

static sf_count_t w_len(void *u)
{
    return (sf_count_t)((struct wfile *)u)->b.len;
}

static sf_count_t w_seek(sf_count_t off, int whence, void *u)
{
    struct wfile *f = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->pos : (sf_count_t)f->b.len;
    f->pos = base + off;
    return f->pos;
}

static sf_count_t w_read(void *ptr, sf_count_t n, void *u)
{
    struct wfile *f = u;
    sf_count_t avail = (sf_count_t)f->b.len - f->pos;
    if (n > avail) n = avail > 0 ? avail : 0;
    memcpy(ptr, f->b.p + f->pos, (size_t)n);
    f->pos += n;
    return n;
}

static sf_count_t w_write(const void *ptr, sf_count_t n, void *u)
{
    struct wfile *f = u;
    size_t end = (size_t)(f->pos + n);
    if (end > f->b.len) {
        f->b.p = realloc(f->b.p, end);
        memset(f->b.p + f->b.len, 0, end - f->b.len);
        f->b.len = end;
    }
    memcpy(f->b.p + f->pos, ptr, (size_t)n);
    f->pos += n;
    return n;
}

static sf_count_t w_tell(void *u)
{
    return ((struct wfile *)u)->pos;
}

/* Sample i of channel c of the test tone, in [-0.5, 0.5]. */
static float tone(size_t i, int c, int rate)
{
    return 0.5f * sinf(6.2831853f * (440.0f + 220.0f * (float)c) * (float)i / (float)rate);
}

static struct blob make_sound(int format, int rate, int channels, size_t n_frames)
{
    struct wfile f = {{0}, 0};
    SF_VIRTUAL_IO vio = {w_len, w_seek, w_read, w_write, w_tell};
    SF_INFO si = {.samplerate = rate, .channels = channels, .format = format};
    SNDFILE *sf = sf_open_virtual(&vio, SFM_WRITE, &si, &f);
    if (!sf) fail_msg("sf_open_virtual write: %s", sf_strerror(NULL));
    float *buf = malloc(n_frames * (size_t)channels * sizeof(float));
    for (size_t i = 0; i < n_frames; i++)
        for (int c = 0; c < channels; c++)
            buf[i * (size_t)channels + (size_t)c] = tone(i, c, rate);
    assert_int_equal(sf_writef_float(sf, buf, (sf_count_t)n_frames), n_frames);
    sf_close(sf);
    free(buf);
    return f.b;
}

static struct blob make_wav(int rate, int channels, size_t n_frames)
{
    return make_sound(SF_FORMAT_WAV | SF_FORMAT_PCM_16, rate, channels, n_frames);
}

static struct blob make_mp3(int rate, int channels, size_t n_frames)
{
    return make_sound(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, rate, channels, n_frames);
}

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* ---- helpers ---- */

static int decode_image(const struct blob *b, const char *mime, struct image_info *info,
                        unsigned char **rgb, struct errmsg *e)
{
    struct image_input in = {.data = b->p, .len = b->len, .mime = str_from_cstr(mime)};
    errmsg_clear(e);
    return image_decode(&in, info, rgb, e);
}

#define assert_msg_has(e, part)                                                                    \
    do {                                                                                           \
        if (!strstr((e)->msg, (part))) fail_msg("message '%s' lacks '%s'", (e)->msg, (part));      \
    } while (0)

/* Every proper prefix of b must be refused with ERR_FORMAT (stride: test every n-th). */
static void expect_truncations_fail(const struct blob *b, const char *mime, size_t stride)
{
    struct image_info info;
    struct errmsg e;
    for (size_t n = 0; n < b->len; n += stride) {
        struct blob t = {b->p, n};
        int rc = decode_image(&t, mime, &info, NULL, &e);
        if (rc != ERR_FORMAT) fail_msg("prefix %zu of %zu: rc %d '%s'", n, b->len, rc, e.msg);
    }
}

/* Flipping each bit position (one per byte, rotating) must never crash; with must_fail every
 * flip must also be refused (formats whose every byte is covered by a checksum). */
static size_t flip_each_byte(const struct blob *b, const char *mime, bool must_fail)
{
    struct blob t = blob_copy(b);
    size_t n_accepted = 0;
    for (size_t i = 0; i < t.len; i++) {
        t.p[i] ^= (unsigned char)(1u << (i % 8));
        struct image_info info;
        struct errmsg e;
        unsigned char *rgb = NULL;
        int rc = decode_image(&t, mime, &info, (i & 1) ? &rgb : NULL, &e);
        if (rc == ERR_OK) {
            n_accepted++;
            assert_true(info.width >= 1 && info.height >= 1);
            mem_free(rgb);
            if (must_fail) fail_msg("flip at byte %zu accepted", i);
        } else {
            assert_true(rc == ERR_FORMAT || rc == ERR_LIMIT || rc == ERR_UNSUPPORTED);
            assert_true(strncmp(e.msg, "image: ", 7) == 0);
            assert_null(rgb);
        }
        t.p[i] ^= (unsigned char)(1u << (i % 8));
    }
    blob_free(&t);
    return n_accepted;
}

/* Fails allocation N for N = 0, 1, ... until the call succeeds: every failure must be
 * ERR_NOMEM and leave no allocation behind. */
#define FAULT_LOOP(call, cleanup_on_ok)                                                            \
    do {                                                                                           \
        int64_t live_ = mem_live_count();                                                          \
        for (int64_t n_ = 0;; n_++) {                                                              \
            mem_fail_after(n_);                                                                    \
            int rc_ = (call);                                                                      \
            mem_fail_after(-1);                                                                    \
            if (rc_ == ERR_OK) {                                                                   \
                cleanup_on_ok;                                                                     \
                assert_int_equal(mem_live_count(), live_);                                         \
                break;                                                                             \
            }                                                                                      \
            if (rc_ != ERR_NOMEM) fail_msg("allocation %lld: rc %d", (long long)n_, rc_);          \
            assert_int_equal(mem_live_count(), live_);                                             \
            assert_true(n_ < 10000);                                                               \
        }                                                                                          \
    } while (0)

/* ---- data URLs ---- */

static void test_data_url_parse(void **state)
{
    (void)state;
    struct data_url u;
    struct errmsg e;
    assert_int_equal(data_url_parse(str_from_cstr("data:image/png;base64,AAAA"), &u, &e), ERR_OK);
    assert_true(data_url_mime_is(&u, "image/png"));
    assert_true(u.is_base64);
    assert_int_equal(u.params.len, 0);
    assert_true(str_eq_cstr(u.data, "AAAA"));

    assert_int_equal(data_url_parse(str_from_cstr("DATA:Image/PNG;name=a.png;BASE64,"), &u, &e),
                     ERR_OK);
    assert_true(data_url_mime_is(&u, "image/png"));
    assert_true(u.is_base64);
    assert_true(str_eq_cstr(u.params, ";name=a.png"));
    assert_int_equal(u.data.len, 0);

    assert_int_equal(data_url_parse(str_from_cstr("data:,hello,world"), &u, &e), ERR_OK);
    assert_int_equal(u.mime.len, 0);
    assert_false(u.is_base64);
    assert_true(str_eq_cstr(u.data, "hello,world"));

    assert_int_equal(data_url_parse(str_from_cstr("data:;base64,Zg=="), &u, &e), ERR_OK);
    assert_int_equal(u.mime.len, 0);
    assert_true(u.is_base64);

    assert_int_equal(data_url_parse(str_from_cstr("data:text/plain;charset=US-ASCII,hi"), &u, &e),
                     ERR_OK);
    assert_false(u.is_base64);
    assert_true(str_eq_cstr(u.params, ";charset=US-ASCII"));
}

static void test_data_url_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *url, *msg;
    } cases[] = {
        {"image/png;base64,AAAA", "expected 'data:'"},
        {"data:image/png;base64", "missing ','"},
        {"data:image,AAAA", "malformed media type 'image'"},
        {"data:image/,AAAA", "malformed media type"},
        {"data:im age/png,AAAA", "malformed media type"},
        {"data:image/png x;base64,AAAA", "malformed media type"},
        {"data:image/png;base64;a=b,AAAA", "';base64' must be the last"},
        {"data:image/png;foo,AAAA", "malformed parameter ';foo'"},
        {"data:image/png;=x;base64,AAAA", "malformed parameter"},
        {"data:image/png;;base64,AAAA", "malformed parameter"},
        {"", "expected 'data:'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct data_url u;
        struct errmsg e;
        errmsg_clear(&e);
        int rc = data_url_parse(str_from_cstr(cases[i].url), &u, &e);
        if (rc != ERR_FORMAT || !strstr(e.msg, cases[i].msg))
            fail_msg("'%s': rc %d '%s'", cases[i].url, rc, e.msg);
    }
}

static void test_data_url_decode(void **state)
{
    (void)state;
    struct data_url u;
    struct errmsg e;
    unsigned char *p = NULL;
    size_t n = 0;
    assert_int_equal(data_url_parse(str_from_cstr("data:image/png;base64,Zm9v\r\nYmFy"), &u, &e),
                     ERR_OK);
    assert_int_equal(data_url_decode(&u, 0, &p, &n, &e), ERR_OK);
    assert_int_equal(n, 6);
    assert_memory_equal(p, "foobar", 6);
    mem_free(p);
    assert_int_equal(data_url_decode(&u, 5, &p, &n, &e), ERR_LIMIT);
    assert_msg_has(&e, "data too large");

    // Offset 17 of the data part: the brief's example message, verbatim.
    assert_int_equal(
        data_url_parse(str_from_cstr("data:image/png;base64,AAAAAAAAAAAAAAAAA!AA"), &u, &e),
        ERR_OK);
    assert_int_equal(data_url_decode(&u, 0, &p, &n, &e), ERR_FORMAT);
    assert_msg_has(&e, "data is not valid base64 at offset 17");

    assert_int_equal(data_url_parse(str_from_cstr("data:image/png,%89PNG"), &u, &e), ERR_OK);
    assert_int_equal(data_url_decode(&u, 0, &p, &n, &e), ERR_UNSUPPORTED);
    assert_msg_has(&e, "must be base64");

    FAULT_LOOP((data_url_parse(str_from_cstr("data:a/b;base64,Zm9v"), &u, &e),
                data_url_decode(&u, 0, &p, &n, &e)),
               mem_free(p));
}

/* ---- images ---- */

static void test_png_decodes_exact_pixels(void **state)
{
    (void)state;
    static const struct {
        int color, depth, interlace;
        uint32_t channels;
    } kinds[] = {
        {PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE, 3},
        {PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7, 3},
        {PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, 1},
        {PNG_COLOR_TYPE_RGB_ALPHA, 8, PNG_INTERLACE_NONE, 4},
        {PNG_COLOR_TYPE_RGB, 16, PNG_INTERLACE_ADAM7, 3},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        struct blob b = make_png(17, 9, kinds[k].color, kinds[k].depth, kinds[k].interlace);
        struct image_info info;
        struct errmsg e;
        unsigned char *rgb = NULL;
        assert_int_equal(decode_image(&b, "image/png", &info, &rgb, &e), ERR_OK);
        assert_int_equal(info.format, IMAGE_FORMAT_PNG);
        assert_int_equal(info.width, 17);
        assert_int_equal(info.height, 9);
        assert_int_equal(info.channels, kinds[k].channels);
        int ch = kinds[k].color == PNG_COLOR_TYPE_GRAY ? 1 : 3;
        unsigned char *want = pattern(17, 9, kinds[k].color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : ch);
        int src_ch = kinds[k].color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : ch;
        for (size_t i = 0; i < 17 * 9; i++)
            for (int c = 0; c < 3; c++)
                assert_int_equal(rgb[i * 3 + (size_t)c],
                                 want[i * (size_t)src_ch + (size_t)(ch == 1 ? 0 : c)]);
        free(want);
        mem_free(rgb);
        // Validation without pixels gives the same answer.
        assert_int_equal(decode_image(&b, "image/png", &info, NULL, &e), ERR_OK);
        assert_int_equal(info.width, 17);
        blob_free(&b);
    }
}

static void test_png_truncated_and_flipped(void **state)
{
    (void)state;
    struct blob b = make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    expect_truncations_fail(&b, "image/png", 1);
    struct image_info info;
    struct errmsg e;
    struct blob t = {b.p, b.len - 20}; // inside IDAT/IEND
    assert_int_equal(decode_image(&t, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: PNG data truncated");
    // Every byte of a PNG is covered by the signature, a length or a CRC: no flip may pass.
    assert_int_equal(flip_each_byte(&b, "image/png", true), 0);
    blob_free(&b);
}

/* Rewrites IHDR's width and height and recomputes its CRC, so only the pixel data betrays it. */
static void png_patch_dims(struct blob *b, uint32_t w, uint32_t h)
{
    assert_memory_equal(b->p + 12, "IHDR", 4);
    put_be32(b->p + 16, w);
    put_be32(b->p + 20, h);
    put_be32(b->p + 29, crc32_of(b->p + 12, 17));
}

static void test_png_lying_dimensions(void **state)
{
    (void)state;
    struct blob b = make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    struct image_info info;
    struct errmsg e;
    unsigned char *rgb = NULL;
    png_patch_dims(&b, 20, 13); // one row more than the data holds
    assert_int_equal(decode_image(&b, "image/png", &info, &rgb, &e), ERR_FORMAT);
    assert_null(rgb);
    png_patch_dims(&b, 40, 12);
    assert_int_equal(decode_image(&b, "image/png", &info, NULL, &e), ERR_FORMAT);
    // 100000 x 100000: refused from the header, with no pixel buffer allocated.
    png_patch_dims(&b, 100000, 100000);
    int64_t live = mem_live_count();
    assert_int_equal(decode_image(&b, "image/png", &info, &rgb, &e), ERR_LIMIT);
    assert_msg_has(&e, "100000x100000 exceeds the limit (8192x8192, 40000000 pixels)");
    assert_int_equal(mem_live_count(), live);
    png_patch_dims(&b, 8000, 8000); // within each side, over the pixel count
    assert_int_equal(decode_image(&b, "image/png", &info, NULL, &e), ERR_LIMIT);
    png_patch_dims(&b, 0, 12);
    assert_int_equal(decode_image(&b, "image/png", &info, NULL, &e), ERR_FORMAT);
    blob_free(&b);

    b = make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    struct image_limits lim = {.width_max = 19};
    struct image_input in = {.data = b.p, .len = b.len, .limits = &lim};
    assert_int_equal(image_decode(&in, &info, NULL, &e), ERR_LIMIT);
    lim.width_max = 20;
    assert_int_equal(image_decode(&in, &info, NULL, &e), ERR_OK);
    blob_free(&b);
}

static void test_png_fault_injection(void **state)
{
    (void)state;
    struct blob b = make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7);
    struct image_info info;
    struct errmsg e;
    unsigned char *rgb = NULL;
    FAULT_LOOP(decode_image(&b, "image/png", &info, &rgb, &e), mem_free(rgb));
    FAULT_LOOP(decode_image(&b, "image/png", &info, NULL, &e), (void)0);
    blob_free(&b);
}

static void test_jpeg_decodes(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        bool is_gray = k == 2, is_progressive = k == 1;
        struct blob b = make_jpeg(33, 17, is_gray, is_progressive);
        struct image_info info;
        struct errmsg e;
        unsigned char *rgb = NULL;
        assert_int_equal(decode_image(&b, "image/jpeg", &info, &rgb, &e), ERR_OK);
        assert_int_equal(info.format, IMAGE_FORMAT_JPEG);
        assert_int_equal(info.width, 33);
        assert_int_equal(info.height, 17);
        assert_int_equal(info.channels, is_gray ? 1 : 3);
        // Lossy: compare the mean error against the pattern.
        int ch = is_gray ? 1 : 3;
        unsigned char *want = smooth(33, 17, ch);
        double err = 0;
        for (size_t i = 0; i < 33 * 17; i++)
            for (int c = 0; c < 3; c++)
                err += fabs((double)rgb[i * 3 + (size_t)c] -
                            (double)want[i * (size_t)ch + (size_t)(is_gray ? 0 : c)]);
        assert_true(err / (33.0 * 17 * 3) < 4.0);
        free(want);
        mem_free(rgb);
        assert_int_equal(decode_image(&b, "image/jpg", &info, NULL, &e), ERR_OK);
        expect_truncations_fail(&b, "image/jpeg", 3);
        flip_each_byte(&b, "image/jpeg", false); // no checksums: must only not crash
        blob_free(&b);
    }
}

static void test_jpeg_huge_header_and_faults(void **state)
{
    (void)state;
    struct blob b = make_jpeg(33, 17, false, false);
    struct image_info info;
    struct errmsg e;
    // Find SOF0 (FFC0 len(2) precision(1) height(2) width(2)) and claim 60000 x 60000.
    size_t i = 2;
    while (i + 9 < b.len && !(b.p[i] == 0xff && b.p[i + 1] == 0xc0))
        i++;
    assert_true(i + 9 < b.len);
    b.p[i + 5] = 60000 >> 8;
    b.p[i + 6] = 60000 & 0xff;
    b.p[i + 7] = 60000 >> 8;
    b.p[i + 8] = 60000 & 0xff;
    assert_int_equal(decode_image(&b, "image/jpeg", &info, NULL, &e), ERR_LIMIT);
    assert_msg_has(&e, "60000x60000 exceeds the limit");
    blob_free(&b);

    b = make_jpeg(33, 17, false, true);
    unsigned char *rgb = NULL;
    FAULT_LOOP(decode_image(&b, "image/jpeg", &info, &rgb, &e), mem_free(rgb));
    blob_free(&b);
}

/* A CMYK JPEG (libjpeg writes an Adobe marker) and a grayscale one with 316 progressive scans
 * (five successive-approximation steps per coefficient). */
static struct blob make_jpeg_special(bool is_cmyk)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *mem = NULL;
    unsigned long mem_len = 0;
    jpeg_mem_dest(&c, &mem, &mem_len);
    c.image_width = 16;
    c.image_height = 8;
    c.input_components = is_cmyk ? 4 : 1;
    c.in_color_space = is_cmyk ? JCS_CMYK : JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    static jpeg_scan_info scans[1 + 63 * 5];
    if (!is_cmyk) {
        int n = 0;
        scans[n++] = (jpeg_scan_info){1, {0}, 0, 0, 0, 0};
        for (int k = 1; k < 64; k++) {
            scans[n++] = (jpeg_scan_info){1, {0}, k, k, 0, 4};
            for (int al = 3; al >= 0; al--)
                scans[n++] = (jpeg_scan_info){1, {0}, k, k, al + 1, al};
        }
        c.scan_info = scans;
        c.num_scans = n;
    }
    jpeg_start_compress(&c, TRUE);
    unsigned char px[16 * 8 * 4];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)(is_cmyk && i % 4 == 3 ? 255 : 60 + (i % 4) * 40);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = px + (size_t)c.next_scanline * 16 * (size_t)c.input_components;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    struct blob b = {malloc(mem_len), mem_len};
    memcpy(b.p, mem, mem_len);
    free(mem);
    return b;
}

static void test_jpeg_cmyk_and_scan_limit(void **state)
{
    (void)state;
    struct blob b = make_jpeg_special(true);
    struct image_info info;
    struct errmsg e;
    unsigned char *rgb = NULL;
    assert_int_equal(decode_image(&b, "image/jpeg", &info, &rgb, &e), ERR_OK);
    assert_int_equal(info.channels, 4);
    // K = 255 everywhere, so each RGB value is its C, M or Y value.
    for (size_t i = 0; i < 16 * 8; i++)
        for (int c = 0; c < 3; c++)
            assert_true(abs((int)rgb[3 * i + (size_t)c] - (60 + c * 40)) <= 3);
    mem_free(rgb);
    blob_free(&b);

    b = make_jpeg_special(false);
    assert_int_equal(decode_image(&b, "image/jpeg", &info, NULL, &e), ERR_LIMIT);
    assert_string_equal(e.msg, "image: JPEG has more than 256 scans");
    blob_free(&b);
}

static void test_webp_animated_refused(void **state)
{
    (void)state;
    // "RIFF" size "WEBP", then a VP8X chunk with the animation flag and a 1x1 canvas.
    unsigned char vp8x[30] = "RIFF\x16\0\0\0WEBPVP8X\x0a\0\0\0\x02";
    struct blob b = {malloc(sizeof vp8x), sizeof vp8x};
    memcpy(b.p, vp8x, sizeof vp8x);
    struct image_info info;
    struct errmsg e;
    assert_int_equal(decode_image(&b, "image/webp", &info, NULL, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "image: animated WebP is not supported");
    blob_free(&b);
}

static void test_webp_decodes(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        bool is_lossless = k & 1, has_alpha = k & 2;
        struct blob b = make_webp(21, 11, is_lossless, has_alpha);
        struct image_info info;
        struct errmsg e;
        unsigned char *rgb = NULL;
        assert_int_equal(decode_image(&b, "image/webp", &info, &rgb, &e), ERR_OK);
        assert_int_equal(info.format, IMAGE_FORMAT_WEBP);
        assert_int_equal(info.width, 21);
        assert_int_equal(info.height, 11);
        assert_int_equal(info.channels, has_alpha ? 4 : 3);
        if (is_lossless) {
            int ch = has_alpha ? 4 : 3;
            unsigned char *want = pattern(21, 11, ch);
            for (size_t i = 0; i < 21 * 11; i++)
                assert_memory_equal(rgb + 3 * i, want + (size_t)ch * i, 3);
            free(want);
        }
        mem_free(rgb);
        assert_int_equal(decode_image(&b, "image/webp", &info, NULL, &e), ERR_OK);
        expect_truncations_fail(&b, "image/webp", 1);
        flip_each_byte(&b, "image/webp", false);
        FAULT_LOOP(decode_image(&b, "image/webp", &info, &rgb, &e), mem_free(rgb));
        blob_free(&b);
    }
}

static void test_webp_huge_header(void **state)
{
    (void)state;
    struct blob b = make_webp(21, 11, true, false);
    struct image_info info;
    struct errmsg e;
    // Simple lossless file: "RIFF" size "WEBP" "VP8L" size 0x2f, then 14-bit width-1 and
    // height-1 (little-endian bit order). Claim 16384 x 16384.
    assert_memory_equal(b.p + 12, "VP8L", 4);
    assert_int_equal(b.p[20], 0x2f);
    uint32_t bits = (uint32_t)b.p[21] | (uint32_t)b.p[22] << 8 | (uint32_t)b.p[23] << 16 |
                    (uint32_t)b.p[24] << 24;
    bits = (bits & ~0x0fffffffu) | 16383u | 16383u << 14;
    for (int k = 0; k < 4; k++)
        b.p[21 + k] = (unsigned char)(bits >> (8 * k));
    assert_int_equal(decode_image(&b, "image/webp", &info, NULL, &e), ERR_LIMIT);
    assert_msg_has(&e, "16384x16384 exceeds the limit");
    blob_free(&b);
}

static void test_image_format_policy(void **state)
{
    (void)state;
    struct blob jpg = make_jpeg(8, 8, false, false);
    struct image_info info;
    struct errmsg e;
    // Claimed PNG, really JPEG: the content decides.
    assert_int_equal(decode_image(&jpg, "image/png", &info, NULL, &e), ERR_OK);
    assert_int_equal(info.format, IMAGE_FORMAT_JPEG);
    assert_int_equal(decode_image(&jpg, "IMAGE/GIF", &info, NULL, &e), ERR_OK);
    assert_int_equal(decode_image(&jpg, "", &info, NULL, &e), ERR_OK);
    assert_int_equal(decode_image(&jpg, "text/plain", &info, NULL, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "image: media type 'text/plain' is not an image");
    blob_free(&jpg);

    struct blob gif = {(unsigned char *)strdup("GIF89a\x01\x00\x01\x00\x80\x00\x00"), 13};
    assert_int_equal(decode_image(&gif, "image/gif", &info, NULL, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "image: format GIF is not supported (png, jpeg, webp)");
    blob_free(&gif);
    struct blob junk = {(unsigned char *)strdup("hello world, not an image"), 25};
    assert_int_equal(decode_image(&junk, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: data is not a valid PNG image");
    assert_int_equal(decode_image(&junk, "image/heic", &info, NULL, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "image: format 'image/heic' is not supported (png, jpeg, webp)");
    assert_int_equal(decode_image(&junk, "", &info, NULL, &e), ERR_FORMAT);
    blob_free(&junk);
    struct blob empty = {NULL, 0};
    assert_int_equal(decode_image(&empty, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: data is empty");
    // Right magic, nothing after it.
    struct blob magic = {(unsigned char *)strdup("\x89PNG\r\n\x1a\n"), 8};
    assert_int_equal(decode_image(&magic, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: PNG data truncated");
    blob_free(&magic);

    assert_int_equal(image_format_from_mime(str_from_cstr("image/JPG")), IMAGE_FORMAT_JPEG);
    assert_int_equal(image_format_from_mime(str_from_cstr("image/png ")), IMAGE_FORMAT_UNKNOWN);
    assert_int_equal(image_sniff("RIFF\0\0\0\0WEBP", 12), IMAGE_FORMAT_WEBP);
    assert_int_equal(image_sniff("RIFF\0\0\0\0WAVE", 12), IMAGE_FORMAT_UNKNOWN);
}

/* ---- audio ---- */

static int decode_audio(const struct blob *b, enum audio_format f, const struct audio_limits *lim,
                        struct audio_info *info, float **pcm, struct errmsg *e)
{
    struct audio_input in = {.data = b->p, .len = b->len, .format = f, .limits = lim};
    errmsg_clear(e);
    return audio_decode(&in, info, pcm, e);
}

static void test_audio_format_parse(void **state)
{
    (void)state;
    enum audio_format f;
    struct errmsg e;
    assert_int_equal(audio_format_parse(str_from_cstr("wav"), &f, &e), ERR_OK);
    assert_int_equal(f, AUDIO_FORMAT_WAV);
    assert_int_equal(audio_format_parse(str_from_cstr("mp3"), &f, &e), ERR_OK);
    assert_int_equal(f, AUDIO_FORMAT_MP3);
    assert_int_equal(audio_format_parse(str_from_cstr("ogg"), &f, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "audio: format 'ogg' not supported (wav, mp3)");
    assert_int_equal(audio_format_parse(str_from_cstr("WAV"), &f, &e), ERR_UNSUPPORTED);
}

static void test_wav_decodes(void **state)
{
    (void)state;
    struct blob b = make_wav(16000, 1, 1600);
    struct audio_info info;
    struct errmsg e;
    float *pcm = NULL;
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, &pcm, &e), ERR_OK);
    assert_int_equal(info.format, AUDIO_FORMAT_WAV);
    assert_int_equal(info.sample_rate_hz, 16000);
    assert_int_equal(info.n_channels, 1);
    assert_int_equal(info.n_frames, 1600);
    assert_int_equal(info.duration_ms, 100);
    for (size_t i = 0; i < 1600; i++)
        assert_true(fabsf(pcm[i] - tone(i, 0, 16000)) < 1e-3f);
    mem_free(pcm);
    blob_free(&b);

    b = make_sound(SF_FORMAT_WAV | SF_FORMAT_FLOAT, 48000, 2, 4800);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, &pcm, &e), ERR_OK);
    assert_int_equal(info.n_channels, 2);
    assert_int_equal(info.n_frames, 4800);
    for (size_t i = 0; i < 4800; i += 97) // mono downmix
        assert_true(fabsf(pcm[i] - (tone(i, 0, 48000) + tone(i, 1, 48000)) / 2) < 1e-5f);
    mem_free(pcm);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_OK);
    FAULT_LOOP(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, &pcm, &e), mem_free(pcm));
    blob_free(&b);
}

static void test_wav_corrupt(void **state)
{
    (void)state;
    struct blob b = make_wav(16000, 1, 800);
    struct audio_info info;
    struct errmsg e;
    for (size_t n = 0; n < b.len; n++) {
        struct blob t = {b.p, n};
        int rc = decode_audio(&t, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e);
        if (rc != ERR_FORMAT) fail_msg("prefix %zu of %zu: rc %d '%s'", n, b.len, rc, e.msg);
    }
    struct blob t = {b.p, b.len - 1};
    assert_int_equal(decode_audio(&t, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_msg_has(&e, "audio: WAV data truncated (data chunk declares 1600 bytes, 1599 present)");
    // Header bytes flipped one by one: refused or accepted, never a crash.
    struct blob c = blob_copy(&b);
    for (size_t i = 0; i < 64; i++) {
        for (int bit = 0; bit < 8; bit++) {
            c.p[i] ^= (unsigned char)(1u << bit);
            float *pcm = NULL;
            int rc = decode_audio(&c, AUDIO_FORMAT_WAV, NULL, &info, (bit & 1) ? &pcm : NULL, &e);
            assert_true(rc == ERR_OK || rc == ERR_FORMAT || rc == ERR_LIMIT ||
                        rc == ERR_UNSUPPORTED);
            if (rc == ERR_OK) assert_true(info.n_frames >= 1);
            mem_free(pcm);
            c.p[i] ^= (unsigned char)(1u << bit);
        }
    }
    blob_free(&c);
    struct blob empty = {NULL, 0};
    assert_int_equal(decode_audio(&empty, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is empty");
    blob_free(&b);
}

static void test_audio_limits_and_mismatch(void **state)
{
    (void)state;
    struct audio_info info;
    struct errmsg e;
    struct blob b = make_wav(4000, 1, 400);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_LIMIT);
    assert_string_equal(e.msg, "audio: WAV sample rate 4000 Hz outside 8000..192000 Hz");
    blob_free(&b);
    b = make_wav(8000, 9, 80);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_LIMIT);
    assert_msg_has(&e, "9 channels");
    blob_free(&b);
    b = make_wav(16000, 1, 1600); // 100 ms
    struct audio_limits lim = {.duration_ms_max = 99};
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, &lim, &info, NULL, &e), ERR_LIMIT);
    assert_msg_has(&e, "longer than");
    lim.duration_ms_max = 100;
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, &lim, &info, NULL, &e), ERR_OK);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_MP3, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is wav, not mp3");
    blob_free(&b);
    struct blob junk = {(unsigned char *)strdup("OggS\0\2\0\0\0\0\0\0\0\0"), 14};
    assert_int_equal(decode_audio(&junk, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is not wav audio");
    blob_free(&junk);
    // A RIFF WAVE with no data chunk at all.
    struct blob nodata = {malloc(12), 12};
    memcpy(nodata.p, "RIFF\4\0\0\0WAVE", 12);
    assert_int_equal(decode_audio(&nodata, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    blob_free(&nodata);
}

static void test_mp3_decodes(void **state)
{
    (void)state;
    struct blob b = make_mp3(16000, 1, 8000);
    struct audio_info info;
    struct errmsg e;
    float *pcm = NULL;
    assert_int_equal(audio_sniff(b.p, b.len), AUDIO_FORMAT_MP3);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_MP3, NULL, &info, &pcm, &e), ERR_OK);
    assert_int_equal(info.format, AUDIO_FORMAT_MP3);
    assert_int_equal(info.sample_rate_hz, 16000);
    assert_int_equal(info.n_channels, 1);
    // Gapless trimming is approximate across encoders: allow one frame of slack either way.
    assert_true(info.n_frames + 1152 >= 8000 && info.n_frames <= 8000 + 1152);
    double energy = 0;
    for (size_t i = 0; i < info.n_frames; i++)
        energy += (double)pcm[i] * pcm[i];
    assert_true(energy / (double)info.n_frames > 0.05); // the 0.5-amplitude tone is there
    mem_free(pcm);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is mp3, not wav");
    FAULT_LOOP(decode_audio(&b, AUDIO_FORMAT_MP3, NULL, &info, &pcm, &e), mem_free(pcm));
    struct audio_limits lim = {.duration_ms_max = 200};
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_MP3, &lim, &info, NULL, &e), ERR_LIMIT);
    blob_free(&b);

    b = make_mp3(44100, 2, 4410);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_MP3, NULL, &info, NULL, &e), ERR_OK);
    assert_int_equal(info.sample_rate_hz, 44100);
    assert_int_equal(info.n_channels, 2);
    blob_free(&b);
}

static void test_mp3_corrupt(void **state)
{
    (void)state;
    struct blob b = make_mp3(16000, 1, 8000);
    struct audio_info info;
    struct errmsg e;
    // The LAME/Info header gives the exact length, so every cut is caught, even one at a
    // frame boundary.
    for (size_t n = 4; n < b.len; n += 3) {
        struct blob t = {b.p, n};
        int rc = decode_audio(&t, AUDIO_FORMAT_MP3, NULL, &info, NULL, &e);
        if (rc != ERR_FORMAT || !strstr(e.msg, "audio: MP3 data truncated"))
            fail_msg("prefix %zu of %zu: rc %d '%s'", n, b.len, rc, e.msg);
    }
    struct blob t = {b.p, b.len - 10};
    assert_int_equal(decode_audio(&t, AUDIO_FORMAT_MP3, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_msg_has(&e, "truncated");
    struct blob c = blob_copy(&b);
    for (size_t i = 0; i < c.len; i += 3) {
        c.p[i] ^= (unsigned char)(1u << (i % 8));
        float *pcm = NULL;
        int rc = decode_audio(&c, AUDIO_FORMAT_MP3, NULL, &info, (i & 1) ? &pcm : NULL, &e);
        assert_true(rc == ERR_OK || rc == ERR_FORMAT || rc == ERR_LIMIT);
        mem_free(pcm);
        c.p[i] ^= (unsigned char)(1u << (i % 8));
    }
    blob_free(&c);
    blob_free(&b);
}

/* ---- media path ---- */

struct tree {
    char base[64];  // mkdtemp dir
    char root[128]; // base/root: the media path
    char path[512]; // scratch
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* base/root/{a.png, sub/b.bin, inlink -> a.png, escape -> ../outside/secret, fifo, big}
 * base/outside/secret, base/root2/c (shares root's name as a prefix). */
static void tree_make(struct tree *t)
{
    snprintf(t->base, sizeof t->base, "/tmp/llamapi-media-XXXXXX");
    assert_non_null(mkdtemp(t->base));
    const char *dirs[] = {"root", "root/sub", "outside", "root2"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(t->path, sizeof t->path, "%s/%s", t->base, dirs[i]);
        assert_int_equal(mkdir(t->path, 0700), 0);
    }
    snprintf(t->root, sizeof t->root, "%s/root", t->base);
    const char *files[][2] = {{"root/a.png", "A-PNG"},          {"root/sub/b.bin", "BBB"},
                              {"outside/secret", "SECRET"},     {"root2/c", "C"},
                              {"root/big", "0123456789abcdef"}, {"root/a b%.txt", "SPACE"}};
    for (size_t i = 0; i < 6; i++) {
        snprintf(t->path, sizeof t->path, "%s/%s", t->base, files[i][0]);
        write_file(t->path, files[i][1]);
    }
    snprintf(t->path, sizeof t->path, "%s/root/inlink", t->base);
    assert_int_equal(symlink("a.png", t->path), 0);
    snprintf(t->path, sizeof t->path, "%s/root/escape", t->base);
    assert_int_equal(symlink("../outside/secret", t->path), 0);
    snprintf(t->path, sizeof t->path, "%s/root/fifo", t->base);
    assert_int_equal(mkfifo(t->path, 0600), 0);
}

static void tree_remove(struct tree *t)
{
    const char *names[] = {"root/a.png", "root/sub/b.bin", "outside/secret", "root2/c",
                           "root/big",   "root/a b%.txt",  "root/inlink",    "root/escape",
                           "root/fifo",  "root/sub",       "root",           "outside",
                           "root2"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(t->path, sizeof t->path, "%s/%s", t->base, names[i]);
        if (unlink(t->path) != 0) rmdir(t->path);
    }
    rmdir(t->base);
}

static int read_url(const struct media_path *mp, const char *url, size_t max, struct blob *out,
                    struct errmsg *e)
{
    unsigned char *p = NULL;
    size_t n = 0;
    errmsg_clear(e);
    int rc = media_path_read(mp, str_from_cstr(url), max, &p, &n, e);
    if (rc == ERR_OK) {
        out->p = malloc(n + 1);
        memcpy(out->p, p, n);
        out->p[n] = '\0';
        out->len = n;
        mem_free(p);
    }
    return rc;
}

static void expect_read(const struct media_path *mp, const char *url, int code, const char *want)
{
    struct blob b = {0};
    struct errmsg e;
    int rc = read_url(mp, url, 0, &b, &e);
    if (rc != code) fail_msg("%s: rc %d '%s', want %d", url, rc, e.msg, code);
    if (rc == ERR_OK && strcmp((char *)b.p, want) != 0)
        fail_msg("%s: read '%s', want '%s'", url, b.p, want);
    if (rc != ERR_OK && !strstr(e.msg, want))
        fail_msg("%s: message '%s' lacks '%s'", url, e.msg, want);
    blob_free(&b);
}

static void test_media_path_confinement(void **state)
{
    (void)state;
    struct tree t;
    tree_make(&t);
    struct media_path mp, off;
    struct errmsg e;
    media_path_init_disabled(&off);
    expect_read(&off, "file://a.png", ERR_UNSUPPORTED, "local file URLs are disabled");
    expect_read(NULL, "file://a.png", ERR_UNSUPPORTED, "disabled");
    assert_int_equal(media_path_init(&mp, t.root, &e), ERR_OK);

    expect_read(&mp, "file://a.png", ERR_OK, "A-PNG");
    expect_read(&mp, "FILE://sub/b.bin", ERR_OK, "BBB");
    expect_read(&mp, "file://sub/../a.png", ERR_OK, "A-PNG");
    expect_read(&mp, "file://inlink", ERR_OK, "A-PNG");
    expect_read(&mp, "file://a%20b%25.txt", ERR_OK, "SPACE");
    expect_read(&mp, "file://a%2Epng", ERR_OK, "A-PNG");
    snprintf(t.path, sizeof t.path, "file://%s/sub/b.bin", t.root);
    expect_read(&mp, t.path, ERR_OK, "BBB");

    expect_read(&mp, "file://../outside/secret", ERR_INVALID, "outside the media path");
    expect_read(&mp, "file://sub/../../outside/secret", ERR_INVALID, "outside the media path");
    expect_read(&mp, "file://escape", ERR_INVALID, "outside the media path");
    expect_read(&mp, "file://%2E%2E/outside/secret", ERR_INVALID, "outside the media path");
    snprintf(t.path, sizeof t.path, "file://%s/outside/secret", t.base);
    expect_read(&mp, t.path, ERR_INVALID, "outside the media path");
    snprintf(t.path, sizeof t.path, "file://%s2/c", t.root); // ".../root2/c": prefix trap
    expect_read(&mp, t.path, ERR_INVALID, "outside the media path");
    snprintf(t.path, sizeof t.path, "file://%s", t.root);
    expect_read(&mp, t.path, ERR_INVALID, "outside the media path"); // the root itself
    expect_read(&mp, "file:///etc/passwd", ERR_INVALID, "outside the media path");

    expect_read(&mp, "file://missing.png", ERR_NOT_FOUND, "'file://missing.png': file not found");
    expect_read(&mp, "file://sub/missing/x", ERR_NOT_FOUND, "not found");
    expect_read(&mp, "file://fifo", ERR_INVALID, "not a regular file");
    expect_read(&mp, "file://sub", ERR_INVALID, "not a regular file");
    expect_read(&mp, "file://a.png?x=1", ERR_INVALID, "query, fragment");
    expect_read(&mp, "file://a.png%00.jpg", ERR_INVALID, "bad %-escape");
    expect_read(&mp, "file://a.png%2", ERR_INVALID, "bad %-escape");
    expect_read(&mp, "file://", ERR_INVALID, "names no file");
    expect_read(&mp, "/abs/a.png", ERR_INVALID, "not a file:// URL");

    struct blob b = {0};
    assert_int_equal(read_url(&mp, "file://big", 15, &b, &e), ERR_LIMIT);
    assert_msg_has(&e, "file too large (16 bytes, limit 15)");
    assert_int_equal(read_url(&mp, "file://big", 16, &b, &e), ERR_OK);
    assert_int_equal(b.len, 16);
    blob_free(&b);

    unsigned char *p = NULL;
    size_t n;
    FAULT_LOOP(media_path_read(&mp, str_from_cstr("file://sub/b.bin"), 0, &p, &n, &e), mem_free(p));
    media_path_deinit(&mp);
    media_path_deinit(&mp); // idempotent

    assert_int_equal(media_path_init(&mp, "/nonexistent/llamapi", &e), ERR_NOT_FOUND);
    snprintf(t.path, sizeof t.path, "%s/a.png", t.root);
    assert_int_equal(media_path_init(&mp, t.path, &e), ERR_INVALID);
    assert_msg_has(&e, "not a directory");
    assert_int_equal(media_path_init(&mp, "", &e), ERR_INVALID);
    assert_null(mp.root);
    // A root given through a symlink and with "..": stored resolved, confinement still holds.
    snprintf(t.path, sizeof t.path, "%s/root/sub/..", t.base);
    assert_int_equal(media_path_init(&mp, t.path, &e), ERR_OK);
    assert_string_equal(mp.root + strlen(mp.root) - 5, "/root");
    expect_read(&mp, "file://escape", ERR_INVALID, "outside");
    media_path_deinit(&mp);
    tree_remove(&t);
}

/* ---- content parts ---- */

static char *data_url_of(const char *mime, const struct blob *b)
{
    size_t n;
    assert_int_equal(base64_encoded_len(b->len, &n), ERR_OK);
    size_t head = strlen("data:;base64,") + strlen(mime);
    char *s = malloc(head + n + 1);
    snprintf(s, head + 1, "data:%s;base64,", mime);
    base64_encode(b->p, b->len, s + head);
    s[head + n] = '\0';
    return s;
}

static void test_content_image(void **state)
{
    (void)state;
    struct blob png = make_png(5, 4, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    char *url = data_url_of("image/png", &png);
    struct image_info info;
    struct errmsg e;
    unsigned char *rgb = NULL;
    assert_int_equal(content_image_load(str_from_cstr(url), NULL, &info, &rgb, &e), ERR_OK);
    assert_int_equal(info.width, 5);
    assert_int_equal(info.height, 4);
    unsigned char *want = pattern(5, 4, 3);
    assert_memory_equal(rgb, want, 5 * 4 * 3);
    free(want);
    mem_free(rgb);
    // Raw base64 (no scheme), as llama.cpp accepts.
    assert_int_equal(content_image_load(str_from_cstr(url + strlen("data:image/png;base64,")), NULL,
                                        &info, NULL, &e),
                     ERR_OK);
    FAULT_LOOP(content_image_load(str_from_cstr(url), NULL, &info, &rgb, &e), mem_free(rgb));

    struct content_limits lim = {.bytes_max = png.len - 1};
    assert_int_equal(content_image_load(str_from_cstr(url), &lim, &info, NULL, &e), ERR_LIMIT);
    assert_msg_has(&e, "image_url: data too large");
    free(url);

    static const struct {
        const char *url;
        int code;
        const char *msg;
    } bad[] = {
        {"data:image/png;base64,iVBORw0KGgoAAAANS!", ERR_FORMAT,
         "image_url: data is not valid base64 at offset 17 (character '!')"},
        {"data:image/png,abc", ERR_UNSUPPORTED, "image_url: data URL must be base64-encoded"},
        {"data:;base64,iVBORw0KGgo=", ERR_FORMAT, "image_url: data URL has no media type"},
        {"data:text/plain;base64,aGVsbG8=", ERR_UNSUPPORTED,
         "image: media type 'text/plain' is not an image"},
        {"data:image/png;base64,", ERR_FORMAT, "image: data is empty"},
        {"data:image/png;base64,iVBORw0KGgo=", ERR_FORMAT, "image: PNG data truncated"},
        {"data:image/png;base64;x=1,AAAA", ERR_FORMAT, "image_url: data URL: ';base64' must"},
        {"https://example.com/cat.png", ERR_UNSUPPORTED, "image_url: URL scheme of"},
        {"file://cat.png", ERR_UNSUPPORTED, "image_url: local file URLs are disabled"},
        {"", ERR_FORMAT, "image_url: url is empty"},
        {"not-base64", ERR_FORMAT, "image_url: data is not valid base64 at offset 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        errmsg_clear(&e);
        int rc = content_image_load(str_from_cstr(bad[i].url), NULL, &info, NULL, &e);
        if (rc != bad[i].code || !strstr(e.msg, bad[i].msg))
            fail_msg("'%s': rc %d '%s', want %d '%s'", bad[i].url, rc, e.msg, bad[i].code,
                     bad[i].msg);
    }

    // A file URL with a configured root.
    struct tree t;
    tree_make(&t);
    snprintf(t.path, sizeof t.path, "%s/img.png", t.root);
    FILE *f = fopen(t.path, "wb");
    fwrite(png.p, 1, png.len, f);
    fclose(f);
    struct media_path mp;
    assert_int_equal(media_path_init(&mp, t.root, &e), ERR_OK);
    lim = (struct content_limits){.media_path = &mp};
    assert_int_equal(content_image_load(str_from_cstr("file://img.png"), &lim, &info, NULL, &e),
                     ERR_OK);
    assert_int_equal(info.format, IMAGE_FORMAT_PNG);
    assert_int_equal(content_image_load(str_from_cstr("file://a.png"), &lim, &info, NULL, &e),
                     ERR_FORMAT); // "A-PNG" is not an image
    assert_int_equal(content_image_load(str_from_cstr("file://escape"), &lim, &info, NULL, &e),
                     ERR_INVALID);
    assert_msg_has(&e, "image_url: 'file://escape': file is outside the media path");
    unlink(t.path);
    media_path_deinit(&mp);
    tree_remove(&t);
    blob_free(&png);
}

static void test_content_audio(void **state)
{
    (void)state;
    struct blob wav = make_wav(16000, 1, 320);
    char *url = data_url_of("audio/wav", &wav);
    const char *raw = url + strlen("data:audio/wav;base64,");
    struct audio_info info;
    struct errmsg e;
    float *pcm = NULL;
    assert_int_equal(
        content_audio_load(str_from_cstr("wav"), str_from_cstr(raw), NULL, &info, &pcm, &e),
        ERR_OK);
    assert_int_equal(info.n_frames, 320);
    mem_free(pcm);
    assert_int_equal(
        content_audio_load(str_from_cstr("wav"), str_from_cstr(url), NULL, &info, NULL, &e),
        ERR_OK);
    FAULT_LOOP(content_audio_load(str_from_cstr("wav"), str_from_cstr(raw), NULL, &info, &pcm, &e),
               mem_free(pcm));
    assert_int_equal(
        content_audio_load(str_from_cstr("ogg"), str_from_cstr(raw), NULL, &info, NULL, &e),
        ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "audio: format 'ogg' not supported (wav, mp3)");
    assert_int_equal(
        content_audio_load(str_from_cstr("mp3"), str_from_cstr(raw), NULL, &info, NULL, &e),
        ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is wav, not mp3");
    assert_int_equal(
        content_audio_load(str_from_cstr("wav"), str_from_cstr("UklGR-"), NULL, &info, NULL, &e),
        ERR_FORMAT);
    assert_msg_has(&e, "input_audio: data is not valid base64 at offset 5 (character '-')");
    assert_int_equal(content_audio_load(str_from_cstr("wav"),
                                        str_from_cstr("data:image/png;base64,AAAA"), NULL, &info,
                                        NULL, &e),
                     ERR_FORMAT);
    assert_msg_has(&e, "is not audio");
    free(url);
    blob_free(&wav);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_url_parse),
        cmocka_unit_test(test_data_url_parse_errors),
        cmocka_unit_test(test_data_url_decode),
        cmocka_unit_test(test_png_decodes_exact_pixels),
        cmocka_unit_test(test_png_truncated_and_flipped),
        cmocka_unit_test(test_png_lying_dimensions),
        cmocka_unit_test(test_png_fault_injection),
        cmocka_unit_test(test_jpeg_decodes),
        cmocka_unit_test(test_jpeg_huge_header_and_faults),
        cmocka_unit_test(test_jpeg_cmyk_and_scan_limit),
        cmocka_unit_test(test_webp_animated_refused),
        cmocka_unit_test(test_webp_decodes),
        cmocka_unit_test(test_webp_huge_header),
        cmocka_unit_test(test_image_format_policy),
        cmocka_unit_test(test_audio_format_parse),
        cmocka_unit_test(test_wav_decodes),
        cmocka_unit_test(test_wav_corrupt),
        cmocka_unit_test(test_audio_limits_and_mismatch),
        cmocka_unit_test(test_mp3_decodes),
        cmocka_unit_test(test_mp3_corrupt),
        cmocka_unit_test(test_media_path_confinement),
        cmocka_unit_test(test_content_image),
        cmocka_unit_test(test_content_audio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
