/* core/: pool admission and FIFO order, 429 when full, resize up/down around busy instances,
 * partial loads at the memory budget, unload with queued and running requests, refcounts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/models/model_select.h"
#include "core/model.h"
#include "core/registry.h"
#include "fake_platform.h"
#include "util/mem.h"

#include <time.h>

static struct budget budget;

static struct model *load_model(int instances, int queue_cap, int *actual)
{
    struct model_params p = {
        .id = "m",
        .path = "/fake",
        .platform = &fake_platform,
        .queue_cap = queue_cap,
        .budget = &budget,
    };
    struct model *m;
    assert_int_equal(model_new(&p, &m), ERR_OK);
    struct errmsg err;
    assert_int_equal(model_load(m, instances, actual, &err), ERR_OK);
    return m;
}

static struct request *new_request_with(const int32_t *prompt, int n)
{
    struct gen_params gp;
    gen_params_defaults(&gp);
    struct request *r;
    assert_int_equal(request_new(REQUEST_GENERATE, prompt, n, &gp, 16, &r), ERR_OK);
    return r;
}

static struct request *new_request(void)
{
    const int32_t prompt[3] = {1, 2, 3};
    return new_request_with(prompt, 3);
}

static int run_on(struct model *m, struct request *r)
{
    assert_int_equal(model_submit(m, r), POOL_ADMIT_RUN);
    return r->instance;
}

/* A prompt goes to the idle instance whose cache holds most of it; id_slot wins over that;
 * with nothing cached anywhere the lowest idle instance runs it. */
static void test_routing_prefers_the_longest_cached_prefix(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(3, 0, &actual);
    assert_int_equal(actual, 3);
    const int32_t a[] = {5, 6, 7, 8}, b[] = {9, 10, 11};
    struct request *ra = new_request_with(a, 4), *rb = new_request_with(b, 3);
    assert_int_equal(run_on(m, ra), 0);
    assert_int_equal(run_on(m, rb), 1);
    fake_complete(0, FINISH_STOP);
    fake_complete(1, FINISH_STOP);

    const int32_t b2[] = {9, 10, 12}, a2[] = {5, 6, 7, 1};
    struct request *rb2 = new_request_with(b2, 3), *ra2 = new_request_with(a2, 4);
    assert_int_equal(run_on(m, rb2), 1); // shares 2 tokens with instance 1, none with 0
    assert_int_equal(run_on(m, ra2), 0); // instance 1 is busy; 0 shares 3 tokens
    fake_complete(0, FINISH_STOP);
    fake_complete(1, FINISH_STOP);

    struct request *pinned = new_request_with(a, 4);
    pinned->preferred_instance = 2;
    assert_int_equal(run_on(m, pinned), 2);
    struct request *busy_pin = new_request_with(b, 3);
    busy_pin->preferred_instance = 2; // busy: falls back to the cache match
    assert_int_equal(run_on(m, busy_pin), 1);
    fake_complete(2, FINISH_STOP);
    fake_complete(1, FINISH_STOP);

    struct request *rs[] = {ra, rb, rb2, ra2, pinned, busy_pin};
    for (size_t i = 0; i < sizeof rs / sizeof *rs; i++)
        request_release(rs[i]);
    model_shutdown(m);
    model_release(m);
}

/* A request that matches no cache goes to the least recently used idle instance (one holding
 * nothing first), not the lowest: it used to take instance 0 and evict the conversation a
 * client had just run there while instance 1 sat empty. */
static void test_routing_spares_the_last_conversation(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(2, 0, &actual);
    const int32_t a[] = {5, 6, 7, 8}, b[] = {9, 10, 11}, c[] = {20, 21};
    struct request *ra = new_request_with(a, 4), *rb = new_request_with(b, 3);
    assert_int_equal(run_on(m, ra), 0);
    fake_complete(0, FINISH_STOP);
    assert_int_equal(run_on(m, rb), 1); // both idle, nothing shared: the unused one
    fake_complete(1, FINISH_STOP);
    struct request *ra2 = new_request_with(a, 4), *rc = new_request_with(c, 2);
    assert_int_equal(run_on(m, ra2), 0); // back to its conversation
    fake_complete(0, FINISH_STOP);
    assert_int_equal(run_on(m, rc), 1); // instance 1 was used longer ago
    fake_complete(1, FINISH_STOP);
    struct request *rs[] = {ra, rb, ra2, rc};
    for (size_t i = 0; i < sizeof rs / sizeof *rs; i++)
        request_release(rs[i]);
    model_shutdown(m);
    model_release(m);
}

