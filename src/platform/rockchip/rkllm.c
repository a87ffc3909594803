/* The `rkllm` platform: chat models (.rkllm) on the Rockchip NPU through the RKLLM runtime,
 * opened with dlopen at start-up. Each instance is a runtime handle (in NPU memory domains
 * of its own where the SoC has them: rkllm_domain.c)
 * with one worker thread (platform/instances.c) running one request at a time through the
 * blocking rkllm_run; the runtime's callback (on its own thread) feeds the request's text
 * events, joining characters split across callbacks (rkllm_text.c), and never waits for the
 * client. Which ABI the runtime speaks is probed once at start-up (rkllm_probe.c). The whole conversation is rendered with the model's Jinja template (from
 * tokenizer_config.json) and sent as PROMPT input with the runtime's template cleared;
 * without a template the runtime's own one is kept and only the last message is sent.
 * ABI 1.3 takes sampling and max_new_tokens per run; ABI 1.2 fixes sampling at init, and
 * max_tokens is enforced by aborting the run. */
#include "platform/rockchip/rkllm.h"

#include "platform/detect.h"
#include "platform/instances.h"
#include "platform/rockchip/rkllm_abi.h"
#include "platform/rockchip/rkllm_domain.h"
#include "platform/rockchip/rkllm_probe.h"
#include "platform/rockchip/rkllm_text.h"
#include "platform/vendor.h"
#include "text/chat_template.h"
#include "text/jinja/jinja.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mem.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define RKLLM_DEFAULT_CTX 4096
#define TOKENIZER_CONFIG  "tokenizer_config.json"

/* The runtime functions this platform calls, resolved at start-up. rkllm_init's third argument
 * is the result callback itself in ABI 1.2 and a callbacks struct in 1.3.
 * rkllm_createDefaultParam returns a struct whose size depends on the release: it is called
 * only through rkllm_default_param (rkllm_probe.c), never through this plain pointer. */
struct rkllm_fns {
    void (*rkllm_createDefaultParam)(void);
    union {
        int (*abi12)(void **handle, struct rkllm12_param *param, rkllm_result_fn callback);
        int (*abi13)(void **handle, struct rkllm13_param *param, struct rkllm13_callbacks *cb);
    } rkllm_init;
    int (*rkllm_run)(void *handle, void *input, void *infer, void *userdata);
    int (*rkllm_abort)(void *handle);
    int (*rkllm_destroy)(void *handle);
    int (*rkllm_set_chat_template)(void *handle, const char *system, const char *prefix,
                                   const char *postfix);
};

static const struct vendor_sym syms[] = {
    {"rkllm_createDefaultParam", offsetof(struct rkllm_fns, rkllm_createDefaultParam)},
    {"rkllm_init", offsetof(struct rkllm_fns, rkllm_init)},
    {"rkllm_run", offsetof(struct rkllm_fns, rkllm_run)},
    {"rkllm_abort", offsetof(struct rkllm_fns, rkllm_abort)},
    {"rkllm_destroy", offsetof(struct rkllm_fns, rkllm_destroy)},
    {"rkllm_set_chat_template", offsetof(struct rkllm_fns, rkllm_set_chat_template)},
};

static struct vendor_lib lib;
static struct rkllm_fns fns;

enum abi { ABI_12 = 12, ABI_13 = 13 };

/* The ABI every model of this process is driven with: --rkllm-abi, else what the probe found.
 * Written once by rkllm_start, read-only afterwards. */
static enum abi runtime_abi;
static char runtime_abi_name[8]; // "1.2" / "1.3"

/* An instance: the runtime's handle and the NPU memory domains it holds. */
struct rk_handle {
    void *h;
    int domain; // base_domain_id: the first of the model's span (rkllm_domain.h)
};

/* Immutable after load, except the instance layer (own lock). */
struct platform_model {
    char file[4096];
    enum abi abi;
    const char *abi_name; // "1.2" / "1.3"
    int n_ctx;
    uint64_t file_size;
    struct jinja_template *tmpl; // NULL: the runtime's own template, last message only
    char *tmpl_src, *bos_text, *eos_text;
    struct platform_sampling fixed; // ABI 1.2: the runtime's init-time sampling
    int32_t cpus_num;
    uint32_t cpus_mask;
    bool is_many_domains;               // each handle in domains of its own (else all share 0)
    int domain_span;                    // ids one handle starts in and continues into
    struct rkllm13_callbacks callbacks; // ABI 1.3 (userdata comes with each run)
    struct instances set;
};

