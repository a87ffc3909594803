/* bench_membw: the machine's streaming read bandwidth, the limit of single-token generation
 * (every weight is read once per token). Each of THREADS threads sums its share of a buffer
 * several times larger than the last-level cache; the best of RUNS passes is reported.
 *   bench_membw [-t THREADS] [-r RUNS] [-m MIB]
 * Prints "membw <threads> <GB/s>" (GB = 1e9 bytes). */
#include "engine/threadpool.h"
#include "util/clock.h"
#include "util/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pass {
    const uint64_t *buf;
    size_t n;             // words
    uint64_t sums[64][8]; // per thread, one cache line each; read after the run
};

/* Sixteen bytes, the vector width every target has (SSE2, NEON): wider generic vectors are
 * split by the compiler through stack temporaries, which would make the adds the limit. */
typedef uint64_t vec16 __attribute__((vector_size(16)));

/* Thread ith's share of the buffer, two cache lines per step into eight independent
 * accumulators held in registers (the loads, not the adds, are the limit). */
static void read_share(void *arg, int ith, int nth)
{
    struct pass *p = arg;
    size_t lo = p->n * (size_t)ith / (size_t)nth & ~(size_t)15;
    size_t hi = ith == nth - 1 ? p->n : p->n * (size_t)(ith + 1) / (size_t)nth & ~(size_t)15;
    vec16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    for (size_t i = lo; i + 16 <= hi; i += 16) {
        const vec16 *v = (const vec16 *)(const void *)(p->buf + i); // buffer 16-byte aligned
        s0 += v[0];
        s1 += v[1];
        s2 += v[2];
        s3 += v[3];
        s4 += v[4];
        s5 += v[5];
        s6 += v[6];
        s7 += v[7];
    }
    vec16 t = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
    memcpy(p->sums[ith % 64], &t, sizeof t);
}

static size_t default_mib(void)
{
    long l3 = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    size_t mib = l3 > 0 ? (size_t)l3 * 4 / (1024 * 1024) : 0;
    return mib < 512 ? 512 : mib > 2048 ? 2048 : mib;
}

int main(int argc, char **argv)
{
    int n_threads = 2, runs = 5;
    size_t mib = default_mib();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-t") == 0)
            n_threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-r") == 0)
            runs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-m") == 0)
            mib = (size_t)atol(argv[i + 1]);
    }
    if (n_threads < 1 || n_threads > 64 || runs < 1 || mib < 1) {
        fprintf(stderr, "usage: bench_membw [-t THREADS 1..64] [-r RUNS] [-m MIB]\n");
        return 2;
    }
    const size_t bytes = mib * 1024 * 1024;
    uint64_t *buf = mem_alloc(bytes);
    struct threadpool *tp;
    if (!buf || threadpool_new(n_threads, &tp) != 0) {
        fprintf(stderr, "bench_membw: out of memory for %zu MiB\n", mib);
        mem_free(buf);
        return 1;
    }
    for (size_t i = 0; i < bytes / 8; i++) // touch every page, with values the sum cannot skip
        buf[i] = i * 0x9e3779b97f4a7c15ULL;
    static struct pass p;
    p.buf = buf;
    p.n = bytes / 8;
    double best = 0;
    uint64_t check = 0;
    for (int r = 0; r < runs; r++) {
        int64_t t0 = clock_now_ns();
        threadpool_run(tp, read_share, &p);
        double s = (double)(clock_now_ns() - t0) / 1e9;
        best = s > 0 && (double)bytes / s > best ? (double)bytes / s : best;
        for (int t = 0; t < n_threads && t < 64; t++)
            for (int k = 0; k < 8; k++)
                check += p.sums[t][k];
    }
    printf("membw %d %.2f\n", n_threads, best / 1e9);
    fprintf(stderr, "(%zu MiB, best of %d; checksum %llx)\n", mib, runs, (unsigned long long)check);
    threadpool_free(tp);
    mem_free(buf);
    return 0;
}
