/* GET /api/version, /api/tags, /api/ps and POST /api/show: the models this server has, in
 * Ollama's list, process and show shapes (POST /api/pull is pull.c). */
#include "api/ollama/handlers.h"

#include "api/ollama/common.h"
#include "core/manager.h"
#include "text/json_text.h"
#include "text/reasoning.h"
#include "text/tokenizer/tokenizer.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The Ollama API level these routes follow (clients compare it before using newer fields). */
#define OLLAMA_API_VERSION "0.12.0"
#define MAX_LISTED         64

void api_ollama_version(const struct api_ctx *ctx, const struct api_request *req,
                        struct api_response *resp)
{
    (void)ctx;
    (void)req;
    api_respond_json(resp, 200, json_pack("{s:s}", "version", OLLAMA_API_VERSION));
}

/* A stable 64-hex-digit identifier of the model (id, path, size): Ollama's digest names the
 * manifest's SHA-256; here no manifest exists and hashing gigabytes per listing is too dear,
 * so this identifies, it does not verify. */
static void digest_of(const struct model_info *m, char out[65])
{
    uint64_t h[4] = {0xcbf29ce484222325u, 0x84222325cbf29ce4u, 0x9e3779b97f4a7c15u,
                     0x243f6a8885a308d3u};
    const char *parts[2] = {m->id, m->path};
    for (int k = 0; k < 4; k++) {
        for (int p = 0; p < 2; p++)
            for (const char *s = parts[p]; *s; s++)
                h[k] = (h[k] ^ (uint8_t)*s) * 0x100000001b3u;
        h[k] = (h[k] ^ m->desc.file_size) * 0x100000001b3u;
        h[k] ^= h[k] >> 29;
    }
    snprintf(out, 65, "%016llx%016llx%016llx%016llx", (unsigned long long)h[0],
             (unsigned long long)h[1], (unsigned long long)h[2], (unsigned long long)h[3]);
}

/* The model file's modification time, else its load time. */
static void modified_at(const struct model_info *m, char out[OLLAMA_TIME_CAP])
{
    struct stat st;
    ollama_time_unix(stat(m->path, &st) == 0 ? (int64_t)st.st_mtime : m->created_unix_s, out);
}

/* Ollama's capabilities: completion or embedding; tools when the template renders tools;
 * thinking when it has reasoning markers; insert when the vocabulary has FIM tokens; audio with
 * an audio projector. */
static json_t *capabilities_json(const struct platform_model_desc *d)
{
    json_t *a = json_array();
    if (!a) return NULL;
    if (d->kind == MODEL_KIND_EMBEDDING) {
        json_array_append_new(a, json_string("embedding"));
        return a;
    }
    json_array_append_new(a, json_string("completion"));
    const char *src = d->chat_template_src;
    if (src && strstr(src, "tools")) json_array_append_new(a, json_string("tools"));
    if (d->reasoning_format != REASONING_FORMAT_NONE)
        json_array_append_new(a, json_string("thinking"));
    const struct tok_specials *sp = d->tokenizer ? tok_specials(d->tokenizer) : NULL;
    if (sp && sp->fim_pre != TOK_ID_NONE && sp->fim_suf != TOK_ID_NONE &&
        sp->fim_mid != TOK_ID_NONE)
        json_array_append_new(a, json_string("insert"));
    if (d->has_audio) json_array_append_new(a, json_string("audio"));
    return a;
}

/* An /api/tags entry (is_ps false) or an /api/ps entry. */
static json_t *entry_json(const struct model_info *m, bool is_ps)
{
    char name[MODEL_ID_CAP + 8], digest[65], when[OLLAMA_TIME_CAP];
    ollama_name_of(m->id, name, sizeof name);
    digest_of(m, digest);
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:o}", "name", name, "model", name, "size",
                          (json_int_t)m->desc.file_size, "digest", digest, "details",
                          ollama_details_json(&m->desc, m->path));
    if (!j) return NULL;
    if (!is_ps) {
        modified_at(m, when);
        json_object_set_new(j, "modified_at", json_string(when));
        json_object_set_new(j, "capabilities", capabilities_json(&m->desc));
        return j;
    }
    // Loaded memory: the mapped file and every instance's caches. Nothing runs on a GPU here.
    uint64_t size = m->desc.file_size + m->desc.instance_bytes * (uint64_t)m->instance_count;
    json_object_set_new(j, "size", json_integer((json_int_t)size));
    json_object_set_new(j, "size_vram", json_integer(0));
    json_object_set_new(j, "context_length", json_integer(m->desc.n_ctx));
    // Models stay loaded until unloaded: no keep-alive expiry.
    json_object_set_new(j, "expires_at", json_string("9999-12-31T23:59:59Z"));
    return j;
}

