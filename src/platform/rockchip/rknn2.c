/* The `rknn2` platform: embedding models (BERT / XLM-R encoders such as bge-m3) compiled to
 * .rknn for the RKNPU2 runtime (librknnrt.so, opened with dlopen), with their Hugging Face
 * tokenizer files beside them. The model has static [1, S] inputs: each input text is
 * tokenized by the API layer with the directory's tokenizer.json, then padded here to S,
 * converted to each input's declared type (int64, int32, int16 or float16), run, pooled (CLS
 * or mean over the real tokens, unless the model outputs one vector already) and
 * L2-normalized. The inputs of a request run one after another on the instance's context.
 * Each instance is its own runtime context pinned to one NPU core where the SoC has several. */
#include "platform/rockchip/rknn2.h"

#include "engine/ops.h"
#include "platform/detect.h"
#include "platform/instances.h"
#include "platform/rockchip/rknn2_abi.h"
#include "platform/vendor.h"
#include "text/tokenizer/tokenizer_json.h"
#include "util/checked.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/log.h"
#include "util/mem.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define MAX_INPUTS       3
#define TOKENIZER_MAX    (64u << 20) // bytes of tokenizer.json we read
#define SEQ_LEN_MAX      32768
#define HIDDEN_MAX       65536
#define RKNN2_INST_BYTES (64u << 20) // runtime buffers of a context beyond its weights

static const struct vendor_sym syms[] = {
    {"rknn_init", offsetof(struct rknn2_fns, init)},
    {"rknn_query", offsetof(struct rknn2_fns, query)},
    {"rknn_inputs_set", offsetof(struct rknn2_fns, inputs_set)},
    {"rknn_run", offsetof(struct rknn2_fns, run)},
    {"rknn_outputs_get", offsetof(struct rknn2_fns, outputs_get)},
    {"rknn_outputs_release", offsetof(struct rknn2_fns, outputs_release)},
    {"rknn_set_core_mask", offsetof(struct rknn2_fns, set_core_mask)},
    {"rknn_destroy", offsetof(struct rknn2_fns, destroy)},
};

/* Written once at start-up, read-only afterwards. */
static struct vendor_lib lib;
static struct rknn2_fns fns;

/* What each model input carries. */
enum input_role {
    ROLE_IDS = 0,
    ROLE_MASK = 1,
    ROLE_TYPE_IDS = 2,
};

/* Immutable after load except set (the instance layer's) and spare. */
struct platform_model {
    struct instances set;
    struct tokenizer *tok;
    struct tok_json_info tinfo;
    char file[4096];             // the .rknn
    uint64_t file_size;          // bytes
    int seq_len;                 // S: tokens per run
    int hidden;                  // H: the width of an embedding
    int n_inputs;                // 1..3
    int32_t in_type[MAX_INPUTS]; // RKNN2_TENSOR_INT64 / INT32 / INT16 / FLOAT16
    enum input_role in_role[MAX_INPUTS];
    bool is_out_pooled;            // output [1, H] instead of [1, S, H]
    enum platform_pooling pooling; // CLS or MEAN (ignored when is_out_pooled)
    tok_id pad_id;
    int n_cores;         // NPU cores of the SoC (core masks), 1 when unknown
    rknn2_context spare; // the context load probed with; instance 0 takes it
    bool has_spare;
    char description[160];
};

/* One instance: a runtime context and its input buffers. Owned by the instance's worker. */
struct handle {
    rknn2_context ctx;
    int32_t core_mask;
    void *buf[MAX_INPUTS]; // (seq_len) elements of the input's type
    float *pooled;         // (hidden)
};

static const struct inst_worker_ops worker_ops;

/* ---- start-up and discovery ---- */

static void rknn2_start(void)
{
    const char *path = vendor_config_get()->rknn_lib;
    char node[64], why[VENDOR_REASON_CAP];
    if (vendor_lib_open(&lib, path, syms, sizeof syms / sizeof syms[0], &fns, sizeof fns) !=
        ERR_OK) {
        log_info("platform rknn2 unavailable: %s", lib.reason);
    } else if (!vendor_npu_node(node, sizeof node, why, sizeof why)) {
        // rknn_init would fail on every model: say so now, naming the node.
        log_info("platform rknn2 unavailable: %s", why);
        vendor_lib_refuse(&lib, why);
        memset(&fns, 0, sizeof fns);
    }
}

