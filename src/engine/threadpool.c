/* Thread pool: a run is a set of numbered chunks that the caller and the workers claim from one
 * atomic counter, so a thread the OS has descheduled simply claims nothing and the others do
 * its share. Idle workers spin briefly (the forward pass dispatches hundreds of runs per token,
 * microseconds apart), then yield their time slice, then sleep on a condition variable, so a
 * busy machine or an idle server does not lose CPU to spinning. */
#include "engine/threadpool.h"

#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define THREADS_MAX 512
#define CHUNKS_MAX  (1 << 20)
#define CLOSED      UINT32_MAX // the next chunk of a closed run: no claim is possible
/* Idle worker: this many pause loops (about 10 ns each here, so ~40 us: longer than the gaps
 * between the runs of one decode step), then this many sched_yield calls (~0.4 us each when
 * nothing else wants the CPU, so ~2 ms more), then it sleeps. Yielding instead of spinning is
 * what lets a worker that shares a core with the dispatching thread (2 threads on a loaded
 * 2-core machine) hand that core back at once. */
#define SPIN_PAUSES 4096
#define SPIN_YIELDS 4096
/* Dispatcher waiting for chunks claimed by others: pause loops before it starts yielding. */
#define DONE_PAUSES (1 << 14)

struct worker {
    struct threadpool *tp;
    struct thread thread;
};

/* One word holds the run's generation (high 32 bits) and the next unclaimed chunk (low 32), so
 * a claim is one compare-and-swap that fails whenever the word moved on. Between runs the
 * dispatching thread first closes the finished run (a generation of its own whose next chunk
 * is CLOSED, more than any run has), then writes fn, arg and n_chunks with release, then
 * publishes the new generation at chunk 0. A worker reads the word, then those fields with
 * acquire, and uses them only when its claim of that same (gen, chunk) succeeds: had it read
 * a field of a later run, the close before that write would be visible to its claim, which
 * would then fail. Without the close, a worker holding a finished run's word (every chunk
 * claimed) could read the next run's larger chunk count and claim a chunk past the end of the
 * finished run that nobody waited for. They are atomics so that a late worker reading them
 * while the next run is being set up is not a data race. sleeping and stop are guarded by mu
 * for the wait itself. */
struct threadpool {
    int n_threads;
    bool caller_is_pinned; // --cpu-mask applied to the dispatching thread
    _Atomic(threadpool_fn) fn;
    _Atomic(void *) arg;
    atomic_int n_chunks;
    _Atomic uint64_t work; // (generation << 32) | next chunk to claim
    atomic_int n_done;     // chunks of the current run that have returned
    atomic_int sleeping;   // workers in (or entering) cond_wait
    atomic_bool stop;
    uint32_t gen; // last published generation; written by the dispatching thread only
    struct mutex mu;
    struct cond cv;
    struct worker *workers; // n_threads - 1
    int n_started;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static uint32_t gen_of(uint64_t work)
{
    return (uint32_t)(work >> 32);
}

/* Waits until the published generation differs from seen; returns the new one. */
static uint32_t wait_gen(struct threadpool *tp, uint32_t seen)
{
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        uint32_t g = gen_of(atomic_load_explicit(&tp->work, memory_order_acquire));
        if (g != seen) return g;
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
    mutex_lock(&tp->mu);
    atomic_fetch_add(&tp->sleeping, 1); // seq_cst: pairs with the dispatcher's publish
    uint32_t g;
    while ((g = gen_of(atomic_load(&tp->work))) == seen)
        cond_wait(&tp->cv, &tp->mu);
    atomic_fetch_sub(&tp->sleeping, 1);
    mutex_unlock(&tp->mu);
    return g;
}

/* Claims and runs chunks of generation gen until none is left or a newer run replaced it. */
static void run_chunks(struct threadpool *tp, uint32_t gen)
{
    uint64_t w = atomic_load_explicit(&tp->work, memory_order_acquire);
    for (;;) {
        if (gen_of(w) != gen) return;
        const uint32_t k = (uint32_t)w;
        const int n = atomic_load_explicit(&tp->n_chunks, memory_order_acquire);
        threadpool_fn fn = atomic_load_explicit(&tp->fn, memory_order_acquire);
        void *arg = atomic_load_explicit(&tp->arg, memory_order_acquire);
        if (k >= (uint32_t)n) return;
        // On failure w is reloaded and the fields are read again for what it now says.
        if (!atomic_compare_exchange_weak_explicit(&tp->work, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        fn(arg, (int)k, n);
        atomic_fetch_add_explicit(&tp->n_done, 1, memory_order_release);
        w = atomic_load_explicit(&tp->work, memory_order_acquire);
    }
}

/* --cpu-mask: written at start-up before any pool exists, read-only afterwards. */
static struct cpu_mask pin_mask;
static bool pin_is_set;

void threadpool_set_cpu_mask(const struct cpu_mask *mask)
{
    pin_is_set = mask != NULL;
    if (mask) pin_mask = *mask;
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct threadpool *tp = w->tp;
    if (pin_is_set) (void)thread_pin_self(&pin_mask); // best effort: an offline CPU is no error
    uint32_t seen = 0; // gen before any run; reading it here could skip a run published early
    for (;;) {
        seen = wait_gen(tp, seen);
        if (atomic_load_explicit(&tp->stop, memory_order_acquire)) break;
        run_chunks(tp, seen);
    }
    return NULL;
}

/* Ends the last run for good: no claim of it can succeed after this (see struct threadpool).
 * Its generation is one of its own, so waiting workers see it and find nothing to claim. */
static void close_run(struct threadpool *tp)
{
    tp->gen++;
    atomic_store(&tp->work, (uint64_t)tp->gen << 32 | CLOSED);
}

/* Publishes generation ++gen with chunk 0 next and wakes sleepers. */
static void publish(struct threadpool *tp)
{
    tp->gen++;
    atomic_store(&tp->work, (uint64_t)tp->gen << 32); // seq_cst, see wait_gen
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
    atomic_init(&tp->fn, NULL);
    atomic_init(&tp->arg, NULL);
    atomic_init(&tp->n_chunks, 0);
    atomic_init(&tp->work, 0);
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

void threadpool_run_chunks(struct threadpool *tp, threadpool_fn fn, void *arg, int n_chunks)
{
    if (n_chunks < 1 || n_chunks > CHUNKS_MAX) return;
    if (pin_is_set && !tp->caller_is_pinned) { // the dispatching thread computes too
        (void)thread_pin_self(&pin_mask);
        tp->caller_is_pinned = true;
    }
    if (tp->n_threads == 1 || n_chunks == 1) {
        for (int k = 0; k < n_chunks; k++)
            fn(arg, k, n_chunks);
        return;
    }
    close_run(tp);
    atomic_store_explicit(&tp->fn, fn, memory_order_release);
    atomic_store_explicit(&tp->arg, arg, memory_order_release);
    atomic_store_explicit(&tp->n_chunks, n_chunks, memory_order_release);
    atomic_store_explicit(&tp->n_done, 0, memory_order_relaxed);
    publish(tp); // releases the stores above
    run_chunks(tp, tp->gen);
    // Every chunk is claimed; wait for the ones other threads are still running. A thread
    // descheduled in the middle of its chunk is waited for: yield so it can get the CPU.
    for (unsigned i = 0; atomic_load_explicit(&tp->n_done, memory_order_acquire) < n_chunks; i++) {
        if (i < DONE_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
}

void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg)
{
    threadpool_run_chunks(tp, fn, arg, tp->n_threads);
}
