/* Model directory detection and the model.json manifest. */
#include "platform/detect.h"

#include "platform/cpu/cpu.h"
#include "util/file.h"
#include "util/mem.h"

#include <ctype.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST_MAX_BYTES (64 * 1024)
#define MAX_LISTED         8 // names quoted per kind in a failure message

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

static bool is_regular(const char *dir, const char *name)
{
    char path[4096 + 512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int manifest_string(json_t *root, const char *key, char *out, size_t cap, struct errmsg *err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return ERR_OK;
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= cap)
        return errmsg_set(err, ERR_FORMAT, "model.json: '%s' must be a non-empty string", key);
    snprintf(out, cap, "%s", json_string_value(v));
    return ERR_OK;
}

/* The length of jansson's error text without its " near '...'" part, which quotes the file:
 * a file reached through a request (a symlink to anything) must not be echoed back. */
static int json_error_len(const char *text)
{
    const char *near = strstr(text, " near ");
    return (int)(near ? (size_t)(near - text) : strlen(text));
}

int platform_manifest_read(const char *dir, struct platform_manifest *out, struct errmsg *err)
{
    memset(out, 0, sizeof *out);
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/%s", dir, PLATFORM_MANIFEST_NAME);
    struct stat st;
    if (stat(path, &st) != 0) return ERR_OK;
    if (!S_ISREG(st.st_mode) || st.st_size > MANIFEST_MAX_BYTES)
        return errmsg_set(err, ERR_FORMAT, "%s is not a file of at most %d bytes", path,
                          MANIFEST_MAX_BYTES);
    json_error_t jerr;
    FILE *f = file_fopen_regular(path, err); // swapped for a FIFO since the stat: never blocks
    if (!f) return ERR_FORMAT;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root)
        return errmsg_set(err, ERR_FORMAT, "%s: line %d: %.*s", path, jerr.line,
                          json_error_len(jerr.text), jerr.text);
    int rc = ERR_OK;
    if (!json_is_object(root)) rc = errmsg_set(err, ERR_FORMAT, "%s is not a JSON object", path);
    if (rc == ERR_OK)
        rc = manifest_string(root, "platform", out->platform, sizeof out->platform, err);
    if (rc == ERR_OK) rc = manifest_string(root, "file", out->file, sizeof out->file, err);
    if (rc == ERR_OK) rc = manifest_string(root, "abi", out->abi, sizeof out->abi, err);
    if (rc == ERR_OK) rc = manifest_string(root, "pooling", out->pooling, sizeof out->pooling, err);
    if (rc == ERR_OK) rc = manifest_string(root, "chip", out->chip, sizeof out->chip, err);
    json_t *sl = json_object_get(root, "seq_len");
    if (rc == ERR_OK && sl && !json_is_null(sl)) {
        if (!json_is_integer(sl) || json_integer_value(sl) < 1 || json_integer_value(sl) > 1 << 20)
            rc = errmsg_set(err, ERR_FORMAT, "model.json: 'seq_len' must be an integer in [1, %d]",
                            1 << 20);
        else
            out->seq_len = (int)json_integer_value(sl);
    }
    if (rc == ERR_OK && out->file[0] && (out->file[0] == '/' || strstr(out->file, "..") != NULL))
        rc = errmsg_set(err, ERR_FORMAT, "model.json: 'file' must be a name inside the directory");
    json_decref(root);
    if (rc == ERR_OK) out->is_present = true;
    return rc;
}

/* What a directory holds, by kind. */
struct scan {
    char rkllm[MAX_LISTED][256];
    int n_rkllm;
    char rknn[MAX_LISTED][256]; // not part of an rknn3 set
    int n_rknn;
    char gguf[MAX_LISTED][256]; // not X.tokenizer.gguf (an rknn3 set's tokenizer)
    int n_gguf;
    char rknn3[MAX_LISTED][256]; // the set's .rknn
    int n_rknn3;
    bool has_tokenizer;
};

static void add_name(char (*list)[256], int *n, const char *name)
{
    if (*n < MAX_LISTED) snprintf(list[*n], 256, "%s", name);
    (*n)++;
}

/* Whether dir holds the rest of the rknn3 set whose .rknn is name. */
static bool is_rknn3_set(const char *dir, const char *name)
{
    static const char *const parts[] = {".weight", ".tokenizer.gguf", ".embed.bin"};
    size_t stem = strlen(name) - strlen(".rknn");
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char part[512];
        snprintf(part, sizeof part, "%.*s%s", (int)stem, name, parts[i]);
        if (!is_regular(dir, part)) return false;
    }
    return true;
}

