/* POST /slots/{id}?action=save|restore|erase: llama-server's slot actions on one instance's
 * prompt cache. A saved file keeps llama.cpp's sequence-state header and its packed token
 * list (magic 'ggsq', version, payload words; payload: -1, format 1, n, ids), so files written
 * here restore in llama-server and the token part of its files restores here; the keys and
 * values are not written: a restore computes them again from the tokens. */
#include "api/handlers.h"

#include "api/errors.h"
#include "api/native/native_internal.h"
#include "api/validate.h"
#include "core/manager.h"
#include "util/clock.h"
#include "util/mem.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define STATE_MAGIC    0x67677371u // 'ggsq', llama.cpp's sequence-state magic
#define STATE_VERSION  3u          // the version llama.cpp writes
#define PACKED_NULL    0xffffffffu // a packed token list starts with the null token
#define PACKED_VERSION 1u
#define SLOT_NAME_MAX  255 // bytes of a file name

/* llama-server's rule for slot file names: a plain name in the save directory (no path
 * separators, no leading dot, printable ASCII). */
static bool filename_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SLOT_NAME_MAX || s[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '/' || c == '\\' || c == ':') return false;
    }
    return true;
}

struct slot_call {
    int id;             // instance index
    const char *action; // "save", "restore", "erase"
    char filename[SLOT_NAME_MAX + 1];
    char path[2048];
};

/* The slot id, the action and (save/restore) the file name from the request. */
static bool parse_call(const struct api_ctx *ctx, const struct api_request *req,
                       struct slot_call *c, struct api_fail *f)
{
    char id[16];
    char *end;
    if (req->path_param.len == 0 || req->path_param.len >= sizeof id)
        return api_failf(f, 400, "invalid_value", "id_slot", "Invalid slot ID");
    memcpy(id, req->path_param.ptr, req->path_param.len);
    id[req->path_param.len] = '\0';
    long v = strtol(id, &end, 10);
    if (*end || v < 0 || v >= POOL_MAX_INSTANCES)
        return api_failf(f, 400, "invalid_value", "id_slot", "Invalid slot ID");
    c->id = (int)v;
    c->action = req->query ? req->query(req->conn, "action") : NULL;
    if (!c->action || (strcmp(c->action, "save") != 0 && strcmp(c->action, "restore") != 0 &&
                       strcmp(c->action, "erase") != 0))
        return api_failf(f, 400, "invalid_value", "action",
                         "Invalid action: use ?action=save, restore or erase");
    if (strcmp(c->action, "erase") == 0) return true;
    json_error_t jerr;
    json_t *body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    const char *name = json_string_value(json_object_get(body, "filename"));
    bool ok = name && filename_ok(name);
    if (ok) snprintf(c->filename, sizeof c->filename, "%s", name);
    json_decref(body);
    if (!ok)
        return api_failf(f, 400, "invalid_value", "filename",
                         "Invalid filename: send {\"filename\": NAME}, a plain file name");
    snprintf(c->path, sizeof c->path, "%s/%s", ctx->slot_save_path, c->filename);
    return true;
}

/* Runs a slot request of this kind on instance id and collects the tokens it reports (save,
 * erase). ERR_OK, or an error with f filled (429 queue full, 503 busy, 400 from the
 * platform). */
