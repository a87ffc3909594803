/* The `rknn3` platform: chat, embedding and reranker models on RK1820/RK1828 coprocessors
 * through the RKNN3 runtime (librknn3_api.so, opened with dlopen). A model is a set in one
 * directory: X.rknn (the graph), X.weight, X.tokenizer.gguf (our tokenizer and chat template:
 * the host tokenizes and detokenizes) and X.embed.bin (float16 [vocab, dim] rows the host
 * hands the runtime through its embed callback; mapped read-only). Each instance is a runtime
 * context with one LLM session on a device (instance i on device i mod n); the runtime's
 * documentation warns that several sessions on one coprocessor may fail, so more than one
 * instance is allowed with a warning. Chat sends the rendered prompt as tokens with the
 * runtime's own template cleared and per-request sampling; embeddings and rerankers run
 * prefill only and read the output callback's tensor (one vector; the last row of per-token
 * states; a reranker's first value). */
#include "platform/rockchip/rknn3.h"

#include "engine/gguf/gguf.h"
#include "engine/ops.h"
#include "platform/detect.h"
#include "platform/instances.h"
#include "platform/rockchip/rknn3_abi.h"
#include "platform/vendor.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/chat_template.h"
#include "text/jinja/jinja.h"
#include "text/tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/log.h"
#include "util/mem.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RKNN3_INST_BYTES (64u << 20) // host buffers of a session
#define DIM_MAX          65536

static const struct vendor_sym syms[] = {
    {"rknn3_find_devices", offsetof(struct rknn3_fns, find_devices)},
    {"rknn3_init", offsetof(struct rknn3_fns, init)},
    {"rknn3_load_model_from_path", offsetof(struct rknn3_fns, load_model_from_path)},
    {"rknn3_model_init", offsetof(struct rknn3_fns, model_init)},
    {"rknn3_query", offsetof(struct rknn3_fns, query)},
    {"rknn3_destroy", offsetof(struct rknn3_fns, destroy)},
    {"rknn3_session_init", offsetof(struct rknn3_fns, session_init)},
    {"rknn3_session_set_callback", offsetof(struct rknn3_fns, session_set_callback)},
    {"rknn3_session_set_chat_template", offsetof(struct rknn3_fns, session_set_chat_template)},
    {"rknn3_session_set_llm_param", offsetof(struct rknn3_fns, session_set_llm_param)},
    {"rknn3_session_run", offsetof(struct rknn3_fns, session_run)},
    {"rknn3_session_stop", offsetof(struct rknn3_fns, session_stop)},
    {"rknn3_session_clear_kvcache", offsetof(struct rknn3_fns, session_clear_kvcache)},
    {"rknn3_session_destroy", offsetof(struct rknn3_fns, session_destroy)},
};

/* Written once at start-up, read-only afterwards. */
static struct vendor_lib lib;
static struct rknn3_fns fns;

static const struct inst_worker_ops worker_ops;

/* Immutable after load except set (the instance layer's) and the spare context. */
struct platform_model {
    struct instances set;
    struct tokenizer *tok;
    struct jinja_template *tmpl;
    char *tmpl_src, *bos_text, *eos_text;
    bool is_tmpl_fallback; // ChatML, because the tokenizer file has no (usable) template
    char model[4096], weight[4096];
    const uint16_t *embed; // (n_vocab, dim) float16, mapped
    size_t embed_bytes;
    int task; // RKNN3_LLM_TASK_*
    int n_vocab, dim, max_ctx;
    int n_devices;
    char devices[RKNN3_MAX_DEVS][RKNN3_MAX_DEV_LEN];
    int32_t eos[RKNN3_MAX_SPECIAL_IDS]; // end-of-generation ids for the runtime
    int n_eos;
    int32_t rerank_bos, rerank_eos, rerank_sep;
    uint64_t file_size;
    rknn3_context spare; // the context load queried, for the first instance
    bool has_spare;
    char description[160];
};

/* One instance: a context, its session and the run in flight. The run fields are written by
 * the runtime's callbacks while session_run blocks the worker, and read by the worker after. */
struct handle {
    struct platform_model *m;
    rknn3_context ctx;
    void *session;
    int device;
    // The run in flight.
    struct inst_slot *slot;
    int n_generated;
    int end_state; // the last callback state
    bool is_eog;   // an end-of-generation token arrived
    bool is_full;  // the event buffer filled
    float *out;    // (dim) embedding / score output
    int n_out;
};

