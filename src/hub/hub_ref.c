/* Hub references, path safety and the quant choice (see hub_ref.h). The selection rules are
 * llama.cpp's `-hf` rules, re-stated from its behaviour: tags matched case-insensitively and
 * followed by '.' or '-', split parts by prefix and count, mmproj by folder depth and bits. */
#include "hub/hub_ref.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REPO_PART_MAX 96

static bool repo_char(int c)
{
    return isalnum(c) || c == '.' || c == '_' || c == '-';
}

static bool repo_part_valid(const char *s, size_t len)
{
    if (len == 0 || len > REPO_PART_MAX || s[0] == '.' || s[0] == '-') return false;
    for (size_t i = 0; i < len; i++) {
        if (!repo_char((unsigned char)s[i])) return false;
        if (s[i] == '.' && i + 1 < len && s[i + 1] == '.') return false;
    }
    return true;
}

bool hub_repo_is_valid(const char *repo)
{
    const char *slash = strchr(repo, '/');
    if (!slash) return false;
    size_t a = (size_t)(slash - repo), b = strlen(slash + 1);
    return repo_part_valid(repo, a) && repo_part_valid(slash + 1, b);
}

bool hub_path_is_safe(const char *path)
{
    size_t len = strlen(path);
    if (len == 0 || len >= HUB_FILE_CAP) return false;
    const char *p = path;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 0 || p[0] == '.') return false; // empty, ".", "..", hidden
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c < 0x20 || c == 0x7f || c == '\\') return false;
        }
        p += n;
        if (*p == '/') {
            p++;
            if (*p == '\0') return false; // trailing slash
        }
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

static bool quant_valid(const char *q)
{
    size_t n = strlen(q);
    if (n == 0 || n >= HUB_QUANT_CAP) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)q[i]) && q[i] != '_' && q[i] != '-') return false;
    return true;
}

/* `org/repo/path/file.gguf`: the first two parts are the repository. */
static int parse_file_ref(const char *s, const char *second_slash, struct hub_ref *out,
                          struct errmsg *err)
{
    size_t repo_len = (size_t)(second_slash - s);
    const char *file = second_slash + 1;
    if (repo_len >= HUB_REPO_CAP) return errmsg_set(err, ERR_INVALID, "repository name too long");
    memcpy(out->repo, s, repo_len);
    out->repo[repo_len] = '\0';
    if (!hub_repo_is_valid(out->repo))
        return errmsg_set(err, ERR_INVALID, "'%s' is not a repository name (org/name)", out->repo);
    if (!hub_path_is_safe(file) || !ends_with(file, ".gguf"))
        return errmsg_set(err, ERR_INVALID,
                          "'%s' is not a GGUF file path inside the repository (a relative path "
                          "ending in .gguf, no '.' or '..' parts)",
                          file);
    snprintf(out->file, sizeof out->file, "%s", file);
    return ERR_OK;
}

int hub_ref_parse(const char *s, struct hub_ref *out, struct errmsg *err)
{
    struct hub_ref r = {0};
    if (strncmp(s, HUB_URL_PREFIX, strlen(HUB_URL_PREFIX)) == 0) s += strlen(HUB_URL_PREFIX);
    const char *slash = strchr(s, '/');
    const char *second = slash ? strchr(slash + 1, '/') : NULL;
    if (!slash)
        return errmsg_set(err, ERR_INVALID,
                          "'%s' is not a hub model: write org/repo[:QUANT] or "
                          "org/repo/file.gguf",
                          s);
    if (second) {
        int rc = parse_file_ref(s, second, &r, err);
        if (rc != ERR_OK) return rc;
        *out = r;
        return ERR_OK;
    }
    const char *colon = strchr(s, ':');
    size_t repo_len = colon ? (size_t)(colon - s) : strlen(s);
    if (repo_len >= HUB_REPO_CAP) return errmsg_set(err, ERR_INVALID, "repository name too long");
    memcpy(r.repo, s, repo_len);
    r.repo[repo_len] = '\0';
    if (!hub_repo_is_valid(r.repo))
        return errmsg_set(err, ERR_INVALID, "'%s' is not a repository name (org/name)", r.repo);
    if (colon) {
        if (!quant_valid(colon + 1))
            return errmsg_set(err, ERR_INVALID,
                              "'%s' is not a quant tag (letters, digits, '_' and '-')", colon + 1);
        snprintf(r.quant, sizeof r.quant, "%s", colon + 1);
    }
    *out = r;
    return ERR_OK;
}

