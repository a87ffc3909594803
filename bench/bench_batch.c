/* Continuous-batching benchmark: aggregate generation tokens/s with 1, 2, 4 and 8 sequences
 * decoded together (one engine_decode per step over every sequence, as the cpu platform's
 * scheduler does), on one model file. Prints tokens/s per stream count and the ratio to the
 * single-stream rate measured in the same run.
 *   bench_batch [-t THREADS] [-n TOKENS] [-r RUNS] MODEL */
#include "engine/kernels.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/threadpool.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STREAMS 8

/* Decodes n_gen tokens on n_streams sequences after a short prompt; returns tokens/s. */
static double run_once(struct engine_model *m, struct threadpool *tp, int n_streams, int n_gen)
{
    struct engine_seq *seq[MAX_STREAMS];
    struct engine_batch_item items[MAX_STREAMS];
    int32_t prompt[16], next[MAX_STREAMS];
    struct errmsg err;
    int n_vocab = engine_model_info(m)->n_vocab;
    for (int i = 0; i < 16; i++)
        prompt[i] = (i * 7 + 3) % n_vocab;
    for (int s = 0; s < n_streams; s++) {
        if (engine_seq_new(m, 16 + n_gen + 1, &seq[s]) != ERR_OK) return -1;
        items[s] = (struct engine_batch_item){.seq = seq[s], .tokens = prompt, .n_tokens = 16};
    }
    engine_decode(m, tp, items, n_streams, &err);
    int64_t t0 = clock_now_ns();
    for (int step = 0; step < n_gen; step++) {
        for (int s = 0; s < n_streams; s++) {
            next[s] = (step * 31 + s * 17) % n_vocab; // the sampler is not what this measures
            items[s] = (struct engine_batch_item){
                .seq = seq[s], .tokens = &next[s], .n_tokens = 1, .is_sampled = true};
        }
        if (engine_decode(m, tp, items, n_streams, &err) != ERR_OK) {
            fprintf(stderr, "decode: %s\n", err.msg);
            return -1;
        }
    }
    double secs = (double)(clock_now_ns() - t0) / 1e9;
    for (int s = 0; s < n_streams; s++)
        engine_seq_free(seq[s]);
    return (double)n_streams * n_gen / secs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int n_threads = 2, n_gen = 64, runs = 3, i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-t"))
            n_threads = v;
        else if (!strcmp(argv[i], "-n"))
            n_gen = v;
        else if (!strcmp(argv[i], "-r"))
            runs = v;
    }
    if (i >= argc || runs < 1 || runs > 15 || n_gen < 1) {
        fprintf(stderr, "usage: bench_batch [-t THREADS] [-n TOKENS] [-r RUNS] MODEL\n");
        return 2;
    }
    kernels_init();
    struct engine_model *m;
    struct threadpool *tp;
    struct errmsg err;
    errmsg_clear(&err);
    if (engine_model_load(argv[i], &m, &err) != ERR_OK) {
        fprintf(stderr, "%s: %s\n", argv[i], err.msg);
        return 1;
    }
    if (threadpool_new(n_threads, &tp) != ERR_OK) return 1;
    const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
    double base = 0;
    for (int n = 1; n <= MAX_STREAMS; n *= 2) {
        double t[15];
        for (int r = 0; r < runs; r++)
            t[r] = run_once(m, tp, n, n_gen);
        qsort(t, (size_t)runs, sizeof t[0], cmp_double);
        double med = t[runs / 2];
        if (n == 1) base = med;
        printf("%-34s streams %d  %8.2f tok/s  x%.2f of one stream\n", name, n, med,
               base > 0 ? med / base : 0);
    }
    threadpool_free(tp);
    engine_model_free(m);
    return 0;
}