static void respond_list(const struct api_ctx *ctx, bool is_ps, struct api_response *resp)
{
    struct model_info *infos = mem_calloc(MAX_LISTED, sizeof *infos);
    if (!infos) {
        ollama_error(resp, 500, "out of memory");
        return;
    }
    int n = registry_list(manager_registry(ctx->manager), infos, MAX_LISTED);
    json_t *models = json_array();
    for (int i = 0; models && i < n && i < MAX_LISTED; i++) {
        if (infos[i].status != MODEL_STATUS_READY) continue; // details come once loaded
        if (json_array_append_new(models, entry_json(&infos[i], is_ps)) != 0) {
            json_decref(models);
            models = NULL;
        }
    }
    mem_free(infos);
    api_respond_json(resp, 200, models ? json_pack("{s:o}", "models", models) : NULL);
}

void api_ollama_tags(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    (void)req;
    respond_list(ctx, false, resp);
}

void api_ollama_ps(const struct api_ctx *ctx, const struct api_request *req,
                   struct api_response *resp)
{
    (void)req;
    respond_list(ctx, true, resp);
}

/* default_params as Modelfile PARAMETER lines ("temperature 0.2"). */
static json_t *parameters_json(const json_t *default_params)
{
    json_t *dp = json_deep_copy(default_params); // iteration needs a mutable object
    struct buf b;
    buf_init(&b);
    const char *key;
    json_t *v;
    json_object_foreach(dp, key, v)
    {
        char *text = json_text_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (text) buf_printf(&b, "%s%-30s %s", b.len ? "\n" : "", key, text);
        ollama_dumps_free(text);
    }
    json_decref(dp);
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return s;
}

static json_t *model_info_json(const struct platform_model_desc *d)
{
    const char *arch = d->arch[0] ? d->arch : "unknown";
    char k_ctx[64], k_embd[64];
    snprintf(k_ctx, sizeof k_ctx, "%s.context_length", arch);
    snprintf(k_embd, sizeof k_embd, "%s.embedding_length", arch);
    return json_pack("{s:s, s:I, s:i, s:i}", "general.architecture", arch,
                     "general.parameter_count", (json_int_t)d->n_params, k_ctx, d->n_ctx_train,
                     k_embd, d->n_embd);
}

void api_ollama_show(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    struct api_fail f = {0};
    const char *name = ollama_request_name(req->json, &f);
    struct model *m = name ? ollama_model_acquire(ctx, name, MODEL_KIND_CHAT, &f) : NULL;
    if (!m && f.status == 400 && name && name[0]) { // an embedding model: shown all the same
        f = (struct api_fail){0};
        m = ollama_model_acquire(ctx, name, MODEL_KIND_EMBEDDING, &f);
    }
    if (!m) {
        ollama_fail_respond(&f, resp);
        return;
    }
    struct model_info info;
    model_get_info(m, &info);
    const struct platform_model_desc *d = model_desc(m);
    char when[OLLAMA_TIME_CAP];
    modified_at(&info, when);
    struct buf modelfile;
    buf_init(&modelfile);
    buf_printf(&modelfile, "# llamapi serves this model from a GGUF file; no Modelfile.\nFROM %s\n",
               info.path);
    const json_t *dp = model_default_params(m);
    json_t *j = json_pack("{s:s, s:s%, s:o, s:s, s:o, s:o, s:o, s:s}", "license", "", "modelfile",
                          modelfile.data ? modelfile.data : "", modelfile.len, "parameters",
                          dp ? parameters_json(dp) : json_string(""), "template",
                          d->chat_template_src ? d->chat_template_src : "", "details",
                          ollama_details_json(d, info.path), "model_info", model_info_json(d),
                          "capabilities", capabilities_json(d), "modified_at", when);
    buf_deinit(&modelfile);
    model_release(m);
    api_respond_json(resp, 200, j);
}
