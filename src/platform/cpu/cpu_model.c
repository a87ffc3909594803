/* cpu platform models. Threads: the scheduler thread (platform/instances.c, scheduled mode)
 * owns every running instance's state; admin calls (add/remove instance) touch only idle
 * instances, under the instance layer's lock; submit hands a request over through it. */
#include "platform/cpu/cpu_model.h"

#include "platform/cpu/cpu_vision.h"

#include "engine/model/model.h"
#include "engine/sampler.h"
#include "engine/threadpool.h"
#include "platform/cpu/cpu.h"
#include "platform/cpu/cpu_embed.h"
#include "platform/cpu/cpu_vision.h"
#include "platform/instances.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/chat_template.h"
#include "text/grammar/gbnf.h"
#include "text/grammar/grammar.h"
#include "text/jinja/jinja.h"
#include "text/tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define CPU_MAX_INSTANCES INSTANCES_MAX
#define CPU_DEFAULT_CTX   4096
/* A hybrid model's prompt pauses this many tokens before its end for a state checkpoint, so a
 * retry or another continuation of the same prompt (which must feed at least its last token
 * again) finds the state of most of it. */
#define CKPT_TAIL 4

enum phase {
    PHASE_IDLE = 0,
    PHASE_PROMPT,   // feeding prompt tokens
    PHASE_GENERATE, // feeding the last sampled token
    PHASE_REFEED,   // rebuilding the cache after a context shift (tokens from cached)
};

/* seq/cached: changed only while idle (admin thread, under the layer's lock). The rest: owned
 * by the scheduler thread while s->req is set. */
struct instance {
    struct inst_slot *s; // the layer's slot: existence, running request, outcome
    struct engine_seq *seq;
    int32_t *cached;        // (n_ctx) tokens whose keys/values are in seq, in order
    int n_cached_as_prompt; // leading cached positions computed as prompt tokens (the rest
    struct sampler *sampler;
    enum phase phase;
    int n_fed;           // prompt tokens in the cache
    int n_refeed_end;    // PHASE_REFEED: cached[pos..n_refeed_end) still to feed
    int n_feeding;       // tokens in the current step
    int n_cached_prompt; // prompt tokens reused from the previous request
    int n_generated;
    int32_t next_token;
    struct gbnf *grammar; // compiled constraint of the running request, or NULL
    struct grammar_state *gstate;
    double t_start_ms, t_prompt_done_ms;
};

struct platform_model {
    struct cpu_embed *embed; // set for embedding models: every call below is forwarded to it
    struct engine_model *engine;
    struct tokenizer *tok;
    struct jinja_template *tmpl;
    char *tmpl_src, *bos_text, *eos_text;
    char file[4096];              // the GGUF, named in the failure when it changes on disk
    atomic_bool is_change_logged; // its change was logged (once)
    struct threadpool *tp;
    struct cpu_vision *vision; // the multimodal projector, or NULL
    int n_images_step;         // images in the batch being built
    int n_ctx;
    int n_vocab;
    bool has_checkpoints;         // a hybrid: the prompt cache keeps state checkpoints
    float *logits;                // (n_vocab) scheduler scratch: the sampler edits in place
    struct grammar_vocab *gvocab; // token bytes as a trie, for grammar masks
    uint32_t *mask;               // (mask words) scheduler scratch for grammar masks
    struct engine_batch_item items[CPU_MAX_INSTANCES];
    int item_instance[CPU_MAX_INSTANCES];

    struct instances set; // its lock also guards instance existence
    struct instance inst[CPU_MAX_INSTANCES];
};

/* Instance i's request ended: records its timings and frees its per-request state (the
 * layer then delivers it). */