static int scan_dir(const char *dir, struct scan *s, struct errmsg *err)
{
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    if (!d) return errmsg_set(err, ERR_IO, "cannot read the directory %s", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (n[0] == '.' || strlen(n) >= 256 || !is_regular(dir, n)) continue;
        if (strcmp(n, "tokenizer.json") == 0 || strcmp(n, "tokenizer_config.json") == 0)
            s->has_tokenizer = true;
        else if (ends_with(n, ".rkllm"))
            add_name(s->rkllm, &s->n_rkllm, n);
        else if (ends_with(n, ".rknn") && is_rknn3_set(dir, n))
            add_name(s->rknn3, &s->n_rknn3, n);
        else if (ends_with(n, ".rknn") && !ends_with(n, "-vision.rknn"))
            add_name(s->rknn, &s->n_rknn, n);
        else if (ends_with(n, ".gguf") && !ends_with(n, ".tokenizer.gguf") &&
                 !cpu_is_mmproj_name(n))
            add_name(s->gguf, &s->n_gguf, n);
    }
    closedir(d);
    return ERR_OK;
}

static void list_names(char *out, size_t cap, const char (*list)[256], int n, const char *kind)
{
    size_t used = strlen(out);
    for (int i = 0; i < n && i < MAX_LISTED && used < cap; i++) {
        int w = snprintf(out + used, cap - used, "%s%s (%s)", used ? ", " : "", list[i], kind);
        if (w < 0) return;
        used += (size_t)w;
    }
    if (n > MAX_LISTED && used < cap) snprintf(out + used, cap - used, ", …");
}

/* The chip named in a file name: "rk" and four digits, and an "s" after them, as a word of
 * its own ("Qwen3-4B-rk3588-w8a8.rkllm" → "rk3588"). */
static void chip_from_name(const char *name, char *out, size_t cap)
{
    for (const char *p = name; *p; p++) {
        if (p > name && isalnum((unsigned char)p[-1])) continue;
        if (tolower((unsigned char)p[0]) != 'r' || tolower((unsigned char)p[1]) != 'k') continue;
        int k = 0;
        while (k < 4 && isdigit((unsigned char)p[2 + k]))
            k++;
        if (k != 4 || isdigit((unsigned char)p[6])) continue;
        int len = 6;
        if (tolower((unsigned char)p[6]) == 's' && !isalnum((unsigned char)p[7])) len = 7;
        snprintf(out, cap, "%.*s", len, p);
        for (char *c = out; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        return;
    }
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int detect_file(const char *path, struct platform_detection *out, struct errmsg *err)
{
    snprintf(out->file, sizeof out->file, "%s", path);
    snprintf(out->dir, sizeof out->dir, "%s", path);
    char *slash = strrchr(out->dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(out->dir, sizeof out->dir, ".");
    if (ends_with(path, ".rkllm")) {
        out->platform = platform_find("rkllm");
    } else if (cpu_resolve_gguf(path, NULL, 0)) {
        out->platform = platform_find("cpu");
    } else if (ends_with(path, ".rknn")) {
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "'%s' is an .rknn file: give its directory, which holds the tokenizer "
                          "files (rknn2) or the rest of the rknn3 set",
                          path);
    } else {
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "'%s' is not a model file any platform runs (.gguf, .rkllm) nor a model "
                          "directory",
                          path);
    }
    return ERR_OK;
}

/* Fills out from the scan: exactly one candidate, else a message naming what was found. */
static int detect_scan(const char *dir, const struct scan *sc, struct platform_detection *out,
                       struct errmsg *err)
{
    int n_candidates = (sc->n_rkllm > 0) + (sc->n_rknn3 > 0) + (sc->n_gguf > 0) +
                       (sc->n_rknn > 0 && sc->has_tokenizer);
    char found[1024] = "";
    list_names(found, sizeof found, (const char(*)[256])sc->rkllm, sc->n_rkllm, "rkllm");
    list_names(found, sizeof found, (const char(*)[256])sc->rknn3, sc->n_rknn3, "rknn3 set");
    list_names(found, sizeof found, (const char(*)[256])sc->rknn, sc->n_rknn,
               sc->has_tokenizer ? "rknn2" : "rknn without tokenizer files");
    list_names(found, sizeof found, (const char(*)[256])sc->gguf, sc->n_gguf, "cpu");
    if (n_candidates > 1)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "'%s' is ambiguous: it holds %s; name the platform and file in "
                          "model.json",
                          dir, found);
    const char *id = NULL, *file = NULL;
    int n_files = 0;
    if (sc->n_rkllm) id = "rkllm", file = sc->rkllm[0], n_files = sc->n_rkllm;
    if (sc->n_rknn3) id = "rknn3", file = sc->rknn3[0], n_files = sc->n_rknn3;
    if (sc->n_gguf) id = "cpu", file = sc->gguf[0], n_files = sc->n_gguf;
    if (sc->n_rknn && sc->has_tokenizer) id = "rknn2", file = sc->rknn[0], n_files = sc->n_rknn;
    if (!id) {
        if (sc->n_rknn)
            return errmsg_set(err, ERR_UNSUPPORTED,
                              "'%s' holds %s but no tokenizer.json or tokenizer_config.json "
                              "(rknn2 needs them) nor the rknn3 set (X.rknn, X.weight, "
                              "X.tokenizer.gguf, X.embed.bin)",
                              dir, found);
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "'%s' holds no model: no .gguf (cpu), .rkllm (rkllm), .rknn with "
                          "tokenizer files (rknn2) or rknn3 set",
                          dir);
    }
    if (n_files > 1)
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "'%s' is ambiguous: it holds %s; name the file in model.json", dir,
                          found);
    out->platform = platform_find(id);
    snprintf(out->file, sizeof out->file, "%s/%s", dir, file);
    return ERR_OK;
}

