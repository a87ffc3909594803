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

#define THREAD_CPU_MAX 1024 // CPUs a mask can name

/* A set of CPUs, bit i of bits[i / 64] for CPU i. */
struct cpu_mask {
    uint64_t bits[THREAD_CPU_MAX / 64];
};

/* Parses a hexadecimal CPU mask ("0xf0", "F0", "1" + 255 zeros...; bit i = CPU i, as taskset
 * and llama.cpp's --cpu-mask read it). ERR_OK and *out, or ERR_INVALID (empty, not hex, more
 * than THREAD_CPU_MAX bits, or no CPU set). */
int thread_cpu_mask_parse(const char *text, struct cpu_mask *out);

/* CPUs in the mask. Cannot fail. */
int thread_cpu_mask_count(const struct cpu_mask *m);

/* The big cores of a heterogeneous (big.LITTLE) CPU from
 * <sysfs_root>/devices/system/cpu/cpu<N>/cpu_capacity (the kernel's relative performance per
 * core, 1024 for the fastest): when capacities differ, the number of CPUs with at least half
 * the largest capacity (an RK3588's 4 Cortex-A76 at 1024, not its A55s near 400; a phone's
 * prime and big cores together), and *big (when not NULL) their set; 0 when every CPU has the
 * same capacity or the files are absent (x86, most VMs). sysfs_root is "/sys" outside tests. */
int thread_big_core_count_at(const char *sysfs_root, struct cpu_mask *big);

/* Default engine threads: the big cores on a heterogeneous CPU (a step of the forward pass
 * waits for its slowest thread, so a little core given an equal share holds back all of
 * them), else the physical cores. >= 1. */
int thread_default_count(void);

/* Pins the calling thread to the CPUs of the mask. ERR_OK, or ERR_INVALID when the system
 * refuses (no CPU of the mask online, or not permitted). */
int thread_pin_self(const struct cpu_mask *m);

#endif
