/* cpu platform models. Threads: the scheduler thread (platform/cpu_sched.c) owns every
 * running instance's state; admin calls (add/remove instance) touch only idle instances, under
 * the scheduler's mu; submit hands a request over through the scheduler. */
#include "platform/cpu_model.h"

#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/threadpool.h"
#include "platform/cpu.h"
#include "platform/cpu_embed.h"
#include "platform/cpu_sched.h"
#include "platform/vocab_gguf.h"
#include "text/chat_template.h"
#include "text/gbnf.h"
#include "text/grammar.h"
#include "text/jinja.h"
#include "text/tokenizer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CPU_MAX_INSTANCES CPU_SCHED_MAX_INSTANCES
#define CPU_DEFAULT_CTX   4096

enum phase {
    PHASE_IDLE = 0,
    PHASE_PROMPT,   // feeding prompt tokens
    PHASE_GENERATE, // feeding the last sampled token
};

/* seq/cached/exists: changed only while idle (admin thread, under mu). The rest: owned by
 * the scheduler thread while req is set. */
struct instance {
    bool exists;
    struct engine_seq *seq;
    int32_t *cached;     // (n_ctx) tokens whose keys/values are in seq, in order
    struct request *req; // running request (one reference) or NULL
    struct sampler *sampler;
    enum phase phase;
    int n_fed;           // prompt tokens in the cache
    int n_feeding;       // tokens in the current step
    int n_cached_prompt; // prompt tokens reused from the previous request
    int n_generated;
    int32_t next_token;
    struct gbnf *grammar; // compiled constraint of the running request, or NULL
    struct grammar_state *gstate;
    double t_start_ms, t_prompt_done_ms;
    enum finish_reason done;        // set during a step; the instance is finished after it
    struct request_outcome failure; // when done == FINISH_ERROR: what the request is told
};

struct platform_model {
    struct cpu_embed *embed; // set for embedding models: every call below is forwarded to it
    struct engine_model *engine;
    struct tokenizer *tok;
    struct jinja_template *tmpl;
    char *tmpl_src, *bos_text, *eos_text;
    char file[4096];       // the GGUF, watched for in-place truncation
    struct stat file_stat; // its identity and size when loaded
    bool is_file_broken;   // the mapped file shrank: no more decoding
    struct threadpool *tp;
    int n_ctx;
    int n_vocab;
    float *logits;                // (n_vocab) scheduler scratch: the sampler edits in place
    struct grammar_vocab *gvocab; // token bytes as a trie, for grammar masks
    uint32_t *mask;               // (mask words) scheduler scratch for grammar masks
    struct engine_batch_item items[CPU_MAX_INSTANCES];
    int item_instance[CPU_MAX_INSTANCES];

    struct cpu_sched sched; // its mu also guards instance existence
    struct instance inst[CPU_MAX_INSTANCES];
};

/* Ends the running request of instance i: records its timings and outcome, frees its
 * per-request state and returns it (the caller delivers it with request_deliver). */
static struct request *finish_instance(struct platform_model *m, int i, struct request_outcome *out)
{
    struct instance *in = &m->inst[i];
    struct request *r = in->req;
    double now = clock_now_ms();
    double t_prompt = in->t_prompt_done_ms > 0 ? in->t_prompt_done_ms : now;
    struct request_timings t = {
        .n_prompt = r->n_prompt - in->n_cached_prompt,
        .n_cached = in->n_cached_prompt,
        .n_predicted = in->n_generated,
        .prompt_ms = t_prompt - in->t_start_ms,
        .predicted_ms = now - t_prompt,
    };
    request_set_timings(r, &t);
    sampler_free(in->sampler);
    in->sampler = NULL;
    grammar_state_free(in->gstate);
    in->gstate = NULL;
    gbnf_free(in->grammar);
    in->grammar = NULL;
    *out = in->failure;
    out->reason = in->done;
    in->req = NULL;
    in->phase = PHASE_IDLE;
    in->done = FINISH_NONE;
    in->failure = (struct request_outcome){0};
    return r;
}

