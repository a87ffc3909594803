/* Windowed-sinc resampler (see audio_resample.h). Output sample i sits at input time
 * t = i * rate_in / rate_out; its value is the sum over input samples j near t of
 * x[j] * h(t - j), h the low-pass kernel. t's fraction takes one of rate_out / gcd values,
 * so the kernel is tabulated per phase once (at most PHASES_MAX; finer fractions use the
 * nearest phase, an error below the filter's own). */
#include "media/audio_resample.h"

#include "util/checked.h"
#include "util/mem.h"

#include <math.h>
#include <string.h>

#define ZEROS      32   // zero crossings of the sinc on each side
#define CUTOFF     0.95 // of the lower rate's Nyquist frequency
#define PHASES_MAX 4096
#define RATE_MAX   1000000u
#define N_IN_MAX   ((size_t)1 << 40) // with RATE_MAX, positions fit 64 bits
#define PI_D       3.14159265358979323846

size_t audio_resample_len(size_t n_in, uint32_t rate_in, uint32_t rate_out)
{
    if (rate_in == 0 || n_in > N_IN_MAX) return 0;
    return (size_t)(((uint64_t)n_in * rate_out + rate_in - 1) / rate_in);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        const uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

struct kernel {
    int half;     // taps on each side of t
    int n_phase;  // fractions of an input sample tabulated
    float *taps;  // (n_phase, 2 * half) weights; tap k of a phase weighs input floor(t)-half+1+k
    double scale; // input samples per unit of kernel time
};

static double h(double x, double fc, double width) // windowed sinc, x in input samples
{
    if (fabs(x) >= width) return 0.0;
    const double w = 0.42 + 0.5 * cos(PI_D * x / width) + 0.08 * cos(2.0 * PI_D * x / width);
    const double a = 2.0 * fc * x;
    return 2.0 * fc * (a == 0.0 ? 1.0 : sin(PI_D * a) / (PI_D * a)) * w;
}

static int kernel_make(struct kernel *k, uint32_t rate_in, uint32_t rate_out)
{
    // cutoff in cycles per input sample
    const double fc = CUTOFF * 0.5 * (rate_out < rate_in ? (double)rate_out / rate_in : 1.0);
    const double width = ZEROS / (2.0 * fc); // input samples on each side
    const uint64_t ph = rate_out / gcd(rate_in, rate_out);
    k->n_phase = (int)(ph > PHASES_MAX ? PHASES_MAX : ph);
    k->half = (int)ceil(width);
    k->taps = mem_alloc((size_t)k->n_phase * 2 * (size_t)k->half * sizeof(float));
    if (!k->taps) return ERR_NOMEM;
    for (int p = 0; p < k->n_phase; p++) {
        const double frac = (double)p / k->n_phase;
        float *row = k->taps + (size_t)p * 2 * (size_t)k->half;
        double sum = 0.0;
        for (int j = 0; j < 2 * k->half; j++)
            sum += h(frac - (j - k->half + 1), fc, width);
        for (int j = 0; j < 2 * k->half; j++) // unit gain at DC for every phase
            row[j] = (float)(h(frac - (j - k->half + 1), fc, width) / sum);
    }
    return ERR_OK;
}

int audio_resample(const float *in, size_t n_in, uint32_t rate_in, uint32_t rate_out, float **out,
                   size_t *n_out)
{
    if (rate_in == 0 || rate_out == 0 || rate_in > RATE_MAX || rate_out > RATE_MAX ||
        n_in > N_IN_MAX)
        return ERR_INVALID;
    const size_t n = audio_resample_len(n_in, rate_in, rate_out);
    float *y = mem_alloc((n ? n : 1) * sizeof(float));
    if (!y) return ERR_NOMEM;
    if (rate_in == rate_out) {
        if (n) memcpy(y, in, n * sizeof(float));
        *out = y;
        *n_out = n;
        return ERR_OK;
    }
    struct kernel k;
    if (kernel_make(&k, rate_in, rate_out) != ERR_OK) {
        mem_free(y);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const uint64_t pos = (uint64_t)i * rate_in; // t * rate_out
        const int64_t base = (int64_t)(pos / rate_out);
        const uint64_t rem = (uint64_t)(pos % rate_out);
        const int p = (int)((rem * (uint64_t)k.n_phase + rate_out / 2) / rate_out);
        const int64_t b = p == k.n_phase ? base + 1 : base; // the fraction rounded up to 1
        const float *row = k.taps + (size_t)(p == k.n_phase ? 0 : p) * 2 * (size_t)k.half;
        double acc = 0.0;
        for (int j = 0; j < 2 * k.half; j++) {
            const int64_t s = b - k.half + 1 + j;
            if (s >= 0 && (size_t)s < n_in) acc += (double)row[j] * in[s];
        }
        y[i] = (float)acc;
    }
    mem_free(k.taps);
    *out = y;
    *n_out = n;
    return ERR_OK;
}
