/* platform/instances: worker mode with an in-process runtime — one run per handle at a time,
 * the instance back in the pool before the reader wakes, cancel and stop abort a blocked run
 * and wait for it, a failing init leaves nothing behind, handles destroyed only when idle. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "platform/instances.h"
#include "util/mem.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* A runtime handle: run blocks until the request's prompt says how many tokens, or abort. */
struct handle {
    atomic_bool is_running;
    atomic_bool is_aborted;
    atomic_int n_runs;
};

struct fake_model {
    atomic_int n_init, n_destroy, n_abort;
    int fail_init_at; // 1-based init that fails; 0: none
    struct instances set;
    atomic_int n_done;           // on_done calls
    atomic_int done_before_wake; // on_done ran while the reader could not see the outcome
    struct request *watched;     // request whose reader is checked at on_done
    int remove_on_done;          // 1 + the instance on_done removes (the core retiring it)
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int fake_init(void *model, int i, void **handle, struct errmsg *err)
{
    struct fake_model *m = model;
    (void)i;
    int n = atomic_fetch_add(&m->n_init, 1) + 1;
    if (n == m->fail_init_at) return errmsg_set(err, ERR_IO, "init %d fails", n);
    struct handle *h = mem_calloc(1, sizeof *h);
    if (!h) return ERR_NOMEM;
    *handle = h;
    return ERR_OK;
}

/* prompt[0] tokens, one per 5 ms; prompt[0] < 0 runs until aborted. */
static void fake_run(void *model, int i, void *handle, struct inst_slot *slot)
{
    (void)model;
    (void)i;
    struct handle *h = handle;
    assert_false(atomic_exchange(&h->is_running, true)); // one run per handle
    atomic_fetch_add(&h->n_runs, 1);
    struct request *r = slot->req;
    int n = r->prompt[0];
    for (int k = 0; n < 0 || k < n; k++) {
        if (atomic_load(&h->is_aborted)) break;
        struct gen_event ev = {.token = k};
        request_push_event(r, &ev);
        sleep_ms(5);
    }
    bool aborted = atomic_exchange(&h->is_aborted, false);
    atomic_store(&h->is_running, false);
    inst_slot_finish(slot, aborted ? FINISH_CANCELLED : FINISH_STOP);
}

static void fake_abort(void *model, void *handle)
{
    struct fake_model *m = model;
    struct handle *h = handle;
    atomic_fetch_add(&m->n_abort, 1);
    atomic_store(&h->is_aborted, true);
}

static void fake_destroy(void *model, void *handle)
{
    struct fake_model *m = model;
    struct handle *h = handle;
    assert_false(atomic_load(&h->is_running)); // never while a run is in flight
    atomic_fetch_add(&m->n_destroy, 1);
    mem_free(h);
}

static const struct inst_worker_ops ops = {
    .init = fake_init,
    .run = fake_run,
    .abort = fake_abort,
    .destroy = fake_destroy,
};

static void on_done(void *owner, int instance)
{
    struct fake_model *m = owner;
    if (m->watched && request_outcome(m->watched, NULL, NULL, NULL) == FINISH_NONE)
        atomic_fetch_add(&m->done_before_wake, 1);
    if (m->remove_on_done == instance + 1) instances_remove(&m->set, instance);
    atomic_fetch_add(&m->n_done, 1);
}

static struct request *new_request(int n_tokens)
{
    struct gen_params gp;
    gen_params_defaults(&gp);
    int32_t prompt[1] = {n_tokens};
    struct request *r;
    assert_int_equal(request_new(REQUEST_GENERATE, prompt, 1, &gp, 64, &r), ERR_OK);
    return r;
}

static enum finish_reason wait_end(struct request *r)
{
    struct gen_event ev[64];
    int cursor = 0;
    enum finish_reason fin = FINISH_NONE;
    while (fin == FINISH_NONE)
        request_wait_events(r, &cursor, ev, 64, -1, &fin);
    return fin;
}

static void start(struct fake_model *m, int n_instances)
{
    assert_int_equal(instances_start_workers(&m->set, &ops, m, on_done, m), ERR_OK);
    for (int i = 0; i < n_instances; i++) {
        struct errmsg err;
        errmsg_clear(&err);
        assert_int_equal(instances_add(&m->set, i, &err), ERR_OK);
    }
}

static void stop(struct fake_model *m)
{
    instances_stop(&m->set);
    instances_deinit(&m->set);
    assert_int_equal(atomic_load(&m->n_init), atomic_load(&m->n_destroy));
}

static void test_runs_and_hands_back_before_waking(void **state)
{
    (void)state;
    struct fake_model m = {0};
    start(&m, 2);
    struct request *r = new_request(3);
    m.watched = r;
    instances_submit(&m.set, 1, r);
    assert_int_equal(wait_end(r), FINISH_STOP);
    assert_int_equal(r->n_events, 3);
    assert_int_equal(atomic_load(&m.n_done), 1);
    assert_int_equal(atomic_load(&m.done_before_wake), 1);
    assert_int_equal(atomic_load(&m.n_abort), 0);
    request_release(r);
    stop(&m);
}

static void test_cancel_aborts_the_run(void **state)
{
    (void)state;
    struct fake_model m = {0};
    start(&m, 1);
    struct request *r = new_request(-1); // until aborted
    instances_submit(&m.set, 0, r);
    sleep_ms(30);
    request_cancel(r);
    assert_int_equal(wait_end(r), FINISH_CANCELLED);
    assert_int_equal(atomic_load(&m.n_abort), 1);
    request_release(r);
    // The handle runs the next request normally.
    r = new_request(2);
    instances_submit(&m.set, 0, r);
    assert_int_equal(wait_end(r), FINISH_STOP);
    request_release(r);
    stop(&m);
}

static void test_abort_requested_from_the_run(void **state)
{
    (void)state;
    struct fake_model m = {0};
    start(&m, 1);
    struct request *r = new_request(-1);
    instances_submit(&m.set, 0, r);
    sleep_ms(20);
    instances_abort(&m.set, &m.set.slot[0]); // as a callback that saw a stop would
    assert_int_equal(wait_end(r), FINISH_CANCELLED);
    assert_int_equal(atomic_load(&m.n_abort), 1);
    request_release(r);
    stop(&m);
}

static void test_stop_aborts_running_and_destroys_idle(void **state)
{
    (void)state;
    struct fake_model m = {0};
    start(&m, 3);
    struct request *a = new_request(-1), *b = new_request(-1);
    instances_submit(&m.set, 0, a);
    instances_submit(&m.set, 2, b);
    sleep_ms(20);
    stop(&m); // returns only after both runs returned and all three handles were destroyed
    assert_int_equal(atomic_load(&m.n_destroy), 3);
    assert_int_equal(request_outcome(a, NULL, NULL, NULL), FINISH_CANCELLED);
    assert_int_equal(request_outcome(b, NULL, NULL, NULL), FINISH_CANCELLED);
    request_release(a);
    request_release(b);
}

static void test_failing_init_and_remove(void **state)
{
    (void)state;
    struct fake_model m = {.fail_init_at = 2};
    assert_int_equal(instances_start_workers(&m.set, &ops, &m, on_done, &m), ERR_OK);
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(instances_add(&m.set, 0, &err), ERR_OK);
    assert_int_equal(instances_add(&m.set, 1, &err), ERR_IO);
    assert_string_equal(err.msg, "init 2 fails");
    assert_false(m.set.slot[1].exists);
    assert_int_equal(instances_add(&m.set, 0, &err), ERR_INVALID); // in use
    assert_int_equal(instances_add(&m.set, 1, &err), ERR_OK);
    instances_remove(&m.set, 0);
    assert_false(m.set.slot[0].exists);
    assert_int_equal(atomic_load(&m.n_destroy), 1);
    struct request *r = new_request(1);
    instances_submit(&m.set, 1, r);
    assert_int_equal(wait_end(r), FINISH_STOP);
    request_release(r);
    instances_stop(&m.set);
    instances_deinit(&m.set);
    assert_int_equal(atomic_load(&m.n_destroy), 2);
}

/* The core retires a busy instance from on_done, on the instance's own worker thread. */
static void test_retire_from_own_worker(void **state)
{
    (void)state;
    struct fake_model m = {0};
    start(&m, 2);
    m.remove_on_done = 1 + 1;
    struct request *r = new_request(2);
    instances_submit(&m.set, 1, r);
    assert_int_equal(wait_end(r), FINISH_STOP);
    request_release(r);
    for (int k = 0; k < 100 && atomic_load(&m.n_destroy) < 1; k++)
        sleep_ms(5);
    assert_int_equal(atomic_load(&m.n_destroy), 1); // its handle, by the ending worker
    assert_false(m.set.slot[1].exists);
    m.remove_on_done = 0;
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(instances_add(&m.set, 1, &err), ERR_OK); // the slot is reused
    r = new_request(1);
    instances_submit(&m.set, 1, r);
    assert_int_equal(wait_end(r), FINISH_STOP);
    request_release(r);
    stop(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_and_hands_back_before_waking),
        cmocka_unit_test(test_cancel_aborts_the_run),
        cmocka_unit_test(test_abort_requested_from_the_run),
        cmocka_unit_test(test_stop_aborts_running_and_destroys_idle),
        cmocka_unit_test(test_failing_init_and_remove),
        cmocka_unit_test(test_retire_from_own_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
