/* engine/mtmd/clip_audio and audio_mel: a synthetic Ultravox projector (clip_synth_audio, as
 * mmproj-synth writes it for the goldens) against the reference implementation's audio
 * embeddings of the test WAVs (tests/data/mtmd/, from scripts/gen-mtmd-goldens.sh); the
 * spectrogram's properties; refused files and allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media_fixtures.h"

#include "engine/gguf/gguf_write.h"
#include "engine/mtmd/audio_mel.h"
#include "engine/mtmd/clip_audio.h"
#include "engine/mtmd/clip_synth_audio.h"
#include "engine/threadpool.h"
#include "media/audio.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA "tests/data/mtmd/"

static float *load_wav(const char *name, size_t *n)
{
    char path[128];
    snprintf(path, sizeof path, DATA "audio-%s.wav", name);
    size_t len;
    void *data = fx_read_file(path, &len);
    assert_non_null(data);
    struct audio_input in = {.data = data, .len = len, .format = AUDIO_FORMAT_WAV};
    struct audio_info info;
    float *pcm = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(audio_decode(&in, &info, &pcm, &e), ERR_OK);
    assert_int_equal(info.sample_rate_hz, 16000);
    free(data);
    *n = (size_t)info.n_frames;
    return pcm;
}

/* The projector of the goldens (keep in step with scripts/gen-mtmd-goldens.sh). */
static void *synth_projector(size_t *len)
{
    struct clip_synth_audio_params p = clip_synth_audio_params_default();
    struct gguf_writer *w = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_synth_audio_build(&p, &w, &e), ERR_OK);
    void *data = NULL;
    assert_int_equal(gguf_writer_to_memory(w, &data, len), ERR_OK);
    gguf_writer_free(w);
    return data;
}

/* Our embeddings of one WAV and the reference's (DATA audio-<name>.emb); returns ours. */
static float *compare_audio(struct clip_audio *a, struct threadpool *tp, const char *name)
{
    const struct clip_audio_info *in = clip_audio_get_info(a);
    size_t n_samples;
    float *pcm = load_wav(name, &n_samples);
    const int64_t n_tok = clip_audio_n_tokens(a, n_samples);
    const size_t n_out = (size_t)n_tok * (size_t)in->n_out_embd;
    float *out = malloc(sizeof(float) * n_out);
    assert_int_equal(clip_audio_encode(a, tp, pcm, n_samples, out), ERR_OK);
    char path[128];
    snprintf(path, sizeof path, DATA "audio-%s.emb", name);
    size_t len;
    int32_t *ref = fx_read_file(path, &len);
    assert_non_null(ref);
    assert_int_equal(ref[0], n_tok);
    assert_int_equal(ref[1], in->n_out_embd);
    assert_int_equal(len, 8 + n_out * sizeof(float));
    const float *r = (const float *)(ref + 2);
    double max_diff = 0.0, max_ref = 0.0, min_cos = 1.0;
    for (int64_t t = 0; t < n_tok; t++) {
        double dot = 0.0, na = 0.0, nb = 0.0;
        for (int i = 0; i < in->n_out_embd; i++) {
            const size_t k = (size_t)t * in->n_out_embd + i;
            const double d = fabs((double)out[k] - r[k]);
            if (d > max_diff) max_diff = d;
            if (fabs(r[k]) > max_ref) max_ref = fabs(r[k]);
            dot += (double)out[k] * r[k];
            na += (double)out[k] * out[k];
            nb += (double)r[k] * r[k];
        }
        const double cs = dot / sqrt(na * nb);
        if (cs < min_cos) min_cos = cs;
    }
    printf("audio-%s: %lld tokens, max |ours - reference| %.3g (largest value %.3g), lowest "
           "cosine %.7f\n",
           name, (long long)n_tok, max_diff, max_ref, min_cos);
    if (getenv("CLIP_AUDIO_DUMP")) { // for diagnosis: our embeddings in the golden's format
        snprintf(path, sizeof path, "%s/audio-%s.emb", getenv("CLIP_AUDIO_DUMP"), name);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fwrite(ref, 4, 2, f);
        fwrite(out, sizeof(float), n_out, f);
        fclose(f);
    }
    assert_true(min_cos > 0.999999);
    assert_true(max_diff < 0.001 * max_ref);
    free(ref);
    mem_free(pcm);
    return out;
}

