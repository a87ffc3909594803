/* Hot ops per kernel set: RMS norm, RoPE, SwiGLU, GeGLU, and the tiled attention in both
 * arithmetics, each timed on every set the CPU runs (scalar, avx2, avx512), the sets
 * interleaved round by round and the minimum thread CPU time per call kept, so a loaded
 * machine skews the ratios little. Usage: bench_ops [rounds [case]] (a case index 0-7 times
 * that case alone, for profiling). */
#include "engine/attn.h"
#include "engine/cpufeat.h"
#include "engine/ops.h"
#if defined(__x86_64__) || defined(__i386__)
#include "engine/x86/ops_avx2.h"
#include "engine/x86/ops_avx512.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_SETS   3
#define N_CASES  8
#define N_EMBD   4096
#define N_FF     11008
#define HEAD_DIM 128
#define N_HEAD   32
#define N_KEYS   1024

static const char *const set_names[N_SETS] = {"scalar", "avx2", "avx512"};
static const char *const case_names[N_CASES] = {"rmsnorm 4096",
                                                "rope 32 heads x 128 (neox)",
                                                "swiglu 11008",
                                                "attn decode 4q x 1024k",
                                                "attn prompt 64q x 512k",
                                                "attn tile 64q x 512k",
                                                "geglu 11008",
                                                "attn prompt hd64 63q x 512k"};

static float x[N_FF], w[N_FF], u[N_FF], y[N_FF], cs[HEAD_DIM], sn[HEAD_DIM];
static float q[ATTN_QUERIES_MAX][HEAD_DIM], out[ATTN_QUERIES_MAX][HEAD_DIM];
static uint16_t kc[N_KEYS * HEAD_DIM], vc[N_KEYS * HEAD_DIM];

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const struct ops_kernels *ops_of(int set)
{
#if defined(__x86_64__) || defined(__i386__)
    if (set == 1) return ops_avx2_kernels();
    if (set == 2) return ops_avx512_kernels();
#endif
    (void)set;
    return ops_ref();
}

static void (*attn_of(int set))(const struct attn_block *)
{
#if defined(__x86_64__) || defined(__i386__)
    if (set == 1) return attn_run_avx2;
    if (set == 2) return attn_run_avx512;
#endif
    (void)set;
    return attn_run_ref;
}

/* n_q queries: causal rows of a group of n_group heads sharing a KV head. */
static void attn_case(int set, int hd, int n_q, int n_group, int n_keys, enum attn_arith arith)
{
    struct attn_block b = {.arith = arith,
                           .head_dim = hd,
                           .scale = 1.0f / sqrtf((float)hd),
                           .k = kc,
                           .v = vc,
                           .kv_stride = (size_t)hd,
                           .n_q = n_q};
    for (int i = 0; i < n_q; i++) {
        b.q[i] = q[i];
        b.out[i] = out[i];
        b.n_keys[i] = n_keys - (n_q - 1 - i) / n_group;
    }
    attn_of(set)(&b);
}

/* One call of case c on set s. */
static void run_case(int s, int c)
{
    const struct ops_kernels *k = ops_of(s);
    switch (c) {
    case 0:
        k->rmsnorm(N_EMBD, y, x, w, 1e-5f);
        break;
    case 1:
        for (int h = 0; h < N_HEAD; h++)
            k->rope(y + h * HEAD_DIM, cs, sn, HEAD_DIM, true);
        break;
    case 2:
        memcpy(y, x, sizeof y);
        k->swiglu(N_FF, y, u);
        break;
    case 3:
        attn_case(s, HEAD_DIM, 4, 4, N_KEYS, ATTN_ARITH_SINGLE_PASS);
        break;
    case 4:
        attn_case(s, HEAD_DIM, ATTN_QUERIES_MAX, 4, 512, ATTN_ARITH_SINGLE_PASS);
        break;
    case 5:
        attn_case(s, HEAD_DIM, ATTN_QUERIES_MAX, 4, 512, ATTN_ARITH_TILE_SOFTMAX);
        break;
    case 6:
        memcpy(y, x, sizeof y);
        k->geglu(N_FF, y, u);
        break;
    default: // a Qwen2.5-0.5B block: 7 query heads per KV head x 9 tokens
        attn_case(s, 64, 63, 7, 512, ATTN_ARITH_SINGLE_PASS);
        break;
    }
}

static bool have_set(int s)
{
    return s == 0 || (s == 1 && cpufeat_has_avx2_fma_f16c()) || (s == 2 && cpufeat_has_avx512());
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 5;
    const int only = argc > 2 ? atoi(argv[2]) : -1;
    srand(1);
    for (int i = 0; i < N_FF; i++) {
        x[i] = (float)rand() / RAND_MAX * 4.0f - 2.0f;
        w[i] = (float)rand() / RAND_MAX;
        u[i] = (float)rand() / RAND_MAX - 0.5f;
    }
    for (int i = 0; i < HEAD_DIM; i++) {
        cs[i] = cosf((float)i);
        sn[i] = sinf((float)i);
    }
    for (int i = 0; i < N_KEYS * HEAD_DIM; i++) {
        kc[i] = ops_f32_to_f16((float)rand() / RAND_MAX - 0.5f);
        vc[i] = ops_f32_to_f16((float)rand() / RAND_MAX - 0.5f);
    }
    for (int i = 0; i < ATTN_QUERIES_MAX; i++)
        for (int d = 0; d < HEAD_DIM; d++)
            q[i][d] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
    double best[N_CASES][N_SETS];
    for (int c = 0; c < N_CASES; c++)
        for (int s = 0; s < N_SETS; s++)
            best[c][s] = INFINITY;
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < N_CASES; c++)
            for (int s = 0; s < N_SETS; s++) {
                if (!have_set(s) || (only >= 0 && c != only)) continue;
                const int reps = (c >= 3 && c <= 5) || c == 7 ? 4 : 200;
                const double t0 = cpu_now();
                for (int i = 0; i < reps; i++)
                    run_case(s, c);
                const double t = (cpu_now() - t0) / reps;
                best[c][s] = t < best[c][s] ? t : best[c][s];
            }
    printf("%-28s %12s %12s %12s %10s\n", "op (min thread CPU time)", set_names[0], set_names[1],
           set_names[2], "avx2/avx512");
    for (int c = 0; c < N_CASES; c++) {
        printf("%-28s", case_names[c]);
        for (int s = 0; s < N_SETS; s++)
            if (have_set(s))
                printf(" %10.1fus", best[c][s] * 1e6);
            else
                printf(" %12s", "skipped");
        if (have_set(2)) printf(" %9.2fx", best[c][1] / best[c][2]);
        printf("\n");
    }
    return 0;
}
