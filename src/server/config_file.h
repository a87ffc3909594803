/* Reader for llamapi's settings files: `key = value` lines, `#` or `;` comments, blank lines
 * and, where the caller allows them, `[section]` headers (the --models-preset INI form). It
 * knows no keys: each pair goes to the caller's callback, and every error it or the callback
 * reports is prefixed with "FILE:LINE: ". */
#ifndef SERVER_CONFIG_FILE_H
#define SERVER_CONFIG_FILE_H

#include "util/err.h"

#include <stdbool.h>

#define CONFIG_FILE_LINE_MAX 8192 // bytes of one line, newline included

/* Called once per `key = value` pair, in file order. section is "" before any header (and
 * always when sections are refused); key and value are trimmed of blanks, value may be "",
 * and a value wrapped in double quotes loses them. Returns ERR_OK to go on, or an error code
 * with err filled (the reader prefixes the file and line). */
typedef int (*config_file_pair_fn)(void *ctx, const char *section, const char *key,
                                   const char *value, struct errmsg *err);

/* Reads path, calling fn for every pair. allow_sections: whether `[name]` lines are allowed.
 * Returns ERR_OK; ERR_IO when the file cannot be read ("FILE: reason"); ERR_FORMAT for a line
 * without `=`, an empty key, a bad section header, a line over CONFIG_FILE_LINE_MAX or a NUL
 * byte ("FILE:LINE: reason"); or the callback's code with its message after "FILE:LINE: ".
 * Stops at the first error. Thread-safe (no shared state). */
int config_file_read(const char *path, bool allow_sections, config_file_pair_fn fn, void *ctx,
                     struct errmsg *err);

#endif
