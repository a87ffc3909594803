/* Leveled logging to stderr. The level is a process global set before threads start; lines
 * are written with one write so concurrent lines do not interleave. */
#ifndef UTIL_LOG_H
#define UTIL_LOG_H

enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN = 1,
    LOG_LEVEL_INFO = 2,
    LOG_LEVEL_DEBUG = 3,
    LOG_LEVEL_OFF = -1,
};

/* Sets / reads the global level (default INFO). Not thread-safe: call before threads start. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Writes "<level>: <message>\n" when level <= the global level. Cannot fail visibly. */
void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes a raw line (a newline is appended) regardless of level unless logging is off; used by
 * the access log, which has its own format. */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...)  log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
