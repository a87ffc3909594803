/* platform/cpu_embed through the cpu platform table: tiny_bert loads as an embedding model,
 * a multi-input REQUEST_EMBED gives the engine's vectors in input order, and requests the
 * encoder cannot run finish with a 400 instead of running. Decoders as embedding models: a
 * synthetic qwen3 declaring pooling last, and a plain qwen2 loaded with force_embedding, give
 * the engine's pooled, normalized hidden states (last, mean, cls) for every input, whatever
 * else shares the batch, including inputs longer than one decode step. A synthetic bert
 * reranker (pooling rank) gives one score per input, the encoder's, whatever shares its batch,
 * and describes its pair layout from the vocab flags and its rerank template. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/bert/bert.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/gguf/synth.h"
#include "engine/threadpool.h"
#include "platform/cpu/cpu.h"
#include "platform/platform.h"
#include "platform/request.h"
#include "text/tokenizer/tokenizer.h"
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

/* ---- decoders ---- */

#define DEC_CTX 1024
#define N_LONG  700 // more than one decode step (ENGINE_BATCH_MAX)

/* Writes a synthetic decoder (pooling_type written when >= 0) to path. */
static void write_decoder(const char *arch, int pooling_type, char *path, size_t cap)
{
    struct synth_params p = synth_params_default();
    p.arch = arch;
    p.n_ctx = DEC_CTX;
    p.seed = 5;
    p.n_head = 2; // 32-wide heads: the attention kernels' SIMD width, so long inputs are quick
    p.n_head_kv = 1;
    p.pooling_type = pooling_type;
    p.n_vocab = synth_builtin_vocab_size(arch);
    struct gguf_writer *w;
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(synth_build(&p, &w, &err), ERR_OK);
    snprintf(path, cap, "/tmp/llamapi-test-dembed-%s-%d-%d.gguf", arch, pooling_type,
             (int)getpid());
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
}

static double max_abs_diff(const float *a, const float *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++)
        d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
    return d;
}

static void normalize(float *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)v[i] * v[i];
    for (int i = 0; i < n; i++)
        v[i] *= s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f;
}

/* The last token's hidden state of one input (unnormalized), in chunks of at most one batch. */
static void last_hidden(struct engine_model *em, struct threadpool *tp, const int32_t *ids, int n,
                        float *out)
{
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(em, DEC_CTX, &s), ERR_OK);
    for (int from = 0; from < n; from += ENGINE_BATCH_MAX) {
        const int len = n - from < ENGINE_BATCH_MAX ? n - from : ENGINE_BATCH_MAX;
        struct engine_batch_item it = {.seq = s,
                                       .tokens = ids + from,
                                       .n_tokens = len,
                                       .output = ENGINE_OUTPUT_LAST,
                                       .hidden = out};
        struct errmsg err;
        assert_int_equal(engine_decode(em, tp, &it, 1, &err), ERR_OK);
    }
    engine_seq_free(s);
}

/* The engine's pooled vector of one input, computed directly: hidden states in chunks of at
 * most one batch on a sequence of its own, pooled and normalized. */
static void expected_vector(struct engine_model *em, struct threadpool *tp, const int32_t *ids,
                            int n, enum platform_pooling pool, float *out)
{
    const int e = engine_model_info(em)->n_embd;
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(em, DEC_CTX, &s), ERR_OK);
    float junk[256];
    memset(out, 0, sizeof(float) * (size_t)e);
    for (int from = 0; from < n; from += ENGINE_BATCH_MAX) {
        const int len = n - from < ENGINE_BATCH_MAX ? n - from : ENGINE_BATCH_MAX;
        struct engine_batch_item it = {.seq = s, .tokens = ids + from, .n_tokens = len};
        it.output = pool == PLATFORM_POOLING_MEAN  ? ENGINE_OUTPUT_SUM
                    : pool == PLATFORM_POOLING_CLS ? ENGINE_OUTPUT_FIRST
                                                   : ENGINE_OUTPUT_LAST;
        it.hidden = pool == PLATFORM_POOLING_CLS && from > 0 ? junk : out;
        struct errmsg err;
        assert_int_equal(engine_decode(em, tp, &it, 1, &err), ERR_OK);
    }
    if (pool == PLATFORM_POOLING_MEAN)
        for (int j = 0; j < e; j++)
            out[j] /= (float)n;
    normalize(out, e);
    engine_seq_free(s);
}

