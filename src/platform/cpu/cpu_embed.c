/* cpu platform embedding models. Threads: the scheduler thread (platform/instances.c,
 * scheduled mode) owns every running instance's state and the batch staging arrays; admin
 * calls (add/remove instance) touch only idle instances, under the instance layer's lock;
 * submit hands a request over through it. */
#include "platform/cpu/cpu_embed.h"

#include "engine/bert/bert.h"
#include "engine/matmul.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/threadpool.h"
#include "platform/instances.h"
#include "platform/cpu/cpu.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

_Static_assert(CPU_EMBED_MAX_INSTANCES == INSTANCES_MAX, "one slot per instance");

#define BATCH_INPUTS_MAX 512       // inputs per batch (staging rows; >= ENGINE_BATCH_MAX)
#define INSTANCE_BYTES   (1 << 16) // encoders: bookkeeping only, instances share the scratch
#define DECODER_CTX_CAP  4096      // decoders: default context, as for chat models

/* The layer's slot holds existence, the running request and its outcome. kv/carry: changed
 * only while idle (admin thread, under the layer's lock). The rest: owned by the scheduler
 * thread while s->req is set. */
struct instance {
    struct inst_slot *s;
    int n_inputs;   // inputs of req (1 when it set none)
    int next_input; // first input not yet embedded
    int next_token; // its offset in req->prompt
    float *result;  // (n_inputs, n_out) pooled vectors or scores so far (zeroed at start);
                    // per token (n_prompt, n_embd)
    double t_start_ms;
    // Decoders: inputs are packed into kv as view sequences from offset 0 each step; an input
    // longer than a step's room runs in `carry` over several steps and keeps its place.
    uint8_t *kv;              // (kv_bytes) changed only while idle, like exists
    struct engine_seq *carry; // view; changed only while idle
    bool is_carrying;         // input next_input is part-fed in carry
    int carry_fed;            // its tokens fed so far
    size_t kv_used;           // bytes of kv holding live inputs
};

/* Immutable after load, except the staging arrays (owned by the scheduler thread). */
struct cpu_embed {
    struct engine_encoder *enc; // the model is an encoder, or
    struct engine_model *dec;   // a decoder
    enum engine_pooling pooling;
    struct tokenizer *tok;
    struct threadpool *tp;
    int n_embd, n_ctx, n_ctx_train, n_vocab, n_batch_tokens;
    int n_out;             // floats per input in a result: n_embd, or a reranker's n_cls_out
    int n_cls_out;         // rerankers: scores per input; 0 otherwise
    bool is_per_token;     // encoders with pooling none: results are per token
    char *rerank_template; // tokenizer.chat_template.rerank (owned), or NULL
    int32_t rerank_bos, rerank_eos, rerank_sep; // pair layout ids, -1 when left out
    size_t kv_bytes; // decoders: an instance's KV cache (n_ctx positions)
    // Batch staging, owned by the scheduler thread.
    const int32_t *in_ptr[BATCH_INPUTS_MAX];
    int in_len[BATCH_INPUTS_MAX];
    int in_inst[BATCH_INPUTS_MAX];
    float *out; // encoders: (BATCH_INPUTS_MAX, n_out), per token (n_batch_tokens, n_embd)
    // Decoders: one item per input in a step, on its own view sequence.
    struct engine_batch_item items[BATCH_INPUTS_MAX];
    struct engine_seq *views[BATCH_INPUTS_MAX];
    int item_input[BATCH_INPUTS_MAX]; // the input's index in its request
    bool item_ends[BATCH_INPUTS_MAX]; // the item feeds the input's last token
    float *discard;                   // (n_embd) cls chunks after the first write here
    // Decoder rerankers (qwen3): the last token's state of each item, and cls.output.
    float *rank_hidden;    // (BATCH_INPUTS_MAX, n_embd)
    const void *cls_out;   // (n_cls_out, n_embd) rows of cls_out_type, mapped
    uint32_t cls_out_type; // enum quant_type with a vec_dot
    void *cls_x;           // (cls_x_bytes) the state converted for cls_out's dot
    size_t cls_x_bytes;

    struct instances set; // its lock also guards instance existence
    struct instance inst[CPU_EMBED_MAX_INSTANCES];
    char file[4096];              // the GGUF, named in the failure when it changes on disk
    atomic_bool is_change_logged; // its change was logged (once)
};

