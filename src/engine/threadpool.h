/* Kernel thread pool: a fixed set of workers that run the numbered chunks of one function, the
 * calling thread taking part. Built for the forward pass: a dispatch allocates nothing and takes
 * no lock while workers are awake, and chunks go to whichever threads are running, so a worker
 * the OS has descheduled (a loaded machine) delays a run by at most the chunk it holds. Not a
 * task queue. */
#ifndef ENGINE_THREADPOOL_H
#define ENGINE_THREADPOOL_H

/* One chunk of a run: splits the work by (ith, nth), 0 <= ith < nth. Chunks of a run must not
 * wait for each other (they may run one after another on one thread). */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

struct threadpool;

/* A pool of n_threads threads in total: n_threads - 1 workers are started, the thread that
 * dispatches a run is the last. ERR_OK, ERR_INVALID (n_threads < 1 or > 512), ERR_NOMEM
 * (allocation or thread creation failed; nothing is left running). Caller frees with
 * threadpool_free(). */
int threadpool_new(int n_threads, struct threadpool **out);

/* Stops and joins the workers, then frees. Must not race with threadpool_run().
 * threadpool_free(NULL) is a no-op. */
void threadpool_free(struct threadpool *tp);

/* Threads in the pool (>= 1). Cannot fail. */
int threadpool_size(const struct threadpool *tp);

/* Calls fn(arg, ith, n_chunks) once for every ith in 0..n_chunks-1, spread over the pool's
 * threads (the caller included; one thread may run several chunks, one after another), and
 * returns when every call has returned; everything the calls wrote is then visible to the
 * caller, and everything the caller wrote before is visible to them. A chunk count above the
 * thread count balances the load when threads run at different speeds. n_chunks < 1 or above
 * 1 << 20 does nothing. One thread at a time may call this on a pool (it belongs to its model's
 * scheduler thread); fn must not call into the pool itself. Idle workers spin for tens of
 * microseconds, then yield the CPU for a few milliseconds, then sleep on a condition variable.
 * Cannot fail. */
void threadpool_run_chunks(struct threadpool *tp, threadpool_fn fn, void *arg, int n_chunks);

/* threadpool_run_chunks with one chunk per thread: fn(arg, ith, nth) for ith in 0..nth-1 with
 * nth = threadpool_size(tp). Cannot fail. */
void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg);

struct cpu_mask;
/* Pins the compute threads of every pool created afterwards to the mask's CPUs (--cpu-mask):
 * each worker at its start, the dispatching thread at its first run. NULL: no pinning (the
 * default). Call before creating pools (start-up); not thread-safe against threadpool_new. */
void threadpool_set_cpu_mask(const struct cpu_mask *mask);

#endif
