/* Generation counters and the Prometheus text for GET /metrics. */
#include "api/metrics.h"

#include <stdio.h>
#include <string.h>

void metrics_init(struct metrics *m)
{
    atomic_init(&m->prompt_tokens, 0);
    atomic_init(&m->prompt_cached, 0);
    atomic_init(&m->prompt_us, 0);
    atomic_init(&m->predicted_tokens, 0);
    atomic_init(&m->predicted_us, 0);
    atomic_init(&m->n_decode, 0);
    atomic_init(&m->n_tokens_max, 0);
    atomic_init(&m->requests, 0);
    for (int i = 0; i < METRICS_REJECT_COUNT; i++)
        atomic_init(&m->rejected[i], 0);
}

void metrics_request_started(struct metrics *m)
{
    if (m) atomic_fetch_add(&m->requests, 1);
}

static uint64_t to_us(double ms)
{
    return ms > 0 ? (uint64_t)(ms * 1000.0 + 0.5) : 0;
}

void metrics_request_finished(struct metrics *m, const struct request_timings *t)
{
    if (!m) return;
    uint64_t n_prompt = t->n_prompt > 0 ? (uint64_t)t->n_prompt : 0;
    uint64_t n_pred = t->n_predicted > 0 ? (uint64_t)t->n_predicted : 0;
    atomic_fetch_add(&m->prompt_tokens, n_prompt);
    atomic_fetch_add(&m->prompt_cached, t->n_cached > 0 ? (uint64_t)t->n_cached : 0);
    atomic_fetch_add(&m->prompt_us, to_us(t->prompt_ms));
    atomic_fetch_add(&m->predicted_tokens, n_pred);
    atomic_fetch_add(&m->predicted_us, to_us(t->predicted_ms));
    // One batched step evaluates the prompt; each later token is one more step.
    atomic_fetch_add(&m->n_decode, (n_prompt > 0 ? 1u : 0u) + (n_pred > 0 ? n_pred - 1 : 0));
    uint64_t total = n_prompt + (t->n_cached > 0 ? (uint64_t)t->n_cached : 0) + n_pred;
    uint64_t seen = atomic_load(&m->n_tokens_max);
    while (total > seen && !atomic_compare_exchange_weak(&m->n_tokens_max, &seen, total))
        ;
}

void metrics_request_rejected(struct metrics *m, enum metrics_reject why)
{
    if (m && why >= 0 && why < METRICS_REJECT_COUNT) atomic_fetch_add(&m->rejected[why], 1);
}

void metrics_snapshot_take(struct metrics *m, struct metrics_snapshot *out)
{
    memset(out, 0, sizeof *out);
    out->prompt_tokens = atomic_load(&m->prompt_tokens);
    out->prompt_cached = atomic_load(&m->prompt_cached);
    out->prompt_us = atomic_load(&m->prompt_us);
    out->predicted_tokens = atomic_load(&m->predicted_tokens);
    out->predicted_us = atomic_load(&m->predicted_us);
    out->n_decode = atomic_load(&m->n_decode);
    out->n_tokens_max = atomic_load(&m->n_tokens_max);
    out->requests = atomic_load(&m->requests);
    for (int i = 0; i < METRICS_REJECT_COUNT; i++)
        out->rejected[i] = atomic_load(&m->rejected[i]);
}

const char *metrics_reject_name(enum metrics_reject why)
{
    return why == METRICS_REJECT_QUEUE_FULL ? "queue_full" : "unloading";
}

/* One metric with its HELP and TYPE lines and a single unlabelled sample. */
static int put_metric(struct buf *out, const char *name, const char *type, const char *help,
                      double value)
{
    return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name,
                      value);
}

/* A label value with Prometheus' escapes (backslash, double quote, newline). */
static int put_label_value(struct buf *out, const char *v)
{
    int rc = ERR_OK;
    for (const char *p = v; rc == ERR_OK && *p; p++) {
        if (*p == '\\' || *p == '"')
            rc = buf_append_byte(out, '\\') == ERR_OK ? buf_append_byte(out, *p) : ERR_NOMEM;
        else if (*p == '\n')
            rc = buf_append_cstr(out, "\\n");
        else
            rc = buf_append_byte(out, *p);
    }
    return rc;
}

