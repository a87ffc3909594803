/* Audio validation for OpenAI `input_audio` parts ({format: "wav"|"mp3", data: base64}): decodes
 * the whole stream from memory (libsndfile for WAV, libmpg123 for MP3) to prove it is real and
 * complete, within duration, sample-rate and channel limits. Not a resampler or a player.
 *
 * Format policy: the declared format chooses the decoder and must match the content (a WAV
 * sent as "mp3" is refused), because MP3 frame sync bytes can appear in any data. */
#ifndef MEDIA_AUDIO_H
#define MEDIA_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/str.h"

#define AUDIO_DURATION_MS_MAX 600000u // 10 minutes
#define AUDIO_SAMPLE_RATE_MIN 8000u   // Hz
#define AUDIO_SAMPLE_RATE_MAX 192000u // Hz
#define AUDIO_CHANNELS_MAX    8u

enum audio_format {
    AUDIO_FORMAT_UNKNOWN = 0,
    AUDIO_FORMAT_WAV,
    AUDIO_FORMAT_MP3,
};

struct audio_limits {
    uint32_t duration_ms_max; // 0 means AUDIO_DURATION_MS_MAX
    uint32_t sample_rate_min; // Hz; 0 means AUDIO_SAMPLE_RATE_MIN
    uint32_t sample_rate_max; // Hz; 0 means AUDIO_SAMPLE_RATE_MAX
    uint32_t channels_max;    // 0 means AUDIO_CHANNELS_MAX
};

struct audio_input {
    const void *data;                  // borrowed; the encoded file
    size_t len;                        // bytes
    enum audio_format format;          // declared format (from audio_format_parse())
    const struct audio_limits *limits; // NULL means the defaults above
};

struct audio_info {
    enum audio_format format;
    uint32_t sample_rate_hz; // Hz
    uint32_t n_channels;     // 1..channels_max
    uint64_t n_frames;       // samples per channel actually decoded, >= 1
    uint64_t duration_ms;    // n_frames * 1000 / sample_rate_hz, rounded down
};

/* Parses the `input_audio.format` value: "wav" or "mp3" (exact, lower case, as OpenAI).
 * ERR_UNSUPPORTED otherwise, with e = "audio: format 'ogg' not supported (wav, mp3)". */
int audio_format_parse(struct str name, enum audio_format *out, struct errmsg *e);

/* "wav", "mp3" or "unknown". Static string; cannot fail. */
const char *audio_format_name(enum audio_format f);

/* The format the first bytes announce ("RIFF....WAVE" or an ID3v2 tag / MPEG audio frame
 * header), or AUDIO_FORMAT_UNKNOWN. Cannot fail. */
enum audio_format audio_sniff(const void *data, size_t len);

/* Decodes in->data completely and writes *info on success. When pcm is not NULL, also returns
 * the samples downmixed to mono float32 in [-1, 1] at the source rate: info->n_frames floats;
 * caller frees *pcm with mem_free(). With pcm NULL, decoding uses a fixed-size scratch buffer.
 * Errors, each with a message in e starting "audio: ":
 *   ERR_UNSUPPORTED  declared format unknown, or a RIFF file that is not WAV
 *   ERR_FORMAT       empty, truncated or corrupt data; content that does not match the
 *                    declared format ("audio: data is WAV, not mp3"); no samples
 *   ERR_LIMIT        duration, sample rate or channel count outside the limits
 *   ERR_NOMEM        an allocation failed
 * Thread-safe (no shared state). */
int audio_decode(const struct audio_input *in, struct audio_info *info, float **pcm,
                 struct errmsg *e);

#endif
