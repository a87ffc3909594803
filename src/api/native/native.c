/* llama.cpp server's native generation endpoints: POST /completion (alias /completions) and
 * POST /infill, with its request fields and response shapes (tools/server/README.md), on the
 * generation sessions every endpoint shares. */
#include "api/handlers.h"

#include "api/errors.h"
#include "api/generation/logprobs.h"
#include "api/metrics.h"
#include "api/native/native_internal.h"
#include "api/native/native_router.h"
#include "api/openai_chat.h"
#include "api/generation/sse.h"
#include "api/generation/structured.h"
#include "core/manager.h"
#include "text/json_text.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct model *native_model_acquire_fit(const struct api_ctx *ctx, const struct api_request *req,
                                       const json_t *body, const struct native_fit *fit,
                                       struct api_fail *f)
{
    const char *name = NULL;
    if (body && !v_string(body, "model", "model", 1024, &name, f)) return NULL;
    if (!name && req->query) name = req->query(req->conn, "model");
    struct model *m = NULL;
    if (name) {
        m = api_acquire_model(ctx, name);
        if (!m && !(m = native_router_autoload(ctx, name, f))) return NULL;
    } else if (!(m = api_acquire_unnamed(ctx, fit->prefer, fit->any_ready, f))) {
        return NULL;
    }
    bool is_ready = api_model_wait_ready(m, f); // else f is filled
    if (is_ready && (!fit->fits(model_desc(m)) || !model_desc(m)->tokenizer))
        api_failf(f, 400, "wrong_model_type", "model", "The model '%s' %s", model_id(m),
                  fit->refusal);
    else if (is_ready)
        return m;
    model_release(m);
    return NULL;
}

static bool is_chat(const struct platform_model_desc *d)
{
    return d->kind == MODEL_KIND_CHAT;
}

static bool is_embedding(const struct platform_model_desc *d)
{
    return d->kind == MODEL_KIND_EMBEDDING;
}

static bool is_any(const struct platform_model_desc *d)
{
    (void)d;
    return true;
}

struct model *native_model_acquire(const struct api_ctx *ctx, const struct api_request *req,
                                   const json_t *body, enum model_kind kind, struct api_fail *f)
{
    static const struct native_fit chat = {is_chat, is_chat, false, "cannot serve this endpoint"};
    static const struct native_fit embedding = {is_embedding, is_embedding, false,
                                                "cannot serve this endpoint"};
    return native_model_acquire_fit(ctx, req, body, kind == MODEL_KIND_CHAT ? &chat : &embedding,
                                    f);
}

struct model *native_model_acquire_tokenizer(const struct api_ctx *ctx,
                                             const struct api_request *req, const json_t *body,
                                             struct api_fail *f)
{
    static const struct native_fit any = {is_any, is_chat, true, "cannot serve this endpoint"};
    return native_model_acquire_fit(ctx, req, body, &any, f);
}

static int encode_cb(const void *ctx, struct str text, bool add_special, bool parse_special,
                     struct tok_ids *out)
{
    return tok_encode(ctx, text, add_special, parse_special, out);
}

void native_tokenizer_of(const struct model *m, struct native_tokenizer *out)
{
    const struct platform_model_desc *d = model_desc(m);
    out->encode = encode_cb;
    out->ctx = d->tokenizer;
    out->n_vocab = d->n_vocab;
    out->n_ctx = d->n_ctx;
    // SIZE_MAX (no bound for this tokenizer) is 0 here: no bound either
    const size_t max = tok_text_bytes_max(d->tokenizer, d->n_ctx > 0 ? (size_t)d->n_ctx : 0);
    out->text_bytes_max = max == SIZE_MAX ? 0 : max;
}