/* One run's state, shared by the worker (which owns it) and the runtime's callback thread
 * while rkllm_run runs. */
struct run_ctx {
    struct platform_model *m;
    struct inst_slot *slot;
    struct request *r;
    struct buf held;    // WAITING text: bytes the next NORMAL continues or sends again
    struct buf pending; // text not yet delivered: an incomplete UTF-8 character at most
    int n_tokens;       // result callbacks carrying a token
    int max_tokens;     // -1: none of ours
    bool is_dropping;   // ended for us (cancelled, max_tokens, buffer full): text ignored
    bool is_length, is_error, is_finished, has_perf;
    struct rkllm_perf perf;
};

/* ---- discovery ---- */

static void set_runtime_abi(enum abi abi)
{
    runtime_abi = abi;
    snprintf(runtime_abi_name, sizeof runtime_abi_name, "%s", abi == ABI_12 ? "1.2" : "1.3");
}

/* Which layout the opened runtime takes: --rkllm-abi when given, else the probe's verdict; a
 * runtime the probe refuses is closed (unavailable, with the reason) unless the flag forces
 * an ABI. */
static void choose_abi(void)
{
    struct rkllm_param_room room;
    struct rkllm_probe_facts f = {.bytes = room.u.bytes,
                                  .has_kv_cache_size =
                                      vendor_lib_has(&lib, "rkllm_get_kv_cache_size")};
    rkllm_default_param(fns.rkllm_createDefaultParam, &room, &f.written_end);
    struct rkllm_abi_verdict v;
    rkllm_abi_classify(&f, &v);
    const char *forced = vendor_config_get()->rkllm_abi;
    if (forced[0]) {
        set_runtime_abi(strcmp(forced, "1.2") == 0 ? ABI_12 : ABI_13);
        if (v.abi != (int)runtime_abi)
            log_warn("rkllm: --rkllm-abi %s overrides the probe, which found %s%s%s", forced,
                     v.found, v.abi ? "" : ": ", v.abi ? "" : v.reason);
        return;
    }
    if (!v.abi) {
        log_warn("platform rkllm unavailable: %s", v.reason);
        vendor_lib_refuse(&lib, v.reason);
        return;
    }
    set_runtime_abi((enum abi)v.abi);
    log_info("rkllm: %s is runtime %s (ABI %s)", lib.path, v.found, runtime_abi_name);
}

static void rkllm_start(void)
{
    const char *path = vendor_config_get()->rkllm_lib;
    char node[64], why[VENDOR_REASON_CAP];
    if (vendor_lib_open(&lib, path, syms, sizeof syms / sizeof syms[0], &fns, sizeof fns) !=
        ERR_OK) {
        log_info("platform rkllm unavailable: %s", lib.reason);
    } else if (!vendor_npu_node(node, sizeof node, why, sizeof why)) {
        // rkllm_init would fail on every model: say so now, naming the node.
        log_info("platform rkllm unavailable: %s", why);
        vendor_lib_refuse(&lib, why);
    } else {
        choose_abi();
    }
}

static void rkllm_stop(void)
{
    vendor_lib_close(&lib);
}

static bool rkllm_is_available(void)
{
    return lib.is_available;
}

static void rkllm_status(struct platform_status *out)
{
    vendor_status_fill(&lib, out);
    if (lib.is_available) snprintf(out->abi, sizeof out->abi, "%s", runtime_abi_name);
}

static int rkllm_detect_chips(struct platform_chip *out, int max)
{
    return vendor_soc_chips(out, max);
}

static bool rkllm_claims(const char *path)
{
    return vendor_claims(path, "rkllm");
}

/* ---- the runtime's callback ---- */

