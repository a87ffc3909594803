/* llama.cpp server's text and state endpoints: POST /tokenize, /detokenize, /apply-template,
 * GET /props, /slots and /metrics (tools/server/README.md shapes). */
#include "api/handlers.h"

#include "api/generation/chat_prompt.h"
#include "api/errors.h"
#include "api/metrics.h"
#include "api/native/native_internal.h"
#include "core/manager.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define MAX_LISTED 64

/* A piece as a string when it is valid UTF-8, else its bytes (llama.cpp's with_pieces). */
static json_t *piece_json(struct str piece)
{
    json_t *s = json_stringn(piece.ptr, piece.len);
    if (s) return s;
    json_t *a = json_array();
    for (size_t i = 0; a && i < piece.len; i++)
        json_array_append_new(a, json_integer((unsigned char)piece.ptr[i]));
    return a;
}

static json_t *tokens_json(const struct tokenizer *tok, const struct tok_ids *ids, bool with_pieces)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < ids->n_ids; i++) {
        json_t *e = with_pieces ? json_pack("{s:i, s:o}", "id", ids->ids[i], "piece",
                                            piece_json(tok_piece(tok, ids->ids[i])))
                                : json_integer(ids->ids[i]);
        if (json_array_append_new(a, e) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

void api_native_tokenize(const struct api_ctx *ctx, const struct api_request *req,
                         struct api_response *resp)
{
    struct api_fail f = {0};
    bool add_special = false, parse_special = true, with_pieces = false;
    const json_t *b = req->json;
    if (!v_bool(b, "add_special", "add_special", &add_special, &f) ||
        !v_bool(b, "parse_special", "parse_special", &parse_special, &f) ||
        !v_bool(b, "with_pieces", "with_pieces", &with_pieces, &f) ||
        !v_require(b, "content", "content", &f)) {
        api_fail_respond(&f, resp);
        return;
    }
    struct model *m = native_model_acquire_tokenizer(ctx, req, b, &f);
    if (!m) {
        api_fail_respond(&f, resp);
        return;
    }
    struct native_tokenizer t;
    native_tokenizer_of(m, &t);
    struct tok_ids ids;
    tok_ids_init(&ids);
    if (native_prompt_parse(json_object_get(b, "content"), "content", &t, add_special,
                            parse_special, &ids, &f) != ERR_OK)
        api_fail_respond(&f, resp);
    else
        api_respond_json(
            resp, 200,
            json_pack("{s:o}", "tokens", tokens_json(model_desc(m)->tokenizer, &ids, with_pieces)));
    tok_ids_deinit(&ids);
    model_release(m);
}

static bool detok_ids(const json_t *tokens, int n_vocab, struct tok_ids *out, struct api_fail *f)
{
    if (!json_is_array(tokens))
        return api_failf(f, 400, "invalid_type", "tokens",
                         "Invalid type for 'tokens': expected an array of token ids, but got %s.",
                         v_type_name(tokens));
    size_t i;
    const json_t *v;
    json_array_foreach(tokens, i, v)
    {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= n_vocab)
            return api_failf(f, 400, "invalid_value", "tokens",
                             "'tokens[%zu]' is not a token id of this model (0..%d)", i,
                             n_vocab - 1);
        if (tok_ids_push(out, (tok_id)id) != ERR_OK)
            return api_failf(f, 500, NULL, NULL, "out of memory");
    }
    return true;
}

void api_native_detokenize(const struct api_ctx *ctx, const struct api_request *req,
                           struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = native_model_acquire_tokenizer(ctx, req, req->json, &f);
    if (!m) {
        api_fail_respond(&f, resp);
        return;
    }
    const struct platform_model_desc *d = model_desc(m);
    struct tok_ids ids;
    tok_ids_init(&ids);
    const json_t *tokens = json_object_get(req->json, "tokens");
    if (tokens && !detok_ids(tokens, d->n_vocab, &ids, &f)) {
        api_fail_respond(&f, resp);
    } else {
        // Pieces concatenated with special tokens' text, as llama-server's tokens_to_str; a
        // split UTF-8 character at the end becomes U+FFFD.
        struct tok_stream ts;
        struct buf text;
        buf_init(&text);
        tok_stream_init(&ts, d->tokenizer, true);
        struct buf valid;
        buf_init(&valid);
        int rc = ERR_OK;
        for (size_t i = 0; rc == ERR_OK && i < ids.n_ids; i++)
            rc = tok_stream_push(&ts, ids.ids[i], &text);
        if (rc == ERR_OK) rc = tok_stream_flush(&ts, &text);
        if (rc == ERR_OK) rc = native_utf8_sanitize(text.data ? text.data : "", text.len, &valid);
        if (rc != ERR_OK)
            api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        else
            api_respond_json(
                resp, 200, json_pack("{s:s%}", "content", valid.data ? valid.data : "", valid.len));
        buf_deinit(&text);
        buf_deinit(&valid);
    }
    tok_ids_deinit(&ids);
    model_release(m);
}

void api_native_apply_template(const struct api_ctx *ctx, const struct api_request *req,
                               struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = native_model_acquire(ctx, req, req->json, MODEL_KIND_CHAT, &f);
    if (!m || !chat_messages_validate(m, json_object_get(req->json, "messages"), NULL, &f)) {
        api_fail_respond(&f, resp);
        model_release(m);
        return;
    }
    json_t *tools = json_object_get(req->json, "tools");
    const json_t *kwargs = json_object_get(req->json, "chat_template_kwargs");
    struct chat_prompt_opts po = {
        .messages = json_object_get(req->json, "messages"),
        .tools = json_is_array(tools) && json_array_size(tools) ? tools : NULL,
        .enable_thinking = -1,
        .template_kwargs = json_is_object(kwargs) ? kwargs : NULL,
        .add_generation_prompt = true,
        .is_count = true, // the whole text is the answer, even past the context
    };
    bool b = true;
    if (!v_bool(req->json, "add_generation_prompt", "add_generation_prompt", &b, &f)) {
        api_fail_respond(&f, resp);
        model_release(m);
        return;
    }
    po.add_generation_prompt = b;
    struct chat_prompt prompt = {0};
    if (chat_prompt_build(m, &po, &prompt, &f) != ERR_OK && f.status != 400)
        api_fail_respond(&f, resp);
    else if (f.status == 400 && strcmp(f.code ? f.code : "", "context_length_exceeded") != 0)
        api_fail_respond(&f, resp);
    else
        api_respond_json(resp, 200,
                         json_pack("{s:s%}", "prompt", prompt.text.data ? prompt.text.data : "",
                                   prompt.text.len));
    chat_prompt_deinit(&prompt);
    model_release(m);
}

/* The default settings of a model: server flags <- default_params, no request fields. */
static json_t *default_settings(const struct api_ctx *ctx, struct model *m)
{
    static const struct params_names names = {"n_predict", NULL, "stop"};
    struct native_params *np = mem_calloc(1, sizeof *np);
    json_t *empty = json_object();
    struct api_fail f = {0};
    json_t *j = NULL;
    if (np && empty && native_params_parse(ctx, m, empty, &names, np, &f)) {
        np->is_stream = true;
        j = native_settings_json(m, np);
    }
    json_decref(empty);
    if (np) native_params_deinit(np);
    mem_free(np);
    return j;
}

static json_t *next_token_json(void)
{
    return json_pack("{s:b, s:b, s:i, s:i, s:s}", "has_next_token", true, "has_new_line", false,
                     "n_remain", -1, "n_decoded", 0, "stopping_word", "");
}

/* A slot as llama-server shows it; params (taken; NULL for none) with the task fields, which
 * llama-server shows only for a slot that has a task. */
static json_t *slot_json(int id, int n_ctx, bool is_processing, json_t *params)
{
    json_t *j = json_pack("{s:i, s:i, s:b, s:b}", "id", id, "n_ctx", n_ctx, "speculative", false,
                          "is_processing", is_processing);
    if (j && params) {
        json_object_set_new(j, "id_task", json_integer(-1));
        json_object_set_new(j, "params", params);
        json_object_set_new(j, "prompt", json_string(""));
        json_object_set_new(j, "next_token", next_token_json());
    } else {
        json_decref(params);
    }
    return j;
}

void api_native_props(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = native_model_acquire_tokenizer(ctx, req, NULL, &f);
    if (!m) {
        api_fail_respond(&f, resp);
        return;
    }
    struct model_info info;
    model_get_info(m, &info);
    const struct platform_model_desc *d = model_desc(m);
    char build[64];
    snprintf(build, sizeof build, "llamapi-%s", ctx->version ? ctx->version : "dev");
    json_t *j = json_pack(
        "{s:o, s:i, s:s, s:s, s:s, s:{}, s:s, s:s, s:{s:b, s:b}, s:s, s:b}",
        "default_generation_settings", slot_json(0, d->n_ctx, false, default_settings(ctx, m)),
        "total_slots", info.instance_count, "model_path", info.path, "model_alias", info.id,
        "chat_template", d->chat_template_src ? d->chat_template_src : "", "chat_template_caps",
        "bos_token", d->bos_text ? d->bos_text : "", "eos_token", d->eos_text ? d->eos_text : "",
        "modalities", "vision", d->has_vision, "audio", d->has_audio, "build_info", build,
        "is_sleeping", false);
    if (j) json_object_set_new(j, "endpoint_slots", json_boolean(!ctx->is_slots_disabled));
    if (j) {
        json_object_set_new(j, "endpoint_metrics", json_boolean(ctx->is_metrics_enabled));
        json_object_set_new(j, "n_ctx", json_integer(d->n_ctx));
    }
    api_respond_json(resp, 200, j);
    model_release(m);
}

void api_native_slots(const struct api_ctx *ctx, const struct api_request *req,
                      struct api_response *resp)
{
    struct api_fail f = {0};
    if (ctx->is_slots_disabled) {
        api_error(resp, 501, API_TYPE_NOT_IMPLEMENTED, "not_supported", NULL,
                  "This server has the slots endpoint disabled (--no-slots).");
        return;
    }
    struct model *m = native_model_acquire_tokenizer(ctx, req, NULL, &f);
    if (!m) {
        api_fail_respond(&f, resp);
        return;
    }
    struct model_info info;
    model_get_info(m, &info);
    const char *fail = req->query ? req->query(req->conn, "fail_on_no_slot") : NULL;
    if (fail && strcmp(fail, "0") != 0 && strcmp(fail, "false") != 0 &&
        info.busy_count >= info.instance_count) {
        api_error(resp, 503, API_TYPE_UNAVAILABLE, "no_slot_available", NULL, "no slot available");
        model_release(m);
        return;
    }
    enum pool_slot states[POOL_MAX_INSTANCES];
    model_slot_states(m, states);
    json_t *a = json_array();
    for (int i = 0; a && i < POOL_MAX_INSTANCES; i++) {
        if (states[i] == POOL_SLOT_EMPTY) continue;
        bool is_busy = states[i] != POOL_SLOT_IDLE; // retiring ones still finish a request
        json_array_append_new(
            a, slot_json(i, info.desc.n_ctx, is_busy, is_busy ? default_settings(ctx, m) : NULL));
    }
    api_respond_json(resp, 200, a);
    model_release(m);
}

static int collect_models(const struct api_ctx *ctx, struct metrics_snapshot *s,
                          struct metrics_model *mm, struct model_info *infos)
{
    int n = registry_list(manager_registry(ctx->manager), infos, MAX_LISTED);
    if (n > MAX_LISTED) n = MAX_LISTED;
    for (int i = 0; i < n; i++) {
        mm[i] = (struct metrics_model){
            .id = infos[i].id,
            .queue_depth = infos[i].queue_depth,
            .n_busy = infos[i].busy_count,
            .n_idle = infos[i].instance_count - infos[i].busy_count,
            .is_loading = infos[i].status == MODEL_STATUS_LOADING,
        };
        if (mm[i].n_idle < 0) mm[i].n_idle = 0;
        s->requests_processing += infos[i].busy_count;
        s->requests_deferred += infos[i].queue_depth;
    }
    return n;
}

void api_native_metrics(const struct api_ctx *ctx, const struct api_request *req,
                        struct api_response *resp)
{
    (void)req;
    if (!ctx->is_metrics_enabled || !ctx->metrics) {
        api_error(resp, 501, API_TYPE_NOT_IMPLEMENTED, "not_supported", NULL,
                  "This server does not have metrics endpoint enabled (start it with "
                  "--metrics).");
        return;
    }
    struct model_info *infos = mem_calloc(MAX_LISTED, sizeof *infos);
    struct metrics_model *mm = mem_calloc(MAX_LISTED, sizeof *mm);
    struct metrics_snapshot s;
    metrics_snapshot_take(ctx->metrics, &s);
    int rc = infos && mm ? ERR_OK : ERR_NOMEM;
    if (rc == ERR_OK) {
        int n = collect_models(ctx, &s, mm, infos);
        buf_clear(&resp->body);
        rc = metrics_format(&s, mm, n, &resp->body);
    }
    mem_free(infos);
    mem_free(mm);
    if (rc != ERR_OK) {
        api_error(resp, 500, API_TYPE_SERVER, NULL, NULL, "out of memory");
        return;
    }
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    char started[24]; // llama-server's header: when the counters started
    snprintf(started, sizeof started, "%lld", (long long)ctx->started_unix_s);
    api_response_add_header(resp, "Process-Start-Time-Unix", started);
}