static void rknn2_stop(void)
{
    vendor_lib_close(&lib);
    memset(&fns, 0, sizeof fns);
}

static bool rknn2_is_available(void)
{
    return lib.is_available;
}

static void rknn2_status(struct platform_status *out)
{
    vendor_status_fill(&lib, out);
}

static int rknn2_detect_chips(struct platform_chip *out, int max)
{
    return vendor_soc_chips(out, max);
}

static bool rknn2_claims(const char *path)
{
    return vendor_claims(path, "rknn2");
}

/* ---- load ---- */

/* Reads dir/name into a new NUL-terminated buffer (caller frees with mem_free). ERR_NOT_FOUND
 * when the file does not exist, ERR_IO, ERR_LIMIT (over cap), ERR_NOMEM. */
static int read_small_file(const char *dir, const char *name, size_t cap, char **out, size_t *len)
{
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct errmsg why;
    int fd;
    int orc = file_open_regular(path, &fd, &why); // a FIFO in a model directory never blocks
    if (orc != ERR_OK) return orc == ERR_NOT_FOUND ? ERR_NOT_FOUND : ERR_IO;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ERR_IO;
    }
    struct buf b;
    buf_init(&b);
    char chunk[65536];
    size_t n;
    int rc = ERR_OK;
    while (rc == ERR_OK && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = b.len + n > cap ? ERR_LIMIT : buf_append(&b, chunk, n);
    if (rc == ERR_OK && ferror(f)) rc = ERR_IO;
    fclose(f);
    if (rc == ERR_OK && !b.data) rc = buf_append(&b, "", 0);
    if (rc != ERR_OK) {
        buf_deinit(&b);
        return rc;
    }
    *len = b.len;
    *out = buf_steal(&b);
    return ERR_OK;
}

static int load_tokenizer(struct platform_model *m, const char *dir, struct errmsg *err)
{
    char *json = NULL, *cfg = NULL;
    size_t json_len = 0, cfg_len = 0;
    int rc = read_small_file(dir, "tokenizer.json", TOKENIZER_MAX, &json, &json_len);
    if (rc == ERR_NOT_FOUND)
        return errmsg_set(err, ERR_FORMAT,
                          "'%s' has no tokenizer.json (the rknn2 platform needs "
                          "the model's Hugging Face tokenizer)",
                          dir);
    if (rc != ERR_OK)
        return errmsg_set(err, rc, "cannot read %s/tokenizer.json: %s", dir, err_str(rc));
    rc = read_small_file(dir, "tokenizer_config.json", TOKENIZER_MAX, &cfg, &cfg_len);
    if (rc == ERR_NOT_FOUND) rc = ERR_OK;
    if (rc != ERR_OK)
        errmsg_set(err, rc, "cannot read %s/tokenizer_config.json: %s", dir, err_str(rc));
    if (rc == ERR_OK) rc = tok_json_load(json, json_len, cfg, cfg_len, &m->tok, &m->tinfo, err);
    mem_free(json);
    mem_free(cfg);
    return rc;
}

static bool pooling_from_name(const char *name, enum platform_pooling *out)
{
    if (strcmp(name, "cls") == 0)
        *out = PLATFORM_POOLING_CLS;
    else if (strcmp(name, "mean") == 0)
        *out = PLATFORM_POOLING_MEAN;
    else
        return false;
    return true;
}

/* The pooling: the load request's, else model.json's, else config.json's "pooling" or a
 * sentence-transformers 1_Pooling/config.json, else CLS (the BGE family's). */