/* Delivers the complete characters of c->pending (all of it when flushing). */
static void deliver(struct run_ctx *c, bool flush)
{
    size_t n = c->pending.len;
    size_t keep = flush ? 0 : rkllm_text_incomplete_tail((const unsigned char *)c->pending.data, n);
    if (n - keep == 0) return;
    if (request_push_text(c->r, c->pending.data, n - keep) != ERR_OK) {
        // The answer's room (max_tokens or the context) is full: end here.
        c->is_length = true;
        c->is_dropping = true;
        instances_abort(&c->m->set, c->slot);
    }
    memmove(c->pending.data, c->pending.data + (n - keep), keep);
    c->pending.len = keep;
}

static int on_result(struct rkllm_result *result, void *userdata, int state)
{
    struct run_ctx *c = userdata;
    if (state == RKLLM_STATE_FINISH) {
        if (result) {
            c->perf = result->perf;
            c->has_perf = true;
        }
        // Whole characters still held go out; one the runtime never completed is dropped
        // rather than sent broken.
        if (!c->is_dropping && rkllm_text_take(&c->held, NULL, 0, false, &c->pending) == ERR_OK) {
            c->pending.len -=
                rkllm_text_incomplete_tail((const unsigned char *)c->pending.data, c->pending.len);
            deliver(c, true);
        }
        c->is_finished = true;
        return 0;
    }
    if (state == RKLLM_STATE_ERROR) {
        c->is_error = true;
        return 0;
    }
    if (state != RKLLM_STATE_NORMAL && state != RKLLM_STATE_WAITING) return 0;
    c->n_tokens++;
    if (c->is_dropping) return 0;
    if (atomic_load(&c->r->is_cancelled)) {
        // The watch thread aborts cancelled runs; asking once more from here covers an abort
        // that reached the runtime before its run had started.
        c->is_dropping = true;
        instances_abort(&c->m->set, c->slot);
        return 0;
    }
    const char *text = result ? result->text : NULL;
    size_t len = text ? strlen(text) : 0;
    bool is_waiting = state == RKLLM_STATE_WAITING;
    if (rkllm_text_take(&c->held, text, len, is_waiting, &c->pending) != ERR_OK) {
        c->is_error = true;
        c->is_dropping = true;
        instances_abort(&c->m->set, c->slot);
        return 0;
    }
    // NORMAL may still end inside a character: only whole ones go out.
    if (!is_waiting) deliver(c, false);
    if (c->max_tokens >= 0 && c->n_tokens >= c->max_tokens && !c->is_dropping) {
        deliver(c, false);
        c->is_length = true;
        c->is_dropping = true;
        if (c->m->abi == ABI_12) instances_abort(&c->m->set, c->slot); // 1.3 stops by itself
    }
    return 0;
}

/* ---- instances (the instance layer's worker ops) ---- */

/* rkllm_init with our settings (and the template cleared) into rh->h. */
static int init_handle(struct platform_model *m, int i, struct rk_handle *rh, struct errmsg *err)
{
    struct rkllm_param_room room;
    size_t written_end;
    rkllm_default_param(fns.rkllm_createDefaultParam, &room, &written_end);
    void *h = NULL;
    int rc;
    if (m->abi == ABI_12) {
        struct rkllm12_param *p = &room.u.p12;
        p->model_path = m->file;
        p->max_context_len = m->n_ctx;
        p->max_new_tokens = m->n_ctx;
        p->skip_special_token = true;
        p->is_async = false;
        p->img_start = p->img_end = p->img_content = "";
        p->extend_param.base_domain_id = rh->domain;
        p->extend_param.embed_flash = 1;
        p->extend_param.enabled_cpus_num = (int8_t)m->cpus_num;
        p->extend_param.enabled_cpus_mask = m->cpus_mask;
        p->extend_param.n_batch = 1;
        rc = fns.rkllm_init.abi12(&h, p, on_result);
    } else {
        struct rkllm13_param *p = &room.u.p13;
        p->model_path = m->file;
        p->max_context_len = m->n_ctx;
        p->max_new_tokens = m->n_ctx;
        p->skip_special_token = true;
        p->ignore_eos_token = false;
        p->is_async = false;
        p->extend_param.base_domain_id = rh->domain;
        p->extend_param.embed_flash = 1;
        p->extend_param.enabled_cpus_num = (int8_t)m->cpus_num;
        p->extend_param.enabled_cpus_mask = m->cpus_mask;
        p->extend_param.n_batch = 1;
        rc = fns.rkllm_init.abi13(&h, p, &m->callbacks);
    }
    if (rc != 0 || !h)
        return errmsg_set(err, ERR_IO,
                          "rkllm_init failed for instance %d (returned %d): the NPU may be out of "
                          "memory, or the runtime cannot load %s",
                          i, rc, m->file);
    // Our rendered prompt already holds the template's text: the runtime adds nothing.
    if (m->tmpl && (rc = fns.rkllm_set_chat_template(h, "", "", "")) != 0) {
        fns.rkllm_destroy(h);
        return errmsg_set(err, ERR_IO, "rkllm_set_chat_template failed (returned %d)", rc);
    }
    rh->h = h;
    return ERR_OK;
}

