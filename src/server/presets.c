/* Model presets (see presets.h): the INI file's sections → load arguments, and the difference
 * between two lists → unloads and loads. Keys follow llama-server's flag names. */
#include "server/presets.h"

#include "server/config_file.h"
#include "util/log.h"
#include "util/mem.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct read_state {
    struct preset_list *list;
    struct preset global; // the [*] section
    struct preset *cur;   // the section being read (&global for [*]; NULL before any)
    char cur_name[MODEL_ID_CAP];
};

static void preset_unset(struct preset *p)
{
    memset(p, 0, sizeof *p);
    p->n_parallel = p->n_ctx = p->queue_size = p->is_embedding = p->is_reranking = -1;
    p->load_on_startup = true;
}

static int parse_bool(const char *key, const char *v, int *out, struct errmsg *err)
{
    if (strcmp(v, "true") == 0)
        *out = 1;
    else if (strcmp(v, "false") == 0)
        *out = 0;
    else
        return errmsg_set(err, ERR_INVALID, "%s: expected true or false, got '%s'", key, v);
    return ERR_OK;
}

static int parse_int(const char *key, const char *v, long min, long max, int *out,
                     struct errmsg *err)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0')
        return errmsg_set(err, ERR_INVALID, "%s: '%s' is not an integer", key, v);
    if (n < min || n > max)
        return errmsg_set(err, ERR_INVALID, "%s: %ld is out of range [%ld, %ld]", key, n, min, max);
    *out = (int)n;
    return ERR_OK;
}

/* Starts a section: [*] or a new model id. */
static int begin_section(struct read_state *s, const char *name, struct errmsg *err)
{
    snprintf(s->cur_name, sizeof s->cur_name, "%s", name);
    if (strcmp(name, "*") == 0) {
        s->cur = &s->global;
        return ERR_OK;
    }
    if (strlen(name) >= MODEL_ID_CAP) return errmsg_set(err, ERR_INVALID, "model id too long");
    for (int i = 0; i < s->list->n; i++)
        if (strcmp(s->list->items[i].id, name) == 0)
            return errmsg_set(err, ERR_INVALID, "section [%s] appears twice", name);
    if (s->list->n >= PRESETS_MAX)
        return errmsg_set(err, ERR_LIMIT, "more than %d models", PRESETS_MAX);
    s->cur = &s->list->items[s->list->n++];
    preset_unset(s->cur);
    snprintf(s->cur->id, sizeof s->cur->id, "%s", name);
    return ERR_OK;
}

/* One key of a section (a flat dispatch over the key names). */
static int set_key(struct preset *p, const char *key, const char *v, struct errmsg *err)
{
    int b = 0, rc = ERR_OK;
    if (strcmp(key, "model") == 0 || strcmp(key, "m") == 0) {
        if (!*v || strlen(v) >= sizeof p->model)
            return errmsg_set(err, ERR_INVALID, "model: empty or too long");
        snprintf(p->model, sizeof p->model, "%s", v);
    } else if (strcmp(key, "parallel") == 0 || strcmp(key, "np") == 0) {
        rc = parse_int(key, v, 1, 64, &p->n_parallel, err);
    } else if (strcmp(key, "ctx-size") == 0 || strcmp(key, "c") == 0) {
        rc = parse_int(key, v, 0, 1 << 20, &p->n_ctx, err);
    } else if (strcmp(key, "request-queue-size") == 0) {
        rc = parse_int(key, v, 0, 1000000, &p->queue_size, err);
    } else if (strcmp(key, "embedding") == 0 || strcmp(key, "embeddings") == 0) {
        rc = parse_bool(key, v, &p->is_embedding, err);
    } else if (strcmp(key, "reranking") == 0 || strcmp(key, "rerank") == 0) {
        rc = parse_bool(key, v, &p->is_reranking, err);
    } else if (strcmp(key, "pooling") == 0) {
        enum platform_pooling pool;
        if (platform_pooling_parse(v, &pool) != ERR_OK)
            return errmsg_set(err, ERR_INVALID,
                              "pooling: '%s' is not one of "
                              "none|mean|cls|last|rank",
                              v);
        snprintf(p->pooling, sizeof p->pooling, "%s", v);
    } else if (strcmp(key, "load-on-startup") == 0) {
        rc = parse_bool(key, v, &b, err);
        p->load_on_startup = b;
    } else {
        return errmsg_set(err, ERR_INVALID,
                          "unknown key '%s' (a preset sets model, parallel, ctx-size, "
                          "request-queue-size, embedding, reranking, pooling, load-on-startup)",
                          key);
    }
    return rc;
}

static int on_pair(void *ctx, const char *section, const char *key, const char *value,
                   struct errmsg *err)
{
    struct read_state *s = ctx;
    if (!*section) {
        if (strcmp(key, "version") == 0) return ERR_OK; // llama-server's format version line
        return errmsg_set(err, ERR_INVALID, "'%s' outside a section ([id] or [*])", key);
    }
    if (strcmp(section, s->cur_name) != 0) {
        int rc = begin_section(s, section, err);
        if (rc != ERR_OK) return rc;
    }
    return set_key(s->cur, key, value, err);
}

