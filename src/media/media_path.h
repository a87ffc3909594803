/* Local media files for `image_url` parts, confined to the `--media-path` root. Off by default:
 * with no root configured every local path is refused. Only `file://` URLs name local files:
 * "file:///abs/path" is absolute and must lie inside the root; "file://rel/path" is relative
 * to the root (as llama.cpp's server reads it). %XX escapes are decoded (RFC 8089); "%00",
 * '?' and '#' are refused. Plain paths without the scheme are not local files (they would be
 * ambiguous with raw base64, which may start with '/'). */
#ifndef MEDIA_MEDIA_PATH_H
#define MEDIA_MEDIA_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"
#include "util/str.h"

#define MEDIA_PATH_FILE_MAX (20u << 20) // 20 MiB: default largest file media_path_read() reads

/* The configured root. Immutable after media_path_init(), so threads may share it. */
struct media_path {
    char *root;      // realpath() of the root directory (mem_alloc), no trailing '/'; NULL = off
    size_t root_len; // bytes
};

/* Sets mp to "local paths disabled" (the default). Cannot fail. */
void media_path_init_disabled(struct media_path *mp);

/* Resolves dir with realpath() and stores it as the root. Errors: ERR_INVALID for an empty
 * dir, ERR_NOT_FOUND when it does not exist, ERR_INVALID when it is not a directory, ERR_IO
 * for other failures, ERR_NOMEM; e names the path. On error mp is left disabled. */
int media_path_init(struct media_path *mp, const char *dir, struct errmsg *e);

/* Frees the root; a no-op on a disabled or zeroed struct. */
void media_path_deinit(struct media_path *mp);

/* True when url starts with "file://" (letter case of the scheme ignored). Cannot fail. */
bool media_path_is_file_url(struct str url);

/* Reads the file a file:// URL names into a new buffer. The path is resolved with realpath(),
 * so ".." and symlinks are followed and the result must lie inside the root; after open() the
 * descriptor's own path is checked again (so a symlink swapped in between is caught), and the
 * file must be a regular file of at most max_bytes (0 means MEDIA_PATH_FILE_MAX). On success
 * *out (caller frees with mem_free()) and *out_len are set. Errors, each with a message:
 *   ERR_UNSUPPORTED  local paths are disabled (no root configured)
 *   ERR_INVALID      not a file:// URL, bad escape, '?'/'#', not a regular file
 *   ERR_NOT_FOUND    no such file inside the media path: missing, outside it, or not
 *                    resolvable (one message for all, so answers reveal nothing outside)
 *   ERR_LIMIT        the file is larger than max_bytes
 *   ERR_IO           permission denied or a read failed
 *   ERR_NOMEM        an allocation failed
 * Messages name the path as the client wrote it, never the resolved one (it would reveal the
 * server's layout). Thread-safe. */
int media_path_read(const struct media_path *mp, struct str url, size_t max_bytes,
                    unsigned char **out, size_t *out_len, struct errmsg *e);

#endif