static int rk_init(void *model, int i, void **handle, struct errmsg *err)
{
    struct rk_handle *rh = mem_calloc(1, sizeof *rh);
    if (!rh) return errmsg_set(err, ERR_NOMEM, "out of memory");
    struct platform_model *m = model;
    int rc = rkllm_domain_take(m->is_many_domains, m->domain_span, &rh->domain, err);
    if (rc != ERR_OK) {
        mem_free(rh);
        return rc;
    }
    rc = init_handle(model, i, rh, err);
    if (rc != ERR_OK) {
        rkllm_domain_give(m->is_many_domains, rh->domain, m->domain_span);
        mem_free(rh);
        return rc;
    }
    *handle = rh;
    return ERR_OK;
}

static void fill_sampling13(const struct gen_params *g, struct rkllm13_sampling *s)
{
    memset(s, 0, sizeof *s);
    s->top_k = g->temperature <= 0 ? 1 : g->top_k; // greedy as top-1
    s->top_p = g->top_p;
    s->temperature = g->temperature;
    s->repeat_penalty = g->repeat_penalty;
    s->frequency_penalty = g->frequency_penalty;
    s->presence_penalty = g->presence_penalty;
    s->mirostat = 0;
    s->mirostat_tau = 5.0f;
    s->mirostat_eta = 0.1f;
}

/* The outcome and timings of a run that returned rc. */
static void end_run(struct run_ctx *c, int rc)
{
    struct request *r = c->r;
    struct request_timings t = {.n_predicted = c->n_tokens};
    if (c->has_perf) {
        t.n_prompt = c->perf.prefill_tokens;
        t.n_predicted = c->perf.generate_tokens;
        t.prompt_ms = c->perf.prefill_time_ms;
        t.predicted_ms = c->perf.generate_time_ms;
    }
    // Our own max_tokens (ABI 1.2) ended the answer; the runtime may have run on until the
    // abort took hold.
    if (c->is_length && c->max_tokens >= 0 && t.n_predicted > c->max_tokens)
        t.n_predicted = c->max_tokens;
    request_set_timings(r, &t);
    bool is_cancelled = atomic_load(&r->is_cancelled);
    if (c->is_error && !is_cancelled) {
        inst_slot_fail(c->slot, 500, "the RKLLM runtime reported an error while generating");
    } else if (rc != 0 && !c->is_finished && !is_cancelled && !c->is_length) {
        char msg[96];
        snprintf(msg, sizeof msg, "rkllm_run failed (returned %d)", rc);
        inst_slot_fail(c->slot, 500, msg);
    } else if (is_cancelled) {
        inst_slot_finish(c->slot, FINISH_CANCELLED);
    } else if (c->is_length ||
               (r->params.max_tokens > 0 && t.n_predicted >= r->params.max_tokens)) {
        inst_slot_finish(c->slot, FINISH_LENGTH);
    } else {
        inst_slot_finish(c->slot, FINISH_STOP);
    }
}

