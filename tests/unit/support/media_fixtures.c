/* Encoders and temporary trees for the media/ tests (see media_fixtures.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media_fixtures.h"

#include "media/image.h"

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

void fx_blob_free(struct blob *b)
{
    free(b->p);
    b->p = NULL;
    b->len = 0;
}

struct blob fx_blob_copy(const struct blob *b)
{
    struct blob c = {malloc(b->len ? b->len : 1), b->len};
    assert_non_null(c.p);
    memcpy(c.p, b->p, b->len);
    return c;
}

/* A deterministic test pattern: w * h * ch bytes. */
unsigned char *fx_pattern(uint32_t w, uint32_t h, int ch)
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
unsigned char *fx_smooth(uint32_t w, uint32_t h, int ch)
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
struct blob fx_make_png(uint32_t w, uint32_t h, int color, int depth, int interlace)
{
    int ch = color == PNG_COLOR_TYPE_RGB ? 3 : color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : 1;
    unsigned char *px = fx_pattern(w, h, ch);
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

struct blob fx_make_jpeg(uint32_t w, uint32_t h, bool is_gray, bool is_progressive)
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
    unsigned char *px = fx_smooth(w, h, c.input_components);
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

struct blob fx_make_webp(uint32_t w, uint32_t h, bool is_lossless, bool has_alpha)
{
    unsigned char *px = fx_pattern(w, h, has_alpha ? 4 : 3), *out = NULL;
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
float fx_tone(size_t i, int c, int rate)
{
    return 0.5f * sinf(6.2831853f * (440.0f + 220.0f * (float)c) * (float)i / (float)rate);
}

struct blob fx_make_sound(int format, int rate, int channels, size_t n_frames)
{
    struct wfile f = {{0}, 0};
    SF_VIRTUAL_IO vio = {w_len, w_seek, w_read, w_write, w_tell};
    SF_INFO si = {.samplerate = rate, .channels = channels, .format = format};
    SNDFILE *sf = sf_open_virtual(&vio, SFM_WRITE, &si, &f);
    if (!sf) fail_msg("sf_open_virtual write: %s", sf_strerror(NULL));
    float *buf = malloc(n_frames * (size_t)channels * sizeof(float));
    for (size_t i = 0; i < n_frames; i++)
        for (int c = 0; c < channels; c++)
            buf[i * (size_t)channels + (size_t)c] = fx_tone(i, c, rate);
    assert_int_equal(sf_writef_float(sf, buf, (sf_count_t)n_frames), n_frames);
    sf_close(sf);
    free(buf);
    return f.b;
}

struct blob fx_make_wav(int rate, int channels, size_t n_frames)
{
    return fx_make_sound(SF_FORMAT_WAV | SF_FORMAT_PCM_16, rate, channels, n_frames);
}

struct blob fx_make_mp3(int rate, int channels, size_t n_frames)
{
    return fx_make_sound(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, rate, channels, n_frames);
}

uint32_t fx_crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

void fx_put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

void fx_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* base/root/{a.png, sub/b.bin, inlink -> a.png, escape -> ../outside/secret, fifo, big}
 * base/outside/secret, base/root2/c (shares root's name as a prefix). */
void fx_tree_make(struct tree *t)
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
        fx_write_file(t->path, files[i][1]);
    }
    snprintf(t->path, sizeof t->path, "%s/root/inlink", t->base);
    assert_int_equal(symlink("a.png", t->path), 0);
    snprintf(t->path, sizeof t->path, "%s/root/escape", t->base);
    assert_int_equal(symlink("../outside/secret", t->path), 0);
    snprintf(t->path, sizeof t->path, "%s/root/fifo", t->base);
    assert_int_equal(mkfifo(t->path, 0600), 0);
}

void fx_tree_remove(struct tree *t)
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

void *fx_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

unsigned char *fx_load_png(const char *path, uint32_t *w, uint32_t *h)
{
    size_t len;
    void *data = fx_read_file(path, &len);
    assert_non_null(data);
    struct image_input in = {.data = data, .len = len};
    struct image_info info;
    unsigned char *rgb = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(image_decode(&in, &info, &rgb, &e), ERR_OK);
    free(data);
    *w = info.width;
    *h = info.height;
    return rgb;
}
