/* Load / resize / unload orchestration over the registry and the platforms. */
#include "core/manager.h"

#include "platform/detect.h"
#include "platform/vendor.h"

#include "util/file.h"
#include "util/log.h"
#include "util/mem.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct manager {
    struct manager_config config; // immutable
    struct registry *registry;
    struct budget budget;
    struct mutex room_mu; // makes "evict if full, then register" one step for concurrent loads
};

int manager_new(const struct manager_config *c, struct manager **out)
{
    struct manager *m = mem_calloc(1, sizeof *m);
    if (!m) return ERR_NOMEM;
    m->config = *c;
    if (registry_new(&m->registry) != ERR_OK) {
        mem_free(m);
        return ERR_NOMEM;
    }
    if (mutex_init(&m->room_mu) != ERR_OK) {
        registry_free(m->registry);
        mem_free(m);
        return ERR_NOMEM;
    }
    budget_init(&m->budget, c->memory_limit);
    *out = m;
    return ERR_OK;
}

void manager_unload_all(struct manager *m)
{
    struct model_info infos[REGISTRY_CAP];
    int n = registry_list(m->registry, infos, REGISTRY_CAP);
    for (int i = 0; i < n && i < REGISTRY_CAP; i++)
        manager_unload(m, infos[i].id);
}

void manager_free(struct manager *m)
{
    if (!m) return;
    manager_unload_all(m);
    registry_free(m->registry);
    mutex_deinit(&m->room_mu);
    mem_free(m);
}

struct registry *manager_registry(struct manager *m)
{
    return m->registry;
}

static bool has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2) {
        bool starts = s == p || s[-1] == '/';
        bool ends = s[2] == '\0' || s[2] == '/';
        if (starts && ends) return true;
    }
    return false;
}

int manager_resolve_path(const struct manager *m, const char *given, char *out, size_t cap,
                         struct errmsg *err)
{
    if (!given[0]) return errmsg_set(err, ERR_INVALID, "model_path is empty");
    if (has_dotdot(given))
        return errmsg_set(err, ERR_INVALID, "model_path must not contain '..' components");
    int n = given[0] == '/' ? snprintf(out, cap, "%s", given)
                            : snprintf(out, cap, "%s/%s", m->config.models_dir, given);
    if (n < 0 || (size_t)n >= cap) return errmsg_set(err, ERR_INVALID, "model_path is too long");
    struct stat st;
    if (stat(out, &st) != 0)
        return errmsg_set(err, ERR_NOT_FOUND, "model_path '%s' does not exist%s", out,
                          given[0] == '/' ? "" : " (bare names resolve under --models-dir)");
    // Opening a FIFO blocks until a writer comes, forever for a load; a device is no model.
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return errmsg_set(err, ERR_INVALID, "'%s' is %s, not a model file or directory", out,
                          file_kind_name(st.st_mode));
    if (access(out, R_OK) != 0)
        return errmsg_set(err, ERR_INVALID, "model_path '%s' is not readable: %s", out,
                          strerror(errno));
    return ERR_OK;
}

/* A model directory's entries are opened by whichever platform claims it (the model, a
 * projector beside it, a manifest): one that is a FIFO, socket or device is refused here, by
 * name, rather than blocking or misleading the load. Subdirectories and hidden names are
 * never opened and are left alone. */
static int check_dir_entries(const char *dir, struct errmsg *err)
{
    DIR *d = opendir(dir);
    if (!d) return ERR_OK; // not a directory (a file), or unreadable: the platform says
    int rc = ERR_OK;
    struct dirent *e;
    while (rc == ERR_OK && (e = readdir(d)) != NULL) {
        char path[MODEL_PATH_CAP + 256];
        struct stat st;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) continue;
        rc = errmsg_set(err, ERR_INVALID, "'%s' in the model directory is %s, not a regular file",
                        e->d_name, file_kind_name(st.st_mode));
    }
    closedir(d);
    return rc;
}

static int fail(enum load_failure *why, enum load_failure w, int rc)
{
    *why = w;
    return rc;
}

