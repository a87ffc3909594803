/* A fake librknn3_api.so for tests: the same exported symbols and struct layouts (through our
 * mirror, platform/rockchip/rknn3_abi.h), no coprocessor. Devices: FAKE_RKNN3_DEVICES of them
 * (default 2), "0000:0N:00.0" over PCIE with FAKE_RKNN3_MEM_MB of memory each (default 5120). The
 * model (X.rknn) is a text file; X.weight must exist:
 *
 *   fake-rknn3
 *   task generate         generate | embedding | reranker
 *   vocab 300             vocabulary size (token ids must be below it)
 *   dim 8                 embedding width (the host's X.embed.bin rows)
 *   max_ctx 256
 *   fail_init 2           the 2nd context created for this file fails (partial loads)
 *   error_token 13        an input holding this id ends the run with the ERROR state
 *   reply_len 6           tokens generated before FINISH
 *   token_ms 0            time per generated token
 *   runtime_template 1    RKNN3_QUERY_LLM_CONFIG returns a chat template ("[role] content")
 *
 * session_run blocks while a thread of the fake delivers the callbacks. Every run first asks
 * the host's embed callback for the input rows (len must be n_tokens * dim * 2 bytes). Then:
 * generate emits the input tokens in reverse order (reply_len of them, or max_new_tokens:
 * MAX_NEW_TOKEN_REACHED), one per result callback, then FINISH; session_stop makes it end
 * with STOP at the next token. embedding delivers one float32 [dim] output: the mean of the
 * input rows. reranker delivers one float32 [1] output: the mean of the rows' first column.
 * A second run on a busy session fails, and destroying a session during a run aborts the
 * process. With FAKE_RKNN3_LOG set, inits, sampling and runs are appended to that file. */
#include "platform/rockchip/rknn3_abi.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CTX   32
#define MAX_PATHS 16

struct fake_model {
    int task, vocab, dim, max_ctx, fail_init, error_token, reply_len, token_ms;
    int has_template; // RKNN3_QUERY_LLM_CONFIG returns a chat template
};

struct fake_session;

struct fake_ctx {
    int in_use;
    char device[64];
    struct fake_model m;
    int is_loaded;
    struct fake_session *session;
};

struct fake_session {
    struct fake_ctx *ctx;
    struct rknn3_callbacks cb;
    struct rknn3_sampling sampling;
    atomic_int is_running;
    atomic_int want_stop;
    // the run in flight
    int32_t *tokens;
    uint64_t n_tokens;
    int max_new;
    int rc;
};

int rknn3_find_devices(struct rknn3_devices *devs);
int rknn3_init(rknn3_context *ctx, struct rknn3_init_extend *ext);
int rknn3_load_model_from_path(rknn3_context ctx, const char *model, const char *weight);
int rknn3_model_init(rknn3_context ctx, struct rknn3_config *cfg);
int rknn3_query(rknn3_context ctx, int32_t cmd, void *info, uint64_t size);
int rknn3_destroy(rknn3_context ctx);
void *rknn3_session_init(rknn3_context ctx, struct rknn3_llm_param *params, int n_params);
int rknn3_session_set_callback(void *session, struct rknn3_callbacks *cb);
int rknn3_session_set_chat_template(void *session, const char *system, const char *prefix,
                                    const char *postfix);
int rknn3_session_set_llm_param(void *session, struct rknn3_llm_param *params, int n_params);
int rknn3_session_run(void *session, struct rknn3_llm_input *inputs, uint32_t n_inputs,
                      struct rknn3_infer_param *param);
int rknn3_session_stop(void *session);
int rknn3_session_clear_kvcache(void *session, int32_t policy);
int rknn3_session_destroy(void *session);

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_ctx g_ctx[MAX_CTX];
static struct {
    char path[512];
    int n;
} g_paths[MAX_PATHS];

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
    const char *path = getenv("FAKE_RKNN3_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

int rknn3_find_devices(struct rknn3_devices *devs)
{
    if (!devs) return RKNN3_ERR_FAIL;
    int n = env_int("FAKE_RKNN3_DEVICES", 2);
    if (n < 0 || n > RKNN3_MAX_DEVS) n = 0;
    memset(devs, 0, sizeof *devs);
    devs->n_devices = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        snprintf(devs->devices[i].id, sizeof devs->devices[i].id, "0000:0%d:00.0", i + 1);
        snprintf(devs->devices[i].type, sizeof devs->devices[i].type, "PCIE");
        devs->devices[i].mem.sys_total = (uint64_t)env_int("FAKE_RKNN3_MEM_MB", 5120) << 20;
        devs->devices[i].mem.sys_free = devs->devices[i].mem.sys_total / 2;
    }
    return RKNN3_SUCCESS;
}

