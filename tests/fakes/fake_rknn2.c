/* A fake librknnrt.so for tests: the same exported symbols and struct layouts (through our
 * mirror, platform/rockchip/rknn2_abi.h, whose layouts are checked against the published header by
 * its static asserts), no NPU. The "model" is a text file:
 *
 *   fake-rknn2
 *   seq_len 16            static sequence length of every input
 *   hidden 8              output width
 *   inputs int64 int64    one declared type per input (int64|int32|int16|float16), 1..3
 *                         inputs: input_ids, attention_mask, token_type_ids
 *   output tokens         "tokens": [1, S, H] per-token states; "pooled": [1, H]
 *   cores 3               NPU cores (core masks beyond them are refused)
 *   fail_init 2           the 2nd rknn_init of this file fails (partial loads)
 *   error_token 13        an input holding this id makes rknn_run fail
 *   run_ms 0              how long rknn_run takes
 *
 * Outputs are a pure function of the inputs: state[s][h] = mask[s] * (((id[s] * 31 + h * 7 +
 * s) % 17) - 8) / 8, pooled = state[0]. Inputs must be of the declared type and size, the
 * queries of the right size, a second rknn_run on a busy context fails, and rknn_destroy
 * during a run aborts the process (the server must never do it). With FAKE_RKNN2_LOG set,
 * every init, core mask and run is appended to that file as one line, for e2e assertions. */
#include "platform/rockchip/rknn2_abi.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CTX    64
#define MAX_INPUTS 3
#define MAX_PATHS  16

struct fake_model {
    int seq_len, hidden, n_inputs, cores, fail_init, error_token, run_ms;
    int32_t types[MAX_INPUTS];
    int is_pooled;
};

struct fake_ctx {
    int in_use;
    struct fake_model m;
    char path[512];
    int32_t core_mask;
    atomic_int is_running;
    int64_t *ids; // (n_inputs * seq_len) the inputs of the last inputs_set, as integers
    int has_inputs;
    float *out; // the last run's output
    int has_out;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_ctx g_ctx[MAX_CTX];
static struct {
    char path[512];
    int n_init;
} g_paths[MAX_PATHS];

int rknn_init(rknn2_context *ctx, void *model, uint32_t size, uint32_t flag, void *extend);
int rknn_query(rknn2_context ctx, int32_t cmd, void *info, uint32_t size);
int rknn_inputs_set(rknn2_context ctx, uint32_t n, struct rknn2_input *inputs);
int rknn_run(rknn2_context ctx, void *extend);
int rknn_outputs_get(rknn2_context ctx, uint32_t n, struct rknn2_output *outputs, void *extend);
int rknn_outputs_release(rknn2_context ctx, uint32_t n, struct rknn2_output *outputs);
int rknn_set_core_mask(rknn2_context ctx, int32_t mask);
int rknn_destroy(rknn2_context ctx);

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
    const char *path = getenv("FAKE_RKNN2_LOG");
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

static int parse_type(const char *s)
{
    if (strcmp(s, "int64") == 0) return RKNN2_TENSOR_INT64;
    if (strcmp(s, "int32") == 0) return RKNN2_TENSOR_INT32;
    if (strcmp(s, "int16") == 0) return RKNN2_TENSOR_INT16;
    if (strcmp(s, "float16") == 0) return RKNN2_TENSOR_FLOAT16;
    return -1;
}

static const char *type_name(int32_t t)
{
    switch (t) {
    case RKNN2_TENSOR_INT64:
        return "int64";
    case RKNN2_TENSOR_INT32:
        return "int32";
    case RKNN2_TENSOR_INT16:
        return "int16";
    case RKNN2_TENSOR_FLOAT16:
        return "float16";
    default:
        return "other";
    }
}

static size_t type_size(int32_t t)
{
    return t == RKNN2_TENSOR_INT64 ? 8 : t == RKNN2_TENSOR_INT32 ? 4 : 2;
}

static int read_model(const char *path, struct fake_model *m)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    *m = (struct fake_model){
        .seq_len = 16, .hidden = 8, .n_inputs = 2, .cores = 3, .error_token = -1};
    m->types[0] = m->types[1] = m->types[2] = RKNN2_TENSOR_INT64;
    int ok = fgets(line, sizeof line, f) && strncmp(line, "fake-rknn2", 10) == 0;
    while (ok && fgets(line, sizeof line, f)) {
        char key[32], a[32], b[32], c[32];
        int n = sscanf(line, "%31s %31s %31s %31s", key, a, b, c);
        if (n < 2) continue;
        if (strcmp(key, "seq_len") == 0) m->seq_len = atoi(a);
        if (strcmp(key, "hidden") == 0) m->hidden = atoi(a);
        if (strcmp(key, "cores") == 0) m->cores = atoi(a);
        if (strcmp(key, "fail_init") == 0) m->fail_init = atoi(a);
        if (strcmp(key, "error_token") == 0) m->error_token = atoi(a);
        if (strcmp(key, "run_ms") == 0) m->run_ms = atoi(a);
        if (strcmp(key, "output") == 0) m->is_pooled = strcmp(a, "pooled") == 0;
        if (strcmp(key, "inputs") == 0) {
            m->n_inputs = n - 1;
            const char *t[3] = {a, b, c};
            for (int i = 0; i < m->n_inputs; i++) {
                m->types[i] = parse_type(t[i]);
                ok = ok && m->types[i] >= 0;
            }
        }
    }
    fclose(f);
    return ok && m->seq_len > 0 && m->seq_len <= 4096 && m->hidden > 0 && m->hidden <= 4096 ? 0
                                                                                            : -1;
}