/* /slots needs to know which instance is busy, not just how many. */
static void test_slot_states_name_the_busy_instance(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(2, 0, &actual);
    struct request *r = new_request();
    r->preferred_instance = 1;
    assert_int_equal(run_on(m, r), 1);
    enum pool_slot st[POOL_MAX_INSTANCES];
    model_slot_states(m, st);
    assert_int_equal(st[0], POOL_SLOT_IDLE);
    assert_int_equal(st[1], POOL_SLOT_BUSY);
    assert_int_equal(st[2], POOL_SLOT_EMPTY);
    fake_complete(1, FINISH_STOP);
    model_slot_states(m, st);
    assert_int_equal(st[1], POOL_SLOT_IDLE);
    request_release(r);
    model_shutdown(m);
    model_release(m);
}

static int setup(void **state)
{
    (void)state;
    fake_reset();
    budget_init(&budget, 1ull << 40);
    return 0;
}

static void test_fifo_queue_and_429(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(1, 2, &actual);
    assert_int_equal(actual, 1);
    struct request *r[4];
    for (int i = 0; i < 4; i++)
        r[i] = new_request();
    assert_int_equal(model_submit(m, r[0]), POOL_ADMIT_RUN);
    assert_int_equal(model_submit(m, r[1]), POOL_ADMIT_QUEUED);
    assert_int_equal(model_submit(m, r[2]), POOL_ADMIT_QUEUED);
    assert_int_equal(model_submit(m, r[3]), POOL_ADMIT_FULL);
    struct model_info info;
    model_get_info(m, &info);
    assert_int_equal(info.queue_depth, 2);
    assert_ptr_equal(fake.running[0], r[0]);
    fake_complete(0, FINISH_STOP); // r1 takes the instance, in FIFO order
    assert_ptr_equal(fake.running[0], r[1]);
    fake_complete(0, FINISH_STOP);
    assert_ptr_equal(fake.running[0], r[2]);
    fake_complete(0, FINISH_STOP);
    assert_null(fake.running[0]);
    for (int i = 0; i < 3; i++)
        assert_int_equal(request_outcome(r[i], NULL, NULL, NULL), FINISH_STOP);
    assert_int_equal(request_outcome(r[3], NULL, NULL, NULL), FINISH_NONE);
    for (int i = 0; i < 4; i++)
        request_release(r[i]);
    model_shutdown(m);
    model_release(m);
    assert_int_equal(fake.n_unloaded, 1);
}

static void test_zero_queue_refuses_when_busy(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(2, 0, &actual);
    assert_int_equal(actual, 2);
    struct request *a = new_request(), *b = new_request(), *c = new_request();
    assert_int_equal(model_submit(m, a), POOL_ADMIT_RUN);
    assert_int_equal(model_submit(m, b), POOL_ADMIT_RUN);
    assert_int_equal(model_submit(m, c), POOL_ADMIT_FULL);
    assert_non_null(fake.running[0]);
    assert_non_null(fake.running[1]);
    fake_complete(1, FINISH_STOP);
    assert_int_equal(model_submit(m, c), POOL_ADMIT_RUN);
    fake_complete(0, FINISH_STOP);
    fake_complete(1, FINISH_STOP);
    request_release(a);
    request_release(b);
    request_release(c);
    model_shutdown(m);
    model_release(m);
}

