/* POST /api/generate: a prompt (with `system` and `images`) through the model's chat template
 * as one user turn; `raw` sends the prompt as it is; `suffix` lays out a fill-in-the-middle
 * prompt with the vocabulary's FIM tokens; `context` (the tokens an earlier answer returned)
 * goes before the new turn. Ollama's `template` override is refused: prompts here are always
 * rendered with the model's own Jinja template. */
#include "api/ollama/handlers.h"

#include "api/generation/chat_prompt.h"
#include "api/generation/chat_session.h"
#include "api/ollama/call.h"
#include "api/ollama/convert.h"
#include "api/generation/structured.h"
#include "text/reasoning.h"

#include <stdio.h>
#include <string.h>

#define GENERATE_TEXT_MAX (1u << 26) // bytes of prompt, suffix or system

struct gen_fields {
    const char *prompt, *suffix, *system, *template_text;
    bool is_raw;
    const json_t *images;  // borrowed or NULL
    const json_t *context; // borrowed array of token ids or NULL
};

static bool read_fields(const json_t *req, struct gen_fields *g, struct api_fail *f)
{
    *g = (struct gen_fields){.prompt = "", .suffix = "", .system = "", .template_text = ""};
    g->images = json_object_get(req, "images");
    g->context = json_object_get(req, "context");
    if (g->context && !json_is_null(g->context) && !json_is_array(g->context))
        return api_failf(f, 400, "invalid_type", "context",
                         "context must be an array of token ids, not %s", v_type_name(g->context));
    if (!v_string(req, "prompt", "prompt", GENERATE_TEXT_MAX, &g->prompt, f) ||
        !v_string(req, "suffix", "suffix", GENERATE_TEXT_MAX, &g->suffix, f) ||
        !v_string(req, "system", "system", GENERATE_TEXT_MAX, &g->system, f) ||
        !v_string(req, "template", "template", GENERATE_TEXT_MAX, &g->template_text, f) ||
        !v_bool(req, "raw", "raw", &g->is_raw, f))
        return false;
    if (g->template_text[0])
        return api_failf(f, 400, "unsupported_parameter", "template",
                         "template is not supported: prompts are rendered with the model's own "
                         "chat template (send raw: true with a prompt formatted by the client)");
    if (g->is_raw && (g->system[0] || json_array_size(g->context) > 0))
        return api_failf(f, 400, "invalid_value", "raw",
                         "raw mode does not support template, system, or context");
    return true;
}

/* context ids, each checked against the vocabulary. */
static bool push_context(const struct model *m, const json_t *context, struct tok_ids *out,
                         struct api_fail *f)
{
    const int n_vocab = model_desc(m)->n_vocab;
    size_t i;
    const json_t *v;
    json_array_foreach(context, i, v)
    {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= n_vocab)
            return api_failf(f, 400, "invalid_value", "context",
                             "context[%zu] must be a token id in 0..%d", i, n_vocab - 1);
        if (tok_ids_push(out, (tok_id)id) != ERR_OK)
            return api_failf(f, 500, NULL, NULL, "out of memory");
    }
    return true;
}

static bool push_text(const struct model *m, const char *s, bool add_special, struct tok_ids *out,
                      struct api_fail *f)
{
    struct str text = {s, strlen(s)};
    return tok_encode(model_desc(m)->tokenizer, text, add_special, false, out) == ERR_OK ||
           api_failf(f, 500, NULL, NULL, "tokenization failed");
}

/* [BOS] FIM_PRE prompt FIM_SUF suffix FIM_MID, llama.cpp's infill layout (what Ollama's
 * templates with a .Suffix write for the code models that have these tokens). */
