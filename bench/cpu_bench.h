/* What the benchmarks that go through the cpu platform's scheduler share: loading a model with
 * one instance, and running one request on it to the end. Header-only: every benchmark source
 * is its own program. */
#ifndef BENCH_CPU_BENCH_H
#define BENCH_CPU_BENCH_H

#include "platform/cpu/cpu.h"
#include "util/thread.h"

#include <stdio.h>

static struct mutex bench_done_mu;
static struct cond bench_done_cv;
static int bench_n_done;

static void bench_on_done(void *owner, int instance)
{
    (void)owner;
    (void)instance;
    mutex_lock(&bench_done_mu);
    bench_n_done++;
    cond_broadcast(&bench_done_cv);
    mutex_unlock(&bench_done_mu);
}

/* Loads path with instance 0 and fills d; prints the error and returns NULL on failure. */
static struct platform_model *bench_load(const char *path, int n_ctx, int n_threads,
                                         struct platform_model_desc *d)
{
    mutex_init(&bench_done_mu);
    cond_init(&bench_done_cv);
    struct platform_load_args a = {
        .path = path,
        .n_ctx = n_ctx,
        .n_threads = n_threads,
        .on_done = bench_on_done,
    };
    struct platform_model *m;
    struct errmsg err;
    errmsg_clear(&err);
    if (cpu_platform.load(&a, &m, &err) != ERR_OK ||
        cpu_platform.add_instance(m, 0, &err) != ERR_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return NULL;
    }
    cpu_platform.describe(m, d);
    return m;
}

/* Submits r to instance 0 and waits until the platform hands the instance back (r is then
 * finished; the caller still holds its reference). */
static void bench_run(struct platform_model *m, struct request *r)
{
    mutex_lock(&bench_done_mu);
    int want = bench_n_done + 1;
    mutex_unlock(&bench_done_mu);
    cpu_platform.submit(m, 0, r);
    mutex_lock(&bench_done_mu);
    while (bench_n_done < want)
        cond_wait(&bench_done_cv, &bench_done_mu);
    mutex_unlock(&bench_done_mu);
}

static void bench_unload(struct platform_model *m)
{
    cpu_platform.remove_instance(m, 0);
    cpu_platform.unload(m);
}

#endif