static void rk_run(void *model, int i, void *handle, struct inst_slot *slot)
{
    (void)i;
    struct platform_model *m = model;
    void *h = ((struct rk_handle *)handle)->h;
    struct request *r = slot->req;
    struct run_ctx c = {.m = m, .slot = slot, .r = r, .max_tokens = r->params.max_tokens};
    buf_init(&c.held);
    buf_init(&c.pending);
    if (r->kind != REQUEST_GENERATE || !r->prompt_text) {
        inst_slot_fail(slot, 400, "the rkllm platform runs chat requests given as text");
        return;
    }
    bool thinking = r->enable_thinking != 0; // the template's default is to think
    int rc;
    if (m->abi == ABI_12) {
        struct rkllm12_input in = {
            .role = r->prompt_role, .enable_thinking = thinking, .input_type = RKLLM_INPUT_PROMPT};
        in.u.prompt = r->prompt_text;
        struct rkllm12_infer infer = {.mode = RKLLM_MODE_GENERATE, .keep_history = 0};
        rc = fns.rkllm_run(h, &in, &infer, &c);
    } else {
        struct rkllm13_input in = {
            .role = r->prompt_role, .enable_thinking = thinking, .input_type = RKLLM_INPUT_PROMPT};
        in.u.prompt = r->prompt_text;
        struct rkllm13_sampling sampling;
        fill_sampling13(&r->params, &sampling);
        struct rkllm13_infer infer = {
            .mode = RKLLM_MODE_GENERATE,
            .sampling = &sampling,
            .keep_history = 0,
            .max_new_tokens = r->params.max_tokens > 0 ? r->params.max_tokens : 0,
        };
        rc = fns.rkllm_run(h, &in, &infer, &c);
    }
    end_run(&c, rc);
    buf_deinit(&c.held);
    buf_deinit(&c.pending);
}

static void rk_abort(void *model, void *handle)
{
    (void)model;
    fns.rkllm_abort(((struct rk_handle *)handle)->h);
}

static void rk_destroy(void *model, void *handle)
{
    struct platform_model *m = model;
    struct rk_handle *rh = handle;
    int rc = fns.rkllm_destroy(rh->h);
    if (rc != 0) log_warn("rkllm_destroy returned %d", rc);
    rkllm_domain_give(m->is_many_domains, rh->domain, m->domain_span);
    mem_free(rh);
}

static const struct inst_worker_ops worker_ops = {
    .init = rk_init,
    .run = rk_run,
    .abort = rk_abort,
    .destroy = rk_destroy,
};

/* ---- load ---- */

/* A special token's text in tokenizer_config.json: a string or {"content": string}. */
static char *token_text(const json_t *cfg, const char *key)
{
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return mem_strdup(json_is_string(v) ? json_string_value(v) : "");
}

/* chat_template: a string, or a list of {name, template} (the "default" one, else the
 * first). NULL when absent. */
static const char *template_source(const json_t *cfg)
{
    const json_t *t = json_object_get(cfg, "chat_template");
    if (json_is_string(t)) return json_string_value(t);
    const char *first = NULL;
    size_t i;
    const json_t *e;
    json_array_foreach(t, i, e)
    {
        const char *src = json_string_value(json_object_get(e, "template"));
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!src) continue;
        if (name && strcmp(name, "default") == 0) return src;
        if (!first) first = src;
    }
    return first;
}

/* The length of jansson's error text without its " near '...'" part, which quotes the file:
 * a file reached through a request (a symlink to anything) must not be echoed back. */
static int json_error_len(const char *text)
{
    const char *near = strstr(text, " near ");
    return (int)(near ? (size_t)(near - text) : strlen(text));
}

/* The chat template: the server's override, else tokenizer_config.json's, else none (the
 * runtime's own, with only the last message sent). */
