/* Non-blocking, regular-file-only opens (see file.h). */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *file_kind_name(unsigned mode)
{
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a regular file";
}

static int refuse(const char *path, unsigned mode, struct errmsg *err)
{
    return errmsg_set(err, ERR_INVALID, "'%s' is %s, not a regular file", path,
                      file_kind_name(mode));
}

int file_open_regular(const char *path, int *fd, struct errmsg *err)
{
    // stat first, so a device is never opened at all; the fstat below closes the race with a
    // path swapped in between.
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return refuse(path, st.st_mode, err);
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) {
        int e = errno;
        return errmsg_set(err, e == ENOENT ? ERR_NOT_FOUND : ERR_IO, "%s: %s", path, strerror(e));
    }
    int rc = ERR_OK;
    if (fstat(f, &st) != 0)
        rc = errmsg_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = refuse(path, st.st_mode, err);
    if (rc != ERR_OK) {
        close(f);
        return rc;
    }
    // O_NONBLOCK means nothing for a regular file on Linux, but a caller may hand the
    // descriptor to code that checks the flag.
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0) (void)fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    *fd = f;
    return ERR_OK;
}

FILE *file_fopen_regular(const char *path, struct errmsg *err)
{
    int fd;
    if (file_open_regular(path, &fd, err) != ERR_OK) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        errmsg_set(err, ERR_NOMEM, "%s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}
