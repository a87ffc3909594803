/* engine/ssm: the recurrent kernels. The causal conv against a direct evaluation; the L2 norm's
 * result has unit length; the delta rule and the Mamba-2 scan against a double-precision model
 * of their definitions; every variant the machine runs (AVX2, AVX-512, NEON) against the scalar
 * references on random shapes, over several tokens of state, within a float tolerance (their
 * dots sum in other orders), and bit for bit against a portable model of the order its file
 * states; and that kernels_init installs the set the environment allows. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/cpufeat.h"
#include "engine/kernels.h"
#include "engine/ssm.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;

static float rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rnd() * scale;
}

static void test_conv(void **state)
{
    (void)state;
    enum { CH = 5, D = 3, T = 6 };
    float w[CH * (D + 1)], tail[CH * D] = {0}, x[T][CH], out[CH];
    fill(w, sizeof w / sizeof w[0], 1.0f);
    fill(&x[0][0], T * CH, 1.0f);
    for (int t = 0; t < T; t++) {
        ssm_conv_step_ref(0, CH, D, tail, x[t], w, out);
        for (int c = 0; c < CH; c++) {
            double want = 0.0;
            for (int k = 0; k <= D; k++) { // tap k reads the input D - k tokens back
                const int src = t - (D - k);
                want += src >= 0 ? (double)x[src][c] * w[c * (D + 1) + k] : 0.0;
            }
            assert_true(fabs(want - out[c]) < 1e-5);
        }
    }
}

static void test_l2norm(void **state)
{
    (void)state;
    float x[40], y[40];
    fill(x, 40, 3.0f);
    ssm_l2norm_ref(40, x, 1e-6f, y);
    double len = 0.0;
    for (int i = 0; i < 40; i++)
        len += (double)y[i] * y[i];
    assert_true(fabs(len - 1.0) < 1e-5);
}

/* The delta rule over T tokens against doubles. */
static void test_delta_model(void **state)
{
    (void)state;
    enum { N = 24, T = 5 };
    float s[N * N], q[N], k[N], v[N], out[N];
    double ms[N][N];
    fill(s, N * N, 0.5f);
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++)
            ms[i][j] = s[j * N + i]; // row j of the buffer is column j of S
    for (int t = 0; t < T; t++) {
        fill(q, N, 0.3f);
        fill(k, N, 0.3f);
        fill(v, N, 1.0f);
        const float decay = 0.9f, beta = 0.6f, sc = 0.25f;
        ssm_ref_kernels()->delta_step(N, s, q, k, v, decay, beta, sc, out);
        for (int j = 0; j < N; j++) {
            double sk = 0.0;
            for (int i = 0; i < N; i++)
                sk += (ms[i][j] *= decay) * k[i];
            const double d = (v[j] - sk) * beta;
            double o = 0.0;
            for (int i = 0; i < N; i++) {
                ms[i][j] += k[i] * d;
                o += ms[i][j] * q[i];
            }
            assert_true(fabs(o * sc - out[j]) < 1e-4);
        }
    }
}

/* The Mamba-2 scan of one head over T tokens against doubles. */
static void test_ssd_model(void **state)
{
    (void)state;
    enum { HD = 3, N = 20, T = 4 };
    float s[HD * N] = {0}, x[HD], b[N], c[N], y[HD];
    double ms[HD][N] = {{0}};
    for (int t = 0; t < T; t++) {
        fill(x, HD, 1.0f);
        fill(b, N, 1.0f);
        fill(c, N, 1.0f);
        ssm_ref_kernels()->ssd_step(HD, N, s, x, b, c, 0.8f, 0.5f, y);
        for (int i = 0; i < HD; i++) {
            double o = 0.0;
            for (int n = 0; n < N; n++) {
                ms[i][n] = ms[i][n] * 0.8 + b[n] * (x[i] * 0.5);
                o += ms[i][n] * c[n];
            }
            assert_true(fabs(o - y[i]) < 1e-4);
        }
    }
}