/* The least recently used model that is ready (or failed) and has nothing running or queued,
 * or -1. */
static int pick_idle_lru(const struct model_info *infos, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        const struct model_info *e = &infos[i];
        bool is_settled = e->status == MODEL_STATUS_READY || e->status == MODEL_STATUS_FAILED;
        if (!is_settled || e->busy_count > 0 || e->queue_depth > 0) continue;
        if (best < 0 || e->last_used_ns < infos[best].last_used_ns) best = i;
    }
    return best;
}

/* With models_max set, unloads least recently used idle models until a new one fits. Caller
 * holds room_mu. ERR_OK or ERR_LIMIT (every loaded model is busy). */
static int make_room(struct manager *m, struct errmsg *err)
{
    if (m->config.models_max <= 0) return ERR_OK;
    struct model_info *infos = mem_calloc(REGISTRY_CAP, sizeof *infos); // 300 KiB: not on a stack
    if (!infos) return errmsg_set(err, ERR_NOMEM, "out of memory");
    int rc = ERR_OK;
    for (;;) {
        int n = registry_list(m->registry, infos, REGISTRY_CAP);
        if (n > REGISTRY_CAP) n = REGISTRY_CAP;
        if (n < m->config.models_max) break;
        int victim = pick_idle_lru(infos, n);
        if (victim < 0) {
            rc = errmsg_set(err, ERR_LIMIT,
                            "%d models are loaded (--models-max) and none is idle to unload", n);
            break;
        }
        log_info("unloading '%s', the least recently used idle model (--models-max %d)",
                 infos[victim].id, m->config.models_max);
        manager_unload(m, infos[victim].id); // ERR_NOT_FOUND: someone else did; look again
    }
    mem_free(infos);
    return rc;
}

/* Whether the model's chip (lower case, "" when unknown) is among the chips the platform
 * detects here; true when either is unknown. Fills host with the first detected chip. */
static bool chip_fits(const struct platform *p, const char *chip, char *host, size_t cap)
{
    struct platform_chip chips[8];
    int n = chip[0] ? p->detect_chips(chips, 8) : 0;
    if (n > 0) snprintf(host, cap, "%s", chips[0].chip_type);
    for (int i = 0; i < n; i++)
        if (vendor_chip_matches(chip, chips[i].chip_type)) return true;
    return n == 0;
}

/* Picks the platform of the model at path: detection (platform_detection_failed), then
 * whether this host runs it (unsupported_platform, naming the runtime library or the chips). */
static int detect_platform(const char *path, const struct platform **out, enum load_failure *why,
                           struct errmsg *err)
{
    struct platform_detection *d = mem_alloc(sizeof *d);
    if (!d) return fail(why, LOAD_FAIL_ENGINE, errmsg_set(err, ERR_NOMEM, "out of memory"));
    struct errmsg derr;
    errmsg_clear(&derr);
    int rc = platform_detect_model(path, d, &derr);
    if (rc != ERR_OK) {
        rc = fail(why, LOAD_FAIL_NO_PLATFORM,
                  errmsg_set(err, ERR_UNSUPPORTED, "cannot tell which platform runs this model: %s",
                             derr.msg));
        goto out;
    }
    const struct platform *p = d->platform;
    if (!p->is_available()) {
        struct platform_status st;
        memset(&st, 0, sizeof st);
        if (p->status) p->status(&st);
        rc = fail(why, LOAD_FAIL_UNAVAILABLE,
                  errmsg_set(err, ERR_UNSUPPORTED,
                             "'%s' is a %s model, and this host cannot run %s%s%s", path, p->id,
                             p->display_name, st.reason[0] ? ": " : "", st.reason));
        goto out;
    }
    char host[PLATFORM_CHIP_NAME_CAP] = "";
    if (!chip_fits(p, d->chip, host, sizeof host)) {
        rc = fail(why, LOAD_FAIL_UNAVAILABLE,
                  errmsg_set(err, ERR_UNSUPPORTED,
                             "'%s' was built for %s, and this host's %s chip is %s", path, d->chip,
                             p->id, host));
        goto out;
    }
    *out = p;
out:
    mem_free(d);
    return rc;
}