/* The first outcome sticks (a later failure in the same step does not replace it). */
static void fail_instance(struct instance *in, int status, const char *msg)
{
    if (in->done != FINISH_NONE) return;
    request_outcome_fail(&in->failure, status, msg);
    in->done = FINISH_ERROR;
}

static int common_prefix(const int32_t *a, int n_a, const int32_t *b, int n_b)
{
    int n = 0;
    while (n < n_a && n < n_b && a[n] == b[n])
        n++;
    return n;
}

static struct sampler_params sampler_params_from(const struct gen_params *g)
{
    struct sampler_params p = sampler_params_default();
    p.temperature = g->temperature;
    p.top_k = g->top_k;
    p.top_p = g->top_p;
    p.min_p = g->min_p;
    p.repeat_penalty = g->repeat_penalty;
    p.repeat_last_n = g->repeat_last_n;
    p.frequency_penalty = g->frequency_penalty;
    p.presence_penalty = g->presence_penalty;
    p.seed = g->seed;
    p.n_probs = g->n_probs > GEN_MAX_PROBS ? GEN_MAX_PROBS : g->n_probs;
    return p;
}

static void start_request(struct platform_model *m, int i, struct request *r)
{
    struct instance *in = &m->inst[i];
    in->req = r;
    in->done = FINISH_NONE;
    in->n_generated = 0;
    in->t_start_ms = clock_now_ms();
    in->t_prompt_done_ms = 0;
    request_mark_started(r);
    if (r->kind != REQUEST_GENERATE) {
        fail_instance(in, 400, "this model does not produce embeddings");
        return;
    }
    if (r->n_prompt < 1 || r->n_prompt >= m->n_ctx) {
        fail_instance(in, 400, "the prompt does not fit the context");
        return;
    }
    struct sampler_bias bias[GEN_MAX_LOGIT_BIAS];
    struct sampler_params sp = sampler_params_from(&r->params);
    for (int k = 0; k < r->params.n_logit_bias; k++) {
        bias[k].token = r->params.logit_bias[k].token;
        bias[k].bias = r->params.logit_bias[k].bias;
    }
    sp.logit_bias = bias;
    sp.n_logit_bias = r->params.n_logit_bias;
    if (sampler_new(&sp, m->n_vocab, &in->sampler) != ERR_OK) {
        fail_instance(in, 500, "cannot create the sampler (invalid parameters or no memory)");
        return;
    }
    if (r->params.grammar) {
        struct errmsg gerr;
        errmsg_clear(&gerr);
        int grc = gbnf_compile(r->params.grammar, strlen(r->params.grammar), &in->grammar, &gerr);
        if (grc == ERR_OK) grc = grammar_state_new(in->grammar, &in->gstate);
        if (grc != ERR_OK) {
            // The API compiled this grammar already: only resources can fail here, or a
            // grammar sent straight to the platform.
            fail_instance(in, grc == ERR_NOMEM ? 500 : 400,
                          grc == ERR_NOMEM ? "out of memory for the grammar"
                          : gerr.msg[0]    ? gerr.msg
                                           : "invalid grammar");
            return;
        }
    }
    // Reuse the cached prefix; at least one prompt token is fed so there are fresh logits.
    int keep = common_prefix(in->cached, engine_seq_pos(in->seq), r->prompt, r->n_prompt);
    if (keep >= r->n_prompt) keep = r->n_prompt - 1;
    engine_seq_truncate(in->seq, keep);
    in->n_fed = keep;
    in->n_cached_prompt = keep;
    int from = r->n_prompt > sp.repeat_last_n ? r->n_prompt - sp.repeat_last_n : 0;
    for (int k = from; k < r->n_prompt; k++)
        sampler_accept(in->sampler, r->prompt[k]);
    in->phase = PHASE_PROMPT;
}

