/* Prompt and logit_bias parsing for the llama.cpp-compatible endpoints (rules from llama.cpp's
 * tools/server README, "prompt" and "logit_bias"). */
#include "api/native/native_prompt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool push_id(const json_t *v, const char *name, size_t i, const struct native_tokenizer *t,
                    struct tok_ids *out, struct api_fail *f)
{
    json_int_t id = json_integer_value(v);
    if (id < 0 || id >= t->n_vocab)
        return api_failf(f, 400, "invalid_value", name,
                         "'%s[%zu]' is %lld, not a token id of this model (0..%d)", name, i,
                         (long long)id, t->n_vocab - 1);
    if (out->n_ids >= NATIVE_PROMPT_MAX_TOKENS)
        return api_failf(f, 400, "invalid_value", name, "'%s' has more than %d tokens", name,
                         NATIVE_PROMPT_MAX_TOKENS);
    if (tok_ids_push(out, (tok_id)id) != ERR_OK)
        return api_failf(f, 500, NULL, NULL, "out of memory");
    return true;
}

static bool encode(const struct native_tokenizer *t, const json_t *s, bool add_special,
                   bool parse_special, struct tok_ids *out, struct api_fail *f)
{
    struct str text = {json_string_value(s), json_string_length(s)};
    int rc = t->encode(t->ctx, text, add_special, parse_special, out);
    if (rc != ERR_OK) return api_failf(f, 500, NULL, NULL, "tokenization failed: %s", err_str(rc));
    return true;
}

/* A prompt's text, refused unencoded when it cannot fit the context (it is longer than the
 * context's tokens can stand for, or the prompt has used the context up already). */
static bool encode_prompt(const struct native_tokenizer *t, const json_t *s, const char *name,
                          bool add_special, bool parse_special, struct tok_ids *out,
                          struct api_fail *f)
{
    if (t->text_bytes_max &&
        (json_string_length(s) > t->text_bytes_max || out->n_ids >= (size_t)t->n_ctx))
        return api_fail_context_over(f, name, t->n_ctx);
    return encode(t, s, add_special, parse_special, out, f);
}

/* A string, or an array of ids and strings (one prompt). */
static bool parse_one(const json_t *p, const char *name, const struct native_tokenizer *t,
                      bool add_special, bool parse_special, struct tok_ids *out, struct api_fail *f)
{
    if (json_is_string(p)) return encode_prompt(t, p, name, add_special, parse_special, out, f);
    const json_t *media = json_is_object(p) ? json_object_get(p, "multimodal_data") : NULL;
    if (media && !json_is_null(media) && !(json_is_array(media) && json_array_size(media) == 0))
        return api_failf(f, 400, "invalid_value", name,
                         "'%s.multimodal_data' is not taken here; send images as image_url "
                         "parts of chat messages (/v1/chat/completions)",
                         name);
    if (json_is_object(p) && json_is_string(json_object_get(p, "prompt_string")))
        return encode_prompt(t, json_object_get(p, "prompt_string"), name, add_special,
                             parse_special, out, f);
    if (!json_is_array(p))
        return api_failf(f, 400, "invalid_type", name,
                         "Invalid type for '%s': expected a string or an array of token ids and "
                         "strings, but got %s.",
                         name, v_type_name(p));
    if (json_array_size(p) == 0)
        return api_failf(f, 400, "invalid_value", name, "'%s' is empty", name);
    size_t i;
    const json_t *v;
    json_array_foreach(p, i, v)
    {
        bool ok;
        if (json_is_integer(v))
            ok = push_id(v, name, i, t, out, f);
        else if (json_is_string(v))
            ok = encode_prompt(t, v, name, add_special && i == 0, parse_special, out, f);
        else
            ok = api_failf(f, 400, "invalid_type", name,
                           "Invalid type for '%s[%zu]': expected a token id or a string, but got "
                           "%s.",
                           name, i, v_type_name(v));
        if (!ok) return false;
    }
    return true;
}

static bool has_integer(const json_t *a)
{
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        if (json_is_integer(v)) return true;
    }
    return false;
}

size_t native_prompt_count(const json_t *prompt)
{
    if (json_is_array(prompt) && json_array_size(prompt) > 0 && !has_integer(prompt))
        return json_array_size(prompt);
    return 1;
}

int native_prompt_parse(const json_t *prompt, const char *name, const struct native_tokenizer *t,
                        bool add_special, bool parse_special, struct tok_ids *out,
                        struct api_fail *f)
{
    if (!prompt)
        return api_failf(f, 400, "missing_required_parameter", name,
                         "Missing required parameter: '%s'.", name),
               ERR_INVALID;
    // An array without ids is llama.cpp's list of prompts: ["a"], [[1, 2]] or [{…}].
    if (json_is_array(prompt) && json_array_size(prompt) > 0 && !has_integer(prompt)) {
        if (json_array_size(prompt) > 1)
            return api_failf(f, 400, "invalid_value", name,
                             "'%s' holds %zu prompts; send one prompt per request", name,
                             json_array_size(prompt)),
                   ERR_INVALID;
        prompt = json_array_get(prompt, 0);
    }
    return parse_one(prompt, name, t, add_special, parse_special, out, f) ? ERR_OK : ERR_INVALID;
}

