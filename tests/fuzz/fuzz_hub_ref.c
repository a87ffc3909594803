/* libFuzzer target: hub references, hub path safety and the file choice. The input's first line
 * is a reference, the other lines a repository listing. Invariants: a parsed reference has a
 * valid repository and a safe file path; a safe path is relative and has no "." or ".." part;
 * a chosen plan's indices are in range, start at its primary and name .gguf files.
 * Build: make BUILD=fuzz CC=clang build/fuzz/fuzz/fuzz_hub_ref */
#include "hub/hub_ref.h"
#include "util/mem.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

#define LINES_MAX 64

static void check_safe(const char *p)
{
    if (!hub_path_is_safe(p)) return;
    if (p[0] == '/' || strcmp(p, "..") == 0 || strncmp(p, "../", 3) == 0 || strstr(p, "/../") ||
        strstr(p, "/./") || strstr(p, "//"))
        abort();
    size_t n = strlen(p);
    if (n >= 3 && strcmp(p + n - 3, "/..") == 0) abort();
}

static void check_plan(const char *const *paths, int n, const struct hub_ref *ref)
{
    struct hub_plan plan;
    struct errmsg e;
    if (hub_plan_select(paths, n, ref, &plan, &e) != ERR_OK) return;
    if (plan.n_parts < 1 || plan.n_parts > HUB_PARTS_MAX || plan.parts[0] != plan.primary) abort();
    for (int k = 0; k < plan.n_parts; k++) {
        if (plan.parts[k] < 0 || plan.parts[k] >= n) abort();
        size_t m = strlen(paths[plan.parts[k]]);
        if (m < 5 || strcmp(paths[plan.parts[k]] + m - 5, ".gguf") != 0) abort();
    }
    if (plan.mmproj < -1 || plan.mmproj >= n) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char *text = mem_alloc(len + 1);
    if (!text) return 0;
    memcpy(text, data, len);
    text[len] = '\0';
    const char *lines[LINES_MAX];
    int n = 0;
    for (char *p = text; p && n < LINES_MAX;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        lines[n++] = p;
        p = nl ? nl + 1 : NULL;
    }
    for (int i = 0; i < n; i++)
        check_safe(lines[i]);
    struct hub_ref ref;
    struct errmsg e;
    if (hub_ref_parse(lines[0], &ref, &e) == ERR_OK) {
        if (!hub_repo_is_valid(ref.repo)) abort();
        if (ref.file[0] && !hub_path_is_safe(ref.file)) abort();
        check_plan(lines + 1, n - 1, &ref);
    }
    mem_free(text);
    return 0;
}
