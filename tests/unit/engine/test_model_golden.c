/* engine/model against the reference implementation's greedy goldens on the shared
 * stories260K models (F32, F16, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1) and the v1 file against v3. A
 * separate binary from test_model because it is the slow one under ASan.
 *
 * Strict, in reference numerics (ENGINE_NUMERICS_REFERENCE, set on the model): every case of
 * every type reproduces all 64 greedy ids, and for every type the log-probabilities of the
 * first 16 positions (the chosen token and the other top-5 entries) agree within 1e-3 (the
 * issue's bound for F32; the quantized types meet it too). In those numerics the engine
 * follows the reference's x86 (AVX2) arithmetic op by op, so its logits equal the reference's
 * bit for bit on these cases; what remains is the goldens' printing to 5 decimals. Measured
 * worst errors (chosen / top 5): F32 5.8e-6 / 6.2e-6, F16 6.0e-6 / 6.1e-6, Q8_0 5.7e-6 /
 * 6.0e-6, Q5_0 5.8e-6 / 6.2e-6, Q5_1 5.7e-6 / 5.7e-6, Q4_0 6.4e-6 / 6.3e-6, Q4_1 5.9e-6 /
 * 6.5e-6. The bound keeps room for libm differences in the few expf/cosf/sinf calls. The
 * scalar kernels (no AVX2, or LLAMAPI_NO_SIMD=1) sum in element order instead, so without
 * the SIMD kernels the strict comparison is skipped.
 *
 * Fidelity, in the default batch-invariant numerics (generated tokens fed as sampled): each
 * case is decoded teacher-forced along the golden tokens (so every position is compared in
 * the reference's context); log-probabilities within 1e-3 of the goldens, and our greedy
 * choice equals the golden token at every position except near-ties, where the golden token
 * is within 1e-4 of our best log-probability: each such position is printed by case, position
 * and token ids, and counted; a larger gap fails. These short prompts decoded one sequence at a
 * time are where the invariant numerics coincide with the reference's, so the measured errors
 * are the strict ones (<= 6.5e-6, no near-ties). Skipped on the scalar kernels too.
 *
 * Run without LLAMAPI_ISA (or LLAMAPI_NO_SIMD), the binary runs the goldens once per kernel
 * set the CPU has (test_golden_path_*: a child process with LLAMAPI_ISA set; a set the CPU
 * lacks is reported skipped). The AVX-512 set follows the AVX2 arithmetic bit for bit, and the
 * NEON sets (neon, dotprod, i8mm on aarch64) do for these formats, so all are held to the rules
 * above. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/kernels.h"
#include "engine/model/model.h"
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

/* Log-probability errors of one position against its golden top entries (chosen, others). */
static void compare_top(const double *lp, json_t *tops, int i, double max_lp_err[2])
{
    if ((size_t)i >= json_array_size(tops)) return;
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

/* What one case did. */
struct case_result {
    int matched;     // generated tokens equal to the golden's (before the first miss, strict)
    int n_near_ties; // teacher-forced: positions where another token won by < NEAR_TIE
    int n_misses;    // teacher-forced: positions where another token won by more
};

#define NEAR_TIE 1e-4 // log-probability gap under which a different greedy choice is a tie

/* Decodes one golden case. Strict (free-running): stops at the first token that differs from
 * the golden. Teacher-forced: always feeds the golden token and classifies differences. */
static struct case_result run_case(struct engine_model *m, struct threadpool *tp, json_t *c,
                                   int case_no, bool is_forced, double max_lp_err[2])
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
    struct case_result res = {0};
    bool is_clean = true;
    for (int i = 0; i < n_gen; i++) {
        const float *logits = engine_seq_logits(s);
        int32_t tok = argmax(logits, n_vocab);
        const int32_t gold = (int32_t)json_integer_value(json_array_get(want, (size_t)i));
        log_softmax(logits, n_vocab, lp);
        compare_top(lp, tops, i, max_lp_err);
        if (tok != gold) {
            if (!is_forced) break;
            const double gap = lp[tok] - lp[gold];
            if (gap < NEAR_TIE) {
                res.n_near_ties++;
                printf("near-tie: case %d position %d: token %d over golden %d by %.2e\n", case_no,
                       i, (int)tok, (int)gold, gap);
            } else {
                res.n_misses++;
                printf("miss: case %d position %d: token %d over golden %d by %.2e\n", case_no, i,
                       (int)tok, (int)gold, gap);
            }
            is_clean = false;
            tok = gold;
        }
        res.matched += is_clean;
        it.tokens = &tok;
        it.n_tokens = 1;
        it.is_sampled = true;
        assert_int_equal(engine_decode(m, tp, &it, 1, &err), ERR_OK);
    }
    mem_free(lp);
    engine_seq_free(s);
    return res;
}