static int run_slot(struct model *m, enum request_kind kind, int id, const struct tok_ids *prompt,
                    struct tok_ids *out, struct api_fail *f)
{
    struct gen_params params;
    gen_params_defaults(&params);
    struct request *r = NULL;
    int n_ctx = model_desc(m)->n_ctx;
    if (request_new(kind, prompt ? prompt->ids : NULL, prompt ? (int)prompt->n_ids : 0, &params,
                    n_ctx, &r) != ERR_OK)
        return api_failf(f, 500, NULL, NULL, "out of memory"), ERR_NOMEM;
    r->preferred_instance = id;
    enum pool_admit admit = model_submit(m, r);
    if (admit != POOL_ADMIT_RUN && admit != POOL_ADMIT_QUEUED) {
        request_release(r);
        api_failf(f, admit == POOL_ADMIT_FULL ? 429 : 404,
                  admit == POOL_ADMIT_FULL ? "queue_full" : "model_not_found", NULL,
                  "The model cannot take the slot action now");
        return ERR_BUSY;
    }
    struct gen_event ev[64];
    int cursor = 0, rc = ERR_OK;
    enum finish_reason finish = FINISH_NONE;
    while (finish == FINISH_NONE) {
        int n = request_wait_events(r, &cursor, ev, 64, -1, &finish);
        for (int k = 0; k < n && out && rc == ERR_OK; k++)
            rc = tok_ids_push(out, ev[k].token);
    }
    int status = 0;
    struct errmsg err;
    errmsg_clear(&err);
    if (request_outcome(r, &status, &err, NULL) == FINISH_ERROR) {
        api_failf(f, status ? status : 500, status == 503 ? "slot_busy" : NULL, "id_slot", "%s",
                  err.msg);
        if (status == 503) f->type = API_TYPE_UNAVAILABLE;
        rc = ERR_BUSY;
    } else if (rc != ERR_OK) {
        api_failf(f, 500, NULL, NULL, "out of memory");
    }
    request_release(r);
    return rc;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Writes the header and the packed token list; *bytes is the file size. */
static int write_state(const char *path, const struct tok_ids *ids, size_t *bytes,
                       struct api_fail *f)
{
    size_t n = ids->n_ids, words = 6 + n;
    unsigned char *b = mem_alloc(words * 4);
    if (!b) return api_failf(f, 500, NULL, NULL, "out of memory"), ERR_NOMEM;
    put_u32(b, STATE_MAGIC);
    put_u32(b + 4, STATE_VERSION);
    put_u32(b + 8, (uint32_t)(3 + n));
    put_u32(b + 12, PACKED_NULL);
    put_u32(b + 16, PACKED_VERSION);
    put_u32(b + 20, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        put_u32(b + 24 + 4 * i, (uint32_t)ids->ids[i]);
    FILE *fp = fopen(path, "wb");
    bool ok = fp && fwrite(b, 4, words, fp) == words;
    if (fp && fclose(fp) != 0) ok = false;
    mem_free(b);
    if (!ok)
        return api_failf(f, 500, NULL, NULL, "cannot write the slot file: %s", strerror(errno)),
               ERR_IO;
    *bytes = words * 4;
    return ERR_OK;
}

/* Reads the token list of a state file (packed, or the plain list older servers wrote); the
 * keys and values after it are not read. 400 for a missing or malformed file. */
static int read_state(const char *path, int max_tokens, struct tok_ids *ids, size_t *bytes,
                      struct api_fail *f)
{
    unsigned char h[12];
    FILE *fp = fopen(path, "rb");
    if (!fp) return api_failf(f, 400, "invalid_value", "filename", "no slot file named so"), ERR_IO;
    int rc = ERR_FORMAT;
    uint32_t words = 0;
    if (fread(h, 1, sizeof h, fp) == sizeof h && get_u32(h) == STATE_MAGIC) {
        words = get_u32(h + 8);
        rc = words <= (uint32_t)max_tokens + 3 ? ERR_OK : ERR_LIMIT;
    }
    unsigned char *b = rc == ERR_OK ? mem_alloc((size_t)words * 4 + 1) : NULL;
    if (rc == ERR_OK && !b) rc = ERR_NOMEM;
    if (rc == ERR_OK && fread(b, 4, words, fp) != words) rc = ERR_FORMAT;
    fclose(fp);
    size_t at = 0, n = words;
    if (rc == ERR_OK && words >= 3 && get_u32(b) == PACKED_NULL) {
        n = get_u32(b + 8);
        at = 12;
        if (n > words - 3) rc = ERR_FORMAT;
    }
    for (size_t i = 0; rc == ERR_OK && i < n; i++)
        rc = tok_ids_push(ids, (tok_id)get_u32(b + at + 4 * i));
    mem_free(b);
    if (rc == ERR_NOMEM) return api_failf(f, 500, NULL, NULL, "out of memory"), rc;
    if (rc != ERR_OK)
        return api_failf(f, 400, "invalid_value", "filename",
                         rc == ERR_LIMIT ? "the slot file holds more tokens than the context"
                                         : "not a slot state file"),
               rc;
    *bytes = 12 + (size_t)words * 4;
    return ERR_OK;
}

static json_t *do_save(struct model *m, const struct slot_call *c, struct api_fail *f)
{
    double t0 = clock_now_ms();
    struct tok_ids ids;
    tok_ids_init(&ids);
    size_t bytes = 0;
    json_t *j = NULL;
    if (run_slot(m, REQUEST_SLOT_SAVE, c->id, NULL, &ids, f) == ERR_OK &&
        write_state(c->path, &ids, &bytes, f) == ERR_OK)
        j = json_pack("{s:i, s:s, s:i, s:I, s:{s:f}}", "id_slot", c->id, "filename", c->filename,
                      "n_saved", (int)ids.n_ids, "n_written", (json_int_t)bytes, "timings",
                      "save_ms", clock_now_ms() - t0);
    tok_ids_deinit(&ids);
    return j;
}

static json_t *do_restore(struct model *m, const struct slot_call *c, struct api_fail *f)
{
    double t0 = clock_now_ms();
    struct tok_ids ids;
    tok_ids_init(&ids);
    size_t bytes = 0;
    json_t *j = NULL;
    if (read_state(c->path, model_desc(m)->n_ctx, &ids, &bytes, f) == ERR_OK &&
        run_slot(m, REQUEST_SLOT_RESTORE, c->id, &ids, NULL, f) == ERR_OK)
        j = json_pack("{s:i, s:s, s:i, s:I, s:{s:f}}", "id_slot", c->id, "filename", c->filename,
                      "n_restored", (int)ids.n_ids, "n_read", (json_int_t)bytes, "timings",
                      "restore_ms", clock_now_ms() - t0);
    tok_ids_deinit(&ids);
    return j;
}

static json_t *do_erase(struct model *m, const struct slot_call *c, struct api_fail *f)
{
    struct tok_ids ids;
    tok_ids_init(&ids);
    json_t *j = NULL;
    if (run_slot(m, REQUEST_SLOT_ERASE, c->id, NULL, &ids, f) == ERR_OK)
        j = json_pack("{s:i, s:i}", "id_slot", c->id, "n_erased", (int)ids.n_ids);
    tok_ids_deinit(&ids);
    return j;
}

static bool slot_exists(struct model *m, int id)
{
    enum pool_slot states[POOL_MAX_INSTANCES];
    model_slot_states(m, states);
    return states[id] != POOL_SLOT_EMPTY;
}

void api_native_slot_action(const struct api_ctx *ctx, const struct api_request *req,
                            struct api_response *resp)
{
    if (!ctx->slot_save_path) {
        api_error(resp, 501, API_TYPE_NOT_IMPLEMENTED, "not_supported", NULL,
                  "This server does not support slots action. Start it with `--slot-save-path`");
        return;
    }
    struct api_fail f = {0};
    struct slot_call c = {0};
    struct model *m = NULL;
    json_t *j = NULL;
    if (parse_call(ctx, req, &c, &f) &&
        (m = native_model_acquire(ctx, req, NULL, MODEL_KIND_CHAT, &f))) {
        if (!slot_exists(m, c.id))
            api_failf(&f, 400, "invalid_value", "id_slot", "Invalid slot ID: no slot %d", c.id);
        else if (strcmp(c.action, "save") == 0)
            j = do_save(m, &c, &f);
        else if (strcmp(c.action, "restore") == 0)
            j = do_restore(m, &c, &f);
        else
            j = do_erase(m, &c, &f);
    }
    model_release(m);
    if (j)
        api_respond_json(resp, 200, j);
    else
        api_fail_respond(&f, resp);
}