/* Samples under the request's grammar: sample first and check only the chosen token; mask
 * the whole vocabulary and sample again only when the grammar rejects it (llama.cpp's
 * common sampler does the same), so constrained decoding costs a trie walk only on
 * rejected steps. */
static int sample_constrained(struct platform_model *m, struct instance *in, int32_t *token)
{
    const float *fresh = engine_seq_logits(in->seq);
    size_t bytes = (size_t)m->n_vocab * sizeof *m->logits;
    memcpy(m->logits, fresh, bytes);
    int rc = sampler_sample(in->sampler, m->logits, token);
    if (!in->gstate || rc != ERR_OK) return rc;
    bool ok = false;
    bool is_eog = tok_is_eog(m->tok, *token);
    if (is_eog)
        ok = grammar_state_can_end(in->gstate);
    else if (grammar_state_allows_token(in->gstate, m->gvocab, *token, &ok) != ERR_OK)
        return ERR_LIMIT;
    if (ok) return ERR_OK;
    if (grammar_mask(in->gstate, m->gvocab, m->mask) != ERR_OK) return ERR_LIMIT;
    memcpy(m->logits, fresh, bytes);
    grammar_mask_apply(m->mask, (size_t)m->n_vocab, m->logits);
    return sampler_sample(in->sampler, m->logits, token);
}

/* Samples the next token of instance i from its fresh logits and decides whether it ends. */
static void advance(struct platform_model *m, int i)
{
    struct instance *in = &m->inst[i];
    struct request *r = in->req;
    int32_t token;
    int rc = sample_constrained(m, in, &token);
    if (rc != ERR_OK) {
        fail_instance(in, rc == ERR_LIMIT ? 500 : 400,
                      in->gstate ? "no token satisfies the grammar (or it is too complex)"
                                 : "every token is banned by logit_bias");
        return;
    }
    if ((!r->params.ignore_eos || in->gstate) && tok_is_eog(m->tok, token)) {
        in->done = FINISH_STOP;
        return;
    }
    if (in->gstate && grammar_state_accept_token(in->gstate, m->gvocab, token) != ERR_OK) {
        fail_instance(in, 500, "the grammar matcher failed");
        return;
    }
    struct gen_event ev = {.token = token};
    if (r->params.n_probs > 0) {
        struct sampler_probs probs;
        sampler_get_probs(in->sampler, SAMPLER_DIST_RAW, &probs);
        ev.logprob = probs.chosen.logprob;
        ev.n_probs = probs.n_top < GEN_MAX_PROBS ? probs.n_top : GEN_MAX_PROBS;
        for (int k = 0; k < ev.n_probs; k++) {
            ev.top[k].token = probs.top[k].token;
            ev.top[k].logprob = probs.top[k].logprob;
        }
    }
    sampler_accept(in->sampler, token);
    in->n_generated++;
    in->next_token = token;
    in->phase = PHASE_GENERATE;
    if (request_push_event(r, &ev) != ERR_OK)
        in->done = FINISH_LENGTH;
    else if (in->gstate && grammar_state_is_done(in->gstate))
        in->done = FINISH_STOP; // the grammar allows nothing more
    else if (r->params.max_tokens >= 0 && in->n_generated >= r->params.max_tokens)
        in->done = FINISH_LENGTH;
    else if (engine_seq_pos(in->seq) + 1 >= m->n_ctx)
        in->done = FINISH_LENGTH;
}

/* Collects this step's batch: one token for every generating instance first (so decoding
 * never waits behind a long prompt), then prompt chunks in the room left. */
