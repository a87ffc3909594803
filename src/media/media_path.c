/* file:// URL resolution under the media root, and bounded whole-file reads. */
// realpath() is XSI, beyond the project-wide _POSIX_C_SOURCE; it must be set before any header.
#define _XOPEN_SOURCE 700
#include "media/media_path.h"

#include "util/checked.h"
#include "util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

#define URL_SHOWN_MAX 200 // bytes of the client's URL quoted in a message

void media_path_init_disabled(struct media_path *mp)
{
    mp->root = NULL;
    mp->root_len = 0;
}

int media_path_init(struct media_path *mp, const char *dir, struct errmsg *e)
{
    media_path_init_disabled(mp);
    if (!dir || !*dir) return errmsg_set(e, ERR_INVALID, "media path: empty directory name");
    char *real = realpath(dir, NULL); // libc malloc: copied below so mem_ counts stay exact
    if (!real) {
        int err = errno;
        return errmsg_set(e, err == ENOENT ? ERR_NOT_FOUND : ERR_IO, "media path '%s': %s", dir,
                          strerror(err));
    }
    struct stat st;
    int rc = ERR_OK;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = errmsg_set(e, ERR_INVALID, "media path '%s' is not a directory", dir);
    else if (!(mp->root = mem_strdup(real)))
        rc = errmsg_set(e, ERR_NOMEM, "media path: out of memory");
    else
        mp->root_len = strlen(real);
    free(real);
    // "/" as the root: keep it as the empty prefix so "root + '/'" tests still work.
    if (rc == ERR_OK && mp->root_len == 1) mp->root[mp->root_len = 0] = '\0';
    return rc;
}

void media_path_deinit(struct media_path *mp)
{
    mem_free(mp->root);
    media_path_init_disabled(mp);
}

bool media_path_is_file_url(struct str url)
{
    static const char scheme[] = "file://";
    if (url.len < sizeof scheme - 1) return false;
    for (size_t i = 0; i < sizeof scheme - 1; i++) {
        char c = url.ptr[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != scheme[i]) return false;
    }
    return true;
}

/* The one answer for a path that does not resolve to a file inside the root. */
#define NOT_FOUND_MSG "no such file in the media path"

static int hex_val(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Builds the candidate path in out[PATH_MAX]: root + "/" + relative part, or the absolute
 * part, with %XX decoded. */
static int url_to_path(const struct media_path *mp, struct str url, char *out, struct errmsg *e)
{
    const char *p = url.ptr + 7;
    size_t n = url.len - 7, o = 0;
    int shown = (int)(url.len > URL_SHOWN_MAX ? URL_SHOWN_MAX : url.len);
    if (n == 0) return errmsg_set(e, ERR_INVALID, "file URL '%.*s' names no file", shown, url.ptr);
    if (p[0] != '/') {
        if (mp->root_len + 1 >= PATH_MAX)
            return errmsg_set(e, ERR_INVALID, "file URL path too long");
        memcpy(out, mp->root, mp->root_len);
        o = mp->root_len;
        out[o++] = '/';
    }
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)p[i];
        if (c == '?' || c == '#' || c == '\0')
            return errmsg_set(e, ERR_INVALID, "file URL '%.*s': query, fragment or NUL not allowed",
                              shown, url.ptr);
        if (c == '%') {
            int hi = i + 2 < n ? hex_val(p[i + 1]) : -1, lo = hi >= 0 ? hex_val(p[i + 2]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0))
                return errmsg_set(e, ERR_INVALID, "file URL '%.*s': bad %%-escape", shown, url.ptr);
            c = hi * 16 + lo;
            i += 2;
        }
        if (o + 1 >= PATH_MAX) return errmsg_set(e, ERR_INVALID, "file URL path too long");
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return ERR_OK;
}

static bool is_inside(const struct media_path *mp, const char *real)
{
    return strncmp(real, mp->root, mp->root_len) == 0 && real[mp->root_len] == '/';
}

