/* Whisper log-mel spectrogram (see audio_mel.h). */
#include "engine/mtmd/audio_mel.h"

#include "util/checked.h"
#include "util/mem.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define N_BINS (AUDIO_MEL_N_FFT / 2 + 1)
#define PAD    (AUDIO_MEL_N_FFT / 2)         // reflected samples before the audio
#define TAIL   (AUDIO_MEL_SAMPLE_RATE * 30L) // silence appended after it
#define FLOOR  5.960464477539063e-08         // power floor before the log (the reference's)
#define N_MIN  (PAD + 1)                     // shorter input is zero-padded to this
#define PI_D   3.14159265358979323846

static int64_t n_frames_of(size_t n_samples)
{
    const size_t n = n_samples < N_MIN ? N_MIN : n_samples;
    // padded length n + PAD + TAIL + PAD, frames of N_FFT every HOP
    return (int64_t)((n + TAIL) / AUDIO_MEL_HOP) + 1;
}

int64_t audio_mel_n_windows(size_t n_samples)
{
    // The last, incomplete window is silence only and is dropped, as the reference does.
    return n_frames_of(n_samples) / AUDIO_MEL_WINDOW;
}

static double hz_to_mel(double f) // Slaney: linear below 1 kHz, logarithmic above
{
    return f < 1000.0 ? f * 3.0 / 200.0 : 15.0 + log(f / 1000.0) / (log(6.4) / 27.0);
}

static double mel_to_hz(double m)
{
    return m < 15.0 ? m * 200.0 / 3.0 : 1000.0 * exp((m - 15.0) * (log(6.4) / 27.0));
}

/* (n_mel, N_BINS) triangular filters with Slaney area normalisation. */
static void fill_filters(float *fb, int n_mel)
{
    const double m_hi = hz_to_mel(AUDIO_MEL_SAMPLE_RATE / 2.0);
    const double bin_hz = (double)AUDIO_MEL_SAMPLE_RATE / AUDIO_MEL_N_FFT;
    for (int m = 0; m < n_mel; m++) {
        const double l = mel_to_hz(m_hi * m / (n_mel + 1));
        const double c = mel_to_hz(m_hi * (m + 1) / (n_mel + 1));
        const double r = mel_to_hz(m_hi * (m + 2) / (n_mel + 1));
        const double norm = 2.0 / fmax(1e-30, r - l);
        for (int k = 0; k < N_BINS; k++) {
            const double f = k * bin_hz;
            double w = 0.0;
            if (f >= l && f <= c)
                w = (f - l) / fmax(1e-30, c - l);
            else if (f > c && f <= r)
                w = (r - f) / fmax(1e-30, r - c);
            fb[(size_t)m * N_BINS + (size_t)k] = (float)(w * norm);
        }
    }
}

/* The 400-point FFT: mixed-radix decimation in time over 400 = 4 * 4 * 5 * 5 (Cooley-Tukey;
 * each stage splits the input into p interleaved subsequences, transforms them and combines
 * them with p-point DFTs twiddled by w^(q k)). Twiddles in float from double, as the plain
 * DFT's table was; about 9x fewer products than the plain DFT's 400 x 201. */
static const int FFT_RADIX[] = {4, 4, 5, 5};
_Static_assert(4 * 4 * 5 * 5 == AUDIO_MEL_N_FFT, "the radices multiply to the FFT length");

struct cplx {
    float re, im;
};

/* out[0..n) = DFT of in[0], in[stride], ... (n values), n = product of radix[0..]. tw[j] is
 * exp(-2 pi i j / N) for the full N; tw_step = N / n. */
static void fft_rec(const float *in, size_t stride, struct cplx *out, int n, const int *radix,
                    const struct cplx *tw, int tw_step)
{
    const int p = radix[0], m = n / p;
    if (m == 1) {
        for (int q = 0; q < p; q++)
            out[q] = (struct cplx){in[(size_t)q * stride], 0.0f};
    } else {
        for (int q = 0; q < p; q++)
            fft_rec(in + (size_t)q * stride, stride * (size_t)p, out + q * m, m, radix + 1, tw,
                    tw_step * p);
    }
    for (int k = 0; k < m; k++) {
        struct cplx t[5]; // sub-transform q's bin k, turned by w_n^(q k)
        for (int q = 0; q < p; q++) {
            const struct cplx a = out[q * m + k], w = tw[q * k * tw_step];
            t[q] = (struct cplx){a.re * w.re - a.im * w.im, a.re * w.im + a.im * w.re};
        }
        for (int r = 0; r < p; r++) { // bin k + r m: sum over q of t[q] w_p^(q r)
            struct cplx acc = t[0];
            for (int q = 1; q < p; q++) {
                const struct cplx w = tw[(q * r % p) * m * tw_step];
                acc.re += t[q].re * w.re - t[q].im * w.im;
                acc.im += t[q].re * w.im + t[q].im * w.re;
            }
            out[k + r * m] = acc;
        }
    }
}

struct mel_ctx {
    const float *x; // padded samples
    size_t x_len;
    float hann[AUDIO_MEL_N_FFT];
    struct cplx tw[AUDIO_MEL_N_FFT]; // exp(-2 pi i j / N_FFT)
    float *fb;                       // (n_mel, N_BINS)
    short lo[512], hi[512];          // (n_mel) each band's nonzero weights: bins lo .. hi - 1
    int n_mel;
};

