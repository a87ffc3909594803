/* Ollama options → the shared parameter names. Option names and meanings from Ollama's
 * api.Options and Runner (api/types.go) and its Modelfile parameter table. */
#include "api/ollama/options.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum opt_kind {
    OPT_NUMBER, // any JSON number
    OPT_INT,    // a JSON integer (or a number with no fraction: Go clients send 40.0)
    OPT_BOOL,
    OPT_STOP,   // an array of strings (or one string)
    OPT_IGNORE, // accepted with any value: no counterpart here
};

struct opt_row {
    const char *name;   // Ollama's option
    const char *target; // the shared field it sets, or NULL (checked, not applied)
    enum opt_kind kind;
};

/* Ollama's options that have a counterpart, then those accepted and not applied (each says
 * why in docs/API.md: the context, batch, threads and memory are set when the model loads). */
static const struct opt_row rows[] = {
    {"temperature", "temperature", OPT_NUMBER},
    {"top_k", "top_k", OPT_INT},
    {"top_p", "top_p", OPT_NUMBER},
    {"min_p", "min_p", OPT_NUMBER},
    {"seed", "seed", OPT_INT},
    {"num_predict", NULL, OPT_INT}, // max_tokens, below
    {"stop", "stop", OPT_STOP},
    {"repeat_penalty", "repeat_penalty", OPT_NUMBER},
    {"repeat_last_n", "repeat_last_n", OPT_INT},
    {"presence_penalty", "presence_penalty", OPT_NUMBER},
    {"frequency_penalty", "frequency_penalty", OPT_NUMBER},
    {"mirostat", "mirostat", OPT_INT},
    {"mirostat_tau", "mirostat_tau", OPT_NUMBER},
    {"mirostat_eta", "mirostat_eta", OPT_NUMBER},
    {"num_ctx", NULL, OPT_INT},
    {"num_keep", NULL, OPT_INT},
    {"num_batch", NULL, OPT_INT},
    {"num_gpu", NULL, OPT_INT},
    {"main_gpu", NULL, OPT_INT},
    {"num_thread", NULL, OPT_INT},
    {"typical_p", NULL, OPT_NUMBER},
    {"tfs_z", NULL, OPT_NUMBER},
    {"use_mmap", NULL, OPT_BOOL},
    {"use_mlock", NULL, OPT_BOOL},
    {"numa", NULL, OPT_BOOL},
    {"low_vram", NULL, OPT_BOOL},
    {"vocab_only", NULL, OPT_BOOL},
    {"penalize_newline", NULL, OPT_BOOL},
    {"f16_kv", NULL, OPT_BOOL},
    {"logits_all", NULL, OPT_BOOL},
    {"draft_num_predict", NULL, OPT_IGNORE},
};

static const char *kind_name(enum opt_kind k)
{
    switch (k) {
    case OPT_NUMBER:
        return "number";
    case OPT_INT:
        return "integer";
    case OPT_BOOL:
        return "bool";
    case OPT_STOP:
        return "[]string";
    case OPT_IGNORE:
        break;
    }
    return "any";
}

static bool is_whole(const json_t *v)
{
    if (json_is_integer(v)) return true;
    double d = json_number_value(v);
    return json_is_real(v) && isfinite(d) && floor(d) == d && fabs(d) < 9.0e15;
}

static bool type_ok(const json_t *v, enum opt_kind k)
{
    switch (k) {
    case OPT_NUMBER:
        return json_is_number(v);
    case OPT_INT:
        return is_whole(v);
    case OPT_BOOL:
        return json_is_boolean(v);
    case OPT_STOP:
        if (json_is_string(v)) return true;
        if (!json_is_array(v)) return false;
        size_t i;
        const json_t *s;
        json_array_foreach(v, i, s)
        {
            if (!json_is_string(s)) return false;
        }
        return true;
    case OPT_IGNORE:
        break;
    }
    return true;
}

/* The value set for an option: integers as JSON integers. New reference or NULL. */
static json_t *value_for(const json_t *v, enum opt_kind k)
{
    if (k == OPT_INT)
        return json_integer(json_is_integer(v) ? json_integer_value(v)
                                               : (json_int_t)json_number_value(v));
    return json_deep_copy(v);
}

