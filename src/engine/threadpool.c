/* Thread pool: a run is published by bumping an atomic generation counter; workers spin on it
 * for a while (the forward pass dispatches hundreds of runs per token, microseconds apart) and
 * then sleep on a condition variable, so an idle server does not burn CPU. */
#include "engine/threadpool.h"

#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#define THREADS_MAX 512
#define SPIN_ITERS  (1 << 17) // pause loops (roughly a few ms) before a worker sleeps

struct worker {
    struct threadpool *tp;
    struct thread thread;
    int ith;
};

/* fn/arg are written by the dispatching thread before gen is bumped (release) and read by
 * workers after they see the new gen (acquire). sleeping and stop are guarded by mu for the
 * wait itself; gen and n_done are lock-free. */
struct threadpool {
    int n_threads;
    threadpool_fn fn;
    void *arg;
    atomic_uint gen;     // bumped once per run
    atomic_int n_done;   // workers finished with the current run
    atomic_int sleeping; // workers in (or entering) cond_wait
    atomic_bool stop;
    struct mutex mu;
    struct cond cv;
    struct worker *workers; // n_threads - 1
    int n_started;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until gen differs from seen; returns the new value. */
static unsigned wait_gen(struct threadpool *tp, unsigned seen)
{
    for (int i = 0; i < SPIN_ITERS; i++) {
        unsigned g = atomic_load_explicit(&tp->gen, memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
    }
    mutex_lock(&tp->mu);
    atomic_fetch_add(&tp->sleeping, 1); // seq_cst: pairs with the dispatcher's gen bump
    unsigned g;
    while ((g = atomic_load(&tp->gen)) == seen)
        cond_wait(&tp->cv, &tp->mu);
    atomic_fetch_sub(&tp->sleeping, 1);
    mutex_unlock(&tp->mu);
    return g;
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct threadpool *tp = w->tp;
    unsigned seen = 0; // gen before any run; reading it here could skip a run published early
    for (;;) {
        seen = wait_gen(tp, seen);
        if (atomic_load_explicit(&tp->stop, memory_order_acquire)) break;
        tp->fn(tp->arg, w->ith, tp->n_threads);
        atomic_fetch_add_explicit(&tp->n_done, 1, memory_order_release);
    }
    return NULL;
}

/* Publishes a new generation and wakes sleepers. */
static void publish(struct threadpool *tp)
{
    atomic_fetch_add(&tp->gen, 1); // seq_cst, see wait_gen
    if (atomic_load(&tp->sleeping) > 0) {
        mutex_lock(&tp->mu);
        cond_broadcast(&tp->cv);
        mutex_unlock(&tp->mu);
    }
}

int threadpool_new(int n_threads, struct threadpool **out)
{
    if (n_threads < 1 || n_threads > THREADS_MAX) return ERR_INVALID;
    struct threadpool *tp = mem_calloc(1, sizeof *tp);
    if (!tp) return ERR_NOMEM;
    tp->n_threads = n_threads;
    atomic_init(&tp->gen, 0);
    atomic_init(&tp->n_done, 0);
    atomic_init(&tp->sleeping, 0);
    atomic_init(&tp->stop, false);
    if (mutex_init(&tp->mu) != ERR_OK) goto out_free;
    if (cond_init(&tp->cv) != ERR_OK) goto out_mutex;
    tp->workers = mem_calloc((size_t)n_threads, sizeof *tp->workers);
    if (!tp->workers) goto out_cond;
    for (int i = 1; i < n_threads; i++) {
        struct worker *w = &tp->workers[i - 1];
        w->tp = tp;
        w->ith = i;
        if (thread_start(&w->thread, worker_main, w) != ERR_OK) {
            threadpool_free(tp); // joins the ones already started
            return ERR_NOMEM;
        }
        tp->n_started++;
    }
    *out = tp;
    return ERR_OK;
out_cond:
    cond_deinit(&tp->cv);
out_mutex:
    mutex_deinit(&tp->mu);
out_free:
    mem_free(tp);
    return ERR_NOMEM;
}

void threadpool_free(struct threadpool *tp)
{
    if (!tp) return;
    atomic_store_explicit(&tp->stop, true, memory_order_release);
    publish(tp);
    for (int i = 0; i < tp->n_started; i++)
        thread_join(&tp->workers[i].thread);
    mem_free(tp->workers);
    cond_deinit(&tp->cv);
    mutex_deinit(&tp->mu);
    mem_free(tp);
}

int threadpool_size(const struct threadpool *tp)
{
    return tp->n_threads;
}

void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg)
{
    if (tp->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    atomic_store_explicit(&tp->n_done, 0, memory_order_relaxed);
    publish(tp);
    fn(arg, 0, tp->n_threads);
    const int n_workers = tp->n_threads - 1;
    // Workers are normally spinning and finish within microseconds of us; on a loaded machine
    // one may have been descheduled, so yield instead of spinning forever.
    for (unsigned i = 0; atomic_load_explicit(&tp->n_done, memory_order_acquire) < n_workers; i++) {
        if (i < (1u << 14))
            cpu_relax();
        else
            sched_yield();
    }
}