int manager_load(struct manager *m, const struct manager_load *a, int *n_actual,
                 enum load_failure *why, struct errmsg *err)
{
    *why = LOAD_FAIL_NONE;
    char path[MODEL_PATH_CAP];
    int rc = manager_resolve_path(m, a->path, path, sizeof path, err);
    if (rc == ERR_OK) rc = check_dir_entries(path, err);
    if (rc != ERR_OK) return fail(why, LOAD_FAIL_PATH, rc);
    char mmproj[MODEL_PATH_CAP] = "";
    if (a->mmproj_path) {
        rc = manager_resolve_path(m, a->mmproj_path, mmproj, sizeof mmproj, err);
        struct stat st;
        if (rc == ERR_OK && stat(mmproj, &st) == 0 && !S_ISREG(st.st_mode))
            rc = errmsg_set(err, ERR_INVALID, "mmproj_path '%s' is %s, not a projector file",
                            mmproj, file_kind_name(st.st_mode));
        if (rc != ERR_OK) return fail(why, LOAD_FAIL_MMPROJ_PATH, rc);
    }
    const struct platform *p = NULL;
    rc = detect_platform(path, &p, why, err);
    if (rc != ERR_OK) return rc;
    int n_ctx = a->n_ctx;
    if (m->config.n_ctx_max > 0 && n_ctx > m->config.n_ctx_max) n_ctx = m->config.n_ctx_max;
    struct model_params mp = {
        .id = a->id,
        .path = path,
        .platform = p,
        .queue_cap = a->queue_size >= 0 ? a->queue_size : m->config.default_queue_size,
        .n_ctx = n_ctx,
        .n_threads = m->config.n_threads,
        .force_embedding = a->force_embedding,
        .pooling = a->pooling,
        .chat_template = m->config.chat_template,
        .mmproj_path = mmproj[0] ? mmproj : NULL,
        .default_params = a->default_params,
        .budget = &m->budget,
    };
    struct model *model;
    if (model_new(&mp, &model) != ERR_OK)
        return fail(why, LOAD_FAIL_ENGINE, errmsg_set(err, ERR_NOMEM, "out of memory"));
    mutex_lock(&m->room_mu);
    rc = make_room(m, err);
    if (rc != ERR_OK) {
        mutex_unlock(&m->room_mu);
        model_release(model);
        return fail(why, LOAD_FAIL_LIMIT, rc);
    }
    rc = registry_add(m->registry, model); // visible as "loading" while it loads
    mutex_unlock(&m->room_mu);
    if (rc != ERR_OK) {
        model_release(model);
        if (rc == ERR_EXISTS)
            return fail(why, LOAD_FAIL_EXISTS,
                        errmsg_set(err, rc, "model '%s' already exists", a->id));
        return fail(why, LOAD_FAIL_LIMIT,
                    errmsg_set(err, rc, "at most %d models may be loaded", REGISTRY_CAP));
    }
    rc = model_load(model, a->n_instances, n_actual, err);
    if (rc != ERR_OK) {
        model_release(registry_take(m->registry, a->id)); // the id was ours while loading
        model_release(model);
        return fail(why, LOAD_FAIL_ENGINE, rc);
    }
    log_info("model '%s' loaded from %s on %s (%d instance%s)", a->id, path, p->id, *n_actual,
             *n_actual == 1 ? "" : "s");
    model_release(model);
    return ERR_OK;
}

int manager_resize(struct manager *m, const char *id, int n_instances, int *n_actual,
                   struct errmsg *err)
{
    struct model *model = registry_acquire(m->registry, id);
    if (!model) return errmsg_set(err, ERR_NOT_FOUND, "model '%s' does not exist", id);
    int rc = model_resize(model, n_instances, n_actual, err);
    model_release(model);
    return rc;
}

int manager_unload(struct manager *m, const char *id)
{
    struct model *model = registry_take(m->registry, id);
    if (!model) return ERR_NOT_FOUND;
    model_shutdown(model);
    model_release(model);
    log_info("model '%s' unloaded", id);
    return ERR_OK;
}