/* Counts inits per model file; true when this one is the configured failure. */
static int init_fails(const char *path, int fail_at)
{
    int n = 0;
    for (int i = 0; i < MAX_PATHS; i++) {
        if (g_paths[i].path[0] == 0 || strcmp(g_paths[i].path, path) == 0) {
            snprintf(g_paths[i].path, sizeof g_paths[i].path, "%s", path);
            n = ++g_paths[i].n_init;
            break;
        }
    }
    return fail_at > 0 && n == fail_at;
}

int rknn_init(rknn2_context *ctx, void *model, uint32_t size, uint32_t flag, void *extend)
{
    (void)flag;
    (void)extend;
    if (!ctx || !model || size != 0) return RKNN2_ERR_PARAM_INVALID; // path form only
    struct fake_model m;
    if (read_model(model, &m) != 0) return RKNN2_ERR_MODEL_INVALID;
    pthread_mutex_lock(&g_mu);
    int slot = -1;
    if (init_fails(model, m.fail_init)) {
        pthread_mutex_unlock(&g_mu);
        log_line("init %s fail", (const char *)model);
        return RKNN2_ERR_MALLOC_FAIL;
    }
    for (int i = 0; i < MAX_CTX && slot < 0; i++)
        if (!g_ctx[i].in_use) slot = i;
    if (slot < 0) {
        pthread_mutex_unlock(&g_mu);
        return RKNN2_ERR_MALLOC_FAIL;
    }
    struct fake_ctx *c = &g_ctx[slot];
    memset(c, 0, sizeof *c);
    c->in_use = 1;
    c->m = m;
    snprintf(c->path, sizeof c->path, "%s", (const char *)model);
    c->ids = calloc((size_t)m.n_inputs * (size_t)m.seq_len, sizeof *c->ids);
    c->out = calloc((size_t)m.seq_len * (size_t)m.hidden, sizeof *c->out);
    pthread_mutex_unlock(&g_mu);
    *ctx = (rknn2_context)(slot + 1);
    log_line("init %s ctx=%d", c->path, slot + 1);
    return RKNN2_SUCC;
}

static struct fake_ctx *get(rknn2_context ctx)
{
    if (ctx < 1 || ctx > MAX_CTX || !g_ctx[ctx - 1].in_use) return NULL;
    return &g_ctx[ctx - 1];
}

static void fill_attr(const struct fake_ctx *c, struct rknn2_tensor_attr *a, int is_input)
{
    uint32_t index = a->index;
    memset(a, 0, sizeof *a);
    a->index = index;
    a->fmt = RKNN2_TENSOR_UNDEFINED;
    if (is_input) {
        static const char *const names[] = {"input_ids", "attention_mask", "token_type_ids"};
        snprintf(a->name, sizeof a->name, "%s", names[index]);
        a->n_dims = 2;
        a->dims[0] = 1;
        a->dims[1] = (uint32_t)c->m.seq_len;
        a->n_elems = (uint32_t)c->m.seq_len;
        a->type = c->m.types[index];
        a->size = a->n_elems * (uint32_t)type_size(a->type);
    } else {
        snprintf(a->name, sizeof a->name, "%s", c->m.is_pooled ? "pooled" : "last_hidden_state");
        a->n_dims = c->m.is_pooled ? 2 : 3;
        a->dims[0] = 1;
        a->dims[1] = (uint32_t)(c->m.is_pooled ? c->m.hidden : c->m.seq_len);
        a->dims[2] = (uint32_t)c->m.hidden;
        a->n_elems = (uint32_t)(c->m.is_pooled ? c->m.hidden : c->m.seq_len * c->m.hidden);
        a->type = RKNN2_TENSOR_FLOAT16;
        a->size = a->n_elems * 2;
    }
    a->size_with_stride = a->size;
}

