/* Prompt-cache benchmark: the time to the first token for a prompt the instance has not
 * seen, then for the same prompt followed by a short new turn (what a multi-turn chat sends),
 * through the cpu platform's scheduler as the server runs it. Prints both (median of the
 * runs), the tokens the second one reused (cache_n) and the speed-up.
 *   bench_prompt_cache [-t THREADS] [-p PROMPT_TOKENS] [-r RUNS] MODEL */
#include "cpu_bench.h"
#include "util/clock.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TURN_TOKENS 16
#define MAX_RUNS    15

/* Runs one request for a single token; returns the wall time to its end in ms (-1 on error). */
static double first_token_ms(struct platform_model *m, const int32_t *prompt, int n,
                             struct request_timings *t)
{
    struct gen_params gp;
    gen_params_defaults(&gp);
    gp.temperature = 0;
    gp.max_tokens = 1;
    struct request *r;
    if (request_new(REQUEST_GENERATE, prompt, n, &gp, 1, &r) != ERR_OK) return -1;
    int64_t t0 = clock_now_ns();
    bench_run(m, r);
    struct gen_event ev;
    int cursor = 0;
    enum finish_reason fin = FINISH_NONE;
    while (fin == FINISH_NONE)
        request_wait_events(r, &cursor, &ev, 1, -1, &fin);
    double ms = (double)(clock_now_ns() - t0) / 1e6;
    request_outcome(r, NULL, NULL, t);
    request_release(r);
    return fin == FINISH_ERROR ? -1 : ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int n_threads = 2, n_prompt = 512, runs = 3, i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-t"))
            n_threads = v;
        else if (!strcmp(argv[i], "-p"))
            n_prompt = v;
        else if (!strcmp(argv[i], "-r"))
            runs = v;
    }
    if (i >= argc || runs < 1 || runs > MAX_RUNS || n_prompt < 1 || n_prompt > 8192) {
        fprintf(stderr, "usage: bench_prompt_cache [-t THREADS] [-p PROMPT_TOKENS] [-r RUNS] "
                        "MODEL\n");
        return 2;
    }
    struct platform_model_desc d;
    struct platform_model *m = bench_load(argv[i], n_prompt + TURN_TOKENS + 8, n_threads, &d);
    if (!m) return 1;
    int32_t *prompt = mem_alloc((size_t)(n_prompt + TURN_TOKENS) * sizeof *prompt);
    if (!prompt) return 1;
    double cold[MAX_RUNS], warm[MAX_RUNS];
    int cache_n = 0;
    for (int r = 0; r < runs; r++) {
        // A different first token each run, so the cold prompt shares nothing with the last.
        for (int k = 0; k < n_prompt + TURN_TOKENS; k++)
            prompt[k] = (int32_t)((k * 7919 + r * 104729 + 13) % d.n_vocab);
        struct request_timings t;
        cold[r] = first_token_ms(m, prompt, n_prompt, &t);
        warm[r] = first_token_ms(m, prompt, n_prompt + TURN_TOKENS, &t);
        cache_n = t.n_cached;
        if (cold[r] < 0 || warm[r] < 0) {
            fprintf(stderr, "a request failed\n");
            return 1;
        }
    }
    qsort(cold, (size_t)runs, sizeof cold[0], cmp_double);
    qsort(warm, (size_t)runs, sizeof warm[0], cmp_double);
    const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
    printf("%-34s prompt %d: first token %8.1f ms cold, %8.1f ms with +%d tokens on the cached "
           "prompt (cache_n %d): x%.1f\n",
           name, n_prompt, cold[runs / 2], warm[runs / 2], TURN_TOKENS, cache_n,
           warm[runs / 2] > 0 ? cold[runs / 2] / warm[runs / 2] : 0);
    mem_free(prompt);
    bench_unload(m);
    return 0;
}
