/* cpu platform embedding models. Threads: the scheduler thread owns every running instance's
 * state and the batch staging arrays; admin calls (add/remove instance) touch only idle
 * instances under mu; submit hands a request over through `pending` under mu. The scheduler
 * calls on_done holding no lock. */
#include "platform/cpu_embed.h"

#include "engine/bert.h"
#include "engine/threadpool.h"
#include "platform/vocab_gguf.h"
#include "text/tokenizer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdio.h>
#include <string.h>

#define BATCH_INPUTS_MAX 512       // inputs per encoder batch (staging rows)
#define INSTANCE_BYTES   (1 << 16) // bookkeeping only: instances share the model's scratch

/* exists: changed only while idle (admin thread, under mu). The rest: owned by the scheduler
 * thread while req is set. */
struct instance {
    bool exists;
    struct request *req; // running request (one reference) or NULL
    int n_inputs;        // inputs of req (1 when it set none)
    int next_input;      // first input not yet embedded
    int next_token;      // its offset in req->prompt
    float *result;       // (n_inputs, n_embd) pooled vectors so far
    double t_start_ms;
    enum finish_reason done;        // set during a step; the instance is finished after it
    struct request_outcome failure; // when done == FINISH_ERROR: what the request is told
};

struct cpu_embed {
    struct engine_encoder *enc;
    struct tokenizer *tok;
    struct threadpool *tp;
    int n_embd, n_ctx, n_vocab, n_batch_tokens;
    platform_done_fn on_done;
    void *owner;
    // Batch staging, owned by the scheduler thread.
    const int32_t *in_ptr[BATCH_INPUTS_MAX];
    int in_len[BATCH_INPUTS_MAX];
    int in_inst[BATCH_INPUTS_MAX];
    float *out; // (BATCH_INPUTS_MAX, n_embd)

    struct mutex mu; // guards pending, is_stopping, instance existence
    struct cond cv;
    struct request *pending[CPU_EMBED_MAX_INSTANCES];
    bool is_stopping;
    struct thread scheduler;
    struct instance inst[CPU_EMBED_MAX_INSTANCES];
};

int cpu_embed_probe(const char *gguf_path, bool *out, struct errmsg *err)
{
    struct gguf *g;
    int rc = gguf_open(gguf_path, &g, err);
    if (rc != ERR_OK) return rc;
    *out = engine_encoder_handles(g);
    gguf_close(g);
    return ERR_OK;
}

static int input_len(const struct request *r, int i)
{
    return r->input_lens ? r->input_lens[i] : r->n_prompt;
}

static void fail_instance(struct instance *in, int status, const char *msg)
{
    if (in->done != FINISH_NONE) return; // the first outcome sticks
    request_outcome_fail(&in->failure, status, msg);
    in->done = FINISH_ERROR;
}

/* Checks every input of r against the encoder before any of it runs. */
static bool validate(struct cpu_embed *m, struct instance *in)
{
    const struct request *r = in->req;
    char msg[160];
    if (r->kind != REQUEST_EMBED) {
        fail_instance(in, 400, "this model only produces embeddings");
        return false;
    }
    for (int i = 0, off = 0; i < in->n_inputs; off += input_len(r, i), i++) {
        const int n = input_len(r, i);
        if (n < 1 || n > m->n_ctx) {
            snprintf(msg, sizeof msg, "input %d has %d tokens; the context is %d", i, n, m->n_ctx);
            fail_instance(in, 400, msg);
            return false;
        }
        for (int j = 0; j < n; j++) {
            if (r->prompt[off + j] < 0 || r->prompt[off + j] >= m->n_vocab) {
                snprintf(msg, sizeof msg, "input %d: token id %d is outside the vocabulary", i,
                         (int)r->prompt[off + j]);
                fail_instance(in, 400, msg);
                return false;
            }
        }
    }
    return true;
}

static void start_request(struct cpu_embed *m, int i, struct request *r)
{
    struct instance *in = &m->inst[i];
    in->req = r;
    in->done = FINISH_NONE;
    in->n_inputs = r->input_lens ? r->n_inputs : 1;
    in->next_input = 0;
    in->next_token = 0;
    in->t_start_ms = clock_now_ms();
    request_mark_started(r);
    if (!validate(m, in)) return;
    in->result = mem_alloc((size_t)in->n_inputs * (size_t)m->n_embd * sizeof(float));
    if (!in->result) fail_instance(in, 500, "out of memory for the embeddings");
}

/* Ends the running request of instance i: stores its embeddings and timings, frees its
 * per-request state and returns it with its outcome (delivered with request_deliver after
 * the instance went back to the pool: see struct request_outcome). */
