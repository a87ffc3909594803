/* The request path under allocation failure: a chat completion, an embedding-free model and
 * the whole stack below the HTTP layer (validation, template, tokenizer, pool, scheduler,
 * sampler, response JSON), with the Nth allocation failing for every N in turn; the same for a
 * rerank request on a synthetic bert reranker. Each request must end in a well-formed answer
 * (200 or an error object), and nothing may leak. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/handlers.h"
#include "core/manager.h"
#include "engine/gguf/synth.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char model_path[256], rerank_path[256];
static struct manager *manager;

static const char *no_header(void *conn, const char *name)
{
    (void)conn;
    (void)name;
    return NULL;
}

static int setup_all(void **state)
{
    (void)state;
    struct synth_params p = synth_params_default();
    p.n_vocab = synth_builtin_vocab_size(p.arch);
    struct gguf_writer *w;
    struct errmsg err;
    if (synth_build(&p, &w, &err) != ERR_OK) return -1;
    snprintf(model_path, sizeof model_path, "/tmp/llamapi-test-faults-%d.gguf", (int)getpid());
    int rc = gguf_writer_to_file(w, model_path, &err);
    gguf_writer_free(w);
    struct manager_config mc = {.default_queue_size = 4, .n_threads = 1};
    if (rc != ERR_OK || manager_new(&mc, &manager) != ERR_OK) return -1;
    struct manager_load args = {.id = "m", .path = model_path, .n_instances = 1, .queue_size = -1};
    int actual;
    enum load_failure why;
    if (manager_load(manager, &args, &actual, &why, &err) != ERR_OK) return -1;
    p.arch = "bert";
    p.n_cls_out = 1;
    p.n_vocab = synth_builtin_vocab_size("bert");
    if (synth_build(&p, &w, &err) != ERR_OK) return -1;
    snprintf(rerank_path, sizeof rerank_path, "/tmp/llamapi-test-faults-rr-%d.gguf", (int)getpid());
    rc = gguf_writer_to_file(w, rerank_path, &err);
    gguf_writer_free(w);
    struct manager_load rr = {.id = "r", .path = rerank_path, .n_instances = 1, .queue_size = -1};
    return rc == ERR_OK && manager_load(manager, &rr, &actual, &why, &err) == ERR_OK ? 0 : -1;
}

static int teardown_all(void **state)
{
    (void)state;
    manager_free(manager);
    unlink(model_path);
    unlink(rerank_path);
    return 0;
}

typedef void (*handler_fn)(const struct api_ctx *, const struct api_request *,
                           struct api_response *);

/* Runs one request through the handler; returns its status after checking the body. */
static int run(handler_fn handler, const char *path, const char *body)
{
    struct api_ctx ctx = {.manager = manager};
    json_t *j = json_loads(body, 0, NULL);
    assert_non_null(j);
    struct api_request req = {.method = "POST",
                              .path = path,
                              .body = body,
                              .body_len = strlen(body),
                              .json = j,
                              .header = no_header,
                              .query = no_header};
    struct api_response resp = {0};
    handler(&ctx, &req, &resp);
    json_decref(j);
    int status = resp.status;
    assert_null(resp.stream.read); // non-streaming requests answer whole
    json_t *out = resp.body.data ? json_loads(resp.body.data, 0, NULL) : NULL;
    assert_non_null(out); // always a JSON body: the answer or an error object
    if (status != 200) assert_non_null(json_object_get(out, "error"));

    json_decref(out);
    buf_deinit(&resp.body);
    return status;
}

static int run_chat(const char *body)
{
    return run(api_chat_completions, "/v1/chat/completions", body);
}

/* The HTTP side returns once the answer is complete; the scheduler thread frees the
 * request's sampler and grammar state just after. Wait (bounded) for it to settle. */
static int64_t settled_live_count(int64_t want)
{
    struct timespec tick = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 400 && mem_live_count() != want; i++)
        nanosleep(&tick, NULL);
    return mem_live_count();
}

static void test_chat_survives_every_allocation_failure(void **state)
{
    (void)state;
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"max_tokens\":4,\"stop\":[\"zz\"],\"response_format\":"
                       "{\"type\":\"json_object\"}}";
    assert_int_equal(run_chat(body), 200); // warm: prompt cache, lazy tables
    int64_t live = settled_live_count(-1);
    int n_failed = 0;
    for (int64_t n = 0; n < 400; n++) {
        mem_fail_after(n);
        int status = run_chat(body);
        mem_fail_after(-1);
        int64_t now = settled_live_count(live);
        if (now != live)
            fprintf(stderr, "leak after failing allocation %lld: %lld live (status %d)\n",
                    (long long)n, (long long)(now - live), status);
        assert_int_equal(now, live);
        assert_true(status == 200 || status == 500 || status == 503); // never a client error
        n_failed += status != 200;
        if (status == 200 && n > 40) break; // past the last allocation the request makes
    }
    assert_true(n_failed > 5);
    assert_int_equal(run_chat(body), 200);
    assert_int_equal(settled_live_count(live), live);
}

static void test_rerank_survives_every_allocation_failure(void **state)
{
    (void)state;
    const char *body = "{\"model\":\"r\",\"query\":\"hello world\",\"documents\":"
                       "[\"the world\",\"a hello\",\"is\"],\"top_n\":2}";
    assert_int_equal(run(api_rerank, "/v1/rerank", body), 200);
    int64_t live = settled_live_count(-1);
    int n_failed = 0, n_ok_run = 0;
    for (int64_t n = 0; n < 400; n++) {
        mem_fail_after(n);
        int status = run(api_rerank, "/v1/rerank", body);
        mem_fail_after(-1);
        int64_t now = settled_live_count(live);
        if (now != live)
            fprintf(stderr, "leak after failing allocation %lld: %lld live (status %d)\n",
                    (long long)n, (long long)(now - live), status);
        assert_int_equal(now, live);
        assert_true(status == 200 || status == 500); // never a client error
        n_failed += status != 200;
        n_ok_run = status == 200 ? n_ok_run + 1 : 0;
        if (n_ok_run == 10) break; // past the last allocation the request makes
    }
    printf("rerank: %d of the request's allocations failed it, each cleanly\n", n_failed);
    assert_int_equal(n_ok_run, 10);
    assert_true(n_failed > 5);
    assert_int_equal(run(api_rerank, "/v1/rerank", body), 200);
    assert_int_equal(settled_live_count(live), live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_survives_every_allocation_failure),
        cmocka_unit_test(test_rerank_survives_every_allocation_failure),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
