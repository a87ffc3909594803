/* The models folder as a cache of hub repositories (see hub.h). */
#include "hub/hub.h"

#include "util/buf.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCAL_DEPTH_MAX 8

/* One download at a time per process: two loads of one model must not write one .part. */
static struct mutex download_mu = {PTHREAD_MUTEX_INITIALIZER};

void hub_default_models_dir(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (geteuid() == 0)
        snprintf(out, cap, "/var/lib/llamapi/models");
    else if (xdg && xdg[0] == '/')
        snprintf(out, cap, "%s/llamapi/models", xdg);
    else if (home && *home)
        snprintf(out, cap, "%s/.cache/llamapi/models", home);
    else
        snprintf(out, cap, "/var/lib/llamapi/models");
}

void hub_default_url(char *out, size_t cap)
{
    static const char *const vars[] = {"LLAMAPI_HUB_URL", "MODEL_ENDPOINT", "HF_ENDPOINT"};
    const char *url = HUB_DEFAULT_URL;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            url = v;
            break;
        }
    }
    snprintf(out, cap, "%s", url);
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '/')
        out[--n] = '\0';
}

void hub_log_progress(void *user, const struct hub_progress *p)
{
    struct hub_log_progress *s = user;
    if (s->file != p->file) {
        s->file = p->file;
        s->last_s = -1;
    }
    if (!p->is_done && p->elapsed_s - s->last_s < 1.0) return;
    s->last_s = p->elapsed_s;
    double mb = 1e6, fresh = (double)(p->done - (p->resumed <= p->done ? p->resumed : p->done));
    log_info("hub: %s %.1f of %.1f MB (%.0f%%), %.1f MB/s%s", p->file, (double)p->done / mb,
             (double)p->total / mb, p->total ? 100.0 * (double)p->done / (double)p->total : 100.0,
             p->elapsed_s > 0 ? fresh / mb / p->elapsed_s : 0.0, p->is_done ? ", verified" : "");
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

struct walk {
    struct hub_listing *l;
    int cap;
    bool is_with_parts;
};

static int walk_add(struct walk *w, const char *rel, uint64_t size)
{
    if (w->l->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 16;
        struct hub_entry *e = mem_realloc(w->l->entries, (size_t)cap * sizeof *e);
        if (!e) return ERR_NOMEM;
        w->l->entries = e;
        w->cap = cap;
    }
    struct hub_entry *e = &w->l->entries[w->l->n];
    e->path = mem_strdup(rel);
    if (!e->path) return ERR_NOMEM;
    e->size = size;
    e->sha256[0] = '\0';
    w->l->n++;
    return ERR_OK;
}

static int walk_dir(struct walk *w, const char *root, const char *rel, int depth)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT || errno == ENOTDIR ? ERR_OK : ERR_IO;
    int rc = ERR_OK;
    struct dirent *de;
    while (rc == ERR_OK && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char sub[HUB_FILE_CAP + HUB_REPO_CAP], path[4096 + 512];
        int n = snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        if (n < 0 || (size_t)n >= sizeof sub) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode) && depth < LOCAL_DEPTH_MAX)
            rc = walk_dir(w, root, sub, depth + 1);
        else if (S_ISREG(st.st_mode) &&
                 (ends_with(sub, ".gguf") || (w->is_with_parts && ends_with(sub, ".gguf.part"))))
            rc = walk_add(w, sub, (uint64_t)st.st_size);
    }
    closedir(d);
    return rc;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct hub_entry *)a)->path, ((const struct hub_entry *)b)->path);
}

int hub_local_list(const char *dir, bool is_with_parts, struct hub_listing *out)
{
    struct hub_listing l = {0};
    struct walk w = {.l = &l, .is_with_parts = is_with_parts};
    int rc = walk_dir(&w, dir, "", 0);
    if (rc != ERR_OK) {
        hub_listing_free(&l);
        return rc;
    }
    if (l.n > 1) qsort(l.entries, (size_t)l.n, sizeof *l.entries, entry_cmp);
    *out = l;
    return ERR_OK;
}

/* The listing's paths as an array for hub_plan_select; caller frees with mem_free(). */
static const char **listing_paths(const struct hub_listing *l)
{
    const char **paths = mem_calloc(l->n ? (size_t)l->n : 1, sizeof *paths);
    if (!paths) return NULL;
    for (int i = 0; i < l->n; i++)
        paths[i] = l->entries[i].path;
    return paths;
}

