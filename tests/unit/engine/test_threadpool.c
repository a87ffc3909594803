/* engine/threadpool: every chunk of a run is called exactly once with its own (ith, nth), runs
 * complete before the dispatch returns, chunks go to whichever thread is free (a long chunk on
 * one thread does not hold back the others), and a pool survives many back-to-back runs and
 * sleeps between them. */
#define _GNU_SOURCE // sched_getcpu
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/threadpool.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

#define CHUNKS_TESTED 64

struct chunk_job {
    atomic_int calls[CHUNKS_TESTED];
    atomic_int bad;
    int64_t sum[CHUNKS_TESTED]; // per chunk, written without locks
    int round, n_chunks;
};

static void chunk_fn(void *arg, int ith, int nth)
{
    struct chunk_job *j = arg;
    if (nth != j->n_chunks || ith < 0 || ith >= nth) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    atomic_fetch_add(&j->calls[ith], 1);
    j->sum[ith] += j->round;
}

/* Any chunk count, above or below the thread count, runs each chunk once per dispatch, and
 * what the chunks wrote without atomics is visible to the caller afterwards. */
static void test_chunks_each_once(void **state)
{
    (void)state;
    static const int counts[] = {1, 2, 3, 7, CHUNKS_TESTED};
    for (int n = 1; n <= 3; n++) {
        struct threadpool *tp;
        assert_int_equal(threadpool_new(n, &tp), ERR_OK);
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            struct chunk_job j = {.n_chunks = counts[c]};
            for (int r = 0; r < 300; r++) {
                j.round = r;
                threadpool_run_chunks(tp, chunk_fn, &j, counts[c]);
                for (int k = 0; k < counts[c]; k++)
                    assert_int_equal(atomic_load(&j.calls[k]), r + 1);
            }
            assert_int_equal(atomic_load(&j.bad), 0);
            for (int k = 0; k < counts[c]; k++)
                assert_int_equal(j.sum[k], 299 * 300 / 2);
        }
        // out-of-range counts do nothing
        struct chunk_job j = {.n_chunks = 0};
        threadpool_run_chunks(tp, chunk_fn, &j, 0);
        threadpool_run_chunks(tp, chunk_fn, &j, -3);
        assert_int_equal(atomic_load(&j.bad), 0);
        threadpool_free(tp);
    }
}

struct stall_job {
    atomic_int n_done_others; // chunks other than 0 that returned
    atomic_bool is_waiting;   // chunk 0 started
    int n_chunks;
    bool saw_all; // written by chunk 0 only
};

static void stall_fn(void *arg, int ith, int nth)
{
    struct stall_job *j = arg;
    (void)nth;
    if (ith != 0) {
        atomic_fetch_add(&j->n_done_others, 1);
        return;
    }
    // Chunk 0 holds its thread until the other thread has done every other chunk (with a
    // generous time limit, so a broken pool fails instead of hanging).
    atomic_store(&j->is_waiting, true);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (atomic_load(&j->n_done_others) == j->n_chunks - 1) {
            j->saw_all = true;
            return;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 10) return;
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000}, NULL);
    }
}

/* A thread stuck in one chunk (as a descheduled one would be) does not keep its share of the
 * run: the other thread claims every remaining chunk, whichever thread chunk 0 landed on. */
static void test_busy_thread_does_not_hold_chunks(void **state)
{
    (void)state;
    struct threadpool *tp;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    for (int r = 0; r < 20; r++) {
        struct stall_job j = {.n_chunks = 16};
        atomic_init(&j.n_done_others, 0);
        atomic_init(&j.is_waiting, false);
        threadpool_run_chunks(tp, stall_fn, &j, j.n_chunks);
        assert_true(atomic_load(&j.is_waiting));
        assert_true(j.saw_all);
        assert_int_equal(atomic_load(&j.n_done_others), j.n_chunks - 1);
    }
    threadpool_free(tp);
}

struct phase_job {
    atomic_bool is_open; // set by the dispatcher around its run
    atomic_int calls[CHUNKS_TESTED];
    atomic_int strays; // chunks run outside their run, or with another run's chunk count
    int n_chunks;
};

static void phase_fn(void *arg, int ith, int nth)
{
    struct phase_job *j = arg;
    if (!atomic_load(&j->is_open) || nth != j->n_chunks || ith < 0 || ith >= nth)
        atomic_fetch_add(&j->strays, 1);
    else
        atomic_fetch_add(&j->calls[ith], 1);
}

/* Back-to-back runs of different functions, arguments and chunk counts, as a forward pass
 * dispatches them: no chunk ever runs before its run starts or after it returned, none runs
 * twice, and a chunk count from the next run never lets a thread claim a chunk of this one
 * (a worker reading the next run's larger count while this run's chunks were all claimed used
 * to run a chunk nobody waited for). */
static void test_runs_never_overlap(void **state)
{
    (void)state;
    struct threadpool *tp;
    assert_int_equal(threadpool_new(2, &tp), ERR_OK);
    static struct phase_job jobs[2];
    const int counts[2] = {2, 8};
    for (int i = 0; i < 2; i++) {
        jobs[i].n_chunks = counts[i];
        atomic_init(&jobs[i].is_open, false);
        atomic_init(&jobs[i].strays, 0);
        for (int k = 0; k < CHUNKS_TESTED; k++)
            atomic_init(&jobs[i].calls[k], 0);
    }
    const int runs = 200000;
    int bad = 0;
    for (int r = 0; r < runs && bad == 0; r++) {
        struct phase_job *j = &jobs[r & 1];
        atomic_store(&j->is_open, true);
        threadpool_run_chunks(tp, phase_fn, j, j->n_chunks);
        atomic_store(&j->is_open, false);
        for (int k = 0; k < j->n_chunks; k++)
            bad += atomic_exchange(&j->calls[k], 0) != 1;
    }
    threadpool_free(tp);
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&jobs[0].strays), 0);
    assert_int_equal(atomic_load(&jobs[1].strays), 0);
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