static double max_rel(const float *a, const float *b, size_t n)
{
    double mx = 0.0, err = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
        err = fabs((double)a[i] - b[i]) > err ? fabs((double)a[i] - b[i]) : err;
    }
    return err / (mx > 0 ? mx : 1.0);
}

/* A set's summation order, for the portable model below: accumulators of `lanes` floats, four
 * of them over each step of 4 * lanes elements. */
struct lane_order {
    int lanes;            // 16 (AVX-512), 8 (AVX2) or 4 (NEON)
    bool is_tail_double;  // the delta rule's remaining products added in double (AVX2)
    bool is_last_strided; // the last four lanes added (l0 + l2) + (l1 + l3) (AVX-512)
};

/* dot(a, b) in that order: per lane a fused chain, the four accumulators added (0 + 2) +
 * (1 + 3), upper half of the lanes onto the lower until four remain, then (l0 + l1) +
 * (l2 + l3) or (l0 + l2) + (l1 + l3); the rest one by one. What the SIMD files state,
 * written out lane by lane. */
static float dot_model(struct lane_order o, bool is_tail_double, int n, const float *a,
                       const float *b)
{
    const int step = 4 * o.lanes, np = n & ~(step - 1);
    float acc[4][16] = {{0}}, t[16];
    for (int i = 0; i < np; i += step)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < o.lanes; l++)
                acc[j][l] = fmaf(a[i + j * o.lanes + l], b[i + j * o.lanes + l], acc[j][l]);
    for (int l = 0; l < o.lanes; l++)
        t[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    for (int w = o.lanes / 2; w >= 4; w /= 2)
        for (int l = 0; l < w; l++)
            t[l] += t[l + w];
    const float red =
        o.is_last_strided ? (t[0] + t[2]) + (t[1] + t[3]) : (t[0] + t[1]) + (t[2] + t[3]);
    if (is_tail_double) {
        double sum = red;
        for (int i = np; i < n; i++)
            sum += (double)(a[i] * b[i]);
        return (float)sum;
    }
    float sum = red;
    for (int i = np; i < n; i++)
        sum = fmaf(a[i], b[i], sum);
    return sum;
}

static void delta_model(struct lane_order o, int n, float *state, const float *q, const float *k,
                        const float *v, float decay, float beta, float scale, float *out)
{
    for (int j = 0; j < n; j++) {
        float *row = state + (size_t)j * (size_t)n;
        for (int i = 0; i < n; i++)
            row[i] *= decay;
        const float d = (v[j] - dot_model(o, o.is_tail_double, n, row, k)) * beta;
        for (int i = 0; i < n; i++)
            row[i] = fmaf(k[i], d, row[i]);
        out[j] = dot_model(o, o.is_tail_double, n, row, q) * scale;
    }
}

static void ssd_model(struct lane_order o, int head_dim, int n, float *state, const float *x,
                      const float *b, const float *c, float decay, float dt, float *y)
{
    for (int i = 0; i < head_dim; i++) {
        float *row = state + (size_t)i * (size_t)n;
        const float x_dt = x[i] * dt;
        for (int k = 0; k < n; k++) {
            const float kept = row[k] * decay, added = b[k] * x_dt;
            row[k] = kept + added;
        }
        y[i] = dot_model(o, false, n, row, c);
    }
}

/* Shapes for the set comparisons: tails alone, whole NEON steps with and without whole AVX2
 * or AVX-512 steps, Qwen3.5's and Mamba-2's 128, and the widest head. */
static const int sizes[] = {8, 16, 40, 48, 64, 96, 100, 128, 130, 200, 256};

/* Runs set against the references over a few tokens, state and outputs within a float
 * tolerance (the dots of n products sum in other orders: a few ulps of the largest output),
 * and, when o is given, against the portable model of its order bit for bit. */
