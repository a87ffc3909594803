/* platform/cpu_embed through the cpu platform table: tiny_bert loads as an embedding model,
 * a multi-input REQUEST_EMBED gives the engine's vectors in input order, and requests the
 * encoder cannot run finish with a 400 instead of running. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/bert.h"
#include "engine/threadpool.h"
#include "platform/cpu.h"
#include "platform/platform.h"
#include "platform/request.h"
#include "text/tokenizer.h"
#include "util/mem.h"
#include "util/thread.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TINY_BERT "../shared/models/bert/tiny_bert.gguf"

static atomic_int n_done;

static void on_done(void *owner, int instance)
{
    (void)owner;
    (void)instance;
    atomic_fetch_add(&n_done, 1);
}

static enum finish_reason wait_done(struct request *r, int *status, struct errmsg *err)
{
    int cursor = 0;
    enum finish_reason fin = FINISH_NONE;
    while (fin == FINISH_NONE)
        request_wait_events(r, &cursor, NULL, 0, -1, &fin);
    return request_outcome(r, status, err, NULL);
}

static struct request *embed_request(const int32_t *ids, int n, const int *lens, int n_inputs,
                                     enum request_kind kind)
{
    struct gen_params p;
    gen_params_defaults(&p);
    struct request *r;
    assert_int_equal(request_new(kind, ids, n, &p, 0, &r), ERR_OK);
    if (lens) assert_int_equal(request_set_inputs(r, lens, n_inputs), ERR_OK);
    return r;
}

static void test_tiny_bert_requests(void **state)
{
    (void)state;
    if (access(TINY_BERT, R_OK) != 0) {
        printf("skip: %s absent\n", TINY_BERT);
        skip();
    }
    const struct platform *cpu = &cpu_platform;
    struct platform_load_args a = {.path = TINY_BERT, .n_threads = 2, .on_done = on_done};
    struct platform_model *m;
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(cpu->load(&a, &m, &err), ERR_OK);
    struct platform_model_desc d;
    cpu->describe(m, &d);
    assert_int_equal(d.kind, MODEL_KIND_EMBEDDING);
    assert_int_equal(d.n_embd, 32);
    assert_int_equal(d.n_ctx, 64);
    assert_non_null(d.tokenizer);
    assert_int_equal(cpu->add_instance(m, 0, &err), ERR_OK);

    // Two inputs in one request equal the engine's vectors for each.
    static const char *const texts[2] = {"the cat sat on the mat .", "hello world"};
    struct tok_ids ids;
    tok_ids_init(&ids);
    int lens[2];
    for (int i = 0; i < 2; i++) {
        size_t before = ids.n_ids;
        assert_int_equal(
            tok_encode(d.tokenizer, (struct str){texts[i], strlen(texts[i])}, true, false, &ids),
            ERR_OK);
        lens[i] = (int)(ids.n_ids - before);
    }
    struct request *r = embed_request(ids.ids, (int)ids.n_ids, lens, 2, REQUEST_EMBED);
    cpu->submit(m, 0, r);
    int status = 0;
    assert_int_equal(wait_done(r, &status, &err), FINISH_STOP);
    assert_int_equal(r->n_embedding, 64);
    struct engine_encoder *e;
    struct threadpool *tp;
    assert_int_equal(engine_encoder_load(TINY_BERT, NULL, &e, &err), ERR_OK);
    assert_int_equal(threadpool_new(1, &tp), ERR_OK);
    float want[64];
    const int32_t *ptrs[2] = {ids.ids, ids.ids + lens[0]};
    assert_int_equal(engine_encoder_embed(e, tp, ptrs, lens, 2, want, &err), ERR_OK);
    for (int k = 0; k < 64; k++)
        assert_true(fabsf(r->embedding[k] - want[k]) < 1e-6f);
    request_release(r);

    // A generation request, an input beyond the context and a bad token id are refused.
    r = embed_request(ids.ids, lens[0], NULL, 0, REQUEST_GENERATE);
    cpu->submit(m, 0, r);
    assert_int_equal(wait_done(r, &status, &err), FINISH_ERROR);
    assert_int_equal(status, 400);
    request_release(r);
    int32_t long_ids[70] = {0};
    int long_lens[2] = {3, 67};
    r = embed_request(long_ids, 70, long_lens, 2, REQUEST_EMBED);
    cpu->submit(m, 0, r);
    assert_int_equal(wait_done(r, &status, &err), FINISH_ERROR);
    assert_int_equal(status, 400);
    assert_non_null(strstr(err.msg, "input 1"));
    request_release(r);
    long_ids[1] = 24;
    r = embed_request(long_ids, 3, NULL, 0, REQUEST_EMBED);
    cpu->submit(m, 0, r);
    assert_int_equal(wait_done(r, &status, &err), FINISH_ERROR);
    assert_int_equal(status, 400);
    request_release(r);

    while (atomic_load(&n_done) < 4)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    cpu->remove_instance(m, 0);
    cpu->unload(m);
    threadpool_free(tp);
    engine_encoder_free(e);
    tok_ids_deinit(&ids);
}

static void test_request_inputs(void **state)
{
    (void)state;
    const int32_t ids[5] = {1, 2, 3, 4, 5};
    struct gen_params p;
    gen_params_defaults(&p);
    struct request *r;
    assert_int_equal(request_new(REQUEST_EMBED, ids, 5, &p, 0, &r), ERR_OK);
    const int bad_sum[2] = {2, 2}, bad_len[2] = {5, 0}, ok[2] = {2, 3};
    assert_int_equal(request_set_inputs(r, bad_sum, 2), ERR_INVALID);
    assert_int_equal(request_set_inputs(r, bad_len, 2), ERR_INVALID);
    assert_int_equal(request_set_inputs(r, ok, 0), ERR_INVALID);
    assert_int_equal(request_set_inputs(r, ok, 2), ERR_OK);
    assert_int_equal(r->n_inputs, 2);
    assert_int_equal(r->input_lens[1], 3);
    request_release(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_inputs),
        cmocka_unit_test(test_tiny_bert_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
