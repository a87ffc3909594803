/* mmproj-synth: writes a synthetic multimodal projector GGUF (engine/mtmd/clip_synth.h) with
 * seeded random weights and a real projector type's layout, for tests and benchmarks. */
#include "engine/mtmd/clip_synth.h"
#include "engine/mtmd/clip_synth_audio.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("usage: mmproj-synth [options] -o OUT.gguf\n"
           "Writes a projector with seeded random weights and the layout of a real one.\n"
           "  --projector NAME  gemma3 (SigLIP ViT, average pool, RMS norm, projection),\n"
           "                    qwen2.5vl_merger (ViT with 2-D RoPE, window attention,\n"
           "                    SwiGLU, 2x2 patch merger; give --merge 2) or\n"
           "                    ultravox (audio: Whisper encoder, stacking, SwiGLU MLP)\n"
           "  --image N         image side in pixels (32)\n"
           "  --patch N         patch side (2)\n"
           "  --embd N          ViT width (128)\n"
           "  --layers N        ViT blocks (4)\n"
           "  --heads N         attention heads (4)\n"
           "  --ffn N           feed-forward width (512)\n"
           "  --merge N         pooling kernel side (1; real Gemma 3 projectors use 4)\n"
           "  --wa N            qwen2.5vl: every N-th block attends fully (0: all)\n"
           "  --out N           projection width = the text model's n_embd (128)\n"
           "  --type T          f32 | f16 | q8_0 for the block matrices (f16)\n"
           "  --seed N          random seed (1)\n"
           "ultravox only (--embd, --layers, --heads, --ffn, --out, --type f32|f16, --seed\n"
           "apply; defaults 64, 2, 4, 128, 128, f32):\n"
           "  --mel N           mel bins (80)\n"
           "  --stack N         frames stacked per embedding (8)\n"
           "  --proj-ffn N      projector MLP width (128)\n"
           "  -o, --output F    output file (required)\n"
           "SigLIP-400M (Gemma 3's encoder): --image 896 --patch 14 --embd 1152 --layers 27\n"
           "--heads 16 --ffn 4304 --merge 4.\n");
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > (1L << 30)) return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    struct clip_synth_params p = clip_synth_params_default();
    struct clip_synth_audio_params au = clip_synth_audio_params_default();
    const char *type = NULL;
    uint64_t seed = 1;
    int shared[5] = {-1, -1, -1, -1, -1}; // --embd, --layers, --heads, --ffn, --out when given
    const char *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!v) {
            fprintf(stderr, "mmproj-synth: %s needs a value\n", a);
            return 1;
        }
        i++;
        int bad = 0;
        if (!strcmp(a, "--projector"))
            p.projector = v;
        else if (!strcmp(a, "--image"))
            bad = parse_int(v, &p.image_size);
        else if (!strcmp(a, "--patch"))
            bad = parse_int(v, &p.patch_size);
        else if (!strcmp(a, "--embd"))
            bad = parse_int(v, &shared[0]);
        else if (!strcmp(a, "--layers"))
            bad = parse_int(v, &shared[1]);
        else if (!strcmp(a, "--heads"))
            bad = parse_int(v, &shared[2]);
        else if (!strcmp(a, "--ffn"))
            bad = parse_int(v, &shared[3]);
        else if (!strcmp(a, "--merge"))
            bad = parse_int(v, &p.n_merge);
        else if (!strcmp(a, "--wa"))
            bad = parse_int(v, &p.n_wa_pattern);
        else if (!strcmp(a, "--out"))
            bad = parse_int(v, &shared[4]);
        else if (!strcmp(a, "--mel"))
            bad = parse_int(v, &au.n_mel);
        else if (!strcmp(a, "--stack"))
            bad = parse_int(v, &au.n_stack);
        else if (!strcmp(a, "--proj-ffn"))
            bad = parse_int(v, &au.n_proj_ff);
        else if (!strcmp(a, "--type"))
            type = v;
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            out_path = v;
        else {
            fprintf(stderr, "mmproj-synth: unknown option %s (see --help)\n", a);
            return 1;
        }
        if (bad) {
            fprintf(stderr, "mmproj-synth: bad value for %s: %s\n", a, v);
            return 1;
        }
    }
    if (!out_path) {
        fprintf(stderr, "mmproj-synth: -o OUT.gguf is required (see --help)\n");
        return 1;
    }
    int *const fields[2][5] = {{&p.n_embd, &p.n_layer, &p.n_head, &p.n_ff, &p.n_out},
                               {&au.n_embd, &au.n_layer, &au.n_head, &au.n_ff, &au.n_out}};
    const bool is_audio = !strcmp(p.projector, "ultravox");
    for (int k = 0; k < 5; k++)
        if (shared[k] >= 0) *fields[is_audio][k] = shared[k];
    if (type) p.type = au.type = type;
    p.seed = au.seed = seed;
    struct gguf_writer *w = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = is_audio ? clip_synth_audio_build(&au, &w, &err) : clip_synth_build(&p, &w, &err);
    if (rc == ERR_OK) rc = gguf_writer_to_file(w, out_path, &err);
    gguf_writer_free(w);
    if (rc != ERR_OK) {
        fprintf(stderr, "mmproj-synth: %s\n", err.msg[0] ? err.msg : err_str(rc));
        return 1;
    }
    return 0;
}
