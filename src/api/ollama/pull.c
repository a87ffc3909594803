/* POST /api/pull: a Hugging Face GGUF named as Ollama names one (`hf.co/org/repo[:QUANT]`,
 * `huggingface.co/…`) downloaded into --models-dir through hub/ (the code of `llamapi pull`,
 * -hf and hf:// paths), answered with Ollama's status lines; other names only when present. */
#include "api/ollama/handlers.h"

#include "api/errors.h"
#include "api/ollama/common.h"
#include "api/ollama/ndjson.h"
#include "hub/hub.h"
#include "util/clock.h"
#include "util/mem.h"
#include "util/thread.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define PULL_LINE_EVERY_MS 250.0 // progress lines at most 4 a second
#define PULL_REF_CAP       (HUB_REPO_CAP + HUB_QUANT_CAP + HUB_FILE_CAP)

/* Hub failures as HTTP statuses: the hub's 401/403 are the server's upstream failing (502),
 * not the client's credentials, as on POST /v1/models/load. */
static int status_of(enum hub_failure why)
{
    static const int table[] = {
        [HUB_FAIL_NONE] = 500,      [HUB_FAIL_REF] = 400,     [HUB_FAIL_NOT_FOUND] = 404,
        [HUB_FAIL_NO_MATCH] = 404,  [HUB_FAIL_AUTH] = 502,    [HUB_FAIL_FORBIDDEN] = 502,
        [HUB_FAIL_OFFLINE] = 400,   [HUB_FAIL_NETWORK] = 502, [HUB_FAIL_CHECKSUM] = 502,
        [HUB_FAIL_DISK_FULL] = 507, [HUB_FAIL_IO] = 500,
    };
    return (size_t)why < sizeof table / sizeof table[0] ? table[why] : 500;
}

/* One pull, shared by its download thread and its NDJSON stream; freed by the last of the
 * two to let go (a client that leaves does not stop the download). */
struct pull_job {
    atomic_int refs;
    struct mutex mu;
    struct cond cv;
    // Immutable after start:
    char ref[PULL_REF_CAP];
    // the server's hub options, with its strings copied: the detached download thread may
    // outlive the request and the server's stack frame that holds them
    struct hub_opts opts;
    char hub_url[512], token[512], models_dir[4096];
    // Guarded by mu:
    char file[HUB_FILE_CAP]; // the file of the last progress report
    char digest[80];         // "sha256:<hex>" or ""
    uint64_t done, total;
    bool has_line;     // a report not yet sent as a line
    bool is_file_done; // that report is its file's last
    bool is_finished;  // hub_resolve returned
    int rc;
    enum hub_failure why;
    struct errmsg err;
    // Owned by the stream:
    double last_line_ms;
};

static void job_unref(struct pull_job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) != 1) return;
    cond_deinit(&j->cv);
    mutex_deinit(&j->mu);
    mem_free(j);
}

static void on_progress(void *user, const struct hub_progress *p)
{
    struct pull_job *j = user;
    mutex_lock(&j->mu);
    snprintf(j->file, sizeof j->file, "%s", p->file);
    snprintf(j->digest, sizeof j->digest, "%s%s", p->sha256 && p->sha256[0] ? "sha256:" : "",
             p->sha256 ? p->sha256 : "");
    j->done = p->done;
    j->total = p->total;
    j->has_line = true;
    j->is_file_done = p->is_done;
    cond_signal(&j->cv);
    mutex_unlock(&j->mu);
}

static void *pull_main(void *arg)
{
    struct pull_job *j = arg;
    struct hub_opts o = j->opts;
    o.progress = on_progress;
    o.progress_user = j;
    char path[4096];
    enum hub_failure why = HUB_FAIL_NONE;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = hub_resolve(&o, j->ref, path, sizeof path, &why, &err);
    mutex_lock(&j->mu);
    j->rc = rc;
    j->why = why;
    j->err = err;
    j->is_finished = true;
    cond_signal(&j->cv);
    mutex_unlock(&j->mu);
    job_unref(j);
    return NULL;
}

/* The progress line of the last report ("pulling <12 hex>" as Ollama names a layer). */
static void append_progress(struct pull_job *j, struct buf *out)
{
    const char *hex = j->digest[0] ? j->digest + 7 : j->file;
    char status[HUB_FILE_CAP + 16];
    snprintf(status, sizeof status, "pulling %.12s", hex);
    ndjson_append(out, json_pack("{s:s, s:s, s:I, s:I}", "status", status, "digest",
                                 j->digest[0] ? j->digest : j->file, "total", (json_int_t)j->total,
                                 "completed", (json_int_t)j->done));
    j->has_line = false;
    j->last_line_ms = clock_now_ms();
}

/* Producer: progress lines while the download runs (a file's last report always, others at
 * most every PULL_LINE_EVERY_MS), then the closing lines or Ollama's error line. */
static enum sse_status pull_produce(void *ctx, struct buf *out, int timeout_ms)
{
    struct pull_job *j = ctx;
    mutex_lock(&j->mu);
    double wait_ms = timeout_ms;
    if (j->has_line) {
        double due_ms = j->last_line_ms + PULL_LINE_EVERY_MS - clock_now_ms();
        if (j->is_file_done || j->is_finished || due_ms <= 0)
            append_progress(j, out);
        else
            wait_ms = due_ms < wait_ms ? due_ms : wait_ms;
    }
    if (out->len == 0 && !j->is_finished) cond_wait_ms(&j->cv, &j->mu, (int64_t)wait_ms + 1);
    enum sse_status st = SSE_MORE;
    if (out->len == 0 && j->is_finished && !j->has_line) {
        if (j->rc == ERR_OK) {
            ndjson_append(out, json_pack("{s:s}", "status", "verifying sha256 digest"));
            ndjson_append(out, json_pack("{s:s}", "status", "success"));
        } else {
            ndjson_append(out, api_error_ollama_json(j->err.msg));
        }
        st = SSE_END;
    }
    mutex_unlock(&j->mu);
    return st;
}