static void end_request(void *model, int i)
{
    struct platform_model *m = model;
    struct instance *in = &m->inst[i];
    struct request *r = in->s->req;
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
    // a hybrid's state after the reply, which a continued conversation's prompt repeats
    engine_seq_checkpoint(in->seq);
    sampler_free(in->sampler);
    in->sampler = NULL;
    grammar_state_free(in->gstate);
    in->gstate = NULL;
    gbnf_free(in->grammar);
    in->grammar = NULL;
    in->phase = PHASE_IDLE;
}

/* llama-server's prompt_progress point for instance in's prompt (when the request asked). */
static void push_progress(struct instance *in)
{
    struct request *r = in->s->req;
    const struct request_progress p = {.total = r->n_prompt,
                                       .cache = in->n_cached_prompt,
                                       .processed = in->n_fed,
                                       .time_ms = clock_now_ms() - in->t_start_ms};
    request_push_progress(r, &p);
}

static int common_prefix(const int32_t *a, int n_a, const int32_t *b, int n_b)
{
    int n = 0;
    while (n < n_a && n < n_b && a[n] == b[n])
        n++;
    // An image's positions are computed together (they attend to each other): never keep
    // part of one. Its placeholders are negative ids.
    while (n > 0 && n < n_b && b[n] < 0 && b[n - 1] < 0)
        n--;
    return n;
}

/* The image of r whose positions hold pos, or NULL. */
static const struct request_image *image_over(const struct request *r, int pos)
{
    for (int k = 0; k < r->n_images; k++)
        if (r->images[k].pos <= pos && pos < r->images[k].pos + r->images[k].n_tok)
            return &r->images[k];
    return NULL;
}

/* Prompt tokens from pos that are fed as one run: the rest of an image's positions, or the
 * text up to the next image. */
static int run_length(const struct request *r, int pos)
{
    const struct request_image *im = image_over(r, pos);
    if (im) return im->pos + im->n_tok - pos;
    int end = r->n_prompt;
    for (int k = 0; k < r->n_images; k++)
        if (r->images[k].pos > pos && r->images[k].pos < end) end = r->images[k].pos;
    return end - pos;
}

/* Every negative id of the prompt is an image's placeholder, and images need a projector. */
static bool images_fit(const struct platform_model *m, const struct request *r)
{
    if (r->n_images > 0 && !m->vision) return false;
    int k = 0;
    for (int p = 0; p < r->n_prompt; p++) {
        if (r->prompt[p] >= 0) continue;
        while (k < r->n_images && r->images[k].pos + r->images[k].n_tok <= p)
            k++;
        if (k == r->n_images || r->images[k].pos > p) return false;
    }
    return true;
}

#define MAX_EOG_BANS 16 // end-of-generation tokens banned for ignore_eos
/* Cached positions a new prompt may reuse: its common prefix with the cache, but with float
 * weights only up to the positions computed as prompt tokens, since the engine sums a sampled
 * token's products in another order than a prompt token's (batch invariance: the prompt then
 * gets the bits it gets cold; the previous answer is computed again as prompt). */
static int reusable_prefix(const struct platform_model *m, const struct instance *in,
                           const int32_t *tokens, int n)
{
    int keep = common_prefix(in->cached, engine_seq_pos(in->seq), tokens, n);
    if (!engine_model_sampled_is_prompt(m->engine) && keep > in->n_cached_as_prompt)
        keep = in->n_cached_as_prompt;
    // less where the cache cannot be cut there (a window's keys gone, a recurrent state
    // without a checkpoint at that prefix)
    return engine_seq_keepable(in->seq, keep);
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
    p.mirostat = g->mirostat;
    p.mirostat_tau = g->mirostat_tau;
    p.mirostat_eta = g->mirostat_eta;
    return p;
}

/* A slot action on instance i (see enum request_kind): SAVE/ERASE report the cached tokens
 * and end at once; RESTORE keeps the common prefix and feeds the rest (PHASE_REFEED). */
