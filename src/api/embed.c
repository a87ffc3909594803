/* The embedding core POST /v1/embeddings, llama.cpp's /embedding(s), Ollama's /api/embed and
 * rerank share: `input` as a string, an array of strings, an array of token ids or an array of
 * such arrays, tokenized against the model's context (or truncated to it); `encoding_format`
 * float or base64 (little-endian f32 bytes); all inputs of a call as one request through the
 * model's pool and queue. No family's answer shape lives here. */
#include "api/embed.h"
#include "api/client_watch.h"
#include "api/errors.h"
#include "api/validate.h"
#include "text/tokenizer/tokenizer.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define EMBED_MAX_INPUTS 2048 // inputs per call, OpenAI's limit

struct embed_ctx {
    const struct platform_model_desc *desc;
    bool is_truncate;
    const char *name; // the request field holding the inputs
    struct embed_inputs *in;
};

void embed_inputs_deinit(struct embed_inputs *in)
{
    tok_ids_deinit(&in->ids);
    mem_free(in->lens);
}

/* Applies the context limit to the input just appended (index i, n_ids before it began). */
static bool fit_context(const struct embed_ctx *c, int i, size_t start, bool from_text,
                        struct api_fail *f)
{
    const int n_ctx = c->desc->n_ctx;
    size_t n = c->in->ids.n_ids - start;
    if (n <= (size_t)n_ctx) {
        c->in->lens[i] = (int)n;
        return true;
    }
    if (!c->is_truncate)
        return api_failf(f, 400, "context_length_exceeded", c->name,
                         "Input %d has %zu tokens, more than the model's context of %d tokens. "
                         "Shorten it or set 'truncate': true.",
                         i, n, n_ctx);
    // Keep the head; text inputs keep their closing separator as tokenizers' truncation does.
    tok_id *ids = c->in->ids.ids + start;
    const tok_id sep = tok_sep(c->desc->tokenizer);
    if (from_text && sep != TOK_ID_NONE && ids[n - 1] == sep) ids[n_ctx - 1] = sep;
    c->in->ids.n_ids = start + (size_t)n_ctx;
    c->in->lens[i] = n_ctx;
    return true;
}

static bool add_text(const struct embed_ctx *c, int i, const json_t *s, const char *param,
                     struct api_fail *f)
{
    const size_t len = json_string_length(s);
    if (len == 0)
        return api_failf(f, 400, "invalid_value", param, "'%s' must not be an empty string.",
                         param);
    const size_t start = c->in->ids.n_ids;
    const struct str text = {json_string_value(s), len};
    if (tok_encode(c->desc->tokenizer, text, true, false, &c->in->ids) != ERR_OK)
        return api_failf(f, 500, NULL, NULL, "cannot tokenize input %d", i);
    return fit_context(c, i, start, true, f);
}

static bool add_tokens(const struct embed_ctx *c, int i, const json_t *a, const char *param,
                       struct api_fail *f)
{
    if (json_array_size(a) == 0)
        return api_failf(f, 400, "invalid_value", param, "'%s' must not be an empty array.", param);
    const size_t start = c->in->ids.n_ids;
    size_t k;
    const json_t *v;
    json_array_foreach(a, k, v)
    {
        const json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= c->desc->n_vocab)
            return api_failf(f, 400, "invalid_value", param,
                             "'%s[%zu]' must be a token id in 0..%d.", param, k,
                             c->desc->n_vocab - 1);
        if (tok_ids_push(&c->in->ids, (tok_id)id) != ERR_OK)
            return api_failf(f, 500, NULL, NULL, "out of memory");
    }
    return fit_context(c, i, start, false, f);
}

static bool is_token_array(const json_t *a)
{
    size_t k;
    const json_t *v;
    json_array_foreach(a, k, v)
    {
        if (!json_is_integer(v)) return false;
    }
    return json_array_size(a) > 0;
}

/* Parses the inputs (field c->name) into c->in. */
static bool parse_input(const struct embed_ctx *c, const json_t *input, struct api_fail *f)
{
    const char *name = c->name;
    char param[32];
    const bool is_single = json_is_string(input) || is_token_array(input);
    const size_t n = is_single ? 1 : json_array_size(input);
    if (!json_is_string(input) && !json_is_array(input))
        return api_failf(f, 400, "invalid_type", name,
                         "Invalid type for '%s': expected a string or an array, but got %s.", name,
                         v_type_name(input));
    if (n == 0) return api_failf(f, 400, "invalid_value", name, "'%s' must not be empty.", name);
    if (n > EMBED_MAX_INPUTS)
        return api_failf(f, 400, "invalid_value", name,
                         "'%s' has %zu items; at most %d are allowed per request.", name, n,
                         EMBED_MAX_INPUTS);
    c->in->lens = mem_calloc(n, sizeof *c->in->lens);
    if (!c->in->lens) return api_failf(f, 500, NULL, NULL, "out of memory");
    c->in->n = (int)n;
    if (json_is_string(input)) return add_text(c, 0, input, name, f);
    if (is_single) return add_tokens(c, 0, input, name, f);
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(input, i);
        snprintf(param, sizeof param, "%s[%zu]", name, i);
        bool ok = json_is_string(item)  ? add_text(c, (int)i, item, param, f)
                  : json_is_array(item) ? add_tokens(c, (int)i, item, param, f)
                                        : api_failf(f, 400, "invalid_type", param,
                                                    "Invalid type for '%s': expected a string "
                                                    "or an array of token ids, but got %s.",
                                                    param, v_type_name(item));
        if (!ok) return false;
    }
    return true;
}