static int build_batch(struct platform_model *m)
{
    int n_items = 0, room = ENGINE_BATCH_MAX;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < CPU_MAX_INSTANCES && room > 0; i++) {
            struct instance *in = &m->inst[i];
            if (!in->req || in->done != FINISH_NONE) continue;
            if (pass == 0 && atomic_load(&in->req->is_cancelled)) {
                in->done = FINISH_CANCELLED;
                continue;
            }
            bool is_gen = in->phase == PHASE_GENERATE;
            if ((pass == 0) != is_gen) continue;
            int n = is_gen ? 1 : in->req->n_prompt - in->n_fed;
            if (n > room) n = room;
            in->n_feeding = n;
            m->items[n_items] = (struct engine_batch_item){
                .seq = in->seq,
                .tokens = is_gen ? &in->next_token : in->req->prompt + in->n_fed,
                .n_tokens = n,
            };
            m->item_instance[n_items++] = i;
            room -= n;
        }
    }
    return n_items;
}

/* The weights are mapped from the file: if it was truncated in place, touching the lost pages
 * would raise SIGBUS. Check before each step (one stat call) and stop decoding instead.
 * Replacing the file by rename or deleting it is harmless: the mapping keeps the old inode. */
static bool file_still_whole(struct platform_model *m)
{
    struct stat st;
    if (m->is_file_broken) return false;
    if (stat(m->file, &st) != 0 || st.st_ino != m->file_stat.st_ino ||
        st.st_dev != m->file_stat.st_dev || st.st_size >= m->file_stat.st_size)
        return true;
    log_error("%s was truncated on disk while loaded; reload the model", m->file);
    m->is_file_broken = true;
    return false;
}

static void run_step(struct platform_model *m)
{
    int n_items = build_batch(m);
    if (n_items == 0) return;
    struct errmsg err;
    errmsg_clear(&err);
    if (!file_still_whole(m)) {
        for (int k = 0; k < n_items; k++)
            fail_instance(&m->inst[m->item_instance[k]], 500,
                          "the model file was truncated on disk while loaded; reload the model");
        return;
    }
    if (engine_decode(m->engine, m->tp, m->items, n_items, &err) != ERR_OK) {
        log_error("decode failed: %s", err.msg);
        for (int k = 0; k < n_items; k++)
            fail_instance(&m->inst[m->item_instance[k]], 500, err.msg);
        return;
    }
    for (int k = 0; k < n_items; k++) {
        struct instance *in = &m->inst[m->item_instance[k]];
        int pos = engine_seq_pos(in->seq) - in->n_feeding;
        memcpy(in->cached + pos, m->items[k].tokens, (size_t)in->n_feeding * sizeof(int32_t));
        if (in->phase == PHASE_PROMPT) {
            in->n_fed += in->n_feeding;
            if (in->n_fed < in->req->n_prompt) continue;
            in->t_prompt_done_ms = clock_now_ms();
        }
        advance(m, m->item_instance[k]);
    }
}

/* The scheduler's view of this model (see cpu_sched_ops). */
static void sched_start_request(void *model, int i, struct request *r)
{
    start_request(model, i, r);
}

static bool sched_is_running(const void *model, int i)
{
    return ((const struct platform_model *)model)->inst[i].req != NULL;
}

static void sched_step(void *model)
{
    run_step(model);
}

static struct request *sched_take_finished(void *model, int i, struct request_outcome *out)
{
    struct platform_model *m = model;
    if (!m->inst[i].req || m->inst[i].done == FINISH_NONE) return NULL;
    return finish_instance(m, i, out);
}

static const struct cpu_sched_ops sched_ops = {
    .start = sched_start_request,
    .is_running = sched_is_running,
    .step = sched_step,
    .take_finished = sched_take_finished,
};

int cpu_model_cached_prefix(struct platform_model *m, int instance, const int32_t *tokens, int n)
{
    // Safe without mu: the instance is idle (the scheduler does not touch it) and exists
    // (the pool removes an instance only after taking it out of routing).
    if (m->embed || instance < 0 || instance >= CPU_MAX_INSTANCES) return 0;
    const struct instance *in = &m->inst[instance];
    if (!in->exists) return 0;
    return common_prefix(in->cached, engine_seq_pos(in->seq), tokens, n);
}

