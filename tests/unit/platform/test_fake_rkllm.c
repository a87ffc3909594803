/* tests/fakes/fake_rkllm.c itself: the misuse checks the rkllm e2e tests rely on do fire — a
 * second run on a busy handle fails, a base_domain_id of 16 or more is refused (a shared one
 * is not), the Nth init fails —
 * and a run calls back from a thread of its own, ending with FINISH and perf. Loads the 1.3
 * fake from $LLAMAPI_BUILD_DIR/fakes (default build/release) with dlopen, as the server does. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "platform/rockchip/rkllm_abi.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fake {
    void *dl;
    struct rkllm_param_room (*create_default)(void);
    int (*init)(void **, struct rkllm13_param *, struct rkllm13_callbacks *);
    int (*run)(void *, void *, void *, void *);
    int (*abort_run)(void *);
    int (*destroy)(void *);
};

static struct fake fake;

struct seen {
    atomic_int n_tokens, n_finish, n_waiting;
    atomic_bool is_other_thread;
    pthread_t caller;
    int generate_tokens;
};

static int on_result(struct rkllm_result *r, void *userdata, int state)
{
    struct seen *s = userdata;
    if (!pthread_equal(pthread_self(), s->caller)) atomic_store(&s->is_other_thread, true);
    if (state == RKLLM_STATE_FINISH) {
        s->generate_tokens = r->perf.generate_tokens;
        atomic_fetch_add(&s->n_finish, 1);
    } else {
        atomic_fetch_add(&s->n_tokens, 1);
        if (state == RKLLM_STATE_WAITING) atomic_fetch_add(&s->n_waiting, 1);
    }
    return 0;
}

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("LLAMAPI_BUILD_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/fakes/librkllm_fake.so", dir && *dir ? dir : "build/release");
    setenv("FAKE_RKLLM_FAIL_INIT", "3", 1);
    setenv("FAKE_RKLLM_TOKEN_MS", "1", 1);
    fake.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!fake.dl) {
        fprintf(stderr, "cannot open %s: %s (make builds it)\n", path, dlerror());
        return -1;
    }
    void *syms[5] = {dlsym(fake.dl, "rkllm_createDefaultParam"), dlsym(fake.dl, "rkllm_init"),
                     dlsym(fake.dl, "rkllm_run"), dlsym(fake.dl, "rkllm_abort"),
                     dlsym(fake.dl, "rkllm_destroy")};
    for (int i = 0; i < 5; i++)
        if (!syms[i]) return -1;
    memcpy(&fake.create_default, &syms[0], sizeof syms[0]);
    memcpy(&fake.init, &syms[1], sizeof syms[1]);
    memcpy(&fake.run, &syms[2], sizeof syms[2]);
    memcpy(&fake.abort_run, &syms[3], sizeof syms[3]);
    memcpy(&fake.destroy, &syms[4], sizeof syms[4]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (fake.dl) dlclose(fake.dl);
    return 0;
}

static void *new_handle(int domain, struct rkllm13_callbacks *cb, int *rc)
{
    struct rkllm_param_room room = fake.create_default();
    room.u.p13.model_path = "/proc/self/exe"; // any readable file
    room.u.p13.max_context_len = 256;
    room.u.p13.extend_param.base_domain_id = domain;
    void *h = NULL;
    *rc = fake.init(&h, &room.u.p13, cb);
    return h;
}

struct runner {
    void *h;
    struct seen *seen;
    const char *prompt;
    int rc;
};

static void *run_thread(void *arg)
{
    struct runner *r = arg;
    struct rkllm13_input in = {.role = "user", .input_type = RKLLM_INPUT_PROMPT};
    in.u.prompt = r->prompt;
    struct rkllm13_infer infer = {.mode = RKLLM_MODE_GENERATE};
    r->seen->caller = pthread_self();
    r->rc = fake.run(r->h, &in, &infer, r->seen);
    return NULL;
}

static void test_defaults_and_init_checks(void **state)
{
    (void)state;
    struct rkllm_param_room room = fake.create_default();
    assert_int_equal(room.u.p13.top_k, 40);
    assert_true(room.u.p13.temperature > 0.79f && room.u.p13.temperature < 0.81f);
    struct rkllm13_callbacks cb = {.result = on_result};
    int rc;
    void *a = new_handle(0, &cb, &rc);
    assert_int_equal(rc, 0);
    void *beyond = new_handle(16, &cb, &rc); // the rknpu driver has ids 0..15
    assert_int_equal(rc, -1);
    assert_null(beyond);
    void *shared = new_handle(0, &cb, &rc); // domain 0 is a's too
    assert_int_equal(rc, 0);
    assert_int_equal(fake.destroy(shared), 0);
    void *third = new_handle(1, &cb, &rc); // FAKE_RKLLM_FAIL_INIT=3
    assert_int_equal(rc, -1);
    assert_null(third);
    void *b = new_handle(1, &cb, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(fake.destroy(a), 0);
    assert_int_equal(fake.destroy(b), 0);
}

static void test_run_threads_and_busy_handle(void **state)
{
    (void)state;
    struct rkllm13_callbacks cb = {.result = on_result};
    int rc;
    void *h = new_handle(5, &cb, &rc);
    assert_int_equal(rc, 0);
    struct seen s1 = {0}, s2 = {0};
    struct runner slow = {h, &s1, "FAKE_SLOW", 0}, second = {h, &s2, "hello", 0};
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, run_thread, &slow), 0);
    struct timespec wait = {0, 100 * 1000 * 1000};
    nanosleep(&wait, NULL);
    assert_int_equal(pthread_create(&t2, NULL, run_thread, &second), 0);
    pthread_join(t2, NULL);
    assert_int_equal(second.rc, -1); // the handle is busy
    assert_int_equal(atomic_load(&s2.n_tokens), 0);
    assert_int_equal(fake.abort_run(h), 0);
    pthread_join(t1, NULL);
    assert_int_equal(slow.rc, 0);
    assert_true(atomic_load(&s1.is_other_thread)); // callbacks from the fake's own thread
    assert_int_equal(atomic_load(&s1.n_finish), 1);
    assert_true(atomic_load(&s1.n_tokens) < 400); // the abort ended it
    // A normal run: 11 tokens, two of them WAITING halves of é and €, FINISH with perf.
    struct seen s3 = {0};
    struct runner plain = {h, &s3, "hello", 0};
    run_thread(&plain);
    assert_int_equal(plain.rc, 0);
    assert_int_equal(atomic_load(&s3.n_tokens), 11);
    assert_int_equal(atomic_load(&s3.n_waiting), 2);
    assert_int_equal(s3.generate_tokens, 11);
    assert_int_equal(fake.destroy(h), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_init_checks),
        cmocka_unit_test(test_run_threads_and_busy_handle),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