/* encoding_format, dimensions (accepted, not applied), user, truncate. */
bool embed_parse_options(const json_t *body, bool *is_base64, bool *is_truncate, struct api_fail *f)
{
    const char *fmt = "float", *user = NULL;
    int64_t dims = 0;
    if (!v_string(body, "encoding_format", "encoding_format", 16, &fmt, f) ||
        !v_int(body, "dimensions", "dimensions", 1, INT32_MAX, &dims, f) ||
        !v_string(body, "user", "user", 4096, &user, f) ||
        !v_bool(body, "truncate", "truncate", is_truncate, f))
        return false;
    if (strcmp(fmt, "float") != 0 && strcmp(fmt, "base64") != 0)
        return api_failf(f, 400, "invalid_value", "encoding_format",
                         "'encoding_format' must be 'float' or 'base64'.");
    *is_base64 = strcmp(fmt, "base64") == 0;
    return true;
}

bool embed_parse_inputs(const struct model *m, const json_t *inputs, const char *name,
                        bool is_truncate, struct embed_inputs *out, struct api_fail *f)
{
    const struct embed_ctx c = {
        .desc = model_desc(m), .is_truncate = is_truncate, .name = name, .in = out};
    return parse_input(&c, inputs, f);
}

bool embed_run(struct model *m, const struct embed_inputs *in, struct request **out,
               struct api_fail *f)
{
    struct gen_params params;
    gen_params_defaults(&params);
    struct request *r;
    if (request_new(REQUEST_EMBED, in->ids.ids, (int)in->ids.n_ids, &params, 0, &r) != ERR_OK)
        return api_failf(f, 500, NULL, NULL, "out of memory");
    if (request_set_inputs(r, in->lens, in->n) != ERR_OK) {
        request_release(r);
        return api_failf(f, 500, NULL, NULL, "out of memory");
    }
    switch (model_submit(m, r)) {
    case POOL_ADMIT_RUN:
    case POOL_ADMIT_QUEUED:
        client_watch_track(m, r); // the HTTP layer ends it when its client leaves
        break;
    case POOL_ADMIT_FULL:
        request_release(r);
        api_failf(f, 429, "queue_full", NULL,
                  "All instances of model '%s' are busy and its queue is full; retry later.",
                  model_id(m));
        f->type = API_TYPE_RATE_LIMIT;
        return false;
    case POOL_ADMIT_CLOSED:
        request_release(r);
        return api_failf(f, 404, "model_not_found", "model", "The model '%s' is being unloaded",
                         model_id(m));
    }
    int cursor = 0, status = 0;
    enum finish_reason fin = FINISH_NONE;
    while (fin == FINISH_NONE)
        request_wait_events(r, &cursor, NULL, 0, -1, &fin);
    struct errmsg err;
    fin = request_outcome(r, &status, &err, NULL);
    const int64_t want = model_desc(m)->is_per_token ? (int64_t)in->ids.n_ids * embed_width(m)
                                                     : (int64_t)in->n * embed_width(m);
    if (fin != FINISH_STOP || r->n_embedding != want) {
        request_release(r);
        status = status >= 400 ? status : 500;
        return api_failf(f, status, status == 404 ? "model_not_found" : NULL,
                         status == 404 ? "model" : NULL, "%s",
                         err.msg[0] ? err.msg : "the embedding request did not finish");
    }
    *out = r;
    return true;
}

int embed_width(const struct model *m)
{
    const struct platform_model_desc *d = model_desc(m);
    return d->n_cls_out > 0 ? d->n_cls_out : d->n_embd;
}

bool embed_is_reranker(const struct model *m)
{
    return model_desc(m)->kind == MODEL_KIND_EMBEDDING && model_desc(m)->n_cls_out > 0;
}

json_t *embed_vector_json(const float *v, int n, bool is_base64)
{
    if (!is_base64) {
        json_t *a = json_array();
        for (int k = 0; a && k < n; k++)
            json_array_append_new(a, json_real(v[k]));
        return a;
    }
    uint8_t *bytes = mem_alloc((size_t)n * 4);
    if (!bytes) return NULL;
    for (int k = 0; k < n; k++) {
        uint32_t u;
        memcpy(&u, &v[k], 4);
        for (int b = 0; b < 4; b++)
            bytes[4 * k + b] = (uint8_t)(u >> (8 * b));
    }
    struct buf b;
    buf_init(&b);
    json_t *s = NULL;
    if (base64_encode_buf(&b, bytes, (size_t)n * 4) == ERR_OK)
        s = json_stringn(b.data ? b.data : "", b.len);
    buf_deinit(&b);
    mem_free(bytes);
    return s;
}
