/* WAV (libsndfile, through a memory-backed virtual file) and MP3 (libmpg123 in feed mode)
 * decoding with limits. libsndfile trims a truncated WAV silently, so the RIFF chunk walk here
 * checks the data chunk's declared size against the bytes present first. */
#include "media/audio.h"

#include "util/checked.h"
#include "util/log.h"
#include "util/mem.h"

#include <stdbool.h>
#include <string.h>

#include <mpg123.h>
#include <sndfile.h>

#define CHUNK_FRAMES 4096 // frames decoded per call (scratch buffer size)

int audio_format_parse(struct str name, enum audio_format *out, struct errmsg *e)
{
    if (str_eq_cstr(name, "wav")) {
        *out = AUDIO_FORMAT_WAV;
        return ERR_OK;
    }
    if (str_eq_cstr(name, "mp3")) {
        *out = AUDIO_FORMAT_MP3;
        return ERR_OK;
    }
    return errmsg_set(e, ERR_UNSUPPORTED, "audio: format '%.*s' not supported (wav, mp3)",
                      (int)(name.len > 32 ? 32 : name.len), name.ptr ? name.ptr : "");
}

const char *audio_format_name(enum audio_format f)
{
    switch (f) {
    case AUDIO_FORMAT_WAV:
        return "wav";
    case AUDIO_FORMAT_MP3:
        return "mp3";
    default:
        return "unknown";
    }
}

/* An MPEG audio frame header: 11 sync bits, a valid version, layer, bitrate and sample rate. */
static bool is_mpeg_frame(const unsigned char *p, size_t len)
{
    if (len < 4 || p[0] != 0xff || (p[1] & 0xe0) != 0xe0) return false;
    unsigned version = (p[1] >> 3) & 3, layer = (p[1] >> 1) & 3;
    unsigned bitrate = p[2] >> 4, rate = (p[2] >> 2) & 3;
    return version != 1 && layer != 0 && bitrate != 15 && rate != 3;
}

enum audio_format audio_sniff(const void *data, size_t len)
{
    const unsigned char *p = data;
    if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WAVE", 4) == 0)
        return AUDIO_FORMAT_WAV;
    if ((len >= 10 && memcmp(p, "ID3", 3) == 0) || is_mpeg_frame(p, len)) return AUDIO_FORMAT_MP3;
    return AUDIO_FORMAT_UNKNOWN;
}

struct limits {
    uint32_t duration_ms_max, rate_min, rate_max, channels_max;
};

static struct limits limits_of(const struct audio_limits *l)
{
    struct limits r = {AUDIO_DURATION_MS_MAX, AUDIO_SAMPLE_RATE_MIN, AUDIO_SAMPLE_RATE_MAX,
                       AUDIO_CHANNELS_MAX};
    if (l && l->duration_ms_max) r.duration_ms_max = l->duration_ms_max;
    if (l && l->sample_rate_min) r.rate_min = l->sample_rate_min;
    if (l && l->sample_rate_max) r.rate_max = l->sample_rate_max;
    if (l && l->channels_max) r.channels_max = l->channels_max;
    return r;
}

static int check_format(const char *fmt, long rate, long channels, const struct limits *l,
                        struct errmsg *e)
{
    if (rate < (long)l->rate_min || rate > (long)l->rate_max)
        return errmsg_set(e, ERR_LIMIT, "audio: %s sample rate %ld Hz outside %u..%u Hz", fmt, rate,
                          l->rate_min, l->rate_max);
    if (channels < 1 || channels > (long)l->channels_max)
        return errmsg_set(e, ERR_LIMIT, "audio: %s has %ld channels (1..%u supported)", fmt,
                          channels, l->channels_max);
    return ERR_OK;
}

/* Duration limit: frames <= duration_ms_max * rate / 1000, without overflow. */
static bool frames_over_limit(uint64_t n_frames, uint32_t rate, const struct limits *l)
{
    return n_frames * 1000 > (uint64_t)l->duration_ms_max * rate;
}

static int duration_error(const char *fmt, const struct limits *l, struct errmsg *e)
{
    return errmsg_set(e, ERR_LIMIT, "audio: %s is longer than the %u s limit", fmt,
                      l->duration_ms_max / 1000);
}

/* Mono output: grows to n_frames floats (bounded by the duration limit). */
struct pcm_out {
    float *p;
    size_t n, cap; // floats used / allocated
};

