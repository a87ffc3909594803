/* POST /rerank (and /reranking, /v1/rerank, /v1/reranking), as llama.cpp's server serves it
 * (tools/server: handle_rerank, format_response_rerank): `query` and `documents` (or TEI's
 * `texts`), `top_n`, `return_text`; every pair formatted per the model's layout and scored in
 * one request through the model's pool; results sorted by score, highest first. */
#include "api/rerank.h"

#include "api/embed.h"
#include "api/errors.h"
#include "api/handlers.h"
#include "api/native/native_internal.h"
#include "api/validate.h"
#include "text/json_text.h"
#include "util/buf.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

#define RERANK_MAX_DOCUMENTS 2048 // pairs per request, as for embedding inputs

static int push_if(struct tok_ids *out, int32_t id)
{
    return id >= 0 ? tok_ids_push(out, id) : ERR_OK;
}

/* The template with every {query} and {document} replaced, tokenized with specials parsed. */
static int format_template(const struct platform_model_desc *d, struct str query, struct str doc,
                           struct tok_ids *out)
{
    static const char k_query[] = "{query}", k_doc[] = "{document}";
    struct buf b;
    buf_init(&b);
    int rc = ERR_OK;
    for (const char *p = d->rerank_template; *p && rc == ERR_OK;) {
        if (strncmp(p, k_query, sizeof k_query - 1) == 0) {
            rc = buf_append(&b, query.ptr, query.len);
            p += sizeof k_query - 1;
        } else if (strncmp(p, k_doc, sizeof k_doc - 1) == 0) {
            rc = buf_append(&b, doc.ptr, doc.len);
            p += sizeof k_doc - 1;
        } else {
            rc = buf_append_byte(&b, *p++);
        }
    }
    if (rc == ERR_OK)
        rc = tok_encode(d->tokenizer, (struct str){b.data ? b.data : "", b.len}, false, true, out);
    buf_deinit(&b);
    return rc;
}

int rerank_format_pair(const struct platform_model_desc *d, struct str query, struct str doc,
                       struct tok_ids *out)
{
    const size_t n_before = out->n_ids;
    if (d->rerank_template) return format_template(d, query, doc, out);
    int rc = push_if(out, d->rerank_bos);
    if (rc == ERR_OK) rc = tok_encode(d->tokenizer, query, false, false, out);
    if (rc == ERR_OK) rc = push_if(out, d->rerank_eos);
    if (rc == ERR_OK) rc = push_if(out, d->rerank_sep);
    if (rc == ERR_OK) rc = tok_encode(d->tokenizer, doc, false, false, out);
    if (rc == ERR_OK) rc = push_if(out, d->rerank_eos);
    if (rc != ERR_OK) out->n_ids = n_before;
    return rc;
}

/* ---- model selection ---- */

static bool is_reranker(const struct platform_model_desc *d)
{
    return d->kind == MODEL_KIND_EMBEDDING && d->n_cls_out > 0;
}

static const struct native_fit reranker = {
    is_reranker, is_reranker, false,
    "is not a reranker (serve one with --reranking or load it with "
    "\"pooling\": \"rank\")"};

/* ---- request ---- */

struct rerank_req {
    const char *model; // borrowed from the body, or NULL
    struct str query;
    const json_t *docs; // the array of strings
    const char *docs_name;
    bool is_tei; // `texts` was given: TEI's bare-array answer
    int64_t top_n;
    bool return_text;
};

static bool parse_docs(const json_t *body, struct rerank_req *q, struct api_fail *f)
{
    // llama-server takes `documents` first and answers in TEI's shape whenever `texts` is there.
    q->is_tei = json_object_get(body, "texts") != NULL;
    q->docs_name = json_object_get(body, "documents") || !q->is_tei ? "documents" : "texts";
    q->docs = json_object_get(body, q->docs_name);
    if (!q->docs || json_is_null(q->docs))
        return api_failf(f, 400, "missing_required_parameter", "documents",
                         "\"documents\" must be provided: a non-empty array of strings");
    if (!json_is_array(q->docs))
        return api_failf(f, 400, "invalid_type", q->docs_name,
                         "Invalid type for '%s': expected an array of strings, but got %s.",
                         q->docs_name, v_type_name(q->docs));
    const size_t n = json_array_size(q->docs);
    if (n == 0)
        return api_failf(f, 400, "invalid_value", q->docs_name,
                         "'%s' must be a non-empty array of strings.", q->docs_name);
    if (n > RERANK_MAX_DOCUMENTS)
        return api_failf(f, 400, "invalid_value", q->docs_name,
                         "'%s' has %zu items; at most %d are allowed per request.", q->docs_name, n,
                         RERANK_MAX_DOCUMENTS);
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(q->docs, i);
        if (!json_is_string(d))
            return api_failf(f, 400, "invalid_type", q->docs_name,
                             "Invalid type for '%s[%zu]': expected a string, but got %s.",
                             q->docs_name, i, v_type_name(d));
    }
    return true;
}

