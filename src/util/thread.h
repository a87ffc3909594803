/* Thin wrappers over POSIX threads, mutexes and condition variables, so thread creation goes
 * through one place and condition waits use the monotonic clock. */
#ifndef UTIL_THREAD_H
#define UTIL_THREAD_H

#include <pthread.h>
#include <stdint.h>

struct thread {
    pthread_t handle;
};

struct mutex {
    pthread_mutex_t m;
};

struct cond {
    pthread_cond_t c;
};

typedef void *(*thread_fn)(void *arg);

/* Starts fn(arg) on a new thread. ERR_OK, or ERR_NOMEM when the system refuses. */
int thread_start(struct thread *t, thread_fn fn, void *arg);
/* Waits for the thread to finish. */
void thread_join(struct thread *t);

int mutex_init(struct mutex *mu);
void mutex_deinit(struct mutex *mu);
void mutex_lock(struct mutex *mu);
void mutex_unlock(struct mutex *mu);

/* Condition variable on CLOCK_MONOTONIC. cond_wait_ms returns ERR_OK when signalled (or
 * spuriously woken) and ERR_TIMEOUT when timeout_ms passed. */
int cond_init(struct cond *cv);
void cond_deinit(struct cond *cv);
void cond_wait(struct cond *cv, struct mutex *mu);
int cond_wait_ms(struct cond *cv, struct mutex *mu, int64_t timeout_ms);
void cond_signal(struct cond *cv);
void cond_broadcast(struct cond *cv);

/* Number of online logical CPUs (>= 1) and of physical cores (>= 1, from sysfs topology;
 * falls back to logical CPUs). */
int thread_cpu_count(void);
int thread_physical_core_count(void);

#endif