static int pick_pooling(struct platform_model *m, const struct platform_load_args *a,
                        const struct platform_detection *d, struct errmsg *err)
{
    m->pooling = PLATFORM_POOLING_CLS;
    if (a->pooling == PLATFORM_POOLING_CLS || a->pooling == PLATFORM_POOLING_MEAN) {
        m->pooling = a->pooling;
        return ERR_OK;
    }
    if (a->pooling != PLATFORM_POOLING_DEFAULT)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "the rknn2 platform pools with 'cls' or 'mean' only");
    if (d->manifest.pooling[0]) {
        if (!pooling_from_name(d->manifest.pooling, &m->pooling))
            return errmsg_set(err, ERR_FORMAT, "model.json: pooling '%s' is not 'cls' or 'mean'",
                              d->manifest.pooling);
        return ERR_OK;
    }
    char path[4352];
    json_error_t je;
    snprintf(path, sizeof path, "%s/config.json", d->dir);
    json_t *cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    const char *p = json_string_value(json_object_get(cfg, "pooling"));
    if (p && !pooling_from_name(p, &m->pooling))
        log_warn("rknn2: %s: pooling '%s' is not 'cls' or 'mean'; using cls", path, p);
    json_decref(cfg);
    if (p) return ERR_OK;
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", d->dir);
    cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (json_is_true(json_object_get(cfg, "pooling_mode_mean_tokens")))
        m->pooling = PLATFORM_POOLING_MEAN;
    json_decref(cfg);
    return ERR_OK;
}

static enum input_role role_of(const char *name, int index)
{
    if (strstr(name, "mask")) return ROLE_MASK;
    if (strstr(name, "type")) return ROLE_TYPE_IDS;
    if (strstr(name, "ids")) return ROLE_IDS;
    return (enum input_role)index;
}

static bool is_supported_type(int32_t t)
{
    return t == RKNN2_TENSOR_INT64 || t == RKNN2_TENSOR_INT32 || t == RKNN2_TENSOR_INT16 ||
           t == RKNN2_TENSOR_FLOAT16;
}

/* Reads the shapes from a context: inputs [1, S] of integer or half types, output [1, H] or
 * [1, S, H]. */
static int probe_inputs(struct platform_model *m, rknn2_context ctx, struct errmsg *err)
{
    struct rknn2_io_num io;
    int rc = fns.query(ctx, RKNN2_QUERY_IN_OUT_NUM, &io, sizeof io);
    if (rc != RKNN2_SUCC)
        return errmsg_set(err, ERR_FORMAT, "rknn_query(IN_OUT_NUM) failed (%d)", rc);
    if (io.n_input < 1 || io.n_input > MAX_INPUTS || io.n_output < 1)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "the model has %u inputs and %u outputs; an "
                          "embedding model has 1 to 3 inputs and an output",
                          io.n_input, io.n_output);
    m->n_inputs = (int)io.n_input;
    for (int i = 0; i < m->n_inputs; i++) {
        struct rknn2_tensor_attr at;
        memset(&at, 0, sizeof at);
        at.index = (uint32_t)i;
        rc = fns.query(ctx, RKNN2_QUERY_INPUT_ATTR, &at, sizeof at);
        if (rc != RKNN2_SUCC)
            return errmsg_set(err, ERR_FORMAT, "rknn_query(INPUT_ATTR %d) failed (%d)", i, rc);
        at.name[sizeof at.name - 1] = '\0';
        uint32_t s = at.n_dims >= 1 && at.n_dims <= RKNN2_MAX_DIMS ? at.dims[at.n_dims - 1] : 0;
        if (at.n_dims != 2 || at.dims[0] != 1 || s < 2 || s > SEQ_LEN_MAX)
            return errmsg_set(err, ERR_UNSUPPORTED, "input %d ('%s') is not a [1, S] sequence", i,
                              at.name);
        if (i > 0 && (int)s != m->seq_len)
            return errmsg_set(err, ERR_UNSUPPORTED, "the inputs have different lengths");
        if (!is_supported_type(at.type))
            return errmsg_set(err, ERR_UNSUPPORTED,
                              "input %d ('%s') has type %d; supported: "
                              "int64, int32, int16, float16",
                              i, at.name, (int)at.type);
        m->seq_len = (int)s;
        m->in_type[i] = at.type;
        m->in_role[i] = role_of(at.name, i);
    }
    return ERR_OK;
}