/* num_predict: n > 0 caps the answer; -1 (Ollama's default, endless) and -2 (until the context
 * is full) leave it unlimited, which here ends at the context's end either way; 0 is one
 * token, as the llama.cpp field this maps to treats it. */
static bool set_num_predict(const json_t *v, json_t *out, struct api_fail *f)
{
    // Bounded as max_tokens is on the other routes; a real is refused before the cast, whose
    // result would be undefined out of range.
    double d = json_number_value(v);
    if (!json_is_integer(v) && (d != d || d < -2 || d > INT32_MAX || d != (double)(json_int_t)d))
        return api_failf(f, 400, "invalid_value", "options.num_predict",
                         "num_predict must be -1, -2 or a count of tokens up to %d", INT32_MAX);
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : (json_int_t)d;
    if (n < -2 || n > INT32_MAX)
        return api_failf(f, 400, "invalid_value", "options.num_predict",
                         "num_predict must be -1, -2 or a count of tokens up to %d (got %lld)",
                         INT32_MAX, (long long)n);
    if (n < 0) return true;
    return json_object_set_new(out, "max_tokens", json_integer(n > 0 ? n : 1)) == 0 ||
           api_failf(f, 500, NULL, NULL, "out of memory");
}

static const struct opt_row *find_row(const char *name)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

/* options: each known option type-checked and copied under its shared name; unknown ones are
 * ignored, as Ollama ignores them (it logs a warning). */
static bool map_options(json_t *opts, json_t *out, struct api_fail *f)
{
    if (!opts || json_is_null(opts)) return true;
    if (!json_is_object(opts))
        return api_failf(f, 400, "invalid_type", "options", "options must be an object, not %s",
                         v_type_name(opts));
    const char *key;
    json_t *v;
    json_object_foreach(opts, key, v)
    {
        const struct opt_row *r = find_row(key);
        if (!r || json_is_null(v)) continue;
        if (!type_ok(v, r->kind))
            return api_failf(f, 400, "invalid_type", "options",
                             "option \"%.64s\" must be of type %s, not %s", key, kind_name(r->kind),
                             v_type_name(v));
        if (strcmp(key, "num_predict") == 0) {
            if (!set_num_predict(v, out, f)) return false;
            continue;
        }
        if (!r->target) continue;
        if (json_object_set_new(out, r->target, value_for(v, r->kind)) != 0)
            return api_failf(f, 500, NULL, NULL, "out of memory");
    }
    return true;
}

/* format: "json" → any JSON object; an object → that JSON schema; "" or null → free text. */
static bool map_format(const json_t *format, json_t *out, struct api_fail *f)
{
    if (!format || json_is_null(format)) return true;
    json_t *rf = NULL;
    if (json_is_string(format)) {
        const char *s = json_string_value(format);
        if (s[0] == '\0') return true;
        if (strcmp(s, "json") != 0)
            return api_failf(f, 400, "invalid_value", "format",
                             "invalid format: \"%.64s\" (expected \"json\" or a JSON schema)", s);
        rf = json_pack("{s:s}", "type", "json_object");
    } else if (json_is_object(format)) {
        rf = json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name",
                       "format", "schema", format);
    } else {
        return api_failf(f, 400, "invalid_type", "format",
                         "invalid format: expected \"json\" or a JSON schema object, not %s",
                         v_type_name(format));
    }
    return (rf && json_object_set_new(out, "response_format", rf) == 0) ||
           api_failf(f, 500, NULL, NULL, "out of memory");
}

bool ollama_options_to_body(const json_t *req, json_t **out, struct api_fail *f)
{
    static const char *const extensions[] = {"grammar", "json_schema", "logit_bias", "tool_choice",
                                             "parallel_tool_calls"};
    *out = NULL;
    json_t *body = json_object();
    if (!body) return api_failf(f, 500, NULL, NULL, "out of memory");
    bool ok = map_options(json_object_get(req, "options"), body, f) &&
              map_format(json_object_get(req, "format"), body, f);
    for (size_t i = 0; ok && i < sizeof extensions / sizeof extensions[0]; i++) {
        json_t *v = json_object_get(req, extensions[i]);
        if (v && json_object_set(body, extensions[i], v) != 0)
            ok = api_failf(f, 500, NULL, NULL, "out of memory");
    }
    if (!ok) {
        json_decref(body);
        return false;
    }
    *out = body;
    return true;
}
