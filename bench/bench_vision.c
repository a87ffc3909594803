/* Image encode benchmark: one 448x448 image through a SigLIP-400M-shaped synthetic gemma3
 * projector (27 blocks, 1152 wide, 16 heads, FFN 4304, patch 14, so 1024 patches; 4x4
 * pooling to 64 embeddings of 128), F16 matrices, written to build/ by engine/mtmd/clip_synth
 * unless a projector path is given. Reports preprocess + encode wall time per image (best of
 * BENCH_VISION_REPS, default 2) on BENCH_VISION_THREADS threads (default 2).
 * scripts/bench-vision.sh runs it beside the reference's llama-mtmd-cli on the same file, image
 * and thread count and prints the ratio. Usage: bench_vision [projector.gguf] */
#include "engine/gguf/gguf_write.h"
#include "engine/mtmd/clip.h"
#include "engine/mtmd/clip_synth.h"
#include "engine/threadpool.h"
#include "util/clock.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SIDE 448

static int write_projector(const char *path)
{
    struct clip_synth_params p = clip_synth_params_default();
    p.image_size = SIDE;
    p.patch_size = 14;
    p.n_embd = 1152;
    p.n_layer = 27;
    p.n_head = 16;
    p.n_ff = 4304;
    p.n_merge = 4;
    p.n_out = 128;
    p.type = "f16";
    struct gguf_writer *w = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    int rc = clip_synth_build(&p, &w, &e);
    if (rc == ERR_OK) rc = gguf_writer_to_file(w, path, &e);
    gguf_writer_free(w);
    if (rc != ERR_OK) fprintf(stderr, "bench_vision: %s\n", e.msg);
    return rc;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "build/siglip400m-gemma3-448-f16.gguf";
    if (argc < 2 && access(path, R_OK) != 0 && write_projector(path) != ERR_OK) return 1;
    const int threads = getenv("BENCH_VISION_THREADS") ? atoi(getenv("BENCH_VISION_THREADS")) : 2;
    const int reps = getenv("BENCH_VISION_REPS") ? atoi(getenv("BENCH_VISION_REPS")) : 2;
    struct clip_model *c = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    if (clip_load(path, &c, &e) != ERR_OK) {
        fprintf(stderr, "bench_vision: %s: %s\n", path, e.msg);
        return 1;
    }
    const struct clip_info *in = clip_get_info(c);
    unsigned char *rgb = mem_alloc((size_t)SIDE * SIDE * 3);
    float *pix = mem_alloc(sizeof(float) * 3 * (size_t)in->image_size * in->image_size);
    float *out = mem_alloc(sizeof(float) * (size_t)in->n_out_tokens * in->n_out_embd);
    struct threadpool *tp = NULL;
    if (!rgb || !pix || !out || threadpool_new(threads > 0 ? threads : 1, &tp) != ERR_OK) return 1;
    for (size_t i = 0; i < (size_t)SIDE * SIDE * 3; i++)
        rgb[i] = (unsigned char)(i * 2654435761u >> 24);
    double best = 0;
    for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
        const double t0 = clock_now_ms();
        if (clip_preprocess(c, rgb, SIDE, SIDE, pix) != ERR_OK ||
            clip_encode(c, tp, pix, out) != ERR_OK)
            return 1;
        const double ms = clock_now_ms() - t0;
        if (r == 0 || ms < best) best = ms;
    }
    printf("image encode %dx%d, %s projector (%d blocks, %d wide, %d patches -> %d embeddings), "
           "%d threads: %.0f ms (best of %d)\n",
           SIDE, SIDE, in->projector_name, in->n_layer, in->n_embd,
           (in->image_size / in->patch_size) * (in->image_size / in->patch_size), in->n_out_tokens,
           threads, best, reps);
    threadpool_free(tp);
    mem_free(rgb);
    mem_free(pix);
    mem_free(out);
    clip_free(c);
    return 0;
}