/* The "-NNNNN-of-NNNNN" part ending at end (exclusive), as digits; false when absent. */
static bool split_suffix(const char *s, size_t end, int *index, int *count)
{
    static const char pat[] = "-00000-of-00000"; // 0 = a digit
    size_t n = sizeof pat - 1;
    if (end <= n) return false; // needs at least one byte of prefix
    const char *p = s + end - n;
    for (size_t i = 0; i < n; i++) {
        bool digit = isdigit((unsigned char)p[i]);
        if (pat[i] == '0' ? !digit : tolower((unsigned char)p[i]) != pat[i]) return false;
    }
    int i = atoi(p + 1), c = atoi(p + 10);
    if (i < 1 || i > c) return false; // "-00000-of-…", "-00003-of-00002": not a split name
    *index = i;
    *count = c;
    return true;
}

void hub_split_info(const char *path, char *prefix, size_t prefix_cap, int *index, int *count)
{
    *index = 1;
    *count = 1;
    size_t len = strlen(path);
    if (!ends_with(path, ".gguf")) {
        if (prefix_cap) snprintf(prefix, prefix_cap, "%s", path);
        return;
    }
    len -= 5;
    int i = 1, c = 1;
    if (split_suffix(path, len, &i, &c)) {
        len -= 15;
        *index = i;
        *count = c;
    }
    if (prefix_cap) snprintf(prefix, prefix_cap, "%.*s", (int)len, path);
}

/* The tag at the end of a prefix: the last run of [A-Za-z0-9_] after a '-' or '.'. */
static const char *prefix_tag(const char *prefix, size_t *len)
{
    size_t n = strlen(prefix), i = n;
    while (i > 0 && (isalnum((unsigned char)prefix[i - 1]) || prefix[i - 1] == '_'))
        i--;
    if (i == n || i == 0 || (prefix[i - 1] != '-' && prefix[i - 1] != '.')) {
        *len = 0;
        return prefix + n;
    }
    *len = n - i;
    return prefix + i;
}

