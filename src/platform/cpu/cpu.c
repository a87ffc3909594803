/* The `cpu` platform adapter: discovery (chips, which paths it claims). Model lifecycle
 * onto the engine lives beside it. */
#include "platform/cpu/cpu.h"

#include "platform/cpu/cpu_model.h"
#include "platform/cpuinfo.h"
#include "util/file.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static bool cpu_is_available(void)
{
    return true;
}

static int cpu_detect_chips(struct platform_chip *out, int max)
{
    return cpuinfo_detect(out, max);
}

/* Never blocks: a FIFO named like a model is not one. */
static bool has_gguf_magic(const char *path)
{
    FILE *f = file_fopen_regular(path, NULL);
    if (!f) return false;
    char magic[4];
    bool ok = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    fclose(f);
    return ok;
}

static bool ends_with_gguf(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".gguf") == 0;
}

bool cpu_is_mmproj_name(const char *name)
{
    return strncmp(name, "mmproj-", 7) == 0 && ends_with_gguf(name);
}

int cpu_find_mmproj(const char *path, char *out, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    char best[256] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!cpu_is_mmproj_name(e->d_name) || strlen(e->d_name) >= sizeof best) continue;
        if (found++ == 0 || strcmp(e->d_name, best) < 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (found) snprintf(out, cap, "%s/%s", path, best);
    return found;
}

/* Finds the single .gguf in dir (projectors aside); false when there are none or several. */
static bool single_gguf_in_dir(const char *dir, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d) return false;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !ends_with_gguf(e->d_name) || cpu_is_mmproj_name(e->d_name))
            continue;
        if (++found == 1) snprintf(out, cap, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return found == 1;
}

bool cpu_resolve_gguf(const char *path, char *gguf_path, size_t cap)
{
    char tmp[4096];
    if (!gguf_path) {
        gguf_path = tmp;
        cap = sizeof tmp;
    }
    struct stat st;
    if (stat(path, &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) {
        if (!single_gguf_in_dir(path, gguf_path, cap)) return false;
        return has_gguf_magic(gguf_path);
    }
    if (!S_ISREG(st.st_mode) || !has_gguf_magic(path)) return false;
    snprintf(gguf_path, cap, "%s", path);
    return true;
}

void cpu_file_changed_msg(const char *file, struct errmsg *why)
{
    errmsg_set(why, ERR_IO, PLATFORM_MSG_FILE_CHANGED ": %s; unload and load the model again",
               file);
}

static bool cpu_claims(const char *path)
{
    return cpu_resolve_gguf(path, NULL, 0);
}

const struct platform cpu_platform = {
    .id = "cpu",
    .display_name = "CPU (llamapi engine)",
    .is_available = cpu_is_available,
    .detect_chips = cpu_detect_chips,
    .claims = cpu_claims,
    .load = cpu_model_load,
    .describe = cpu_model_describe,
    .add_instance = cpu_model_add_instance,
    .remove_instance = cpu_model_remove_instance,
    .submit = cpu_model_submit,
    .cached_prefix = cpu_model_cached_prefix,
    .is_failed = cpu_model_is_failed,
    .unload = cpu_model_unload,
};