#define LP_TOL 1e-3 // log-probability bound, chosen token and top 5

static void golden(const char *model_path, const char *golden_path, enum engine_numerics numerics)
{
    skip_unless(model_path);
    skip_unless(golden_path);
    kernels_init();
    const bool is_strict = numerics == ENGINE_NUMERICS_REFERENCE;
    if (!quant_follows_avx2()) {
        // Measured with LLAMAPI_NO_SIMD=1 in invariant numerics: log-prob errors up to 1.4e-1
        // and greedy misses, as before this mode existed.
        printf("skip: the goldens hold the reference's x86 SIMD arithmetic; the scalar kernels "
               "in use sum in element order\n");
        skip();
    }
    json_error_t jerr;
    json_t *root = json_load_file(golden_path, 0, &jerr);
    assert_non_null(root);
    struct engine_model *m;
    struct errmsg err = {{0}};
    if (engine_model_load(model_path, &m, &err) != ERR_OK) fail_msg("%s: %s", model_path, err.msg);
    engine_model_set_numerics(m, numerics);
    struct threadpool *tp;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    json_t *cases = json_object_get(root, "cases");
    assert_true(json_array_size(cases) > 0);
    double max_lp_err[2] = {0.0, 0.0};
    const int n_cases = (int)json_array_size(cases);
    int n_full = 0, n_matched = 0, n_total = 0, n_ties = 0, n_misses = 0;
    for (int i = 0; i < n_cases; i++) {
        json_t *c = json_array_get(cases, (size_t)i);
        int n_gen = (int)json_array_size(json_object_get(c, "tokens"));
        assert_int_equal(n_gen, 64);
        struct case_result r = run_case(m, tp, c, i, !is_strict, max_lp_err);
        if (is_strict && r.matched < n_gen)
            printf("%s case %d: first difference at generated token %d\n", model_path, i,
                   r.matched);
        n_full += r.matched == n_gen;
        n_matched += r.matched;
        n_total += n_gen;
        n_ties += r.n_near_ties;
        n_misses += r.n_misses;
    }
    threadpool_free(tp);
    engine_model_free(m);
    json_decref(root);
    const char *mode = is_strict ? "reference numerics" : "batch-invariant numerics";
    printf("%s (%s, %s): %d of %d cases match all tokens, %d of %d tokens before the first "
           "miss, %d near-ties, %d misses\n",
           model_path, mode, quant_simd_name(), n_full, n_cases, n_matched, n_total, n_ties,
           n_misses);
    printf("%s (%s): log-prob error %.2e (chosen) %.2e (top 5)\n", model_path, mode, max_lp_err[0],
           max_lp_err[1]);
    if (is_strict) assert_int_equal(n_full, n_cases);
    assert_int_equal(n_misses, 0);
    assert_true(max_lp_err[0] <= LP_TOL);
    assert_true(max_lp_err[1] <= LP_TOL);
}

#define SM "../shared/models/llama/"
#define SG "../shared/golden/"