static void test_partial_load_at_budget(void **state)
{
    (void)state;
    budget_init(&budget, 3ull << 20); // room for three 1 MiB instances
    int actual;
    struct model *m = load_model(5, 4, &actual);
    assert_int_equal(actual, 3);
    assert_int_equal(fake.live_instances, 3);
    assert_int_equal(atomic_load(&budget.used_bytes), 3ull << 20);
    struct errmsg err;
    assert_int_equal(model_resize(m, 1, &actual, &err), ERR_OK);
    assert_int_equal(actual, 1);
    assert_int_equal(atomic_load(&budget.used_bytes), 1ull << 20);
    model_shutdown(m);
    model_release(m);
    assert_int_equal(atomic_load(&budget.used_bytes), 0);
}

static void test_platform_instance_failure_is_partial(void **state)
{
    (void)state;
    fake.max_instances = 2;
    int actual;
    struct model *m = load_model(4, 4, &actual);
    assert_int_equal(actual, 2);
    assert_int_equal(atomic_load(&budget.used_bytes), 2ull << 20);
    model_shutdown(m);
    model_release(m);
}

static void test_resize_down_retires_busy_when_done(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(3, 4, &actual);
    struct request *a = new_request(), *b = new_request();
    assert_int_equal(model_submit(m, a), POOL_ADMIT_RUN);
    assert_int_equal(model_submit(m, b), POOL_ADMIT_RUN);
    struct errmsg err;
    assert_int_equal(model_resize(m, 1, &actual, &err), ERR_OK);
    assert_int_equal(actual, 1); // one idle removed, one busy retiring
    assert_int_equal(fake.live_instances, 2);
    assert_int_equal(request_outcome(a, NULL, NULL, NULL), FINISH_NONE); // never cut
    fake_complete(1, FINISH_STOP); // the retiring one goes away now
    assert_int_equal(fake.live_instances, 1);
    assert_int_equal(model_resize(m, 3, &actual, &err), ERR_OK);
    assert_int_equal(actual, 3);
    fake_complete(0, FINISH_STOP);
    request_release(a);
    request_release(b);
    model_shutdown(m);
    model_release(m);
}

static void test_resize_up_serves_the_queue(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(1, 4, &actual);
    struct request *a = new_request(), *b = new_request();
    assert_int_equal(model_submit(m, a), POOL_ADMIT_RUN);
    assert_int_equal(model_submit(m, b), POOL_ADMIT_QUEUED);
    struct errmsg err;
    assert_int_equal(model_resize(m, 2, &actual, &err), ERR_OK);
    assert_ptr_equal(fake.running[1], b); // the new instance took the waiting request
    fake_complete(0, FINISH_STOP);
    fake_complete(1, FINISH_STOP);
    request_release(a);
    request_release(b);
    model_shutdown(m);
    model_release(m);
}

/* Plays the platform's scheduler: finishes instance 0 once its request is cancelled. */
static void *complete_when_cancelled(void *arg)
{
    struct request *r = arg;
    while (!atomic_load(&r->is_cancelled))
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    fake_complete(0, FINISH_CANCELLED);
    return NULL;
}

static void test_shutdown_ends_queued_and_running(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(1, 4, &actual);
    struct request *a = new_request(), *b = new_request();
    assert_int_equal(model_submit(m, a), POOL_ADMIT_RUN);
    assert_int_equal(model_submit(m, b), POOL_ADMIT_QUEUED);
    struct thread t;
    assert_int_equal(thread_start(&t, complete_when_cancelled, a), ERR_OK);
    model_shutdown(m); // returns only once the running request has stopped
    thread_join(&t);
    // Both end with the same answer; the running one was also told to stop (the thread saw
    // is_cancelled), and the platform's later outcome does not replace it.
    struct request *ended[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        int status = 0;
        struct errmsg err;
        assert_int_equal(request_outcome(ended[i], &status, &err, NULL), FINISH_ERROR);
        assert_int_equal(status, 404);
        assert_string_equal(err.msg, "model 'm' was unloaded");
    }
    assert_null(fake.running[0]); // the queued request was never dispatched
    request_release(a);
    request_release(b);
    model_release(m);
}

static void test_submit_after_shutdown_is_closed(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(1, 4, &actual);
    model_shutdown(m);
    struct request *r = new_request();
    assert_int_equal(model_submit(m, r), POOL_ADMIT_CLOSED);
    request_release(r);
    model_release(m);
}

