/* platform/cpu_audio through the projector slot of cpu_vision: a clip-audio file is loaded as
 * an audio projector (audio described, images not), a clip's windows are request items whose
 * placeholders tell clips and windows apart, a window's embeddings equal the engine's encoding
 * of that window of the whole clip's spectrogram, and a repeated window comes from the cache. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf_write.h"
#include "engine/mtmd/audio_mel.h"
#include "engine/mtmd/clip_audio.h"
#include "engine/mtmd/clip_synth_audio.h"
#include "engine/threadpool.h"
#include "platform/cpu/cpu_audio.h"
#include "platform/cpu/cpu_vision.h"
#include "platform/request.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char proj_path[64];

static int write_projector(void **state)
{
    (void)state;
    snprintf(proj_path, sizeof proj_path, "/tmp/test_cpu_audio_%d.gguf", (int)getpid());
    struct clip_synth_audio_params p = clip_synth_audio_params_default();
    struct gguf_writer *w = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    if (clip_synth_audio_build(&p, &w, &e) != ERR_OK) return -1;
    int rc = gguf_writer_to_file(w, proj_path, &e);
    gguf_writer_free(w);
    return rc == ERR_OK ? 0 : -1;
}

static int remove_projector(void **state)
{
    (void)state;
    unlink(proj_path);
    return 0;
}

static void test_audio_projector_loads_in_the_slot(void **state)
{
    (void)state;
    assert_true(cpu_audio_claims(proj_path));
    assert_false(cpu_audio_claims("/nonexistent.gguf"));
    struct cpu_vision *v = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(cpu_vision_load(proj_path, "/nonexistent", 128, 512, &v, &e), ERR_OK);
    assert_non_null(v);
    struct platform_model_desc d;
    memset(&d, 0, sizeof d);
    cpu_vision_describe(v, &d);
    assert_false(d.has_vision);
    assert_true(d.has_audio);
    assert_int_equal(d.audio_window_tokens, 375); // 1500 frames stacked by 4
    assert_non_null(d.audio_n_windows);
    assert_int_equal(d.audio_n_windows(16000), 1);
    assert_int_equal(d.audio_n_windows(31 * 16000), 2);
    assert_string_equal(d.audio_begin, ""); // Ultravox: nothing around the clip
    assert_string_equal(d.projector, "ultravox");
    assert_false(cpu_vision_is_noncausal(v));
    cpu_vision_free(v);
    // the width must be the decoder's; a window must fit a batch
    assert_int_equal(cpu_vision_load(proj_path, "/nonexistent", 64, 512, &v, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "128 wide"));
    assert_int_equal(cpu_vision_load(proj_path, "/nonexistent", 128, 300, &v, &e), ERR_INVALID);
}

/* A request whose prompt is 3 text ids and then clip's n_win windows of placeholders. */
static struct request *audio_request(const float *pcm, size_t n, int n_win, int n_tok)
{
    const uint64_t clip = request_audio_hash(pcm, n);
    const int n_prompt = 3 + n_win * n_tok;
    int32_t *ids = mem_alloc(sizeof(int32_t) * (size_t)n_prompt);
    assert_non_null(ids);
    ids[0] = 1, ids[1] = 2, ids[2] = 3;
    for (int w = 0; w < n_win; w++)
        for (int j = 0; j < n_tok; j++)
            ids[3 + w * n_tok + j] = request_image_token(request_audio_window_key(clip, w), j);
    struct gen_params gp;
    memset(&gp, 0, sizeof gp);
    struct request *r = NULL;
    assert_int_equal(request_new(REQUEST_GENERATE, ids, n_prompt, &gp, 4, &r), ERR_OK);
    mem_free(ids);
    return r;
}