/* llama.cpp spellings that params_merge would refuse, rewritten in a shallow copy. */
static json_t *normalize_body(json_t *body, const struct params_names *names)
{
    json_t *b = json_copy(body);
    if (!b) return NULL;
    json_object_del(b, "logit_bias");
    const char *mt = names->max_tokens;
    if (!json_object_get(b, mt) && json_is_integer(json_object_get(b, "max_tokens")))
        json_object_set(b, mt, json_object_get(b, "max_tokens"));
    const json_t *n = json_object_get(b, mt);
    if (json_is_integer(n) && json_integer_value(n) < 0) json_object_del(b, mt);
    if (json_is_integer(n) && json_integer_value(n) == 0)
        json_object_set_new(b, mt, json_integer(1)); // answered without generating
    const json_t *t = json_object_get(b, "temperature");
    if (json_is_number(t) && json_number_value(t) < 0)
        json_object_set_new(b, "temperature", json_real(0)); // llama.cpp: greedy
    if (json_is_null(json_object_get(b, names->stop))) json_object_del(b, names->stop);
    return b;
}

static bool parse_extras(const json_t *body, int n_ctx, struct native_params *np,
                         struct api_fail *f)
{
    int64_t n_probs = 0, id_slot = -1, n_keep = 0;
    bool is_post = false;
    bool ok = params_llama_extras(body, n_ctx, &np->p.gen, f) &&
              v_int(body, "n_probs", "n_probs", 0, GEN_MAX_PROBS, &n_probs, f) &&
              v_int(body, "id_slot", "id_slot", -1, POOL_MAX_INSTANCES - 1, &id_slot, f) &&
              v_int(body, "n_keep", "n_keep", -1, INT32_MAX, &n_keep, f) &&
              v_bool(body, "post_sampling_probs", "post_sampling_probs", &is_post, f) &&
              v_bool(body, "stream", "stream", &np->is_stream, f) &&
              v_bool(body, "cache_prompt", "cache_prompt", &np->cache_prompt, f) &&
              v_bool(body, "return_tokens", "return_tokens", &np->return_tokens, f) &&
              structured_from_body(body, &np->grammar, f);
    if (!ok) return false;
    np->p.gen.grammar = np->grammar.len ? np->grammar.data : NULL; // request_new copies it
    np->p.gen.n_probs = (int)n_probs;
    np->p.gen.is_post_sampling_probs = is_post;
    np->id_slot = (int)id_slot;
    np->n_keep = (int)n_keep;
    np->p.gen.n_keep = (int)n_keep; // what a context shift keeps
    return true;
}

/* What the model's platform cannot do (its platform_unsupported bits), refused by name as the
 * chat endpoints do rather than ignored. */
static bool check_platform(const struct model *m, const json_t *body,
                           const struct native_params *np, struct api_fail *f)
{
    const unsigned no = model_desc(m)->unsupported;
    const char *param = NULL;
    const json_t *v;
    if ((no & PLATFORM_UNSUPPORTED_GRAMMAR) && np->grammar.len > 0)
        param = json_object_get(body, "json_schema") ? "json_schema" : "grammar";
    else if ((no & PLATFORM_UNSUPPORTED_LOGPROBS) && np->p.gen.n_probs > 0)
        param = "n_probs";
    else if ((no & PLATFORM_UNSUPPORTED_LOGIT_BIAS) && np->p.gen.n_logit_bias > 0)
        param = "logit_bias";
    else if ((no & PLATFORM_UNSUPPORTED_MIN_P) && (v = json_object_get(body, "min_p")) &&
             !json_is_null(v))
        param = "min_p";
    else if ((no & PLATFORM_UNSUPPORTED_SEED) && (v = json_object_get(body, "seed")) &&
             !json_is_null(v))
        param = "seed";
    if (!param) return true;
    return api_failf(f, 400, "unsupported_parameter", param,
                     "The %s platform does not support '%s'.", model_platform(m)->id, param);
}