static void slot_action(struct platform_model *m, int i, struct request *r)
{
    struct instance *in = &m->inst[i];
    char msg[96];
    in->n_cached_prompt = 0;
    if (r->preferred_instance != i) {
        snprintf(msg, sizeof msg, "slot %d is busy; retry when it is idle", r->preferred_instance);
        inst_slot_fail(in->s, 503, msg);
        return;
    }
    int pos = engine_seq_pos(in->seq);
    if (r->kind != REQUEST_SLOT_RESTORE) {
        for (int k = 0; k < pos; k++) {
            struct gen_event ev = {.token = in->cached[k]};
            if (request_push_event(r, &ev) != ERR_OK) break;
        }
        if (r->kind == REQUEST_SLOT_ERASE) engine_seq_truncate(in->seq, 0);
        in->s->done = FINISH_STOP;
        return;
    }
    if (r->n_prompt >= m->n_ctx) {
        snprintf(msg, sizeof msg, "%d saved tokens do not fit this slot's context (%d)",
                 r->n_prompt, m->n_ctx);
        inst_slot_fail(in->s, 400, msg);
        return;
    }
    for (int k = 0; k < r->n_prompt; k++) {
        if (r->prompt[k] < 0 || r->prompt[k] >= m->n_vocab) {
            inst_slot_fail(in->s, 400, "the saved tokens are not of this model's vocabulary");
            return;
        }
    }
    int keep = reusable_prefix(m, in, r->prompt, r->n_prompt);
    engine_seq_truncate(in->seq, keep);
    keep = engine_seq_pos(in->seq);
    in->n_cached_as_prompt = r->n_prompt; // the rest is fed again as prompt
    memcpy(in->cached + keep, r->prompt + keep, (size_t)(r->n_prompt - keep) * sizeof *r->prompt);
    in->n_refeed_end = r->n_prompt;
    if (keep == r->n_prompt)
        in->s->done = FINISH_STOP;
    else
        in->phase = PHASE_REFEED;
}

static void start_request(void *model, int i)
{
    struct platform_model *m = model;
    struct instance *in = &m->inst[i];
    struct request *r = in->s->req;
    in->n_generated = 0;
    in->t_start_ms = clock_now_ms();
    in->t_prompt_done_ms = 0;
    if (r->kind >= REQUEST_SLOT_SAVE) {
        slot_action(m, i, r);
        return;
    }
    if (r->kind != REQUEST_GENERATE) {
        inst_slot_fail(in->s, 400, "this model does not produce embeddings");
        return;
    }
    if (r->n_prompt < 1 || r->n_prompt >= m->n_ctx) {
        inst_slot_fail(in->s, 400, "the prompt does not fit the context");
        return;
    }
    if (!images_fit(m, r)) {
        inst_slot_fail(in->s, 400,
                       m->vision ? "the prompt holds ids outside the vocabulary"
                                 : "this model has no multimodal projector; it takes no images");
        return;
    }
    struct sampler_bias bias[GEN_MAX_LOGIT_BIAS + MAX_EOG_BANS];
    struct sampler_params sp = sampler_params_from(&r->params);
    int n_bias = 0;
    for (int k = 0; k < r->params.n_logit_bias; k++) {
        bias[n_bias].token = r->params.logit_bias[k].token;
        bias[n_bias++].bias = r->params.logit_bias[k].bias;
    }
    // ignore_eos as llama-server does it: end-of-generation tokens are never drawn (a grammar
    // keeps them, since it may need one to finish).
    for (int32_t t = 0; r->params.ignore_eos && !r->params.grammar && t < m->n_vocab &&
                        n_bias < GEN_MAX_LOGIT_BIAS + MAX_EOG_BANS;
         t++)
        if (tok_is_eog(m->tok, t)) bias[n_bias++] = (struct sampler_bias){t, -INFINITY};
    sp.logit_bias = bias;
    sp.n_logit_bias = n_bias;
    if (sampler_new(&sp, m->n_vocab, &in->sampler) != ERR_OK) {
        inst_slot_fail(in->s, 500, "cannot create the sampler (invalid parameters or no memory)");
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
            inst_slot_fail(in->s, grc == ERR_NOMEM ? 500 : 400,
                           grc == ERR_NOMEM ? "out of memory for the grammar"
                           : gerr.msg[0]    ? gerr.msg
                                            : "invalid grammar");
            return;
        }
    }
    // Reuse the cached prefix; at least one prompt token is fed so there are fresh logits.
    int keep = reusable_prefix(m, in, r->prompt, r->n_prompt);
    if (keep >= r->n_prompt) keep = r->n_prompt - 1;
    engine_seq_truncate(in->seq, keep);
    keep = engine_seq_pos(in->seq); // less when a sliding window's keys were already dropped
    in->n_cached_as_prompt = r->n_prompt;
    in->n_fed = keep;
    in->n_cached_prompt = keep;
    push_progress(in);
    int from = r->n_prompt > sp.repeat_last_n ? r->n_prompt - sp.repeat_last_n : 0;
    for (int k = from; k < r->n_prompt; k++)
        if (r->prompt[k] >= 0) sampler_accept(in->sampler, r->prompt[k]);
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