static void test_windows_match_the_engine_and_are_cached(void **state)
{
    (void)state;
    const size_t n = 31 * 16000; // two windows
    float *pcm = mem_alloc(n * sizeof(float));
    assert_non_null(pcm);
    for (size_t i = 0; i < n; i++)
        pcm[i] = 0.3f * sinf(2.0f * 3.14159265f * (i < 30 * 16000 ? 300.0f : 2000.0f) * (float)i /
                             16000.0f);
    struct request *r = audio_request(pcm, n, 2, 375);
    // wrong counts and a changed clip are refused (the request then frees the samples)
    float *copy = mem_alloc(n * sizeof(float));
    assert_non_null(copy);
    memcpy(copy, pcm, n * sizeof(float));
    copy[5] += 0.25f;
    assert_int_equal(request_add_audio(r, 3, 375, 2, copy, n), ERR_INVALID);
    copy = mem_alloc(n * sizeof(float));
    memcpy(copy, pcm, n * sizeof(float));
    assert_int_equal(request_add_audio(r, 3, 375, 3, copy, n), ERR_INVALID);
    copy = mem_alloc(n * sizeof(float));
    memcpy(copy, pcm, n * sizeof(float));
    assert_int_equal(request_add_audio(r, 2, 375, 2, copy, n), ERR_INVALID);
    assert_int_equal(request_add_audio(r, 3, 375, 2, pcm, n), ERR_OK);
    assert_int_equal(r->n_images, 2);
    assert_int_equal(r->images[1].pos, 3 + 375);
    assert_int_equal(r->images[1].window, 1);
    assert_true(r->images[0].hash != r->images[1].hash);

    struct cpu_vision *v = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(cpu_vision_load(proj_path, "/nonexistent", 128, 512, &v, &e), ERR_OK);
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    // window 1 equals the engine's encoding of the whole clip's spectrogram's second window
    // (the spectrogram is clamped against the whole clip, so windows are not independent)
    struct clip_audio *ca = NULL;
    assert_int_equal(clip_audio_load(proj_path, &ca, &e), ERR_OK);
    const size_t per = 375 * 128, per_mel = 80 * AUDIO_MEL_WINDOW;
    float *mel = mem_alloc(2 * per_mel * sizeof(float));
    float *want = mem_alloc(per * sizeof(float));
    assert_non_null(mel);
    assert_non_null(want);
    assert_int_equal(audio_mel_compute(r->images[1].pcm, n, 80, mel), ERR_OK);
    assert_int_equal(clip_audio_encode_window(ca, tp, mel + per_mel, want), ERR_OK);
    const float *got = NULL;
    assert_int_equal(cpu_vision_embed(v, tp, &r->images[1], &got, &e), ERR_OK);
    assert_memory_equal(got, want, per * sizeof(float));
    int64_t n_enc, n_hits;
    cpu_vision_counts(v, &n_enc, &n_hits);
    assert_int_equal(n_enc, 1);
    assert_int_equal(n_hits, 0);
    // a repeated window comes from the cache
    const float *again = NULL;
    assert_int_equal(cpu_vision_embed(v, tp, &r->images[1], &again, &e), ERR_OK);
    assert_ptr_equal(again, got);
    cpu_vision_counts(v, &n_enc, &n_hits);
    assert_int_equal(n_enc, 1);
    assert_int_equal(n_hits, 1);
    // a window past the clip's end is refused
    struct request_image past = r->images[1];
    past.window = 2;
    past.hash ^= 1;
    assert_int_equal(cpu_vision_embed(v, tp, &past, &again, &e), ERR_INVALID);
    // an image item is not audio
    unsigned char px[12] = {0};
    struct request_image im = {.n_tok = 375, .rgb = px, .w = 2, .h = 2};
    im.hash = request_image_hash(px, 2, 2);
    assert_int_equal(cpu_vision_embed(v, tp, &im, &again, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "takes audio"));
    mem_free(mel);
    mem_free(want);
    clip_audio_free(ca);
    threadpool_free(tp);
    cpu_vision_free(v);
    request_release(r);
}

static void test_keys_tell_clips_and_windows_apart(void **state)
{
    (void)state;
    float a[100], b[100];
    for (int i = 0; i < 100; i++)
        a[i] = b[i] = (float)i / 100.0f;
    b[99] = 0.5f;
    const uint64_t ha = request_audio_hash(a, 100), hb = request_audio_hash(b, 100);
    assert_true(ha != hb);
    assert_true(request_audio_hash(a, 99) != ha);
    assert_true(request_audio_window_key(ha, 0) != request_audio_window_key(ha, 1));
    assert_true(request_audio_window_key(ha, 0) != request_audio_window_key(hb, 0));
    // the same bytes as an image hash differently
    assert_true(request_image_hash((const unsigned char *)a, 0, 0) != ha);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audio_projector_loads_in_the_slot),
        cmocka_unit_test(test_windows_match_the_engine_and_are_cached),
        cmocka_unit_test(test_keys_tell_clips_and_windows_apart),
    };
    return cmocka_run_group_tests(tests, write_projector, remove_projector);
}