/* ---- start-up and discovery ---- */

static void rknn3_start(void)
{
    const char *path = vendor_config_get()->rknn3_lib;
    if (vendor_lib_open(&lib, path, syms, sizeof syms / sizeof syms[0], &fns, sizeof fns) != ERR_OK)
        log_info("platform rknn3 unavailable: %s", lib.reason);
}

static void rknn3_stop(void)
{
    vendor_lib_close(&lib);
    memset(&fns, 0, sizeof fns);
}

static bool rknn3_is_available(void)
{
    return lib.is_available;
}

static void rknn3_status(struct platform_status *out)
{
    vendor_status_fill(&lib, out);
}

/* The device list; NULL when the runtime is unavailable or enumeration failed. Caller frees
 * with mem_free. */
static struct rknn3_devices *find_devices(void)
{
    if (!lib.is_available) return NULL;
    struct rknn3_devices *d = mem_calloc(1, sizeof *d);
    if (d && fns.find_devices(d) != RKNN3_SUCCESS) {
        mem_free(d);
        return NULL;
    }
    if (d && d->n_devices > RKNN3_MAX_DEVS) d->n_devices = RKNN3_MAX_DEVS;
    return d;
}

/* The enumeration has no chip-type field: RK1828 carries 5 GB of memory and RK1820 2.5 GB,
 * so a device reporting 4 GiB or more is taken for an RK1828. */
static const char *chip_of(const struct rknn3_device *dev)
{
    return dev->mem.sys_total >= (4ull << 30) ? "RK1828" : "RK1820";
}

static int rknn3_detect_chips(struct platform_chip *out, int max)
{
    struct rknn3_devices *d = find_devices();
    int n = 0;
    for (uint32_t i = 0; d && i < d->n_devices; i++) {
        const char *chip = chip_of(&d->devices[i]);
        int k = 0;
        while (k < n && strcmp(out[k].chip_type, chip) != 0)
            k++;
        if (k < n) {
            out[k].count++;
        } else if (n < max) {
            snprintf(out[n].chip_type, sizeof out[n].chip_type, "%s", chip);
            out[n++].count = 1;
        }
    }
    mem_free(d);
    return n;
}

static bool rknn3_claims(const char *path)
{
    return vendor_claims(path, "rknn3");
}

/* ---- load ---- */

/* X.rknn -> dir/X<suffix>. */
static void sibling(const char *rknn, const char *suffix, char *out, size_t cap)
{
    size_t n = strlen(rknn);
    if (n >= 5 && strcmp(rknn + n - 5, ".rknn") == 0) n -= 5;
    snprintf(out, cap, "%.*s%s", (int)n, rknn, suffix);
}

static char *token_text_dup(const struct tokenizer *t, tok_id id)
{
    struct str s = id == TOK_ID_NONE ? (struct str){"", 0} : tok_text(t, id);
    return mem_strndup(s.ptr ? s.ptr : "", s.len);
}

/* The chat template: the tokenizer file's, else ChatML (until the runtime's own replaces it,
 * see adopt_runtime_template). */
static int load_template(struct platform_model *m, const struct gguf *g, struct errmsg *err)
{
    struct str src = {0};
    if (gguf_get_str(g, "tokenizer.chat_template", &src) == ERR_OK && src.len > 0) {
        m->tmpl_src = mem_strndup(src.ptr, src.len);
        if (!m->tmpl_src) return errmsg_set(err, ERR_NOMEM, "out of memory");
        struct errmsg terr;
        errmsg_clear(&terr);
        if (jinja_template_new(m->tmpl_src, src.len, &m->tmpl, &terr) == ERR_OK) return ERR_OK;
        log_warn("rknn3: the model's chat template does not parse (%s); using ChatML", terr.msg);
        mem_free(m->tmpl_src);
        m->tmpl_src = NULL;
    }
    m->tmpl_src = mem_strdup(chat_template_default());
    if (!m->tmpl_src) return errmsg_set(err, ERR_NOMEM, "out of memory");
    m->is_tmpl_fallback = true;
    return jinja_template_new(m->tmpl_src, strlen(m->tmpl_src), &m->tmpl, err);
}

/* When the tokenizer file has no template, the model's own (RKNN3_QUERY_LLM_CONFIG, a Hugging
 * Face Jinja template; runtime memory, copied at once) replaces ChatML if it parses. */