/* Bits of a file's quant tag: the first number in it (Q4_K_M → 4, F16 → 16; none → 0). */
static int quant_bits(const char *path)
{
    char prefix[HUB_FILE_CAP];
    int index, count;
    hub_split_info(path, prefix, sizeof prefix, &index, &count);
    size_t len;
    const char *tag = prefix_tag(prefix, &len);
    for (size_t i = 0; i < len; i++)
        if (isdigit((unsigned char)tag[i])) return atoi(tag + i) > 9999 ? 9999 : atoi(tag + i);
    return 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A model file: a .gguf that is not a projector, an importance matrix or a draft model. */
static bool is_model_file(const char *path)
{
    static const char *const not_models[] = {"mmproj",  "imatrix", "mtp-",
                                             "eagle3-", "dflash-", "dspark-"};
    if (!ends_with(path, ".gguf")) return false;
    const char *name = base_name(path);
    for (size_t i = 0; i < sizeof not_models / sizeof not_models[0]; i++)
        if (strstr(name, not_models[i])) return false;
    return true;
}

/* Whether path contains tag (any case) followed by '.' or '-'. */
static bool has_tag(const char *path, const char *tag)
{
    size_t n = strlen(tag);
    for (const char *p = path; *p; p++) {
        if (strncasecmp(p, tag, n) == 0 && (p[n] == '.' || p[n] == '-')) return true;
    }
    return false;
}

static bool is_first_part(const char *path)
{
    int index, count;
    hub_split_info(path, NULL, 0, &index, &count);
    return count <= 1 || index == 1;
}

/* The first model file carrying tag (NULL tag: any model file), or -1. */
static int find_model(const char *const *paths, int n, const char *tag)
{
    for (int i = 0; i < n; i++)
        if (is_model_file(paths[i]) && is_first_part(paths[i]) && (!tag || has_tag(paths[i], tag)))
            return i;
    return -1;
}

static int find_exact(const char *const *paths, int n, const char *file)
{
    for (int i = 0; i < n; i++)
        if (strcmp(paths[i], file) == 0) return i;
    return -1;
}

/* Lists the repository's GGUF files into err after a leading sentence. */
static int fail_listing(const char *const *paths, int n, int code, struct errmsg *err,
                        const char *what)
{
    char list[ERRMSG_CAP] = "";
    size_t used = 0;
    int shown = 0;
    for (int i = 0; i < n && used + 2 < sizeof list; i++) {
        if (!ends_with(paths[i], ".gguf") || !is_first_part(paths[i])) continue;
        int w = snprintf(list + used, sizeof list - used, "%s%s", shown ? ", " : "", paths[i]);
        if (w < 0) break;
        used += (size_t)w < sizeof list - used ? (size_t)w : sizeof list - used - 1;
        shown++;
    }
    return errmsg_set(err, code, "%s; GGUF files there: %s", what, shown ? list : "none");
}

/* Every part of the split model whose first part is paths[first], in index order. */
static int collect_parts(const char *const *paths, int n, int first, struct hub_plan *plan,
                         struct errmsg *err)
{
    char prefix[HUB_FILE_CAP], other[HUB_FILE_CAP];
    int index, count;
    hub_split_info(paths[first], prefix, sizeof prefix, &index, &count);
    if (count > HUB_PARTS_MAX)
        return errmsg_set(err, ERR_LIMIT, "'%s' has %d parts (at most %d)", paths[first], count,
                          HUB_PARTS_MAX);
    for (int k = 0; k < count; k++)
        plan->parts[k] = -1;
    for (int i = 0; i < n; i++) {
        int idx, cnt;
        if (!ends_with(paths[i], ".gguf")) continue; // "X-Q8_0" is not "X-Q8_0.gguf"'s twin
        hub_split_info(paths[i], other, sizeof other, &idx, &cnt);
        if (cnt == count && idx >= 1 && idx <= count && strcmp(other, prefix) == 0)
            plan->parts[idx - 1] = i;
    }
    for (int k = 0; k < count; k++)
        if (plan->parts[k] < 0)
            return errmsg_set(err, ERR_FORMAT, "split model '%s' misses part %d of %d",
                              paths[first], k + 1, count);
    plan->n_parts = count;
    return ERR_OK;
}

/* Number of leading folders of sib that are all folders of model, or -1 when sib's folder is
 * not model's folder or one of its parents. */
static int shared_depth(const char *model, const char *sib)
{
    const char *ms = strrchr(model, '/'), *ss = strrchr(sib, '/');
    size_t mdir = ms ? (size_t)(ms - model) : 0, sdir = ss ? (size_t)(ss - sib) : 0;
    if (sdir == 0) return 0;
    if (sdir > mdir || memcmp(model, sib, sdir) != 0 || (sdir < mdir && model[sdir] != '/'))
        return -1;
    int depth = 1;
    for (size_t i = 0; i < sdir; i++)
        depth += sib[i] == '/';
    return depth;
}

/* The projector beside model: deepest shared folder, then the closest quant bits; or -1. */
static int find_mmproj(const char *const *paths, int n, const char *model)
{
    int best = -1, best_depth = 0, best_diff = 0, bits = quant_bits(model);
    for (int i = 0; i < n; i++) {
        if (!ends_with(paths[i], ".gguf") || !strstr(paths[i], "mmproj")) continue;
        int depth = shared_depth(model, paths[i]);
        if (depth < 0) continue;
        int diff = abs(quant_bits(paths[i]) - bits);
        if (best < 0 || depth > best_depth || (depth == best_depth && diff < best_diff)) {
            best = i;
            best_depth = depth;
            best_diff = diff;
        }
    }
    return best;
}

static int choose_primary(const char *const *paths, int n, const struct hub_ref *ref,
                          struct errmsg *err)
{
    char what[HUB_FILE_CAP + HUB_REPO_CAP + 64];
    int i;
    if (ref->file[0]) {
        i = find_exact(paths, n, ref->file);
        snprintf(what, sizeof what, "no file '%s' in %s", ref->file, ref->repo);
    } else if (ref->quant[0]) {
        i = find_model(paths, n, ref->quant);
        snprintf(what, sizeof what, "no %s model file in %s", ref->quant, ref->repo);
    } else {
        i = find_model(paths, n, "Q4_K_M");
        if (i < 0) i = find_model(paths, n, "Q8_0");
        if (i < 0) i = find_model(paths, n, NULL);
        snprintf(what, sizeof what, "no GGUF model file in %s", ref->repo);
    }
    if (i < 0) return fail_listing(paths, n, ERR_NOT_FOUND, err, what);
    return i;
}

int hub_plan_select(const char *const *paths, int n, const struct hub_ref *ref,
                    struct hub_plan *out, struct errmsg *err)
{
    int primary = choose_primary(paths, n, ref, err);
    if (primary < 0) return primary;
    struct hub_plan plan = {0};
    int rc = collect_parts(paths, n, primary, &plan, err);
    if (rc != ERR_OK) return rc;
    plan.primary = plan.parts[0]; // a file named by path may be a later part
    plan.mmproj = find_mmproj(paths, n, paths[plan.primary]);
    *out = plan;
    return ERR_OK;
}
