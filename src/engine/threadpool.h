/* Kernel thread pool: a fixed set of workers that all run the same function with their own
 * (ith, nth), the calling thread taking part as ith 0. Built for the forward pass: a dispatch
 * allocates nothing and takes no lock while workers are spinning. Not a task queue. */
#ifndef ENGINE_THREADPOOL_H
#define ENGINE_THREADPOOL_H

/* Runs on every thread of the pool; splits its work by (ith, nth), 0 <= ith < nth. */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

struct threadpool;

/* A pool of n_threads threads in total: n_threads - 1 workers are started, the caller of
 * threadpool_run() is the last. ERR_OK, ERR_INVALID (n_threads < 1 or > 512), ERR_NOMEM
 * (allocation or thread creation failed; nothing is left running). Caller frees with
 * threadpool_free(). */
int threadpool_new(int n_threads, struct threadpool **out);

/* Stops and joins the workers, then frees. Must not race with threadpool_run().
 * threadpool_free(NULL) is a no-op. */
void threadpool_free(struct threadpool *tp);

/* Threads in the pool (>= 1). Cannot fail. */
int threadpool_size(const struct threadpool *tp);

/* Runs fn(arg, ith, nth) on all nth threads and returns when every call has returned. One
 * thread at a time may call this on a pool (it belongs to its model's scheduler thread); fn
 * must not call threadpool_run itself. Workers spin briefly between runs, then sleep on a
 * condition variable. Cannot fail. */
void threadpool_run(struct threadpool *tp, threadpool_fn fn, void *arg);

#endif