/* The single file of platform id's kind in the scan, or NULL. */
static const char *scan_file_for(const struct scan *sc, const char *id)
{
    if (strcmp(id, "rkllm") == 0 && sc->n_rkllm == 1) return sc->rkllm[0];
    if (strcmp(id, "rknn3") == 0 && sc->n_rknn3 == 1) return sc->rknn3[0];
    if (strcmp(id, "rknn2") == 0 && sc->n_rknn == 1) return sc->rknn[0];
    if (strcmp(id, "cpu") == 0 && sc->n_gguf == 1) return sc->gguf[0];
    return NULL;
}

/* The platform of the file the manifest names (no platform named). */
static const char *platform_of_named(const char *dir, const char *name)
{
    char path[4096 + 512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (ends_with(name, ".rkllm")) return "rkllm";
    if (ends_with(name, ".rknn")) return is_rknn3_set(dir, name) ? "rknn3" : "rknn2";
    if (cpu_resolve_gguf(path, NULL, 0)) return "cpu";
    return NULL;
}

static int detect_dir(const char *path, struct platform_detection *out, struct errmsg *err)
{
    snprintf(out->dir, sizeof out->dir, "%s", path);
    int rc = platform_manifest_read(path, &out->manifest, err);
    if (rc != ERR_OK) return rc;
    const struct platform_manifest *mf = &out->manifest;
    if (mf->platform[0] && !platform_find(mf->platform))
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "model.json names the platform '%s', which does not exist (cpu, "
                          "rkllm, rknn2, rknn3)",
                          mf->platform);
    if (mf->file[0] && !is_regular(path, mf->file))
        return errmsg_set(err, ERR_UNSUPPORTED,
                          "model.json names the file '%s', which is not in %s", mf->file, path);
    struct scan *sc = mem_calloc(1, sizeof *sc);
    if (!sc) return errmsg_set(err, ERR_NOMEM, "out of memory");
    rc = scan_dir(path, sc, err);
    if (rc != ERR_OK) goto out;
    const char *id = mf->platform[0] ? mf->platform : NULL;
    if (!id && mf->file[0]) {
        id = platform_of_named(path, mf->file);
        if (!id) {
            rc = errmsg_set(err, ERR_UNSUPPORTED,
                            "model.json names '%s', which no platform runs by its name; add "
                            "\"platform\"",
                            mf->file);
            goto out;
        }
    }
    if (id) { // the manifest decided; the file is its, or the one file of that kind
        out->platform = platform_find(id);
        const char *f = mf->file[0] ? mf->file : scan_file_for(sc, id);
        if (f) snprintf(out->file, sizeof out->file, "%s/%s", path, f);
    } else {
        rc = detect_scan(path, sc, out, err);
    }
out:
    mem_free(sc);
    return rc;
}

int platform_detect_model(const char *path, struct platform_detection *out, struct errmsg *err)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0) return errmsg_set(err, ERR_UNSUPPORTED, "'%s' does not exist", path);
    int rc = S_ISDIR(st.st_mode) ? detect_dir(path, out, err) : detect_file(path, out, err);
    if (rc != ERR_OK) return rc;
    if (!out->platform) return errmsg_set(err, ERR_UNSUPPORTED, "no platform runs '%s'", path);
    if (out->manifest.chip[0]) {
        snprintf(out->chip, sizeof out->chip, "%s", out->manifest.chip);
        for (char *c = out->chip; *c; c++)
            *c = (char)tolower((unsigned char)*c);
    } else if (out->file[0]) {
        chip_from_name(base_name(out->file), out->chip, sizeof out->chip);
    }
    return ERR_OK;
}
