/* reference-logits: prints, as JSON, what the reference implementation computes for a model:
 * the teacher-forced logits of every position of a fixed prompt (fed one token per decode) and
 * the greedy continuation after it, with the margin between the best two logits at each step.
 * Built and run by scripts/gen-family-goldens.sh against the reference's static libraries;
 * not part of the project's build.
 *
 * usage: reference-logits MODEL.gguf N_CTX N_GEN TOKEN...   (JSON on stdout) */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int decode_one(struct llama_context *ctx, llama_token tok, int pos)
{
    struct llama_batch b = llama_batch_init(1, 0, 1);
    b.n_tokens = 1;
    b.token[0] = tok;
    b.pos[0] = pos;
    b.n_seq_id[0] = 1;
    b.seq_id[0][0] = 0;
    b.logits[0] = 1;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf N_CTX N_GEN TOKEN...\n", argv[0]);
        return 2;
    }
    const int n_ctx = atoi(argv[2]), n_gen = atoi(argv[3]), n_prompt = argc - 4;
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = 64;
    cp.n_ubatch = 64;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    printf("{\"n_ctx\": %d, \"n_vocab\": %d, \"prompt\": [", n_ctx, n_vocab);
    for (int i = 0; i < n_prompt; i++)
        printf("%s%s", i ? ", " : "", argv[4 + i]);
    printf("],\n\"teacher_logits\": [\n");
    const float *lg = NULL;
    for (int i = 0; i < n_prompt; i++) {
        if (decode_one(ctx, atoi(argv[4 + i]), i) != 0) {
            fprintf(stderr, "decode failed at %d\n", i);
            return 1;
        }
        lg = llama_get_logits_ith(ctx, -1);
        printf("%s[", i ? ",\n" : "");
        for (int j = 0; j < n_vocab; j++)
            printf("%s%.8e", j ? "," : "", (double)lg[j]);
        printf("]");
    }
    printf("],\n\"greedy\": [");
    int pos = n_prompt;
    double margins[4096];
    for (int g = 0; g < n_gen && g < 4096; g++) {
        int best = 0, second = -1;
        for (int j = 1; j < n_vocab; j++) {
            if (lg[j] > lg[best]) {
                second = best;
                best = j;
            } else if (second < 0 || lg[j] > lg[second]) {
                second = j;
            }
        }
        margins[g] = (double)lg[best] - (double)lg[second];
        printf("%s%d", g ? ", " : "", best);
        if (decode_one(ctx, best, pos++) != 0) {
            fprintf(stderr, "decode failed at %d\n", pos - 1);
            return 1;
        }
        lg = llama_get_logits_ith(ctx, -1);
    }
    printf("],\n\"greedy_margin\": [");
    for (int g = 0; g < n_gen && g < 4096; g++)
        printf("%s%.4e", g ? ", " : "", margins[g]);
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