bool native_params_parse(const struct api_ctx *ctx, const struct model *m, json_t *body,
                         const struct params_names *names, struct native_params *out,
                         struct api_fail *f)
{
    memset(out, 0, sizeof *out);
    buf_init(&out->grammar);
    out->cache_prompt = true;
    const json_t *n = json_object_get(body, names->max_tokens);
    if (!n) n = json_object_get(body, "max_tokens");
    out->is_predict_none = json_is_integer(n) && json_integer_value(n) == 0;
    json_t *b = normalize_body(body, names);
    if (!b) return api_failf(f, 500, NULL, NULL, "out of memory");
    const struct platform_model_desc *d = model_desc(m);
    // Stop strings stay borrowed from body (the copy shares its values), so the parameters
    // hold a reference on it until native_params_deinit.
    out->body = json_incref(body);
    bool ok = params_merge_base(ctx->gen_defaults, model_default_params(m), b, names, d->n_vocab,
                                &out->p, f);
    json_decref(b);
    struct native_tokenizer t;
    native_tokenizer_of(m, &t);
    return ok && parse_extras(body, d->n_ctx, out, f) &&
           native_logit_bias_parse(json_object_get(body, "logit_bias"), &t, &out->p.gen, f) &&
           check_platform(m, body, out, f);
}

void native_params_deinit(struct native_params *np)
{
    buf_deinit(&np->grammar);
    np->p.gen.grammar = NULL;
    json_decref(np->body);
    np->body = NULL;
    np->p.n_stops = 0;
}

struct native_call *native_call_new(struct model *m)
{
    struct native_call *c = mem_calloc(1, sizeof *c);
    if (c) {
        c->model = m;
        c->tokens = json_array();
        buf_init(&c->content);
        tok_ids_init(&c->prompt);
    }
    if (!c || !c->tokens) {
        native_call_free(c);
        if (!c) model_release(m);
        return NULL;
    }
    return c;
}

void native_call_free(void *call)
{
    struct native_call *c = call;
    if (!c) return;
    gen_session_end(c->session);
    model_release(c->model);
    json_decref(c->tokens);
    json_decref(c->probs);
    json_decref(c->step_tokens);
    json_decref(c->step_probs);
    native_params_deinit(&c->np);
    buf_deinit(&c->content);
    tok_ids_deinit(&c->prompt);
    mem_free(c);
}

int native_call_start(const struct api_ctx *ctx, struct native_call *c, struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(c->model);
    if (c->prompt.n_ids == 0)
        return api_failf(f, 400, "invalid_value", "prompt", "the prompt is empty"), ERR_INVALID;
    if ((int64_t)c->prompt.n_ids + 1 > d->n_ctx)
        return api_fail_context(f, "prompt", c->prompt.n_ids, d->n_ctx), ERR_LIMIT;
    if (c->np.p.gen.n_probs > 0 && !(c->probs = json_array()))
        return api_failf(f, 500, NULL, NULL, "out of memory"), ERR_NOMEM;
    if (c->np.is_predict_none) {
        c->is_done = true;
        c->finish_reason = "length";
        return ERR_OK;
    }
    struct gen_options opt = {
        .stops = c->np.p.stops,
        .n_stops = c->np.p.n_stops,
        .reasoning = REASONING_FORMAT_NONE,
        .metrics = ctx->metrics,
        .has_slot = c->np.id_slot >= 0,
        .slot = c->np.id_slot,
    };
    return gen_session_start(c->model, c->prompt.ids, (int)c->prompt.n_ids, &c->np.p.gen, &opt,
                             &c->session, f);
}

/* The instance that ran the request (only asked once it produced output: see
 * gen_session_instance), or the id_slot asked for when nothing ran. */
static int native_slot(const struct native_call *c)
{
    return c->session ? gen_session_instance(c->session) : c->np.id_slot;
}