/* Each model twice: strict in reference numerics, fidelity in the default numerics. */
#define GOLDEN_TEST(name, model, gold)                                                             \
    static void test_golden_##name(void **state)                                                   \
    {                                                                                              \
        (void)state;                                                                               \
        golden(SM model, SG gold, ENGINE_NUMERICS_REFERENCE);                                      \
    }                                                                                              \
    static void test_invariant_##name(void **state)                                                \
    {                                                                                              \
        (void)state;                                                                               \
        golden(SM model, SG gold, ENGINE_NUMERICS_INVARIANT);                                      \
    }
GOLDEN_TEST(f32, "stories260K.gguf", "stories260K.greedy.json")
GOLDEN_TEST(f16, "stories260K-F16.gguf", "stories260K-F16.greedy.json")
GOLDEN_TEST(q8_0, "stories260K-Q8_0.gguf", "stories260K-Q8_0.greedy.json")
GOLDEN_TEST(q5_0, "stories260K-Q5_0.gguf", "stories260K-Q5_0.greedy.json")
GOLDEN_TEST(q5_1, "stories260K-Q5_1.gguf", "stories260K-Q5_1.greedy.json")
GOLDEN_TEST(q4_0, "stories260K-Q4_0.gguf", "stories260K-Q4_0.greedy.json")
GOLDEN_TEST(q4_1, "stories260K-Q4_1.gguf", "stories260K-Q4_1.greedy.json")
// Same weights in the GGUF v1 layout (context 512): the same greedy continuation.
GOLDEN_TEST(v1_file, "tinyllamas-stories-260k-f32.gguf", "stories260K.greedy.json")

/* Runs this binary again with LLAMAPI_ISA=isa: the goldens on that kernel set. */
static void run_path(const char *isa, enum quant_simd set)
{
    kernels_init();
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

static void test_golden_path_neon(void **state)
{
    (void)state;
    run_path("neon", QUANT_SIMD_NEON);
}

static void test_golden_path_dotprod(void **state)
{
    (void)state;
    run_path("dotprod", QUANT_SIMD_NEON_DOTPROD);
}

static void test_golden_path_i8mm(void **state)
{
    (void)state;
    run_path("i8mm", QUANT_SIMD_NEON_I8MM);
}

int main(int argc, char **argv)
{
    (void)argc;
    self_path = argv[0];
    // One child per kernel set; under qemu-user (LLAMAPI_EMULATED) a child would be run by the
    // host kernel, so the set in use runs here and scripts/test-aarch64.sh sets LLAMAPI_ISA for
    // the others.
    if (!getenv("LLAMAPI_ISA") && !getenv("LLAMAPI_NO_SIMD") && !getenv("LLAMAPI_EMULATED")) {
        const struct CMUnitTest paths[] = {
            cmocka_unit_test(test_golden_path_avx2), cmocka_unit_test(test_golden_path_avx512),
            cmocka_unit_test(test_golden_path_neon), cmocka_unit_test(test_golden_path_dotprod),
            cmocka_unit_test(test_golden_path_i8mm),
        };
        return cmocka_run_group_tests(paths, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_f32),     cmocka_unit_test(test_golden_f16),
        cmocka_unit_test(test_golden_q8_0),    cmocka_unit_test(test_golden_q5_0),
        cmocka_unit_test(test_golden_q5_1),    cmocka_unit_test(test_golden_q4_0),
        cmocka_unit_test(test_golden_q4_1),    cmocka_unit_test(test_golden_v1_file),
        cmocka_unit_test(test_invariant_f32),  cmocka_unit_test(test_invariant_f16),
        cmocka_unit_test(test_invariant_q8_0), cmocka_unit_test(test_invariant_q5_0),
        cmocka_unit_test(test_invariant_q5_1), cmocka_unit_test(test_invariant_q4_0),
        cmocka_unit_test(test_invariant_q4_1), cmocka_unit_test(test_invariant_v1_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