int rknn_query(rknn2_context ctx, int32_t cmd, void *info, uint32_t size)
{
    struct fake_ctx *c = get(ctx);
    if (!c) return RKNN2_ERR_CTX_INVALID;
    if (!info) return RKNN2_ERR_PARAM_INVALID;
    switch (cmd) {
    case RKNN2_QUERY_IN_OUT_NUM: {
        if (size != sizeof(struct rknn2_io_num)) return RKNN2_ERR_PARAM_INVALID;
        struct rknn2_io_num *n = info;
        n->n_input = (uint32_t)c->m.n_inputs;
        n->n_output = 1;
        return RKNN2_SUCC;
    }
    case RKNN2_QUERY_INPUT_ATTR:
    case RKNN2_QUERY_OUTPUT_ATTR: {
        if (size != sizeof(struct rknn2_tensor_attr)) return RKNN2_ERR_PARAM_INVALID;
        struct rknn2_tensor_attr *a = info;
        int is_input = cmd == RKNN2_QUERY_INPUT_ATTR;
        if (a->index >= (uint32_t)(is_input ? c->m.n_inputs : 1)) return RKNN2_ERR_PARAM_INVALID;
        fill_attr(c, a, is_input);
        return RKNN2_SUCC;
    }
    case RKNN2_QUERY_SDK_VERSION: {
        if (size != sizeof(struct rknn2_sdk_version)) return RKNN2_ERR_PARAM_INVALID;
        struct rknn2_sdk_version *v = info;
        snprintf(v->api_version, sizeof v->api_version, "2.3.2 (fake)");
        snprintf(v->drv_version, sizeof v->drv_version, "0.9.8");
        return RKNN2_SUCC;
    }
    default:
        return RKNN2_ERR_PARAM_INVALID;
    }
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023u, bits;
    if (exp == 0 && man == 0) {
        bits = sign;
    } else if (exp == 0) { // subnormal
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 1024u));
        bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 1023u) << 13;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int rknn_inputs_set(rknn2_context ctx, uint32_t n, struct rknn2_input *inputs)
{
    struct fake_ctx *c = get(ctx);
    if (!c) return RKNN2_ERR_CTX_INVALID;
    if (!inputs || n != (uint32_t)c->m.n_inputs) return RKNN2_ERR_PARAM_INVALID;
    for (uint32_t i = 0; i < n; i++) {
        const struct rknn2_input *in = &inputs[i];
        int32_t want = c->m.types[in->index < n ? in->index : 0];
        if (in->index >= n || !in->buf || in->type != want ||
            in->size != (uint32_t)c->m.seq_len * type_size(want))
            return RKNN2_ERR_INPUT_INVALID;
        for (int s = 0; s < c->m.seq_len; s++) {
            const unsigned char *p = (const unsigned char *)in->buf + (size_t)s * type_size(want);
            int64_t v = 0;
            if (want == RKNN2_TENSOR_INT64) {
                memcpy(&v, p, 8);
            } else if (want == RKNN2_TENSOR_INT32) {
                int32_t x;
                memcpy(&x, p, 4);
                v = x;
            } else if (want == RKNN2_TENSOR_INT16) {
                int16_t x;
                memcpy(&x, p, 2);
                v = x;
            } else {
                uint16_t x;
                memcpy(&x, p, 2);
                v = (int64_t)half_to_float(x);
            }
            c->ids[(size_t)in->index * (size_t)c->m.seq_len + (size_t)s] = v;
        }
    }
    c->has_inputs = 1;
    return RKNN2_SUCC;
}

static void describe_inputs(const struct fake_ctx *c, char *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < c->m.n_inputs && n < cap; i++) {
        n += (size_t)snprintf(out + n, cap - n, " in%d=%s:", i, type_name(c->m.types[i]));
        for (int s = 0; s < c->m.seq_len && n < cap; s++)
            n += (size_t)snprintf(out + n, cap - n, "%s%lld", s ? "," : "",
                                  (long long)c->ids[(size_t)i * (size_t)c->m.seq_len + (size_t)s]);
    }
}

