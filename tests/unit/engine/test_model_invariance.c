/* engine/model batch invariance (the default numerics): a prompt's logits, and the logits of
 * the greedy tokens after it, are the same bits whether the prompt is decoded whole, in chunks
 * of varying sizes, after a cached prefix (truncate and continue), or in steps shared with
 * other sequences' decode tokens and prompt chunks, for every tensor type, on synthetic llama
 * (GQA) and qwen2 models with prompts longer than a key tile and than the reference's 64-token
 * switch. The binary runs the tests with the kernels kernels_init selects, then runs itself again
 * with LLAMAPI_NO_SIMD=1 (and LLAMAPI_NO_VNNI=1 where AVX-VNNI is in use) over a subset of the
 * types, so every kernel set the machine has is checked; a set the machine lacks is reported
 * as skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/attn.h"
#include "engine/kernels.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/gguf/synth.h"
#include "engine/threadpool.h"
#include "util/mem.h"

#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define N_PROMPT 100 // over a key tile, and over the reference's 64-token switch
#define N_GEN    6
#define N_CTX    512

struct run {
    struct engine_model *m;
    struct threadpool *tp;
    int n_vocab;
    int32_t prompt[N_PROMPT];
    float *want; // (1 + N_GEN) logits rows of the whole-prompt run: prompt, then each token
    int32_t gen[N_GEN];
};

static void synth_file(const struct synth_params *p, char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/test_invariance_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct gguf_writer *w;
    struct errmsg err = {{0}};
    if (synth_build(p, &w, &err) != ERR_OK) fail_msg("synth: %s", err.msg);
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void decode(struct run *r, struct engine_batch_item *items, int n)
{
    struct errmsg err = {{0}};
    if (engine_decode(r->m, r->tp, items, n, &err) != ERR_OK) fail_msg("decode: %s", err.msg);
}

static void expect_logits(const struct run *r, const struct engine_seq *s, int row,
                          const char *what)
{
    const float *got = engine_seq_logits(s);
    assert_non_null(got);
    const float *want = r->want + (size_t)row * (size_t)r->n_vocab;
    for (int i = 0; i < r->n_vocab; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: logits row %d differ at %d: %.9g vs %.9g (whole prompt)", what, row, i,
                     got[i], want[i]);
}

/* The baseline: the whole prompt in one step, then N_GEN greedy tokens one by one. */
static void run_whole(struct run *r)
{
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(r->m, N_CTX, &s), ERR_OK);
    struct engine_batch_item it = {.seq = s, .tokens = r->prompt, .n_tokens = N_PROMPT};
    decode(r, &it, 1);
    for (int k = 0; k <= N_GEN; k++) {
        memcpy(r->want + (size_t)k * (size_t)r->n_vocab, engine_seq_logits(s),
               sizeof(float) * (size_t)r->n_vocab);
        if (k == N_GEN) break;
        r->gen[k] = argmax(engine_seq_logits(s), r->n_vocab);
        it = (struct engine_batch_item){
            .seq = s, .tokens = &r->gen[k], .n_tokens = 1, .is_sampled = true};
        decode(r, &it, 1);
    }
    engine_seq_free(s);
}

/* The same prompt in chunks of the given sizes (cycled). */
static void run_chunked(struct run *r, const int *sizes, int n_sizes, const char *what)
{
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(r->m, N_CTX, &s), ERR_OK);
    for (int t = 0, c = 0; t < N_PROMPT; c++) {
        int n = sizes[c % n_sizes];
        n = n < N_PROMPT - t ? n : N_PROMPT - t;
        struct engine_batch_item it = {.seq = s, .tokens = r->prompt + t, .n_tokens = n};
        decode(r, &it, 1);
        t += n;
    }
    expect_logits(r, s, 0, what);
    engine_seq_free(s);
}

/* A cached prefix: the first n_keep prompt tokens and then other tokens, truncated back to
 * n_keep, then the rest of the prompt in one step (the prompt cache's path). */
static void run_cached(struct run *r, int n_keep)
{
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(r->m, N_CTX, &s), ERR_OK);
    int32_t other[N_PROMPT];
    memcpy(other, r->prompt, sizeof other);
    for (int i = n_keep; i < N_PROMPT; i++)
        other[i] = (other[i] * 7 + 3) % r->n_vocab;
    struct engine_batch_item it = {.seq = s, .tokens = other, .n_tokens = N_PROMPT};
    decode(r, &it, 1);
    engine_seq_truncate(s, n_keep);
    it = (struct engine_batch_item){
        .seq = s, .tokens = r->prompt + n_keep, .n_tokens = N_PROMPT - n_keep};
    decode(r, &it, 1);
    char what[64];
    snprintf(what, sizeof what, "cached prefix of %d", n_keep);
    expect_logits(r, s, 0, what);
    engine_seq_free(s);
}

/* The prompt in chunks of 40 in steps shared with another sequence's decode tokens and a third
 * sequence's prompt chunks, then the greedy tokens in steps shared with both. */
