/* engine/model against the reference implementation's greedy goldens on the shared
 * stories260K models (F32, F16, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1) and the v1 file against v3. A
 * separate binary from test_model because it is the slow one under ASan.
 *
 * Strict: every case of every type reproduces all 64 greedy ids, and for every type the
 * log-probabilities of the first 16 positions (the chosen token and the other top-5 entries)
 * agree within 1e-3 (the bound for F32; the quantized types meet it too). The engine
 * follows the reference's x86 (AVX2) arithmetic op by op, so its logits equal the reference's
 * bit for bit on these cases; what remains is the goldens' printing to 5 decimals. Measured
 * worst errors (chosen / top 5): F32 5.8e-6 / 6.2e-6, F16 6.0e-6 / 6.1e-6, Q8_0 5.7e-6 /
 * 6.0e-6, Q5_0 5.8e-6 / 6.2e-6, Q5_1 5.7e-6 / 5.7e-6, Q4_0 6.4e-6 / 6.3e-6, Q4_1 5.9e-6 /
 * 6.5e-6. The bound keeps room for libm differences in the few expf/cosf/sinf calls. The
 * scalar kernels (no AVX2, or LLAMAPI_NO_SIMD=1) sum in element order instead, so without
 * the SIMD kernels the comparison is skipped.
 *
 * Run without LLAMAPI_ISA (or LLAMAPI_NO_SIMD), the binary runs the goldens once per kernel
 * set the CPU has (test_golden_path_*: a child process with LLAMAPI_ISA set; a set the CPU
 * lacks is reported skipped). AVX2 is held to the strict rule above. Other sets (AVX-512, which follows the
 * AVX2 arithmetic bit for bit and in fact meets the strict rule) are held to: log-probabilities
 * within 1e-3, and greedy tokens equal except where the engine's top two logits are within 1e-4
 * (a near-tie, reported by the test; that case's remaining tokens are then not compared). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/model.h"
#include "engine/quants/quants.h"
#include "engine/threadpool.h"
#include "util/mem.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <stdlib.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char *self_path; // argv[0], for the per-path child runs

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void log_softmax(const float *x, int n, double *out)
{
    double mx = x[0], sum = 0.0;
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++)
        sum += exp((double)x[i] - mx);
    const double lse = mx + log(sum);
    for (int i = 0; i < n; i++)
        out[i] = (double)x[i] - lse;
}

static void skip_unless(const char *path)
{
    if (access(path, R_OK) != 0) {
        printf("skip: %s absent\n", path);
        skip();
    }
}

/* Decodes one golden case greedily; returns the number of generated tokens equal to the
 * reference's before the first difference, and records log-probability errors (chosen token,
 * others). */
static bool strict_path(void)
{
    const enum quant_simd s = quant_simd_active();
    return s == QUANT_SIMD_AVX2 || s == QUANT_SIMD_AVX2_VNNI;
}

/* Gap between the two largest logits. */
static double top2_gap(const float *x, int n)
{
    int a = argmax(x, n), b = a == 0 ? 1 : 0;
    for (int i = 0; i < n; i++)
        if (i != a && x[i] > x[b]) b = i;
    return (double)x[a] - x[b];
}

static int run_case(struct engine_model *m, struct threadpool *tp, json_t *c, double max_lp_err[2])
{
    json_t *prompt = json_object_get(c, "prompt_tokens"), *want = json_object_get(c, "tokens");
    json_t *tops = json_object_get(c, "top_logprobs");
    const int n_prompt = (int)json_array_size(prompt), n_gen = (int)json_array_size(want);
    const int n_vocab = engine_model_info(m)->n_vocab;
    int32_t toks[512];
    assert_true(n_prompt > 0 && n_prompt < 512);
    for (int i = 0; i < n_prompt; i++)
        toks[i] = (int32_t)json_integer_value(json_array_get(prompt, (size_t)i));
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(m, n_prompt + n_gen + 1, &s), ERR_OK);
    struct errmsg err = {{0}};
    struct engine_batch_item it = {.seq = s, .tokens = toks, .n_tokens = n_prompt};
    assert_int_equal(engine_decode(m, tp, &it, 1, &err), ERR_OK);
    double *lp = mem_alloc((size_t)n_vocab * sizeof *lp);
    int matched = 0;
    for (int i = 0; i < n_gen; i++) {
        const float *logits = engine_seq_logits(s);
        int32_t tok = argmax(logits, n_vocab);
        if ((size_t)i < json_array_size(tops)) {
            log_softmax(logits, n_vocab, lp);
            json_t *top = json_object_get(json_array_get(tops, (size_t)i), "top");
            for (size_t k = 0; k < json_array_size(top); k++) {
                json_t *pair = json_array_get(top, k);
                int id = (int)json_integer_value(json_array_get(pair, 0));
                double ref = json_number_value(json_array_get(pair, 1));
                double d = fabs(lp[id] - ref);
                double *e = &max_lp_err[k == 0 ? 0 : 1];
                *e = d > *e ? d : *e;
            }
        }
        if (tok != (int32_t)json_integer_value(json_array_get(want, (size_t)i))) {
            if (!strict_path() && top2_gap(logits, n_vocab) < 1e-4) {
                printf("near-tie at generated token %d (top-2 gap %.2e): the rest of this case "
                       "is not compared\n",
                       i, top2_gap(logits, n_vocab));
                matched = n_gen;
            }
            break;
        }
        matched++;
        it.tokens = &tok;
        it.n_tokens = 1;
        assert_int_equal(engine_decode(m, tp, &it, 1, &err), ERR_OK);
    }
    mem_free(lp);
    engine_seq_free(s);
    return matched;
}

