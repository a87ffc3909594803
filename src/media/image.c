/* Image sniffing and full decoding with libpng, libjpeg-turbo and libwebp. The libpng and
 * libjpeg paths report errors by longjmp: each setjmp sits in a small function whose own
 * locals never change after it, and all state that must survive the jump lives in a job
 * struct owned by the caller (C11 7.13.2.1: such locals would be indeterminate). */
#include "media/image.h"

#include "util/checked.h"
#include "util/log.h"
#include "util/mem.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h> // JWRN_ codes
#include <png.h>
#include <webp/decode.h>

#define PNG_CHUNK_BYTES_MAX (8u << 20) // largest ancillary chunk (iCCP, zTXt, ...) we buffer
#define WEBP_THUMB_MAX      16         // side of the throw-away image a validation decodes to

/* ---- format sniffing and limits ---- */

enum image_format image_sniff(const void *data, size_t len)
{
    const unsigned char *p = data;
    if (len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0) return IMAGE_FORMAT_PNG;
    if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) return IMAGE_FORMAT_JPEG;
    if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return IMAGE_FORMAT_WEBP;
    return IMAGE_FORMAT_UNKNOWN;
}

/* Names a few formats we do not decode, so the message says what the data really is. */
static const char *sniff_other(const unsigned char *p, size_t len)
{
    if (len >= 6 && (memcmp(p, "GIF87a", 6) == 0 || memcmp(p, "GIF89a", 6) == 0)) return "GIF";
    if (len >= 2 && p[0] == 'B' && p[1] == 'M') return "BMP";
    if (len >= 4 && (memcmp(p, "II*\0", 4) == 0 || memcmp(p, "MM\0*", 4) == 0)) return "TIFF";
    if (len >= 12 && memcmp(p + 4, "ftyp", 4) == 0) return "HEIF/AVIF";
    return NULL;
}

static bool mime_ieq(struct str s, const char *lit)
{
    size_t n = strlen(lit);
    if (s.len != n) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s.ptr[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != lit[i]) return false;
    }
    return true;
}

enum image_format image_format_from_mime(struct str mime)
{
    if (mime_ieq(mime, "image/png")) return IMAGE_FORMAT_PNG;
    if (mime_ieq(mime, "image/jpeg") || mime_ieq(mime, "image/jpg")) return IMAGE_FORMAT_JPEG;
    if (mime_ieq(mime, "image/webp")) return IMAGE_FORMAT_WEBP;
    return IMAGE_FORMAT_UNKNOWN;
}

const char *image_format_name(enum image_format f)
{
    switch (f) {
    case IMAGE_FORMAT_PNG:
        return "PNG";
    case IMAGE_FORMAT_JPEG:
        return "JPEG";
    case IMAGE_FORMAT_WEBP:
        return "WebP";
    default:
        return "unknown";
    }
}

struct limits {
    uint32_t width_max, height_max;
    uint64_t pixels_max;
};

static struct limits limits_of(const struct image_limits *l)
{
    struct limits r = {IMAGE_WIDTH_MAX, IMAGE_HEIGHT_MAX, IMAGE_PIXELS_MAX};
    if (l && l->width_max) r.width_max = l->width_max;
    if (l && l->height_max) r.height_max = l->height_max;
    if (l && l->pixels_max) r.pixels_max = l->pixels_max;
    return r;
}

static int check_dims(const char *fmt, uint64_t w, uint64_t h, const struct limits *l,
                      struct errmsg *e)
{
    if (w == 0 || h == 0)
        return errmsg_set(e, ERR_FORMAT, "image: %s header has zero size (%llux%llu)", fmt,
                          (unsigned long long)w, (unsigned long long)h);
    // w and h come from 32-bit header fields, so the product fits in 64 bits.
    if (w > l->width_max || h > l->height_max || w * h > l->pixels_max)
        return errmsg_set(e, ERR_LIMIT, "image: %llux%llu exceeds the limit (%ux%u, %llu pixels)",
                          (unsigned long long)w, (unsigned long long)h, l->width_max, l->height_max,
                          (unsigned long long)l->pixels_max);
    return ERR_OK;
}

