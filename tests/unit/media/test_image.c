/* media/image: PNG, JPEG and WebP files generated here, then truncated, bit-flipped and patched
 * to lie about their size. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media/image.h"
#include "util/err.h"
#include "util/mem.h"

#include "media_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

static int decode_image(const struct blob *b, const char *mime, struct image_info *info,
                        unsigned char **rgb, struct errmsg *e)
{
    struct image_input in = {.data = b->p, .len = b->len, .mime = str_from_cstr(mime)};
    errmsg_clear(e);
    return image_decode(&in, info, rgb, e);
}

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
    struct blob t = fx_blob_copy(b);
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
    fx_blob_free(&t);
    return n_accepted;
}

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
        struct blob b = fx_make_png(17, 9, kinds[k].color, kinds[k].depth, kinds[k].interlace);
        struct image_info info;
        struct errmsg e;
        unsigned char *rgb = NULL;
        assert_int_equal(decode_image(&b, "image/png", &info, &rgb, &e), ERR_OK);
        assert_int_equal(info.format, IMAGE_FORMAT_PNG);
        assert_int_equal(info.width, 17);
        assert_int_equal(info.height, 9);
        assert_int_equal(info.channels, kinds[k].channels);
        int ch = kinds[k].color == PNG_COLOR_TYPE_GRAY ? 1 : 3;
        unsigned char *want =
            fx_pattern(17, 9, kinds[k].color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : ch);
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
        fx_blob_free(&b);
    }
}

static void test_png_truncated_and_flipped(void **state)
{
    (void)state;
    struct blob b = fx_make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    expect_truncations_fail(&b, "image/png", 1);
    struct image_info info;
    struct errmsg e;
    struct blob t = {b.p, b.len - 20}; // inside IDAT/IEND
    assert_int_equal(decode_image(&t, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: PNG data truncated");
    // Every byte of a PNG is covered by the signature, a length or a CRC: no flip may pass.
    assert_int_equal(flip_each_byte(&b, "image/png", true), 0);
    fx_blob_free(&b);
}

/* Rewrites IHDR's width and height and recomputes its CRC, so only the pixel data betrays it. */
static void png_patch_dims(struct blob *b, uint32_t w, uint32_t h)
{
    assert_memory_equal(b->p + 12, "IHDR", 4);
    fx_put_be32(b->p + 16, w);
    fx_put_be32(b->p + 20, h);
    fx_put_be32(b->p + 29, fx_crc32_of(b->p + 12, 17));
}

static void test_png_lying_dimensions(void **state)
{
    (void)state;
    struct blob b = fx_make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
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
    fx_blob_free(&b);

    b = fx_make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    struct image_limits lim = {.width_max = 19};
    struct image_input in = {.data = b.p, .len = b.len, .limits = &lim};
    assert_int_equal(image_decode(&in, &info, NULL, &e), ERR_LIMIT);
    lim.width_max = 20;
    assert_int_equal(image_decode(&in, &info, NULL, &e), ERR_OK);
    fx_blob_free(&b);
}

static void test_png_fault_injection(void **state)
{
    (void)state;
    struct blob b = fx_make_png(20, 12, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7);
    struct image_info info;
    struct errmsg e;
    unsigned char *rgb = NULL;
    FAULT_LOOP(decode_image(&b, "image/png", &info, &rgb, &e), mem_free(rgb));
    FAULT_LOOP(decode_image(&b, "image/png", &info, NULL, &e), (void)0);
    fx_blob_free(&b);
}

static void test_jpeg_decodes(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        bool is_gray = k == 2, is_progressive = k == 1;
        struct blob b = fx_make_jpeg(33, 17, is_gray, is_progressive);
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
        unsigned char *want = fx_smooth(33, 17, ch);
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
        fx_blob_free(&b);
    }
}