/* log10 of the mel energies of the frame starting at off into out[m * stride]. */
static void frame_mel(const struct mel_ctx *c, size_t off, float *out, size_t stride)
{
    float in[AUDIO_MEL_N_FFT], power[N_BINS];
    struct cplx spec[AUDIO_MEL_N_FFT];
    bool is_zero = true;
    for (int j = 0; j < AUDIO_MEL_N_FFT; j++) {
        in[j] = off + (size_t)j < c->x_len ? c->hann[j] * c->x[off + (size_t)j] : 0.0f;
        is_zero = is_zero && in[j] == 0.0f;
    }
    if (is_zero) { // silence: every energy is at the floor
        for (int m = 0; m < c->n_mel; m++)
            out[(size_t)m * stride] = (float)log10(FLOOR);
        return;
    }
    fft_rec(in, 1, spec, AUDIO_MEL_N_FFT, FFT_RADIX, c->tw, 1);
    for (int k = 0; k < N_BINS; k++)
        power[k] = spec[k].re * spec[k].re + spec[k].im * spec[k].im;
    for (int m = 0; m < c->n_mel; m++) {
        const float *w = c->fb + (size_t)m * N_BINS;
        double sum = 0.0; // the zero weights outside lo .. hi would add exact zeros
        for (int k = c->lo[m]; k < c->hi[m]; k++)
            sum += power[k] * w[k];
        out[(size_t)m * stride] = (float)log10(sum > FLOOR ? sum : FLOOR);
    }
}

/* The samples with PAD reflected in front and PAD + TAIL zeros behind. */
static float *pad_samples(const float *s, size_t n, size_t *len)
{
    const size_t n_in = n < N_MIN ? N_MIN : n;
    size_t total;
    if (!size_add(n_in, 2 * PAD + TAIL, &total) || total > SIZE_MAX / sizeof(float)) return NULL;
    float *x = mem_calloc(total, sizeof(float));
    if (!x) return NULL;
    if (n) memcpy(x + PAD, s, n * sizeof(float));
    for (int j = 0; j < PAD; j++) // x[PAD - 1 - j] mirrors input sample j + 1
        x[PAD - 1 - j] = x[PAD + 1 + j];
    *len = total;
    return x;
}

int audio_mel_compute(const float *samples, size_t n_samples, int n_mel, float *out)
{
    if (n_mel < 1 || n_mel > 512) return ERR_INVALID;
    const int64_t n_frames = n_frames_of(n_samples);
    const int64_t n_keep = audio_mel_n_windows(n_samples) * AUDIO_MEL_WINDOW;
    struct mel_ctx c = {.n_mel = n_mel};
    float *full = NULL;
    c.fb = mem_alloc((size_t)n_mel * N_BINS * sizeof(float));
    float *x = pad_samples(samples, n_samples, &c.x_len);
    size_t full_n;
    if (size_mul((size_t)n_mel, (size_t)n_frames, &full_n) && full_n <= SIZE_MAX / sizeof(float))
        full = mem_alloc(full_n * sizeof(float));
    if (!c.fb || !x || !full) {
        mem_free(c.fb);
        mem_free(x);
        mem_free(full);
        return ERR_NOMEM;
    }
    c.x = x;
    fill_filters(c.fb, n_mel);
    for (int m = 0; m < n_mel; m++) {
        const float *w = c.fb + (size_t)m * N_BINS;
        int lo = 0, hi = N_BINS;
        while (lo < hi && w[lo] == 0.0f)
            lo++;
        while (hi > lo && w[hi - 1] == 0.0f)
            hi--;
        c.lo[m] = (short)lo;
        c.hi[m] = (short)hi;
    }
    for (int j = 0; j < AUDIO_MEL_N_FFT; j++) {
        c.hann[j] = 0.5f * (1.0f - cosf((float)(2.0 * PI_D * j / AUDIO_MEL_N_FFT)));
        c.tw[j] = (struct cplx){(float)cos(2.0 * PI_D * j / AUDIO_MEL_N_FFT),
                                (float)-sin(2.0 * PI_D * j / AUDIO_MEL_N_FFT)};
    }
    for (int64_t i = 0; i < n_frames; i++)
        frame_mel(&c, (size_t)i * AUDIO_MEL_HOP, full + i, (size_t)n_frames);
    // Clamp to 8 below the maximum of the whole (the appended silence included), then scale.
    float mx = -INFINITY;
    for (size_t i = 0; i < full_n; i++)
        mx = full[i] > mx ? full[i] : mx;
    const double lo = (double)mx - 8.0; // in double, as the reference
    for (size_t i = 0; i < full_n; i++)
        full[i] = (float)(((full[i] < lo ? lo : (double)full[i]) + 4.0) / 4.0);
    for (int64_t w = 0; w < n_keep / AUDIO_MEL_WINDOW; w++)
        for (int m = 0; m < n_mel; m++)
            memcpy(out + ((size_t)w * n_mel + m) * AUDIO_MEL_WINDOW,
                   full + (size_t)m * n_frames + (size_t)w * AUDIO_MEL_WINDOW,
                   AUDIO_MEL_WINDOW * sizeof(float));
    mem_free(c.fb);
    mem_free(x);
    mem_free(full);
    return ERR_OK;
}
