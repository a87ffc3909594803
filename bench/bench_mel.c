/* Whisper log-mel spectrogram time (engine/mtmd/audio_mel.c): audio_mel_compute on 1 s, 30 s
 * and 5 min of a tone plus noise at 16 kHz, best of several runs, in process CPU time (one
 * thread, so load from other processes changes it little). */
#include "engine/mtmd/audio_mel.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(void)
{
    const size_t secs[] = {1, 30, 300};
    for (size_t k = 0; k < sizeof secs / sizeof secs[0]; k++) {
        const size_t n = secs[k] * AUDIO_MEL_SAMPLE_RATE;
        float *x = mem_alloc(n * sizeof(float));
        float *out =
            mem_alloc((size_t)audio_mel_n_windows(n) * 80 * AUDIO_MEL_WINDOW * sizeof(float));
        if (!x || !out) return 1;
        unsigned s = 1;
        for (size_t i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            x[i] = 0.3f * sinf(0.17f * (float)i) + 0.05f * ((float)(s >> 8) / 16777216.0f - 0.5f);
        }
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            const double t0 = cpu_ms();
            if (audio_mel_compute(x, n, 80, out) != 0) return 1;
            const double t = cpu_ms() - t0;
            best = t < best ? t : best;
        }
        printf("mel %4zu s of audio (%lld windows, 80 bins): %8.1f ms CPU\n", secs[k],
               (long long)audio_mel_n_windows(n), best);
        mem_free(x);
        mem_free(out);
    }
    return 0;
}
