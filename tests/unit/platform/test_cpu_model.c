/* platform/cpu_model: the cpu platform end to end below HTTP — load a synthetic model, run
 * requests on instances (alone and batched together), greedy reproducibility across batching,
 * cancellation, and allocation failure at every step of the load path. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/model.h"
#include "engine/gguf/synth.h"
#include "platform/cpu/cpu.h"
#include "platform/cpu/cpu_model.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char model_path[256];

/* Completion notices from the scheduler thread. */
static struct mutex done_mu;
static struct cond done_cv;
static int n_done;

static void on_done(void *owner, int instance)
{
    (void)owner;
    (void)instance;
    mutex_lock(&done_mu);
    n_done++;
    cond_broadcast(&done_cv);
    mutex_unlock(&done_mu);
}

static void wait_done(int n)
{
    mutex_lock(&done_mu);
    while (n_done < n)
        cond_wait(&done_cv, &done_mu);
    mutex_unlock(&done_mu);
}

static int done_count(void)
{
    mutex_lock(&done_mu);
    int n = n_done;
    mutex_unlock(&done_mu);
    return n;
}

/* Waits as a reader does (for the request's own outcome, not for on_done) and returns it. */
static enum finish_reason finished_outcome(struct request *r, int *status,
                                           struct request_timings *t)
{
    struct gen_event ev[64];
    int cursor = 0;
    enum finish_reason fin = FINISH_NONE;
    while (fin == FINISH_NONE)
        request_wait_events(r, &cursor, ev, 64, -1, &fin);
    return request_outcome(r, status, NULL, t);
}

static int setup_all(void **state)
{
    (void)state;
    struct synth_params p = synth_params_default();
    p.n_ctx = 512;
    p.seed = 11;
    p.n_vocab = synth_builtin_vocab_size(p.arch);
    struct gguf_writer *w;
    struct errmsg err;
    errmsg_clear(&err);
    if (synth_build(&p, &w, &err) != ERR_OK) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return -1;
    }
    snprintf(model_path, sizeof model_path, "/tmp/llamapi-test-cpu-%d.gguf", (int)getpid());
    int rc = gguf_writer_to_file(w, model_path, &err);
    if (rc != ERR_OK) fprintf(stderr, "write: %s\n", err.msg);
    gguf_writer_free(w);
    mutex_init(&done_mu);
    cond_init(&done_cv);
    return rc == ERR_OK ? 0 : -1;
}

static int teardown_all(void **state)
{
    (void)state;
    unlink(model_path);
    return 0;
}

static struct platform_model *load(int n_instances)
{
    struct platform_load_args a = {.path = model_path, .n_threads = 2, .on_done = on_done};
    struct platform_model *m = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(cpu_platform.load(&a, &m, &err), ERR_OK);
    for (int i = 0; i < n_instances; i++)
        assert_int_equal(cpu_platform.add_instance(m, i, &err), ERR_OK);
    return m;
}

static struct request *greedy_request(int max_tokens)
{
    struct gen_params gp;
    gen_params_defaults(&gp);
    gp.temperature = 0;
    gp.max_tokens = max_tokens;
    gp.ignore_eos = true;
    int32_t prompt[] = {1, 40, 41, 42, 43, 44};
    struct request *r;
    assert_int_equal(request_new(REQUEST_GENERATE, prompt, 6, &gp, max_tokens, &r), ERR_OK);
    return r;
}

static void tokens_of(struct request *r, int32_t *out, int n)
{
    struct gen_event ev[64];
    int cursor = 0, got = 0;
    enum finish_reason fin = FINISH_NONE;
    while (got < n) {
        int k = request_wait_events(r, &cursor, ev, 64, -1, &fin);
        for (int i = 0; i < k && got < n; i++)
            out[got++] = ev[i].token;
        if (k == 0 && fin != FINISH_NONE) break;
    }
    assert_int_equal(got, n);
}

