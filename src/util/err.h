/* Error codes shared by every layer, and the fixed-size message buffer a callee fills when the
 * user must see why something failed. Nothing here allocates. */
#ifndef UTIL_ERR_H
#define UTIL_ERR_H

#include <stddef.h>

enum err {
    ERR_OK = 0,
    ERR_NOMEM = -1,       // an allocation failed
    ERR_IO = -2,          // a system call on a file or socket failed
    ERR_FORMAT = -3,      // bytes from a file or the network are malformed
    ERR_INVALID = -4,     // a caller-supplied value is out of its domain
    ERR_LIMIT = -5,       // a size, count or depth limit was exceeded
    ERR_BUSY = -6,        // the resource is in use; try again later
    ERR_TIMEOUT = -7,     // a deadline passed
    ERR_CANCELLED = -8,   // the operation was cancelled by its owner
    ERR_UNSUPPORTED = -9, // valid, but not implemented for this input
    ERR_NOT_FOUND = -10,  // a named thing does not exist
    ERR_EXISTS = -11,     // a named thing already exists
};

/* Short lower-case description of an error code ("out of memory"). Cannot fail: unknown codes
 * give "unknown error". The string is static. */
const char *err_str(int code);

#define ERRMSG_CAP 512

/* A message for the user, filled by the callee that detected the problem. */
struct errmsg {
    char msg[ERRMSG_CAP]; // NUL-terminated; empty when nothing was set
};

/* Formats into e->msg (truncating at ERRMSG_CAP). e may be NULL (then nothing happens). Returns
 * code, so callers can write `return errmsg_set(e, ERR_FORMAT, "...")`. */
int errmsg_set(struct errmsg *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears e->msg. e may be NULL. */
void errmsg_clear(struct errmsg *e);

#endif