static void check_set(const struct ssm_kernels *set, const struct lane_order *o)
{
    const struct ssm_kernels *ref = ssm_ref_kernels();
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int n = sizes[si];
        const size_t nn = (size_t)n * (size_t)n, row_bytes = (size_t)n * sizeof(float);
        float *s1 = mem_alloc(nn * 4), *s2 = mem_alloc(nn * 4), *s3 = mem_alloc(nn * 4);
        float *buf = mem_alloc(row_bytes * 6);
        float *q = buf, *k = q + n, *v = k + n, *o1 = v + n, *o2 = o1 + n, *o3 = o2 + n;
        fill(s1, nn, 0.5f);
        memcpy(s2, s1, nn * 4);
        memcpy(s3, s1, nn * 4);
        for (int t = 0; t < 3; t++) {
            fill(q, (size_t)n, 0.3f);
            fill(k, (size_t)n, 0.3f);
            fill(v, (size_t)n, 1.0f);
            ref->delta_step(n, s1, q, k, v, 0.95f, 0.5f, 0.2f, o1);
            set->delta_step(n, s2, q, k, v, 0.95f, 0.5f, 0.2f, o2);
            assert_true(max_rel(o1, o2, (size_t)n) < 1e-5);
            assert_true(max_rel(s1, s2, nn) < 1e-5);
            if (o) {
                delta_model(*o, n, s3, q, k, v, 0.95f, 0.5f, 0.2f, o3);
                assert_memory_equal(o2, o3, row_bytes);
                assert_memory_equal(s2, s3, nn * 4);
            }
            // the scan: a head of 5 channels whose state rows are n wide
            ref->ssd_step(5, n, s1, v, q, k, 0.9f, 0.4f, o1);
            set->ssd_step(5, n, s2, v, q, k, 0.9f, 0.4f, o2);
            assert_true(max_rel(o1, o2, 5) < 1e-5);
            assert_true(max_rel(s1, s2, (size_t)(5 * n)) < 1e-5);
            if (o) {
                ssd_model(*o, 5, n, s3, v, q, k, 0.9f, 0.4f, o3);
                assert_memory_equal(o2, o3, 5 * sizeof(float));
                assert_memory_equal(s2, s3, (size_t)(5 * n) * 4);
            }
        }
        mem_free(s1);
        mem_free(s2);
        mem_free(s3);
        mem_free(buf);
    }
}

/* Every set the CPU runs, reached directly whatever kernels_init chose. */
static void test_variants(void **state)
{
    (void)state;
    struct cpufeat_caps hw;
    cpufeat_caps_hw(&hw);
    int n_run = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (hw.has_avx2) {
        check_set(ssm_avx2_kernels(), &(struct lane_order){.lanes = 8, .is_tail_double = true});
        n_run++;
    }
    if (hw.has_avx512) {
        check_set(ssm_avx512_kernels(), &(struct lane_order){.lanes = 16, .is_last_strided = true});
        n_run++;
    } else {
        printf("skip: no AVX-512 here, its scans not checked\n");
    }
#elif defined(__aarch64__)
    assert_true(hw.has_neon); // every ARMv8-A core: the NEON set must run, not skip
    check_set(ssm_neon_kernels(), &(struct lane_order){.lanes = 4, .is_tail_double = false});
    n_run++;
#endif
    if (n_run == 0)
        printf("skip: only the scalar references run here (%s)\n", cpufeat_isa_name(cpufeat_isa()));
}

/* kernels_init installs the set the environment allows: the widest SIMD scans, or the
 * references when SIMD is off. */
static void test_selected(void **state)
{
    (void)state;
    kernels_init();
    struct cpufeat_caps hw, use;
    cpufeat_caps_hw(&hw);
    cpufeat_caps_allowed(&hw, &use);
    const struct ssm_kernels *want = ssm_ref_kernels();
#if defined(__x86_64__) || defined(__i386__)
    if (use.has_avx2) want = ssm_avx2_kernels();
    if (use.has_avx512) want = ssm_avx512_kernels();
#elif defined(__aarch64__)
    if (use.has_neon) want = ssm_neon_kernels();
#endif
    assert_ptr_equal(ssm_get(), want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),        cmocka_unit_test(test_l2norm),
        cmocka_unit_test(test_delta_model), cmocka_unit_test(test_ssd_model),
        cmocka_unit_test(test_variants),    cmocka_unit_test(test_selected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