/* <arch>.pooling_type of a decoder file, or -1 when absent or not an integer. */
static int file_pooling(const struct gguf *g)
{
    struct str arch;
    char key[96];
    int64_t v;
    if (gguf_get_str(g, "general.architecture", &arch) != ERR_OK) return -1;
    snprintf(key, sizeof key, "%.*s.pooling_type", (int)(arch.len < 64 ? arch.len : 64), arch.ptr);
    return gguf_get_i64(g, key, &v) == ERR_OK && v >= 0 && v <= ENGINE_POOLING_RANK ? (int)v : -1;
}

/* Whether the file is an encoder, and its <arch>.pooling_type (see file_pooling). */
static int probe(const char *gguf_path, bool *is_encoder, int *pooling, struct errmsg *err)
{
    struct gguf *g;
    int rc = gguf_open(gguf_path, &g, err);
    if (rc != ERR_OK) return rc;
    *is_encoder = engine_encoder_handles(g);
    *pooling = file_pooling(g);
    gguf_close(g);
    return ERR_OK;
}

int cpu_embed_probe(const char *gguf_path, bool force_embedding, bool *out, struct errmsg *err)
{
    bool is_encoder;
    int pooling;
    int rc = probe(gguf_path, &is_encoder, &pooling, err);
    // pooling_type none (0) says nothing about the kind: it is what a chat model would mean.
    if (rc == ERR_OK) *out = is_encoder || force_embedding || pooling > ENGINE_POOLING_NONE;
    return rc;
}

static int input_len(const struct request *r, int i)
{
    return r->input_lens ? r->input_lens[i] : r->n_prompt;
}

/* Checks every input of r against the encoder before any of it runs. */
static bool validate(struct cpu_embed *m, struct instance *in)
{
    const struct request *r = in->s->req;
    char msg[160];
    if (r->kind != REQUEST_EMBED) {
        inst_slot_fail(in->s, 400, "this model only produces embeddings");
        return false;
    }
    for (int i = 0, off = 0; i < in->n_inputs; off += input_len(r, i), i++) {
        const int n = input_len(r, i);
        if (n < 1 || n > m->n_ctx) {
            snprintf(msg, sizeof msg, "input %d has %d tokens; the context is %d", i, n, m->n_ctx);
            inst_slot_fail(in->s, 400, msg);
            return false;
        }
        for (int j = 0; j < n; j++) {
            if (r->prompt[off + j] < 0 || r->prompt[off + j] >= m->n_vocab) {
                snprintf(msg, sizeof msg, "input %d: token id %d is outside the vocabulary", i,
                         (int)r->prompt[off + j]);
                inst_slot_fail(in->s, 400, msg);
                return false;
            }
        }
    }
    return true;
}

/* Rows of a request's result: one per input, or per token. */
static int result_rows(const struct cpu_embed *m, const struct request *r)
{
    return m->is_per_token ? r->n_prompt : (r->input_lens ? r->n_inputs : 1);
}

static void start_request(void *model, int i)
{
    struct cpu_embed *m = model;
    struct instance *in = &m->inst[i];
    struct request *r = in->s->req;
    in->n_inputs = r->input_lens ? r->n_inputs : 1;
    in->next_input = 0;
    in->next_token = 0;
    in->is_carrying = false;
    in->kv_used = 0;
    in->t_start_ms = clock_now_ms();
    if (!validate(m, in)) return;
    in->result = mem_calloc((size_t)result_rows(m, r) * (size_t)m->n_out, sizeof(float));
    if (!in->result) inst_slot_fail(in->s, 500, "out of memory for the embeddings");
}

/* Instance i's request ended: stores its embeddings and timings and frees its per-request
 * state (the layer then delivers it, after the instance went back to the pool: see struct
 * request_outcome). */
static void end_request(void *model, int i)
{
    struct cpu_embed *m = model;
    struct instance *in = &m->inst[i];
    struct request *r = in->s->req;
    if (in->s->done == FINISH_STOP) {
        struct request_timings t = {
            .n_prompt = r->n_prompt,
            .prompt_ms = clock_now_ms() - in->t_start_ms,
        };
        request_set_timings(r, &t);
        if (request_set_embedding(r, in->result, result_rows(m, r) * m->n_out) != ERR_OK) {
            in->s->done = FINISH_NONE;
            inst_slot_fail(in->s, 500, "out of memory for the embeddings");
        }
    }
    mem_free(in->result);
    in->result = NULL;
}