static int probe_output(struct platform_model *m, rknn2_context ctx, struct errmsg *err)
{
    struct rknn2_tensor_attr at;
    memset(&at, 0, sizeof at);
    at.index = 0;
    int rc = fns.query(ctx, RKNN2_QUERY_OUTPUT_ATTR, &at, sizeof at);
    if (rc != RKNN2_SUCC)
        return errmsg_set(err, ERR_FORMAT, "rknn_query(OUTPUT_ATTR) failed (%d)", rc);
    at.name[sizeof at.name - 1] = '\0';
    uint32_t h = at.n_dims >= 1 && at.n_dims <= RKNN2_MAX_DIMS ? at.dims[at.n_dims - 1] : 0;
    if (h < 1 || h > HIDDEN_MAX)
        return errmsg_set(err, ERR_UNSUPPORTED, "output '%s' has no usable width", at.name);
    m->hidden = (int)h;
    if (at.n_elems == h) {
        m->is_out_pooled = true;
    } else if (at.n_elems != (uint32_t)m->seq_len * h) {
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "output '%s' has %u values; expected [1, %u] or "
                          "[1, %d, %u]",
                          at.name, at.n_elems, h, m->seq_len, h);
    }
    return ERR_OK;
}

static int probe(struct platform_model *m, const struct platform_detection *d, struct errmsg *err)
{
    rknn2_context ctx = 0;
    int rc = fns.init(&ctx, m->file, 0, 0, NULL);
    if (rc != RKNN2_SUCC)
        return errmsg_set(err, ERR_FORMAT, "rknn_init('%s') failed (%d)", m->file, rc);
    int prc = probe_inputs(m, ctx, err);
    if (prc == ERR_OK) prc = probe_output(m, ctx, err);
    if (prc == ERR_OK && d->manifest.seq_len > 0 && d->manifest.seq_len != m->seq_len)
        prc = errmsg_set(err, ERR_FORMAT, "model.json says seq_len %d, the model's inputs are %d",
                         d->manifest.seq_len, m->seq_len);
    if (prc != ERR_OK) {
        fns.destroy(ctx);
        return prc;
    }
    m->spare = ctx;
    m->has_spare = true;
    return ERR_OK;
}

static int npu_cores(void)
{
    char soc[32];
    if (!vendor_soc_detect(soc, sizeof soc)) return 1;
    if (strncmp(soc, "RK3588", 6) == 0) return 3;
    if (strcmp(soc, "RK3576") == 0) return 2;
    return 1;
}

static void describe_model(struct platform_model *m)
{
    static const char *const type_names[] = {[RKNN2_TENSOR_FLOAT16] = "float16",
                                             [RKNN2_TENSOR_INT16] = "int16",
                                             [RKNN2_TENSOR_INT32] = "int32",
                                             [RKNN2_TENSOR_INT64] = "int64"};
    snprintf(m->description, sizeof m->description,
             "RKNN %s embedding model: %d inputs of %s[1, %d], %s pooling, width %d",
             m->tinfo.model, m->n_inputs, type_names[m->in_type[0]], m->seq_len,
             m->is_out_pooled                      ? "in-model"
             : m->pooling == PLATFORM_POOLING_MEAN ? "mean"
                                                   : "cls",
             m->hidden);
}

static void free_model(struct platform_model *m)
{
    if (m->has_spare) fns.destroy(m->spare);
    tok_free(m->tok);
    mem_free(m);
}

