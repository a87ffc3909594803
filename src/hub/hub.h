/* The local model cache fed from a Hugging Face-compatible hub: a reference (`org/repo[:QUANT]`,
 * `org/repo/file.gguf`, optionally `hf://…`) becomes a GGUF file under the models folder, laid
 * out as models_dir/org/repo/path — reused when present, downloaded otherwise (never when
 * offline). Used by `llamapi pull/ls/rm`, the server's `-hf` and `hf://` model paths. */
#ifndef HUB_HUB_H
#define HUB_HUB_H

#include "hub/hub_fetch.h"
#include "hub/hub_ref.h"

#include <stddef.h>

#define HUB_DEFAULT_URL "https://huggingface.co"

/* The default models folder: /var/lib/llamapi/models for root (the system service), else
 * $XDG_CACHE_HOME/llamapi/models, else ~/.cache/llamapi/models. Cannot fail (truncates). */
void hub_default_models_dir(char *out, size_t cap);

/* The hub address: $LLAMAPI_HUB_URL, $MODEL_ENDPOINT, $HF_ENDPOINT or the public hub, without a
 * trailing '/', into out. Cannot fail (truncates). */
void hub_default_url(char *out, size_t cap);

/* Progress through the log (a line a second per file, and one when it is done), for servers:
 * pass a zeroed struct hub_log_progress as the user pointer, one per hub_resolve call. */
struct hub_log_progress {
    const char *file; // the file of the last line
    double last_s;    // its elapsed_s
};
void hub_log_progress(void *user, const struct hub_progress *p);

/* Makes ref's files present under o->models_dir and writes the model file's path (the first
 * part of a split model) to out. Online, the hub's listing picks the files (hub_ref.h rules);
 * a file already there with the hub's size is kept, others are downloaded (with its split
 * parts and the repository's mmproj). Offline (o->is_offline), or when the hub cannot be
 * reached, the same rules pick among the files already there. Downloads in one process run one
 * at a time. Errors with *why: ERR_INVALID (HUB_FAIL_REF), ERR_NOT_FOUND (HUB_FAIL_NO_MATCH,
 * HUB_FAIL_OFFLINE), and hub_fetch_file's. Thread-safe. */
int hub_resolve(const struct hub_opts *o, const char *ref, char *out, size_t out_cap,
                enum hub_failure *why, struct errmsg *err);

/* Lists the GGUF files under dir, recursively (at most 8 folders deep), as paths relative to
 * dir, sorted; with is_with_parts also unfinished "*.gguf.part" downloads. Entries carry sizes
 * and no checksum. A missing dir gives an empty listing. Errors: ERR_IO, ERR_NOMEM. The caller
 * frees *out with hub_listing_free(). */
int hub_local_list(const char *dir, bool is_with_parts, struct hub_listing *out);

/* Deletes ref's files from models_dir: `org/repo` everything of the repository, `org/repo:Q`
 * the files that quant chooses (the mmproj too when no model is left), `org/repo/f.gguf` that
 * file; their unfinished .part files too; then the folders left empty. *n_removed counts the
 * files. ERR_INVALID (bad ref), ERR_NOT_FOUND (nothing there), ERR_IO. */
int hub_remove(const char *models_dir, const char *ref, int *n_removed, struct errmsg *err);

#endif
