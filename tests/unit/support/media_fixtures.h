/* Test fixtures for the media/ tests: tiny PNG, JPEG, WebP, WAV and MP3 files encoded in memory
 * with the same Debian libraries the decoders use, a temporary directory tree for media-path
 * tests, and the fault-injection loop. Include after <cmocka.h>: the macros use its asserts. */
#ifndef TESTS_UNIT_MEDIA_FIXTURES_H
#define TESTS_UNIT_MEDIA_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/mem.h"

#include <string.h>

struct blob {
    unsigned char *p; // malloc'd, not mem_alloc'd: fixtures stay out of the leak counts
    size_t len;       // bytes
};

/* base/root/{a.png, sub/b.bin, inlink -> a.png, escape -> ../outside/secret, fifo, big,
 * "a b%.txt"}, base/outside/secret, base/root2/c (root's name is its prefix). */
struct tree {
    char base[64];  // the mkdtemp() directory
    char root[128]; // base/root: the media path
    char path[512]; // scratch for building paths
};

void fx_blob_free(struct blob *b);
struct blob fx_blob_copy(const struct blob *b);

/* Test images: w * h * ch bytes (malloc'd). fx_pattern() has sharp edges (for lossless codecs),
 * fx_smooth() gentle ramps (for JPEG). A 4th channel is constant alpha 200. */
unsigned char *fx_pattern(uint32_t w, uint32_t h, int ch);
unsigned char *fx_smooth(uint32_t w, uint32_t h, int ch);

/* Encoders into memory. make_png: color PNG_COLOR_TYPE_RGB, _GRAY or _RGB_ALPHA of fx_pattern(),
 * depth 8 or 16. make_jpeg: quality 95 of fx_smooth(). make_webp: quality 90 or lossless. */
struct blob fx_make_png(uint32_t w, uint32_t h, int color, int depth, int interlace);
struct blob fx_make_jpeg(uint32_t w, uint32_t h, bool is_gray, bool is_progressive);
struct blob fx_make_webp(uint32_t w, uint32_t h, bool is_lossless, bool has_alpha);

/* Sound through libsndfile: fx_tone() on every channel, in the given SF_FORMAT_ format.
 * make_wav is 16-bit PCM, make_mp3 MPEG layer III (LAME, with an Info header). */
float fx_tone(size_t i, int c, int rate);
struct blob fx_make_sound(int format, int rate, int channels, size_t n_frames);
struct blob fx_make_wav(int rate, int channels, size_t n_frames);
struct blob fx_make_mp3(int rate, int channels, size_t n_frames);

/* CRC-32 as PNG chunks use it; big-endian store. */
uint32_t fx_crc32_of(const unsigned char *p, size_t n);
void fx_put_be32(unsigned char *p, uint32_t v);

/* The temporary tree described above; fx_tree_remove() deletes it again. */
void fx_write_file(const char *path, const char *text);
/* The whole file, malloc'd (len set), or NULL when it cannot be read. */
void *fx_read_file(const char *path, size_t *len);
/* A PNG file decoded to RGB8 by media/image.c (asserts it reads and decodes). */
unsigned char *fx_load_png(const char *path, uint32_t *w, uint32_t *h);
void fx_tree_make(struct tree *t);
void fx_tree_remove(struct tree *t);

#define assert_msg_has(e, part)                                                                    \
    do {                                                                                           \
        if (!strstr((e)->msg, (part))) fail_msg("message '%s' lacks '%s'", (e)->msg, (part));      \
    } while (0)

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

#endif