static int rknn2_load(const struct platform_load_args *a, struct platform_model **out,
                      struct errmsg *err)
{
    if (!lib.is_available)
        return errmsg_set(err, ERR_UNSUPPORTED, "the rknn2 runtime is unavailable: %s", lib.reason);
    struct platform_detection *d = mem_calloc(1, sizeof *d);
    struct platform_model *m = mem_calloc(1, sizeof *m);
    if (!d || !m) {
        mem_free(d);
        mem_free(m);
        return errmsg_set(err, ERR_NOMEM, "out of memory");
    }
    int rc = platform_detect_model(a->path, d, err);
    if (rc == ERR_OK && d->platform != &rknn2_platform)
        rc = errmsg_set(err, ERR_FORMAT, "'%s' is not an rknn2 model", a->path);
    struct stat st;
    if (rc == ERR_OK) {
        snprintf(m->file, sizeof m->file, "%s", d->file);
        if (stat(m->file, &st) != 0) rc = errmsg_set(err, ERR_IO, "cannot open '%s'", m->file);
        m->file_size = rc == ERR_OK ? (uint64_t)st.st_size : 0;
    }
    if (rc == ERR_OK) rc = load_tokenizer(m, d->dir, err);
    if (rc == ERR_OK) rc = pick_pooling(m, a, d, err);
    if (rc == ERR_OK) rc = probe(m, d, err);
    mem_free(d);
    if (rc == ERR_OK) {
        m->pad_id = m->tinfo.pad_id != TOK_ID_NONE ? m->tinfo.pad_id : 0;
        m->n_cores = npu_cores();
        describe_model(m);
        rc = instances_start_workers(&m->set, &worker_ops, m, a->on_done, a->owner);
        if (rc != ERR_OK) rc = errmsg_set(err, rc, "out of memory");
    }
    if (rc != ERR_OK) {
        free_model(m);
        return rc;
    }
    log_info("rknn2: %s: %s", m->file, m->description);
    *out = m;
    return ERR_OK;
}

/* ---- instances ---- */

static size_t type_size(int32_t t)
{
    return t == RKNN2_TENSOR_INT64 ? 8 : t == RKNN2_TENSOR_INT32 ? 4 : 2;
}

/* Instance i's core: one core each in turn where the SoC has several, else the runtime's
 * choice. */
static int32_t core_mask_for(const struct platform_model *m, int i)
{
    return m->n_cores > 1 ? (int32_t)1 << (i % m->n_cores) : RKNN2_NPU_CORE_AUTO;
}

static void handle_free(struct handle *h)
{
    for (int k = 0; k < MAX_INPUTS; k++)
        mem_free(h->buf[k]);
    mem_free(h->pooled);
    mem_free(h);
}

static int worker_init(void *model, int i, void **out, struct errmsg *err)
{
    struct platform_model *m = model;
    struct handle *h = mem_calloc(1, sizeof *h);
    if (!h) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = ERR_OK;
    for (int k = 0; k < m->n_inputs && rc == ERR_OK; k++) {
        h->buf[k] = mem_calloc((size_t)m->seq_len, type_size(m->in_type[k]));
        if (!h->buf[k]) rc = errmsg_set(err, ERR_NOMEM, "out of memory");
    }
    h->pooled = mem_calloc((size_t)m->hidden, sizeof *h->pooled);
    if (!h->pooled && rc == ERR_OK) rc = errmsg_set(err, ERR_NOMEM, "out of memory");
    if (rc != ERR_OK) {
        handle_free(h);
        return rc;
    }
    // The context load probed with serves the first instance created (instances are created
    // by the admin thread only, so no lock is needed around the spare).
    int vrc = RKNN2_SUCC;
    if (m->has_spare) {
        h->ctx = m->spare;
        m->has_spare = false;
    } else {
        vrc = fns.init(&h->ctx, m->file, 0, 0, NULL);
    }
    if (vrc != RKNN2_SUCC) {
        handle_free(h);
        return errmsg_set(err, ERR_NOMEM, "rknn_init failed (%d)", vrc);
    }
    h->core_mask = core_mask_for(m, i);
    vrc =
        h->core_mask != RKNN2_NPU_CORE_AUTO ? fns.set_core_mask(h->ctx, h->core_mask) : RKNN2_SUCC;
    if (vrc != RKNN2_SUCC) {
        fns.destroy(h->ctx);
        handle_free(h);
        return errmsg_set(err, ERR_UNSUPPORTED, "rknn_set_core_mask(%d) failed (%d)",
                          (int)h->core_mask, vrc);
    }
    *out = h;
    return ERR_OK;
}

static void worker_destroy(void *model, void *handle)
{
    (void)model;
    struct handle *h = handle;
    fns.destroy(h->ctx);
    handle_free(h);
}

/* Runs are short and the runtime has no abort: run checks the cancel flag between inputs. */
static void worker_abort(void *model, void *handle)
{
    (void)model;
    (void)handle;
}