static int pcm_append(struct pcm_out *o, const float *interleaved, size_t n_frames,
                      uint32_t n_channels)
{
    if (o->cap - o->n < n_frames) {
        size_t cap = o->cap ? o->cap : CHUNK_FRAMES, need, bytes;
        if (!size_add(o->n, n_frames, &need)) return ERR_LIMIT;
        while (cap < need && size_mul(cap, 2, &cap))
            ;
        if (cap < need || !size_mul(cap, sizeof(float), &bytes)) return ERR_LIMIT;
        float *p = mem_realloc(o->p, bytes);
        if (!p) return ERR_NOMEM;
        o->p = p;
        o->cap = cap;
    }
    for (size_t i = 0; i < n_frames; i++) {
        float s = 0;
        for (uint32_t c = 0; c < n_channels; c++)
            s += interleaved[i * n_channels + c];
        o->p[o->n++] = s / (float)n_channels;
    }
    return ERR_OK;
}

/* ---- WAV ---- */

static uint32_t rd_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Walks the RIFF chunks to the "data" chunk and checks that its bytes are all present. A size
 * of 0xFFFFFFFF (written by streaming encoders that cannot seek back) means "to the end". */
static int wav_check_riff(const unsigned char *p, size_t len, struct errmsg *e)
{
    uint64_t off = 12;
    while (off + 8 <= len) {
        uint32_t size = rd_le32(p + off + 4);
        if (memcmp(p + off, "data", 4) == 0) {
            if (size != 0xffffffffu && off + 8 + size > len)
                return errmsg_set(e, ERR_FORMAT,
                                  "audio: WAV data truncated (data chunk declares %u bytes, %llu "
                                  "present)",
                                  size, (unsigned long long)(len - off - 8));
            return ERR_OK;
        }
        off += 8 + (uint64_t)size + (size & 1); // chunks are padded to even sizes
    }
    return errmsg_set(e, ERR_FORMAT, "audio: WAV data truncated (no data chunk)");
}

struct mem_file {
    const unsigned char *p;
    sf_count_t len, pos; // bytes
};

static sf_count_t vio_filelen(void *u)
{
    return ((struct mem_file *)u)->len;
}

static sf_count_t vio_seek(sf_count_t off, int whence, void *u)
{
    struct mem_file *f = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->pos : f->len;
    if ((off < 0 && -off > base) || (off > 0 && off > f->len - base)) return -1;
    f->pos = base + off;
    return f->pos;
}

static sf_count_t vio_read(void *ptr, sf_count_t count, void *u)
{
    struct mem_file *f = u;
    sf_count_t n = count < f->len - f->pos ? count : f->len - f->pos;
    if (n <= 0) return 0;
    memcpy(ptr, f->p + f->pos, (size_t)n);
    f->pos += n;
    return n;
}

static sf_count_t vio_write(const void *ptr, sf_count_t count, void *u)
{
    (void)ptr, (void)count, (void)u;
    return 0;
}

static sf_count_t vio_tell(void *u)
{
    return ((struct mem_file *)u)->pos;
}

/* Reads every frame the header announces; fewer means the file lied or is corrupt. */
static int wav_read_all(SNDFILE *sf, const SF_INFO *si, struct pcm_out *pcm, struct errmsg *e)
{
    float *scratch = mem_alloc((size_t)CHUNK_FRAMES * (size_t)si->channels * sizeof(float));
    if (!scratch) return errmsg_set(e, ERR_NOMEM, "audio: out of memory decoding WAV");
    int rc = ERR_OK;
    sf_count_t done = 0;
    while (rc == ERR_OK && done < si->frames) {
        sf_count_t want = si->frames - done < CHUNK_FRAMES ? si->frames - done : CHUNK_FRAMES;
        sf_count_t got = sf_readf_float(sf, scratch, want);
        if (got <= 0) {
            rc = errmsg_set(e, ERR_FORMAT, "audio: WAV data ends after %lld of %lld frames (%s)",
                            (long long)done, (long long)si->frames, sf_strerror(sf));
            break;
        }
        done += got;
        if (pcm && pcm_append(pcm, scratch, (size_t)got, (uint32_t)si->channels) != ERR_OK)
            rc = errmsg_set(e, ERR_NOMEM, "audio: out of memory for decoded samples");
    }
    mem_free(scratch);
    return rc;
}

