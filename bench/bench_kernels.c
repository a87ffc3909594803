/* Kernel benchmark: matrix-vector (one token, bound by weight bandwidth) and a 512-token matrix
 * product per tensor type on a Qwen2.5-0.5B-sized FFN matrix, 1 and 2 threads, plus the scalar
 * reference matvec for the SIMD/ref ratio. Weights are repacked as model loading repacks them
 * (the row then names the repacked type). LLAMAPI_ISA picks the kernel set.
 * Usage: bench_kernels [type-name ...] */
#include "engine/kernels.h"
#include "engine/matmul.h"
#include "engine/quants/quants.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* A spinning two-phase pool: workers wait for a new generation, run their share, count done. */
struct pool {
    const struct matmul_args *job; // written before gen is bumped
    atomic_int gen;
    atomic_int n_done;
    atomic_bool is_stopping;
    int nth;
};

struct worker {
    struct thread th;
    struct pool *pool;
    int ith;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int seen = 0;
    for (;;) {
        int g;
        while ((g = atomic_load(&w->pool->gen)) == seen && !atomic_load(&w->pool->is_stopping))
            cpu_relax();
        if (atomic_load(&w->pool->is_stopping)) return NULL;
        seen = g;
        matmul_run(w->pool->job, w->ith, w->pool->nth);
        atomic_fetch_add(&w->pool->n_done, 1);
    }
}

static void pool_run(struct pool *p, const struct matmul_args *a)
{
    p->job = a;
    atomic_store(&p->n_done, 0);
    atomic_fetch_add(&p->gen, 1);
    matmul_run(a, 0, p->nth);
    while (atomic_load(&p->n_done) < p->nth - 1)
        cpu_relax();
}

static uint64_t rng = 88172645463325252ULL;

static float rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) & 0xffffff) / 8388608.0f - 1.0f;
}

struct setup {
    uint32_t type;
    int64_t n_in, n_out, n_tok;
    void *w, *xq;
    float *y;
    size_t w_bytes, x_row;
};

static int setup_make(struct setup *s, uint32_t type, int64_t n_tok)
{
    const struct quant_traits *tr = quant_traits_of(type);
    // K-quant rows need multiples of 256, so they take the FFN-down orientation
    s->n_in = tr->block_len == 256 ? 4864 : 896;
    s->n_out = tr->block_len == 256 ? 896 : 4864;
    s->type = type;
    s->n_tok = n_tok;
    size_t w_row;
    if (quant_row_bytes(type, s->n_in, &w_row) != ERR_OK) return ERR_INVALID;
    s->w_bytes = w_row * (size_t)s->n_out;
    s->x_row = matmul_input_row_bytes(type, s->n_in);
    s->w = mem_alloc(s->w_bytes);
    s->xq = mem_alloc(s->x_row * (size_t)n_tok);
    s->y = mem_alloc(sizeof(float) * (size_t)(s->n_out * n_tok));
    float *f = mem_alloc(sizeof(float) * (size_t)(s->n_in * n_tok));
    if (!s->w || !s->xq || !s->y || !f) {
        mem_free(f);
        return ERR_NOMEM;
    }
    for (int64_t r = 0; r < s->n_out; r++) {
        for (int64_t i = 0; i < s->n_in; i++)
            f[i] = rnd();
        tr->from_float(f, (uint8_t *)s->w + (size_t)r * w_row, s->n_in);
    }
    for (int64_t i = 0; i < s->n_in * n_tok; i++)
        f[i] = rnd();
    matmul_quantize_input(f, n_tok, s->n_in, tr->dot_type, s->xq, s->x_row, 0, 1);
    mem_free(f);
    return ERR_OK;
}

/* Repacks s's weights when the kernel set multiplies another layout (quant_repack_type, as
 * model loading does) and re-quantizes its activations for that layout's dot type. */
static int setup_repack(struct setup *s)
{
    const uint32_t rt = quant_repack_type(s->type, s->n_out, s->n_in);
    if (rt == s->type) return ERR_OK;
    const size_t x_row = matmul_input_row_bytes(rt, s->n_in);
    void *w = mem_alloc(s->w_bytes), *xq = mem_alloc(x_row * (size_t)s->n_tok);
    float *f = mem_alloc(sizeof(float) * (size_t)(s->n_in * s->n_tok));
    if (!w || !xq || !f || quant_repack(s->type, s->w, w, s->n_out, s->n_in) != ERR_OK) {
        mem_free(w);
        mem_free(xq);
        mem_free(f);
        return ERR_NOMEM;
    }
    for (int64_t i = 0; i < s->n_in * s->n_tok; i++)
        f[i] = rnd();
    matmul_quantize_input(f, s->n_tok, s->n_in, quant_traits_of(rt)->dot_type, xq, x_row, 0, 1);
    mem_free(f);
    mem_free(s->w);
    mem_free(s->xq);
    s->w = w;
    s->xq = xq;
    s->x_row = x_row;
    s->type = rt;
    return ERR_OK;
}

static void setup_free(struct setup *s)
{
    mem_free(s->w);
    mem_free(s->xq);
    mem_free(s->y);
}

/* One thread is timed by its own CPU time, so other load on the machine does not count; two
 * threads by wall time (best of reps either way). */