/* Stages the next inputs of every running instance, in instance order, while they fit. */
static int build_batch(struct cpu_embed *m)
{
    int n = 0, n_tok = 0;
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++) {
        struct instance *in = &m->inst[i];
        if (!in->s->req || in->s->done != FINISH_NONE) continue;
        if (atomic_load(&in->s->req->is_cancelled)) {
            in->s->done = FINISH_CANCELLED;
            continue;
        }
        int k = in->next_input, off = in->next_token;
        while (k < in->n_inputs && n < BATCH_INPUTS_MAX) {
            const int len = input_len(in->s->req, k);
            if (n_tok + len > m->n_batch_tokens) return n;
            m->in_ptr[n] = in->s->req->prompt + off;
            m->in_len[n] = len;
            m->in_inst[n++] = i;
            n_tok += len;
            off += len;
            k++;
        }
    }
    return n;
}

static void encoder_step(struct cpu_embed *m)
{
    const int n = build_batch(m);
    if (n == 0) return;
    struct errmsg err;
    errmsg_clear(&err);
    if (engine_encoder_embed(m->enc, m->tp, m->in_ptr, m->in_len, n, m->out, &err) != ERR_OK) {
        log_error("embedding batch failed: %s", err.msg);
        for (int k = 0; k < n; k++)
            if (m->inst[m->in_inst[k]].s->done == FINISH_NONE)
                inst_slot_fail(m->inst[m->in_inst[k]].s, 500, err.msg);
        return;
    }
    for (int k = 0, row = 0; k < n; k++) {
        struct instance *in = &m->inst[m->in_inst[k]];
        if (m->is_per_token) { // the input's token rows, at its tokens' offset
            memcpy(in->result + (size_t)in->next_token * m->n_out, m->out + (size_t)row * m->n_out,
                   (size_t)m->in_len[k] * (size_t)m->n_out * sizeof(float));
            row += m->in_len[k];
        } else {
            memcpy(in->result + (size_t)in->next_input * m->n_out, m->out + (size_t)k * m->n_out,
                   (size_t)m->n_out * sizeof(float));
        }
        in->next_token += m->in_len[k];
        if (++in->next_input == in->n_inputs) in->s->done = FINISH_STOP;
    }
}

/* ---- decoders ---- */

/* The engine output that feeds pooling for a chunk of an input starting at token `from`. */
static enum engine_output chunk_output(const struct cpu_embed *m, int from, float *row,
                                       float **hidden)
{
    *hidden = row;
    switch (m->pooling) {
    case ENGINE_POOLING_MEAN:
        return ENGINE_OUTPUT_SUM;
    case ENGINE_POOLING_CLS:
        if (from == 0) return ENGINE_OUTPUT_FIRST;
        *hidden = m->discard; // the first token's state was taken by the first chunk
        return ENGINE_OUTPUT_LAST;
    default:
        return ENGINE_OUTPUT_LAST;
    }
}

/* Stages one item: tokens [from, from + n) of input k (prompt offset off) of instance i. */
static void stage_item(struct cpu_embed *m, int *n_items, int i, struct engine_seq *seq, int k,
                       int off, int from, int n)
{
    struct instance *in = &m->inst[i];
    float *hidden;
    float *row = m->n_cls_out > 0 ? m->rank_hidden + (size_t)*n_items * m->n_embd
                                  : in->result + (size_t)k * m->n_embd;
    const enum engine_output out = chunk_output(m, from, row, &hidden);
    m->items[*n_items] = (struct engine_batch_item){
        .seq = seq,
        .tokens = in->s->req->prompt + off + from,
        .n_tokens = n,
        .output = out,
        .hidden = hidden,
    };
    m->in_inst[*n_items] = i;
    m->item_input[*n_items] = k;
    m->item_ends[*n_items] = from + n == input_len(in->s->req, k);
    (*n_items)++;
}

