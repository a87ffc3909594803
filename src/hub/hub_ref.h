/* Hub model references and the choice of files in a repository: pure string work, no I/O.
 * A reference is `org/repo[:QUANT]` or `org/repo/path/file.gguf`, optionally after `hf://`;
 * the choice of files follows llama.cpp's `-hf` (common/download.cpp): a case-insensitive quant
 * tag followed by '.' or '-', Q4_K_M then Q8_0 by default, split parts together, the closest
 * mmproj-*.gguf beside the model. */
#ifndef HUB_HUB_REF_H
#define HUB_HUB_REF_H

#include "util/err.h"

#include <stdbool.h>

#define HUB_REPO_CAP   200 // "org/name" (the hub allows 96 bytes a part)
#define HUB_QUANT_CAP  64  // a quant tag
#define HUB_FILE_CAP   512 // a file path inside a repository
#define HUB_PARTS_MAX  256 // split parts of one model
#define HUB_URL_PREFIX "hf://"

struct hub_ref {
    char repo[HUB_REPO_CAP];   // "org/name", always set
    char quant[HUB_QUANT_CAP]; // the ":QUANT" tag as given; "" = the default choice
    char file[HUB_FILE_CAP];   // a path inside the repository; "" = choose by quant
};

/* Parses `org/repo`, `org/repo:QUANT` or `org/repo/path/file.gguf`, with or without a leading
 * "hf://", into *out. ERR_INVALID with a message naming what is wrong (*out untouched). */
int hub_ref_parse(const char *s, struct hub_ref *out, struct errmsg *err);

/* Whether repo is `org/name`: two parts of 1–96 bytes of [A-Za-z0-9._-], neither starting with
 * '.' or '-', no "..". Cannot fail. */
bool hub_repo_is_valid(const char *repo);

/* Whether a file path from the hub (or a user) may be joined under a repository's folder:
 * relative, components separated by single '/', none empty, none starting with '.', no
 * backslash or control byte, shorter than HUB_FILE_CAP. Such a path can never name anything
 * outside the folder it is joined to. Cannot fail. */
bool hub_path_is_safe(const char *path);

/* Split-file facts of a GGUF path ("x-00002-of-00003.gguf": index 2, count 3). A path that is
 * not "*.gguf" or not split gives index 1, count 1. prefix gets the path without ".gguf" and
 * without the "-NNNNN-of-NNNNN" part (truncated to prefix_cap). Cannot fail. */
void hub_split_info(const char *path, char *prefix, size_t prefix_cap, int *index, int *count);

/* The files a reference needs, as indices into the listing given to hub_plan_select. */
struct hub_plan {
    int primary;              // the model file (first part of a split model)
    int n_parts;              // 1, or the split count
    int parts[HUB_PARTS_MAX]; // every part in index order (parts[0] == primary)
    int mmproj;               // the projector to fetch beside it, or -1
};

/* Chooses the files of ref among paths[0..n) (a repository listing, in its order). With
 * ref->file: that exact path. Otherwise the first model file (a .gguf that is not an mmproj,
 * imatrix or draft file, and is a split's first part) whose path contains the quant tag
 * followed by '.' or '-', case-insensitively; without a tag Q4_K_M, then Q8_0, then the first
 * model file. Errors (message lists what the repository has): ERR_NOT_FOUND when nothing
 * matches, ERR_FORMAT when a split model misses a part. Writes *out only on success. */
int hub_plan_select(const char *const *paths, int n, const struct hub_ref *ref,
                    struct hub_plan *out, struct errmsg *err);

#endif