static bool fim_prompt(const struct ollama_call *c, const struct gen_fields *g, struct tok_ids *out,
                       struct api_fail *f)
{
    const struct tok_specials *sp = tok_specials(model_desc(c->model)->tokenizer);
    if (sp->fim_pre == TOK_ID_NONE || sp->fim_suf == TOK_ID_NONE || sp->fim_mid == TOK_ID_NONE)
        return api_failf(f, 400, "unsupported_parameter", "suffix",
                         "\"%s\" does not support insert (its vocabulary has no fill-in-the-middle "
                         "tokens)",
                         c->name);
    struct tok_ids bos; // what the vocabulary adds around an empty text: only its BOS is kept
    tok_ids_init(&bos);
    bool ok = push_text(c->model, "", true, &bos, f);
    if (ok && bos.n_ids > 0 && bos.ids[0] == sp->bos && sp->bos != TOK_ID_NONE)
        ok = tok_ids_push(out, sp->bos) == ERR_OK;
    tok_ids_deinit(&bos);
    ok = ok && tok_ids_push(out, sp->fim_pre) == ERR_OK &&
         push_text(c->model, g->prompt, false, out, f) &&
         tok_ids_push(out, sp->fim_suf) == ERR_OK &&
         push_text(c->model, g->suffix, false, out, f) && tok_ids_push(out, sp->fim_mid) == ERR_OK;
    return ok || f->status || api_failf(f, 500, NULL, NULL, "out of memory");
}

/* The messages of a templated generate: an optional system message, then the prompt (with
 * its images) as the user's. New reference or NULL with f filled. */