/* Stages instance i's next inputs into the room left in the step: first the rest of an input
 * carried from earlier steps, then whole inputs packed after it in the instance's cache, then
 * the head of one input too long for the room, which is carried on. Inputs always start at
 * position 0 of a fresh view, so nothing of another input is ever attended to. */
static void stage_instance(struct cpu_embed *m, int i, int *n_items, int *room)
{
    struct instance *in = &m->inst[i];
    int k = in->next_input, off = in->next_token;
    bool is_carry_busy = false;
    if (in->is_carrying) {
        const int len = input_len(in->s->req, k), left = len - in->carry_fed;
        const int n = left < *room ? left : *room;
        stage_item(m, n_items, i, in->carry, k, off, in->carry_fed, n);
        *room -= n;
        if (n < left) return;
        is_carry_busy = true;
        off += len;
        k++;
    } else {
        in->kv_used = 0; // nothing live: pack from the start
    }
    for (; k < in->n_inputs && (*room) > 0 && *n_items < BATCH_INPUTS_MAX; k++) {
        const int len = input_len(in->s->req, k);
        const size_t bytes = engine_kv_bytes(m->dec, len);
        if (in->kv_used + bytes > m->kv_bytes) return;
        struct engine_seq *seq = len <= *room ? m->views[*n_items] : in->carry;
        if (len > *room && is_carry_busy) return; // carry holds another input this step
        (void)engine_seq_bind(seq, in->kv + in->kv_used, bytes, len); // sized just above
        in->kv_used += bytes;
        const int n = len <= *room ? len : *room;
        stage_item(m, n_items, i, seq, k, off, 0, n);
        *room -= n;
        if (n < len) return; // carried on: the room is used up
        off += len;
    }
}

/* Divides a mean by its count and scales the vector to unit length (zero stays zero). */
static void finish_vector(const struct cpu_embed *m, float *v, int n_tokens)
{
    double norm = 0.0;
    for (int j = 0; j < m->n_embd; j++) {
        if (m->pooling == ENGINE_POOLING_MEAN) v[j] /= (float)n_tokens;
        norm += (double)v[j] * v[j];
    }
    const float inv = norm > 0.0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
    for (int j = 0; j < m->n_embd; j++)
        v[j] *= inv;
}

/* A decoder reranker's scores from the last token's state h: cls.output then a softmax over
 * the outputs (llama.cpp's qwen3 rank pooling), into out (n_cls_out). */
static void rank_scores(struct cpu_embed *m, const float *h, float *out)
{
    const uint32_t dot = quant_traits_of(m->cls_out_type)->dot_type;
    (void)matmul_quantize_input(h, 1, m->n_embd, dot, m->cls_x, m->cls_x_bytes, 0, 1);
    const struct matmul_args a = {.w = m->cls_out,
                                  .w_type = m->cls_out_type,
                                  .n_in = m->n_embd,
                                  .n_out = m->n_cls_out,
                                  .x = m->cls_x,
                                  .x_row_bytes = m->cls_x_bytes,
                                  .n_tok = 1,
                                  .y = out};
    matmul_run(&a, 0, 1);
    float mx = out[0];
    for (int j = 1; j < m->n_cls_out; j++)
        mx = out[j] > mx ? out[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < m->n_cls_out; j++) {
        out[j] = expf(out[j] - mx);
        sum += out[j];
    }
    for (int j = 0; j < m->n_cls_out; j++)
        out[j] = (float)(out[j] / sum);
}

/* Books the outcome of item t of a decode that succeeded. */
static void item_done(struct cpu_embed *m, int t)
{
    struct instance *in = &m->inst[m->in_inst[t]];
    const int k = m->item_input[t], len = input_len(in->s->req, k);
    in->is_carrying = !m->item_ends[t];
    if (in->is_carrying) {
        in->carry_fed = engine_seq_pos(in->carry);
        return;
    }
    if (m->n_cls_out > 0)
        rank_scores(m, m->rank_hidden + (size_t)t * m->n_embd, in->result + (size_t)k * m->n_out);
    else
        finish_vector(m, in->result + (size_t)k * m->n_embd, len);
    in->next_input = k + 1;
    in->next_token += len;
    if (in->next_input == in->n_inputs) in->s->done = FINISH_STOP;
}