static bool parse_request(const json_t *body, struct rerank_req *q, struct api_fail *f)
{
    const char *query = NULL;
    if (!v_string(body, "model", "model", 1024, &q->model, f) ||
        !v_require(body, "query", "query", f) ||
        !v_string(body, "query", "query", SIZE_MAX, &query, f))
        return false;
    if (!query)
        return api_failf(f, 400, "invalid_type", "query",
                         "Invalid type for 'query': expected a string, but got null.");
    q->query = (struct str){query, json_string_length(json_object_get(body, "query"))};
    if (!parse_docs(body, q, f)) return false;
    q->top_n = (int64_t)json_array_size(q->docs);
    return v_int(body, "top_n", "top_n", 1, INT32_MAX, &q->top_n, f) &&
           v_bool(body, "return_text", "return_text", &q->return_text, f);
}

/* Every pair as one input of in, each within the model's context. */
static bool build_inputs(const struct model *m, const struct rerank_req *q, struct embed_inputs *in,
                         struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(m);
    const size_t n = json_array_size(q->docs);
    in->lens = mem_calloc(n, sizeof *in->lens);
    if (!in->lens) return api_failf(f, 500, NULL, NULL, "out of memory");
    in->n = (int)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *doc = json_array_get(q->docs, i);
        const size_t start = in->ids.n_ids;
        const struct str text = {json_string_value(doc), json_string_length(doc)};
        if (rerank_format_pair(d, q->query, text, &in->ids) != ERR_OK)
            return api_failf(f, 500, NULL, NULL, "cannot tokenize document %zu", i);
        const size_t len = in->ids.n_ids - start;
        if (len == 0)
            return api_failf(f, 400, "invalid_value", q->docs_name,
                             "Document %zu and the query give no tokens.", i);
        if (len > (size_t)d->n_ctx)
            return api_failf(f, 400, "context_length_exceeded", q->docs_name,
                             "Document %zu with the query has %zu tokens, more than the model's "
                             "context of %d tokens.",
                             i, len, d->n_ctx);
        in->lens[i] = (int)len;
    }
    return true;
}

/* ---- response ---- */

struct scored {
    int index;
    float score;
};

/* Highest score first; equal scores keep document order. */
static int by_score(const void *a, const void *b)
{
    const struct scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static json_t *result_json(const struct rerank_req *q, const struct scored *s)
{
    const double score = json_text_float(s->score);
    if (!q->is_tei) return json_pack("{s:i, s:f}", "index", s->index, "relevance_score", score);
    json_t *o = json_pack("{s:i, s:f}", "index", s->index, "score", score);
    if (o && q->return_text) json_object_set(o, "text", json_array_get(q->docs, (size_t)s->index));
    return o;
}

static json_t *response_json(const struct model *m, const struct rerank_req *q,
                             const struct request *r, int n)
{
    const int width = embed_width(m);
    struct scored *s = mem_alloc((size_t)n * sizeof *s);
    json_t *results = s ? json_array() : NULL;
    if (!results) {
        mem_free(s);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        s[i] = (struct scored){.index = i, .score = r->embedding[(size_t)i * width]};
    qsort(s, (size_t)n, sizeof *s, by_score);
    const int keep = q->top_n < n ? (int)q->top_n : n;
    for (int i = 0; i < keep; i++) {
        if (json_array_append_new(results, result_json(q, &s[i])) != 0) {
            json_decref(results);
            results = NULL;
            break;
        }
    }
    mem_free(s);
    if (!results || q->is_tei) return results;
    return json_pack("{s:s, s:s, s:{s:i, s:i}, s:o}", "model", q->model ? q->model : model_id(m),
                     "object", "list", "usage", "prompt_tokens", r->n_prompt, "total_tokens",
                     r->n_prompt, "results", results);
}

void api_rerank(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp)
{
    struct api_fail f = {0};
    struct rerank_req q = {0};
    struct embed_inputs in = {0};
    struct request *r = NULL;
    struct model *m = NULL;
    bool ok = (m = native_model_acquire_fit(ctx, req, req->json, &reranker, &f)) &&
              parse_request(req->json, &q, &f) && build_inputs(m, &q, &in, &f) &&
              embed_run(m, &in, &r, &f);
    api_respond_result(resp, ok ? response_json(m, &q, r, in.n) : NULL, ok, &f);
    request_release(r);
    embed_inputs_deinit(&in);
    model_release(m);
}