static void pull_free(void *ctx)
{
    job_unref(ctx);
}

static struct pull_job *job_new(const struct hub_opts *hub, const char *ref)
{
    struct pull_job *j = mem_calloc(1, sizeof *j);
    if (!j) return NULL;
    if (mutex_init(&j->mu) != ERR_OK) goto out_free;
    if (cond_init(&j->cv) != ERR_OK) goto out_mutex;
    atomic_init(&j->refs, 1);
    snprintf(j->ref, sizeof j->ref, "%s", ref);
    snprintf(j->hub_url, sizeof j->hub_url, "%s", hub->hub_url);
    snprintf(j->token, sizeof j->token, "%s", hub->token ? hub->token : "");
    snprintf(j->models_dir, sizeof j->models_dir, "%s", hub->models_dir);
    j->opts = *hub;
    j->opts.hub_url = j->hub_url;
    j->opts.token = j->token[0] ? j->token : NULL;
    j->opts.models_dir = j->models_dir;
    return j;
out_mutex:
    mutex_deinit(&j->mu);
out_free:
    mem_free(j);
    return NULL;
}

/* Streams the pull of ref: the download runs on a thread of its own so its progress reaches
 * the client while it runs (hub_resolve blocks; the HTTP layer pulls lines from the stream). */
static void pull_stream(const struct hub_opts *hub, const char *ref, struct api_response *resp)
{
    struct pull_job *j = job_new(hub, ref);
    struct thread t;
    if (!j) {
        ollama_error(resp, 500, "out of memory");
        return;
    }
    atomic_store(&j->refs, 2);
    if (thread_start(&t, pull_main, j) != ERR_OK) {
        atomic_store(&j->refs, 1);
        job_unref(j);
        ollama_error(resp, 500, "cannot start the download");
        return;
    }
    pthread_detach(t.handle); // it ends on its own; the job outlives whichever side ends first
    ndjson_respond(resp, pull_produce, pull_free, j, "{\"status\":\"pulling manifest\"}\n");
}

/* Pulls ref and answers once: {"status":"success"} or the hub's error. Blocks meanwhile. */
static void pull_once(const struct hub_opts *hub, const char *ref, struct api_response *resp)
{
    char path[4096];
    enum hub_failure why = HUB_FAIL_NONE;
    struct errmsg err;
    errmsg_clear(&err);
    if (hub_resolve(hub, ref, path, sizeof path, &why, &err) != ERR_OK) {
        ollama_error(resp, status_of(why), "%s", err.msg);
        return;
    }
    api_respond_json(resp, 200, json_pack("{s:s}", "status", "success"));
}

/* Ollama's status lines for a model that is already here. */
static void pull_present(bool is_stream, struct api_response *resp)
{
    if (!is_stream) {
        api_respond_json(resp, 200, json_pack("{s:s}", "status", "success"));
        return;
    }
    struct buf b;
    buf_init(&b);
    ndjson_append(&b, json_pack("{s:s}", "status", "pulling manifest"));
    ndjson_append(&b, json_pack("{s:s}", "status", "success"));
    resp->status = 200;
    resp->content_type = "application/x-ndjson";
    buf_clear(&resp->body);
    if (b.len == 0 || buf_append(&resp->body, b.data, b.len) != ERR_OK)
        ollama_error(resp, 500, "out of memory");
    buf_deinit(&b);
}

/* A name that is not a hub name: success when it names a model here, else Ollama's 404. */
static void pull_local(const struct api_ctx *ctx, const char *name, bool is_stream,
                       struct api_response *resp)
{
    struct api_fail f = {0};
    struct model *m = ollama_model_acquire(ctx, name, MODEL_KIND_CHAT, &f);
    if (!m && f.status == 400 && name[0]) // embedding models are pulled the same way
        m = ollama_model_acquire(ctx, name, MODEL_KIND_EMBEDDING, &(struct api_fail){0});
    if (m) {
        model_release(m);
        pull_present(is_stream, resp);
        return;
    }
    if (f.status != 404) {
        ollama_fail_respond(&f, resp);
        return;
    }
    ollama_error(resp, 404,
                 "model '%.200s' not found; only Hugging Face GGUF models can be pulled, named "
                 "hf.co/org/repo[:QUANT]",
                 name);
}

void api_ollama_pull(const struct api_ctx *ctx, const struct api_request *req,
                     struct api_response *resp)
{
    struct api_fail f = {0};
    const char *name = ollama_request_name(req->json, &f);
    const json_t *stream = json_object_get(req->json, "stream");
    if (name && stream && !json_is_null(stream) && !json_is_boolean(stream))
        api_failf(&f, 400, "invalid_type", "stream", "stream must be a boolean");
    bool is_stream = !json_is_false(stream);
    if (!name || f.status) {
        ollama_fail_respond(&f, resp);
        return;
    }
    char ref[PULL_REF_CAP];
    if (!ollama_hub_ref(name, ref, sizeof ref)) {
        pull_local(ctx, name, is_stream, resp);
        return;
    }
    if (!ctx->hub) {
        ollama_error(resp, 400, "hub models are not available here");
        return;
    }
    if (is_stream)
        pull_stream(ctx->hub, ref, resp);
    else
        pull_once(ctx->hub, ref, resp);
}
