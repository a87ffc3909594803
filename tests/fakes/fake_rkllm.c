/* A fake RKLLM runtime (librkllmrt.so) for the e2e tests: the symbols the rkllm platform
 * calls, with the struct layouts of one ABI (FAKE_RKLLM_ABI=12 for 1.2.1-1.2.3, 120 for a
 * 1.2.0 / 1.2.1b1 look-alike, else 1.3.0), and the behaviours the server must cope with:
 *  - rkllm_createDefaultParam returns the release's RKLLMParam by value with the defaults the
 *    server's ABI probe reads (enabled_cpus_num = 4); rkllm_get_kv_cache_size is exported from
 *    1.2.1 on and missing from the 1.2.0 / 1.2.1b1 look-alike, whose rkllm_init refuses to run
 *    (the server must never reach it);
 *  - rkllm_run blocks while a thread of its own delivers the result callbacks; the output is
 *    derived from the input (its role and length), and carries "é" and "€" each split across a
 *    WAITING callback and the next one; FINISH carries perf (prefill tokens = prompt bytes / 4,
 *    rounded up; generate tokens = token callbacks);
 *  - FAKE_RESEND: NORMAL texts that send WAITING bytes again (see the sequence's comment);
 *  - prompts containing FAKE_ERROR end with an ERROR callback (run returns -1), FAKE_SLOW
 *    produces 400 tokens 20 ms apart, FAKE_TOOL a Hermes tool call, FAKE_THINK a think block,
 *    FAKE_STOP a text with "STOPHERE" in it;
 *  - max_new_tokens (init-time, or per run in 1.3) is honoured;
 *  - rkllm_abort takes effect FAKE_RKLLM_ABORT_DELAY_MS (default 150) after it is called, as a
 *    prefill that cannot be interrupted;
 *  - misuse is reported on stderr with "FAKE-RKLLM-VIOLATION" (the tests look for it): a run
 *    on a busy handle (fails with -1), abort from inside a callback, a base_domain_id the rknpu
 *    driver 0.9.8 would refuse (16 or more: RKNPU_MAX_IOMMU_DOMAIN_NUM in
 *    rknn-llm rknpu-driver/rknpu_driver_0.9.8_20241009 rknpu_drv.h; init fails), implausible
 *    param values (a wrong ABI layout); destroy during a run aborts the process. Handles may
 *    share a domain, as every rknn2 context shares domain 0 in that driver;
 *  - FAKE_RKLLM_FAIL_INIT=N makes the Nth rkllm_init fail (partial loads);
 *  - FAKE_RKLLM_INIT_MS=N makes every rkllm_init take N ms (a model seen while it loads);
 *  - FAKE_RKLLM_RECORD=FILE appends one JSON line per init and per run with what was passed.
 * Its own code: no vendor code. */
#include "platform/rockchip/rkllm_abi.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* rknn-llm rkllm.h at v1.2.0 (cb5b341) and v1.2.1b1 (d8a9f6a): RKLLMParam has 1.2.1's 208-byte
 * layout, while RKLLMInput starts with input_type and RKLLMResult is 48 bytes, and neither
 * declares rkllm_get_kv_cache_size (first in v1.2.1, d546a0f). */
#if defined(FAKE_RKLLM_ABI) && FAKE_RKLLM_ABI == 120
#define FAKE_RKLLM_OLD_12
#undef FAKE_RKLLM_ABI
#define FAKE_RKLLM_ABI 12
#endif

#if defined(FAKE_RKLLM_ABI) && FAKE_RKLLM_ABI == 12
typedef struct rkllm12_param param_t;
typedef struct rkllm12_input input_t;
typedef struct rkllm12_infer infer_t;
#define ABI_NAME "1.2"
#else
typedef struct rkllm13_param param_t;
typedef struct rkllm13_input input_t;
typedef struct rkllm13_infer infer_t;
#define ABI_NAME "1.3"
#endif

