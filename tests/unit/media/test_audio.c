/* media/audio: WAV and MP3 (through libsndfile's LAME encoder) generated here, then cut and
 * corrupted; limits and the declared-format policy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media/audio.h"
#include "util/err.h"
#include "util/mem.h"

#include "media_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sndfile.h>

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
    struct blob b = fx_make_wav(16000, 1, 1600);
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
        assert_true(fabsf(pcm[i] - fx_tone(i, 0, 16000)) < 1e-3f);
    mem_free(pcm);
    fx_blob_free(&b);

    b = fx_make_sound(SF_FORMAT_WAV | SF_FORMAT_FLOAT, 48000, 2, 4800);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, &pcm, &e), ERR_OK);
    assert_int_equal(info.n_channels, 2);
    assert_int_equal(info.n_frames, 4800);
    for (size_t i = 0; i < 4800; i += 97) // mono downmix
        assert_true(fabsf(pcm[i] - (fx_tone(i, 0, 48000) + fx_tone(i, 1, 48000)) / 2) < 1e-5f);
    mem_free(pcm);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_OK);
    FAULT_LOOP(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, &pcm, &e), mem_free(pcm));
    fx_blob_free(&b);
}

static void test_wav_corrupt(void **state)
{
    (void)state;
    struct blob b = fx_make_wav(16000, 1, 800);
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
    struct blob c = fx_blob_copy(&b);
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
    fx_blob_free(&c);
    struct blob empty = {NULL, 0};
    assert_int_equal(decode_audio(&empty, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is empty");
    fx_blob_free(&b);
}

static void test_audio_limits_and_mismatch(void **state)
{
    (void)state;
    struct audio_info info;
    struct errmsg e;
    struct blob b = fx_make_wav(4000, 1, 400);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_LIMIT);
    assert_string_equal(e.msg, "audio: WAV sample rate 4000 Hz outside 8000..192000 Hz");
    fx_blob_free(&b);
    b = fx_make_wav(8000, 9, 80);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_LIMIT);
    assert_msg_has(&e, "9 channels");
    fx_blob_free(&b);
    b = fx_make_wav(16000, 1, 1600); // 100 ms
    struct audio_limits lim = {.duration_ms_max = 99};
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, &lim, &info, NULL, &e), ERR_LIMIT);
    assert_msg_has(&e, "longer than");
    lim.duration_ms_max = 100;
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_WAV, &lim, &info, NULL, &e), ERR_OK);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_MP3, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is wav, not mp3");
    fx_blob_free(&b);
    struct blob junk = {(unsigned char *)strdup("OggS\0\2\0\0\0\0\0\0\0\0"), 14};
    assert_int_equal(decode_audio(&junk, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg, "audio: data is not wav audio");
    fx_blob_free(&junk);
    // A RIFF WAVE with no data chunk at all.
    struct blob nodata = {malloc(12), 12};
    memcpy(nodata.p, "RIFF\4\0\0\0WAVE", 12);
    assert_int_equal(decode_audio(&nodata, AUDIO_FORMAT_WAV, NULL, &info, NULL, &e), ERR_FORMAT);
    fx_blob_free(&nodata);
}

static void test_mp3_decodes(void **state)
{
    (void)state;
    struct blob b = fx_make_mp3(16000, 1, 8000);
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
    fx_blob_free(&b);

    b = fx_make_mp3(44100, 2, 4410);
    assert_int_equal(decode_audio(&b, AUDIO_FORMAT_MP3, NULL, &info, NULL, &e), ERR_OK);
    assert_int_equal(info.sample_rate_hz, 44100);
    assert_int_equal(info.n_channels, 2);
    fx_blob_free(&b);
}

static void test_mp3_corrupt(void **state)
{
    (void)state;
    struct blob b = fx_make_mp3(16000, 1, 8000);
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
    struct blob c = fx_blob_copy(&b);
    for (size_t i = 0; i < c.len; i += 3) {
        c.p[i] ^= (unsigned char)(1u << (i % 8));
        float *pcm = NULL;
        int rc = decode_audio(&c, AUDIO_FORMAT_MP3, NULL, &info, (i & 1) ? &pcm : NULL, &e);
        assert_true(rc == ERR_OK || rc == ERR_FORMAT || rc == ERR_LIMIT);
        mem_free(pcm);
        c.p[i] ^= (unsigned char)(1u << (i % 8));
    }
    fx_blob_free(&c);
    fx_blob_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audio_format_parse), cmocka_unit_test(test_wav_decodes),
        cmocka_unit_test(test_wav_corrupt),        cmocka_unit_test(test_audio_limits_and_mismatch),
        cmocka_unit_test(test_mp3_decodes),        cmocka_unit_test(test_mp3_corrupt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