static struct platform_model *load_embed(const char *path, int force, enum platform_pooling pool,
                                         int n_instances, struct platform_model_desc *d)
{
    struct platform_load_args a = {.path = path,
                                   .n_threads = 2,
                                   .force_embedding = force,
                                   .pooling = pool,
                                   .on_done = on_done};
    struct platform_model *m;
    struct errmsg err;
    errmsg_clear(&err);
    if (cpu_platform.load(&a, &m, &err) != ERR_OK) fail_msg("load %s: %s", path, err.msg);
    cpu_platform.describe(m, d);
    for (int i = 0; i < n_instances; i++)
        assert_int_equal(cpu_platform.add_instance(m, i, &err), ERR_OK);
    return m;
}

/* Inputs of the decoder tests: a short one, a long one that spans decode steps, a one-token
 * one and a medium one, back to back in ids. */
static int decoder_inputs(int32_t *ids, int lens[4], int n_vocab)
{
    static const int l[4] = {9, N_LONG, 1, 37};
    int n = 0;
    for (int k = 0; k < 4; k++) {
        lens[k] = l[k];
        for (int j = 0; j < l[k]; j++, n++)
            ids[n] = (int32_t)((n * 31 + k * 7 + 3) % n_vocab);
    }
    return n;
}

/* Runs the inputs as one request on instance 0 and, at the same time, each alone on other
 * instances; every vector equals the engine's. */
static void check_decoder_model(const char *path, int force, enum platform_pooling pool)
{
    struct platform_model_desc d;
    struct platform_model *m = load_embed(path, force, pool, 5, &d);
    assert_int_equal(d.kind, MODEL_KIND_EMBEDDING);
    assert_int_equal(d.n_ctx, DEC_CTX);
    assert_int_equal(d.n_embd, 64);
    assert_non_null(d.tokenizer);
    assert_true(d.instance_bytes >= (uint64_t)DEC_CTX * 2 * 32 * 2 * 2); // its KV cache
    static int32_t ids[4 * N_LONG];
    int lens[4];
    const int n = decoder_inputs(ids, lens, d.n_vocab);
    const int before = atomic_load(&n_done);
    struct request *all = embed_request(ids, n, lens, 4, REQUEST_EMBED), *one[4];
    cpu_platform.submit(m, 0, all);
    for (int k = 0, off = 0; k < 4; off += lens[k], k++) {
        one[k] = embed_request(ids + off, lens[k], NULL, 0, REQUEST_EMBED);
        cpu_platform.submit(m, 1 + k, one[k]);
    }
    struct engine_model *em;
    struct threadpool *tp;
    struct errmsg err;
    assert_int_equal(engine_model_load(path, &em, &err), ERR_OK);
    assert_int_equal(threadpool_new(1, &tp), ERR_OK);
    int status = 0;
    assert_int_equal(wait_done(all, &status, &err), FINISH_STOP);
    assert_int_equal(all->n_embedding, 4 * d.n_embd);
    for (int k = 0, off = 0; k < 4; off += lens[k], k++) {
        float want[64];
        expected_vector(em, tp, ids + off, lens[k], pool, want);
        assert_int_equal(wait_done(one[k], &status, &err), FINISH_STOP);
        // F32/F16 products sum in another order for one token than for several (as the
        // reference's do), so a vector depends on its batch in the last bits only.
        assert_true(max_abs_diff(one[k]->embedding, want, d.n_embd) <= 1e-6);
        assert_true(max_abs_diff(all->embedding + k * d.n_embd, want, d.n_embd) <= 1e-6);
        double norm = 0;
        for (int j = 0; j < d.n_embd; j++)
            norm += (double)want[j] * want[j];
        assert_true(fabs(norm - 1.0) < 1e-5);
        request_release(one[k]);
    }
    request_release(all);
    // Chat on it is refused; so is an input beyond the context, naming the input.
    struct request *r = embed_request(ids, 3, NULL, 0, REQUEST_GENERATE);
    cpu_platform.submit(m, 0, r);
    assert_int_equal(wait_done(r, &status, &err), FINISH_ERROR);
    assert_int_equal(status, 400);
    request_release(r);
    static int32_t too_long[DEC_CTX + 2];
    const int two[2] = {1, DEC_CTX + 1};
    r = embed_request(too_long, DEC_CTX + 2, two, 2, REQUEST_EMBED);
    cpu_platform.submit(m, 0, r);
    assert_int_equal(wait_done(r, &status, &err), FINISH_ERROR);
    assert_int_equal(status, 400);
    assert_non_null(strstr(err.msg, "input 1"));
    request_release(r);
    while (atomic_load(&n_done) < before + 7)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    for (int i = 0; i < 5; i++)
        cpu_platform.remove_instance(m, i);
    cpu_platform.unload(m);
    threadpool_free(tp);
    engine_model_free(em);
}