void cpu_model_submit(struct platform_model *m, int instance, struct request *r)
{
    if (m->embed) {
        cpu_embed_submit(m->embed, instance, r);
        return;
    }
    cpu_sched_submit(&m->sched, instance, r);
}

static char *copy_token_text(const struct tokenizer *t, tok_id id)
{
    struct str s = id == TOK_ID_NONE ? (struct str){"", 0} : tok_text(t, id);
    return mem_strndup(s.ptr ? s.ptr : "", s.len);
}

/* The server's override (a built-in name or Jinja source), which must parse. */
static int load_override_template(struct platform_model *m, const char *name_or_src,
                                  struct errmsg *err)
{
    const char *builtin = chat_template_builtin(name_or_src);
    m->tmpl_src = mem_strdup(builtin ? builtin : name_or_src);
    if (!m->tmpl_src) return ERR_NOMEM;
    struct errmsg terr;
    errmsg_clear(&terr);
    int rc = jinja_template_new(m->tmpl_src, strlen(m->tmpl_src), &m->tmpl, &terr);
    if (rc != ERR_OK)
        return errmsg_set(err, rc, "the --chat-template template does not parse: %s", terr.msg);
    return ERR_OK;
}

/* The model's chat template, or ChatML when it has none or ours cannot parse it. */
static int load_template(struct platform_model *m, const struct gguf *g, struct errmsg *err)
{
    struct str src = {0};
    bool has_own = gguf_get_str(g, "tokenizer.chat_template", &src) == ERR_OK && src.len > 0;
    if (has_own) {
        m->tmpl_src = mem_strndup(src.ptr, src.len);
        if (!m->tmpl_src) return ERR_NOMEM;
        struct errmsg terr;
        errmsg_clear(&terr);
        if (jinja_template_new(m->tmpl_src, src.len, &m->tmpl, &terr) == ERR_OK) return ERR_OK;
        log_warn("the model's chat template does not parse (%s); using ChatML", terr.msg);
        mem_free(m->tmpl_src);
        m->tmpl_src = NULL;
    }
    const char *fallback = chat_template_default();
    m->tmpl_src = mem_strdup(fallback);
    if (!m->tmpl_src) return ERR_NOMEM;
    return jinja_template_new(m->tmpl_src, strlen(m->tmpl_src), &m->tmpl, err);
}

static int load_text(struct platform_model *m, const char *template_override, struct errmsg *err)
{
    const struct gguf *g = engine_model_gguf(m->engine);
    struct vocab vocab;
    int rc = vocab_load_gguf(g, &vocab, err);
    if (rc != ERR_OK) return rc;
    rc = tok_new(&vocab, &m->tok, err);
    vocab_deinit(&vocab);
    if (rc != ERR_OK) return rc;
    if (tok_n_tokens(m->tok) != m->n_vocab)
        return errmsg_set(err, ERR_FORMAT, "the vocabulary has %d tokens but the model %d",
                          (int)tok_n_tokens(m->tok), m->n_vocab);
    m->bos_text = copy_token_text(m->tok, tok_bos(m->tok));
    m->eos_text = copy_token_text(m->tok, tok_eos(m->tok));
    if (!m->bos_text || !m->eos_text) return ERR_NOMEM;
    if (template_override) return load_override_template(m, template_override, err);
    return load_template(m, g, err);
}