/* llama-server's context shift: keep the first n_keep tokens (plus the first, usually BOS),
 * drop half of the rest, and go on. The kept tail is fed again (PHASE_REFEED) to rebuild its
 * keys and values at their new positions, where llama.cpp rotates the cached keys instead:
 * the same tokens at the same positions, computed afresh. */
static void shift_context(struct instance *in)
{
    int pos = engine_seq_pos(in->seq);
    int n_keep = in->s->req->params.n_keep < 0 ? in->s->req->n_prompt : in->s->req->params.n_keep;
    n_keep = n_keep + 1 < pos - 1 ? n_keep + 1 : 1;
    int n_discard = (pos - n_keep) / 2;
    if (n_discard < 1) {
        in->s->done = FINISH_LENGTH;
        return;
    }
    // The kept tail is fed again as ids; an image's positions cannot be (their embeddings are
    // not kept), so a context holding one after n_keep ends instead of shifting.
    for (int k = n_keep; k < pos; k++)
        if (in->cached[k] < 0) {
            in->s->done = FINISH_LENGTH;
            return;
        }
    memmove(in->cached + n_keep, in->cached + n_keep + n_discard,
            (size_t)(pos - n_keep - n_discard) * sizeof *in->cached);
    engine_seq_truncate(in->seq, n_keep);
    // The shifted tail is computed again as prompt; counting only what was kept is safe.
    if (in->n_cached_as_prompt > n_keep) in->n_cached_as_prompt = n_keep;
    in->n_refeed_end = pos - n_discard;
    in->phase = PHASE_REFEED;
}

