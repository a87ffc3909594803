/* Opening files whose path comes from a request or a model directory. A plain open(2) of a
 * FIFO blocks until a writer appears (forever), and opening a device may have side effects;
 * these open without blocking, refuse anything that is not a regular file with a message
 * saying what it is, and only then hand the descriptor over in blocking mode. */
#ifndef UTIL_FILE_H
#define UTIL_FILE_H

#include "util/err.h"

#include <stdio.h>

/* Opens path read-only (close-on-exec, no controlling terminal). ERR_OK and *fd (caller
 * closes), ERR_NOT_FOUND (no such file), ERR_INVALID (a directory, FIFO, socket or device:
 * err names the kind), ERR_IO (any other failure). Never blocks on the path's kind. */
int file_open_regular(const char *path, int *fd, struct errmsg *err);

/* The same as a stdio stream ("rb"); caller closes with fclose. NULL with err filled. */
FILE *file_fopen_regular(const char *path, struct errmsg *err);

/* What a st_mode is, for messages ("a directory", "a FIFO", "a device"). Static string. */
const char *file_kind_name(unsigned mode);

#endif