/* The vocabulary as raw bytes for the grammar matcher: control tokens never match text. */
static int load_grammar_vocab(struct platform_model *m)
{
    size_t n = (size_t)m->n_vocab;
    const char **piece = mem_calloc(n, sizeof *piece);
    size_t *len = mem_calloc(n, sizeof *len);
    int32_t *eog = mem_calloc(n, sizeof *eog);
    int rc = piece && len && eog ? ERR_OK : ERR_NOMEM;
    size_t n_eog = 0;
    for (size_t i = 0; rc == ERR_OK && i < n; i++) {
        if (tok_is_eog(m->tok, (tok_id)i)) eog[n_eog++] = (int32_t)i;
        if (tok_is_control(m->tok, (tok_id)i)) continue;
        struct str p = tok_piece(m->tok, (tok_id)i);
        piece[i] = p.ptr;
        len[i] = p.len;
    }
    struct grammar_vocab_params gp = {piece, len, n, eog, n_eog};
    if (rc == ERR_OK) rc = grammar_vocab_new(&gp, &m->gvocab);
    if (rc == ERR_OK) {
        m->mask = mem_calloc(grammar_vocab_mask_words(m->gvocab), sizeof *m->mask);
        rc = m->mask ? ERR_OK : ERR_NOMEM;
    }
    mem_free(piece);
    mem_free(len);
    mem_free(eog);
    return rc;
}

static int pick_n_ctx(const struct engine_model_info *info, int requested)
{
    if (requested > 0) return requested;
    int n = info->n_ctx_train > 0 ? info->n_ctx_train : CPU_DEFAULT_CTX;
    return n < CPU_DEFAULT_CTX ? n : CPU_DEFAULT_CTX;
}

/* Frees what load built (any part may be missing) and the model itself. */
static void free_parts(struct platform_model *m)
{
    threadpool_free(m->tp);
    mem_free(m->logits);
    grammar_vocab_free(m->gvocab);
    mem_free(m->mask);
    jinja_template_free(m->tmpl);
    mem_free(m->tmpl_src);
    mem_free(m->bos_text);
    mem_free(m->eos_text);
    tok_free(m->tok);
    engine_model_free(m->engine);
    mem_free(m);
}

int cpu_model_load(const struct platform_load_args *a, struct platform_model **out,
                   struct errmsg *err)
{
    char file[4096];
    if (!cpu_resolve_gguf(a->path, file, sizeof file))
        return errmsg_set(err, ERR_IO, "'%s' is not a GGUF file or a directory with one", a->path);
    bool is_embedding = false;
    int prc = cpu_embed_probe(file, a->force_embedding, &is_embedding, err);
    if (prc != ERR_OK) return prc;
    struct platform_model *m = mem_calloc(1, sizeof *m);
    if (!m) return ERR_NOMEM;
    if (is_embedding) {
        int erc = cpu_embed_load(file, a, &m->embed, err);
        if (erc != ERR_OK) {
            mem_free(m);
            return erc;
        }
        *out = m;
        return ERR_OK;
    }
    snprintf(m->file, sizeof m->file, "%s", file);
    if (stat(file, &m->file_stat) != 0) {
        mem_free(m);
        return errmsg_set(err, ERR_IO, "%s: %s", file, strerror(errno));
    }
    int rc = engine_model_load(file, &m->engine, err);
    if (rc != ERR_OK) goto out_free;
    const struct engine_model_info *info = engine_model_info(m->engine);
    m->n_vocab = info->n_vocab;
    m->n_ctx = pick_n_ctx(info, a->n_ctx);
    rc = load_text(m, a->chat_template, err);
    if (rc == ERR_OK) rc = load_grammar_vocab(m);
    if (rc != ERR_OK) goto out_free;
    int n_threads = a->n_threads > 0 ? a->n_threads : thread_default_count();
    m->logits = mem_calloc((size_t)m->n_vocab, sizeof *m->logits);
    rc = m->logits ? threadpool_new(n_threads, &m->tp) : ERR_NOMEM;
    if (rc != ERR_OK) goto out_free;
    rc = cpu_sched_start(&m->sched, &sched_ops, m, a->on_done, a->owner);
    if (rc != ERR_OK) goto out_free;
    *out = m;
    return ERR_OK;
out_free:
    free_parts(m);
    if (rc == ERR_NOMEM && !err->msg[0])
        errmsg_set(err, rc, "out of memory while loading the model");
    return rc;
}