static void test_decoder_pooling_last(void **state)
{
    (void)state;
    char path[128];
    write_decoder("qwen3", 3, path, sizeof path);
    check_decoder_model(path, 0, PLATFORM_POOLING_DEFAULT); // the file's: last
    unlink(path);
}

static void test_decoder_pooling_mean_cls(void **state)
{
    (void)state;
    char path[128];
    write_decoder("qwen3", 3, path, sizeof path);
    check_decoder_model(path, 0, PLATFORM_POOLING_MEAN); // the load's over the file's
    check_decoder_model(path, 0, PLATFORM_POOLING_CLS);
    unlink(path);
}

static void test_decoder_forced(void **state)
{
    (void)state;
    char path[128];
    write_decoder("qwen2", -1, path, sizeof path);
    struct platform_model_desc d;
    struct platform_model *m = load_embed(path, 0, PLATFORM_POOLING_LAST, 0, &d);
    assert_int_equal(d.kind, MODEL_KIND_CHAT); // pooling alone does not make it one
    cpu_platform.unload(m);
    check_decoder_model(path, 1, PLATFORM_POOLING_DEFAULT); // last for decoders
    check_decoder_model(path, 1, PLATFORM_POOLING_LAST);
    unlink(path);
}

static void expect_load_error_rc(const char *path, int force, enum platform_pooling pool, int code,
                                 const char *what)
{
    struct platform_load_args a = {.path = path,
                                   .n_threads = 1,
                                   .force_embedding = force,
                                   .pooling = pool,
                                   .on_done = on_done};
    struct platform_model *m = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(cpu_platform.load(&a, &m, &err), code);
    assert_null(m);
    if (!strstr(err.msg, what)) fail_msg("'%s' does not say '%s'", err.msg, what);
}

static void expect_load_error(const char *path, int force, enum platform_pooling pool,
                              const char *what)
{
    expect_load_error_rc(path, force, pool, ERR_UNSUPPORTED, what);
}

static void test_decoder_refusals(void **state)
{
    (void)state;
    char path[128];
    write_decoder("qwen3", 4, path, sizeof path); // a reranker without its head
    expect_load_error_rc(path, 0, PLATFORM_POOLING_DEFAULT, ERR_FORMAT, "cls.output.weight");
    unlink(path);
    write_decoder("llama", 4, path, sizeof path); // rank is qwen3's only
    expect_load_error(path, 0, PLATFORM_POOLING_DEFAULT, "rank");
    unlink(path);
    write_decoder("llama", 0, path, sizeof path); // none: a chat model unless forced
    struct platform_model_desc d;
    struct platform_model *m = load_embed(path, 0, PLATFORM_POOLING_DEFAULT, 0, &d);
    assert_int_equal(d.kind, MODEL_KIND_CHAT);
    cpu_platform.unload(m);
    m = load_embed(path, 1, PLATFORM_POOLING_DEFAULT, 0, &d);
    assert_int_equal(d.kind, MODEL_KIND_EMBEDDING);
    cpu_platform.unload(m);
    expect_load_error(path, 1, PLATFORM_POOLING_NONE, "none");
    expect_load_error(path, 1, PLATFORM_POOLING_RANK, "rank");
    unlink(path);
}