/* An entry's unset fields from [*]. */
static void merge_global(struct preset *p, const struct preset *g)
{
    if (!p->model[0]) snprintf(p->model, sizeof p->model, "%s", g->model);
    if (p->n_parallel < 0) p->n_parallel = g->n_parallel;
    if (p->n_ctx < 0) p->n_ctx = g->n_ctx;
    if (p->queue_size < 0) p->queue_size = g->queue_size;
    if (p->is_embedding < 0) p->is_embedding = g->is_embedding;
    if (p->is_reranking < 0) p->is_reranking = g->is_reranking;
    if (!p->pooling[0]) snprintf(p->pooling, sizeof p->pooling, "%s", g->pooling);
}

int presets_read(const char *path, struct preset_list *out, struct errmsg *err)
{
    struct read_state *s = mem_alloc(sizeof *s);
    struct preset_list *list = mem_alloc(sizeof *list);
    int rc = s && list ? ERR_OK : ERR_NOMEM;
    if (rc == ERR_OK) {
        memset(s, 0, sizeof *s);
        list->n = 0;
        s->list = list;
        preset_unset(&s->global);
        rc = config_file_read(path, true, on_pair, s, err);
    }
    // A section is known only by its keys, so an empty section is not listed (as in INI).
    for (int i = 0; rc == ERR_OK && i < list->n; i++) {
        struct preset *p = &list->items[i];
        merge_global(p, &s->global);
        if (!p->model[0])
            rc = errmsg_set(err, ERR_INVALID, "%s: [%s] has no 'model' (the GGUF file to load)",
                            path, p->id);
    }
    if (rc == ERR_OK) memcpy(out, list, sizeof *list);
    mem_free(list);
    mem_free(s);
    return rc;
}

static const struct preset *find(const struct preset_list *l, const char *id)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i].id, id) == 0) return &l->items[i];
    return NULL;
}

static bool same(const struct preset *a, const struct preset *b)
{
    return strcmp(a->model, b->model) == 0 && a->n_parallel == b->n_parallel &&
           a->n_ctx == b->n_ctx && a->queue_size == b->queue_size &&
           a->is_embedding == b->is_embedding && a->is_reranking == b->is_reranking &&
           strcmp(a->pooling, b->pooling) == 0;
}

static int load_one(struct manager *m, const struct preset *p, const struct preset_defaults *d)
{
    int np = p->n_parallel > 0 ? p->n_parallel : (d->n_parallel > 0 ? d->n_parallel : 1);
    int ctx = p->n_ctx >= 0 ? p->n_ctx : d->n_ctx;
    // -c is what the -np instances share, as for the -m models (llama-server's rule).
    int per = ctx <= 0 ? 0 : d->is_kv_unified ? ctx : (ctx / np > 0 ? ctx / np : 1);
    bool is_rerank = p->is_reranking >= 0 ? p->is_reranking : d->is_reranking;
    const char *pool_name = is_rerank ? "rank" : p->pooling[0] ? p->pooling : d->pooling;
    enum platform_pooling pooling = PLATFORM_POOLING_DEFAULT;
    if (pool_name && *pool_name) platform_pooling_parse(pool_name, &pooling);
    struct manager_load args = {
        .id = p->id,
        .path = p->model,
        .n_instances = np,
        .queue_size = p->queue_size,
        .n_ctx = per,
        .force_embedding = is_rerank || (p->is_embedding >= 0 ? p->is_embedding : d->is_embedding),
        .pooling = pooling,
    };
    int actual = 0;
    enum load_failure why;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = manager_load(m, &args, &actual, &why, &err);
    if (rc != ERR_OK)
        log_error("preset [%s] (%s): %s", p->id, p->model, err.msg[0] ? err.msg : err_str(rc));
    else
        log_info("preset [%s] loaded from %s (%d of %d instances)", p->id, p->model, actual, np);
    return rc;
}

int presets_sync(struct manager *m, const struct preset_list *want, struct preset_list *loaded,
                 const struct preset_defaults *d)
{
    // Unloads first, so a changed entry's id is free and its memory is back in the budget.
    int kept = 0;
    for (int i = 0; i < loaded->n; i++) {
        const struct preset *p = &loaded->items[i];
        const struct preset *w = find(want, p->id);
        struct model_info info;
        // Gone meanwhile (unloaded through the API, evicted by --models-max): loaded again.
        if (registry_get(manager_registry(m), p->id, &info) != ERR_OK) continue;
        if (w && w->load_on_startup && same(w, p)) {
            if (kept != i) loaded->items[kept] = *p;
            kept++;
            continue;
        }
        log_info("preset [%s] %s: unloading", p->id, w ? "changed" : "removed");
        manager_unload(m, p->id);
    }
    loaded->n = kept;
    int n_failed = 0;
    for (int i = 0; i < want->n; i++) {
        const struct preset *w = &want->items[i];
        if (!w->load_on_startup || find(loaded, w->id)) continue;
        if (load_one(m, w, d) != ERR_OK) {
            n_failed++;
            continue;
        }
        loaded->items[loaded->n++] = *w; // want->n <= PRESETS_MAX bounds it
    }
    return n_failed;
}