/* The path the kernel has for fd, to catch a component swapped after realpath(). Linux
 * /proc; where it is missing we refuse rather than trust the earlier check. */
static bool fd_is_inside(const struct media_path *mp, int fd)
{
    char link[64], real[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, real, sizeof real - 1);
    if (n <= 0 || (size_t)n >= sizeof real - 1) return false;
    real[n] = '\0';
    return is_inside(mp, real);
}

static int read_all(int fd, size_t size, unsigned char **out, size_t *out_len, struct errmsg *e)
{
    unsigned char *buf = mem_alloc(size ? size : 1);
    if (!buf) return errmsg_set(e, ERR_NOMEM, "out of memory reading a %zu-byte file", size);
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            mem_free(buf);
            return errmsg_set(e, ERR_IO, "file read failed (%s)",
                              r < 0 ? strerror(errno) : "file shrank while reading");
        }
        got += (size_t)r;
    }
    *out = buf;
    *out_len = got;
    return ERR_OK;
}

/* Opens real (already known to be inside the root), re-checks it and reads it. */
static int open_and_read(const struct media_path *mp, const char *real, size_t max_bytes,
                         unsigned char **out, size_t *out_len, struct errmsg *e)
{
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
    int fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT || err == ELOOP) return errmsg_set(e, ERR_NOT_FOUND, NOT_FOUND_MSG);
        return errmsg_set(e, ERR_IO, "cannot open file (%s)", strerror(err));
    }
    struct stat st;
    int rc = ERR_OK;
    if (!fd_is_inside(mp, fd))
        rc = errmsg_set(e, ERR_NOT_FOUND, NOT_FOUND_MSG);
    else if (fstat(fd, &st) != 0)
        rc = errmsg_set(e, ERR_IO, "cannot stat file (%s)", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = errmsg_set(e, ERR_INVALID, "not a regular file");
    else if ((uint64_t)st.st_size > max_bytes)
        rc = errmsg_set(e, ERR_LIMIT, "file too large (%lld bytes, limit %zu)",
                        (long long)st.st_size, max_bytes);
    else
        rc = read_all(fd, (size_t)st.st_size, out, out_len, e);
    close(fd);
    return rc;
}

int media_path_read(const struct media_path *mp, struct str url, size_t max_bytes,
                    unsigned char **out, size_t *out_len, struct errmsg *e)
{
    int shown = (int)(url.len > URL_SHOWN_MAX ? URL_SHOWN_MAX : url.len);
    if (!media_path_is_file_url(url))
        return errmsg_set(e, ERR_INVALID, "'%.*s' is not a file:// URL", shown, url.ptr);
    if (!mp || !mp->root)
        return errmsg_set(e, ERR_UNSUPPORTED,
                          "local file URLs are disabled (start the server with --media-path)");
    if (max_bytes == 0) max_bytes = MEDIA_PATH_FILE_MAX;
    char *path = mem_alloc(2 * (size_t)PATH_MAX); // candidate, then resolved
    if (!path) return errmsg_set(e, ERR_NOMEM, "out of memory resolving a file URL");
    char *real = path + PATH_MAX;
    struct errmsg inner;
    errmsg_clear(&inner);
    int rc = url_to_path(mp, url, path, e);
    if (rc != ERR_OK) goto out_free;
    // Whatever stops the path from resolving to a file inside the root gets one answer, so
    // that it says nothing about what exists (or may be read) outside it.
    if (!realpath(path, real) || !is_inside(mp, real)) {
        rc = errmsg_set(&inner, ERR_NOT_FOUND, NOT_FOUND_MSG);
    } else {
        rc = open_and_read(mp, real, max_bytes, out, out_len, &inner);
    }
    if (rc != ERR_OK) errmsg_set(e, rc, "'%.*s': %s", shown, url.ptr, inner.msg);
out_free:
    mem_free(path);
    return rc;
}