static void adopt_runtime_template(struct platform_model *m, const char *src)
{
    if (!m->is_tmpl_fallback || !src || !src[0]) return;
    size_t len = strnlen(src, 1u << 20);
    char *copy = mem_strndup(src, len);
    struct jinja_template *t = NULL;
    struct errmsg terr;
    errmsg_clear(&terr);
    if (!copy || jinja_template_new(copy, len, &t, &terr) != ERR_OK) {
        log_warn("rknn3: the runtime's chat template does not parse (%s); using ChatML",
                 copy ? terr.msg : "out of memory");
        mem_free(copy);
        return;
    }
    jinja_template_free(m->tmpl);
    mem_free(m->tmpl_src);
    m->tmpl = t;
    m->tmpl_src = copy;
    m->is_tmpl_fallback = false;
}

/* X.tokenizer.gguf: the tokenizer, its special ids for the runtime and reranker layout, and
 * the chat template. */
static int load_tokenizer(struct platform_model *m, struct errmsg *err)
{
    char path[4200];
    sibling(m->model, ".tokenizer.gguf", path, sizeof path);
    struct gguf *g;
    int rc = gguf_open(path, &g, err);
    if (rc != ERR_OK) return rc;
    struct vocab v;
    rc = vocab_load_gguf(g, &v, err);
    if (rc == ERR_OK) {
        rc = tok_new(&v, &m->tok, err);
        const struct tok_specials *sp = rc == ERR_OK ? tok_specials(m->tok) : NULL;
        if (sp) {
            tok_id bos = sp->bos != TOK_ID_NONE ? sp->bos : sp->cls;
            tok_id eos = sp->eos != TOK_ID_NONE ? sp->eos : sp->sep;
            m->rerank_bos = v.add_bos ? bos : TOK_ID_NONE;
            m->rerank_eos = v.add_eos ? eos : TOK_ID_NONE;
            m->rerank_sep = v.add_sep ? sp->sep : TOK_ID_NONE;
        }
        vocab_deinit(&v);
    }
    if (rc == ERR_OK) rc = load_template(m, g, err);
    gguf_close(g);
    if (rc != ERR_OK) return rc;
    m->bos_text = token_text_dup(m->tok, tok_bos(m->tok));
    m->eos_text = token_text_dup(m->tok, tok_eos(m->tok));
    if (!m->bos_text || !m->eos_text) return errmsg_set(err, ERR_NOMEM, "out of memory");
    for (tok_id id = 0; id < tok_n_tokens(m->tok) && m->n_eos < RKNN3_MAX_SPECIAL_IDS; id++)
        if (tok_is_eog(m->tok, id)) m->eos[m->n_eos++] = id;
    return ERR_OK;
}

/* Maps X.embed.bin: exactly n_vocab rows of dim float16 values. */
static int map_embed(struct platform_model *m, struct errmsg *err)
{
    char path[4200];
    sibling(m->model, ".embed.bin", path, sizeof path);
    int fd;
    if (file_open_regular(path, &fd, err) != ERR_OK) return ERR_IO;
    struct stat st;
    size_t want = (size_t)m->n_vocab * (size_t)m->dim * 2;
    int rc = ERR_OK;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != (uint64_t)want)
        rc = errmsg_set(err, ERR_FORMAT, "'%s' must hold %d x %d float16 values (%zu bytes)", path,
                        m->n_vocab, m->dim, want);
    void *p = rc == ERR_OK ? mmap(NULL, want, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (rc == ERR_OK && p == MAP_FAILED) rc = errmsg_set(err, ERR_IO, "cannot map '%s'", path);
    close(fd);
    if (rc != ERR_OK) return rc;
    m->embed = p;
    m->embed_bytes = want;
    return ERR_OK;
}

/* A context on device d with the model loaded and initialised. */
static int open_context(const struct platform_model *m, int d, rknn3_context *out,
                        struct errmsg *err)
{
    char dev[RKNN3_MAX_DEV_LEN];
    snprintf(dev, sizeof dev, "%s", m->devices[d]);
    struct rknn3_init_extend ext;
    memset(&ext, 0, sizeof ext);
    ext.device_id = dev;
    rknn3_context ctx = 0;
    int rc = fns.init(&ctx, &ext);
    if (rc != RKNN3_SUCCESS) return errmsg_set(err, ERR_IO, "rknn3_init(%s) failed (%d)", dev, rc);
    rc = fns.load_model_from_path(ctx, m->model, m->weight);
    if (rc == RKNN3_SUCCESS) {
        struct rknn3_config cfg;
        memset(&cfg, 0, sizeof cfg);
        rc = fns.model_init(ctx, &cfg);
    }
    if (rc != RKNN3_SUCCESS) {
        fns.destroy(ctx);
        return errmsg_set(err, rc == RKNN3_ERR_TARGET_PLATFORM_UNMATCH ? ERR_UNSUPPORTED : ERR_IO,
                          "loading '%s' on %s failed (%d)", m->model, dev, rc);
    }
    *out = ctx;
    return ERR_OK;
}