static void test_abandon_queued(void **state)
{
    (void)state;
    int actual;
    struct model *m = load_model(1, 4, &actual);
    struct request *a = new_request(), *b = new_request();
    assert_int_equal(model_submit(m, a), POOL_ADMIT_RUN);
    assert_int_equal(model_submit(m, b), POOL_ADMIT_QUEUED);
    model_abandon(m, b);
    assert_int_equal(request_outcome(b, NULL, NULL, NULL), FINISH_CANCELLED);
    model_abandon(m, a); // running: only the flag
    assert_true(atomic_load(&a->is_cancelled));
    fake_complete(0, FINISH_CANCELLED);
    assert_null(fake.running[0]); // b was not dispatched
    request_release(a);
    request_release(b);
    model_shutdown(m);
    model_release(m);
}

static void test_failed_load_and_registry(void **state)
{
    (void)state;
    fake.fail_load = 1;
    struct model_params p = {
        .id = "bad", .path = "/x", .platform = &fake_platform, .budget = &budget};
    struct model *m;
    assert_int_equal(model_new(&p, &m), ERR_OK);
    struct errmsg err;
    int actual;
    assert_int_equal(model_load(m, 1, &actual, &err), ERR_FORMAT);
    assert_string_equal(err.msg, "fake: malformed model");
    model_release(m);

    fake.fail_load = 0;
    struct registry *reg;
    assert_int_equal(registry_new(&reg), ERR_OK);
    struct model *good = load_model(1, 1, &actual);
    assert_int_equal(registry_add(reg, good), ERR_OK);
    assert_int_equal(registry_add(reg, good), ERR_EXISTS);
    struct model *got = registry_acquire(reg, "m");
    assert_ptr_equal(got, good);
    model_release(got);
    struct model_info infos[4];
    assert_int_equal(registry_list(reg, infos, 4), 1);
    assert_string_equal(infos[0].id, "m");
    assert_int_equal(infos[0].instance_count, 1);
    struct model *taken = registry_take(reg, "m");
    assert_ptr_equal(taken, good);
    assert_null(registry_acquire(reg, "m"));
    model_release(taken);
    model_shutdown(good);
    model_release(good);
    registry_free(reg);
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* A request that found the model while it loaded waits for it; a failed load or an unload
 * ends that wait at once and says the model is gone, not "still loading" (a failed load
 * used to stay LOADING, so its waiters sat out their whole timeout and then got 503). */
static void test_waiters_learn_a_failed_load_or_unload(void **state)
{
    (void)state;
    fake.fail_load = 1;
    struct model_params p = {
        .id = "bad", .path = "/x", .platform = &fake_platform, .budget = &budget};
    struct model *m;
    assert_int_equal(model_new(&p, &m), ERR_OK);
    assert_true(model_is_loading(m));
    struct errmsg err;
    int actual;
    assert_int_equal(model_load(m, 1, &actual, &err), ERR_FORMAT);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_false(model_wait_ready(m, 3000));
    assert_true(elapsed_ms(&t0) < 1000);
    assert_false(model_is_loading(m));
    struct api_fail f = {0};
    assert_false(api_model_wait_ready(m, &f));
    assert_int_equal(f.status, 404);
    assert_string_equal(f.code, "model_not_found");
    model_release(m);

    fake.fail_load = 0;
    struct model *good = load_model(1, 1, &actual);
    assert_true(model_wait_ready(good, 3000));
    assert_false(model_is_loading(good));
    model_shutdown(good);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_false(model_wait_ready(good, 3000));
    assert_true(elapsed_ms(&t0) < 1000);
    assert_false(model_is_loading(good));
    f = (struct api_fail){0};
    assert_false(api_model_wait_ready(good, &f));
    assert_int_equal(f.status, 404);
    assert_string_equal(f.message, "The model 'm' was unloaded or failed to load");
    model_release(good);
}

static void test_request_stream(void **state)
{
    (void)state;
    struct request *r = new_request();
    for (int i = 0; i < 16; i++) {
        struct gen_event ev = {.token = i};
        assert_int_equal(request_push_event(r, &ev), ERR_OK);
    }
    struct gen_event ev = {.token = 99};
    assert_int_equal(request_push_event(r, &ev), ERR_LIMIT);
    request_finish(r, FINISH_LENGTH, 0, NULL);
    request_finish(r, FINISH_ERROR, 500, "ignored: the first outcome sticks");
    struct gen_event out[10];
    int cursor = 0;
    enum finish_reason fin;
    assert_int_equal(request_wait_events(r, &cursor, out, 10, 0, &fin), 10);
    assert_int_equal(fin, FINISH_NONE); // events remain, so the outcome is not reported yet
    assert_int_equal(out[9].token, 9);
    assert_int_equal(request_wait_events(r, &cursor, out, 10, 0, &fin), 6);
    assert_int_equal(fin, FINISH_LENGTH);
    request_release(r);
}

static void test_alloc_failures_are_clean(void **state)
{
    (void)state;
    for (int n = 0; n < 20; n++) {
        int64_t live = mem_live_count();
        mem_fail_after(n);
        struct gen_params gp;
        gen_params_defaults(&gp);
        struct request *r = NULL;
        int rc = request_new(REQUEST_GENERATE, (int32_t[]){1}, 1, &gp, 4, &r);
        struct model_params p = {
            .id = "m", .path = "/", .platform = &fake_platform, .budget = &budget};
        struct model *m = NULL;
        int rc2 = model_new(&p, &m);
        mem_fail_after(-1);
        if (rc == ERR_OK) request_release(r);
        if (rc2 == ERR_OK) model_release(m);
        assert_int_equal(mem_live_count(), live);
    }
}

/* The template's tool-call and reasoning formats are detected once, when the model loads, and
 * kept in its description for every request to read; text that is not the template any more
 * (changed after the load) is never looked at again. */
static void test_template_formats_detected_at_load(void **state)
{
    (void)state;
    char src[] = "{{ '<tool_call>' }}{% if thinking %}<think></think>{% endif %}";
    fake.chat_template_src = src;
    int actual;
    struct model *m = load_model(1, 1, &actual);
    memset(src, ' ', sizeof src - 1);
    assert_int_equal(model_desc(m)->tool_format, TOOLCALL_FORMAT_HERMES);
    assert_int_equal(model_desc(m)->reasoning_format, REASONING_FORMAT_THINK);
    model_shutdown(m);
    model_release(m);

    fake.chat_template_src = NULL;
    m = load_model(1, 1, &actual);
    assert_int_equal(model_desc(m)->tool_format, TOOLCALL_FORMAT_GENERIC);
    assert_int_equal(model_desc(m)->reasoning_format, REASONING_FORMAT_NONE);
    model_shutdown(m);
    model_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fifo_queue_and_429, setup),
        cmocka_unit_test_setup(test_zero_queue_refuses_when_busy, setup),
        cmocka_unit_test_setup(test_partial_load_at_budget, setup),
        cmocka_unit_test_setup(test_platform_instance_failure_is_partial, setup),
        cmocka_unit_test_setup(test_resize_down_retires_busy_when_done, setup),
        cmocka_unit_test_setup(test_resize_up_serves_the_queue, setup),
        cmocka_unit_test_setup(test_shutdown_ends_queued_and_running, setup),
        cmocka_unit_test_setup(test_submit_after_shutdown_is_closed, setup),
        cmocka_unit_test_setup(test_abandon_queued, setup),
        cmocka_unit_test_setup(test_failed_load_and_registry, setup),
        cmocka_unit_test_setup(test_request_stream, setup),
        cmocka_unit_test_setup(test_alloc_failures_are_clean, setup),
        cmocka_unit_test_setup(test_waiters_learn_a_failed_load_or_unload, setup),
        cmocka_unit_test_setup(test_routing_prefers_the_longest_cached_prefix, setup),
        cmocka_unit_test_setup(test_routing_spares_the_last_conversation, setup),
        cmocka_unit_test_setup(test_slot_states_name_the_busy_instance, setup),
        cmocka_unit_test_setup(test_template_formats_detected_at_load, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