static void run_batched(struct run *r)
{
    struct engine_seq *x, *y, *z;
    assert_int_equal(engine_seq_new(r->m, N_CTX, &x), ERR_OK);
    assert_int_equal(engine_seq_new(r->m, N_CTX, &y), ERR_OK);
    assert_int_equal(engine_seq_new(r->m, N_CTX, &z), ERR_OK);
    int32_t y_tok[N_PROMPT], z_tok[N_CTX];
    for (int i = 0; i < N_PROMPT; i++)
        y_tok[i] = (r->prompt[i] * 5 + 1) % r->n_vocab;
    for (int i = 0; i < N_CTX; i++)
        z_tok[i] = (i * 31 + 11) % r->n_vocab;
    struct engine_batch_item it = {.seq = y, .tokens = y_tok, .n_tokens = 9};
    decode(r, &it, 1);
    int tx = 0, ty = 9, tz = 0;
    while (tx < N_PROMPT) {
        const int nx = N_PROMPT - tx < 40 ? N_PROMPT - tx : 40;
        struct engine_batch_item items[3] = {
            {.seq = y, .tokens = y_tok + ty, .n_tokens = 1, .is_sampled = true},
            {.seq = x, .tokens = r->prompt + tx, .n_tokens = nx},
            {.seq = z, .tokens = z_tok + tz, .n_tokens = 25},
        };
        decode(r, items, 3);
        tx += nx;
        ty++;
        tz += 25;
    }
    expect_logits(r, x, 0, "batched prompt");
    for (int k = 0; k < N_GEN; k++) {
        struct engine_batch_item items[3] = {
            {.seq = z, .tokens = z_tok + tz, .n_tokens = 1, .is_sampled = true},
            {.seq = y, .tokens = y_tok + ty, .n_tokens = 1, .is_sampled = true},
            {.seq = x, .tokens = &r->gen[k], .n_tokens = 1, .is_sampled = true},
        };
        // x beside both others, except at k = 2 and 4: then the others run first without it
        // and x alone after them
        decode(r, items, k % 2 ? 3 : 2 + (k % 3 == 0));
        if (k % 2 == 0 && k % 3 != 0) {
            struct engine_batch_item one = {
                .seq = x, .tokens = &r->gen[k], .n_tokens = 1, .is_sampled = true};
            decode(r, &one, 1);
        }
        tz++;
        ty++;
        char what[64];
        snprintf(what, sizeof what, "batched generation step %d", k);
        expect_logits(r, x, k + 1, what);
    }
    engine_seq_free(x);
    engine_seq_free(y);
    engine_seq_free(z);
}

/* n_swa: the sliding window of the families that have one (0: the arch's default). */
static void check_model_swa(const char *arch, const char *type, int n_swa)
{
    struct synth_params p = synth_params_default();
    p.arch = arch;
    p.type = type;
    if (n_swa > 0) p.n_swa = n_swa;
    p.n_layer = 2;
    p.n_embd = 256; // one K-quant super-block per row
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 512;
    p.n_vocab = synth_builtin_vocab_size(arch);
    p.n_ctx = N_CTX;
    p.seed = 11;
    char path[64];
    synth_file(&p, path, sizeof path);
    struct run r = {0};
    struct errmsg err = {{0}};
    if (engine_model_load(path, &r.m, &err) != ERR_OK) fail_msg("load: %s", err.msg);
    unlink(path);
    engine_model_set_numerics(r.m, ENGINE_NUMERICS_INVARIANT);
    assert_int_equal(threadpool_new(2, &r.tp), ERR_OK);
    r.n_vocab = engine_model_info(r.m)->n_vocab;
    r.want = mem_alloc(sizeof(float) * (size_t)r.n_vocab * (N_GEN + 1));
    assert_non_null(r.want);
    for (int i = 0; i < N_PROMPT; i++)
        r.prompt[i] = (int32_t)((i * 2654435761u + 17u) % (uint32_t)r.n_vocab);
    run_whole(&r);
    static const int ones[] = {1}, mixed[] = {7, 64, 1, 13, 2};
    run_chunked(&r, ones, 1, "one token per step");
    run_chunked(&r, mixed, 5, "chunks 7, 64, 1, 13, 2");
    run_cached(&r, 63);
    run_cached(&r, N_PROMPT - 1);
    run_batched(&r);
    mem_free(r.want);
    threadpool_free(r.tp);
    engine_model_free(r.m);
}

static void check_model(const char *arch, const char *type)
{
    check_model_swa(arch, type, 0);
}

#define TYPE_TEST(name, arch, type)                                                                \
    static void test_##name(void **state)                                                          \
    {                                                                                              \
        (void)state;                                                                               \
        check_model(arch, type);                                                                   \
    }
TYPE_TEST(llama_f32, "llama", "f32")
TYPE_TEST(llama_f16, "llama", "f16")
TYPE_TEST(llama_bf16, "llama", "bf16")
TYPE_TEST(llama_q8_0, "llama", "q8_0")
TYPE_TEST(llama_q4_0, "llama", "q4_0")
TYPE_TEST(llama_q4_1, "llama", "q4_1")
TYPE_TEST(llama_q5_0, "llama", "q5_0")
TYPE_TEST(llama_q5_1, "llama", "q5_1")
TYPE_TEST(llama_q4_k_m, "llama", "q4_k_m")
TYPE_TEST(llama_q6_k, "llama", "q6_k")
TYPE_TEST(qwen2_f32, "qwen2", "f32")
TYPE_TEST(qwen3_f16, "qwen3", "f16")