static void decoder_step(struct cpu_embed *m)
{
    int n_items = 0, room = ENGINE_BATCH_MAX;
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES && room > 0; i++) {
        struct instance *in = &m->inst[i];
        if (!in->s->req || in->s->done != FINISH_NONE) continue;
        if (atomic_load(&in->s->req->is_cancelled)) {
            in->s->done = FINISH_CANCELLED;
            continue;
        }
        stage_instance(m, i, &n_items, &room);
    }
    if (n_items == 0) return;
    struct errmsg err;
    errmsg_clear(&err);
    if (engine_decode(m->dec, m->tp, m->items, n_items, &err) != ERR_OK) {
        log_error("embedding batch failed: %s", err.msg);
        for (int t = 0; t < n_items; t++)
            if (m->inst[m->in_inst[t]].s->done == FINISH_NONE)
                inst_slot_fail(m->inst[m->in_inst[t]].s, 500, err.msg);
        return;
    }
    for (int t = 0; t < n_items; t++)
        item_done(m, t);
}

bool cpu_embed_is_failed(struct cpu_embed *m, struct errmsg *why)
{
    const struct gguf *g = m->dec ? engine_model_gguf(m->dec) : engine_encoder_gguf(m->enc);
    if (!gguf_is_changed(g)) return false;
    cpu_file_changed_msg(m->file, why);
    if (!atomic_exchange(&m->is_change_logged, true)) log_error("%s", why->msg);
    return true;
}

/* The file changed: every request on the model ends with the failure, also one the step
 * just finished (its results were computed from the changed bytes). */
static bool fail_if_changed(struct cpu_embed *m)
{
    struct errmsg why;
    if (!cpu_embed_is_failed(m, &why)) return false;
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++) {
        struct inst_slot *s = m->inst[i].s;
        if (!s->req || s->done == FINISH_ERROR || s->done == FINISH_CANCELLED) continue;
        s->done = FINISH_NONE;
        inst_slot_fail(s, 500, why.msg);
    }
    return true;
}

/* Checked before and after the step, as the chat models' (cpu_model.c) are: a failure recorded
 * after the step wins over the results it wrote, since the first outcome sticks. */
static void run_step(struct cpu_embed *m)
{
    if (fail_if_changed(m)) return;
    if (m->dec)
        decoder_step(m);
    else
        encoder_step(m);
    fail_if_changed(m);
}

static void run_step_cb(void *model)
{
    run_step(model);
}

/* The instance layer's view of this model. */
static const struct inst_sched_ops sched_ops = {
    .start = start_request,
    .step = run_step_cb,
    .end = end_request,
};

void cpu_embed_submit(struct cpu_embed *m, int instance, struct request *r)
{
    instances_submit(&m->set, instance, r);
}

/* A reranker's pair layout (see platform_model_desc): the rerank template when the file has
 * one, and the ids llama.cpp's server puts around query and document per the vocab flags. */
static int load_rerank_layout(struct cpu_embed *m, const struct gguf *g, const struct vocab *v)
{
    const struct tok_specials *sp = tok_specials(m->tok);
    const tok_id bos = sp->bos != TOK_ID_NONE ? sp->bos : sp->cls;
    const tok_id eos = sp->eos != TOK_ID_NONE ? sp->eos : sp->sep;
    m->rerank_bos = v->add_bos ? bos : TOK_ID_NONE;
    m->rerank_eos = v->add_eos ? eos : TOK_ID_NONE;
    m->rerank_sep = v->add_sep ? sp->sep : TOK_ID_NONE;
    struct str t;
    if (gguf_get_str(g, "tokenizer.chat_template.rerank", &t) != ERR_OK) return ERR_OK;
    m->rerank_template = mem_strndup(t.ptr, t.len);
    return m->rerank_template ? ERR_OK : ERR_NOMEM;
}