static int wav_decode(const struct audio_input *in, struct audio_info *info, struct pcm_out *pcm,
                      struct errmsg *e)
{
    int rc = wav_check_riff(in->data, in->len, e);
    if (rc != ERR_OK) return rc;
    struct mem_file f = {in->data, (sf_count_t)in->len, 0};
    SF_VIRTUAL_IO vio = {vio_filelen, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO si = {0};
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &si, &f);
    // sf_strerror(NULL) reads a libsndfile global another thread may be writing: no detail.
    if (!sf) return errmsg_set(e, ERR_FORMAT, "audio: invalid WAV data");
    int major = si.format & SF_FORMAT_TYPEMASK;
    struct limits lim = limits_of(in->limits);
    if (major != SF_FORMAT_WAV && major != SF_FORMAT_WAVEX)
        rc = errmsg_set(e, ERR_UNSUPPORTED, "audio: RIFF data is not WAV");
    else if (si.frames <= 0)
        rc = errmsg_set(e, ERR_FORMAT, "audio: WAV has no samples");
    else
        rc = check_format("WAV", si.samplerate, si.channels, &lim, e);
    if (rc == ERR_OK && frames_over_limit((uint64_t)si.frames, (uint32_t)si.samplerate, &lim))
        rc = duration_error("WAV", &lim, e);
    if (rc == ERR_OK) rc = wav_read_all(sf, &si, pcm, e);
    if (rc == ERR_OK) {
        info->sample_rate_hz = (uint32_t)si.samplerate;
        info->n_channels = (uint32_t)si.channels;
        info->n_frames = (uint64_t)si.frames;
    }
    sf_close(sf);
    return rc;
}

/* ---- MP3 ---- */

struct mp3_job {
    mpg123_handle *mh;
    struct limits lim;
    long rate;           // Hz, from the first MPG123_NEW_FORMAT
    int n_channels;      // 0 until the format is known
    uint64_t n_frames;   // decoded so far
    struct pcm_out *pcm; // NULL when samples are not kept
    struct errmsg *e;
};

/* Only float32 output, any rate and channel count libmpg123 knows. */
static int mp3_open(struct mp3_job *j, const struct audio_input *in)
{
    int err = MPG123_OK;
    j->mh = mpg123_new(NULL, &err);
    if (!j->mh)
        return errmsg_set(j->e, ERR_NOMEM, "audio: cannot start the MP3 decoder (%s)",
                          mpg123_plain_strerror(err));
    const long *rates;
    size_t n_rates;
    mpg123_rates(&rates, &n_rates);
    bool ok = mpg123_param(j->mh, MPG123_ADD_FLAGS, MPG123_QUIET, 0) == MPG123_OK &&
              mpg123_format_none(j->mh) == MPG123_OK;
    for (size_t i = 0; ok && i < n_rates; i++)
        ok = mpg123_format(j->mh, rates[i], MPG123_MONO | MPG123_STEREO, MPG123_ENC_FLOAT_32) ==
             MPG123_OK;
    ok = ok && mpg123_open_feed(j->mh) == MPG123_OK &&
         mpg123_feed(j->mh, in->data, in->len) == MPG123_OK;
    if (!ok)
        return errmsg_set(j->e, ERR_NOMEM, "audio: cannot start the MP3 decoder (%s)",
                          mpg123_strerror(j->mh));
    return ERR_OK;
}

static int mp3_new_format(struct mp3_job *j)
{
    long rate;
    int channels, enc;
    if (mpg123_getformat(j->mh, &rate, &channels, &enc) != MPG123_OK)
        return errmsg_set(j->e, ERR_FORMAT, "audio: invalid MP3 data (%s)", mpg123_strerror(j->mh));
    if (j->n_channels && (rate != j->rate || channels != j->n_channels))
        return errmsg_set(j->e, ERR_FORMAT, "audio: MP3 changes format mid-stream");
    j->rate = rate;
    j->n_channels = channels;
    return check_format("MP3", rate, channels, &j->lim, j->e);
}

static int mp3_frame(struct mp3_job *j, const unsigned char *audio, size_t bytes)
{
    if (!j->n_channels) return errmsg_set(j->e, ERR_FORMAT, "audio: MP3 audio before its format");
    size_t n = bytes / (sizeof(float) * (size_t)j->n_channels);
    j->n_frames += n;
    if (frames_over_limit(j->n_frames, (uint32_t)j->rate, &j->lim))
        return duration_error("MP3", &j->lim, j->e);
    if (j->pcm && pcm_append(j->pcm, (const float *)(const void *)audio, n,
                             (uint32_t)j->n_channels) != ERR_OK)
        return errmsg_set(j->e, ERR_NOMEM, "audio: out of memory for decoded samples");
    return ERR_OK;
}

