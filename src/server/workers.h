/* The threads that run request handlers, off the HTTP event loop. A handler may block (it
 * waits for its generation, a model load, a long JSON parse), so each runs on a worker of its
 * own; workers are started when every one is busy and end after a while idle, so threads
 * follow the requests being worked on, not the connections open. */
#ifndef SERVER_WORKERS_H
#define SERVER_WORKERS_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*workers_job_fn)(void *arg);

struct workers;

/* max_threads >= 1; stack_bytes for each thread (0: the default). ERR_OK or ERR_NOMEM.
 * Caller stops with workers_stop(). */
int workers_new(int max_threads, size_t stack_bytes, struct workers **out);

/* Runs fn(arg) on a worker: an idle one, a new one, or (all max_threads busy) the first to
 * become free. ERR_OK, or ERR_NOMEM (nothing will run fn; the caller answers). Thread-safe. */
int workers_submit(struct workers *w, workers_job_fn fn, void *arg);

/* Threads alive now (for tests and logs). */
int workers_thread_count(struct workers *w);

/* Waits for the queued and running jobs to finish, ends the threads, frees. NULL is a no-op. */
void workers_stop(struct workers *w);

#endif