/* Windows shorter than the prompt (rings that wrap under the 512-position context are not
 * reached here; test_families covers those), the attention soft-cap and sinks. */
static void test_gemma2_window_softcap(void **state)
{
    (void)state;
    check_model_swa("gemma2", "f32", 24);
}

static void test_gpt_oss_window_sinks(void **state)
{
    (void)state;
    check_model_swa("gpt-oss", "f32", 24);
}

/* A prompt cache may reuse sampled positions only where the engine computes them as it
 * computes prompt tokens: quantized layer weights, or reference numerics. */
static void test_sampled_is_prompt(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        bool want;
    } cs[] = {{"f32", false}, {"f16", false}, {"q8_0", true}, {"q4_0", true}, {"q4_k_m", true}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        struct synth_params p = synth_params_default();
        p.type = cs[i].type;
        p.n_embd = 256;
        p.n_ff = 512;
        p.n_vocab = synth_builtin_vocab_size("llama");
        char path[64];
        synth_file(&p, path, sizeof path);
        struct engine_model *m;
        struct errmsg err = {{0}};
        if (engine_model_load(path, &m, &err) != ERR_OK) fail_msg("load: %s", err.msg);
        unlink(path);
        engine_model_set_numerics(m, ENGINE_NUMERICS_INVARIANT);
        if (engine_model_sampled_is_prompt(m) != cs[i].want)
            fail_msg("%s: sampled_is_prompt should be %d", cs[i].type, cs[i].want);
        engine_model_set_numerics(m, ENGINE_NUMERICS_REFERENCE);
        assert_true(engine_model_sampled_is_prompt(m));
        engine_model_free(m);
    }
}

/* Runs this binary again with env set; returns its exit status (0: passed). */
static int rerun(const char *self, const char *env)
{
    char *argv[] = {(char *)(uintptr_t)self, NULL};
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = mem_alloc(sizeof(char *) * (n + 3));
    assert_non_null(envp);
    memcpy(envp, environ, sizeof(char *) * n);
    envp[n] = (char *)(uintptr_t)env;
    envp[n + 1] = (char *)(uintptr_t) "LLAMAPI_INVARIANCE_CHILD=1";
    envp[n + 2] = NULL;
    pid_t pid;
    int status = -1;
    if (posix_spawn(&pid, self, NULL, NULL, argv, envp) == 0) waitpid(pid, &status, 0);
    mem_free(envp);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(void)
{
    kernels_init();
    printf("kernel set: %s, attention: %s\n", quant_simd_name(), attn_variant_name());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_f32),
        cmocka_unit_test(test_llama_f16),
        cmocka_unit_test(test_llama_bf16),
        cmocka_unit_test(test_llama_q8_0),
        cmocka_unit_test(test_llama_q4_0),
        cmocka_unit_test(test_llama_q4_1),
        cmocka_unit_test(test_llama_q5_0),
        cmocka_unit_test(test_llama_q5_1),
        cmocka_unit_test(test_llama_q4_k_m),
        cmocka_unit_test(test_llama_q6_k),
        cmocka_unit_test(test_qwen2_f32),
        cmocka_unit_test(test_qwen3_f16),
        cmocka_unit_test(test_gemma2_window_softcap),
        cmocka_unit_test(test_gpt_oss_window_sinks),
        cmocka_unit_test(test_sampled_is_prompt),
    };
    // The other kernel sets: the float types (the summation orders) and two block formats.
    const struct CMUnitTest subset[] = {
        cmocka_unit_test(test_llama_f32),
        cmocka_unit_test(test_llama_f16),
        cmocka_unit_test(test_llama_q8_0),
        cmocka_unit_test(test_llama_q4_k_m),
    };
    if (getenv("LLAMAPI_INVARIANCE_CHILD")) return cmocka_run_group_tests(subset, NULL, NULL);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    const char *simd = quant_simd_name();
    if (getenv("LLAMAPI_EMULATED")) {
        // Under qemu-user a spawned copy of this binary would be run by the host kernel, which
        // cannot; the scalar set is checked by the native run of this test.
        printf("skip: other kernel sets (emulated: no child processes)\n");
        return failed;
    }
    if (strcmp(simd, "scalar") == 0) {
        printf("skip: avx2 kernel set (not available or disabled here)\n");
    } else {
        printf("again with the scalar kernels:\n");
        fflush(stdout);
        failed += rerun("/proc/self/exe", "LLAMAPI_NO_SIMD=1") != 0;
    }
    if (strcmp(simd, "avx2+vnni") == 0) {
        printf("again with AVX2 without AVX-VNNI:\n");
        fflush(stdout);
        failed += rerun("/proc/self/exe", "LLAMAPI_NO_VNNI=1") != 0;
    } else {
        printf("skip: avx2+vnni kernel set (not available or disabled here)\n");
    }
    return failed;
}