static void test_embeddings_match_reference(void **state)
{
    (void)state;
    size_t len;
    void *data = synth_projector(&len);
    struct clip_audio *a = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_audio_load_memory(data, len, &a, &e), ERR_OK);
    assert_int_equal(clip_audio_get_info(a)->n_window_tokens, 375); // 1500 frames, 4 a token
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    float *ea = compare_audio(a, tp, "a");
    float *eb = compare_audio(a, tp, "b");
    float *es = compare_audio(a, tp, "silent");
    // different audio, different embeddings
    assert_true(memcmp(ea, eb, sizeof(float) * 375 * 128) != 0);
    assert_true(memcmp(ea, es, sizeof(float) * 375 * 128) != 0);
    free(ea);
    free(eb);
    free(es);
    threadpool_free(tp);
    clip_audio_free(a);
    mem_free(data);
}

/* Our spectrogram of one WAV against the reference preprocessor's (DATA audio-<name>.mel: the
 * first frames of every band of the first window); the frames past those are the appended
 * silence, one constant, which must equal the last kept column of the silent clip. */
static void compare_mel(const char *name, int n_mel)
{
    size_t n_samples, len;
    float *pcm = load_wav(name, &n_samples);
    float *mel = malloc(sizeof(float) * (size_t)n_mel * AUDIO_MEL_WINDOW *
                        (size_t)audio_mel_n_windows(n_samples));
    assert_int_equal(audio_mel_compute(pcm, n_samples, n_mel, mel), ERR_OK);
    char path[128];
    snprintf(path, sizeof path, DATA "audio-%s.mel", name);
    int32_t *ref = fx_read_file(path, &len);
    assert_non_null(ref);
    assert_int_equal(ref[0], audio_mel_n_windows(n_samples));
    assert_int_equal(ref[1], n_mel);
    const int keep = ref[2];
    assert_int_equal(len, 12 + (size_t)n_mel * (size_t)keep * sizeof(float));
    const float *r = (const float *)(ref + 3);
    double max_diff = 0.0;
    for (int m = 0; m < n_mel; m++)
        for (int i = 0; i < keep; i++) {
            const double d =
                fabs((double)mel[(size_t)m * AUDIO_MEL_WINDOW + i] - r[(size_t)m * keep + i]);
            if (d > max_diff) max_diff = d;
        }
    printf("audio-%s mel: %d bands x %d frames, max |ours - reference| %.3g\n", name, n_mel, keep,
           max_diff);
    assert_true(max_diff < 1e-4); // values span [-0.5, 1.5]
    // past the clip: the appended silence, as the reference's last kept column (frame 255 is
    // past every test clip)
    for (int m = 0; m < n_mel; m++)
        assert_float_equal(mel[(size_t)m * AUDIO_MEL_WINDOW + AUDIO_MEL_WINDOW - 1],
                           r[(size_t)m * keep + keep - 1], 1e-4);
    free(ref);
    free(mel);
    mem_free(pcm);
}

static void test_mel_matches_reference(void **state)
{
    (void)state;
    compare_mel("a", 80);
    compare_mel("b", 80);
    compare_mel("silent", 80);
}

/* Whatever the thread count, the same bits. */
static void test_same_audio_any_threads(void **state)
{
    (void)state;
    size_t len, n;
    void *data = synth_projector(&len);
    struct clip_audio *a = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_audio_load_memory(data, len, &a, &e), ERR_OK);
    float *pcm = load_wav("a", &n);
    const size_t n_out = (size_t)clip_audio_n_tokens(a, n) * 128;
    float *o1 = malloc(n_out * sizeof(float)), *o3 = malloc(n_out * sizeof(float));
    struct threadpool *t1 = NULL, *t3 = NULL;
    assert_int_equal(threadpool_new(1, &t1), ERR_OK);
    assert_int_equal(threadpool_new(3, &t3), ERR_OK);
    assert_int_equal(clip_audio_encode(a, t1, pcm, n, o1), ERR_OK);
    assert_int_equal(clip_audio_encode(a, t3, pcm, n, o3), ERR_OK);
    assert_memory_equal(o1, o3, n_out * sizeof(float));
    threadpool_free(t1);
    threadpool_free(t3);
    free(o1);
    free(o3);
    mem_free(pcm);
    clip_audio_free(a);
    mem_free(data);
}

