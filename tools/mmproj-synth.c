/* mmproj-synth: writes a synthetic multimodal projector GGUF (engine/mtmd/clip_synth.h) with
 * seeded random weights and a real projector type's layout, for tests and benchmarks. */
#include "engine/mtmd/clip_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("usage: mmproj-synth [options] -o OUT.gguf\n"
           "Writes a projector with seeded random weights and the layout of a real one.\n"
           "  --projector NAME  gemma3 (SigLIP ViT, average pool, RMS norm, projection) or\n"
           "                    qwen2.5vl_merger (ViT with 2-D RoPE, window attention,\n"
           "                    SwiGLU, 2x2 patch merger; give --merge 2)\n"
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
            bad = parse_int(v, &p.n_embd);
        else if (!strcmp(a, "--layers"))
            bad = parse_int(v, &p.n_layer);
        else if (!strcmp(a, "--heads"))
            bad = parse_int(v, &p.n_head);
        else if (!strcmp(a, "--ffn"))
            bad = parse_int(v, &p.n_ff);
        else if (!strcmp(a, "--merge"))
            bad = parse_int(v, &p.n_merge);
        else if (!strcmp(a, "--wa"))
            bad = parse_int(v, &p.n_wa_pattern);
        else if (!strcmp(a, "--out"))
            bad = parse_int(v, &p.n_out);
        else if (!strcmp(a, "--type"))
            p.type = v;
        else if (!strcmp(a, "--seed"))
            p.seed = strtoull(v, NULL, 10);
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
    struct gguf_writer *w = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = clip_synth_build(&p, &w, &err);
    if (rc == ERR_OK) rc = gguf_writer_to_file(w, out_path, &err);
    gguf_writer_free(w);
    if (rc != ERR_OK) {
        fprintf(stderr, "mmproj-synth: %s\n", err.msg[0] ? err.msg : err_str(rc));
        return 1;
    }
    return 0;
}