static struct fake_ctx *get(rknn3_context ctx)
{
    if (ctx < 1 || ctx > MAX_CTX || !g_ctx[ctx - 1].in_use) return NULL;
    return &g_ctx[ctx - 1];
}

int rknn3_init(rknn3_context *ctx, struct rknn3_init_extend *ext)
{
    if (!ctx) return RKNN3_ERR_FAIL;
    struct rknn3_devices devs;
    rknn3_find_devices(&devs);
    const char *want = ext && ext->device_id ? ext->device_id : NULL;
    int found = want == NULL && devs.n_devices > 0;
    for (uint32_t i = 0; want && i < devs.n_devices; i++)
        found = found || strcmp(devs.devices[i].id, want) == 0;
    if (!found) return RKNN3_ERR_DEVICE_UNAVAILABLE;
    pthread_mutex_lock(&g_mu);
    int slot = -1;
    for (int i = 0; i < MAX_CTX && slot < 0; i++)
        if (!g_ctx[i].in_use) slot = i;
    if (slot >= 0) {
        memset(&g_ctx[slot], 0, sizeof g_ctx[slot]);
        g_ctx[slot].in_use = 1;
        snprintf(g_ctx[slot].device, sizeof g_ctx[slot].device, "%s",
                 want ? want : devs.devices[0].id);
    }
    pthread_mutex_unlock(&g_mu);
    if (slot < 0) return RKNN3_ERR_FAIL;
    *ctx = (rknn3_context)(slot + 1);
    return RKNN3_SUCCESS;
}

static int read_model(const char *path, struct fake_model *m)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    *m = (struct fake_model){
        .vocab = 300, .dim = 8, .max_ctx = 256, .error_token = -1, .reply_len = 6};
    char line[256];
    int ok = fgets(line, sizeof line, f) && strncmp(line, "fake-rknn3", 10) == 0;
    while (ok && fgets(line, sizeof line, f)) {
        char key[32], val[32];
        if (sscanf(line, "%31s %31s", key, val) != 2) continue;
        if (strcmp(key, "task") == 0)
            m->task = strcmp(val, "embedding") == 0  ? RKNN3_LLM_TASK_EMBEDDING
                      : strcmp(val, "reranker") == 0 ? RKNN3_LLM_TASK_RERANKER
                                                     : RKNN3_LLM_TASK_GENERATE;
        if (strcmp(key, "vocab") == 0) m->vocab = atoi(val);
        if (strcmp(key, "dim") == 0) m->dim = atoi(val);
        if (strcmp(key, "max_ctx") == 0) m->max_ctx = atoi(val);
        if (strcmp(key, "fail_init") == 0) m->fail_init = atoi(val);
        if (strcmp(key, "error_token") == 0) m->error_token = atoi(val);
        if (strcmp(key, "reply_len") == 0) m->reply_len = atoi(val);
        if (strcmp(key, "token_ms") == 0) m->token_ms = atoi(val);
        if (strcmp(key, "runtime_template") == 0) m->has_template = atoi(val);
    }
    fclose(f);
    return ok && m->vocab > 0 && m->dim > 0 && m->dim <= 4096 ? 0 : -1;
}

