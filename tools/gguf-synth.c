/* gguf-synth: writes a synthetic GGUF model (random weights, real layout) for tests and
 * benchmarks. See --help. */
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "engine/gguf/synth.h"
#include "util/err.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gguf-synth [options] -o OUT.gguf\n"
            "Writes a model with seeded random weights and the tensor layout of a real one.\n"
            "  --arch NAME       llama | qwen2 | qwen2vl | qwen3 | gemma2 | gemma3 | phi3 |\n"
            "                    granite | smollm3 | olmo2 | qwen3moe | olmoe | granitemoe |\n"
            "                    gpt-oss | lfm2 | qwen35 | qwen35moe | mamba2 | granitehybrid |\n"
            "                    nemotron_h | nemotron_h_moe | lfm2moe | falcon-h1 | bert\n"
            "                    (llama);\n"
            "                    every feature of the family is on (see engine/gguf/synth.h)\n"
            "  --layers N        block count (2; smollm3 4, so one layer skips RoPE)\n"
            "  --embd N          embedding width (64)\n"
            "  --heads N         attention heads (4)\n"
            "  --heads-kv N      key/value heads, GQA when fewer (2)\n"
            "  --head-dim N      per-head width (embd / heads)\n"
            "  --ffn N           feed-forward width (128)\n"
            "  --vocab N         vocabulary size (built-in tokenizer size, at least %d)\n"
            "  --ctx N           context_length (256)\n"
            "  --tied            no output.weight: reuse token_embd (default separate)\n"
            "  --rope-base F     rope.freq_base (10000)\n"
            "  --eps F           norm epsilon (1e-5)\n"
            "  --type T          f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k\n"
            "                    iq4_nl iq4_xs mxfp4, or q4_k_m (Q4_K with Q6_K output, attn_v,\n"
            "                    ffn_down mix) (f32)\n"
            "  --seed N          random seed (1)\n"
            "  --swa N           sliding window of gemma2/gemma3/olmo2/gpt-oss (even layers\n"
            "                    slide, odd ones are global) or lfm2 (every attention layer)\n"
            "                    (gemma 8, olmo2 and lfm2 none; 0: none)\n"
            "  --ssm-state N     hybrids: delta-rule head width (qwen35) or Mamba-2 state\n"
            "                    size (min(128, head-dim) / min(128, max(16, embd / 4)))\n"
            "  --ssm-heads N     qwen35 value heads (embd / ssm-state) or Mamba-2 heads (2 * embd\n"
            "                    in heads of min(64, max(16, embd / 4)))\n"
            "  --ssm-groups N    qwen35 key heads (half the value heads) or Mamba-2 groups (2)\n"
            "  --experts N       experts per MoE layer (8)\n"
            "  --experts-used K  experts each token uses (2)\n"
            "  --vocab-from F    copy every tokenizer.* key from GGUF file F\n"
            "  --words           a vocabulary of whole English words and no byte tokens, its\n"
            "                    output rows favouring words (readable, valid UTF-8 gibberish)\n"
            "  --pooling N       write <arch>.pooling_type N (0 none, 1 mean, 2 cls, 3 last,\n"
            "                    4 rank); bert writes 1 unless given, decoders nothing\n"
            "  --cls-out N       a reranker's classification head with N outputs and N\n"
            "                    classifier.output_labels; bert: cls + cls.output, decoders:\n"
            "                    cls.output; pooling_type 4 unless --pooling says otherwise\n"
            "  -o, --output F    output file (required)\n"
            "  -h, --help        this text\n"
            "Rows whose length is not a multiple of a type's block fall back like the reference\n"
            "quantizer (q4_k->q5_0, q5_k->q5_1, q6_k->q8_0, q2_k/q3_k->q4_0, iq4_xs->iq4_nl,\n"
            "else f16).\n",
            synth_builtin_vocab_size("llama"));
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > (1L << 30)) return -1;
    *out = (int)v;
    return 0;
}

