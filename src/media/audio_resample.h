/* Sample-rate conversion of mono float audio, for audio encoders that take one fixed rate
 * (Whisper-style projectors: 16 kHz): band-limited interpolation with a Blackman-windowed sinc
 * of 32 zero crossings, cut off at 0.95 of the lower rate's Nyquist frequency, evaluated from a
 * table of filter phases. Not a decoder (media/audio.c) and not a channel mixer. */
#ifndef MEDIA_AUDIO_RESAMPLE_H
#define MEDIA_AUDIO_RESAMPLE_H

#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

/* Output samples for n_in input samples: ceil(n_in * rate_out / rate_in); 0 for rate_in 0 or
 * n_in above 2^40. Cannot fail. */
size_t audio_resample_len(size_t n_in, uint32_t rate_in, uint32_t rate_out);

/* Converts in (n_in samples at rate_in Hz) to rate_out Hz into a new buffer of
 * audio_resample_len() samples; caller frees *out with mem_free(). Equal rates copy.
 * ERR_INVALID for a rate of 0 or above 1 MHz or n_in above 2^40, ERR_NOMEM. Thread-safe. */
int audio_resample(const float *in, size_t n_in, uint32_t rate_in, uint32_t rate_out, float **out,
                   size_t *n_out);

#endif