static json_t *turn_messages(const struct gen_fields *g, struct api_fail *f)
{
    json_t *content = ollama_content_json(g->prompt, g->images, "prompt", f);
    if (!content) return NULL;
    json_t *msgs = json_array();
    if (msgs && g->system[0])
        json_array_append_new(msgs,
                              json_pack("{s:s, s:s}", "role", "system", "content", g->system));
    if (msgs)
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", content));
    json_decref(content);
    if (!msgs || json_array_size(msgs) != 1u + (g->system[0] != '\0')) {
        json_decref(msgs);
        api_failf(f, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    return msgs;
}

/* The templated turn after the context's tokens (its own BOS dropped: the context has one). */
static bool context_prompt(const struct ollama_call *c, const struct gen_fields *g,
                           struct tok_ids *out, bool *opens_reasoning, struct api_fail *f)
{
    json_t *msgs = turn_messages(g, f);
    if (!msgs) return false;
    struct chat_prompt p;
    struct chat_prompt_opts po = {
        .messages = msgs, .enable_thinking = c->think, .add_generation_prompt = true};
    bool ok = chat_messages_validate(c->model, msgs, NULL, f) &&
              push_context(c->model, g->context, out, f) &&
              chat_prompt_build(c->model, &po, &p, f) == ERR_OK;
    json_decref(msgs);
    if (!ok) return false;
    const struct platform_model_desc *d = model_desc(c->model);
    const tok_id bos = tok_specials(d->tokenizer)->bos;
    size_t skip = p.ids.n_ids > 0 && out->n_ids > 0 && p.ids.ids[0] == bos ? 1 : 0;
    for (size_t i = skip; ok && i < p.ids.n_ids; i++)
        ok = tok_ids_push(out, p.ids.ids[i]) == ERR_OK ||
             api_failf(f, 500, NULL, NULL, "out of memory");
    enum reasoning_format rf = d->reasoning_format;
    *opens_reasoning = reasoning_prompt_opens(rf, p.text.data ? p.text.data : "", p.text.len);
    chat_prompt_deinit(&p);
    return ok;
}

/* raw, suffix or context: the tokens built here, submitted without chat_session. */
static bool start_tokens(const struct api_ctx *ctx, struct ollama_call *c,
                         const struct gen_fields *g, struct api_fail *f)
{
    const struct platform_model_desc *d = model_desc(c->model);
    if (d->is_text_io)
        return api_failf(f, 400, "unsupported_parameter", g->is_raw ? "raw" : "suffix",
                         "The %s platform tokenizes inside its runtime: raw, suffix and context "
                         "need a model whose tokens are ours",
                         model_platform(c->model)->id);
    if (json_array_size(g->images) > 0)
        return api_failf(f, 400, "unsupported_parameter", "images",
                         "images need the model's template: send them without raw, suffix or "
                         "context");
    struct tok_ids ids;
    tok_ids_init(&ids);
    struct buf grammar;
    buf_init(&grammar);
    bool opens = false, is_templated = !g->is_raw && !g->suffix[0];
    bool ok = structured_from_body(c->body, &grammar, f);
    if (ok && grammar.len && (d->unsupported & PLATFORM_UNSUPPORTED_GRAMMAR))
        ok = api_failf(f, 400, "unsupported_parameter", "format",
                       "The %s platform cannot constrain output", model_platform(c->model)->id);
    if (ok && c->params.gen.n_probs > 0 && (d->unsupported & PLATFORM_UNSUPPORTED_LOGPROBS))
        ok = api_failf(f, 400, "unsupported_parameter", "logprobs",
                       "The %s platform does not report probabilities",
                       model_platform(c->model)->id);
    if (ok && g->suffix[0])
        ok = fim_prompt(c, g, &ids, f);
    else if (ok && g->is_raw)
        ok = chat_prompt_tokenize(c->model, g->prompt, strlen(g->prompt), &ids, f) == ERR_OK;
    else if (ok)
        ok = context_prompt(c, g, &ids, &opens, f);
    if (ok && (int64_t)ids.n_ids + 1 > d->n_ctx)
        ok = api_fail_context(f, "prompt", ids.n_ids, d->n_ctx);
    enum reasoning_format rf = is_templated ? d->reasoning_format : REASONING_FORMAT_NONE;
    struct gen_options opt = {
        .stops = c->params.stops,
        .n_stops = c->params.n_stops,
        .reasoning = rf,
        .reasoning_starts_inside = opens,
        .metrics = ctx->metrics,
        .enable_thinking = c->think,
    };
    struct gen_params gen = c->params.gen;
    gen.grammar = grammar.len ? grammar.data : NULL;
    if (ok)
        ok = gen_session_start(c->model, ids.ids, (int)ids.n_ids, &gen, &opt, &c->session, f) ==
             ERR_OK;
    tok_ids_deinit(&ids);
    buf_deinit(&grammar);
    return ok;
}

/* The plain case: one user turn (and a system message) through chat_session. */
static bool start_templated(const struct api_ctx *ctx, struct ollama_call *c,
                            const struct gen_fields *g, struct api_fail *f)
{
    json_t *msgs = turn_messages(g, f);
    if (!msgs) return false;
    struct chat_session_args a = {
        .model = c->model,
        .messages = msgs,
        .params = &c->params,
        .enable_thinking = c->think >= 0 ? c->think : c->params.enable_thinking,
        .structured = c->body,
        .metrics = ctx->metrics,
    };
    int n_prompt = 0;
    bool ok = chat_session_start(&a, &c->session, &n_prompt, f) == ERR_OK;
    json_decref(msgs);
    return ok;
}

/* keep_alive 0 (or "0") with nothing to generate is Ollama's unload request. */
static bool is_unload(const json_t *req)
{
    const json_t *k = json_object_get(req, "keep_alive");
    const char *s = json_string_value(k);
    return (json_is_number(k) && json_number_value(k) == 0) ||
           (s && (strcmp(s, "0") == 0 || strcmp(s, "0s") == 0));
}

void api_ollama_generate(const struct api_ctx *ctx, const struct api_request *req,
                         struct api_response *resp)
{
    struct api_fail f = {0};
    struct ollama_call *c = ollama_call_new(false);
    if (!c) {
        ollama_error(resp, 500, "out of memory");
        return;
    }
    bool is_stream = true;
    struct gen_fields g;
    bool ok =
        read_fields(req->json, &g, &f) && ollama_call_begin(ctx, req->json, c, &is_stream, &f);
    if (ok && !g.prompt[0] && !g.suffix[0] && json_array_size(g.images) == 0) {
        // Ollama's load (or, with keep_alive 0, unload) request. Models here are loaded and
        // unloaded through /v1/models; the answer says what Ollama's would.
        ollama_respond_empty(c, is_unload(req->json) ? "unload" : "load", resp);
        ollama_call_free(c);
        return;
    }
    c->want_context = true;
    if (ok && (g.is_raw || g.suffix[0] || json_array_size(g.context) > 0))
        ok = start_tokens(ctx, c, &g, &f);
    else if (ok)
        ok = start_templated(ctx, c, &g, &f);
    if (!ok) {
        ollama_fail_respond(&f, resp);
        ollama_call_free(c);
        return;
    }
    ollama_call_respond(c, is_stream, resp);
}