/* Text as a JSON string, invalid UTF-8 (a token holding part of a character) as U+FFFD. */
static void record_step(struct native_call *c)
{
    int n = 0;
    const struct gen_event *ev = c->session ? gen_session_events(c->session, &n) : NULL;
    json_decref(c->step_tokens);
    json_decref(c->step_probs);
    c->step_tokens = json_array();
    c->step_probs =
        c->probs ? api_logprobs_json(model_desc(c->model)->tokenizer, ev, n, -1, true) : NULL;
    for (int i = 0; c->step_tokens && i < n; i++)
        json_array_append_new(c->step_tokens, json_integer(ev[i].token));
    if (c->np.is_stream) return;
    json_array_extend(c->tokens, c->step_tokens);
    if (c->probs && c->step_probs) json_array_extend(c->probs, c->step_probs);
}

bool native_call_step(struct native_call *c, int timeout_ms, struct gen_delta *d)
{
    if (!c->session) { // n_predict 0: nothing to generate
        memset(d, 0, sizeof *d);
        d->content = d->reasoning = (struct str){"", 0};
        d->is_done = true;
        d->finish_reason = c->finish_reason;
        record_step(c);
        return true;
    }
    if (!gen_session_next(c->session, timeout_ms, d)) return false;
    record_step(c);
    if (d->content.len && memchr(d->content.ptr, '\n', d->content.len)) c->has_new_line = true;
    if (!c->np.is_stream) buf_append(&c->content, d->content.ptr, d->content.len);
    if (d->is_done) {
        c->is_done = true;
        c->finish_reason = d->finish_reason;
        if (d->is_stop_string && d->stop_index >= 0 && d->stop_index < c->np.p.n_stops)
            c->stopping_word = c->np.p.stops[d->stop_index];
    }
    return true;
}

const char *native_stop_type(const struct native_call *c)
{
    if (!c->is_done) return "none";
    if (c->stopping_word) return "word";
    return c->finish_reason && strcmp(c->finish_reason, "length") == 0 ? "limit" : "eos";
}

static json_t *stop_list_json(const struct native_params *np)
{
    json_t *a = json_array();
    for (int i = 0; a && i < np->p.n_stops; i++)
        json_array_append_new(a, json_string(np->p.stops[i]));
    return a;
}

json_t *native_settings_json(const struct model *m, const struct native_params *np)
{
    const struct gen_params *g = &np->p.gen;
    json_t *lb = json_array();
    // A ban (-inf) shows as null, as llama-server prints it.
    for (int i = 0; lb && i < g->n_logit_bias; i++)
        json_array_append_new(lb, json_pack("{s:i, s:o}", "token", g->logit_bias[i].token, "bias",
                                            isfinite(g->logit_bias[i].bias)
                                                ? json_real(json_text_float(g->logit_bias[i].bias))
                                                : json_null()));
    // ignore_eos bans the end-of-generation tokens (the platform applies it); listed as there.
    const struct platform_model_desc *d = model_desc(m);
    for (int32_t t = 0; lb && g->ignore_eos && !g->grammar && t < d->n_vocab; t++)
        if (tok_is_eog(d->tokenizer, t))
            json_array_append_new(lb, json_pack("{s:i, s:n}", "token", t, "bias"));
    // adaptive_target/adaptive_decay: llama-server's adaptive-p sampler, off here as by default.
    return json_pack("{s:i, s:I, s:f, s:i, s:f, s:f, s:i, s:f, s:f, s:f, s:o, s:i, s:i, s:b, "
                     "s:b, s:i, s:o, s:s, s:s, s:b, s:f, s:f}",
                     "n_predict", g->max_tokens, "seed", (json_int_t)g->seed, "temperature",
                     json_text_float(g->temperature), "top_k", g->top_k, "top_p",
                     json_text_float(g->top_p), "min_p", json_text_float(g->min_p), "repeat_last_n",
                     g->repeat_last_n, "repeat_penalty", json_text_float(g->repeat_penalty),
                     "presence_penalty", json_text_float(g->presence_penalty), "frequency_penalty",
                     json_text_float(g->frequency_penalty), "stop", stop_list_json(np),
                     "max_tokens", g->max_tokens, "n_keep", np->n_keep, "ignore_eos", g->ignore_eos,
                     "stream", np->is_stream, "n_probs", g->n_probs, "logit_bias", lb, "grammar",
                     np->grammar.len ? np->grammar.data : "", "model", model_id(m), "cache_prompt",
                     np->cache_prompt, "adaptive_target", -1.0, "adaptive_decay", 0.9);
}

