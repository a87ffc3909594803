/* --models-preset: an INI file of models to load at start, llama-server's preset format with
 * the keys this server loads by (`[id]` sections; `model`, `parallel`, `ctx-size`,
 * `request-queue-size`, `embedding`, `reranking`, `pooling`, `load-on-startup`; a `[*]`
 * section sets them for every model). presets_sync makes the loaded set match a file's list:
 * at start, and again on SIGHUP. */
#ifndef SERVER_PRESETS_H
#define SERVER_PRESETS_H

#include "core/manager.h"
#include "util/err.h"

#include <stdbool.h>

#define PRESETS_MAX 64 // sections in one file

/* One model of the file after [*] was merged in; -1 = unset (the server's flag decides). */
struct preset {
    char id[MODEL_ID_CAP];      // the section name
    char model[MODEL_PATH_CAP]; // as written: absolute, or under --models-dir
    int n_parallel;             // instances
    int n_ctx;                  // context of all instances together, as -c
    int queue_size;             // request queue
    int is_embedding;           // 0/1
    int is_reranking;           // 0/1
    char pooling[16];           // "" = the file's
    bool load_on_startup;       // false: listed in the file, not loaded
};

struct preset_list {
    struct preset items[PRESETS_MAX];
    int n;
};

/* Reads a preset file into out (caller storage). ERR_OK; ERR_IO (unreadable, "FILE: why");
 * ERR_FORMAT / ERR_INVALID with "FILE:LINE: why" for a malformed line, an unknown key, a bad
 * value, a repeated section, a section without `model`, more than PRESETS_MAX sections. out
 * is written only on success. Thread-safe. */
int presets_read(const char *path, struct preset_list *out, struct errmsg *err);

/* Server-wide values for what an entry leaves unset (from the -np, -c, --kv-unified,
 * --embedding, --pooling flags). */
struct preset_defaults {
    int n_parallel;
    int n_ctx; // 0: model default
    bool is_kv_unified;
    bool is_embedding;
    bool is_reranking;
    const char *pooling; // "" = the file's
};

/* Makes the models loaded from presets match want: unloads the entries of *loaded that are
 * gone from want, no longer load-on-startup or changed (running requests on them end with an
 * error, as for any unload), then loads want's load-on-startup entries that are not loaded
 * (changed ones again, and ones unloaded meanwhile through the API or by --models-max),
 * leaving identical entries serving untouched. *loaded becomes what is
 * loaded now. Returns how many loads failed (each logged with its id and reason); 0 on full
 * success. Runs on one thread at a time (the caller's signal loop). */
int presets_sync(struct manager *m, const struct preset_list *want, struct preset_list *loaded,
                 const struct preset_defaults *d);

#endif