/* The first context: where the model says what it is. */
static int probe(struct platform_model *m, struct errmsg *err)
{
    rknn3_context ctx;
    int rc = open_context(m, 0, &ctx, err);
    if (rc != ERR_OK) return rc;
    struct rknn3_llm_config q;
    memset(&q, 0, sizeof q);
    int vrc = fns.query(ctx, RKNN3_QUERY_LLM_CONFIG, &q, sizeof q);
    if (vrc != RKNN3_SUCCESS) {
        rc = errmsg_set(err, ERR_FORMAT, "rknn3_query(LLM_CONFIG) failed (%d)", vrc);
    } else if (q.task_type < RKNN3_LLM_TASK_GENERATE || q.task_type > RKNN3_LLM_TASK_RERANKER ||
               q.embedding_dim < 1 || q.embedding_dim > DIM_MAX || q.max_ctx_len < 2 ||
               q.vocab_size < 1 || q.vocab_size > INT32_MAX) {
        rc = errmsg_set(err, ERR_FORMAT,
                        "the model's LLM config is out of range (task %d, dim %u, "
                        "context %u, vocab %u)",
                        (int)q.task_type, q.embedding_dim, q.max_ctx_len, q.vocab_size);
    } else {
        m->task = q.task_type;
        m->dim = (int)q.embedding_dim;
        m->max_ctx = q.max_ctx_len > INT32_MAX ? INT32_MAX : (int)q.max_ctx_len;
        m->n_vocab = (int)q.vocab_size;
        adopt_runtime_template(m, q.chat_template);
    }
    if (rc != ERR_OK) {
        fns.destroy(ctx);
        return rc;
    }
    m->spare = ctx;
    m->has_spare = true;
    return ERR_OK;
}

static int list_devices(struct platform_model *m, struct errmsg *err)
{
    struct rknn3_devices *d = find_devices();
    if (!d || d->n_devices == 0) {
        mem_free(d);
        return errmsg_set(err, ERR_UNSUPPORTED, "no RK182X device found (rknn3_find_devices)");
    }
    m->n_devices = (int)d->n_devices;
    for (int i = 0; i < m->n_devices; i++) {
        memcpy(m->devices[i], d->devices[i].id, RKNN3_MAX_DEV_LEN);
        m->devices[i][RKNN3_MAX_DEV_LEN - 1] = '\0';
    }
    mem_free(d);
    return ERR_OK;
}

static void free_model(struct platform_model *m)
{
    if (m->has_spare) fns.destroy(m->spare);
    if (m->embed) munmap((void *)(uintptr_t)m->embed, m->embed_bytes);
    jinja_template_free(m->tmpl);
    mem_free(m->tmpl_src);
    mem_free(m->bos_text);
    mem_free(m->eos_text);
    tok_free(m->tok);
    mem_free(m);
}

static int check_set(struct platform_model *m, const char *path, struct errmsg *err)
{
    struct platform_detection *d = mem_calloc(1, sizeof *d);
    if (!d) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = platform_detect_model(path, d, err);
    if (rc == ERR_OK && d->platform != &rknn3_platform)
        rc = errmsg_set(err, ERR_FORMAT, "'%s' is not an rknn3 model set", path);
    if (rc == ERR_OK) {
        snprintf(m->model, sizeof m->model, "%s", d->file);
        sibling(m->model, ".weight", m->weight, sizeof m->weight);
        struct stat st;
        m->file_size = stat(m->weight, &st) == 0 ? (uint64_t)st.st_size : 0;
    }
    mem_free(d);
    return rc;
}

static void describe_model(struct platform_model *m)
{
    static const char *const tasks[] = {"chat", "embedding", "reranker"};
    snprintf(m->description, sizeof m->description,
             "RKNN3 %s model on %d RK182X device(s): context %d, width %d, vocab %d",
             tasks[m->task], m->n_devices, m->max_ctx, m->dim, m->n_vocab);
}