/* Samples the next token of instance i from its fresh logits and decides whether it ends. */
static void advance(struct platform_model *m, int i)
{
    struct instance *in = &m->inst[i];
    struct request *r = in->s->req;
    int32_t token;
    int rc = sample_constrained(m, in, &token);
    if (rc != ERR_OK) {
        inst_slot_fail(in->s, rc == ERR_LIMIT ? 500 : 400,
                       in->gstate ? "no token satisfies the grammar (or it is too complex)"
                                  : "every token is banned by logit_bias");
        return;
    }
    if ((!r->params.ignore_eos || in->gstate) && tok_is_eog(m->tok, token)) {
        in->s->done = FINISH_STOP;
        return;
    }
    if (in->gstate && grammar_state_accept_token(in->gstate, m->gvocab, token) != ERR_OK) {
        inst_slot_fail(in->s, 500, "the grammar matcher failed");
        return;
    }
    struct gen_event ev = {.token = token, .is_post = r->params.is_post_sampling_probs};
    if (r->params.n_probs > 0) {
        struct sampler_probs probs;
        sampler_get_probs(in->sampler, ev.is_post ? SAMPLER_DIST_POST : SAMPLER_DIST_RAW, &probs);
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
        in->s->done = FINISH_LENGTH;
    else if (in->gstate && grammar_state_is_done(in->gstate))
        in->s->done = FINISH_STOP; // the grammar allows nothing more
    else if (r->params.max_tokens >= 0 && in->n_generated >= r->params.max_tokens)
        in->s->done = FINISH_LENGTH;
    else if (engine_seq_pos(in->seq) + 1 >= m->n_ctx && !r->params.is_context_shift)
        in->s->done = FINISH_LENGTH;
    else if (engine_seq_pos(in->seq) + 1 >= m->n_ctx)
        shift_context(in);
}

/* Adds instance i's next prompt run to the batch: text up to the next image, or an image (its
 * embeddings, encoded now unless cached) when the step has fewer than CPU_VISION_PER_STEP
 * images — whole when it fits the room left and its positions attend both ways (Gemma 3),
 * else as much as fits, the rest in the next steps (causal M-RoPE images: a part sees the
 * parts before it in the cache, as one item would); else the instance waits. */
static int add_prompt_run(struct platform_model *m, int i, int *room, int *n_items)
{
    struct instance *in = &m->inst[i];
    const struct request *r = in->s->req;
    const struct request_image *im = image_over(r, in->n_fed);
    int n = run_length(r, in->n_fed);
    const float *embd = NULL;
    int grid_w = 0, grid_h = 0, grid_first = 0; // an image's merged-token grid (M-RoPE)
    if (im) {
        const bool is_whole = cpu_vision_is_noncausal(m->vision);
        if ((is_whole ? n > *room : *room < 1) || m->n_images_step >= CPU_VISION_PER_STEP)
            return ERR_BUSY;
        struct errmsg err;
        errmsg_clear(&err);
        int rc = cpu_vision_embed(m->vision, m->tp, im, &embd, &err), n_tok;
        if (rc == ERR_OK)
            rc = cpu_vision_image_grid(m->vision, im->w, im->h, &n_tok, &grid_w, &grid_h, &err);
        if (rc != ERR_OK) {
            inst_slot_fail(in->s, rc == ERR_NOMEM ? 500 : 400, err.msg);
            return rc;
        }
        m->n_images_step++;
        grid_first = in->n_fed - im->pos;
        embd += (size_t)grid_first * (size_t)engine_model_info(m->engine)->n_embd;
        if (n > *room) n = *room;
    } else if (n > *room) {
        n = *room;
    }
    in->n_feeding = n;
    m->items[*n_items] = (struct engine_batch_item){
        .seq = in->seq,
        .tokens = r->prompt + in->n_fed,
        .embd = embd,
        .n_tokens = n,
        .is_noncausal = embd && cpu_vision_is_noncausal(m->vision),
        .grid_w = grid_w,
        .grid_h = grid_h,
        .grid_first = grid_first,
    };
    m->item_instance[(*n_items)++] = i;
    *room -= n;
    return ERR_OK;
}

/* Collects this step's batch: one token for every generating instance first (so decoding
 * never waits behind a long prompt), then prompt chunks in the room left. */
static int build_batch(struct platform_model *m)
{
    int n_items = 0, room = ENGINE_BATCH_MAX;
    m->n_images_step = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < CPU_MAX_INSTANCES && room > 0; i++) {
            struct instance *in = &m->inst[i];
            if (!in->s->req || in->s->done != FINISH_NONE) continue;
            if (pass == 0 && atomic_load(&in->s->req->is_cancelled)) {
                in->s->done = FINISH_CANCELLED;
                continue;
            }
            bool is_gen = in->phase == PHASE_GENERATE;
            if ((pass == 0) != is_gen) continue;
            bool is_refeed = in->phase == PHASE_REFEED;
            if (!is_gen && !is_refeed && in->s->req->n_images > 0) {
                if (add_prompt_run(m, i, &room, &n_items) != ERR_OK) continue;
                continue;
            }
            int at = engine_seq_pos(in->seq);
            int n = is_gen      ? 1
                    : is_refeed ? in->n_refeed_end - at
                                : in->s->req->n_prompt - in->n_fed;
            // A prompt goes in chunks of at most -b tokens, as llama-server's batches.
            int n_batch = in->s->req->params.n_batch;
            if (!is_gen && !is_refeed && n_batch > 0 && n > n_batch) n = n_batch;
            const int tail = in->s->req->n_prompt - CKPT_TAIL; // where a checkpoint is due
            if (!is_gen && !is_refeed && m->has_checkpoints && in->n_fed < tail &&
                in->n_fed + n > tail)
                n = tail - in->n_fed;
            if (n > room) n = room;
            in->n_feeding = n;
            const int32_t *tokens = is_gen      ? &in->next_token
                                    : is_refeed ? in->cached + at
                                                : in->s->req->prompt + in->n_fed;
            m->items[n_items] = (struct engine_batch_item){
                .seq = in->seq,
                .tokens = tokens,
                .n_tokens = n,
                .is_sampled = is_gen,
            };
            m->item_instance[n_items++] = i;
            room -= n;
        }
    }
    return n_items;
}

