/* Handler threads: started on demand, ended after WORKERS_IDLE_MS idle. */
#include "server/workers.h"

#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <pthread.h>

#define WORKERS_IDLE_MS 30000 // an idle worker beyond WORKERS_KEEP ends after this
#define WORKERS_KEEP    4     // idle workers kept however long they idle

struct job {
    workers_job_fn fn;
    void *arg;
    struct job *next;
};

struct workers {
    struct mutex mu;
    struct cond cv_job;  // a job was queued, or stopping
    struct cond cv_exit; // a thread ended
    struct job *head, *tail;
    int n_threads;
    int n_idle;
    int max_threads;
    size_t stack_bytes;
    bool is_stopping;
};

static void *worker_main(void *arg)
{
    struct workers *w = arg;
    mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->is_stopping) {
            w->n_idle++;
            int rc = cond_wait_ms(&w->cv_job, &w->mu, WORKERS_IDLE_MS);
            w->n_idle--;
            if (rc == ERR_TIMEOUT && !w->head && w->n_threads > WORKERS_KEEP) goto out;
        }
        if (!w->head) break; // stopping with nothing left
        struct job *j = w->head;
        w->head = j->next;
        if (!w->head) w->tail = NULL;
        mutex_unlock(&w->mu);
        j->fn(j->arg);
        mem_free(j);
        mutex_lock(&w->mu);
    }
out:
    w->n_threads--;
    cond_broadcast(&w->cv_exit);
    mutex_unlock(&w->mu);
    return NULL;
}

/* Starts a detached worker; called with the mutex held. */
static int spawn(struct workers *w)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return ERR_NOMEM;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (w->stack_bytes) pthread_attr_setstacksize(&attr, w->stack_bytes);
    pthread_t t;
    int rc = pthread_create(&t, &attr, worker_main, w) == 0 ? ERR_OK : ERR_NOMEM;
    pthread_attr_destroy(&attr);
    if (rc == ERR_OK) w->n_threads++;
    return rc;
}

int workers_new(int max_threads, size_t stack_bytes, struct workers **out)
{
    struct workers *w = mem_calloc(1, sizeof *w);
    if (!w) return ERR_NOMEM;
    w->max_threads = max_threads > 0 ? max_threads : 1;
    w->stack_bytes = stack_bytes;
    if (mutex_init(&w->mu) != ERR_OK) goto out_free;
    if (cond_init(&w->cv_job) != ERR_OK) goto out_mutex;
    if (cond_init(&w->cv_exit) != ERR_OK) goto out_cv;
    *out = w;
    return ERR_OK;
out_cv:
    cond_deinit(&w->cv_job);
out_mutex:
    mutex_deinit(&w->mu);
out_free:
    mem_free(w);
    return ERR_NOMEM;
}

int workers_submit(struct workers *w, workers_job_fn fn, void *arg)
{
    struct job *j = mem_alloc(sizeof *j);
    if (!j) return ERR_NOMEM;
    *j = (struct job){fn, arg, NULL};
    mutex_lock(&w->mu);
    // Idle workers may already be claimed by jobs queued before this one.
    int n_queued = 0;
    for (struct job *q = w->head; q; q = q->next)
        n_queued++;
    if (n_queued >= w->n_idle && w->n_threads < w->max_threads && spawn(w) != ERR_OK &&
        w->n_threads == 0) {
        mutex_unlock(&w->mu);
        mem_free(j);
        return ERR_NOMEM;
    }
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    cond_signal(&w->cv_job);
    mutex_unlock(&w->mu);
    return ERR_OK;
}

int workers_thread_count(struct workers *w)
{
    mutex_lock(&w->mu);
    int n = w->n_threads;
    mutex_unlock(&w->mu);
    return n;
}

void workers_stop(struct workers *w)
{
    if (!w) return;
    mutex_lock(&w->mu);
    w->is_stopping = true;
    cond_broadcast(&w->cv_job);
    while (w->n_threads > 0)
        cond_wait(&w->cv_exit, &w->mu);
    mutex_unlock(&w->mu);
    cond_deinit(&w->cv_exit);
    cond_deinit(&w->cv_job);
    mutex_deinit(&w->mu);
    mem_free(w);
}