static struct request *finish_instance(struct cpu_embed *m, int i, struct request_outcome *out)
{
    struct instance *in = &m->inst[i];
    struct request *r = in->req;
    *out = in->failure;
    if (in->done == FINISH_STOP) {
        struct request_timings t = {
            .n_prompt = r->n_prompt,
            .prompt_ms = clock_now_ms() - in->t_start_ms,
        };
        request_set_timings(r, &t);
        if (request_set_embedding(r, in->result, in->n_inputs * m->n_embd) != ERR_OK)
            request_outcome_fail(out, 500, "out of memory for the embeddings");
        else
            out->reason = FINISH_STOP;
    } else if (in->done != FINISH_ERROR) {
        out->reason = in->done;
    }
    mem_free(in->result);
    in->result = NULL;
    in->req = NULL;
    in->done = FINISH_NONE;
    in->failure = (struct request_outcome){0};
    return r;
}

/* Stages the next inputs of every running instance, in instance order, while they fit. */
static int build_batch(struct cpu_embed *m)
{
    int n = 0, n_tok = 0;
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++) {
        struct instance *in = &m->inst[i];
        if (!in->req || in->done != FINISH_NONE) continue;
        if (atomic_load(&in->req->is_cancelled)) {
            in->done = FINISH_CANCELLED;
            continue;
        }
        int k = in->next_input, off = in->next_token;
        while (k < in->n_inputs && n < BATCH_INPUTS_MAX) {
            const int len = input_len(in->req, k);
            if (n_tok + len > m->n_batch_tokens) return n;
            m->in_ptr[n] = in->req->prompt + off;
            m->in_len[n] = len;
            m->in_inst[n++] = i;
            n_tok += len;
            off += len;
            k++;
        }
    }
    return n;
}

static void run_step(struct cpu_embed *m)
{
    const int n = build_batch(m);
    if (n == 0) return;
    struct errmsg err;
    errmsg_clear(&err);
    if (engine_encoder_embed(m->enc, m->tp, m->in_ptr, m->in_len, n, m->out, &err) != ERR_OK) {
        log_error("embedding batch failed: %s", err.msg);
        for (int k = 0; k < n; k++)
            if (m->inst[m->in_inst[k]].done == FINISH_NONE)
                fail_instance(&m->inst[m->in_inst[k]], 500, err.msg);
        return;
    }
    for (int k = 0; k < n; k++) {
        struct instance *in = &m->inst[m->in_inst[k]];
        memcpy(in->result + (size_t)in->next_input * m->n_embd, m->out + (size_t)k * m->n_embd,
               (size_t)m->n_embd * sizeof(float));
        in->next_token += m->in_len[k];
        if (++in->next_input == in->n_inputs) in->done = FINISH_STOP;
    }
}

/* Starts what was submitted; returns whether any instance is running. Takes mu. */
static bool take_pending(struct cpu_embed *m, bool wait)
{
    struct request *start[CPU_EMBED_MAX_INSTANCES] = {0};
    mutex_lock(&m->mu);
    for (;;) {
        bool any = false;
        for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++) {
            start[i] = m->pending[i];
            m->pending[i] = NULL;
            any |= start[i] != NULL;
        }
        if (any || !wait || m->is_stopping) break;
        cond_wait(&m->cv, &m->mu);
    }
    mutex_unlock(&m->mu);
    bool active = false;
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++) {
        if (start[i]) start_request(m, i, start[i]);
        active |= m->inst[i].req != NULL;
    }
    return active;
}

static void *scheduler_main(void *arg)
{
    struct cpu_embed *m = arg;
    bool active = false;
    for (;;) {
        active = take_pending(m, !active);
        if (!active) {
            mutex_lock(&m->mu);
            bool stop = m->is_stopping;
            mutex_unlock(&m->mu);
            if (stop) break;
            continue;
        }
        run_step(m);
        for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++) {
            if (m->inst[i].req && m->inst[i].done != FINISH_NONE) {
                struct request_outcome o;
                struct request *r = finish_instance(m, i, &o);
                m->on_done(m->owner, i); // first: see struct request_outcome
                request_deliver(r, &o);
            }
        }
    }
    return NULL;
}

void cpu_embed_submit(struct cpu_embed *m, int instance, struct request *r)
{
    request_retain(r);
    mutex_lock(&m->mu);
    m->pending[instance] = r;
    cond_signal(&m->cv);
    mutex_unlock(&m->mu);
}