/* Two signs of a cut: fewer samples than the Xing/LAME header announces (libmpg123 reports
 * the length as accurate only when it comes from such a header), or unconsumed input that
 * starts like a frame header (a frame cut short; 1-3 bytes are a header cut short). Other
 * leftovers, such as tags the parser does not know, are tolerated. */
static int mp3_check_end(struct mp3_job *j, const struct audio_input *in)
{
    long accurate = 0, fill = 0;
    double unused;
    off_t length = mpg123_length(j->mh);
    if (mpg123_getstate(j->mh, MPG123_ACCURATE, &accurate, &unused) == MPG123_OK && accurate &&
        length > 0 && j->n_frames < (uint64_t)length)
        return errmsg_set(j->e, ERR_FORMAT,
                          "audio: MP3 data truncated (%llu of %lld samples present)",
                          (unsigned long long)j->n_frames, (long long)length);
    if (mpg123_getstate(j->mh, MPG123_BUFFERFILL, &fill, &unused) != MPG123_OK || fill <= 0 ||
        (size_t)fill > in->len)
        return ERR_OK;
    const unsigned char *tail = (const unsigned char *)in->data + in->len - (size_t)fill;
    bool is_cut_header = fill < 4 && tail[0] == 0xff && (fill < 2 || (tail[1] & 0xe0) == 0xe0);
    if (is_cut_header || is_mpeg_frame(tail, (size_t)fill))
        return errmsg_set(j->e, ERR_FORMAT, "audio: MP3 data truncated (last frame incomplete)");
    log_debug("audio: %ld unparsed bytes after the last MP3 frame", fill);
    return ERR_OK;
}

static int mp3_decode(const struct audio_input *in, struct audio_info *info, struct pcm_out *pcm,
                      struct errmsg *e)
{
    struct mp3_job j = {.lim = limits_of(in->limits), .pcm = pcm, .e = e};
    int rc = mp3_open(&j, in);
    while (rc == ERR_OK) {
        off_t num;
        unsigned char *audio;
        size_t bytes;
        int r = mpg123_decode_frame(j.mh, &num, &audio, &bytes);
        if (r == MPG123_NEW_FORMAT)
            rc = mp3_new_format(&j);
        else if (r == MPG123_OK)
            rc = mp3_frame(&j, audio, bytes);
        else if (r == MPG123_NEED_MORE || r == MPG123_DONE)
            break;
        else
            rc = errmsg_set(e, ERR_FORMAT, "audio: invalid MP3 data (%s)", mpg123_strerror(j.mh));
    }
    if (rc == ERR_OK) rc = mp3_check_end(&j, in);
    if (rc == ERR_OK && j.n_frames == 0)
        rc = errmsg_set(e, ERR_FORMAT, "audio: MP3 data has no audio frames");
    if (rc == ERR_OK) {
        info->sample_rate_hz = (uint32_t)j.rate;
        info->n_channels = (uint32_t)j.n_channels;
        info->n_frames = j.n_frames;
    }
    mpg123_delete(j.mh); // NULL-safe
    return rc;
}

/* ---- dispatch ---- */

int audio_decode(const struct audio_input *in, struct audio_info *info, float **pcm,
                 struct errmsg *e)
{
    if (in->format != AUDIO_FORMAT_WAV && in->format != AUDIO_FORMAT_MP3)
        return errmsg_set(e, ERR_UNSUPPORTED, "audio: format not supported (wav, mp3)");
    if (in->len == 0) return errmsg_set(e, ERR_FORMAT, "audio: data is empty");
    enum audio_format real = audio_sniff(in->data, in->len);
    if (real != in->format) {
        if (real == AUDIO_FORMAT_UNKNOWN)
            return errmsg_set(e, ERR_FORMAT, "audio: data is not %s audio",
                              audio_format_name(in->format));
        return errmsg_set(e, ERR_FORMAT, "audio: data is %s, not %s", audio_format_name(real),
                          audio_format_name(in->format));
    }
    struct pcm_out out = {0};
    struct audio_info ai = {.format = in->format};
    int rc = in->format == AUDIO_FORMAT_WAV ? wav_decode(in, &ai, pcm ? &out : NULL, e)
                                            : mp3_decode(in, &ai, pcm ? &out : NULL, e);
    if (rc != ERR_OK) {
        mem_free(out.p);
        return rc;
    }
    ai.duration_ms = ai.n_frames * 1000 / ai.sample_rate_hz;
    *info = ai;
    if (pcm) *pcm = out.p; // set: n_frames >= 1
    return ERR_OK;
}
