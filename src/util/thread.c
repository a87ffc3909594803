/* pthread wrappers. Failures of lock/unlock on a valid mutex are programmer errors. */
#include "util/thread.h"

#include "util/err.h"

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