/* The weights are read through a mapping of the file at every step. A file truncated or
 * rewritten in place under it (a rename over the path or a delete is harmless: the mapping
 * keeps the old inode) would feed the step another file's bytes, or zero pages where a
 * truncation faulted (util/mapguard). Checked before a step, so no work starts on a changed
 * file, and after it, so nothing computed while it changed is delivered. */
bool cpu_model_is_failed(struct platform_model *m, struct errmsg *why)
{
    if (m->embed) return cpu_embed_is_failed(m->embed, why);
    // The projector too: an image encoded from changed bytes is as wrong as a changed weight.
    if (gguf_is_changed(engine_model_gguf(m->engine)))
        cpu_file_changed_msg(m->file, why);
    else if (!cpu_vision_is_changed(m->vision, why))
        return false;
    if (!atomic_exchange(&m->is_change_logged, true)) log_error("%s", why->msg);
    return true;
}

/* The file changed: every request on the model ends with the failure, also one the step
 * just finished (its results were computed from the changed bytes). */
static bool fail_if_changed(struct platform_model *m)
{
    struct errmsg why;
    if (!cpu_model_is_failed(m, &why)) return false;
    for (int i = 0; i < CPU_MAX_INSTANCES; i++) {
        struct inst_slot *s = m->inst[i].s;
        if (!s->req || s->done == FINISH_ERROR || s->done == FINISH_CANCELLED) continue;
        s->done = FINISH_NONE;
        inst_slot_fail(s, 500, why.msg);
    }
    return true;
}

