/* media/audio_resample: output lengths, DC gain, tones kept in band (down and up), tones above
 * the new Nyquist frequency removed, equal rates, refused arguments, allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "media/audio_resample.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *tone(size_t n, double rate, double hz, float amp)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = amp * (float)sin(2.0 * 3.14159265358979323846 * hz * (double)i / rate);
    return x;
}

/* Largest |y[i] - amp sin(2 pi hz i / rate)| away from the ends (the kernel's reach). */
static double tone_error(const float *y, size_t n, double rate, double hz, float amp)
{
    double worst = 0.0;
    for (size_t i = 200; i + 200 < n; i++) {
        const double want = amp * sin(2.0 * 3.14159265358979323846 * hz * (double)i / rate);
        const double d = fabs(y[i] - want);
        if (d > worst) worst = d;
    }
    return worst;
}

static void test_lengths(void **state)
{
    (void)state;
    assert_int_equal(audio_resample_len(44100, 44100, 16000), 16000);
    assert_int_equal(audio_resample_len(48000, 48000, 16000), 16000);
    assert_int_equal(audio_resample_len(1, 48000, 16000), 1);
    assert_int_equal(audio_resample_len(8000, 8000, 16000), 16000);
    assert_int_equal(audio_resample_len(0, 44100, 16000), 0);
    assert_int_equal(audio_resample_len(100, 0, 16000), 0);
}

static void test_tones_kept(void **state)
{
    (void)state;
    static const struct {
        uint32_t from;
        double hz;
    } cases[] = {{44100, 1000.0}, {48000, 3000.0}, {22050, 440.0},
                 {8000, 1000.0},  {11025, 2500.0}, {96000, 6000.0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const size_t n_in = cases[c].from; // one second
        float *x = tone(n_in, cases[c].from, cases[c].hz, 0.5f), *y = NULL;
        size_t n = 0;
        assert_int_equal(audio_resample(x, n_in, cases[c].from, 16000, &y, &n), ERR_OK);
        assert_int_equal(n, 16000);
        const double err = tone_error(y, n, 16000, cases[c].hz, 0.5f);
        printf("%u Hz -> 16 kHz, %.0f Hz tone: largest error %.2g\n", cases[c].from, cases[c].hz,
               err);
        assert_true(err < 1e-4);
        mem_free(y);
        free(x);
    }
}

static void test_dc_and_alias(void **state)
{
    (void)state;
    float *x = malloc(48000 * sizeof(float)), *y = NULL;
    for (int i = 0; i < 48000; i++)
        x[i] = 0.25f;
    size_t n = 0;
    assert_int_equal(audio_resample(x, 48000, 48000, 16000, &y, &n), ERR_OK);
    for (size_t i = 100; i + 100 < n; i++)
        assert_float_equal(y[i], 0.25f, 1e-4);
    mem_free(y);
    free(x);
    // 12 kHz cannot exist at 16 kHz: it must be filtered out, not folded to 4 kHz
    x = tone(48000, 48000, 12000.0, 0.5f);
    assert_int_equal(audio_resample(x, 48000, 48000, 16000, &y, &n), ERR_OK);
    double peak = 0.0;
    for (size_t i = 200; i + 200 < n; i++)
        peak = fabs(y[i]) > peak ? fabs(y[i]) : peak;
    printf("12 kHz at 48 kHz -> 16 kHz: peak %.2g of 0.5\n", peak);
    assert_true(peak < 1e-3);
    mem_free(y);
    free(x);
}

static void test_equal_rates_and_refusals(void **state)
{
    (void)state;
    const float x[3] = {0.1f, -0.2f, 0.3f};
    float *y = NULL;
    size_t n = 0;
    assert_int_equal(audio_resample(x, 3, 16000, 16000, &y, &n), ERR_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(x, y, sizeof x);
    mem_free(y);
    assert_int_equal(audio_resample(x, 3, 0, 16000, &y, &n), ERR_INVALID);
    assert_int_equal(audio_resample(x, 3, 16000, 0, &y, &n), ERR_INVALID);
    assert_int_equal(audio_resample(x, 3, 2000000, 16000, &y, &n), ERR_INVALID);
    assert_int_equal(audio_resample(NULL, 0, 44100, 16000, &y, &n), ERR_OK);
    assert_int_equal(n, 0);
    mem_free(y);
}

static void test_fault_injection(void **state)
{
    (void)state;
    float *x = tone(4410, 44100, 440.0, 0.5f), *y = NULL;
    size_t n = 0;
    const int64_t live = mem_live_count();
    int rc = ERR_NOMEM;
    for (int k = 0; rc == ERR_NOMEM; k++) {
        mem_fail_after(k);
        rc = audio_resample(x, 4410, 44100, 16000, &y, &n);
        mem_fail_after(-1);
        if (rc == ERR_OK) mem_free(y);
        assert_int_equal(mem_live_count(), live);
        assert_true(k < 8);
    }
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lengths),         cmocka_unit_test(test_tones_kept),
        cmocka_unit_test(test_dc_and_alias),    cmocka_unit_test(test_equal_rates_and_refusals),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
