/* libFuzzer target for the projector loader (engine/mtmd/clip): any bytes must load cleanly
 * or fail with a code; a file that loads must preprocess and encode a small image without
 * reading outside its tensors. Seed it with a projector GGUF (../shared/models/mmproj/). */
#include "engine/mtmd/clip.h"
#include "engine/threadpool.h"
#include "util/mem.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct clip_model *c = NULL;
    struct errmsg err;
    if (clip_load_memory(data, size, &c, &err) != ERR_OK) return 0;
    const struct clip_info *in = clip_get_info(c);
    // bound the work a loaded file can ask for: small encoders only
    if ((int64_t)in->image_size * in->image_size <= 64 * 64 && in->n_layer <= 4 &&
        in->n_embd <= 256 && in->n_ff <= 1024 && in->n_out_embd <= 1024) {
        static const uint8_t px[5 * 3 * 3] = {1, 2, 3, 250, 128, 0};
        float *pixels = mem_alloc(sizeof(float) * 3 * (size_t)in->image_size * in->image_size);
        float *out = mem_alloc(sizeof(float) * (size_t)in->n_out_tokens * in->n_out_embd);
        struct threadpool *tp = NULL;
        if (pixels && out && threadpool_new(1, &tp) == ERR_OK &&
            clip_preprocess(c, px, 5, 3, pixels) == ERR_OK)
            (void)clip_encode(c, tp, pixels, out);
        threadpool_free(tp);
        mem_free(pixels);
        mem_free(out);
    }
    clip_free(c);
    return 0;
}