static int load_text(struct cpu_embed *m, struct errmsg *err)
{
    struct vocab vocab;
    int rc = vocab_load_gguf(engine_encoder_gguf(m->enc), &vocab, err);
    if (rc != ERR_OK) return rc;
    rc = tok_new(&vocab, &m->tok, err);
    vocab_deinit(&vocab);
    if (rc != ERR_OK) return rc;
    if (tok_n_tokens(m->tok) > m->n_vocab)
        return errmsg_set(err, ERR_FORMAT, "the vocabulary has %d tokens but the model %d",
                          (int)tok_n_tokens(m->tok), m->n_vocab);
    return ERR_OK;
}

static void free_parts(struct cpu_embed *m)
{
    threadpool_free(m->tp);
    mem_free(m->out);
    tok_free(m->tok);
    engine_encoder_free(m->enc);
    mem_free(m);
}

int cpu_embed_load(const char *gguf_path, const struct platform_load_args *a,
                   struct cpu_embed **out, struct errmsg *err)
{
    struct cpu_embed *m = mem_calloc(1, sizeof *m);
    if (!m) return errmsg_set(err, ERR_NOMEM, "out of memory while loading the model");
    const struct engine_encoder_params p = {.pooling = ENGINE_POOLING_UNSPECIFIED};
    int rc = engine_encoder_load(gguf_path, &p, &m->enc, err);
    if (rc != ERR_OK) goto out_free;
    const struct engine_encoder_info *info = engine_encoder_info(m->enc);
    m->n_embd = info->n_embd;
    m->n_vocab = info->n_vocab;
    m->n_batch_tokens = info->n_batch_tokens;
    m->n_ctx = a->n_ctx > 0 && a->n_ctx < info->n_ctx_train ? a->n_ctx : info->n_ctx_train;
    m->on_done = a->on_done;
    m->owner = a->owner;
    rc = load_text(m, err);
    if (rc != ERR_OK) goto out_free;
    const int n_threads = a->n_threads > 0 ? a->n_threads : thread_physical_core_count();
    m->out = mem_alloc((size_t)BATCH_INPUTS_MAX * (size_t)m->n_embd * sizeof(float));
    rc = m->out ? threadpool_new(n_threads, &m->tp) : ERR_NOMEM;
    if (rc == ERR_OK) rc = mutex_init(&m->mu);
    if (rc != ERR_OK) goto out_free;
    if (cond_init(&m->cv) != ERR_OK) {
        rc = ERR_NOMEM;
        goto out_mutex;
    }
    rc = thread_start(&m->scheduler, scheduler_main, m);
    if (rc != ERR_OK) goto out_cond;
    *out = m;
    return ERR_OK;
out_cond:
    cond_deinit(&m->cv);
out_mutex:
    mutex_deinit(&m->mu);
out_free:
    free_parts(m);
    if (rc == ERR_NOMEM && !err->msg[0])
        errmsg_set(err, rc, "out of memory while loading the model");
    return rc;
}

void cpu_embed_describe(const struct cpu_embed *m, struct platform_model_desc *out)
{
    const struct engine_encoder_info *info = engine_encoder_info(m->enc);
    memset(out, 0, sizeof *out);
    out->tokenizer = m->tok;
    out->bos_text = "";
    out->eos_text = "";
    out->kind = MODEL_KIND_EMBEDDING;
    out->n_ctx = m->n_ctx;
    out->n_ctx_train = info->n_ctx_train;
    out->n_vocab = info->n_vocab;
    out->n_embd = info->n_embd;
    out->n_params = info->n_params;
    out->file_size = info->file_size;
    out->instance_bytes = INSTANCE_BYTES;
    snprintf(out->arch, sizeof out->arch, "%s", info->arch);
}

int cpu_embed_add_instance(struct cpu_embed *m, int instance, struct errmsg *err)
{
    if (instance < 0 || instance >= CPU_EMBED_MAX_INSTANCES)
        return errmsg_set(err, ERR_INVALID, "instance index %d out of range", instance);
    mutex_lock(&m->mu);
    m->inst[instance].exists = true;
    mutex_unlock(&m->mu);
    return ERR_OK;
}

void cpu_embed_remove_instance(struct cpu_embed *m, int instance)
{
    mutex_lock(&m->mu);
    m->inst[instance].exists = false;
    mutex_unlock(&m->mu);
}

void cpu_embed_unload(struct cpu_embed *m)
{
    if (!m) return;
    mutex_lock(&m->mu);
    m->is_stopping = true;
    cond_signal(&m->cv);
    mutex_unlock(&m->mu);
    thread_join(&m->scheduler);
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++)
        if (m->inst[i].req) { // cannot happen: the core unloads idle models only
            struct request_outcome o;
            request_deliver(finish_instance(m, i, &o), &o);
        }
    cond_deinit(&m->cv);
    mutex_deinit(&m->mu);
    free_parts(m);
}
