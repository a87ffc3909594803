/* engine/threadpool: every thread runs each dispatch exactly once with its own (ith, nth), runs
 * complete before threadpool_run returns, and a pool survives many back-to-back runs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/threadpool.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdatomic.h>
#include <time.h>

struct job {
    atomic_int calls[8];
    atomic_int bad_nth;
    int64_t sum[8]; // per-thread, written without locks
    int round;
};

static void job_fn(void *arg, int ith, int nth)
{
    struct job *j = arg;
    if (nth < 1 || ith < 0 || ith >= nth || nth > 8)
        atomic_fetch_add(&j->bad_nth, 1);
    else {
        atomic_fetch_add(&j->calls[ith], 1);
        j->sum[ith] += j->round;
    }
}

static void test_every_thread_once(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n++) {
        struct threadpool *tp;
        assert_int_equal(threadpool_new(n, &tp), ERR_OK);
        assert_int_equal(threadpool_size(tp), n);
        struct job j = {0};
        for (int r = 0; r < 2000; r++) {
            j.round = r;
            threadpool_run(tp, job_fn, &j);
            // Completed before return: every per-thread counter is exactly r + 1.
            for (int i = 0; i < n; i++)
                assert_int_equal(atomic_load(&j.calls[i]), r + 1);
        }
        assert_int_equal(atomic_load(&j.bad_nth), 0);
        for (int i = 0; i < n; i++)
            assert_int_equal(j.sum[i], 1999 * 2000 / 2);
        threadpool_free(tp);
    }
}

static void test_wakes_after_sleep(void **state)
{
    (void)state;
    struct threadpool *tp;
    assert_int_equal(threadpool_new(3, &tp), ERR_OK);
    struct job j = {0};
    threadpool_run(tp, job_fn, &j);
    nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000},
              NULL); // long enough for workers to stop spinning and sleep
    threadpool_run(tp, job_fn, &j);
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&j.calls[i]), 2);
    threadpool_free(tp);
}

static void test_bad_args_and_alloc_failure(void **state)
{
    (void)state;
    struct threadpool *tp = NULL;
    assert_int_equal(threadpool_new(0, &tp), ERR_INVALID);
    assert_int_equal(threadpool_new(100000, &tp), ERR_INVALID);
    threadpool_free(NULL);
    int64_t live = mem_live_count();
    for (int n = 0; n < 3; n++) {
        mem_fail_after(n);
        int rc = threadpool_new(2, &tp);
        mem_fail_after(-1);
        if (rc == ERR_OK)
            threadpool_free(tp);
        else
            assert_int_equal(rc, ERR_NOMEM);
        assert_int_equal(mem_live_count(), live);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_thread_once),
        cmocka_unit_test(test_wakes_after_sleep),
        cmocka_unit_test(test_bad_args_and_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