/* general.description, or a plain warning for the project's own synthetic models. */
static void describe_origin(const struct gguf *g, char *out, size_t cap)
{
    struct str s = {0};
    if (gguf_get_str(g, "general.description", &s) == ERR_OK && s.len)
        snprintf(out, cap, "%.*s", (int)(s.len < cap ? s.len : cap - 1), s.ptr);
    else if (gguf_get_str(g, "general.name", &s) == ERR_OK && str_eq_cstr(s, "synthetic"))
        snprintf(out, cap,
                 "synthetic model with random weights (written by gguf-synth): "
                 "its answers are gibberish");
}

void cpu_model_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    if (m->embed) {
        cpu_embed_describe(m->embed, out);
        return;
    }
    const struct engine_model_info *info = engine_model_info(m->engine);
    memset(out, 0, sizeof *out);
    out->tokenizer = m->tok;
    out->chat_template = m->tmpl;
    out->chat_template_src = m->tmpl_src;
    out->bos_text = m->bos_text;
    out->eos_text = m->eos_text;
    out->kind = MODEL_KIND_CHAT;
    out->n_ctx = m->n_ctx;
    out->n_ctx_train = info->n_ctx_train;
    out->n_vocab = info->n_vocab;
    out->n_embd = info->n_embd;
    out->n_params = info->n_params;
    out->file_size = info->file_size;
    out->instance_bytes =
        engine_seq_bytes(m->engine, m->n_ctx) + (uint64_t)m->n_ctx * sizeof(int32_t);
    snprintf(out->arch, sizeof out->arch, "%s", info->arch);
    describe_origin(engine_model_gguf(m->engine), out->description, sizeof out->description);
}

int cpu_model_add_instance(struct platform_model *m, int instance, struct errmsg *err)
{
    if (instance < 0 || instance >= CPU_MAX_INSTANCES)
        return errmsg_set(err, ERR_INVALID, "instance index %d out of range", instance);
    if (m->embed) return cpu_embed_add_instance(m->embed, instance, err);
    struct engine_seq *seq = NULL;
    int32_t *cached = mem_calloc((size_t)m->n_ctx, sizeof *cached);
    int rc = cached ? engine_seq_new(m->engine, m->n_ctx, &seq) : ERR_NOMEM;
    if (rc != ERR_OK) {
        mem_free(cached);
        return errmsg_set(err, rc, "cannot allocate a %d-token KV cache", m->n_ctx);
    }
    mutex_lock(&m->sched.mu);
    m->inst[instance].seq = seq;
    m->inst[instance].cached = cached;
    m->inst[instance].exists = true;
    mutex_unlock(&m->sched.mu);
    return ERR_OK;
}

void cpu_model_remove_instance(struct platform_model *m, int instance)
{
    if (m->embed) {
        cpu_embed_remove_instance(m->embed, instance);
        return;
    }
    mutex_lock(&m->sched.mu);
    struct instance *in = &m->inst[instance];
    struct engine_seq *seq = in->seq;
    int32_t *cached = in->cached;
    in->seq = NULL;
    in->cached = NULL;
    in->exists = false;
    mutex_unlock(&m->sched.mu);
    engine_seq_free(seq);
    mem_free(cached);
}

void cpu_model_unload(struct platform_model *m)
{
    if (!m) return;
    if (m->embed) {
        cpu_embed_unload(m->embed);
        mem_free(m);
        return;
    }
    cpu_sched_stop(&m->sched);
    for (int i = 0; i < CPU_MAX_INSTANCES; i++) {
        if (m->inst[i].req) { // cannot happen: the core unloads idle models only
            struct request_outcome o;
            request_deliver(finish_instance(m, i, &o), &o);
        }
        if (m->inst[i].exists) cpu_model_remove_instance(m, i);
    }
    cpu_sched_deinit(&m->sched);
    free_parts(m);
}