static void test_jpeg_huge_header_and_faults(void **state)
{
    (void)state;
    struct blob b = fx_make_jpeg(33, 17, false, false);
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
    fx_blob_free(&b);

    b = fx_make_jpeg(33, 17, false, true);
    unsigned char *rgb = NULL;
    FAULT_LOOP(decode_image(&b, "image/jpeg", &info, &rgb, &e), mem_free(rgb));
    fx_blob_free(&b);
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
    fx_blob_free(&b);

    b = make_jpeg_special(false);
    assert_int_equal(decode_image(&b, "image/jpeg", &info, NULL, &e), ERR_LIMIT);
    assert_string_equal(e.msg, "image: JPEG has more than 256 scans");
    fx_blob_free(&b);
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
    fx_blob_free(&b);
}

static void test_webp_decodes(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        bool is_lossless = k & 1, has_alpha = k & 2;
        struct blob b = fx_make_webp(21, 11, is_lossless, has_alpha);
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
            unsigned char *want = fx_pattern(21, 11, ch);
            for (size_t i = 0; i < 21 * 11; i++)
                assert_memory_equal(rgb + 3 * i, want + (size_t)ch * i, 3);
            free(want);
        }
        mem_free(rgb);
        assert_int_equal(decode_image(&b, "image/webp", &info, NULL, &e), ERR_OK);
        expect_truncations_fail(&b, "image/webp", 1);
        flip_each_byte(&b, "image/webp", false);
        FAULT_LOOP(decode_image(&b, "image/webp", &info, &rgb, &e), mem_free(rgb));
        fx_blob_free(&b);
    }
}

static void test_webp_huge_header(void **state)
{
    (void)state;
    struct blob b = fx_make_webp(21, 11, true, false);
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
    fx_blob_free(&b);
}

static void test_image_format_policy(void **state)
{
    (void)state;
    struct blob jpg = fx_make_jpeg(8, 8, false, false);
    struct image_info info;
    struct errmsg e;
    // Claimed PNG, really JPEG: the content decides.
    assert_int_equal(decode_image(&jpg, "image/png", &info, NULL, &e), ERR_OK);
    assert_int_equal(info.format, IMAGE_FORMAT_JPEG);
    assert_int_equal(decode_image(&jpg, "IMAGE/GIF", &info, NULL, &e), ERR_OK);
    assert_int_equal(decode_image(&jpg, "", &info, NULL, &e), ERR_OK);
    assert_int_equal(decode_image(&jpg, "text/plain", &info, NULL, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "image: media type 'text/plain' is not an image");
    fx_blob_free(&jpg);

    struct blob gif = {(unsigned char *)strdup("GIF89a\x01\x00\x01\x00\x80\x00\x00"), 13};
    assert_int_equal(decode_image(&gif, "image/gif", &info, NULL, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "image: format GIF is not supported (png, jpeg, webp)");
    fx_blob_free(&gif);
    struct blob junk = {(unsigned char *)strdup("hello world, not an image"), 25};
    assert_int_equal(decode_image(&junk, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: data is not a valid PNG image");
    assert_int_equal(decode_image(&junk, "image/heic", &info, NULL, &e), ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "image: format 'image/heic' is not supported (png, jpeg, webp)");
    assert_int_equal(decode_image(&junk, "", &info, NULL, &e), ERR_FORMAT);
    fx_blob_free(&junk);
    struct blob empty = {NULL, 0};
    assert_int_equal(decode_image(&empty, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: data is empty");
    // Right magic, nothing after it.
    struct blob magic = {(unsigned char *)strdup("\x89PNG\r\n\x1a\n"), 8};
    assert_int_equal(decode_image(&magic, "image/png", &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "image: PNG data truncated");
    fx_blob_free(&magic);

    assert_int_equal(image_format_from_mime(str_from_cstr("image/JPG")), IMAGE_FORMAT_JPEG);
    assert_int_equal(image_format_from_mime(str_from_cstr("image/png ")), IMAGE_FORMAT_UNKNOWN);
    assert_int_equal(image_sniff("RIFF\0\0\0\0WEBP", 12), IMAGE_FORMAT_WEBP);
    assert_int_equal(image_sniff("RIFF\0\0\0\0WAVE", 12), IMAGE_FORMAT_UNKNOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