static double now_ms(int nth)
{
    if (nth > 1) return clock_now_ms();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Best-of-reps milliseconds for one product on p's threads. */
static double time_matmul(struct pool *p, const struct setup *s, int reps)
{
    struct matmul_args a = {.w = s->w,
                            .w_type = s->type,
                            .n_in = s->n_in,
                            .n_out = s->n_out,
                            .x = s->xq,
                            .x_row_bytes = s->x_row,
                            .n_tok = s->n_tok,
                            .y = s->y};
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = now_ms(p->nth);
        pool_run(p, &a);
        double dt = now_ms(p->nth) - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

/* Matvec over enough copies of the weights (~600 MB) that they stream from DRAM, as a real
 * model's do: GB/s per thread count. */
static double dram_matvec_gbs(struct pool *p, const struct setup *s)
{
    size_t n_copies = (size_t)600e6 / s->w_bytes + 1;
    uint8_t *big = mem_alloc(n_copies * s->w_bytes);
    if (!big) return 0.0;
    for (size_t i = 0; i < n_copies; i++)
        memcpy(big + i * s->w_bytes, s->w, s->w_bytes);
    struct setup c = *s;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = clock_now_ms();
        for (size_t i = 0; i < n_copies; i++) {
            c.w = big + i * s->w_bytes;
            time_matmul(p, &c, 1);
        }
        double dt = clock_now_ms() - t0;
        best = dt < best ? dt : best;
    }
    mem_free(big);
    return (double)(n_copies * s->w_bytes) / best / 1e6;
}

/* Scalar-reference matvec, one thread, CPU time (best of 3). */
static double time_ref_matvec(const struct setup *s)
{
    const struct quant_traits *ref = quant_traits_ref(s->type);
    size_t w_row = s->w_bytes / (size_t)s->n_out;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ms(1);
        for (int64_t r = 0; r < s->n_out; r++)
            ref->vec_dot(s->n_in, &s->y[r], (const uint8_t *)s->w + (size_t)r * w_row, s->xq);
        double dt = now_ms(1) - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

static void bench_type(struct pool *pools, uint32_t type)
{
    struct setup mv, mm;
    if (setup_make(&mv, type, 1) != ERR_OK || setup_make(&mm, type, 512) != ERR_OK) {
        printf("%-5s setup failed\n", quant_traits_of(type)->name);
        return;
    }
    double flop_mm = 2.0 * (double)mm.n_in * (double)mm.n_out * 512.0;
    double ref_ms = time_ref_matvec(&mv);
    if (setup_repack(&mv) != ERR_OK || setup_repack(&mm) != ERR_OK) {
        printf("%-5s repacking failed\n", quant_traits_of(type)->name);
        setup_free(&mv);
        setup_free(&mm);
        return;
    }
    printf("%-5s %4lldx%-4lld %6.2f MB |", quant_traits_of(mv.type)->name, (long long)mv.n_out,
           (long long)mv.n_in, (double)mv.w_bytes / 1e6);
    for (int k = 0; k < 2; k++) {
        double mv_ms = time_matmul(&pools[k], &mv, 30);
        printf(" %6.1f GB/s %5.1fx |", (double)mv.w_bytes / mv_ms / 1e6, ref_ms / mv_ms);
    }
    printf(" %5.1f %5.1f GB/s |", dram_matvec_gbs(&pools[0], &mv), dram_matvec_gbs(&pools[1], &mv));
    for (int k = 0; k < 2; k++) {
        double mm_ms = time_matmul(&pools[k], &mm, 2);
        printf(" %6.1f GFLOP/s %6.1f tok/s |", flop_mm / mm_ms / 1e6, 512.0 / (mm_ms / 1e3));
    }
    printf("\n");
    setup_free(&mv);
    setup_free(&mm);
}

int main(int argc, char **argv)
{
    kernels_init();
    static const uint32_t all[] = {QUANT_F32,  QUANT_F16,    QUANT_BF16,   QUANT_Q8_0,
                                   QUANT_Q4_0, QUANT_Q4_1,   QUANT_Q5_0,   QUANT_Q5_1,
                                   QUANT_Q2_K, QUANT_Q3_K,   QUANT_Q4_K,   QUANT_Q5_K,
                                   QUANT_Q6_K, QUANT_IQ4_NL, QUANT_IQ4_XS, QUANT_MXFP4};
    struct pool pools[2] = {{.nth = 1}, {.nth = 2}};
    struct worker w1 = {.pool = &pools[1], .ith = 1};
    if (thread_start(&w1.th, worker_main, &w1) != ERR_OK) return 1;
    printf("simd: %s; matvec = 1 token, matmul = 512 tokens; ratio = vs scalar ref matvec;\n"
           "1 thread timed by CPU time, 2 threads by wall time (load-sensitive)\n",
           quant_simd_name());
    printf("type  shape       weights  | matvec 1 thread   | matvec 2 threads  | DRAM 1t  2t     |"
           " matmul 1 thread               | matmul 2 threads\n");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const struct quant_traits *tr = quant_traits_of(all[i]);
        if (!tr || !tr->vec_dot) continue;
        bool is_wanted = argc < 2;
        for (int k = 1; k < argc; k++)
            is_wanted |= strcmp(argv[k], tr->name) == 0;
        if (is_wanted) bench_type(pools, all[i]);
    }
    atomic_store(&pools[1].is_stopping, true);
    thread_join(&w1.th);
    return 0;
}