/* The final /completion object (also the last SSE event, with stop true). */
static json_t *result_json(struct native_call *c, bool is_final_stream)
{
    const struct platform_model_desc *d = model_desc(c->model);
    struct request_timings t = {0};
    if (c->session) gen_session_timings(c->session, &t);
    int n_predicted = (int)json_array_size(c->tokens);
    if (c->session) n_predicted = gen_session_n_completion(c->session);
    struct buf prompt_text;
    buf_init(&prompt_text);
    tok_decode(d->tokenizer, c->prompt.ids, c->prompt.n_ids, true, &prompt_text);
    bool with_tokens = c->np.return_tokens && !is_final_stream;
    json_t *j = json_pack(
        "{s:i, s:s%, s:o, s:i, s:b, s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:o, s:b, s:b, s:o}",
        "index", 0, "content", is_final_stream ? "" : (c->content.data ? c->content.data : ""),
        is_final_stream ? (size_t)0 : c->content.len, "tokens",
        with_tokens ? json_incref(c->tokens) : json_array(), "id_slot", native_slot(c), "stop",
        true, "model", model_id(c->model), "stop_type", native_stop_type(c), "stopping_word",
        c->stopping_word ? c->stopping_word : "", "tokens_predicted", n_predicted,
        "tokens_evaluated", (int)c->prompt.n_ids, "tokens_cached", t.n_cached,
        "generation_settings", native_settings_json(c->model, &c->np), "prompt",
        api_text_json(prompt_text.data ? prompt_text.data : "", prompt_text.len), "truncated",
        (int64_t)c->prompt.n_ids + n_predicted >= d->n_ctx, "has_new_line", c->has_new_line,
        "timings",
        c->session ? api_timings_json(c->session)
                   : json_pack("{s:i, s:i, s:f, s:i, s:f}", "cache_n", 0, "prompt_n", 0,
                               "prompt_ms", 0.0, "predicted_n", 0, "predicted_ms", 0.0));
    buf_deinit(&prompt_text);
    if (j && c->probs && !is_final_stream) json_object_set(j, "completion_probabilities", c->probs);
    return j;
}

static json_t *error_json(const struct gen_delta *d)
{
    return api_outcome_error_json(d->error_status, d->error_message);
}

/* The value at a '/'-separated path of j ("generation_settings/n_predict"), or NULL. */
static json_t *field_at(json_t *j, const char *path)
{
    char key[128];
    while (j && *path) {
        size_t n = strcspn(path, "/");
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        j = json_object_get(j, key);
        path += n + (path[n] == '/');
    }
    return j;
}

/* llama-server's response_fields: only the listed paths, each under its path as the key.
 * Takes j; an absent list (or an empty one) keeps j whole. */
static json_t *select_fields(json_t *j, const json_t *fields)
{
    if (!j || !json_is_array(fields) || json_array_size(fields) == 0) return j;
    json_t *out = json_object();
    size_t i;
    const json_t *f;
    json_array_foreach(fields, i, f)
    {
        json_t *v = json_is_string(f) ? field_at(j, json_string_value(f)) : NULL;
        if (out && v) json_object_set(out, json_string_value(f), v);
    }
    json_decref(j);
    return out;
}