static int load_template(struct platform_model *m, const char *dir, const char *override,
                         struct errmsg *err)
{
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s", dir, TOKENIZER_CONFIG);
    json_error_t jerr;
    json_t *cfg = json_load_file(path, 0, &jerr);
    struct stat st;
    if (!cfg && stat(path, &st) == 0)
        return errmsg_set(err, ERR_FORMAT, "%s: line %d: %.*s", path, jerr.line,
                          json_error_len(jerr.text), jerr.text);
    int rc = ERR_OK;
    m->bos_text = token_text(cfg, "bos_token");
    m->eos_text = token_text(cfg, "eos_token");
    const char *src = NULL;
    if (override) {
        const char *builtin = chat_template_builtin(override);
        src = builtin ? builtin : override;
    } else {
        src = template_source(cfg);
    }
    if (!m->bos_text || !m->eos_text) rc = ERR_NOMEM;
    if (rc == ERR_OK && src) {
        m->tmpl_src = mem_strdup(src);
        struct errmsg terr;
        errmsg_clear(&terr);
        if (!m->tmpl_src)
            rc = ERR_NOMEM;
        else if (jinja_template_new(m->tmpl_src, strlen(m->tmpl_src), &m->tmpl, &terr) != ERR_OK)
            rc = errmsg_set(err, ERR_FORMAT, "the chat template of %s does not parse: %s",
                            override ? "--chat-template" : path, terr.msg);
    }
    if (rc == ERR_OK && !src)
        log_warn("%s has no chat_template: the rkllm runtime's own template is used and only the "
                 "last message of each conversation is sent",
                 cfg ? path : dir);
    json_decref(cfg);
    return rc;
}

static void free_model(struct platform_model *m)
{
    jinja_template_free(m->tmpl);
    mem_free(m->tmpl_src);
    mem_free(m->bos_text);
    mem_free(m->eos_text);
    mem_free(m);
}

/* The process's runtime ABI; model.json's "abi" (the release a model was converted for) must
 * agree with it, as one runtime serves every model. */
static int pick_abi(const struct platform_detection *d, struct platform_model *m,
                    struct errmsg *err)
{
    m->abi = runtime_abi;
    m->abi_name = runtime_abi_name;
    const char *want = d->manifest.abi;
    if (!want[0]) return ERR_OK;
    bool is_12 = strcmp(want, "1.2") == 0 || strcmp(want, "1.2.1") == 0 ||
                 strcmp(want, "1.2.2") == 0 || strcmp(want, "1.2.3") == 0;
    bool is_13 = strcmp(want, "1.3") == 0 || strcmp(want, "1.3.0") == 0;
    if (!is_12 && !is_13)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "model.json's rkllm ABI '%s' is not supported (1.2 for runtimes "
                          "1.2.1-1.2.3, 1.3 for 1.3.0)",
                          want);
    if ((is_12 ? ABI_12 : ABI_13) != runtime_abi)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "model.json asks for rkllm ABI %s but the runtime %s speaks %s", want,
                          lib.path, runtime_abi_name);
    return ERR_OK;
}

static int rkllm_load(const struct platform_load_args *a, struct platform_model **out,
                      struct errmsg *err)
{
    if (!lib.is_available)
        return errmsg_set(err, ERR_UNSUPPORTED, "the RKLLM runtime is unavailable: %s", lib.reason);
    struct platform_detection *d = mem_alloc(sizeof *d);
    struct platform_model *m = mem_calloc(1, sizeof *m);
    int rc = d && m ? ERR_OK : ERR_NOMEM;
    if (rc == ERR_OK) rc = platform_detect_model(a->path, d, err);
    if (rc == ERR_OK && (strcmp(d->platform->id, "rkllm") != 0 || !d->file[0]))
        rc = errmsg_set(err, ERR_UNSUPPORTED, "'%s' holds no .rkllm model", a->path);
    struct stat st;
    if (rc == ERR_OK && stat(d->file, &st) != 0)
        rc = errmsg_set(err, ERR_IO, "cannot read %s", d->file);
    if (rc == ERR_OK) rc = pick_abi(d, m, err);
    if (rc == ERR_OK) {
        snprintf(m->file, sizeof m->file, "%s", d->file);
        m->file_size = (uint64_t)st.st_size;
        m->n_ctx = a->n_ctx > 0 ? a->n_ctx : RKLLM_DEFAULT_CTX;
        rc = load_template(m, d->dir, a->chat_template, err);
    }
    if (rc == ERR_OK) {
        // The runtime's init-time sampling: what ABI 1.2 runs every request with.
        struct rkllm_param_room room;
        size_t written_end;
        rkllm_default_param(fns.rkllm_createDefaultParam, &room, &written_end);
        const struct rkllm13_param *p13 = &room.u.p13;
        const struct rkllm12_param *p12 = &room.u.p12;
        m->fixed = m->abi == ABI_12
                       ? (struct platform_sampling){p12->temperature,      p12->top_p,
                                                    p12->repeat_penalty,   p12->frequency_penalty,
                                                    p12->presence_penalty, p12->top_k}
                       : (struct platform_sampling){p13->temperature,      p13->top_p,
                                                    p13->repeat_penalty,   p13->frequency_penalty,
                                                    p13->presence_penalty, p13->top_k};
        // The big cores on the SoCs that have them (as Rockchip's own server does).
        char soc[32] = "";
        vendor_soc_detect(soc, sizeof soc);
        bool is_big_little = strncmp(soc, "RK3588", 6) == 0 || strcmp(soc, "RK3576") == 0;
        m->cpus_num = 4;
        m->cpus_mask = is_big_little ? 0xF0u : 0x0Fu;
        if (strcmp(soc, "RK3582") == 0) { // CPU4-5 are its only big cores
            m->cpus_num = 2;
            m->cpus_mask = 0x30u;
        }
        m->is_many_domains = rkllm_domain_soc_has_many(soc);
        m->domain_span = rkllm_domain_span(m->file_size);
        m->callbacks.result = on_result;
        rc = instances_start_workers(&m->set, &worker_ops, m, a->on_done, a->owner);
    }
    mem_free(d);
    if (rc != ERR_OK) {
        if (m) free_model(m);
        if (rc == ERR_NOMEM && !err->msg[0]) errmsg_set(err, rc, "out of memory");
        return rc;
    }
    log_info("rkllm: %s, ABI %s, context %d, %s", m->file, m->abi_name, m->n_ctx,
             m->tmpl ? "conversation rendered with the model's template"
                     : "runtime template, last message only");
    *out = m;
    return ERR_OK;
}