int rknn_run(rknn2_context ctx, void *extend)
{
    (void)extend;
    struct fake_ctx *c = get(ctx);
    if (!c) return RKNN2_ERR_CTX_INVALID;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&c->is_running, &expected, 1)) {
        log_line("run ctx=%d BUSY", (int)ctx);
        return RKNN2_ERR_FAIL; // the server must run one call per context at a time
    }
    int rc = c->has_inputs ? RKNN2_SUCC : RKNN2_ERR_INPUT_INVALID;
    if (c->m.run_ms > 0) {
        struct timespec ts = {c->m.run_ms / 1000, (long)(c->m.run_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    const int64_t *ids = c->ids, *mask = c->m.n_inputs > 1 ? c->ids + c->m.seq_len : NULL;
    for (int s = 0; rc == RKNN2_SUCC && s < c->m.seq_len; s++) {
        if (ids[s] == c->m.error_token) rc = RKNN2_ERR_FAIL;
        for (int h = 0; h < c->m.hidden; h++) {
            int64_t m = mask ? mask[s] : 1;
            int64_t k = ((ids[s] * 31 + h * 7 + s) % 17 + 17) % 17;
            c->out[(size_t)s * (size_t)c->m.hidden + (size_t)h] = (float)m * (float)(k - 8) / 8.0f;
        }
    }
    c->has_out = rc == RKNN2_SUCC;
    char buf[8192];
    buf[0] = 0;
    describe_inputs(c, buf, sizeof buf);
    log_line("run ctx=%d mask=%d rc=%d%s", (int)ctx, (int)c->core_mask, rc, buf);
    atomic_store(&c->is_running, 0);
    return rc;
}

int rknn_outputs_get(rknn2_context ctx, uint32_t n, struct rknn2_output *outputs, void *extend)
{
    (void)extend;
    struct fake_ctx *c = get(ctx);
    if (!c) return RKNN2_ERR_CTX_INVALID;
    if (n != 1 || !outputs || outputs[0].index != 0 || !c->has_out) return RKNN2_ERR_OUTPUT_INVALID;
    if (!outputs[0].want_float || outputs[0].is_prealloc) return RKNN2_ERR_PARAM_INVALID;
    size_t count = (size_t)(c->m.is_pooled ? 1 : c->m.seq_len) * (size_t)c->m.hidden;
    float *buf = malloc(count * sizeof *buf);
    if (!buf) return RKNN2_ERR_MALLOC_FAIL;
    memcpy(buf, c->out, count * sizeof *buf); // pooled: the first position's state
    outputs[0].buf = buf;
    outputs[0].size = (uint32_t)(count * sizeof *buf);
    return RKNN2_SUCC;
}

int rknn_outputs_release(rknn2_context ctx, uint32_t n, struct rknn2_output *outputs)
{
    if (!get(ctx)) return RKNN2_ERR_CTX_INVALID;
    for (uint32_t i = 0; outputs && i < n; i++) {
        free(outputs[i].buf);
        outputs[i].buf = NULL;
    }
    return RKNN2_SUCC;
}

int rknn_set_core_mask(rknn2_context ctx, int32_t mask)
{
    struct fake_ctx *c = get(ctx);
    if (!c) return RKNN2_ERR_CTX_INVALID;
    static const int32_t valid[] = {0, 1, 2, 4, 3, 7, 0xffff};
    int ok = 0;
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        ok = ok || valid[i] == mask;
    if (!ok || (mask != 0 && mask != 0xffff && mask >= (1 << c->m.cores))) {
        log_line("core_mask ctx=%d mask=%d refused", (int)ctx, (int)mask);
        return RKNN2_ERR_PARAM_INVALID;
    }
    c->core_mask = mask;
    log_line("core_mask ctx=%d mask=%d", (int)ctx, (int)mask);
    return RKNN2_SUCC;
}

int rknn_destroy(rknn2_context ctx)
{
    pthread_mutex_lock(&g_mu);
    struct fake_ctx *c = get(ctx);
    if (!c) {
        pthread_mutex_unlock(&g_mu);
        return RKNN2_ERR_CTX_INVALID;
    }
    if (atomic_load(&c->is_running)) {
        fprintf(stderr, "fake_rknn2: rknn_destroy during rknn_run\n");
        abort();
    }
    free(c->ids);
    free(c->out);
    log_line("destroy ctx=%d", (int)ctx);
    memset(c, 0, sizeof *c);
    pthread_mutex_unlock(&g_mu);
    return RKNN2_SUCC;
}