static int load_text(struct cpu_embed *m, struct errmsg *err)
{
    struct vocab vocab;
    const struct gguf *g = m->dec ? engine_model_gguf(m->dec) : engine_encoder_gguf(m->enc);
    int rc = vocab_load_gguf(g, &vocab, err);
    if (rc != ERR_OK) return rc;
    rc = tok_new(&vocab, &m->tok, err);
    if (rc == ERR_OK && m->n_cls_out > 0) rc = load_rerank_layout(m, g, &vocab);
    vocab_deinit(&vocab);
    if (rc == ERR_NOMEM) errmsg_set(err, rc, "out of memory while loading the vocabulary");
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
    mem_free(m->discard);
    mem_free(m->rerank_template);
    mem_free(m->rank_hidden);
    mem_free(m->cls_x);
    for (int i = 0; i < BATCH_INPUTS_MAX; i++)
        engine_seq_free(m->views[i]);
    tok_free(m->tok);
    engine_encoder_free(m->enc);
    engine_model_free(m->dec);
    mem_free(m);
}

static enum engine_pooling engine_pooling_of(enum platform_pooling p)
{
    switch (p) {
    case PLATFORM_POOLING_NONE:
        return ENGINE_POOLING_NONE;
    case PLATFORM_POOLING_MEAN:
        return ENGINE_POOLING_MEAN;
    case PLATFORM_POOLING_CLS:
        return ENGINE_POOLING_CLS;
    case PLATFORM_POOLING_LAST:
        return ENGINE_POOLING_LAST;
    case PLATFORM_POOLING_RANK:
        return ENGINE_POOLING_RANK;
    default:
        return ENGINE_POOLING_UNSPECIFIED;
    }
}

static int load_encoder(struct cpu_embed *m, const char *path, const struct platform_load_args *a,
                        struct errmsg *err)
{
    const struct engine_encoder_params p = {.pooling = engine_pooling_of(a->pooling)};
    int rc = engine_encoder_load(path, &p, &m->enc, err);
    if (rc != ERR_OK) return rc;
    const struct engine_encoder_info *info = engine_encoder_info(m->enc);
    m->n_embd = info->n_embd;
    m->n_vocab = info->n_vocab;
    m->n_batch_tokens = info->n_batch_tokens;
    m->n_ctx_train = info->n_ctx_train;
    m->n_ctx = a->n_ctx > 0 && a->n_ctx < info->n_ctx_train ? a->n_ctx : info->n_ctx_train;
    m->pooling = info->pooling;
    m->n_out = info->n_out;
    m->n_cls_out = info->n_cls_out;
    m->is_per_token = info->pooling == ENGINE_POOLING_NONE;
    const int rows = m->is_per_token ? m->n_batch_tokens : BATCH_INPUTS_MAX;
    m->out = mem_alloc((size_t)rows * (size_t)m->n_out * sizeof(float));
    return m->out ? ERR_OK : ERR_NOMEM;
}

/* The load's pooling, else the file's, else last: with causal attention only the last token
 * has seen the whole input, and that is the state decoder embedding models (Qwen3-Embedding)
 * are trained to produce. Rank is qwen3's reranker head (Qwen3-Reranker) only: llama.cpp's
 * other decoders have none. */
static int decoder_pooling(struct cpu_embed *m, enum platform_pooling asked, struct errmsg *err)
{
    int p = asked != PLATFORM_POOLING_DEFAULT ? (int)engine_pooling_of(asked)
                                              : file_pooling(engine_model_gguf(m->dec));
    if (asked == PLATFORM_POOLING_DEFAULT && p <= ENGINE_POOLING_NONE) p = ENGINE_POOLING_LAST;
    const char *arch = engine_model_info(m->dec)->arch;
    if (p == ENGINE_POOLING_NONE || (p == ENGINE_POOLING_RANK && strcmp(arch, "qwen3") != 0))
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "pooling %s is not supported for a %s decoder (mean, cls or last%s)",
                          p == ENGINE_POOLING_NONE ? "none" : "rank", arch,
                          p == ENGINE_POOLING_RANK ? "; rank on qwen3 rerankers" : "");
    m->pooling = (enum engine_pooling)p;
    return ERR_OK;
}

/* A qwen3 reranker's head: cls.output (n_cls_out rows of n_embd, n_cls_out the number of
 * <arch>.classifier.output_labels, else 1) and the scratch its product needs. */