static void test_describe_and_generate(void **state)
{
    (void)state;
    n_done = 0;
    struct platform_model *m = load(1);
    struct platform_model_desc d;
    cpu_platform.describe(m, &d);
    assert_int_equal(d.kind, MODEL_KIND_CHAT);
    assert_int_equal(d.n_ctx, 512); // the file's context_length, under the 4096 cap
    assert_true(d.instance_bytes > 0);
    assert_non_null(d.tokenizer);
    assert_non_null(d.chat_template);
    assert_non_null(strstr(d.description, "random weights"));
    struct request *r = greedy_request(20);
    cpu_platform.submit(m, 0, r);
    struct request_timings t;
    assert_int_equal(finished_outcome(r, NULL, &t), FINISH_LENGTH);
    // The instance went back to its pool before the reader was woken, so a client's next
    // request finds it free.
    assert_int_equal(done_count(), 1);
    assert_int_equal(t.n_predicted, 20);
    assert_int_equal(t.n_prompt + t.n_cached, 6);
    int32_t first[20];
    tokens_of(r, first, 20);
    request_release(r);
    // The same prompt again reuses the cached prefix and gives the same tokens.
    r = greedy_request(20);
    cpu_platform.submit(m, 0, r);
    assert_int_equal(finished_outcome(r, NULL, &t), FINISH_LENGTH);
    assert_int_equal(done_count(), 2);
    assert_int_equal(t.n_cached, 5);
    int32_t second[20];
    tokens_of(r, second, 20);
    assert_memory_equal(first, second, sizeof first);
    request_release(r);
    cpu_platform.unload(m);
}

/* -b chunks a prompt: with return_progress each chunk leaves a point (the first at the cache);
 * the tokens are those of an unchunked run on a fresh model (batch invariance). */
static void test_prompt_chunks_and_progress(void **state)
{
    (void)state;
    const int32_t prompt[10] = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48};
    int32_t toks[2][3];
    for (int run = 0; run < 2; run++) {
        struct platform_model *m = load(1);
        struct gen_params gp;
        gen_params_defaults(&gp);
        gp.temperature = 0;
        gp.max_tokens = 3;
        gp.ignore_eos = true;
        gp.n_batch = run == 0 ? 4 : 0;
        gp.is_return_progress = run == 0;
        struct request *r;
        assert_int_equal(request_new(REQUEST_GENERATE, prompt, 10, &gp, 3, &r), ERR_OK);
        cpu_platform.submit(m, 0, r);
        assert_int_equal(finished_outcome(r, NULL, NULL), FINISH_LENGTH);
        struct request_progress p[8];
        int n = request_take_progress(r, p, 8);
        static const int processed[] = {0, 4, 8, 10}; // the start, then 4 + 4 + 2 tokens
        assert_int_equal(n, run == 0 ? 4 : 0);        // none when not asked for
        for (int i = 0; i < n; i++) {
            assert_int_equal(p[i].total, 10);
            assert_int_equal(p[i].cache, 0);
            assert_int_equal(p[i].processed, processed[i]);
        }
        tokens_of(r, toks[run], 3);
        request_release(r);
        cpu_platform.unload(m);
    }
    assert_memory_equal(toks[0], toks[1], sizeof toks[0]);
}

static void test_batched_equals_alone(void **state)
{
    (void)state;
    n_done = 0;
    struct platform_model *alone = load(1);
    struct request *r = greedy_request(24);
    cpu_platform.submit(alone, 0, r);
    wait_done(1);
    int32_t want[24];
    tokens_of(r, want, 24);
    request_release(r);
    cpu_platform.unload(alone);

    n_done = 0;
    struct platform_model *m = load(3);
    struct request *rs[3];
    for (int i = 0; i < 3; i++) {
        rs[i] = greedy_request(24);
        cpu_platform.submit(m, i, rs[i]); // three sequences decoded in the same steps
    }
    wait_done(3);
    for (int i = 0; i < 3; i++) {
        int32_t got[24];
        tokens_of(rs[i], got, 24);
        assert_memory_equal(got, want, sizeof want);
        request_release(rs[i]);
    }
    cpu_platform.unload(m);
}

static void test_cancel_stops_at_next_step(void **state)
{
    (void)state;
    n_done = 0;
    struct platform_model *m = load(1);
    struct request *r = greedy_request(200);
    request_cancel(r); // cancelled before it starts: it ends at its first step
    cpu_platform.submit(m, 0, r);
    wait_done(1);
    struct request_timings t;
    assert_int_equal(finished_outcome(r, NULL, &t), FINISH_CANCELLED);
    assert_true(t.n_predicted < 200);
    request_release(r);
    cpu_platform.unload(m);
}