static int rknn3_load(const struct platform_load_args *a, struct platform_model **out,
                      struct errmsg *err)
{
    if (!lib.is_available)
        return errmsg_set(err, ERR_UNSUPPORTED, "the rknn3 runtime is unavailable: %s", lib.reason);
    struct platform_model *m = mem_calloc(1, sizeof *m);
    if (!m) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = check_set(m, a->path, err);
    if (rc == ERR_OK) rc = list_devices(m, err);
    if (rc == ERR_OK) rc = load_tokenizer(m, err);
    if (rc == ERR_OK) rc = probe(m, err);
    if (rc == ERR_OK && tok_n_tokens(m->tok) > m->n_vocab)
        rc = errmsg_set(err, ERR_FORMAT, "the tokenizer has %d tokens, the model %d",
                        (int)tok_n_tokens(m->tok), m->n_vocab);
    if (rc == ERR_OK) rc = map_embed(m, err);
    if (rc == ERR_OK && m->task == RKNN3_LLM_TASK_GENERATE && a->force_embedding)
        rc = errmsg_set(err, ERR_UNSUPPORTED,
                        "this rknn3 model is a chat model; the runtime "
                        "cannot serve it as an embedding model");
    if (rc == ERR_OK && m->task != RKNN3_LLM_TASK_GENERATE &&
        a->pooling != PLATFORM_POOLING_DEFAULT)
        rc = errmsg_set(err, ERR_UNSUPPORTED,
                        "rknn3 models pool inside the runtime; 'pooling' "
                        "cannot be chosen");
    if (rc == ERR_OK) {
        describe_model(m);
        rc = instances_start_workers(&m->set, &worker_ops, m, a->on_done, a->owner);
        if (rc != ERR_OK) rc = errmsg_set(err, rc, "out of memory");
    }
    if (rc != ERR_OK) {
        free_model(m);
        return rc;
    }
    log_info("rknn3: %s: %s", m->model, m->description);
    *out = m;
    return ERR_OK;
}

/* ---- runtime callbacks (on the runtime's thread, while session_run blocks the worker) ---- */

static int on_result(void *userdata, struct rknn3_result *res, int32_t state)
{
    struct handle *h = userdata;
    struct request *r = h->slot->req;
    h->end_state = state;
    for (int i = 0; res && res->token_ids && i < res->num_tokens && !h->is_eog && !h->is_full;
         i++) {
        int32_t id = res->token_ids[i];
        if (id < 0 || id >= tok_n_tokens(h->m->tok)) {
            h->end_state = RKNN3_RUN_ERROR; // the run reports the failure when it returns
            instances_abort(&h->m->set, h->slot);
            break;
        }
        if (!r->params.ignore_eos && tok_is_eog(h->m->tok, id)) {
            h->is_eog = true;
            instances_abort(&h->m->set, h->slot);
            break;
        }
        struct gen_event ev;
        memset(&ev, 0, sizeof ev);
        ev.token = id;
        h->n_generated++;
        bool at_max = r->params.max_tokens >= 0 && h->n_generated >= r->params.max_tokens;
        if (request_push_event(r, &ev) != ERR_OK || at_max) {
            h->is_full = true;
            instances_abort(&h->m->set, h->slot);
        }
    }
    return 0;
}

/* The host's embedding lookup: n rows of dim float16 values from X.embed.bin. */
static int on_embed(void *userdata, int32_t *tokens, uint64_t n, void *embed, uint64_t len)
{
    struct handle *h = userdata;
    const struct platform_model *m = h->m;
    const size_t row = (size_t)m->dim * 2;
    if (!tokens || !embed || n == 0 || n > (uint64_t)m->max_ctx || len != n * row) return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab) return -1;
        memcpy((char *)embed + i * row, m->embed + (size_t)tokens[i] * (size_t)m->dim, row);
    }
    return 0;
}