/* Allocates the caller's RGB8 output, or nothing when the caller does not want pixels. */
static int rgb_alloc(uint32_t w, uint32_t h, unsigned char **out, struct errmsg *e)
{
    size_t n;
    if (!size_mul(w, h, &n) || !size_mul(n, 3, &n))
        return errmsg_set(e, ERR_LIMIT, "image: %ux%u is too large", w, h);
    *out = mem_alloc(n);
    if (!*out) return errmsg_set(e, ERR_NOMEM, "image: out of memory for %ux%u pixels", w, h);
    return ERR_OK;
}

/* ---- PNG ---- */

struct png_job {
    const unsigned char *src; // the file
    size_t src_len, src_pos;  // bytes; read position
    png_structp png;
    png_infop info;
    struct limits lim;
    unsigned char *row; // one output row when no pixels are kept (mem_alloc)
    unsigned char *rgb; // width * height * 3 when pixels are kept (mem_alloc)
    bool want_rgb;      // keep the pixels in rgb
    bool is_truncated;  // the read callback ran past the end
    bool is_nomem;      // an allocation inside libpng failed
    uint32_t width, height, channels;
    char lib_msg[128]; // libpng's error text
    struct errmsg *e;
};

static void png_read_cb(png_structp png, png_bytep out, size_t n)
{
    struct png_job *j = png_get_io_ptr(png);
    if (j->src_len - j->src_pos < n) {
        j->is_truncated = true;
        png_error(png, "truncated");
    }
    memcpy(out, j->src + j->src_pos, n);
    j->src_pos += n;
}