/* A fake sysfs root with one cpu_capacity file per CPU (caps[i] < 0: no file). */
static void fake_sysfs(char *root, const int *caps, int n)
{
    strcpy(root, "/tmp/llamapi-sysfs-XXXXXX");
    assert_non_null(mkdtemp(root));
    char path[256];
    const char *parts[] = {"/devices", "/devices/system", "/devices/system/cpu"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s%s", root, parts[k]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d", root, i);
        assert_int_equal(mkdir(path, 0700), 0);
        if (caps[i] < 0) continue;
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/cpu_capacity", root, i);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "%d\n", caps[i]);
        fclose(f);
    }
}

static void fake_sysfs_remove(const char *root, int n)
{
    char path[256];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/cpu_capacity", root, i);
        unlink(path);
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d", root, i);
        rmdir(path);
    }
    const char *parts[] = {"/devices/system/cpu", "/devices/system", "/devices", ""};
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s%s", root, parts[k]);
        rmdir(path);
    }
}

/* Big cores from cpu_capacity: an RK3588 (4 x A55 then 4 x A76), a phone (1 prime + 3 big +
 * 4 little), a homogeneous CPU, files missing. */
static void test_big_cores_from_sysfs(void **state)
{
    (void)state;
    static const struct {
        int caps[8], n, want;
        uint64_t mask;
    } cs[] = {
        {{414, 414, 414, 414, 1024, 1024, 1024, 1024}, 8, 4, 0xf0},
        {{325, 325, 325, 325, 870, 870, 870, 1024}, 8, 4, 0xf0},
        {{1024, 1024, 1024, 1024}, 4, 0, 0},
        {{1024, 446, -1, 446}, 4, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char root[64];
        fake_sysfs(root, cs[i].caps, cs[i].n);
        struct cpu_mask big;
        memset(&big, 0xff, sizeof big);
        const int got = thread_big_core_count_at(root, &big);
        fake_sysfs_remove(root, cs[i].n);
        assert_int_equal(got, cs[i].want);
        if (got) {
            assert_int_equal(big.bits[0], cs[i].mask);
            assert_int_equal(big.bits[1], 0);
        }
    }
    assert_int_equal(thread_big_core_count_at("/nonexistent-sysfs", NULL), 0);
    assert_true(thread_default_count() >= 1);
}

static void test_cpu_mask_parse(void **state)
{
    (void)state;
    struct cpu_mask m;
    assert_int_equal(thread_cpu_mask_parse("f0", &m), ERR_OK);
    assert_int_equal(m.bits[0], 0xf0);
    assert_int_equal(thread_cpu_mask_count(&m), 4);
    assert_int_equal(thread_cpu_mask_parse("0x1", &m), ERR_OK);
    assert_int_equal(m.bits[0], 1);
    assert_int_equal(thread_cpu_mask_parse("0X8000000000000000A", &m), ERR_OK);
    assert_int_equal(m.bits[0], 0xa);
    assert_int_equal(m.bits[1], 8); // CPU 67
    char big[300];
    memset(big, '0', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[sizeof big - 2] = '1';
    assert_int_equal(thread_cpu_mask_parse(big, &m), ERR_OK); // leading zeros are fine
    assert_int_equal(m.bits[0], 1);
    big[0] = '1'; // CPU 1196: more than THREAD_CPU_MAX
    assert_int_equal(thread_cpu_mask_parse(big, &m), ERR_INVALID);
    const char *bad[] = {"", "0x", "0", "000", "xyz", "f0g", "-1", " 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(thread_cpu_mask_parse(bad[i], &m), ERR_INVALID);
}

static atomic_int cpu_seen[8];

static void record_cpu(void *arg, int ith, int nth)
{
    (void)arg;
    (void)nth;
    atomic_store(&cpu_seen[ith], sched_getcpu());
}

/* --cpu-mask: every compute thread of a pool created after the call runs on the mask's CPUs
 * (here CPU 0 alone), the dispatching thread included. */
static void test_cpu_mask_pins_threads(void **state)
{
    (void)state;
    struct cpu_mask m, all;
    assert_int_equal(thread_cpu_mask_parse("1", &m), ERR_OK);
    threadpool_set_cpu_mask(&m);
    struct threadpool *tp;
    assert_int_equal(threadpool_new(3, &tp), ERR_OK);
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 3; i++)
            atomic_store(&cpu_seen[i], -1);
        threadpool_run(tp, record_cpu, NULL);
        for (int i = 0; i < 3; i++)
            assert_int_equal(atomic_load(&cpu_seen[i]), 0);
    }
    threadpool_free(tp);
    threadpool_set_cpu_mask(NULL);
    memset(&all, 0, sizeof all);
    for (int i = 0; i < thread_cpu_count() && i < THREAD_CPU_MAX; i++)
        all.bits[i / 64] |= (uint64_t)1 << (i % 64);
    assert_int_equal(thread_pin_self(&all), ERR_OK); // this thread runs anywhere again
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_thread_once),
        cmocka_unit_test(test_wakes_after_sleep),
        cmocka_unit_test(test_chunks_each_once),
        cmocka_unit_test(test_busy_thread_does_not_hold_chunks),
        cmocka_unit_test(test_runs_never_overlap),
        cmocka_unit_test(test_bad_args_and_alloc_failure),
        cmocka_unit_test(test_big_cores_from_sysfs),
        cmocka_unit_test(test_cpu_mask_parse),
        cmocka_unit_test(test_cpu_mask_pins_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