/* Writes value v as element s of an input buffer of type t. False when v does not fit. */
static bool put_value(void *buf, int32_t t, int s, int64_t v)
{
    switch (t) {
    case RKNN2_TENSOR_INT64:
        ((int64_t *)buf)[s] = v;
        return true;
    case RKNN2_TENSOR_INT32:
        ((int32_t *)buf)[s] = (int32_t)v;
        return v >= INT32_MIN && v <= INT32_MAX;
    case RKNN2_TENSOR_INT16:
        ((int16_t *)buf)[s] = (int16_t)v;
        return v >= INT16_MIN && v <= INT16_MAX;
    default: // float16: ids above 2048 round, as the model's own conversion would
        ((uint16_t *)buf)[s] = ops_f32_to_f16((float)v);
        return v <= 65504;
    }
}

/* Fills the input buffers for one input of n tokens (n <= S): ids padded with the pad id,
 * mask 1 over the tokens, type ids 0. ERR_LIMIT when an id does not fit the input's type. */
static int fill_inputs(const struct platform_model *m, struct handle *h, const int32_t *ids, int n)
{
    for (int k = 0; k < m->n_inputs; k++) {
        for (int s = 0; s < m->seq_len; s++) {
            int64_t v = 0;
            if (m->in_role[k] == ROLE_IDS)
                v = s < n ? ids[s] : m->pad_id;
            else if (m->in_role[k] == ROLE_MASK)
                v = s < n;
            if (!put_value(h->buf[k], m->in_type[k], s, v)) return ERR_LIMIT;
        }
    }
    return ERR_OK;
}

/* out = the pooled, L2-normalized vector of the run's output (n real tokens). */
static void pool(const struct platform_model *m, const float *o, int n, float *out)
{
    const int H = m->hidden;
    if (m->is_out_pooled || m->pooling == PLATFORM_POOLING_CLS) {
        memcpy(out, o, (size_t)H * sizeof *out);
    } else {
        for (int h = 0; h < H; h++)
            out[h] = 0.0f;
        for (int s = 0; s < n; s++)
            for (int h = 0; h < H; h++)
                out[h] += o[(size_t)s * (size_t)H + (size_t)h];
        for (int h = 0; h < H; h++)
            out[h] /= (float)n;
    }
    double sum = 0.0;
    for (int h = 0; h < H; h++)
        sum += (double)out[h] * out[h];
    const float scale = sum > 0.0 ? (float)(1.0 / sqrt(sum)) : 0.0f;
    for (int h = 0; h < H; h++)
        out[h] *= scale;
}

/* One input through the runtime: set, run, get, pool, release. An error message on failure. */
static bool run_one(const struct platform_model *m, struct handle *h, const int32_t *ids, int n,
                    char *why, size_t why_cap)
{
    if (n > m->seq_len) n = m->seq_len; // the API layer keeps inputs within S; defensive
    if (fill_inputs(m, h, ids, n) != ERR_OK) {
        snprintf(why, why_cap, "a token id does not fit the model's input type");
        return false;
    }
    struct rknn2_input in[MAX_INPUTS];
    memset(in, 0, sizeof in);
    for (int k = 0; k < m->n_inputs; k++) {
        in[k].index = (uint32_t)k;
        in[k].buf = h->buf[k];
        in[k].size = (uint32_t)((size_t)m->seq_len * type_size(m->in_type[k]));
        in[k].type = m->in_type[k];
        in[k].fmt = RKNN2_TENSOR_UNDEFINED;
    }
    int rc = fns.inputs_set(h->ctx, (uint32_t)m->n_inputs, in);
    if (rc == RKNN2_SUCC) rc = fns.run(h->ctx, NULL);
    if (rc != RKNN2_SUCC) {
        snprintf(why, why_cap, "the NPU runtime failed to run the model (%d)", rc);
        return false;
    }
    struct rknn2_output o;
    memset(&o, 0, sizeof o);
    o.want_float = 1;
    rc = fns.outputs_get(h->ctx, 1, &o, NULL);
    if (rc != RKNN2_SUCC) {
        snprintf(why, why_cap, "the NPU runtime returned no output (%d)", rc);
        return false;
    }
    size_t want = (size_t)(m->is_out_pooled ? 1 : m->seq_len) * (size_t)m->hidden * sizeof(float);
    bool ok = o.buf && o.size >= want;
    if (ok)
        pool(m, o.buf, n, h->pooled);
    else
        snprintf(why, why_cap, "the NPU runtime returned %u bytes, expected %zu", o.size, want);
    fns.outputs_release(h->ctx, 1, &o);
    return ok;
}

