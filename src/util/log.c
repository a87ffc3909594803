/* stderr logger: formats into a stack buffer and emits it with a single write(2). */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static enum log_level global_level = LOG_LEVEL_INFO;

void log_set_level(enum log_level level)
{
    global_level = level;
}

enum log_level log_get_level(void)
{
    return global_level;
}

__attribute__((format(printf, 2, 0))) static void emit(const char *prefix, const char *fmt,
                                                       va_list ap)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "%s", prefix);
    if (n < 0) return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m < 0) return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; // nothing useful to do if stderr is gone
}

void log_write(enum log_level level, const char *fmt, ...)
{
    static const char *const prefixes[] = {"error: ", "warning: ", "info: ", "debug: "};
    if (global_level == LOG_LEVEL_OFF || level > global_level || level < 0) return;
    va_list ap;
    va_start(ap, fmt);
    emit(prefixes[level], fmt, ap);
    va_end(ap);
}

void log_line(const char *fmt, ...)
{
    if (global_level == LOG_LEVEL_OFF) return;
    va_list ap;
    va_start(ap, fmt);
    emit("", fmt, ap);
    va_end(ap);
}