static void rkllm_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    memset(out, 0, sizeof *out);
    out->chat_template = m->tmpl;
    out->chat_template_src = m->tmpl_src;
    out->bos_text = m->bos_text;
    out->eos_text = m->eos_text;
    out->kind = MODEL_KIND_CHAT;
    out->n_ctx = m->n_ctx;
    out->n_ctx_train = m->n_ctx;
    out->file_size = m->file_size;
    out->instance_bytes = m->file_size; // each handle loads its own copy onto the NPU
    snprintf(out->arch, sizeof out->arch, "rkllm");
    snprintf(out->description, sizeof out->description, "RKLLM model (runtime ABI %s)",
             m->abi_name);
    out->is_text_io = true;
    out->is_last_message_only = m->tmpl == NULL;
    out->unsupported = PLATFORM_UNSUPPORTED_GRAMMAR | PLATFORM_UNSUPPORTED_LOGPROBS |
                       PLATFORM_UNSUPPORTED_N | PLATFORM_UNSUPPORTED_LOGIT_BIAS |
                       PLATFORM_UNSUPPORTED_MIN_P | PLATFORM_UNSUPPORTED_SEED;
    out->fixed_sampling = m->abi == ABI_12 ? &m->fixed : NULL;
    out->abi = m->abi_name;
}

static int rkllm_add_instance(struct platform_model *m, int instance, struct errmsg *err)
{
    return instances_add(&m->set, instance, err);
}

static void rkllm_remove_instance(struct platform_model *m, int instance)
{
    instances_remove(&m->set, instance);
}

static void rkllm_submit(struct platform_model *m, int instance, struct request *r)
{
    instances_submit(&m->set, instance, r);
}

static void rkllm_unload(struct platform_model *m)
{
    if (!m) return;
    instances_stop(&m->set);
    instances_deinit(&m->set);
    free_model(m);
}

const struct platform rkllm_platform = {
    .id = "rkllm",
    .display_name = "RKLLM",
    .start = rkllm_start,
    .stop = rkllm_stop,
    .is_available = rkllm_is_available,
    .status = rkllm_status,
    .detect_chips = rkllm_detect_chips,
    .claims = rkllm_claims,
    .load = rkllm_load,
    .describe = rkllm_describe,
    .add_instance = rkllm_add_instance,
    .remove_instance = rkllm_remove_instance,
    .submit = rkllm_submit,
    .unload = rkllm_unload,
};