#define LP_TOL 1e-3 // log-probability bound, chosen token and top 5

static void golden(const char *model_path, const char *golden_path)
{
    skip_unless(model_path);
    skip_unless(golden_path);
    quant_init();
    if (!quant_using_avx2()) {
        printf("skip: the goldens hold the reference's x86 SIMD arithmetic; scalar kernels in "
               "use\n");
        skip();
    }
    json_error_t jerr;
    json_t *root = json_load_file(golden_path, 0, &jerr);
    assert_non_null(root);
    struct engine_model *m;
    struct errmsg err = {{0}};
    if (engine_model_load(model_path, &m, &err) != ERR_OK) fail_msg("%s: %s", model_path, err.msg);
    struct threadpool *tp;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    json_t *cases = json_object_get(root, "cases");
    assert_true(json_array_size(cases) > 0);
    double max_lp_err[2] = {0.0, 0.0};
    const int n_cases = (int)json_array_size(cases);
    int n_full = 0, n_matched = 0, n_total = 0;
    for (int i = 0; i < n_cases; i++) {
        json_t *c = json_array_get(cases, (size_t)i);
        int n_gen = (int)json_array_size(json_object_get(c, "tokens"));
        assert_int_equal(n_gen, 64);
        int matched = run_case(m, tp, c, max_lp_err);
        if (matched < n_gen)
            printf("%s case %d: first difference at generated token %d\n", model_path, i, matched);
        n_full += matched == n_gen;
        n_matched += matched;
        n_total += n_gen;
    }
    threadpool_free(tp);
    engine_model_free(m);
    json_decref(root);
    printf("%s: %d of %d cases match all tokens, %d of %d tokens before the first miss\n",
           model_path, n_full, n_cases, n_matched, n_total);
    printf("%s [%s]: log-prob error %.2e (chosen) %.2e (top 5)\n", model_path, quant_simd_name(),
           max_lp_err[0], max_lp_err[1]);
    assert_int_equal(n_full, n_cases);
    assert_true(max_lp_err[0] <= LP_TOL);
    assert_true(max_lp_err[1] <= LP_TOL);
}

#define SM "../shared/models/llama/"
#define SG "../shared/golden/"

static void test_golden_f32(void **state)
{
    (void)state;
    golden(SM "stories260K.gguf", SG "stories260K.greedy.json");
}
static void test_golden_f16(void **state)
{
    (void)state;
    golden(SM "stories260K-F16.gguf", SG "stories260K-F16.greedy.json");
}
static void test_golden_q8_0(void **state)
{
    (void)state;
    golden(SM "stories260K-Q8_0.gguf", SG "stories260K-Q8_0.greedy.json");
}
static void test_golden_q5_0(void **state)
{
    (void)state;
    golden(SM "stories260K-Q5_0.gguf", SG "stories260K-Q5_0.greedy.json");
}
static void test_golden_q5_1(void **state)
{
    (void)state;
    golden(SM "stories260K-Q5_1.gguf", SG "stories260K-Q5_1.greedy.json");
}
static void test_golden_q4_0(void **state)
{
    (void)state;
    golden(SM "stories260K-Q4_0.gguf", SG "stories260K-Q4_0.greedy.json");
}
static void test_golden_q4_1(void **state)
{
    (void)state;
    golden(SM "stories260K-Q4_1.gguf", SG "stories260K-Q4_1.greedy.json");
}
static void test_golden_v1_file(void **state)
{
    (void)state;
    // Same weights in the GGUF v1 layout (context 512): the same greedy continuation.
    golden(SM "tinyllamas-stories-260k-f32.gguf", SG "stories260K.greedy.json");
}

/* Runs this binary again with LLAMAPI_ISA=isa: the goldens on that kernel set. */
static void run_path(const char *isa, enum quant_simd set)
{
    quant_init();
    if (!quant_traits_simd(QUANT_F32, set)) {
        printf("skip: the %s kernel set needs CPU features this machine lacks\n", isa);
        skip();
    }
    setenv("LLAMAPI_ISA", isa, 1);
    pid_t pid;
    char *argv[] = {self_path, NULL};
    int rc = posix_spawn(&pid, self_path, NULL, NULL, argv, environ);
    unsetenv("LLAMAPI_ISA");
    assert_int_equal(rc, 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the goldens failed on the %s kernel set (output above)", isa);
}

static void test_golden_path_avx2(void **state)
{
    (void)state;
    run_path("avx2", QUANT_SIMD_AVX2);
}

static void test_golden_path_avx512(void **state)
{
    (void)state;
    run_path("avx512", QUANT_SIMD_AVX512);
}

int main(int argc, char **argv)
{
    (void)argc;
    self_path = argv[0];
    if (!getenv("LLAMAPI_ISA") && !getenv("LLAMAPI_NO_SIMD")) { // one child per kernel set
        const struct CMUnitTest paths[] = {
            cmocka_unit_test(test_golden_path_avx2),
            cmocka_unit_test(test_golden_path_avx512),
        };
        return cmocka_run_group_tests(paths, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_f32),  cmocka_unit_test(test_golden_f16),
        cmocka_unit_test(test_golden_q8_0), cmocka_unit_test(test_golden_q5_0),
        cmocka_unit_test(test_golden_q5_1), cmocka_unit_test(test_golden_q4_0),
        cmocka_unit_test(test_golden_q4_1), cmocka_unit_test(test_golden_v1_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