/* Runs c to its end: the final /completion object, or NULL with resp holding the error. */
static json_t *run_whole(struct native_call *c, struct api_response *resp)
{
    struct gen_delta d;
    do {
        native_call_step(c, -1, &d);
    } while (!d.is_done);
    if (!d.finish_reason) {
        api_outcome_error(resp, d.error_status, d.error_message);
        return NULL;
    }
    json_t *j = result_json(c, false);
    if (!j) api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
    return select_fields(j, json_object_get(c->np.body, "response_fields"));
}

static void respond_whole(struct native_call *c, struct api_response *resp)
{
    json_t *j = run_whole(c, resp);
    if (j) api_respond_json(resp, 200, j);
}

/* One event per generated token, as llama-server sends them (its token and probabilities);
 * the step's text rides on the last one (text held back for a stop string has no token). */
static int stream_step(struct native_call *c, const struct gen_delta *d, struct buf *out)
{
    size_t n = json_array_size(c->step_tokens);
    int n_done = c->session ? gen_session_n_completion(c->session) - (int)n : 0;
    for (int i = 0; i < d->n_progress; i++) { // return_progress: an empty event per point
        json_t *j = json_pack("{s:i, s:s, s:[], s:b, s:i, s:i, s:i, s:o}", "index", 0, "content",
                              "", "tokens", "stop", false, "id_slot", native_slot(c),
                              "tokens_predicted", n_done, "tokens_evaluated", (int)c->prompt.n_ids,
                              "prompt_progress", api_progress_json(&d->progress[i]));
        if (sse_append_json(out, NULL, j) != ERR_OK) return ERR_NOMEM;
    }
    for (size_t i = 0; i < n || (i == 0 && d->content.len); i++) {
        bool is_last = i + 1 >= n;
        json_t *tok = json_array_get(c->step_tokens, i);
        json_t *j = json_pack("{s:i, s:s%, s:o, s:b, s:i, s:i, s:i}", "index", 0, "content",
                              is_last ? d->content.ptr : "", is_last ? d->content.len : 0, "tokens",
                              tok ? json_pack("[O]", tok) : json_array(), "stop", false, "id_slot",
                              native_slot(c), "tokens_predicted", n_done + (int)(i < n ? i + 1 : 0),
                              "tokens_evaluated", (int)c->prompt.n_ids);
        json_t *p = json_array_get(c->step_probs, i);
        if (j && p) json_object_set_new(j, "completion_probabilities", json_pack("[O]", p));
        if (sse_append_json(out, NULL, j) != ERR_OK) return ERR_NOMEM;
    }
    return ERR_OK;
}

/* llama.cpp streams `data: {content, tokens, stop:false, …}` per step and the whole result
 * with stop:true last; there is no [DONE]. An error is `data: {"error":…}`. */
static enum sse_status completion_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct native_call *c = ctx;
    struct gen_delta d;
    if (!native_call_step(c, timeout_ms, &d)) return SSE_MORE;
    if (stream_step(c, &d, out) != ERR_OK) return SSE_END;
    if (!d.is_done) return SSE_MORE;
    if (!d.finish_reason)
        sse_append_json(out, NULL, json_pack("{s:o}", "error", error_json(&d)));
    else
        sse_append_json(out, NULL, result_json(c, true));
    return SSE_END;
}

/* Validates, starts and answers a call whose prompt is already in c->prompt. Takes c. */
static void run_call(const struct api_ctx *ctx, struct native_call *c, struct api_response *resp)
{
    struct api_fail f = {0};
    if (native_call_start(ctx, c, &f) != ERR_OK) {
        api_fail_respond(&f, resp);
        native_call_free(c);
        return;
    }
    if (!c->np.is_stream) {
        respond_whole(c, resp);
        native_call_free(c);
        return;
    }
    sse_respond(resp, completion_produce, native_call_free, c, NULL);
}

static const struct params_names native_names = {"n_predict", NULL, "stop"};