static void png_error_cb(png_structp png, png_const_charp msg)
{
    struct png_job *j = png_get_error_ptr(png);
    snprintf(j->lib_msg, sizeof j->lib_msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warning_cb(png_structp png, png_const_charp msg)
{
    (void)png;
    log_debug("image: libpng warning: %s", msg);
}

static png_voidp png_malloc_cb(png_structp png, png_alloc_size_t n)
{
    void *p = mem_alloc(n);
    if (!p) {
        struct png_job *j = png_get_mem_ptr(png);
        j->is_nomem = true;
    }
    return p;
}

static void png_free_cb(png_structp png, png_voidp p)
{
    (void)png;
    mem_free(p);
}

/* Header, limits and transforms to RGB8. Returns the number of interlace passes, or < 0. */
static int png_setup(struct png_job *j)
{
    png_set_read_fn(j->png, j, png_read_cb);
    // Our own limits are checked below with a clearer message; libpng's stay at the PNG maximum.
    png_set_user_limits(j->png, 0x7fffffff, 0x7fffffff);
    png_set_chunk_malloc_max(j->png, PNG_CHUNK_BYTES_MAX);
    png_set_chunk_cache_max(j->png, 256);
    png_read_info(j->png, j->info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(j->png, j->info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    int rc = check_dims("PNG", w, h, &j->lim, j->e);
    if (rc != ERR_OK) return rc;
    j->width = w;
    j->height = h;
    j->channels = (color & PNG_COLOR_MASK_COLOR) ? 3 : 1;
    if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(j->png, j->info, PNG_INFO_tRNS))
        j->channels++;
    png_set_expand(j->png);
    png_set_strip_16(j->png);
    png_set_strip_alpha(j->png);
    png_set_gray_to_rgb(j->png);
    int n_passes = png_set_interlace_handling(j->png);
    png_read_update_info(j->png, j->info);
    if (png_get_rowbytes(j->png, j->info) != (size_t)w * 3)
        return errmsg_set(j->e, ERR_FORMAT, "image: unexpected PNG row layout");
    return n_passes;
}

/* Everything that may longjmp. Locals here are set before setjmp or not used after it. */
static int png_run(struct png_job *j)
{
    if (setjmp(png_jmpbuf(j->png))) return ERR_FORMAT; // the job struct says why
    int n_passes = png_setup(j);
    if (n_passes < 0) return n_passes;
    size_t stride = (size_t)j->width * 3;
    int rc = j->want_rgb ? rgb_alloc(j->width, j->height, &j->rgb, j->e) : ERR_OK;
    if (rc != ERR_OK) return rc;
    if (!j->want_rgb && !(j->row = mem_alloc(stride)))
        return errmsg_set(j->e, ERR_NOMEM, "image: out of memory decoding PNG");
    for (int pass = 0; pass < n_passes; pass++) {
        for (uint32_t y = 0; y < j->height; y++)
            png_read_row(j->png, j->rgb ? j->rgb + y * stride : j->row, NULL);
    }
    png_read_end(j->png, NULL); // through IEND: catches truncation and trailing CRC errors
    return ERR_OK;
}

static int png_report(struct png_job *j, int rc)
{
    if (j->is_nomem) return errmsg_set(j->e, ERR_NOMEM, "image: out of memory decoding PNG");
    if (rc != ERR_FORMAT || j->lib_msg[0] == '\0') return rc; // already described (limits) or fine
    if (j->is_truncated) return errmsg_set(j->e, ERR_FORMAT, "image: PNG data truncated");
    return errmsg_set(j->e, ERR_FORMAT, "image: invalid PNG data (%s)", j->lib_msg);
}

static int png_decode(const struct image_input *in, struct image_info *info, unsigned char **rgb,
                      struct errmsg *e)
{
    struct png_job j = {.src = in->data,
                        .src_len = in->len,
                        .lim = limits_of(in->limits),
                        .want_rgb = rgb != NULL,
                        .e = e};
    j.png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &j, png_error_cb, png_warning_cb, &j,
                                     png_malloc_cb, png_free_cb);
    if (!j.png) return errmsg_set(e, ERR_NOMEM, "image: out of memory decoding PNG");
    j.info = png_create_info_struct(j.png);
    j.is_nomem = j.info == NULL;
    int rc = png_report(&j, j.info ? png_run(&j) : ERR_NOMEM);
    if (rc == ERR_OK) {
        *info = (struct image_info){IMAGE_FORMAT_PNG, j.width, j.height, j.channels};
        if (rgb) {
            *rgb = j.rgb;
            j.rgb = NULL;
        }
    }
    png_destroy_read_struct(&j.png, j.info ? &j.info : NULL, NULL);
    mem_free(j.row);
    mem_free(j.rgb);
    return rc;
}

/* ---- JPEG ---- */

struct jpeg_job {
    struct jpeg_error_mgr err; // first: libjpeg hands our callbacks a pointer to it
    jmp_buf jmp;               // where error_exit and fatal warnings jump
    struct jpeg_decompress_struct cinfo;
    struct jpeg_progress_mgr progress;
    struct limits lim;
    const unsigned char *src;
    size_t src_len;
    bool want_rgb;      // keep the pixels in rgb
    bool is_scan_limit; // the progress monitor stopped a file with too many scans
    unsigned char *row; // one output row (mem_alloc)
    unsigned char *rgb; // width * height * 3 when kept (mem_alloc)
    uint32_t width, height, channels;
    char lib_msg[JMSG_LENGTH_MAX]; // libjpeg's text for the failure
    struct errmsg *e;
};

static void jpeg_error_exit_cb(j_common_ptr c)
{
    struct jpeg_job *j = (struct jpeg_job *)(void *)c->err;
    c->err->format_message(c, j->lib_msg);
    longjmp(j->jmp, 1);
}

/* Warnings that mean the pixels are not all there (libjpeg would invent the rest) are fatal;
 * the others (odd JFIF version, extraneous bytes before a marker, ...) leave a complete image. */
static bool is_fatal_warning(int code)
{
    switch (code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_NOT_SEQUENTIAL:
        return true;
    default:
        return false;
    }
}

static void jpeg_emit_cb(j_common_ptr c, int level)
{
    if (level >= 0) return; // trace messages
    if (is_fatal_warning(c->err->msg_code)) jpeg_error_exit_cb(c);
    c->err->num_warnings++;
}

static void jpeg_output_cb(j_common_ptr c)
{
    (void)c; // library code does not print
}

static void jpeg_progress_cb(j_common_ptr c)
{
    struct jpeg_job *j = (struct jpeg_job *)(void *)c->err;
    if (j->cinfo.input_scan_number > IMAGE_JPEG_SCANS_MAX) {
        j->is_scan_limit = true;
        longjmp(j->jmp, 1);
    }
}

/* Header and limits; picks an output color space libjpeg can produce from the source. */
static int jpeg_setup(struct jpeg_job *j)
{
    jpeg_mem_src(&j->cinfo, j->src, (unsigned long)j->src_len);
    if (jpeg_read_header(&j->cinfo, TRUE) != JPEG_HEADER_OK)
        return errmsg_set(j->e, ERR_FORMAT, "image: JPEG has no image (tables only)");
    int rc = check_dims("JPEG", j->cinfo.image_width, j->cinfo.image_height, &j->lim, j->e);
    if (rc != ERR_OK) return rc;
    j->width = j->cinfo.image_width;
    j->height = j->cinfo.image_height;
    j->channels = (uint32_t)j->cinfo.num_components;
    bool is_cmyk = j->cinfo.jpeg_color_space == JCS_CMYK || j->cinfo.jpeg_color_space == JCS_YCCK;
    j->cinfo.out_color_space = is_cmyk ? JCS_CMYK : JCS_RGB;
    j->progress.progress_monitor = jpeg_progress_cb;
    j->cinfo.progress = &j->progress;
    return ERR_OK;
}

/* Inverted CMYK (as Adobe writes it) to RGB, in place: 4 bytes in, 3 out per pixel. */
static void cmyk_to_rgb(unsigned char *row, uint32_t width)
{
    for (uint32_t x = 0; x < width; x++) {
        const unsigned char *s = row + 4 * (size_t)x;
        unsigned k = s[3];
        unsigned char r = (unsigned char)(s[0] * k / 255), g = (unsigned char)(s[1] * k / 255);
        unsigned char b = (unsigned char)(s[2] * k / 255);
        row[3 * (size_t)x] = r;
        row[3 * (size_t)x + 1] = g;
        row[3 * (size_t)x + 2] = b;
    }
}

static int jpeg_run(struct jpeg_job *j)
{
    if (setjmp(j->jmp)) return j->is_scan_limit ? ERR_LIMIT : ERR_FORMAT;
    jpeg_create_decompress(&j->cinfo);
    int rc = jpeg_setup(j);
    if (rc != ERR_OK) return rc;
    jpeg_start_decompress(&j->cinfo);
    size_t stride = (size_t)j->cinfo.output_width * (size_t)j->cinfo.output_components;
    if (j->cinfo.output_width != j->width || j->cinfo.output_height != j->height)
        return errmsg_set(j->e, ERR_FORMAT, "image: unexpected JPEG output size");
    if (j->want_rgb && (rc = rgb_alloc(j->width, j->height, &j->rgb, j->e)) != ERR_OK) return rc;
    if (!(j->row = mem_alloc(stride)))
        return errmsg_set(j->e, ERR_NOMEM, "image: out of memory decoding JPEG");
    while (j->cinfo.output_scanline < j->cinfo.output_height) {
        JSAMPROW rows[1] = {j->row};
        uint32_t y = j->cinfo.output_scanline;
        if (jpeg_read_scanlines(&j->cinfo, rows, 1) != 1)
            return errmsg_set(j->e, ERR_FORMAT, "image: JPEG data truncated");
        if (j->cinfo.out_color_space == JCS_CMYK) cmyk_to_rgb(j->row, j->width);
        if (j->rgb) memcpy(j->rgb + (size_t)y * j->width * 3, j->row, (size_t)j->width * 3);
    }
    jpeg_finish_decompress(&j->cinfo); // reads on to EOI
    return ERR_OK;
}

static int jpeg_decode(const struct image_input *in, struct image_info *info, unsigned char **rgb,
                       struct errmsg *e)
{
    struct jpeg_job *j = mem_calloc(1, sizeof *j); // large (jmp_buf, cinfo): keep off the stack
    if (!j) return errmsg_set(e, ERR_NOMEM, "image: out of memory decoding JPEG");
    *j = (struct jpeg_job){.lim = limits_of(in->limits),
                           .src = in->data,
                           .src_len = in->len,
                           .want_rgb = rgb != NULL,
                           .e = e};
    j->cinfo.err = jpeg_std_error(&j->err);
    j->err.error_exit = jpeg_error_exit_cb;
    j->err.emit_message = jpeg_emit_cb;
    j->err.output_message = jpeg_output_cb;
    int rc = jpeg_run(j);
    if (rc == ERR_LIMIT && j->is_scan_limit)
        rc = errmsg_set(e, ERR_LIMIT, "image: JPEG has more than %d scans", IMAGE_JPEG_SCANS_MAX);
    else if (rc == ERR_FORMAT && j->lib_msg[0] && j->err.msg_code == JWRN_JPEG_EOF)
        rc = errmsg_set(e, ERR_FORMAT, "image: JPEG data truncated");
    else if (rc == ERR_FORMAT && j->lib_msg[0])
        rc = errmsg_set(e, ERR_FORMAT, "image: invalid JPEG data (%s)", j->lib_msg);
    if (rc == ERR_OK) {
        *info = (struct image_info){IMAGE_FORMAT_JPEG, j->width, j->height, j->channels};
        if (rgb) {
            *rgb = j->rgb;
            j->rgb = NULL;
        }
    }
    // Safe whatever happened: cinfo.mem stays NULL until creation got that far (j is zeroed).
    jpeg_destroy_decompress(&j->cinfo);
    mem_free(j->row);
    mem_free(j->rgb);
    mem_free(j);
    return rc;
}

/* ---- WebP ---- */

static const char *webp_status_str(VP8StatusCode st)
{
    switch (st) {
    case VP8_STATUS_OUT_OF_MEMORY:
        return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
        return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
        return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
        return "suspended";
    case VP8_STATUS_USER_ABORT:
        return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
        return "not enough data";
    default:
        return "unknown status";
    }
}

static int webp_status(VP8StatusCode st, struct errmsg *e)
{
    if (st == VP8_STATUS_NOT_ENOUGH_DATA)
        return errmsg_set(e, ERR_FORMAT, "image: WebP data truncated");
    if (st == VP8_STATUS_OUT_OF_MEMORY)
        return errmsg_set(e, ERR_NOMEM, "image: out of memory decoding WebP");
    return errmsg_set(e, ERR_FORMAT, "image: invalid WebP data (%s)", webp_status_str(st));
}

/* Drops the alpha byte of each pixel, in place. */
static void rgba_to_rgb(unsigned char *p, size_t n_pixels)
{
    for (size_t i = 0; i < n_pixels; i++)
        memmove(p + 3 * i, p + 4 * i, 3);
}

/* Decoding into RGBA when the image has alpha makes libwebp decode the ALPH chunk too, so a
 * corrupt alpha plane is caught. Without kept pixels, the full bitstream is still decoded but
 * scaled into a thumbnail, so memory stays small. */
static int webp_decode(const struct image_input *in, struct image_info *info, unsigned char **rgb,
                       struct errmsg *e)
{
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg))
        return errmsg_set(e, ERR_UNSUPPORTED, "image: libwebp version mismatch");
    VP8StatusCode st = WebPGetFeatures(in->data, in->len, &cfg.input);
    if (st != VP8_STATUS_OK) return webp_status(st, e);
    if (cfg.input.has_animation)
        return errmsg_set(e, ERR_UNSUPPORTED, "image: animated WebP is not supported");
    struct limits lim = limits_of(in->limits);
    int rc = check_dims("WebP", (uint32_t)cfg.input.width, (uint32_t)cfg.input.height, &lim, e);
    if (rc != ERR_OK) return rc;
    uint32_t w = (uint32_t)cfg.input.width, h = (uint32_t)cfg.input.height;
    int bpp = cfg.input.has_alpha ? 4 : 3;
    cfg.output.colorspace = cfg.input.has_alpha ? MODE_RGBA : MODE_RGB;
    unsigned char *px = NULL;
    size_t px_len = (size_t)w * h * (size_t)bpp; // <= pixels_max * 4, checked above
    if (rgb) {
        px = mem_alloc(px_len);
        if (!px) return errmsg_set(e, ERR_NOMEM, "image: out of memory for %ux%u pixels", w, h);
        cfg.output.is_external_memory = 1;
        cfg.output.u.RGBA.rgba = px;
        cfg.output.u.RGBA.stride = (int)(w * (uint32_t)bpp);
        cfg.output.u.RGBA.size = px_len;
    } else {
        cfg.options.use_scaling = 1;
        cfg.options.scaled_width = (int)(w < WEBP_THUMB_MAX ? w : WEBP_THUMB_MAX);
        cfg.options.scaled_height = (int)(h < WEBP_THUMB_MAX ? h : WEBP_THUMB_MAX);
    }
    st = WebPDecode(in->data, in->len, &cfg);
    WebPFreeDecBuffer(&cfg.output); // no-op for external memory
    if (st != VP8_STATUS_OK) {
        mem_free(px);
        return webp_status(st, e);
    }
    if (px && bpp == 4) rgba_to_rgb(px, (size_t)w * h);
    *info = (struct image_info){IMAGE_FORMAT_WEBP, w, h, (uint32_t)bpp};
    if (rgb) *rgb = px;
    return ERR_OK;
}

