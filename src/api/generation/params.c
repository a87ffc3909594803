/* Parameter validation shared by the model-management and generation endpoints. */
#include "api/generation/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int params_stop_list(const json_t *stop, const char *name, const char **out, struct api_fail *f)
{
    if (!stop || json_is_null(stop)) return 0;
    if (json_is_string(stop)) {
        if (json_string_length(stop) == 0 || json_string_length(stop) > PARAMS_STOP_MAX_LEN) {
            api_failf(f, 400, "invalid_value", name, "'%s' must be 1 to %d bytes long", name,
                      PARAMS_STOP_MAX_LEN);
            return -1;
        }
        out[0] = json_string_value(stop);
        return 1;
    }
    if (!json_is_array(stop)) {
        api_failf(f, 400, "invalid_type", name,
                  "Invalid type for '%s': expected a string or an array of strings, but got %s.",
                  name, v_type_name(stop));
        return -1;
    }
    if (json_array_size(stop) > PARAMS_MAX_STOP) {
        api_failf(f, 400, "invalid_value", name, "'%s' has %zu entries; at most %d", name,
                  json_array_size(stop), PARAMS_MAX_STOP);
        return -1;
    }
    int n = 0;
    size_t i;
    const json_t *s;
    json_array_foreach(stop, i, s)
    {
        char item[160];
        snprintf(item, sizeof item, "%s[%zu]", name, i);
        if (!json_is_string(s)) {
            api_failf(f, 400, "invalid_type", item,
                      "Invalid type for '%s': expected a string, but got %s.", item,
                      v_type_name(s));
            return -1;
        }
        if (json_string_length(s) == 0 || json_string_length(s) > PARAMS_STOP_MAX_LEN) {
            api_failf(f, 400, "invalid_value", item, "'%s' must be 1 to %d bytes long", item,
                      PARAMS_STOP_MAX_LEN);
            return -1;
        }
        out[n++] = json_string_value(s);
    }
    return n;
}

bool params_validate_defaults(json_t *dp, struct api_fail *f)
{
    static const char *const known[] = {
        "temperature",      "top_p",      "top_k",           "repeat_penalty", "frequency_penalty",
        "presence_penalty", "max_tokens", "max_context_len", "stop",           "enable_thinking",
    };
    if (!json_is_object(dp))
        return api_failf(f, 400, "invalid_type", "default_params",
                         "Invalid type for 'default_params': expected an object, but got %s.",
                         v_type_name(dp));
    const char *key;
    json_t *v;
    json_object_foreach(dp, key, v)
    {
        bool is_known = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            is_known |= strcmp(key, known[i]) == 0;
        if (!is_known)
            return api_failf(f, 400, "unknown_parameter", "default_params",
                             "Unknown key 'default_params.%.100s' (known: temperature, top_p, "
                             "top_k, repeat_penalty, frequency_penalty, presence_penalty, "
                             "max_tokens, max_context_len, stop, enable_thinking).",
                             key);
    }
    double d;
    int64_t n;
    bool b;
    const char *stops[PARAMS_MAX_STOP];
    return v_number(dp, "temperature", "default_params.temperature", 0, 2, &d, f) &&
           v_number(dp, "top_p", "default_params.top_p", 0, 1, &d, f) &&
           v_int(dp, "top_k", "default_params.top_k", 0, 1000000, &n, f) &&
           v_number(dp, "repeat_penalty", "default_params.repeat_penalty", 0, 10, &d, f) &&
           v_number(dp, "frequency_penalty", "default_params.frequency_penalty", -2, 2, &d, f) &&
           v_number(dp, "presence_penalty", "default_params.presence_penalty", -2, 2, &d, f) &&
           v_int(dp, "max_tokens", "default_params.max_tokens", 1, INT32_MAX, &n, f) &&
           v_int(dp, "max_context_len", "default_params.max_context_len", 16, 1 << 20, &n, f) &&
           v_bool(dp, "enable_thinking", "default_params.enable_thinking", &b, f) &&
           params_stop_list(json_object_get(dp, "stop"), "default_params.stop", stops, f) >= 0;
}

/* Applies the sampling fields of one JSON object (default_params or the request). */
static bool apply_sampling(const json_t *o, const char *prefix, struct gen_params *g,
                           struct api_fail *f)
{
    char name[8][96];
    const char *keys[8] = {
        "temperature",      "top_p", "top_k", "min_p", "repeat_penalty", "frequency_penalty",
        "presence_penalty", "seed"};
    for (int i = 0; i < 8; i++)
        snprintf(name[i], sizeof name[i], "%s%s", prefix, keys[i]);
    double temperature = g->temperature, top_p = g->top_p, min_p = g->min_p;
    double repeat = g->repeat_penalty, freq = g->frequency_penalty, pres = g->presence_penalty;
    int64_t top_k = g->top_k, seed = g->seed;
    bool ok = v_number(o, "temperature", name[0], 0, 2, &temperature, f) &&
              v_number(o, "top_p", name[1], 0, 1, &top_p, f) &&
              v_int(o, "top_k", name[2], 0, 1000000, &top_k, f) &&
              v_number(o, "min_p", name[3], 0, 1, &min_p, f) &&
              v_number(o, "repeat_penalty", name[4], 0.000001, 10, &repeat, f) &&
              v_number(o, "frequency_penalty", name[5], -2, 2, &freq, f) &&
              v_number(o, "presence_penalty", name[6], -2, 2, &pres, f) &&
              v_int(o, "seed", name[7], INT64_MIN, INT64_MAX, &seed, f);
    if (!ok) return false;
    g->temperature = (float)temperature;
    g->top_p = (float)top_p;
    g->top_k = (int)top_k;
    g->min_p = (float)min_p;
    g->repeat_penalty = (float)repeat;
    g->frequency_penalty = (float)freq;
    g->presence_penalty = (float)pres;
    g->seed = seed;
    return true;
}