static void run_step(struct platform_model *m)
{
    if (fail_if_changed(m)) return;
    int n_items = build_batch(m);
    if (n_items == 0) return;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = engine_decode(m->engine, m->tp, m->items, n_items, &err);
    if (fail_if_changed(m)) return;
    if (rc != ERR_OK) {
        log_error("decode failed: %s", err.msg);
        for (int k = 0; k < n_items; k++)
            inst_slot_fail(m->inst[m->item_instance[k]].s, 500, err.msg);
        return;
    }
    for (int k = 0; k < n_items; k++) {
        struct instance *in = &m->inst[m->item_instance[k]];
        int pos = engine_seq_pos(in->seq) - in->n_feeding;
        if (in->phase == PHASE_REFEED) { // its tokens are cached[pos..] already
            bool is_fed = pos + in->n_feeding >= in->n_refeed_end;
            if (is_fed && in->s->req->kind == REQUEST_SLOT_RESTORE)
                in->s->done = FINISH_STOP;
            else if (is_fed)
                in->phase = PHASE_GENERATE; // feeds the token sampled before the shift
            continue;
        }
        memcpy(in->cached + pos, m->items[k].tokens, (size_t)in->n_feeding * sizeof(int32_t));
        if (in->phase == PHASE_PROMPT) {
            in->n_fed += in->n_feeding;
            engine_seq_checkpoint(in->seq); // a chunk boundary (or the prompt's end)
            push_progress(in);
            if (in->n_fed < in->s->req->n_prompt) continue;
            in->t_prompt_done_ms = clock_now_ms();
        }
        advance(m, m->item_instance[k]);
    }
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

int cpu_model_cached_prefix(struct platform_model *m, int instance, const int32_t *tokens, int n)
{
    // Safe without mu: the instance is idle (the scheduler does not touch it) and exists
    // (the pool removes an instance only after taking it out of routing).
    if (m->embed || instance < 0 || instance >= CPU_MAX_INSTANCES) return 0;
    const struct instance *in = &m->inst[instance];
    if (!in->s->exists) return 0;
    return reusable_prefix(m, in, tokens, n);
}

void cpu_model_submit(struct platform_model *m, int instance, struct request *r)
{
    if (m->embed) {
        cpu_embed_submit(m->embed, instance, r);
        return;
    }
    instances_submit(&m->set, instance, r);
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
    cpu_vision_free(m->vision);
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
    int rc = engine_model_load(file, &m->engine, err);
    if (rc != ERR_OK) goto out_free;
    const struct engine_model_info *info = engine_model_info(m->engine);
    m->n_vocab = info->n_vocab;
    m->has_checkpoints = info->n_checkpoints > 0;
    m->n_ctx = pick_n_ctx(info, a->n_ctx);
    rc = load_text(m, a->chat_template, err);
    if (rc == ERR_OK) rc = load_grammar_vocab(m);
    if (rc == ERR_OK)
        rc = cpu_vision_load(a->mmproj_path, a->path, info->n_embd, ENGINE_BATCH_MAX, &m->vision,
                             err);
    // Qwen2.5-VL images take M-RoPE grid positions, which only the qwen2vl decoder has.
    if (rc == ERR_OK && cpu_vision_needs_mrope(m->vision) && strcmp(info->arch, "qwen2vl") != 0)
        rc = errmsg_set(err, ERR_INVALID,
                        "the qwen2.5vl_merger projector needs a qwen2vl (M-RoPE) text model, "
                        "not %s",
                        info->arch);
    if (rc != ERR_OK) goto out_free;
    int n_threads = a->n_threads > 0 ? a->n_threads : thread_default_count();
    m->logits = mem_calloc((size_t)m->n_vocab, sizeof *m->logits);
    rc = m->logits ? threadpool_new(n_threads, &m->tp) : ERR_NOMEM;
    if (rc != ERR_OK) goto out_free;
    for (int i = 0; i < CPU_MAX_INSTANCES; i++)
        m->inst[i].s = &m->set.slot[i];
    rc = instances_start_sched(&m->set, &sched_ops, m, a->on_done, a->owner);
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
    cpu_vision_describe(m->vision, out);
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
    instances_lock(&m->set);
    m->inst[instance].seq = seq;
    m->inst[instance].cached = cached;
    m->inst[instance].n_cached_as_prompt = 0;
    m->inst[instance].s->exists = true;
    instances_unlock(&m->set);
    return ERR_OK;
}

void cpu_model_remove_instance(struct platform_model *m, int instance)
{
    if (m->embed) {
        cpu_embed_remove_instance(m->embed, instance);
        return;
    }
    instances_lock(&m->set);
    struct instance *in = &m->inst[instance];
    struct engine_seq *seq = in->seq;
    int32_t *cached = in->cached;
    in->seq = NULL;
    in->cached = NULL;
    in->s->exists = false;
    instances_unlock(&m->set);
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
    instances_stop(&m->set);
    for (int i = 0; i < CPU_MAX_INSTANCES; i++)
        if (m->inst[i].s->exists) cpu_model_remove_instance(m, i);
    instances_deinit(&m->set);
    free_parts(m);
}
