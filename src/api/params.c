/* Parameter validation shared by the model-management and generation endpoints. */
#include "api/params.h"

#include <stdio.h>
#include <string.h>

int params_stop_list(const json_t *stop, const char *name, const char **out, struct api_fail *f)
{
    if (!stop || json_is_null(stop))
        return 0;
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
    json_array_foreach(stop, i, s) {
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
        "temperature", "top_p", "top_k", "repeat_penalty", "frequency_penalty",
        "presence_penalty", "max_tokens", "max_context_len", "stop", "enable_thinking",
    };
    if (!json_is_object(dp))
        return api_failf(f, 400, "invalid_type", "default_params",
                         "Invalid type for 'default_params': expected an object, but got %s.",
                         v_type_name(dp));
    const char *key;
    json_t *v;
    json_object_foreach(dp, key, v) {
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
