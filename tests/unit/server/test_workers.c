/* server/workers.c: every job runs once, threads grow to the work and stop cleanly. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "server/workers.h"
#include "util/err.h"

#include <stdatomic.h>
#include <time.h>

static atomic_int n_ran;
static atomic_int n_blocked;
static atomic_bool is_released;

static void count_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&n_ran, 1);
}

/* Blocks until released, as a handler waiting on its generation does. */
static void blocking_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&n_blocked, 1);
    struct timespec tick = {0, 1000000};
    while (!atomic_load(&is_released))
        nanosleep(&tick, NULL);
    atomic_fetch_add(&n_ran, 1);
}

static void test_every_job_runs(void **state)
{
    (void)state;
    atomic_store(&n_ran, 0);
    struct workers *w;
    assert_int_equal(workers_new(4, 0, &w), ERR_OK);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(workers_submit(w, count_job, NULL), ERR_OK);
    workers_stop(w); // waits for the queue to drain
    assert_int_equal(atomic_load(&n_ran), 1000);
}

static void test_blocking_jobs_get_their_own_threads(void **state)
{
    (void)state;
    atomic_store(&n_ran, 0);
    atomic_store(&n_blocked, 0);
    atomic_store(&is_released, false);
    struct workers *w;
    assert_int_equal(workers_new(16, 256 * 1024, &w), ERR_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(workers_submit(w, blocking_job, NULL), ERR_OK);
    // All 8 run at once: none waits behind a blocked one.
    struct timespec tick = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&n_blocked) < 8; i++)
        nanosleep(&tick, NULL);
    assert_int_equal(atomic_load(&n_blocked), 8);
    assert_true(workers_thread_count(w) >= 8);
    assert_true(workers_thread_count(w) <= 16);
    atomic_store(&is_released, true);
    workers_stop(w);
    assert_int_equal(atomic_load(&n_ran), 8);
}

static void test_capped_threads_queue_the_rest(void **state)
{
    (void)state;
    atomic_store(&n_ran, 0);
    atomic_store(&n_blocked, 0);
    atomic_store(&is_released, false);
    struct workers *w;
    assert_int_equal(workers_new(2, 0, &w), ERR_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(workers_submit(w, blocking_job, NULL), ERR_OK);
    struct timespec tick = {0, 20000000};
    nanosleep(&tick, NULL);
    assert_int_equal(workers_thread_count(w), 2);
    assert_true(atomic_load(&n_blocked) <= 2);
    atomic_store(&is_released, true);
    workers_stop(w);
    assert_int_equal(atomic_load(&n_ran), 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_job_runs),
        cmocka_unit_test(test_blocking_jobs_get_their_own_threads),
        cmocka_unit_test(test_capped_threads_queue_the_rest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
