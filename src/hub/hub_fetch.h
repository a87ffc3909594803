/* HTTP to a Hugging Face-compatible hub through libcurl: a repository's file listing
 * (`/api/models/{repo}/tree/main`) and one file's download (`/{repo}/resolve/main/{path}`,
 * redirects followed) into `dest.part`, resumed with `Range`, its SHA-256 checked against the
 * hub's LFS oid before the rename to dest. Not the choice of files (hub_ref.h) nor the cache
 * (hub.h). */
#ifndef HUB_HUB_FETCH_H
#define HUB_HUB_FETCH_H

#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

/* Why a hub operation failed, for callers that map it to a status (api/) or an exit code. */
enum hub_failure {
    HUB_FAIL_NONE = 0,
    HUB_FAIL_REF,       // the reference or a hub-supplied name is malformed or unsafe
    HUB_FAIL_NOT_FOUND, // 404: no such repository or file
    HUB_FAIL_NO_MATCH,  // the repository has no file matching the quant
    HUB_FAIL_AUTH,      // 401: a token is needed (HF_TOKEN) or was refused
    HUB_FAIL_FORBIDDEN, // 403: gated or private; the token's account lacks access
    HUB_FAIL_OFFLINE,   // not cached, and downloads are off (--offline)
    HUB_FAIL_NETWORK,   // connection, timeout, 5xx, cut transfer (the .part is kept to resume)
    HUB_FAIL_CHECKSUM,  // the bytes do not hash to the hub's oid (the .part is deleted)
    HUB_FAIL_DISK_FULL, // no space for the file (ENOSPC/EDQUOT, or statvfs said so up front)
    HUB_FAIL_IO,        // another local file-system error
};

/* Download progress, reported about 10 times a second and once at the end of each file. */
struct hub_progress {
    const char *file;   // path inside the repository
    const char *sha256; // the hub's SHA-256 of the file (hex), or "" when it gave none
    uint64_t done;      // bytes of the file on disk (resumed bytes included)
    uint64_t total;     // the file's size
    uint64_t resumed;   // bytes that were already there when this run started
    double elapsed_s;   // since this run of the file started
    bool is_done;       // the last report for this file
};
typedef void (*hub_progress_fn)(void *user, const struct hub_progress *p);

/* Settings shared by every hub call; the caller keeps the strings alive during calls. */
struct hub_opts {
    const char *hub_url;      // "https://huggingface.co" (no trailing '/')
    const char *token;        // bearer token (HF_TOKEN) or NULL
    const char *models_dir;   // downloads go to models_dir/org/repo/path
    bool is_offline;          // never touch the network; only cached files
    int n_retries;            // resumes of a cut download in one call (0 = none)
    int retry_delay_ms;       // pause before each resume
    hub_progress_fn progress; // or NULL
    void *progress_user;
};

struct hub_entry {
    char *path;      // owned; safe to join under a folder (hub_path_is_safe)
    uint64_t size;   // bytes
    char sha256[65]; // LFS oid, lower-case hex; "" when the hub gave none
};

struct hub_listing {
    struct hub_entry *entries; // owned, n of them, in the hub's order
    int n;
};

/* Fetches repo's file listing. Entries whose paths are unsafe are left out (logged). Errors:
 * ERR_IO (network, or an HTTP error: *why says which), ERR_FORMAT (not the expected JSON),
 * ERR_NOMEM. On success the caller frees *out with hub_listing_free(). Thread-safe. */
int hub_fetch_list(const struct hub_opts *o, const char *repo, struct hub_listing *out,
                   enum hub_failure *why, struct errmsg *err);

/* Frees a listing's entries; a zeroed listing is a no-op. */
void hub_listing_free(struct hub_listing *l);

/* Downloads e from repo to dest (its folders created), through dest + ".part": resumed when
 * that file holds a prefix, retried o->n_retries times when the transfer is cut, checked
 * against e->sha256, renamed into place. A checksum mismatch deletes the .part; a cut transfer
 * keeps it for the next run. Errors: ERR_IO (with *why), ERR_FORMAT (checksum), ERR_LIMIT
 * (disk full), ERR_BUSY (another process holds the .part's lock), ERR_NOMEM. Concurrent calls
 * for one dest within a process must be serialized by the caller (the lock is per process). */
int hub_fetch_file(const struct hub_opts *o, const char *repo, const struct hub_entry *e,
                   const char *dest, enum hub_failure *why, struct errmsg *err);

/* SHA-256 of a file as 64 lower-case hex digits into hex[65]. ERR_IO when it cannot be read,
 * ERR_NOMEM. */
int hub_sha256_file(const char *path, char hex[65]);

#endif