static int plan_for(const struct hub_listing *l, const struct hub_ref *ref, struct hub_plan *plan,
                    struct errmsg *err)
{
    const char **paths = listing_paths(l);
    if (!paths) return ERR_NOMEM;
    int rc = hub_plan_select(paths, l->n, ref, plan, err);
    mem_free((void *)paths);
    return rc;
}

static int repo_dir(const char *models_dir, const char *repo, struct buf *out)
{
    return buf_printf(out, "%s/%s", models_dir, repo);
}

/* The listing to choose from: the hub's, or (offline, or the hub unreachable) the local one;
 * *is_local says which. */
static int choose_listing(const struct hub_opts *o, const struct hub_ref *ref, const char *dir,
                          struct hub_listing *l, bool *is_local, enum hub_failure *why,
                          struct errmsg *err)
{
    *is_local = true;
    if (!o->is_offline) {
        int rc = hub_fetch_list(o, ref->repo, l, why, err);
        if (rc == ERR_OK) {
            *is_local = false;
            return ERR_OK;
        }
        if (*why != HUB_FAIL_NETWORK) return rc;
        log_warn("hub: %s; looking for %s in %s", err->msg, ref->repo, dir);
    }
    int rc = hub_local_list(dir, false, l);
    if (rc != ERR_OK) {
        *why = HUB_FAIL_IO;
        return errmsg_set(err, rc, "cannot read %s", dir);
    }
    return ERR_OK;
}

/* Downloads the listed file e unless dir/e->path is there with e's size. */
static int ensure_file(const struct hub_opts *o, const char *repo, const char *dir,
                       const struct hub_entry *e, enum hub_failure *why, struct errmsg *err)
{
    struct buf dest;
    buf_init(&dest);
    int rc = buf_printf(&dest, "%s/%s", dir, e->path);
    struct stat st;
    if (rc == ERR_OK) {
        mutex_lock(&download_mu); // checked under the lock: a load racing ours may just have it
        if (!(stat(dest.data, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == e->size))
            rc = hub_fetch_file(o, repo, e, dest.data, why, err);
        mutex_unlock(&download_mu);
    }
    buf_deinit(&dest);
    return rc;
}

static int fetch_plan(const struct hub_opts *o, const struct hub_ref *ref, const char *dir,
                      const struct hub_listing *l, const struct hub_plan *plan,
                      enum hub_failure *why, struct errmsg *err)
{
    int rc = ERR_OK;
    for (int k = 0; rc == ERR_OK && k < plan->n_parts; k++)
        rc = ensure_file(o, ref->repo, dir, &l->entries[plan->parts[k]], why, err);
    if (rc == ERR_OK && plan->mmproj >= 0)
        rc = ensure_file(o, ref->repo, dir, &l->entries[plan->mmproj], why, err);
    return rc;
}

static int resolve_parsed(const struct hub_opts *o, const struct hub_ref *ref, const char *dir,
                          struct buf *path, enum hub_failure *why, struct errmsg *err)
{
    struct hub_listing l = {0};
    bool is_local;
    int rc = choose_listing(o, ref, dir, &l, &is_local, why, err);
    if (rc != ERR_OK) return rc;
    struct hub_plan plan;
    rc = plan_for(&l, ref, &plan, err);
    if (rc != ERR_OK && is_local) {
        char what[ERRMSG_CAP];
        snprintf(what, sizeof what, "%s", err->msg);
        *why = o->is_offline ? HUB_FAIL_OFFLINE : HUB_FAIL_NO_MATCH;
        rc = errmsg_set(err, ERR_NOT_FOUND, "%s%s", o->is_offline ? "offline: " : "", what);
    } else if (rc != ERR_OK) {
        *why = rc == ERR_NOT_FOUND ? HUB_FAIL_NO_MATCH : HUB_FAIL_REF;
    }
    if (rc == ERR_OK && !is_local) rc = fetch_plan(o, ref, dir, &l, &plan, why, err);
    if (rc == ERR_OK) rc = buf_printf(path, "%s/%s", dir, l.entries[plan.primary].path);
    hub_listing_free(&l);
    return rc;
}

int hub_resolve(const struct hub_opts *o, const char *ref_text, char *out, size_t out_cap,
                enum hub_failure *why, struct errmsg *err)
{
    *why = HUB_FAIL_NONE;
    struct hub_ref ref;
    int rc = hub_ref_parse(ref_text, &ref, err);
    if (rc != ERR_OK) {
        *why = HUB_FAIL_REF;
        return rc;
    }
    struct buf dir, path;
    buf_init(&dir);
    buf_init(&path);
    rc = repo_dir(o->models_dir, ref.repo, &dir);
    if (rc == ERR_OK) rc = resolve_parsed(o, &ref, dir.data, &path, why, err);
    if (rc == ERR_OK && path.len >= out_cap) {
        *why = HUB_FAIL_IO;
        rc = errmsg_set(err, ERR_LIMIT, "the path of %s is too long", ref_text);
    }
    if (rc == ERR_OK) memcpy(out, path.data, path.len + 1);
    buf_deinit(&path);
    buf_deinit(&dir);
    return rc;
}

/* Deletes dir/rel and its .part; counts what was there. */
static int remove_file(const char *dir, const char *rel, int *n_removed)
{
    char path[4096 + HUB_FILE_CAP];
    int rc = ERR_OK;
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s%s", dir, rel, k ? ".part" : "");
        if (unlink(path) == 0)
            (*n_removed)++;
        else if (errno != ENOENT)
            rc = ERR_IO;
    }
    return rc;
}