static int load_decoder_head(struct cpu_embed *m, struct errmsg *err)
{
    const struct gguf *g = engine_model_gguf(m->dec);
    const char *arch = engine_model_info(m->dec)->arch;
    char key[96];
    enum gguf_value_type et;
    int64_t n = 0;
    snprintf(key, sizeof key, "%s.classifier.output_labels", arch);
    int rc = gguf_get_arr(g, key, &et, &n);
    if (rc == ERR_NOT_FOUND || (rc == ERR_OK && n == 0))
        n = 1;
    else if (rc != ERR_OK || n > m->n_embd)
        return errmsg_set(err, ERR_FORMAT, "key '%s': not an array of 1..%d labels", key,
                          m->n_embd);
    const struct gguf_tensor *t = gguf_find_tensor(g, "cls.output.weight");
    if (!t)
        return errmsg_set(err, ERR_FORMAT,
                          "pooling rank needs the reranker head 'cls.output.weight'");
    if (t->ne[0] != m->n_embd || t->ne[1] != n || t->ne[2] != 1 || t->ne[3] != 1)
        return errmsg_set(err, ERR_FORMAT,
                          "tensor 'cls.output.weight': shape [%lld, %lld], expected [%d, %lld]",
                          (long long)t->ne[0], (long long)t->ne[1], m->n_embd, (long long)n);
    const struct quant_traits *tr = quant_traits_of(t->type);
    m->cls_x_bytes = tr && tr->vec_dot ? matmul_input_row_bytes(t->type, m->n_embd) : 0;
    if (m->cls_x_bytes == 0)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "tensor 'cls.output.weight': type %s is not supported",
                          gguf_type_name(t->type) ? gguf_type_name(t->type) : "unknown");
    m->cls_out = t->data;
    m->cls_out_type = t->type;
    m->n_cls_out = (int)n;
    m->n_out = (int)n;
    m->cls_x = mem_alloc(m->cls_x_bytes);
    m->rank_hidden = mem_alloc((size_t)BATCH_INPUTS_MAX * (size_t)m->n_embd * sizeof(float));
    return m->cls_x && m->rank_hidden ? ERR_OK : ERR_NOMEM;
}

/* A decoder file that says its attention is bidirectional is a different graph. */
static bool is_causal(const struct gguf *g, const char *arch)
{
    char key[96];
    bool causal = true;
    snprintf(key, sizeof key, "%s.attention.causal", arch);
    return gguf_get_bool(g, key, &causal) != ERR_OK || causal;
}

static int load_decoder(struct cpu_embed *m, const char *path, const struct platform_load_args *a,
                        struct errmsg *err)
{
    int rc = engine_model_load(path, &m->dec, err);
    if (rc != ERR_OK) return rc;
    const struct engine_model_info *info = engine_model_info(m->dec);
    if (!is_causal(engine_model_gguf(m->dec), info->arch))
        return errmsg_set(err, ERR_UNSUPPORTED, "non-causal %s models are not supported",
                          info->arch);
    rc = decoder_pooling(m, a->pooling, err);
    if (rc != ERR_OK) return rc;
    m->n_embd = info->n_embd;
    m->n_out = info->n_embd;
    m->n_vocab = info->n_vocab;
    m->n_ctx_train = info->n_ctx_train;
    m->n_ctx = a->n_ctx > 0 ? a->n_ctx : DECODER_CTX_CAP;
    if (m->n_ctx > info->n_ctx_train) m->n_ctx = info->n_ctx_train;
    if (m->pooling == ENGINE_POOLING_RANK) rc = load_decoder_head(m, err);
    if (rc != ERR_OK) return rc;
    m->kv_bytes = engine_kv_bytes(m->dec, m->n_ctx);
    if (m->kv_bytes == 0)
        return errmsg_set(err, ERR_LIMIT, "a %d-token KV cache is too large", m->n_ctx);
    for (int i = 0; i < BATCH_INPUTS_MAX; i++)
        if (engine_seq_new_view(m->dec, &m->views[i]) != ERR_OK) return ERR_NOMEM;
    m->discard = mem_alloc((size_t)m->n_embd * sizeof(float));
    return m->discard ? ERR_OK : ERR_NOMEM;
}

