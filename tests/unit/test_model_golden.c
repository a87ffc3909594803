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
 * 6.5e-6. The bound keeps room for libm differences in the few expf/cosf/sinf calls.
 *
 * The aarch64 NEON kernels follow the same arithmetic, so they are held to the same.
 *
 * Tolerant, for the scalar references (LLAMAPI_NO_SIMD=1, LLAMAPI_ISA=scalar): they sum in
 * element order, and these tiny models amplify the last-bit differences far beyond 1e-3 (see
 * the bounds below, measured), so a greedy choice between two close tokens may go either way.
 * A differing token is accepted only at such a near-tie, which is reported by name
 * ("near-tie: <model> case <i> token <t>: ..."), and the rest of that case (a different
 * continuation) is not compared. */
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
#include <unistd.h>

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
#define LP_TOL 1e-3 // strict: log-probability bound, chosen token and top 5
/* Tolerant (the scalar references): measured worst errors over these models 5.3e-2 (chosen)
 * and 1.41e-1 (top 5, Q8_0); the summation order alone moves F32 by 2.9e-3. */
#define LP_TOL_CHOSEN_SCALAR 6e-2
#define LP_TOL_TOP_SCALAR    1.5e-1
/* A greedy pick may differ where the two tokens lie within the change the chosen-token error
 * allows to each of them. */
#define NEAR_TIE (2 * LP_TOL_CHOSEN_SCALAR)

static bool tolerant; // set per golden(): the kernels are not the x86 SIMD ones

static int run_case(struct engine_model *m, struct threadpool *tp, json_t *c, double max_lp_err[2],
                    const char *label, int case_no, bool *near_tie)
{
    *near_tie = false;
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
        const int32_t ref_tok = (int32_t)json_integer_value(json_array_get(want, (size_t)i));
        if (tok != ref_tok) {
            if (tolerant && ref_tok >= 0 && ref_tok < n_vocab) {
                log_softmax(logits, n_vocab, lp);
                const double gap = lp[tok] - lp[ref_tok];
                if (gap <= NEAR_TIE) {
                    printf("near-tie: %s case %d token %d: %d (log-prob %.6f) over the "
                           "reference's %d (%.6f), %.1e apart\n",
                           label, case_no, i, tok, lp[tok], ref_tok, lp[ref_tok], gap);
                    *near_tie = true;
                }
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

static void golden(const char *model_path, const char *golden_path)
{
    skip_unless(model_path);
    skip_unless(golden_path);
    quant_init();
    tolerant = !quant_follows_avx2();
    printf("%s: %s mode (kernels: %s)\n", model_path, tolerant ? "tolerant" : "strict",
           quant_simd_name());
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
        bool near_tie;
        int matched = run_case(m, tp, c, max_lp_err, model_path, i, &near_tie);
        if (matched < n_gen && !near_tie)
            printf("%s case %d: first difference at generated token %d\n", model_path, i, matched);
        n_full += matched == n_gen || near_tie;
        n_matched += matched;
        n_total += n_gen;
    }
    threadpool_free(tp);
    engine_model_free(m);
    json_decref(root);
    printf("%s: %d of %d cases match all tokens, %d of %d tokens before the first miss\n",
           model_path, n_full, n_cases, n_matched, n_total);
    printf("%s: log-prob error %.2e (chosen) %.2e (top 5)\n", model_path, max_lp_err[0],
           max_lp_err[1]);
    assert_int_equal(n_full, n_cases);
    assert_true(max_lp_err[0] <= (tolerant ? LP_TOL_CHOSEN_SCALAR : LP_TOL));
    assert_true(max_lp_err[1] <= (tolerant ? LP_TOL_TOP_SCALAR : LP_TOL));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_f32),  cmocka_unit_test(test_golden_f16),
        cmocka_unit_test(test_golden_q8_0), cmocka_unit_test(test_golden_q5_0),
        cmocka_unit_test(test_golden_q5_1), cmocka_unit_test(test_golden_q4_0),
        cmocka_unit_test(test_golden_q4_1), cmocka_unit_test(test_golden_v1_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
