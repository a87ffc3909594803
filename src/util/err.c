/* Error strings and the user-facing message buffer. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>

const char *err_str(int code)
{
    switch (code) {
    case ERR_OK:
        return "ok";
    case ERR_NOMEM:
        return "out of memory";
    case ERR_IO:
        return "input/output error";
    case ERR_FORMAT:
        return "malformed data";
    case ERR_INVALID:
        return "invalid argument";
    case ERR_LIMIT:
        return "limit exceeded";
    case ERR_BUSY:
        return "resource busy";
    case ERR_TIMEOUT:
        return "timed out";
    case ERR_CANCELLED:
        return "cancelled";
    case ERR_UNSUPPORTED:
        return "unsupported";
    case ERR_NOT_FOUND:
        return "not found";
    case ERR_EXISTS:
        return "already exists";
    default:
        return "unknown error";
    }
}

int errmsg_set(struct errmsg *e, int code, const char *fmt, ...)
{
    if (!e) return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

void errmsg_clear(struct errmsg *e)
{
    if (e) e->msg[0] = '\0';
}