static void test_bad_requests_fail_cleanly(void **state)
{
    (void)state;
    n_done = 0;
    struct platform_model *m = load(1);
    struct gen_params gp;
    gen_params_defaults(&gp);
    gp.grammar = "root ::= (";
    struct request *r;
    assert_int_equal(request_new(REQUEST_GENERATE, (int32_t[]){1, 2}, 2, &gp, 8, &r), ERR_OK);
    cpu_platform.submit(m, 0, r);
    wait_done(1);
    int status = 0;
    assert_int_equal(finished_outcome(r, &status, NULL), FINISH_ERROR);
    assert_int_equal(status, 400);
    request_release(r);
    gen_params_defaults(&gp);
    assert_int_equal(request_new(REQUEST_EMBED, (int32_t[]){1, 2}, 2, &gp, 8, &r), ERR_OK);
    cpu_platform.submit(m, 0, r);
    wait_done(2);
    assert_int_equal(finished_outcome(r, &status, NULL), FINISH_ERROR);
    request_release(r);
    cpu_platform.unload(m);
}

static void test_load_survives_every_allocation_failure(void **state)
{
    (void)state;
    struct platform_load_args a = {.path = model_path, .n_threads = 1, .on_done = on_done};
    int n_failures = 0;
    for (int64_t n = 0;; n++) {
        int64_t live = mem_live_count();
        struct platform_model *m = NULL;
        struct errmsg err;
        errmsg_clear(&err);
        mem_fail_after(n);
        int rc = cpu_platform.load(&a, &m, &err);
        if (rc == ERR_OK) rc = cpu_platform.add_instance(m, 0, &err) == ERR_OK ? ERR_OK : ERR_NOMEM;
        mem_fail_after(-1);
        if (m && rc == ERR_OK) {
            cpu_platform.unload(m);
            assert_int_equal(mem_live_count(), live);
            break;
        }
        if (m) cpu_platform.unload(m);
        assert_int_not_equal(rc, ERR_OK);
        assert_int_equal(mem_live_count(), live); // nothing leaked on this failure
        n_failures++;
    }
    assert_true(n_failures > 10);
}

/* Two clients, each with its own conversation, send requests back to back through the core
 * on two instances with no queue: each finds an instance free every time (the instance is
 * back in the pool before the reader wakes) and, after its first turn, the instance that
 * holds its conversation (routing reads the idle instances' caches from the clients'
 * threads; TSan checks that against the scheduler). */
struct client {
    struct model *m;
    int32_t first;
    int n_refused, n_failed, n_cold_turns;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    int32_t prompt[40];
    for (int k = 0; k < 40; k++)
        prompt[k] = c->first + k;
    for (int turn = 0; turn < 6; turn++) {
        struct gen_params gp;
        gen_params_defaults(&gp);
        gp.temperature = 0;
        gp.max_tokens = 2;
        struct request *r;
        if (request_new(REQUEST_GENERATE, prompt, 24 + turn * 2, &gp, 2, &r) != ERR_OK) break;
        if (model_submit(c->m, r) != POOL_ADMIT_RUN) {
            c->n_refused++;
        } else {
            struct request_timings t;
            if (finished_outcome(r, NULL, &t) == FINISH_ERROR) c->n_failed++;
            if (turn > 0 && t.n_cached < 24) c->n_cold_turns++;
        }
        request_release(r);
    }
    return NULL;
}

static void test_core_routes_back_to_back_conversations(void **state)
{
    (void)state;
    struct budget budget;
    budget_init(&budget, 1ull << 40);
    struct model_params p = {
        .id = "m",
        .path = model_path,
        .platform = &cpu_platform,
        .queue_cap = 0,
        .n_threads = 1,
        .budget = &budget,
    };
    struct model *m;
    assert_int_equal(model_new(&p, &m), ERR_OK);
    int actual;
    struct errmsg err;
    assert_int_equal(model_load(m, 2, &actual, &err), ERR_OK);
    assert_int_equal(actual, 2);
    struct client c[2] = {{.m = m, .first = 50}, {.m = m, .first = 150}};
    struct thread th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(thread_start(&th[i], client_main, &c[i]), ERR_OK);
    for (int i = 0; i < 2; i++)
        thread_join(&th[i]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(c[i].n_refused, 0);
        assert_int_equal(c[i].n_failed, 0);
        assert_int_equal(c[i].n_cold_turns, 0);
    }
    model_shutdown(m);
    model_release(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_describe_and_generate),
        cmocka_unit_test(test_prompt_chunks_and_progress),
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_cancel_stops_at_next_step),
        cmocka_unit_test(test_bad_requests_fail_cleanly),
        cmocka_unit_test(test_load_survives_every_allocation_failure),
        cmocka_unit_test(test_core_routes_back_to_back_conversations),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
