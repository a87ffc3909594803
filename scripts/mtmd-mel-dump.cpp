// Writes the reference implementation's log-mel spectrogram of a 16-bit mono 16 kHz WAV as an
// audio projector preprocesses it: int32 n_windows, int32 n_mel, int32 n_frames, then the
// first n_frames floats of each mel band of the first window (the rest of a short clip's
// window is the appended silence, one constant). Built and run by gen-mtmd-goldens.sh
// against the reference's own build (its headers and static libraries), never by make.
// usage: mtmd-mel-dump MMPROJ.gguf IN.wav OUT.mel N_FRAMES
#include "clip.h"
#include "mtmd-audio.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s MMPROJ.gguf IN.wav OUT.mel N_FRAMES\n", argv[0]);
        return 1;
    }
    clip_context_params params = {};
    params.use_gpu = false;
    params.flash_attn_type = CLIP_FLASH_ATTN_TYPE_AUTO;
    params.warmup = false;
    clip_init_result res = clip_init(argv[1], params);
    if (!res.ctx_a) {
        fprintf(stderr, "no audio encoder in %s\n", argv[1]);
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 1;
    std::vector<unsigned char> wav;
    unsigned char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        wav.insert(wav.end(), buf, buf + n);
    fclose(f);
    // the canonical 44-byte header Python's wave module writes: PCM, mono, 16 kHz, 16 bits
    if (wav.size() < 44) return 1;
    std::vector<float> pcm;
    for (size_t i = 44; i + 1 < wav.size(); i += 2)
        pcm.push_back((float)(int16_t)(wav[i] | (wav[i + 1] << 8)) / 32768.0f);
    mtmd_audio_preprocessor_whisper pre(res.ctx_a);
    pre.initialize();
    std::vector<mtmd_audio_mel> mels;
    if (!pre.preprocess(pcm.data(), pcm.size(), mels) || mels.empty()) return 1;
    FILE *o = fopen(argv[3], "wb");
    if (!o) return 1;
    int32_t keep = atoi(argv[4]);
    if (keep < 1 || keep > mels[0].n_len) keep = (int32_t)mels[0].n_len;
    const int32_t head[3] = {(int32_t)mels.size(), (int32_t)mels[0].n_mel, keep};
    fwrite(head, sizeof head, 1, o);
    for (int64_t m = 0; m < mels[0].n_mel; m++)
        fwrite(mels[0].data.data() + m * mels[0].n_len, sizeof(float), (size_t)keep, o);
    fclose(o);
    clip_free(res.ctx_a);
    if (res.ctx_v) clip_free(res.ctx_v);
    return 0;
}
