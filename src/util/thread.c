/* pthread wrappers. Failures of lock/unlock on a valid mutex are programmer errors. */
#define _GNU_SOURCE // sched_setaffinity, CPU_SET
#include "util/thread.h"

#include "util/err.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int thread_start(struct thread *t, thread_fn fn, void *arg)
{
    return pthread_create(&t->handle, NULL, fn, arg) == 0 ? ERR_OK : ERR_NOMEM;
}

void thread_join(struct thread *t)
{
    pthread_join(t->handle, NULL);
}

int mutex_init(struct mutex *mu)
{
    return pthread_mutex_init(&mu->m, NULL) == 0 ? ERR_OK : ERR_NOMEM;
}

void mutex_deinit(struct mutex *mu)
{
    pthread_mutex_destroy(&mu->m);
}

void mutex_lock(struct mutex *mu)
{
    pthread_mutex_lock(&mu->m);
}

void mutex_unlock(struct mutex *mu)
{
    pthread_mutex_unlock(&mu->m);
}

int cond_init(struct cond *cv)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return ERR_NOMEM;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&cv->c, &attr);
    pthread_condattr_destroy(&attr);
    return rc == 0 ? ERR_OK : ERR_NOMEM;
}

void cond_deinit(struct cond *cv)
{
    pthread_cond_destroy(&cv->c);
}

void cond_wait(struct cond *cv, struct mutex *mu)
{
    pthread_cond_wait(&cv->c, &mu->m);
}

int cond_wait_ms(struct cond *cv, struct mutex *mu, int64_t timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (timeout_ms % 1000) * 1000000;
    ts.tv_sec += (time_t)(timeout_ms / 1000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return pthread_cond_timedwait(&cv->c, &mu->m, &ts) == 0 ? ERR_OK : ERR_TIMEOUT;
}

void cond_signal(struct cond *cv)
{
    pthread_cond_signal(&cv->c);
}

void cond_broadcast(struct cond *cv)
{
    pthread_cond_broadcast(&cv->c);
}

int thread_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Counts distinct (package, core) pairs in sysfs; hyper-threads share a core id. */
int thread_physical_core_count(void)
{
    int n_cpu = thread_cpu_count();
    int seen[512][2];
    int n_seen = 0;
    for (int cpu = 0; cpu < n_cpu && cpu < 512; cpu++) {
        int ids[2] = {-1, -1};
        const char *names[2] = {"physical_package_id", "core_id"};
        for (int k = 0; k < 2; k++) {
            char path[128];
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, names[k]);
            FILE *f = fopen(path, "r");
            if (!f) return n_cpu;
            if (fscanf(f, "%d", &ids[k]) != 1) ids[k] = -1;
            fclose(f);
        }
        int dup = 0;
        for (int i = 0; i < n_seen && !dup; i++)
            dup = seen[i][0] == ids[0] && seen[i][1] == ids[1];
        if (!dup) {
            seen[n_seen][0] = ids[0];
            seen[n_seen][1] = ids[1];
            n_seen++;
        }
    }
    return n_seen > 0 ? n_seen : n_cpu;
}

int thread_cpu_mask_parse(const char *text, struct cpu_mask *out)
{
    memset(out, 0, sizeof *out);
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text += 2;
    size_t len = strlen(text);
    if (len == 0) return ERR_INVALID;
    for (size_t i = 0; i < len; i++) { // the last digit holds CPUs 0..3
        const char ch = text[len - 1 - i];
        int v = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (v < 0) return ERR_INVALID;
        if (v == 0) continue;
        if (4 * i + 4 > THREAD_CPU_MAX) return ERR_INVALID;
        out->bits[4 * i / 64] |= (uint64_t)v << (4 * i % 64);
    }
    return thread_cpu_mask_count(out) > 0 ? ERR_OK : ERR_INVALID;
}

int thread_cpu_mask_count(const struct cpu_mask *m)
{
    int n = 0;
    for (size_t i = 0; i < sizeof m->bits / sizeof m->bits[0]; i++)
        n += __builtin_popcountll(m->bits[i]);
    return n;
}

int thread_big_core_count_at(const char *sysfs_root, struct cpu_mask *big)
{
    static long cap[THREAD_CPU_MAX];
    long max = 0, min = 0;
    int n = 0;
    for (; n < THREAD_CPU_MAX; n++) {
        char path[512];
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d", sysfs_root, n);
        if (access(path, F_OK) != 0) break; // past the last CPU
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/cpu_capacity", sysfs_root, n);
        FILE *f = fopen(path, "r");
        if (!f) return 0; // a CPU without a capacity: nothing to compare
        long v = -1;
        if (fscanf(f, "%ld", &v) != 1) v = -1;
        fclose(f);
        if (v <= 0) return 0; // unreadable: treat the CPU as unknown
        cap[n] = v;
        max = n == 0 || v > max ? v : max;
        min = n == 0 || v < min ? v : min;
    }
    if (n == 0 || min == max) return 0;
    int count = 0;
    if (big) memset(big, 0, sizeof *big);
    for (int i = 0; i < n; i++)
        if (2 * cap[i] >= max) { // the fastest cluster and any within 2x of it
            count++;
            if (big) big->bits[i / 64] |= (uint64_t)1 << (i % 64);
        }
    return count;
}

int thread_default_count(void)
{
    const int big = thread_big_core_count_at("/sys", NULL);
    return big > 0 ? big : thread_physical_core_count();
}

int thread_pin_self(const struct cpu_mask *m)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < THREAD_CPU_MAX && i < CPU_SETSIZE; i++)
        if (m->bits[i / 64] >> (i % 64) & 1) CPU_SET(i, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? ERR_OK : ERR_INVALID;
}