/* Allocation failure at every step of a decoder embedding load and instance creation. */
static void test_decoder_load_alloc_failures(void **state)
{
    (void)state;
    char path[128];
    write_decoder("qwen3", 3, path, sizeof path);
    struct platform_load_args a = {.path = path, .n_threads = 1, .on_done = on_done};
    const int64_t live = mem_live_count();
    bool loaded = false;
    int n = 0;
    for (; !loaded; n++) {
        struct platform_model *m = NULL;
        struct errmsg err;
        errmsg_clear(&err);
        mem_fail_after(n);
        int rc = cpu_platform.load(&a, &m, &err);
        if (rc == ERR_OK) rc = cpu_platform.add_instance(m, 0, &err);
        mem_fail_after(-1);
        loaded = rc == ERR_OK;
        if (!loaded) assert_int_equal(rc, ERR_NOMEM);
        if (m && loaded) cpu_platform.remove_instance(m, 0);
        cpu_platform.unload(m);
        assert_int_equal(mem_live_count(), live);
    }
    printf("decoder embedding load: %d allocation failures, each cleaned up\n", n - 1);
    assert_true(n > 500); // the views alone are 512 allocations
    unlink(path);
}

/* ---- rerankers ---- */

/* A qwen3 reranker (two labels): each input's scores are the softmax of cls.output times the
 * last token's state, computed here from the engine's hidden state in plain floats, whatever
 * else shares the batch, including an input longer than one decode step. */
static void test_decoder_reranker(void **state)
{
    (void)state;
    struct synth_params p = synth_params_default();
    p.arch = "qwen3";
    p.n_ctx = DEC_CTX;
    p.seed = 7;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.n_cls_out = 2;
    p.n_vocab = synth_builtin_vocab_size("qwen3");
    struct gguf_writer *w;
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(synth_build(&p, &w, &err), ERR_OK);
    char path[128];
    snprintf(path, sizeof path, "/tmp/llamapi-test-rerank-qwen3-%d.gguf", (int)getpid());
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
    struct platform_model_desc d;
    struct platform_model *m = load_embed(path, 0, PLATFORM_POOLING_DEFAULT, 5, &d);
    assert_int_equal(d.kind, MODEL_KIND_EMBEDDING);
    assert_int_equal(d.n_cls_out, 2);
    assert_int_equal(d.rerank_bos, 1); // the built-in llama vocab adds bos only
    assert_int_equal(d.rerank_eos, -1);
    assert_int_equal(d.rerank_sep, -1);
    static int32_t ids[4 * N_LONG];
    int lens[4];
    const int n = decoder_inputs(ids, lens, d.n_vocab);
    const int before = atomic_load(&n_done);
    struct request *all = embed_request(ids, n, lens, 4, REQUEST_EMBED), *one[4];
    cpu_platform.submit(m, 0, all);
    for (int k = 0, off = 0; k < 4; off += lens[k], k++) {
        one[k] = embed_request(ids + off, lens[k], NULL, 0, REQUEST_EMBED);
        cpu_platform.submit(m, 1 + k, one[k]);
    }
    struct engine_model *em;
    struct threadpool *tp;
    assert_int_equal(engine_model_load(path, &em, &err), ERR_OK);
    assert_int_equal(threadpool_new(1, &tp), ERR_OK);
    const struct gguf_tensor *t = gguf_find_tensor(engine_model_gguf(em), "cls.output.weight");
    assert_non_null(t);
    float head[2 * 64];
    quant_traits_of(t->type)->to_float(t->data, head, 2 * 64);
    int status = 0;
    assert_int_equal(wait_done(all, &status, &err), FINISH_STOP);
    assert_int_equal(all->n_embedding, 4 * 2);
    for (int k = 0, off = 0; k < 4; off += lens[k], k++) {
        float h[64], want[2];
        last_hidden(em, tp, ids + off, lens[k], h);
        double z[2], mx, sum = 0;
        for (int o = 0; o < 2; o++) {
            z[o] = 0;
            for (int j = 0; j < 64; j++)
                z[o] += (double)head[o * 64 + j] * h[j];
        }
        mx = z[0] > z[1] ? z[0] : z[1];
        for (int o = 0; o < 2; o++)
            sum += exp(z[o] - mx);
        for (int o = 0; o < 2; o++)
            want[o] = (float)(exp(z[o] - mx) / sum);
        assert_int_equal(wait_done(one[k], &status, &err), FINISH_STOP);
        assert_int_equal(one[k]->n_embedding, 2);
        if (max_abs_diff(one[k]->embedding, want, 2) > 1e-5 ||
            max_abs_diff(all->embedding + 2 * k, want, 2) > 1e-5)
            fail_msg("input %d: %g %g alone, %g %g batched, want %g %g", k,
                     (double)one[k]->embedding[0], (double)one[k]->embedding[1],
                     (double)all->embedding[2 * k], (double)all->embedding[2 * k + 1],
                     (double)want[0], (double)want[1]);
        assert_true(fabs(all->embedding[2 * k] + all->embedding[2 * k + 1] - 1.0) < 1e-6);
        request_release(one[k]);
    }
    request_release(all);
    while (atomic_load(&n_done) < before + 5)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    for (int i = 0; i < 5; i++)
        cpu_platform.remove_instance(m, i);
    cpu_platform.unload(m);
    threadpool_free(tp);
    engine_model_free(em);
    unlink(path);
}