/* Removes the empty folders under path, and path when it ends up empty. */
static void prune_empty(const char *path, int depth)
{
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || depth >= LOCAL_DEPTH_MAX) continue;
        char sub[4096 + 256];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        struct stat st;
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) prune_empty(sub, depth + 1);
    }
    closedir(d);
    rmdir(path); // fails, as it should, when something is left
}

static int remove_listed(const char *dir, const struct hub_listing *l, const struct hub_ref *ref,
                         int *n_removed, struct errmsg *err)
{
    if (!ref->quant[0] && !ref->file[0]) {
        int rc = ERR_OK;
        for (int i = 0; i < l->n && rc == ERR_OK; i++)
            rc = remove_file(dir, l->entries[i].path, n_removed);
        return rc;
    }
    struct hub_plan plan;
    int rc = plan_for(l, ref, &plan, err);
    for (int k = 0; rc == ERR_OK && k < plan.n_parts; k++)
        rc = remove_file(dir, l->entries[plan.parts[k]].path, n_removed);
    return rc;
}

/* When no model file is left in dir, deletes its projectors (unfinished downloads stay). */
static int remove_orphans(const char *dir, int *n_removed)
{
    struct hub_listing l = {0};
    int rc = hub_local_list(dir, false, &l);
    bool has_model = false;
    for (int i = 0; rc == ERR_OK && i < l.n; i++)
        has_model |=
            strstr(l.entries[i].path, "mmproj") == NULL && ends_with(l.entries[i].path, ".gguf");
    for (int i = 0; rc == ERR_OK && !has_model && i < l.n; i++)
        rc = remove_file(dir, l.entries[i].path, n_removed);
    hub_listing_free(&l);
    return rc;
}

int hub_remove(const char *models_dir, const char *ref_text, int *n_removed, struct errmsg *err)
{
    struct hub_ref ref;
    int rc = hub_ref_parse(ref_text, &ref, err);
    if (rc != ERR_OK) return rc;
    *n_removed = 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", models_dir, ref.repo);
    struct hub_listing l = {0};
    rc = hub_local_list(dir, !ref.quant[0] && !ref.file[0], &l);
    if (rc == ERR_OK) rc = remove_listed(dir, &l, &ref, n_removed, err);
    hub_listing_free(&l);
    if (rc == ERR_OK && !ref.file[0]) rc = remove_orphans(dir, n_removed);
    if (rc == ERR_IO) return errmsg_set(err, ERR_IO, "cannot delete files under %s", dir);
    if (rc != ERR_OK) return rc;
    if (*n_removed == 0)
        return errmsg_set(err, ERR_NOT_FOUND, "nothing of %s under %s", ref_text, models_dir);
    prune_empty(dir, 0);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        rmdir(dir); // the organisation's folder, when this was its last repository
    }
    return ERR_OK;
}
