/* media/content: the image_url and input_audio entry points, end to end, and their messages. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media/content.h"
#include "util/base64.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include "media_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <png.h>

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
    struct blob png = fx_make_png(5, 4, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    char *url = data_url_of("image/png", &png);
    struct image_info info;
    struct errmsg e;
    unsigned char *rgb = NULL;
    assert_int_equal(content_image_load(str_from_cstr(url), NULL, &info, &rgb, &e), ERR_OK);
    assert_int_equal(info.width, 5);
    assert_int_equal(info.height, 4);
    unsigned char *want = fx_pattern(5, 4, 3);
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
    fx_tree_make(&t);
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
                     ERR_NOT_FOUND);
    assert_msg_has(&e, "image_url: 'file://escape': no such file in the media path");
    unlink(t.path);
    media_path_deinit(&mp);
    fx_tree_remove(&t);
    fx_blob_free(&png);
}

static void test_content_audio(void **state)
{
    (void)state;
    struct blob wav = fx_make_wav(16000, 1, 320);
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
    fx_blob_free(&wav);
}

/* The validators share no state: several threads decoding at once get the same answers. */
struct worker {
    const char *const *urls; // image data URLs; the last one is corrupt
    size_t n_urls;
    struct str wav; // base64
    struct str mp3; // base64
    int n_wrong;    // answers that differ from the single-threaded ones
};

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    for (int round = 0; round < 8; round++) {
        for (size_t i = 0; i < w->n_urls; i++) {
            struct image_info info;
            struct errmsg e;
            int rc = content_image_load(str_from_cstr(w->urls[i]), NULL, &info, NULL, &e);
            w->n_wrong += (i + 1 < w->n_urls) ? rc != ERR_OK || info.width != 24 : rc == ERR_OK;
        }
        struct audio_info ai;
        struct errmsg e;
        w->n_wrong +=
            content_audio_load(str_from_cstr("wav"), w->wav, NULL, &ai, NULL, &e) != ERR_OK;
        w->n_wrong +=
            content_audio_load(str_from_cstr("mp3"), w->mp3, NULL, &ai, NULL, &e) != ERR_OK;
    }
    return NULL;
}

static void test_concurrent_validation(void **state)
{
    (void)state;
    struct blob files[4] = {fx_make_png(24, 16, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7),
                            fx_make_jpeg(24, 16, false, true), fx_make_webp(24, 16, false, true),
                            fx_make_png(24, 16, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE)};
    files[3].len -= 12; // corrupt: IEND cut off
    const char *mimes[4] = {"image/png", "image/jpeg", "image/webp", "image/png"};
    char *urls[4];
    for (int i = 0; i < 4; i++)
        urls[i] = data_url_of(mimes[i], &files[i]);
    struct blob wav = fx_make_wav(16000, 1, 1600), mp3 = fx_make_mp3(16000, 1, 3200);
    char *wav_url = data_url_of("audio/wav", &wav), *mp3_url = data_url_of("audio/mpeg", &mp3);
    struct worker w[4];
    struct thread t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){(const char *const *)urls, 4, str_from_cstr(wav_url),
                               str_from_cstr(mp3_url), 0};
        assert_int_equal(thread_start(&t[i], worker_run, &w[i]), ERR_OK);
    }
    for (int i = 0; i < 4; i++) {
        thread_join(&t[i]);
        assert_int_equal(w[i].n_wrong, 0);
    }
    for (int i = 0; i < 4; i++) {
        free(urls[i]);
        fx_blob_free(&files[i]);
    }
    free(wav_url);
    free(mp3_url);
    fx_blob_free(&wav);
    fx_blob_free(&mp3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_image),
        cmocka_unit_test(test_content_audio),
        cmocka_unit_test(test_concurrent_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