static int put_model_sample(struct buf *out, const char *name, const char *model, const char *state,
                            int value)
{
    int rc = buf_printf(out, "%s{model=\"", name);
    if (rc == ERR_OK) rc = put_label_value(out, model);
    if (rc == ERR_OK && state) rc = buf_printf(out, "\",state=\"%s", state);
    if (rc == ERR_OK) rc = buf_printf(out, "\"} %d\n", value);
    return rc;
}

static int format_models(const struct metrics_model *models, int n, struct buf *out)
{
    int rc = buf_append_cstr(out, "# HELP llamapi_queue_depth Requests waiting for an instance.\n"
                                  "# TYPE llamapi_queue_depth gauge\n");
    for (int i = 0; rc == ERR_OK && i < n; i++)
        rc =
            put_model_sample(out, "llamapi_queue_depth", models[i].id, NULL, models[i].queue_depth);
    if (rc == ERR_OK)
        rc = buf_append_cstr(out, "# HELP llamapi_instances Instances by state.\n"
                                  "# TYPE llamapi_instances gauge\n");
    for (int i = 0; rc == ERR_OK && i < n; i++) {
        const struct metrics_model *m = &models[i];
        rc = put_model_sample(out, "llamapi_instances", m->id, "idle", m->n_idle);
        if (rc == ERR_OK) rc = put_model_sample(out, "llamapi_instances", m->id, "busy", m->n_busy);
        if (rc == ERR_OK)
            rc = put_model_sample(out, "llamapi_instances", m->id, "loading", m->is_loading);
    }
    return rc;
}

int metrics_format(const struct metrics_snapshot *s, const struct metrics_model *models,
                   int n_models, struct buf *out)
{
    double prompt_s = (double)s->prompt_us / 1e6, predicted_s = (double)s->predicted_us / 1e6;
    const struct {
        const char *name, *type, *help;
        double value;
    } rows[] = {
        {"llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
         (double)s->prompt_tokens},
        {"llamacpp:prompt_tokens_cached_total", "counter",
         "Number of prompt tokens reused from the cache.", (double)s->prompt_cached},
        {"llamacpp:prompt_seconds_total", "counter", "Prompt process time.", prompt_s},
        {"llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
         (double)s->predicted_tokens},
        {"llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time.",
         predicted_s},
        {"llamacpp:n_decode_total", "counter", "Total number of decode steps.",
         (double)s->n_decode},
        {"llamacpp:n_tokens_max", "counter", "Largest observed n_tokens.", (double)s->n_tokens_max},
        // No speculative decoding here: llama-server's counters for it stay at zero.
        {"llamacpp:spec_decode_num_draft_tokens_total", "counter",
         "Draft tokens generated (no speculative decoding here).", 0},
        {"llamacpp:spec_decode_num_accepted_tokens_total", "counter",
         "Draft tokens accepted (no speculative decoding here).", 0},
        {"llamacpp:spec_decode_num_drafts_total", "counter",
         "Drafts generated (no speculative decoding here).", 0},
        {"llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
         prompt_s > 0 ? (double)s->prompt_tokens / prompt_s : 0},
        {"llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
         predicted_s > 0 ? (double)s->predicted_tokens / predicted_s : 0},
        {"llamacpp:requests_processing", "gauge", "Number of requests processing.",
         s->requests_processing},
        {"llamacpp:requests_deferred", "gauge", "Number of requests deferred.",
         s->requests_deferred},
        {"llamapi_requests_total", "counter", "Generation requests admitted.", (double)s->requests},
    };
    int rc = ERR_OK;
    for (size_t i = 0; rc == ERR_OK && i < sizeof rows / sizeof rows[0]; i++)
        rc = put_metric(out, rows[i].name, rows[i].type, rows[i].help, rows[i].value);
    if (rc == ERR_OK)
        rc = buf_append_cstr(out, "# HELP llamapi_requests_rejected_total Requests refused.\n"
                                  "# TYPE llamapi_requests_rejected_total counter\n");
    for (int i = 0; rc == ERR_OK && i < METRICS_REJECT_COUNT; i++)
        rc = buf_printf(out, "llamapi_requests_rejected_total{reason=\"%s\"} %llu\n",
                        metrics_reject_name((enum metrics_reject)i),
                        (unsigned long long)s->rejected[i]);
    if (rc == ERR_OK) rc = format_models(models, n_models, out);
    return rc;
}