/* Embeddings and rerankers: the output tensor (float32 or float16). */
static int on_output(void *userdata, struct rknn3_tensor *t, uint32_t n, int32_t state)
{
    (void)state;
    struct handle *h = userdata;
    const int dim = h->m->dim;
    h->n_out = -1;
    if (n < 1 || !t || !t[0].mem || !t[0].attr || !t[0].mem->virt_addr) return -1;
    const struct rknn3_tensor_attr *a = t[0].attr;
    const size_t esize = a->dtype == RKNN3_TENSOR_FLOAT32 ? 4 : 2;
    if ((a->dtype != RKNN3_TENSOR_FLOAT32 && a->dtype != RKNN3_TENSOR_FLOAT16) || a->n_elems == 0 ||
        t[0].mem->size < (uint64_t)a->n_elems * esize)
        return -1;
    size_t from = 0, count = 1;
    if (h->m->task == RKNN3_LLM_TASK_EMBEDDING) {
        if (a->n_elems % (uint32_t)dim != 0) return -1;
        from = a->n_elems - (uint32_t)dim; // per-token states: the last token's (decoders)
        count = (size_t)dim;
    }
    const unsigned char *p = t[0].mem->virt_addr;
    for (size_t i = 0; i < count; i++) {
        if (esize == 4) {
            memcpy(&h->out[i], p + (from + i) * 4, 4);
        } else {
            uint16_t x;
            memcpy(&x, p + (from + i) * 2, 2);
            h->out[i] = ops_f16_to_f32(x);
        }
    }
    h->n_out = (int)count;
    return 0;
}

/* ---- instances ---- */

static void fill_param(const struct platform_model *m, const struct gen_params *g,
                       struct rknn3_llm_param *p)
{
    memset(p, 0, sizeof *p);
    p->max_context_len = m->max_ctx;
    p->sampling.top_k = g->top_k;
    p->sampling.top_p = g->top_p;
    p->sampling.temperature = g->temperature;
    p->sampling.repeat_penalty = g->repeat_penalty;
    p->sampling.frequency_penalty = g->frequency_penalty;
    p->sampling.presence_penalty = g->presence_penalty;
    p->vocab.vocab_size = m->n_vocab;
    memcpy(p->vocab.special_eos_id, m->eos, (size_t)m->n_eos * sizeof m->eos[0]);
    p->vocab.n_special_eos_id = m->n_eos;
    p->vocab.linefeed_id = -1;
    p->vocab.ignore_eos_token = g->ignore_eos;
}

static void handle_free(struct handle *h)
{
    if (h->session) fns.session_destroy(h->session);
    if (h->ctx) fns.destroy(h->ctx);
    mem_free(h->out);
    mem_free(h);
}

static int worker_init(void *model, int i, void **out, struct errmsg *err)
{
    struct platform_model *m = model;
    struct handle *h = mem_calloc(1, sizeof *h);
    if (!h) return errmsg_set(err, ERR_NOMEM, "out of memory");
    h->m = m;
    h->device = i % m->n_devices;
    h->out = mem_calloc((size_t)m->dim, sizeof *h->out);
    int rc = h->out ? ERR_OK : errmsg_set(err, ERR_NOMEM, "out of memory");
    if (rc == ERR_OK && m->has_spare && h->device == 0) { // instances are created by the admin
        h->ctx = m->spare;                                // thread only: no lock needed here
        m->has_spare = false;
    } else if (rc == ERR_OK) {
        rc = open_context(m, h->device, &h->ctx, err);
    }
    struct gen_params g;
    gen_params_defaults(&g);
    struct rknn3_llm_param p;
    fill_param(m, &g, &p);
    if (rc == ERR_OK && !(h->session = fns.session_init(h->ctx, &p, 1)))
        rc = errmsg_set(err, ERR_IO, "rknn3_session_init failed on %s", m->devices[h->device]);
    struct rknn3_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.result = on_result;
    cb.result_userdata = h;
    cb.embed = on_embed;
    cb.embed_userdata = h;
    cb.output = m->task != RKNN3_LLM_TASK_GENERATE ? on_output : NULL;
    cb.output_userdata = h;
    int vrc = rc == ERR_OK ? fns.session_set_callback(h->session, &cb) : RKNN3_SUCCESS;
    // The prompt arrives rendered with our template: the runtime's own is cleared.
    if (vrc == RKNN3_SUCCESS && rc == ERR_OK && m->task == RKNN3_LLM_TASK_GENERATE)
        vrc = fns.session_set_chat_template(h->session, "", "", "");
    if (rc == ERR_OK && vrc != RKNN3_SUCCESS)
        rc = errmsg_set(err, ERR_IO, "setting up the rknn3 session failed (%d)", vrc);
    if (rc != ERR_OK) {
        handle_free(h);
        return rc;
    }
    if (i > 0)
        log_warn("rknn3: instance %d runs on %s beside other sessions of the model; the runtime's "
                 "documentation warns that several sessions on one coprocessor may fail",
                 i, m->devices[h->device]);
    *out = h;
    return ERR_OK;
}

