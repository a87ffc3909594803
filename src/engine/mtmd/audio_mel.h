/* Whisper's log-mel spectrogram of 16 kHz mono samples, as audio projectors take it: a periodic
 * Hann window of 400 samples, a 400-point DFT every 160 samples, power spectra through a Slaney
 * mel filter bank (area-normalised, 0 Hz to 8 kHz), log10 with a floor, the whole clamped to
 * 8 below its maximum and scaled (x + 4) / 4, cut into 30 s windows of 3000 frames. Follows
 * openai/whisper's audio.py as the reference's mtmd-audio applies it (30 s of silence appended
 * before the cut, a reflected 200-sample lead-in). Not a resampler and not the encoder. */
#ifndef ENGINE_MTMD_AUDIO_MEL_H
#define ENGINE_MTMD_AUDIO_MEL_H

#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

#define AUDIO_MEL_SAMPLE_RATE 16000 // Hz the samples must have
#define AUDIO_MEL_N_FFT       400
#define AUDIO_MEL_HOP         160
#define AUDIO_MEL_WINDOW      3000 // frames per 30 s window

/* Number of 30 s windows n_samples give (at least 1). Cannot fail. */
int64_t audio_mel_n_windows(size_t n_samples);

/* Computes the spectrogram of samples (n_samples floats in [-1, 1] at 16 kHz; fewer than 201
 * are zero-padded to 201, 0 allowed) into out: n_windows blocks of (n_mel, 3000) floats, mel
 * bin after mel bin, each row 3000 frames. out holds audio_mel_n_windows(n) * n_mel * 3000
 * floats. ERR_INVALID for n_mel outside 1..512, ERR_NOMEM. Thread-safe. */
int audio_mel_compute(const float *samples, size_t n_samples, int n_mel, float *out);

#endif