/* Resolves the model and parses the parameters into a new call. NULL after responding. */
static struct native_call *begin_call(const struct api_ctx *ctx, const struct api_request *req,
                                      struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = native_model_acquire(ctx, req, req->json, MODEL_KIND_CHAT, &f);
    struct native_call *c = m ? native_call_new(m) : NULL;
    if (m && !c) api_failf(&f, 500, NULL, NULL, "out of memory");
    if (c && native_params_parse(ctx, c->model, req->json, &native_names, &c->np, &f)) return c;
    native_call_free(c);
    api_fail_respond(&f, resp);
    return NULL;
}

/* A list of prompts answered whole, as llama-server does: an array of results in prompt
 * order, each prompt run as its own call (the first failure answers for all). */
static void complete_each(const struct api_ctx *ctx, const struct api_request *req,
                          const json_t *prompts, struct api_response *resp)
{
    json_t *results = json_array();
    for (size_t i = 0; results && i < json_array_size(prompts); i++) {
        struct native_call *c = begin_call(ctx, req, resp);
        if (!c) break;
        struct api_fail f = {0};
        struct native_tokenizer t;
        native_tokenizer_of(c->model, &t);
        char name[32];
        snprintf(name, sizeof name, "prompt[%zu]", i);
        json_t *r = NULL;
        if (native_prompt_parse(json_array_get(prompts, i), name, &t, true, true, &c->prompt, &f) !=
                ERR_OK ||
            native_call_start(ctx, c, &f) != ERR_OK)
            api_fail_respond(&f, resp);
        else
            r = run_whole(c, resp);
        native_call_free(c);
        if (!r) break;
        json_object_set_new(r, "index", json_integer((json_int_t)i));
        json_array_append_new(results, r);
    }
    if (results && json_array_size(results) == json_array_size(prompts))
        api_respond_json(resp, 200, results);
    else if (!results)
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
    else
        json_decref(results); // resp holds the failure
}

void api_native_completion(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp)
{
    const json_t *prompt = json_object_get(req->json, "prompt");
    bool is_stream = json_is_true(json_object_get(req->json, "stream"));
    if (native_prompt_count(prompt) > 1 && !is_stream) {
        complete_each(ctx, req, prompt, resp);
        return;
    }
    struct native_call *c = begin_call(ctx, req, resp);
    if (!c) return;
    struct api_fail f = {0};
    struct native_tokenizer t;
    native_tokenizer_of(c->model, &t);
    // Like llama-server: BOS per the vocab for text prompts, special tokens parsed.
    if (native_prompt_parse(json_object_get(req->json, "prompt"), "prompt", &t, true, true,
                            &c->prompt, &f) != ERR_OK) {
        api_fail_respond(&f, resp);
        native_call_free(c);
        return;
    }
    run_call(ctx, c, resp);
}

/* Appends the tokens of a text (no BOS, specials as text). */
static bool append_text(const struct native_tokenizer *t, const char *s, struct tok_ids *out,
                        struct api_fail *f)
{
    struct str text = {s, strlen(s)};
    if (t->encode(t->ctx, text, false, false, out) != ERR_OK)
        return api_failf(f, 500, NULL, NULL, "tokenization failed");
    return true;
}

static bool push(struct tok_ids *out, tok_id id, struct api_fail *f)
{
    return tok_ids_push(out, id) == ERR_OK || api_failf(f, 500, NULL, NULL, "out of memory");
}