#define MAX_HANDLES 64
#define MAX_DOMAINS 16 // RKNPU_MAX_IOMMU_DOMAIN_NUM, rknpu_drv.h, rknpu driver 0.9.8

struct handle {
    int domain;
    int slot; // in handles[]
    int32_t max_context_len, max_new_tokens;
    float temperature, top_p;
    int32_t top_k;
    bool is_template_cleared;
    rkllm_result_fn cb;
    void *cb_userdata;
    atomic_bool is_running;
    atomic_llong abort_at_ms; // 0: no abort asked
    pthread_t gen_thread;
    atomic_bool has_gen_thread;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; // handles[], the record file, n_inits
static struct handle *handles[MAX_HANDLES];
static int n_inits;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static void violation(const char *what)
{
    fprintf(stderr, "FAKE-RKLLM-VIOLATION: %s\n", what);
    fflush(stderr);
}

/* Appends s to f as a JSON string. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Whether s[0..n) ends inside a UTF-8 character (the runtime then calls back WAITING). */
static bool ends_split(const char *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back;
    }
    return false;
}

static FILE *record_open(void)
{
    const char *path = getenv("FAKE_RKLLM_RECORD");
    return path && *path ? fopen(path, "a") : NULL;
}

/* By value, as rkllm.h declares it in every release; enabled_cpus_num = 4 is the documented
 * default of RKLLMExtendParam from v1.2.0 on (rknn-llm doc/Rockchip_RKLLM_SDK, rkllm.h). */
param_t rkllm_createDefaultParam(void);
param_t rkllm_createDefaultParam(void)
{
    param_t p;
    memset(&p, 0, sizeof p);
    p.max_context_len = 512;
    p.max_new_tokens = -1;
    p.top_k = 40;
    p.top_p = 0.9f;
    p.temperature = 0.8f;
    p.repeat_penalty = 1.1f;
    p.mirostat_tau = 5.0f;
    p.mirostat_eta = 0.1f;
    p.extend_param.enabled_cpus_num = 4;
    return p;
}