/* Length of the valid character at s (1..4), or 0. */
static size_t utf8_char_len(const unsigned char *s, size_t len)
{
    unsigned c = s[0];
    size_t n = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
    if (n == 0 || n > len) return 0;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

int native_utf8_sanitize(const char *s, size_t len, struct buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        size_t n;
        while (i < len && (n = utf8_char_len(p + i, len - i)) > 0)
            i += n;
        if (buf_append(out, s + start, i - start) != ERR_OK) return ERR_NOMEM;
        if (i < len) {
            if (buf_append(out, "\xef\xbf\xbd", 3) != ERR_OK) return ERR_NOMEM;
            i++;
        }
    }
    return ERR_OK;
}

/* Adds one bias for every token that key stands for. */
static bool add_bias(const json_t *key, const json_t *value, const char *where,
                     const struct native_tokenizer *t, struct gen_params *g, struct api_fail *f)
{
    float bias;
    if (json_is_false(value)) {
        bias = -INFINITY;
    } else if (json_is_number(value)) {
        double b = json_number_value(value);
        if (!(b >= -100 && b <= 100))
            return api_failf(f, 400, "invalid_value", "logit_bias",
                             "%s: a bias must be a number in [-100, 100] or false", where);
        bias = b <= -100 ? -INFINITY : (float)b;
    } else {
        return api_failf(f, 400, "invalid_type", "logit_bias",
                         "%s: a bias must be a number or false, but got %s", where,
                         v_type_name(value));
    }
    struct tok_ids ids;
    tok_ids_init(&ids);
    bool ok = true;
    if (json_is_integer(key))
        ok = push_id(key, "logit_bias", 0, t, &ids, f);
    else if (json_is_string(key))
        ok = encode(t, key, false, false, &ids, f);
    else
        ok =
            api_failf(f, 400, "invalid_type", "logit_bias",
                      "%s: a token must be an id or a string, but got %s", where, v_type_name(key));
    for (size_t i = 0; ok && i < ids.n_ids; i++) {
        if (g->n_logit_bias >= GEN_MAX_LOGIT_BIAS) {
            ok = api_failf(f, 400, "invalid_value", "logit_bias", "at most %d biased tokens",
                           GEN_MAX_LOGIT_BIAS);
            break;
        }
        g->logit_bias[g->n_logit_bias].token = ids.ids[i];
        g->logit_bias[g->n_logit_bias].bias = bias;
        g->n_logit_bias++;
    }
    tok_ids_deinit(&ids);
    return ok;
}

/* An object key: a decimal id, else text. */
static bool add_object_entry(const char *key, const json_t *value, const struct native_tokenizer *t,
                             struct gen_params *g, struct api_fail *f)
{
    char where[96];
    snprintf(where, sizeof where, "logit_bias['%.40s']", key);
    char *end;
    long id = strtol(key, &end, 10);
    json_t *k = *key && *end == '\0' ? json_integer(id) : json_string(key);
    if (!k) return api_failf(f, 500, NULL, NULL, "out of memory");
    bool ok = add_bias(k, value, where, t, g, f);
    json_decref(k);
    return ok;
}

bool native_logit_bias_parse(json_t *lb, const struct native_tokenizer *t, struct gen_params *g,
                             struct api_fail *f)
{
    if (!lb || json_is_null(lb)) return true;
    if (json_is_object(lb)) {
        const char *key;
        json_t *v;
        json_object_foreach(lb, key, v)
        {
            if (!add_object_entry(key, v, t, g, f)) return false;
        }
        return true;
    }
    if (!json_is_array(lb))
        return api_failf(f, 400, "invalid_type", "logit_bias",
                         "Invalid type for 'logit_bias': expected an object or an array of "
                         "[token, bias] pairs, but got %s.",
                         v_type_name(lb));
    size_t i;
    const json_t *pair;
    json_array_foreach(lb, i, pair)
    {
        char where[48];
        snprintf(where, sizeof where, "logit_bias[%zu]", i);
        if (!json_is_array(pair) || json_array_size(pair) != 2)
            return api_failf(f, 400, "invalid_value", "logit_bias",
                             "%s must be a [token, bias] pair", where);
        if (!add_bias(json_array_get(pair, 0), json_array_get(pair, 1), where, t, g, f))
            return false;
    }
    return true;
}