/* Returns 0 on success, 1 for a usage error (message printed), 2 for --help. */
static int parse_args(int argc, char **argv, struct synth_params *p, const char **out_path,
                      const char **vocab_path, bool *layers_set)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 2;
        if (!strcmp(a, "--words")) {
            p->is_words_vocab = true;
            continue;
        }
        if (!strcmp(a, "--tied")) {
            p->tied = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "gguf-synth: %s needs a value\n", a);
            return 1;
        }
        i++;
        if (!strcmp(a, "--arch"))
            p->arch = v;
        else if (!strcmp(a, "--layers"))
            bad = parse_int(v, &p->n_layer), *layers_set = true;
        else if (!strcmp(a, "--swa"))
            bad = parse_int(v, &p->n_swa);
        else if (!strcmp(a, "--ssm-state"))
            bad = parse_int(v, &p->ssm_state);
        else if (!strcmp(a, "--ssm-heads"))
            bad = parse_int(v, &p->ssm_heads);
        else if (!strcmp(a, "--ssm-groups"))
            bad = parse_int(v, &p->ssm_groups);
        else if (!strcmp(a, "--experts"))
            bad = parse_int(v, &p->n_expert);
        else if (!strcmp(a, "--experts-used"))
            bad = parse_int(v, &p->n_expert_used);
        else if (!strcmp(a, "--embd"))
            bad = parse_int(v, &p->n_embd);
        else if (!strcmp(a, "--heads"))
            bad = parse_int(v, &p->n_head);
        else if (!strcmp(a, "--heads-kv"))
            bad = parse_int(v, &p->n_head_kv);
        else if (!strcmp(a, "--head-dim"))
            bad = parse_int(v, &p->head_dim);
        else if (!strcmp(a, "--ffn"))
            bad = parse_int(v, &p->n_ff);
        else if (!strcmp(a, "--vocab"))
            bad = parse_int(v, &p->n_vocab);
        else if (!strcmp(a, "--ctx"))
            bad = parse_int(v, &p->n_ctx);
        else if (!strcmp(a, "--rope-base"))
            p->rope_base = strtof(v, NULL);
        else if (!strcmp(a, "--eps"))
            p->norm_eps = strtof(v, NULL);
        else if (!strcmp(a, "--type"))
            p->type = v;
        else if (!strcmp(a, "--seed"))
            p->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--pooling"))
            bad = parse_int(v, &p->pooling_type);
        else if (!strcmp(a, "--cls-out"))
            bad = parse_int(v, &p->n_cls_out);
        else if (!strcmp(a, "--vocab-from"))
            *vocab_path = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            *out_path = v;
        else {
            fprintf(stderr, "gguf-synth: unknown option %s (see --help)\n", a);
            return 1;
        }
        if (bad) {
            fprintf(stderr, "gguf-synth: bad value for %s: %s\n", a, v);
            return 1;
        }
    }
    if (!*out_path) {
        fprintf(stderr, "gguf-synth: -o OUT.gguf is required (see --help)\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct synth_params p = synth_params_default();
    const char *out_path = NULL, *vocab_path = NULL;
    bool layers_set = false;
    int prc = parse_args(argc, argv, &p, &out_path, &vocab_path, &layers_set);
    if (prc == 0 && !layers_set && strcmp(p.arch, "smollm3") == 0) p.n_layer = 4;
    if (prc == 2) {
        usage(stdout);
        return 0;
    }
    if (prc != 0) return 2;
    struct errmsg err = {{0}};
    struct gguf *vocab = NULL;
    if (vocab_path && gguf_open(vocab_path, &vocab, &err) != ERR_OK) {
        fprintf(stderr, "gguf-synth: %s\n", err.msg);
        return 1;
    }
    p.vocab_from = vocab;
    if (p.n_vocab == 0 && !vocab) p.n_vocab = synth_builtin_vocab_size(p.arch);
    struct gguf_writer *w = NULL;
    int rc = synth_build(&p, &w, &err);
    if (rc == ERR_OK) rc = gguf_writer_to_file(w, out_path, &err);
    gguf_writer_free(w);
    gguf_close(vocab);
    if (rc != ERR_OK) {
        fprintf(stderr, "gguf-synth: %s\n", err.msg[0] ? err.msg : err_str(rc));
        return 1;
    }
    return 0;
}