/* ---- policy and dispatch ---- */

static bool mime_is_image(struct str mime)
{
    return mime.len > 6 && mime_ieq((struct str){mime.ptr, 6}, "image/");
}

/* The content is not one of ours: say what it is, or what was claimed. */
static int unknown_content(const struct image_input *in, struct errmsg *e)
{
    const char *other = sniff_other(in->data, in->len);
    if (other)
        return errmsg_set(e, ERR_UNSUPPORTED, "image: format %s is not supported (png, jpeg, webp)",
                          other);
    enum image_format claimed = image_format_from_mime(in->mime);
    if (claimed != IMAGE_FORMAT_UNKNOWN)
        return errmsg_set(e, ERR_FORMAT, "image: data is not a valid %s image",
                          image_format_name(claimed));
    if (in->mime.len > 0)
        return errmsg_set(e, ERR_UNSUPPORTED,
                          "image: format '%.*s' is not supported (png, jpeg, webp)",
                          (int)(in->mime.len > 64 ? 64 : in->mime.len), in->mime.ptr);
    return errmsg_set(e, ERR_FORMAT, "image: data is not a PNG, JPEG or WebP image");
}

int image_decode(const struct image_input *in, struct image_info *info, unsigned char **rgb,
                 struct errmsg *e)
{
    if (in->mime.len > 0 && !mime_is_image(in->mime))
        return errmsg_set(e, ERR_UNSUPPORTED, "image: media type '%.*s' is not an image",
                          (int)(in->mime.len > 64 ? 64 : in->mime.len), in->mime.ptr);
    if (in->len == 0) return errmsg_set(e, ERR_FORMAT, "image: data is empty");
    enum image_format f = image_sniff(in->data, in->len);
    enum image_format claimed = image_format_from_mime(in->mime);
    if (f != IMAGE_FORMAT_UNKNOWN && claimed != IMAGE_FORMAT_UNKNOWN && f != claimed)
        log_debug("image: claimed %s but content is %s; using the content",
                  image_format_name(claimed), image_format_name(f));
    switch (f) {
    case IMAGE_FORMAT_PNG:
        return png_decode(in, info, rgb, e);
    case IMAGE_FORMAT_JPEG:
        return jpeg_decode(in, info, rgb, e);
    case IMAGE_FORMAT_WEBP:
        return webp_decode(in, info, rgb, e);
    default:
        return unknown_content(in, e);
    }
}