int cpu_embed_load(const char *gguf_path, const struct platform_load_args *a,
                   struct cpu_embed **out, struct errmsg *err)
{
    bool is_encoder = false;
    int pooling_unused;
    int rc = probe(gguf_path, &is_encoder, &pooling_unused, err);
    if (rc != ERR_OK) return rc;
    struct cpu_embed *m = mem_calloc(1, sizeof *m);
    if (!m) return errmsg_set(err, ERR_NOMEM, "out of memory while loading the model");
    snprintf(m->file, sizeof m->file, "%s", gguf_path);
    rc = is_encoder ? load_encoder(m, gguf_path, a, err) : load_decoder(m, gguf_path, a, err);
    if (rc == ERR_OK) rc = load_text(m, err);
    if (rc != ERR_OK) goto out_free;
    const int n_threads = a->n_threads > 0 ? a->n_threads : thread_default_count();
    rc = threadpool_new(n_threads, &m->tp);
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++)
        m->inst[i].s = &m->set.slot[i];
    if (rc == ERR_OK) rc = instances_start_sched(&m->set, &sched_ops, m, a->on_done, a->owner);
    if (rc != ERR_OK) goto out_free;
    *out = m;
    return ERR_OK;
out_free:
    free_parts(m);
    if (rc == ERR_NOMEM && !err->msg[0])
        errmsg_set(err, rc, "out of memory while loading the model");
    return rc;
}

void cpu_embed_describe(const struct cpu_embed *m, struct platform_model_desc *out)
{
    memset(out, 0, sizeof *out);
    out->tokenizer = m->tok;
    out->bos_text = "";
    out->eos_text = "";
    out->kind = MODEL_KIND_EMBEDDING;
    out->n_ctx = m->n_ctx;
    out->n_ctx_train = m->n_ctx_train;
    out->n_vocab = m->n_vocab;
    out->n_embd = m->n_embd;
    out->n_cls_out = m->n_cls_out;
    out->is_per_token = m->is_per_token;
    out->rerank_template = m->rerank_template;
    out->rerank_bos = m->n_cls_out > 0 ? m->rerank_bos : TOK_ID_NONE;
    out->rerank_eos = m->n_cls_out > 0 ? m->rerank_eos : TOK_ID_NONE;
    out->rerank_sep = m->n_cls_out > 0 ? m->rerank_sep : TOK_ID_NONE;
    if (m->dec) {
        const struct engine_model_info *info = engine_model_info(m->dec);
        out->n_params = info->n_params;
        out->file_size = info->file_size;
        out->instance_bytes = m->kv_bytes + INSTANCE_BYTES;
        snprintf(out->arch, sizeof out->arch, "%s", info->arch);
    } else {
        const struct engine_encoder_info *info = engine_encoder_info(m->enc);
        out->n_params = info->n_params;
        out->file_size = info->file_size;
        out->instance_bytes = INSTANCE_BYTES;
        snprintf(out->arch, sizeof out->arch, "%s", info->arch);
    }
}

int cpu_embed_add_instance(struct cpu_embed *m, int instance, struct errmsg *err)
{
    if (instance < 0 || instance >= CPU_EMBED_MAX_INSTANCES)
        return errmsg_set(err, ERR_INVALID, "instance index %d out of range", instance);
    uint8_t *kv = NULL;
    struct engine_seq *carry = NULL;
    if (m->dec) {
        kv = mem_alloc(m->kv_bytes);
        if (!kv || engine_seq_new_view(m->dec, &carry) != ERR_OK) {
            mem_free(kv);
            return errmsg_set(err, ERR_NOMEM, "cannot allocate a %d-token KV cache", m->n_ctx);
        }
    }
    instances_lock(&m->set);
    m->inst[instance].kv = kv;
    m->inst[instance].carry = carry;
    m->inst[instance].s->exists = true;
    instances_unlock(&m->set);
    return ERR_OK;
}

void cpu_embed_remove_instance(struct cpu_embed *m, int instance)
{
    instances_lock(&m->set);
    struct instance *in = &m->inst[instance];
    uint8_t *kv = in->kv;
    struct engine_seq *carry = in->carry;
    in->kv = NULL;
    in->carry = NULL;
    in->s->exists = false;
    instances_unlock(&m->set);
    engine_seq_free(carry);
    mem_free(kv);
}

void cpu_embed_unload(struct cpu_embed *m)
{
    if (!m) return;
    instances_stop(&m->set);
    for (int i = 0; i < CPU_EMBED_MAX_INSTANCES; i++)
        if (m->inst[i].s->exists) cpu_embed_remove_instance(m, i);
    instances_deinit(&m->set);
    free_parts(m);
}
