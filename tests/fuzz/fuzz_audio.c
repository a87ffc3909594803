/* libFuzzer target: audio_decode() on arbitrary bytes as WAV or MP3 (first byte chooses).
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -D_POSIX_C_SOURCE=200809L \
 *   tests/fuzz/fuzz_audio.c src/media/audio.c src/util/{mem,err,log}.c \
 *   $(pkg-config --libs sndfile libmpg123) -o fuzz_audio */
#include "media/audio.h"
#include "util/mem.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 1) return 0;
    struct audio_limits lim = {.duration_ms_max = 20000};
    struct audio_input in = {.data = data + 1,
                             .len = len - 1,
                             .format = (data[0] & 1) ? AUDIO_FORMAT_MP3 : AUDIO_FORMAT_WAV,
                             .limits = &lim};
    struct audio_info info;
    struct errmsg e;
    float *pcm = NULL;
    int rc = audio_decode(&in, &info, (data[0] & 2) ? &pcm : NULL, &e);
    if (rc == ERR_OK && pcm) {
        volatile float sink = pcm[info.n_frames - 1];
        (void)sink;
    }
    mem_free(pcm);
    return 0;
}
