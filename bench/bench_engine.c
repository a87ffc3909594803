/* bench_engine: prompt processing (ppN: one decode call of N tokens) and generation (tgN: N
 * single-token decodes from an empty context) throughput of the engine, the median of several
 * runs after a warm-up, in the shape llama-bench reports.
 *   bench_engine [-t THREADS] [-r RUNS] [-p PP] [-n TG] MODEL.gguf...
 * Prints one line per model and test: "<file> <test> <tokens/s>".
 *   bench_engine --isa   prints the kernel set the engine dispatches to (LLAMAPI_ISA applies). */
#include "engine/kernels.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/threadpool.h"
#include "util/clock.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS_MAX 16

struct opts {
    int n_threads, n_runs, n_pp, n_tg;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds for one run: pp decodes n tokens at once, tg n tokens one by one. */
static double run_once(struct engine_model *m, struct threadpool *tp, struct engine_seq *s,
                       const int32_t *toks, int n, bool is_pp)
{
    struct errmsg err = {{0}};
    engine_seq_truncate(s, 0);
    double t0 = clock_now_ms();
    if (is_pp) {
        struct engine_batch_item it = {.seq = s, .tokens = toks, .n_tokens = n};
        if (engine_decode(m, tp, &it, 1, &err) != ERR_OK) fprintf(stderr, "bench: %s\n", err.msg);
    } else {
        for (int i = 0; i < n; i++) {
            struct engine_batch_item it = {
                .seq = s, .tokens = &toks[i], .n_tokens = 1, .is_sampled = true};
            if (engine_decode(m, tp, &it, 1, &err) != ERR_OK) {
                fprintf(stderr, "bench: %s\n", err.msg);
                break;
            }
        }
    }
    return (clock_now_ms() - t0) / 1000.0;
}

static double median_tps(struct engine_model *m, struct threadpool *tp, struct engine_seq *s,
                         const int32_t *toks, int n, bool is_pp, int n_runs)
{
    double tps[RUNS_MAX];
    run_once(m, tp, s, toks, is_pp ? n : 16, is_pp); // warm-up: page in weights, caches
    for (int r = 0; r < n_runs; r++)
        tps[r] = n / run_once(m, tp, s, toks, n, is_pp);
    qsort(tps, (size_t)n_runs, sizeof tps[0], cmp_double);
    return tps[n_runs / 2];
}

static int bench_model(const char *path, const struct opts *o, struct threadpool *tp)
{
    struct engine_model *m;
    struct errmsg err = {{0}};
    if (engine_model_load(path, &m, &err) != ERR_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    const int n_ctx = o->n_pp + o->n_tg + 16;
    struct engine_seq *s;
    int32_t *toks = malloc(sizeof *toks * (size_t)(o->n_pp + o->n_tg));
    if (!toks || engine_seq_new(m, n_ctx, &s) != ERR_OK) {
        fprintf(stderr, "bench: out of memory\n");
        free(toks);
        engine_model_free(m);
        return 1;
    }
    uint32_t x = 12345;
    for (int i = 0; i < o->n_pp + o->n_tg; i++) {
        x = x * 1103515245u + 12345u;
        toks[i] = (int32_t)((x >> 8) % (uint32_t)engine_model_info(m)->n_vocab);
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (o->n_pp > 0)
        printf("%s pp%d %.2f\n", name, o->n_pp,
               median_tps(m, tp, s, toks, o->n_pp, true, o->n_runs));
    if (o->n_tg > 0)
        printf("%s tg%d %.2f\n", name, o->n_tg,
               median_tps(m, tp, s, toks, o->n_tg, false, o->n_runs));
    fflush(stdout);
    engine_seq_free(s);
    free(toks);
    engine_model_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = {.n_threads = 2, .n_runs = 3, .n_pp = 512, .n_tg = 128};
    if (argc == 2 && !strcmp(argv[1], "--isa")) {
        kernels_init();
        puts(quant_simd_name());
        return 0;
    }
    int i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-t"))
            o.n_threads = v;
        else if (!strcmp(argv[i], "-r"))
            o.n_runs = v < 1 ? 1 : v > RUNS_MAX ? RUNS_MAX : v;
        else if (!strcmp(argv[i], "-p"))
            o.n_pp = v < 0 ? 0 : v > ENGINE_BATCH_MAX ? ENGINE_BATCH_MAX : v;
        else if (!strcmp(argv[i], "-n"))
            o.n_tg = v < 0 ? 0 : v;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: bench_engine [-t THREADS] [-r RUNS] [-p PP] [-n TG] MODEL...\n");
        return 2;
    }
    struct threadpool *tp;
    if (threadpool_new(o.n_threads, &tp) != ERR_OK) {
        fprintf(stderr, "bench: cannot start %d threads\n", o.n_threads);
        return 1;
    }
    int rc = 0;
    for (; i < argc; i++)
        rc |= bench_model(argv[i], &o, tp);
    threadpool_free(tp);
    return rc;
}