static void worker_destroy(void *model, void *handle)
{
    (void)model;
    handle_free(handle);
}

static void worker_abort(void *model, void *handle)
{
    (void)model;
    struct handle *h = handle;
    fns.session_stop(h->session);
}

static void run_chat(struct platform_model *m, struct handle *h, struct inst_slot *slot)
{
    struct request *r = slot->req;
    struct rknn3_llm_param p;
    fill_param(m, &r->params, &p);
    int room = m->max_ctx - r->n_prompt;
    int max_new =
        r->params.max_tokens >= 0 && r->params.max_tokens < room ? r->params.max_tokens : room;
    struct rknn3_llm_input in;
    memset(&in, 0, sizeof in);
    in.role = "user";
    in.input_type = RKNN3_LLM_INPUT_TOKEN;
    in.u.llm.tokens = r->prompt;
    in.u.llm.n_tokens = (uint64_t)r->n_prompt;
    struct rknn3_infer_param ip;
    memset(&ip, 0, sizeof ip);
    ip.max_new_tokens = max_new;
    const double t0 = clock_now_ms();
    int rc = fns.session_clear_kvcache(h->session, RKNN3_KVCACHE_CLEAR_ALL);
    if (rc == RKNN3_SUCCESS) rc = fns.session_set_llm_param(h->session, &p, 1);
    if (rc == RKNN3_SUCCESS && max_new > 0) rc = fns.session_run(h->session, &in, 1, &ip);
    struct request_timings t = {.n_prompt = r->n_prompt,
                                .n_predicted = h->n_generated,
                                .predicted_ms = clock_now_ms() - t0};
    request_set_timings(r, &t);
    if (rc != RKNN3_SUCCESS || h->end_state == RKNN3_RUN_ERROR) {
        char why[96];
        snprintf(why, sizeof why, "the RK182X runtime failed to generate (%d)", rc);
        inst_slot_fail(slot, 500, why);
    } else if (h->is_eog || h->end_state == RKNN3_RUN_FINISH) {
        inst_slot_finish(slot, h->is_full ? FINISH_LENGTH : FINISH_STOP);
    } else if (h->is_full || h->end_state == RKNN3_RUN_MAX_NEW_TOKEN_REACHED || max_new <= 0) {
        inst_slot_finish(slot, FINISH_LENGTH);
    } // else stopped: cancelled by the layer (left unset), or finished as a stop
}

static void l2_normalize(float *v, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)v[i] * v[i];
    const float scale = sum > 0.0 ? (float)(1.0 / sqrt(sum)) : 0.0f;
    for (int i = 0; i < n; i++)
        v[i] *= scale;
}

/* Embeddings and rerankers: each input is one prefill-only run. */
static void run_outputs(struct platform_model *m, struct handle *h, struct inst_slot *slot)
{
    struct request *r = slot->req;
    const int n_in = r->n_inputs > 0 ? r->n_inputs : 1;
    const int width = m->task == RKNN3_LLM_TASK_EMBEDDING ? m->dim : 1;
    float *all = mem_calloc((size_t)n_in * (size_t)width, sizeof *all);
    if (!all) {
        inst_slot_fail(slot, 500, "out of memory");
        return;
    }
    const double t0 = clock_now_ms();
    int at = 0;
    bool ok = true;
    for (int k = 0; k < n_in && ok && !atomic_load(&r->is_cancelled); k++) {
        int n = r->n_inputs > 0 ? r->input_lens[k] : r->n_prompt;
        struct rknn3_llm_input in;
        memset(&in, 0, sizeof in);
        in.role = "user";
        in.input_type = RKNN3_LLM_INPUT_TOKEN;
        in.u.llm.tokens = r->prompt + at;
        in.u.llm.n_tokens = (uint64_t)n;
        struct rknn3_infer_param ip;
        memset(&ip, 0, sizeof ip);
        ip.max_new_tokens = 1;
        ip.prefill_only = true;
        ip.disable_sampling = true;
        h->n_out = 0;
        int rc = fns.session_clear_kvcache(h->session, RKNN3_KVCACHE_CLEAR_ALL);
        if (rc == RKNN3_SUCCESS) rc = fns.session_run(h->session, &in, 1, &ip);
        ok = rc == RKNN3_SUCCESS && h->end_state != RKNN3_RUN_ERROR && h->n_out == width;
        if (!ok) {
            char why[96];
            snprintf(why, sizeof why, "the RK182X runtime returned no %s (%d)",
                     width > 1 ? "embedding" : "score", rc);
            inst_slot_fail(slot, 500, why);
        } else {
            if (width > 1) l2_normalize(h->out, width);
            memcpy(all + (size_t)k * (size_t)width, h->out, (size_t)width * sizeof *all);
        }
        at += n;
    }
    if (ok && !atomic_load(&r->is_cancelled)) {
        if (request_set_embedding(r, all, n_in * width) != ERR_OK)
            inst_slot_fail(slot, 500, "out of memory");
        struct request_timings t = {.n_prompt = r->n_prompt, .prompt_ms = clock_now_ms() - t0};
        request_set_timings(r, &t);
    }
    mem_free(all);
}