#if defined(FAKE_RKLLM_ABI) && FAKE_RKLLM_ABI == 12
int rkllm_init(void **handle, param_t *param, rkllm_result_fn cb);
int rkllm_init(void **handle, param_t *param, rkllm_result_fn cb)
{
    void *userdata = NULL;
#else
int rkllm_init(void **handle, param_t *param, struct rkllm13_callbacks *cbs);
int rkllm_init(void **handle, param_t *param, struct rkllm13_callbacks *cbs)
{
    rkllm_result_fn cb = cbs ? cbs->result : NULL;
    void *userdata = cbs ? cbs->result_userdata : NULL;
#endif
    *handle = NULL;
#ifdef FAKE_RKLLM_OLD_12
    // A 1.2.0 / 1.2.1b1 runtime reads 1.2.1's RKLLMInput wrongly: being initialised at all means
    // the server's ABI probe let it through.
    violation("rkllm_init on a 1.2.0/1.2.1b1 runtime");
    return -1;
#endif
    if (!param || !cb || param->max_context_len < 1 || param->max_context_len > (1 << 20) ||
        param->extend_param.enabled_cpus_num < 1 || param->extend_param.enabled_cpus_num > 8) {
        violation("rkllm_init: implausible parameters (wrong ABI layout?)");
        return -1;
    }
    if (param->extend_param.base_domain_id < 0 ||
        param->extend_param.base_domain_id >= MAX_DOMAINS) {
        violation("rkllm_init: base_domain_id outside the driver's 0..15");
        return -1;
    }
    sleep_ms(env_int("FAKE_RKLLM_INIT_MS", 0));
    FILE *model = param->model_path ? fopen(param->model_path, "rb") : NULL;
    if (!model) return -1;
    fclose(model);
    pthread_mutex_lock(&mu);
    int n = ++n_inits;
    int domain = param->extend_param.base_domain_id;
    int rc = 0, slot = 0;
    while (slot < MAX_HANDLES && handles[slot])
        slot++;
    if (n == env_int("FAKE_RKLLM_FAIL_INIT", 0) || slot == MAX_HANDLES)
        rc = -1; // as the NPU refusing one more model copy
    struct handle *h = rc == 0 ? calloc(1, sizeof *h) : NULL;
    if (rc == 0 && !h) rc = -1;
    if (h) {
        h->domain = domain;
        h->slot = slot;
        h->max_context_len = param->max_context_len;
        h->max_new_tokens = param->max_new_tokens;
        h->temperature = param->temperature;
        h->top_p = param->top_p;
        h->top_k = param->top_k;
        h->cb = cb;
        h->cb_userdata = userdata;
        handles[slot] = h;
        *handle = h;
    }
    FILE *f = record_open();
    if (f) {
        fprintf(f,
                "{\"event\":\"init\",\"abi\":\"%s\",\"n\":%d,\"ok\":%s,\"domain\":%d,"
                "\"max_context_len\":%d,\"cpus_num\":%d,\"cpus_mask\":%u,\"embed_flash\":%d,"
                "\"skip_special_token\":%s}\n",
                ABI_NAME, n, rc == 0 ? "true" : "false", domain, (int)param->max_context_len,
                (int)param->extend_param.enabled_cpus_num,
                (unsigned)param->extend_param.enabled_cpus_mask,
                (int)param->extend_param.embed_flash, param->skip_special_token ? "true" : "false");
        fclose(f);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int rkllm_set_chat_template(void *handle, const char *system, const char *prefix,
                            const char *postfix);
int rkllm_set_chat_template(void *handle, const char *system, const char *prefix,
                            const char *postfix)
{
    struct handle *h = handle;
    if (!h || !system || !prefix || !postfix) return -1;
    h->is_template_cleared = !system[0] && !prefix[0] && !postfix[0];
    return 0;
}

#ifndef FAKE_RKLLM_OLD_12
/* rkllm.h v1.2.1 (d546a0f) through v1.3.0 (878f936): the positions held in the KV cache, one
 * per batch slot; every run of ours starts from an empty cache. */
int rkllm_get_kv_cache_size(void *handle, int *cache_sizes);
int rkllm_get_kv_cache_size(void *handle, int *cache_sizes)
{
    if (!handle || !cache_sizes) return -1;
    cache_sizes[0] = 0;
    return 0;
}
#endif

int rkllm_destroy(void *handle);
int rkllm_destroy(void *handle)
{
    struct handle *h = handle;
    if (!h) return -1;
    if (atomic_load(&h->is_running)) {
        violation("rkllm_destroy during a run");
        abort();
    }
    pthread_mutex_lock(&mu);
    handles[h->slot] = NULL;
    pthread_mutex_unlock(&mu);
    free(h);
    return 0;
}

int rkllm_abort(void *handle);
int rkllm_abort(void *handle)
{
    struct handle *h = handle;
    if (!h) return -1;
    if (atomic_load(&h->has_gen_thread) && pthread_equal(pthread_self(), h->gen_thread))
        violation("rkllm_abort called from inside a result callback");
    long long expected = 0;
    atomic_compare_exchange_strong(&h->abort_at_ms, &expected,
                                   now_ms() + env_int("FAKE_RKLLM_ABORT_DELAY_MS", 150));
    return 0;
}

/* One run: what the generator thread needs. */
struct job {
    struct handle *h;
    const char *prompt;
    const char *role;
    int max_new;
    void *userdata;
    int rc;
};

static bool is_aborted(struct handle *h)
{
    long long at = atomic_load(&h->abort_at_ms);
    return at != 0 && now_ms() >= at;
}

/* Delivers one token; false when the run must end (aborted or the limit reached). */
static bool emit(struct job *j, int *n, const char *text, int state)
{
    if (is_aborted(j->h) || (j->max_new > 0 && *n >= j->max_new)) return false;
    struct rkllm_result res;
    memset(&res, 0, sizeof res);
    res.text = text;
    res.token_id = *n;
    (*n)++;
    j->h->cb(&res, j->userdata, state);
    sleep_ms(env_int("FAKE_RKLLM_TOKEN_MS", 2));
    return true;
}

static void *generate(void *arg)
{
    struct job *j = arg;
    int n = 0;
    long long t0 = now_ms();
    const char *p = j->prompt;
    bool ok = true;
    if (strstr(p, "FAKE_SLOW")) {
        for (int k = 0; k < 400 && ok; k++) {
            ok = emit(j, &n, "tick ", RKLLM_STATE_NORMAL);
            sleep_ms(20);
        }
    } else if (strstr(p, "FAKE_ERROR")) {
        emit(j, &n, "partial", RKLLM_STATE_NORMAL);
        struct rkllm_result res;
        memset(&res, 0, sizeof res);
        j->h->cb(&res, j->userdata, RKLLM_STATE_ERROR);
        j->rc = -1;
        return NULL;
    } else {
        static const char *const tool[] = {"<tool_call>",
                                           "\n{\"name\": \"get_weather\", ",
                                           "\"arguments\": {\"city\": \"Paris\"}}",
                                           "\n",
                                           "</tool_call>",
                                           NULL};
        static const char *const think[] = {"<think>", "pondering", "</think>", "Answer.", NULL};
        static const char *const stop[] = {"alpha ", "beta ", "STOP", "HERE", " gamma", NULL};
        // FAKE_RESEND: a runtime whose NORMAL text sends the bytes of its WAITING callbacks
        // again (whole characters before the split one included), which is what the vendor's
        // consumers assume when they print NORMAL text and ignore WAITING (rknn-llm
        // examples/rkllm_api_demo/deploy/src/llm_demo.cpp v1.3.0; rkllm_server_demo
        // flask_server.py callback since v1.2.0); the last pair re-sends the split character
        // only.
        static const char *const resend[] = {
            "Hi ",          "caf\xC3",    "caf\xC3\xA9 ",     "\xE2", "\xE2\x82",
            "\xE2\x82\xAC", " x\xF0\x9F", "\xF0\x9F\x98\x80", " ok.", NULL};
        if (strstr(p, "FAKE_RESEND")) {
            for (int k = 0; resend[k] && ok; k++) {
                size_t len = strlen(resend[k]);
                bool split = len > 0 && ends_split(resend[k], len);
                ok = emit(j, &n, resend[k], split ? RKLLM_STATE_WAITING : RKLLM_STATE_NORMAL);
            }
        }
        const char *const *list = strstr(p, "FAKE_RESEND")  ? NULL
                                  : strstr(p, "FAKE_TOOL")  ? tool
                                  : strstr(p, "FAKE_THINK") ? think
                                  : strstr(p, "FAKE_STOP")  ? stop
                                                            : NULL;
        if (list) {
            for (int k = 0; list[k] && ok; k++)
                ok = emit(j, &n, list[k], RKLLM_STATE_NORMAL);
        } else if (!strstr(p, "FAKE_RESEND")) {
            char head[96];
            snprintf(head, sizeof head, "%zu", strlen(p));
            const struct {
                const char *text;
                int state;
            } seq[] = {
                {"Hello", RKLLM_STATE_NORMAL},     {" ", RKLLM_STATE_NORMAL},
                {j->role, RKLLM_STATE_NORMAL},     {" (", RKLLM_STATE_NORMAL},
                {head, RKLLM_STATE_NORMAL},        {" bytes): caf", RKLLM_STATE_NORMAL},
                {"\xC3", RKLLM_STATE_WAITING},     {"\xA9 ", RKLLM_STATE_NORMAL},
                {"\xE2\x82", RKLLM_STATE_WAITING}, {"\xAC", RKLLM_STATE_NORMAL},
                {" ok.", RKLLM_STATE_NORMAL},
            };
            for (size_t k = 0; k < sizeof seq / sizeof seq[0] && ok; k++)
                ok = emit(j, &n, seq[k].text, seq[k].state);
        }
    }
    struct rkllm_result res;
    memset(&res, 0, sizeof res);
    res.perf.prefill_tokens = (int32_t)((strlen(p) + 3) / 4);
    res.perf.prefill_time_ms = 1.5f;
    res.perf.generate_tokens = n;
    res.perf.generate_time_ms = (float)(now_ms() - t0);
    res.perf.memory_usage_mb = 42.0f;
    j->h->cb(&res, j->userdata, RKLLM_STATE_FINISH);
    return NULL;
}

int rkllm_run(void *handle, input_t *input, infer_t *infer, void *userdata);
int rkllm_run(void *handle, input_t *input, infer_t *infer, void *userdata)
{
    struct handle *h = handle;
    if (!h || !input || !infer) return -1;
    bool was_running = false;
    if (!atomic_compare_exchange_strong(&h->is_running, &was_running, true)) {
        violation("rkllm_run on a busy handle");
        return -1;
    }
    atomic_store(&h->abort_at_ms, 0);
    int max_new = h->max_new_tokens;
#if !defined(FAKE_RKLLM_ABI) || FAKE_RKLLM_ABI != 12
    if (infer->max_new_tokens > 0) max_new = infer->max_new_tokens;
    const struct rkllm13_sampling *s = infer->sampling;
#endif
    int rc = 0;
    if (input->input_type != RKLLM_INPUT_PROMPT || !input->u.prompt || !input->role ||
        (strcmp(input->role, "user") != 0 && strcmp(input->role, "tool") != 0) ||
        infer->mode != RKLLM_MODE_GENERATE || infer->keep_history != 0) {
        violation("rkllm_run: unexpected input (type, role, mode or keep_history)");
        rc = -1;
    }
    FILE *f = record_open();
    if (f) {
        pthread_mutex_lock(&mu);
        fprintf(f, "{\"event\":\"run\",\"abi\":\"%s\",\"domain\":%d,\"role\":", ABI_NAME,
                h->domain);
        json_str(f, input->role);
        fprintf(f, ",\"enable_thinking\":%s,\"template_cleared\":%s,\"max_new_tokens\":%d,",
                input->enable_thinking ? "true" : "false",
                h->is_template_cleared ? "true" : "false", max_new);
#if !defined(FAKE_RKLLM_ABI) || FAKE_RKLLM_ABI != 12
        if (s)
            fprintf(f,
                    "\"sampling\":{\"temperature\":%g,\"top_p\":%g,\"top_k\":%d,"
                    "\"repeat_penalty\":%g,\"frequency_penalty\":%g,\"presence_penalty\":%g},",
                    (double)s->temperature, (double)s->top_p, (int)s->top_k,
                    (double)s->repeat_penalty, (double)s->frequency_penalty,
                    (double)s->presence_penalty);
#endif
        fprintf(f, "\"prompt\":");
        json_str(f, rc == 0 ? input->u.prompt : "");
        fprintf(f, "}\n");
        fclose(f);
        pthread_mutex_unlock(&mu);
    }
    if (rc == 0) {
        struct job j = {h, input->u.prompt, input->role, max_new, userdata, 0};
        if (pthread_create(&h->gen_thread, NULL, generate, &j) != 0) {
            rc = -1;
        } else {
            atomic_store(&h->has_gen_thread, true);
            pthread_join(h->gen_thread, NULL);
            atomic_store(&h->has_gen_thread, false);
            rc = j.rc;
        }
    }
    atomic_store(&h->is_running, false);
    return rc;
}