/* Writes a synthetic bert reranker (one score); extra string key/value when key is set. */
static void write_reranker(char *path, size_t cap, const char *key, const char *value, bool add_eos)
{
    struct synth_params p = synth_params_default();
    p.arch = "bert";
    p.n_embd = 32;
    p.n_head = 2;
    p.n_ff = 64;
    p.n_ctx = 64;
    p.seed = 3;
    p.n_cls_out = 1;
    p.n_vocab = synth_builtin_vocab_size("bert");
    struct gguf_writer *w;
    struct errmsg err;
    errmsg_clear(&err);
    assert_int_equal(synth_build(&p, &w, &err), ERR_OK);
    if (key) assert_int_equal(gguf_writer_add_str(w, key, value), ERR_OK);
    if (add_eos) assert_int_equal(gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", 1), 0);
    snprintf(path, cap, "/tmp/llamapi-test-rerank-%d-%d.gguf", key != NULL, (int)getpid());
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
    gguf_writer_free(w);
}

/* Three inputs in one request on instance 0 and each alone on instances 1..3: one score per
 * input, bit-identical to the encoder's for that input alone. */
static void test_reranker(void **state)
{
    (void)state;
    char path[128];
    write_reranker(path, sizeof path, NULL, NULL, false);
    struct platform_model_desc d;
    struct platform_model *m = load_embed(path, 0, PLATFORM_POOLING_DEFAULT, 4, &d);
    assert_int_equal(d.kind, MODEL_KIND_EMBEDDING);
    assert_int_equal(d.n_cls_out, 1);
    assert_int_equal(d.n_embd, 32);
    assert_null(d.rerank_template);
    assert_int_equal(d.rerank_bos, 2); // bos_token_id; bert vocabs add bos and sep, not eos
    assert_int_equal(d.rerank_eos, -1);
    assert_int_equal(d.rerank_sep, 3);
    static const int32_t ids[] = {2, 5, 6, 3, 7, 8, 2, 9, 3, 5, 5, 6, 10, 11, 12, 2, 7, 3};
    const int lens[3] = {6, 3, 9};
    const int before = atomic_load(&n_done);
    struct request *all = embed_request(ids, 18, lens, 3, REQUEST_EMBED), *one[3];
    cpu_platform.submit(m, 0, all);
    for (int k = 0, off = 0; k < 3; off += lens[k], k++) {
        one[k] = embed_request(ids + off, lens[k], NULL, 0, REQUEST_EMBED);
        cpu_platform.submit(m, 1 + k, one[k]);
    }
    struct engine_encoder *enc;
    struct threadpool *tp;
    struct errmsg err;
    assert_int_equal(engine_encoder_load(path, NULL, &enc, &err), ERR_OK);
    assert_int_equal(threadpool_new(1, &tp), ERR_OK);
    int status = 0;
    assert_int_equal(wait_done(all, &status, &err), FINISH_STOP);
    assert_int_equal(all->n_embedding, 3);
    for (int k = 0, off = 0; k < 3; off += lens[k], k++) {
        const int32_t *in = ids + off;
        float want;
        assert_int_equal(engine_encoder_embed(enc, tp, &in, &lens[k], 1, &want, &err), ERR_OK);
        assert_int_equal(wait_done(one[k], &status, &err), FINISH_STOP);
        assert_int_equal(one[k]->n_embedding, 1);
        assert_memory_equal(&one[k]->embedding[0], &want, sizeof want);
        assert_memory_equal(&all->embedding[k], &want, sizeof want);
        request_release(one[k]);
    }
    assert_true(all->embedding[0] != all->embedding[1]);
    request_release(all);
    while (atomic_load(&n_done) < before + 4)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    for (int i = 0; i < 4; i++)
        cpu_platform.remove_instance(m, i);
    cpu_platform.unload(m);
    // The same file pooled as embeddings is no reranker.
    m = load_embed(path, 0, PLATFORM_POOLING_CLS, 0, &d);
    assert_int_equal(d.n_cls_out, 0);
    assert_int_equal(d.rerank_bos, -1);
    assert_false(d.is_per_token);
    cpu_platform.unload(m);
    // Pooling none: a vector per token of every input, the encoder's.
    m = load_embed(path, 0, PLATFORM_POOLING_NONE, 1, &d);
    assert_true(d.is_per_token);
    assert_int_equal(d.n_cls_out, 0);
    all = embed_request(ids, 18, lens, 3, REQUEST_EMBED);
    cpu_platform.submit(m, 0, all);
    assert_int_equal(wait_done(all, &status, &err), FINISH_STOP);
    assert_int_equal(all->n_embedding, 18 * 32);
    struct engine_encoder *none;
    const struct engine_encoder_params np = {.pooling = ENGINE_POOLING_NONE};
    assert_int_equal(engine_encoder_load(path, &np, &none, &err), ERR_OK);
    for (int k = 0, off = 0; k < 3; off += lens[k], k++) {
        const int32_t *in = ids + off;
        float rows[9 * 32];
        assert_int_equal(engine_encoder_embed(none, tp, &in, &lens[k], 1, rows, &err), ERR_OK);
        assert_memory_equal(all->embedding + off * 32, rows, sizeof(float) * 32 * (size_t)lens[k]);
    }
    engine_encoder_free(none);
    request_release(all);
    while (atomic_load(&n_done) < before + 5)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    cpu_platform.remove_instance(m, 0);
    cpu_platform.unload(m);
    threadpool_free(tp);
    engine_encoder_free(enc);
    unlink(path);
}

/* The rerank template is the file's; add_eos_token adds eos, which bert vocabs lack: sep. */
static void test_reranker_layout(void **state)
{
    (void)state;
    char path[128];
    static const char tmpl[] = "[CLS]{query}[SEP]{document}[SEP]";
    write_reranker(path, sizeof path, "tokenizer.chat_template.rerank", tmpl, true);
    struct platform_model_desc d;
    struct platform_model *m = load_embed(path, 0, PLATFORM_POOLING_DEFAULT, 0, &d);
    assert_non_null(d.rerank_template);
    assert_string_equal(d.rerank_template, tmpl);
    assert_int_equal(d.rerank_bos, 2);
    assert_int_equal(d.rerank_eos, 3);
    assert_int_equal(d.rerank_sep, 3);
    cpu_platform.unload(m);
    // Allocation failure at every step of the load, the template's copy included.
    struct platform_load_args a = {.path = path, .n_threads = 1, .on_done = on_done};
    const int64_t live = mem_live_count();
    bool loaded = false;
    int n = 0;
    for (; !loaded; n++) {
        m = NULL;
        struct errmsg err;
        errmsg_clear(&err);
        mem_fail_after(n);
        int rc = cpu_platform.load(&a, &m, &err);
        mem_fail_after(-1);
        loaded = rc == ERR_OK;
        if (!loaded) assert_int_equal(rc, ERR_NOMEM);
        cpu_platform.unload(m);
        assert_int_equal(mem_live_count(), live);
    }
    printf("reranker load: %d allocation failures, each cleaned up\n", n - 1);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_inputs),
        cmocka_unit_test(test_tiny_bert_requests),
        cmocka_unit_test(test_decoder_pooling_last),
        cmocka_unit_test(test_decoder_pooling_mean_cls),
        cmocka_unit_test(test_decoder_forced),
        cmocka_unit_test(test_decoder_refusals),
        cmocka_unit_test(test_decoder_load_alloc_failures),
        cmocka_unit_test(test_reranker),
        cmocka_unit_test(test_decoder_reranker),
        cmocka_unit_test(test_reranker_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