/* Window counts; silence is flat; a 440 Hz tone peaks in the mel band holding 440 Hz. */
static void test_mel_properties(void **state)
{
    (void)state;
    assert_int_equal(audio_mel_n_windows(0), 1);
    assert_int_equal(audio_mel_n_windows(16000), 1);
    // 6000 frames (two windows) from 479840 samples: (n + 30 s of silence) / 160 + 1
    assert_int_equal(audio_mel_n_windows(479839), 1);
    assert_int_equal(audio_mel_n_windows(479840), 2);
    const int n_mel = 80;
    float *mel = malloc(sizeof(float) * n_mel * AUDIO_MEL_WINDOW);
    float *s = calloc(16000, sizeof(float));
    assert_int_equal(audio_mel_compute(s, 16000, n_mel, mel), ERR_OK);
    for (int i = 1; i < n_mel * AUDIO_MEL_WINDOW; i++)
        assert_true(mel[i] == mel[0]);
    for (int i = 0; i < 16000; i++)
        s[i] = 0.5f * sinf(2.0f * 3.14159265f * 440.0f * (float)i / 16000.0f);
    assert_int_equal(audio_mel_compute(s, 16000, n_mel, mel), ERR_OK);
    int best = -1;
    float best_v = -1e30f;
    for (int m = 0; m < n_mel; m++) {
        const float v = mel[(size_t)m * AUDIO_MEL_WINDOW + 50]; // frame 50: 0.5 s in
        if (v > best_v) best_v = v, best = m;
    }
    // Slaney bands of 80 over 0..8 kHz are ~33 Hz wide below 1 kHz: 440 Hz is band 12 or 13
    assert_true(best >= 11 && best <= 13);
    assert_true(fabsf(best_v - 1.5f) < 1e-6f || best_v <= 1.5f); // the maximum maps to 1.5
    assert_int_equal(audio_mel_compute(s, 16000, 0, mel), ERR_INVALID);
    free(s);
    free(mel);
}

static void test_refused_files(void **state)
{
    (void)state;
    struct clip_synth_audio_params p = clip_synth_audio_params_default();
    struct gguf_writer *w = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    p.type = "q8_0";
    assert_int_equal(clip_synth_audio_build(&p, &w, &e), ERR_INVALID);
    p = clip_synth_audio_params_default();
    p.n_head = 5; // does not divide 64
    assert_int_equal(clip_synth_audio_build(&p, &w, &e), ERR_INVALID);
    struct clip_audio *a = NULL;
    const char junk[64] = "GGUF";
    assert_int_not_equal(clip_audio_load_memory(junk, sizeof junk, &a, &e), ERR_OK);
    assert_null(a);
    assert_int_not_equal(clip_audio_load("/nonexistent/mmproj.gguf", &a, &e), ERR_OK);
}

/* Every allocation of a load, failed in turn: an error, no leak, no crash. */
static void test_load_fault_injection(void **state)
{
    (void)state;
    size_t len;
    void *data = synth_projector(&len);
    for (int n = 0;; n++) {
        struct clip_audio *a = NULL;
        struct errmsg e;
        errmsg_clear(&e);
        mem_fail_after(n);
        int rc = clip_audio_load_memory(data, len, &a, &e);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            clip_audio_free(a);
            assert_true(n > 3);
            break;
        }
        assert_int_equal(rc, ERR_NOMEM);
        assert_null(a);
    }
    mem_free(data);
}

/* Every allocation of an encode (the spectrogram's and the window's scratch), failed in turn:
 * ERR_NOMEM, nothing leaked; then the same call succeeds. */
static void test_encode_fault_injection(void **state)
{
    (void)state;
    size_t len, n;
    void *data = synth_projector(&len);
    struct clip_audio *a = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(clip_audio_load_memory(data, len, &a, &e), ERR_OK);
    float *pcm = load_wav("a", &n);
    float *out = malloc(sizeof(float) * (size_t)clip_audio_n_tokens(a, n) * 128);
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(1, &tp), ERR_OK);
    const int64_t live = mem_live_count();
    int rc = ERR_NOMEM;
    for (int k = 0; rc == ERR_NOMEM; k++) {
        mem_fail_after(k);
        rc = clip_audio_encode(a, tp, pcm, n, out);
        mem_fail_after(-1);
        assert_int_equal(mem_live_count(), live);
        assert_true(rc == ERR_OK || rc == ERR_NOMEM);
        assert_true(k < 64);
    }
    threadpool_free(tp);
    free(out);
    mem_free(pcm);
    clip_audio_free(a);
    mem_free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mel_matches_reference),
        cmocka_unit_test(test_embeddings_match_reference),
        cmocka_unit_test(test_same_audio_any_threads),
        cmocka_unit_test(test_mel_properties),
        cmocka_unit_test(test_refused_files),
        cmocka_unit_test(test_load_fault_injection),
        cmocka_unit_test(test_encode_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