/* input_extra: [{filename, text}, …] as llama.cpp lays it out before the FIM prefix. */
static bool append_extra(const struct tok_specials *sp, const struct native_tokenizer *t,
                         const json_t *extra, struct tok_ids *out, struct api_fail *f)
{
    if (extra && !json_is_null(extra) && !json_is_array(extra))
        return api_failf(f, 400, "invalid_type", "input_extra",
                         "Invalid type for 'input_extra': expected an array, but got %s.",
                         v_type_name(extra));
    bool ok = true;
    if (sp->fim_rep != TOK_ID_NONE)
        ok = push(out, sp->fim_rep, f) && append_text(t, "myproject\n", out, f);
    size_t i;
    const json_t *chunk;
    json_array_foreach(extra, i, chunk)
    {
        const char *text = "", *filename = "tmp";
        char param[48];
        snprintf(param, sizeof param, "input_extra[%zu]", i);
        if (!ok || !json_is_object(chunk))
            return ok && api_failf(f, 400, "invalid_type", param,
                                   "'%s' must be {\"filename\": …, \"text\": …}", param);
        ok = v_string(chunk, "text", param, 1 << 26, &text, f) &&
             v_string(chunk, "filename", param, 4096, &filename, f);
        if (ok && sp->fim_sep != TOK_ID_NONE) {
            char name[4200];
            snprintf(name, sizeof name, "%s\n", filename);
            ok = push(out, sp->fim_sep, f) && append_text(t, name, out, f);
        } else if (ok) {
            ok = append_text(t, "\n\n--- snippet ---\n\n", out, f);
        }
        ok = ok && append_text(t, text, out, f);
    }
    if (ok && sp->fim_sep != TOK_ID_NONE)
        ok = push(out, sp->fim_sep, f) && append_text(t, "filename\n", out, f);
    return ok;
}

static bool optional_text(const json_t *body, const char *key, const char **out, struct api_fail *f)
{
    *out = "";
    return v_string(body, key, key, 1 << 26, out, f);
}

/* [extra][BOS][FIM_PRE]prefix prompt[FIM_SUF]suffix[FIM_MID] (llama.cpp's
 * format_prompt_infill, without its batch-size trimming: a prompt beyond the context is a
 * 400 here). */
static bool build_infill(const struct model *m, const json_t *body, struct tok_ids *out,
                         struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(m);
    const struct tok_specials *sp = tok_specials(d->tokenizer);
    if (sp->fim_pre == TOK_ID_NONE || sp->fim_suf == TOK_ID_NONE || sp->fim_mid == TOK_ID_NONE)
        return api_failf(f, 501, "not_supported", NULL,
                         "The model '%s' has no fill-in-the-middle tokens (FIM_PRE, FIM_SUF, "
                         "FIM_MID); /infill needs a code model that has them",
                         model_id(m));
    struct native_tokenizer t;
    native_tokenizer_of(m, &t);
    const char *prefix, *suffix;
    if (!optional_text(body, "input_prefix", &prefix, f) ||
        !optional_text(body, "input_suffix", &suffix, f) ||
        !append_extra(sp, &t, json_object_get(body, "input_extra"), out, f))
        return false;
    struct tok_ids bos;
    tok_ids_init(&bos);
    bool ok = t.encode(t.ctx, (struct str){"", 0}, true, false, &bos) == ERR_OK;
    if (ok && bos.n_ids > 0 && bos.ids[0] == sp->bos && sp->bos != TOK_ID_NONE)
        ok = push(out, sp->bos, f);
    tok_ids_deinit(&bos);
    ok = ok && push(out, sp->fim_pre, f) && append_text(&t, prefix, out, f);
    const json_t *prompt = json_object_get(body, "prompt");
    if (ok && prompt && !(json_is_string(prompt) && json_string_length(prompt) == 0))
        ok = native_prompt_parse(prompt, "prompt", &t, false, false, out, f) == ERR_OK;
    return ok && push(out, sp->fim_suf, f) && append_text(&t, suffix, out, f) &&
           push(out, sp->fim_mid, f);
}

void api_native_infill(const struct api_ctx *ctx, const struct api_request *req,
                       struct api_response *resp)
{
    struct native_call *c = begin_call(ctx, req, resp);
    if (!c) return;
    struct api_fail f = {0};
    if (!build_infill(c->model, req->json, &c->prompt, &f)) {
        if (f.status == 501) f.type = API_TYPE_NOT_IMPLEMENTED;
        api_fail_respond(&f, resp);
        native_call_free(c);
        return;
    }
    run_call(ctx, c, resp);
}