static void worker_run(void *model, int i, void *handle, struct inst_slot *slot)
{
    (void)i;
    struct platform_model *m = model;
    struct handle *h = handle;
    struct request *r = slot->req;
    const int n_in = r->n_inputs > 0 ? r->n_inputs : 1;
    float *all = mem_calloc((size_t)n_in * (size_t)m->hidden, sizeof *all);
    if (!all) {
        inst_slot_fail(slot, 500, "out of memory");
        return;
    }
    const double t0 = clock_now_ms();
    char why[160];
    int at = 0;
    bool ok = true;
    for (int k = 0; k < n_in && ok && !atomic_load(&r->is_cancelled); k++) {
        int n = r->n_inputs > 0 ? r->input_lens[k] : r->n_prompt;
        ok = run_one(m, h, r->prompt + at, n, why, sizeof why);
        if (ok)
            memcpy(all + (size_t)k * (size_t)m->hidden, h->pooled, (size_t)m->hidden * sizeof *all);
        else
            inst_slot_fail(slot, 500, why);
        at += n;
    }
    if (ok && !atomic_load(&r->is_cancelled)) {
        if (request_set_embedding(r, all, n_in * m->hidden) != ERR_OK)
            inst_slot_fail(slot, 500, "out of memory");
        struct request_timings t = {.n_prompt = r->n_prompt, .prompt_ms = clock_now_ms() - t0};
        request_set_timings(r, &t);
    }
    mem_free(all);
}

static const struct inst_worker_ops worker_ops = {
    .init = worker_init,
    .run = worker_run,
    .abort = worker_abort,
    .destroy = worker_destroy,
};

/* ---- the platform table ---- */

static void rknn2_describe(const struct platform_model *m, struct platform_model_desc *out)
{
    memset(out, 0, sizeof *out);
    out->tokenizer = m->tok;
    out->bos_text = "";
    out->eos_text = "";
    out->kind = MODEL_KIND_EMBEDDING;
    out->n_ctx = m->seq_len;
    out->n_ctx_train = m->tinfo.model_max_length > 0 && m->tinfo.model_max_length < INT32_MAX
                           ? (int)m->tinfo.model_max_length
                           : m->seq_len;
    out->n_vocab = tok_n_tokens(m->tok);
    out->n_embd = m->hidden;
    out->rerank_bos = out->rerank_eos = out->rerank_sep = TOK_ID_NONE;
    out->file_size = m->file_size;
    out->instance_bytes = m->file_size + RKNN2_INST_BYTES;
    snprintf(out->arch, sizeof out->arch, "rknn2");
    snprintf(out->description, sizeof out->description, "%s", m->description);
}

static int rknn2_add_instance(struct platform_model *m, int instance, struct errmsg *err)
{
    return instances_add(&m->set, instance, err);
}

static void rknn2_remove_instance(struct platform_model *m, int instance)
{
    instances_remove(&m->set, instance);
}

static void rknn2_submit(struct platform_model *m, int instance, struct request *r)
{
    instances_submit(&m->set, instance, r);
}

static void rknn2_unload(struct platform_model *m)
{
    if (!m) return;
    instances_stop(&m->set);
    instances_deinit(&m->set);
    free_model(m);
}

const struct platform rknn2_platform = {
    .id = "rknn2",
    .display_name = "RKNN2",
    .start = rknn2_start,
    .stop = rknn2_stop,
    .is_available = rknn2_is_available,
    .status = rknn2_status,
    .detect_chips = rknn2_detect_chips,
    .claims = rknn2_claims,
    .load = rknn2_load,
    .describe = rknn2_describe,
    .add_instance = rknn2_add_instance,
    .remove_instance = rknn2_remove_instance,
    .submit = rknn2_submit,
    .unload = rknn2_unload,
};