static bool apply_logit_bias(json_t *lb, int n_vocab, struct gen_params *g, struct api_fail *f)
{
    if (!lb || json_is_null(lb)) return true;
    if (!json_is_object(lb))
        return api_failf(f, 400, "invalid_type", "logit_bias",
                         "Invalid type for 'logit_bias': expected an object, but got %s.",
                         v_type_name(lb));
    if (json_object_size(lb) > GEN_MAX_LOGIT_BIAS)
        return api_failf(f, 400, "invalid_value", "logit_bias", "at most %d entries",
                         GEN_MAX_LOGIT_BIAS);
    const char *key;
    json_t *v;
    json_object_foreach(lb, key, v)
    {
        char *end;
        long id = strtol(key, &end, 10);
        if (*key == '\0' || *end != '\0' || id < 0 || id >= n_vocab)
            return api_failf(f, 400, "invalid_value", "logit_bias",
                             "logit_bias key '%.40s' is not a token id of this model", key);
        if (!json_is_number(v) || json_number_value(v) < -100 || json_number_value(v) > 100)
            return api_failf(f, 400, "invalid_value", "logit_bias",
                             "logit_bias values must be numbers in [-100, 100]");
        double b = json_number_value(v);
        g->logit_bias[g->n_logit_bias].token = (int32_t)id;
        g->logit_bias[g->n_logit_bias].bias = b <= -100 ? -INFINITY : (float)b;
        g->n_logit_bias++;
    }
    return true;
}

static bool apply_limits(const json_t *o, const struct params_names *names,
                         struct gen_request_params *out, struct api_fail *f)
{
    int64_t max_tokens = out->gen.max_tokens;
    if (!v_int(o, names->max_tokens, names->max_tokens, 1, INT32_MAX, &max_tokens, f)) return false;
    if (names->max_tokens_alt &&
        !v_int(o, names->max_tokens_alt, names->max_tokens_alt, 1, INT32_MAX, &max_tokens, f))
        return false;
    out->gen.max_tokens = (int)max_tokens;
    const json_t *stop = json_object_get(o, names->stop);
    if (stop) {
        int n = params_stop_list(stop, names->stop, out->stops, f);
        if (n < 0) return false;
        out->n_stops = n;
    }
    bool thinking = false;
    if (!v_bool(o, "enable_thinking", "enable_thinking", &thinking, f)) return false;
    if (json_object_get(o, "enable_thinking")) out->enable_thinking = thinking;
    return true;
}

bool params_merge(const json_t *default_params, const json_t *body,
                  const struct params_names *names, int n_vocab, struct gen_request_params *out,
                  struct api_fail *f)
{
    return params_merge_base(NULL, default_params, body, names, n_vocab, out, f);
}

bool params_llama_extras(const json_t *body, int n_ctx, struct gen_params *g, struct api_fail *f)
{
    int64_t mirostat = g->mirostat, last_n = g->repeat_last_n;
    double tau = g->mirostat_tau, eta = g->mirostat_eta;
    bool ignore_eos = g->ignore_eos, is_progress = g->is_return_progress;
    if (!v_int(body, "mirostat", "mirostat", 0, 2, &mirostat, f) ||
        !v_bool(body, "return_progress", "return_progress", &is_progress, f) ||
        !v_number(body, "mirostat_tau", "mirostat_tau", 0.001, 100, &tau, f) ||
        !v_number(body, "mirostat_eta", "mirostat_eta", 0, 1, &eta, f) ||
        !v_bool(body, "ignore_eos", "ignore_eos", &ignore_eos, f) ||
        !v_int(body, "repeat_last_n", "repeat_last_n", -1, INT32_MAX, &last_n, f))
        return false;
    g->mirostat = (int)mirostat;
    g->mirostat_tau = (float)tau;
    g->mirostat_eta = (float)eta;
    g->ignore_eos = ignore_eos;
    g->is_return_progress = is_progress;
    g->repeat_last_n = last_n < 0 ? n_ctx : (int)last_n;
    return true;
}

bool params_merge_base(const struct gen_params *base, const json_t *default_params,
                       const json_t *body, const struct params_names *names, int n_vocab,
                       struct gen_request_params *out, struct api_fail *f)
{
    memset(out, 0, sizeof *out);
    if (base) {
        out->gen = *base;
        out->gen.grammar = NULL;
    } else {
        gen_params_defaults(&out->gen);
    }
    out->enable_thinking = -1;
    static const struct params_names defaults_names = {"max_tokens", NULL, "stop"};
    if (default_params && (!apply_sampling(default_params, "default_params.", &out->gen, f) ||
                           !apply_limits(default_params, &defaults_names, out, f)))
        return false;
    return apply_sampling(body, "", &out->gen, f) && apply_limits(body, names, out, f) &&
           apply_logit_bias(json_object_get(body, "logit_bias"), n_vocab, &out->gen, f);
}