int rknn3_load_model_from_path(rknn3_context ctx, const char *model, const char *weight)
{
    struct fake_ctx *c = get(ctx);
    if (!c || !model || !weight) return RKNN3_ERR_FAIL;
    FILE *w = fopen(weight, "rb");
    if (!w) return RKNN3_ERR_FAIL;
    fclose(w);
    if (read_model(model, &c->m) != 0) return RKNN3_ERR_FAIL;
    pthread_mutex_lock(&g_mu);
    int n = 0;
    for (int i = 0; i < MAX_PATHS; i++) {
        if (g_paths[i].path[0] == 0 || strcmp(g_paths[i].path, model) == 0) {
            snprintf(g_paths[i].path, sizeof g_paths[i].path, "%s", model);
            n = ++g_paths[i].n;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (c->m.fail_init > 0 && n == c->m.fail_init) {
        log_line("load %s device=%s fail", model, c->device);
        return RKNN3_ERR_DEVICE_UNAVAILABLE;
    }
    c->is_loaded = 1;
    log_line("load %s device=%s", model, c->device);
    return RKNN3_SUCCESS;
}

int rknn3_model_init(rknn3_context ctx, struct rknn3_config *cfg)
{
    struct fake_ctx *c = get(ctx);
    return c && c->is_loaded && cfg ? RKNN3_SUCCESS : RKNN3_ERR_FAIL;
}

int rknn3_query(rknn3_context ctx, int32_t cmd, void *info, uint64_t size)
{
    struct fake_ctx *c = get(ctx);
    if (!c || !c->is_loaded || !info) return RKNN3_ERR_FAIL;
    if (cmd == RKNN3_QUERY_LLM_CONFIG && size == sizeof(struct rknn3_llm_config)) {
        struct rknn3_llm_config *q = info;
        memset(q, 0, sizeof *q);
        static char model_type[] = "fake";
        static char tmpl[] = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n"
                             "{% endfor %}[assistant] ";
        q->chat_template = c->m.has_template ? tmpl : NULL;
        q->vocab_size = (uint32_t)c->m.vocab;
        q->embedding_dim = (uint32_t)c->m.dim;
        q->max_ctx_len = (uint32_t)c->m.max_ctx;
        q->max_position_embeddings = (uint32_t)c->m.max_ctx;
        q->model_type = model_type;
        q->task_type = c->m.task;
        return RKNN3_SUCCESS;
    }
    if (cmd == RKNN3_QUERY_SDK_VERSION && size == sizeof(struct rknn3_sdk_version)) {
        struct rknn3_sdk_version *v = info;
        snprintf(v->api_version, sizeof v->api_version, "1.0.0 (fake)");
        snprintf(v->drv_version, sizeof v->drv_version, "1.0.0");
        return RKNN3_SUCCESS;
    }
    return RKNN3_ERR_FAIL;
}

int rknn3_destroy(rknn3_context ctx)
{
    pthread_mutex_lock(&g_mu);
    struct fake_ctx *c = get(ctx);
    int rc = c && !c->session ? RKNN3_SUCCESS : RKNN3_ERR_FAIL;
    if (c && c->session) {
        fprintf(stderr, "fake_rknn3: rknn3_destroy with a live session\n");
        abort();
    }
    if (c) memset(c, 0, sizeof *c);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

void *rknn3_session_init(rknn3_context ctx, struct rknn3_llm_param *params, int n_params)
{
    struct fake_ctx *c = get(ctx);
    if (!c || !c->is_loaded || c->session || !params || n_params != 1) return NULL;
    struct fake_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ctx = c;
    s->sampling = params->sampling;
    c->session = s;
    return s;
}

int rknn3_session_set_callback(void *session, struct rknn3_callbacks *cb)
{
    struct fake_session *s = session;
    if (!s || !cb || !cb->result || !cb->embed) return RKNN3_ERR_FAIL; // the host embeds
    s->cb = *cb;
    return RKNN3_SUCCESS;
}

int rknn3_session_set_chat_template(void *session, const char *system, const char *prefix,
                                    const char *postfix)
{
    struct fake_session *s = session;
    if (!s) return RKNN3_ERR_FAIL;
    log_line("template system='%s' prefix='%s' postfix='%s'", system ? system : "(null)",
             prefix ? prefix : "(null)", postfix ? postfix : "(null)");
    return RKNN3_SUCCESS;
}

int rknn3_session_set_llm_param(void *session, struct rknn3_llm_param *params, int n_params)
{
    struct fake_session *s = session;
    if (!s || !params || n_params != 1) return RKNN3_ERR_FAIL;
    s->sampling = params->sampling;
    log_line("sampling temperature=%g top_k=%d top_p=%g repeat=%g freq=%g presence=%g",
             (double)s->sampling.temperature, (int)s->sampling.top_k, (double)s->sampling.top_p,
             (double)s->sampling.repeat_penalty, (double)s->sampling.frequency_penalty,
             (double)s->sampling.presence_penalty);
    return RKNN3_SUCCESS;
}

int rknn3_session_clear_kvcache(void *session, int32_t policy)
{
    (void)policy;
    return session ? RKNN3_SUCCESS : RKNN3_ERR_FAIL;
}

int rknn3_session_stop(void *session)
{
    struct fake_session *s = session;
    if (!s) return RKNN3_ERR_FAIL;
    atomic_store(&s->want_stop, 1);
    return RKNN3_SUCCESS;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31u, man = h & 1023u, bits;
    if (exp == 0) {
        bits = sign; // zero (subnormals are not used by the tests)
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void emit(struct fake_session *s, int32_t *ids, int n, int32_t state)
{
    struct rknn3_result res = {ids, n};
    s->cb.result(s->cb.result_userdata, &res, state);
}

static void sleep_ms(int ms)
{
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The callbacks, on the fake's own thread. */
static void *run_thread(void *arg)
{
    struct fake_session *s = arg;
    const struct fake_model *m = &s->ctx->m;
    size_t n = (size_t)s->n_tokens, dim = (size_t)m->dim;
    uint16_t *rows = calloc(n * dim, sizeof *rows);
    int erc = rows ? s->cb.embed(s->cb.embed_userdata, s->tokens, n, rows, n * dim * 2) : -1;
    if (erc != 0) {
        emit(s, NULL, 0, RKNN3_RUN_ERROR);
        s->rc = RKNN3_ERR_FAIL;
        free(rows);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s->tokens[i] == m->error_token) {
            emit(s, NULL, 0, RKNN3_RUN_ERROR);
            s->rc = RKNN3_ERR_FAIL;
            free(rows);
            return NULL;
        }
    }
    if (m->task != RKNN3_LLM_TASK_GENERATE) {
        float *out = calloc(dim, sizeof *out);
        for (size_t i = 0; out && i < n; i++)
            for (size_t h = 0; h < dim; h++)
                out[h] += half_to_float(rows[i * dim + h]) / (float)n;
        struct rknn3_tensor_attr attr;
        struct rknn3_tensor_mem mem;
        memset(&attr, 0, sizeof attr);
        memset(&mem, 0, sizeof mem);
        attr.n_dims = 1;
        attr.shape[0] = m->task == RKNN3_LLM_TASK_RERANKER ? 1 : (uint32_t)dim;
        attr.n_elems = attr.shape[0];
        attr.dtype = RKNN3_TENSOR_FLOAT32;
        mem.virt_addr = out;
        mem.size = attr.n_elems * sizeof(float);
        struct rknn3_tensor t = {&mem, &attr};
        if (s->cb.output && out)
            s->cb.output(s->cb.output_userdata, &t, 1, RKNN3_OUTPUT_PREFILL_FINISHED);
        emit(s, NULL, 0, RKNN3_RUN_FINISH);
        free(out);
        free(rows);
        return NULL;
    }
    free(rows);
    int limit = m->reply_len, state = RKNN3_RUN_FINISH;
    if (s->max_new > 0 && s->max_new < limit) {
        limit = s->max_new;
        state = RKNN3_RUN_MAX_NEW_TOKEN_REACHED;
    }
    for (int k = 0; k < limit; k++) {
        sleep_ms(m->token_ms);
        if (atomic_load(&s->want_stop)) {
            state = RKNN3_RUN_STOP;
            break;
        }
        int32_t id = s->tokens[(n - 1 - (size_t)k % n)];
        emit(s, &id, 1, RKNN3_RUN_NORMAL);
    }
    emit(s, NULL, 0, state);
    return NULL;
}

int rknn3_session_run(void *session, struct rknn3_llm_input *inputs, uint32_t n_inputs,
                      struct rknn3_infer_param *param)
{
    struct fake_session *s = session;
    if (!s || !inputs || n_inputs != 1 || !param) return RKNN3_ERR_FAIL;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&s->is_running, &expected, 1)) {
        log_line("run BUSY");
        return RKNN3_ERR_FAIL;
    }
    const struct rknn3_llm_tensor *t = &inputs[0].u.llm;
    int rc = RKNN3_SUCCESS;
    if (inputs[0].input_type != RKNN3_LLM_INPUT_TOKEN || !t->tokens || t->n_tokens == 0 ||
        t->n_tokens > (uint64_t)s->ctx->m.max_ctx)
        rc = RKNN3_ERR_FAIL;
    for (uint64_t i = 0; rc == RKNN3_SUCCESS && i < t->n_tokens; i++)
        if (t->tokens[i] < 0 || t->tokens[i] >= s->ctx->m.vocab) rc = RKNN3_ERR_FAIL;
    bool is_gen = s->ctx->m.task == RKNN3_LLM_TASK_GENERATE;
    if (rc == RKNN3_SUCCESS && !is_gen && !(param->prefill_only && param->disable_sampling))
        rc = RKNN3_ERR_FAIL; // embeddings and rerankers want prefill only, no sampling
    log_line("run device=%s n_tokens=%llu max_new=%d keep_history=%d prefill_only=%d rc=%d",
             s->ctx->device, (unsigned long long)t->n_tokens, (int)param->max_new_tokens,
             (int)param->keep_history, (int)param->prefill_only, rc);
    if (rc == RKNN3_SUCCESS) {
        s->tokens = t->tokens;
        s->n_tokens = t->n_tokens;
        s->max_new = param->max_new_tokens;
        s->rc = RKNN3_SUCCESS;
        atomic_store(&s->want_stop, 0);
        pthread_t th;
        if (pthread_create(&th, NULL, run_thread, s) != 0) {
            rc = RKNN3_ERR_FAIL;
        } else {
            pthread_join(th, NULL);
            rc = s->rc;
        }
    }
    atomic_store(&s->is_running, 0);
    return rc;
}

int rknn3_session_destroy(void *session)
{
    struct fake_session *s = session;
    if (!s) return RKNN3_ERR_FAIL;
    if (atomic_load(&s->is_running)) {
        fprintf(stderr, "fake_rknn3: rknn3_session_destroy during a run\n");
        abort();
    }
    pthread_mutex_lock(&g_mu);
    s->ctx->session = NULL;
    pthread_mutex_unlock(&g_mu);
    free(s);
    return RKNN3_SUCCESS;
}