static void worker_run(void *model, int i, void *handle, struct inst_slot *slot)
{
    (void)i;
    struct platform_model *m = model;
    struct handle *h = handle;
    h->slot = slot;
    h->n_generated = 0;
    h->end_state = RKNN3_RUN_NORMAL;
    h->is_eog = h->is_full = false;
    if (m->task == RKNN3_LLM_TASK_GENERATE)
        run_chat(m, h, slot);
    else
        run_outputs(m, h, slot);
    h->slot = NULL;
}

static const struct inst_worker_ops worker_ops = {
    .init = worker_init,
    .run = worker_run,
    .abort = worker_abort,
    .destroy = worker_destroy,
};

/* ---- the platform table ---- */

static void rknn3_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    memset(out, 0, sizeof *out);
    out->tokenizer = m->tok;
    out->chat_template = m->tmpl;
    out->chat_template_src = m->tmpl_src;
    out->bos_text = m->bos_text;
    out->eos_text = m->eos_text;
    out->kind = m->task == RKNN3_LLM_TASK_GENERATE ? MODEL_KIND_CHAT : MODEL_KIND_EMBEDDING;
    // The runtime samples on the device: no grammar mask, probabilities, biases, min-p or seed.
    out->unsupported = PLATFORM_UNSUPPORTED_GRAMMAR | PLATFORM_UNSUPPORTED_LOGPROBS |
                       PLATFORM_UNSUPPORTED_N | PLATFORM_UNSUPPORTED_LOGIT_BIAS |
                       PLATFORM_UNSUPPORTED_MIN_P | PLATFORM_UNSUPPORTED_SEED;
    out->n_ctx = m->max_ctx;
    out->n_ctx_train = m->max_ctx;
    out->n_vocab = tok_n_tokens(m->tok);
    out->n_embd = m->dim;
    out->n_cls_out = m->task == RKNN3_LLM_TASK_RERANKER ? 1 : 0;
    out->rerank_bos = out->n_cls_out ? m->rerank_bos : TOK_ID_NONE;
    out->rerank_eos = out->n_cls_out ? m->rerank_eos : TOK_ID_NONE;
    out->rerank_sep = out->n_cls_out ? m->rerank_sep : TOK_ID_NONE;
    out->file_size = m->file_size;
    out->instance_bytes = RKNN3_INST_BYTES; // the weights live on the coprocessor
    snprintf(out->arch, sizeof out->arch, "rknn3");
    snprintf(out->description, sizeof out->description, "%s", m->description);
}

static int rknn3_add_instance(struct platform_model *m, int instance, struct errmsg *err)
{
    return instances_add(&m->set, instance, err);
}

static void rknn3_remove_instance(struct platform_model *m, int instance)
{
    instances_remove(&m->set, instance);
}

static void rknn3_submit(struct platform_model *m, int instance, struct request *r)
{
    instances_submit(&m->set, instance, r);
}

static void rknn3_unload(struct platform_model *m)
{
    if (!m) return;
    instances_stop(&m->set);
    instances_deinit(&m->set);
    free_model(m);
}

const struct platform rknn3_platform = {
    .id = "rknn3",
    .display_name = "RKNN3",
    .start = rknn3_start,
    .stop = rknn3_stop,
    .is_available = rknn3_is_available,
    .status = rknn3_status,
    .detect_chips = rknn3_detect_chips,
    .claims = rknn3_claims,
    .load = rknn3_load,
    .describe = rknn3_describe,
    .add_instance = rknn3_add_instance,
    .remove_instance = rknn3_remove_instance,
    .submit = rknn3_submit,
    .unload = rknn3_unload,
};
