/* Settings file reader (see config_file.h): line framing, comments, sections, trimming; what
 * a key means is the caller's. */
#include "server/config_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* Trims blanks at both ends of s in place; returns the first kept byte. */
static char *trim(char *s)
{
    while (is_blank(*s))
        s++;
    size_t n = strlen(s);
    while (n && is_blank(s[n - 1]))
        s[--n] = '\0';
    return s;
}

struct reader {
    const char *path;
    int line_no;
    bool allow_sections;
    char section[256];
    config_file_pair_fn fn;
    void *ctx;
};

static int fail(const struct reader *r, struct errmsg *err, int code, const char *what)
{
    return errmsg_set(err, code, "%s:%d: %s", r->path, r->line_no, what);
}

static int section_line(struct reader *r, char *s, struct errmsg *err)
{
    size_t n = strlen(s);
    if (!r->allow_sections) return fail(r, err, ERR_FORMAT, "sections are not allowed here");
    if (s[n - 1] != ']') return fail(r, err, ERR_FORMAT, "a section header must end with ']'");
    s[n - 1] = '\0';
    char *name = trim(s + 1);
    if (!*name) return fail(r, err, ERR_FORMAT, "empty section name");
    if (strlen(name) >= sizeof r->section) return fail(r, err, ERR_FORMAT, "section name too long");
    snprintf(r->section, sizeof r->section, "%s", name);
    return ERR_OK;
}

static int pair_line(struct reader *r, char *s, struct errmsg *err)
{
    char *eq = strchr(s, '=');
    if (!eq) return fail(r, err, ERR_FORMAT, "expected 'key = value' (no '=')");
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    if (!*key) return fail(r, err, ERR_FORMAT, "empty key before '='");
    size_t n = strlen(value);
    if (n >= 2 && value[0] == '"' && value[n - 1] == '"') {
        value[n - 1] = '\0';
        value++;
    }
    struct errmsg inner;
    errmsg_clear(&inner);
    int rc = r->fn(r->ctx, r->section, key, value, &inner);
    if (rc != ERR_OK) return fail(r, err, rc, inner.msg[0] ? inner.msg : err_str(rc));
    return ERR_OK;
}

static int one_line(struct reader *r, char *line, size_t len, struct errmsg *err)
{
    if (memchr(line, '\0', len)) return fail(r, err, ERR_FORMAT, "NUL byte in the line");
    char *s = trim(line);
    if (!*s || *s == '#' || *s == ';') return ERR_OK;
    return *s == '[' ? section_line(r, s, err) : pair_line(r, s, err);
}

int config_file_read(const char *path, bool allow_sections, config_file_pair_fn fn, void *ctx,
                     struct errmsg *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return errmsg_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    struct reader r = {.path = path, .allow_sections = allow_sections, .fn = fn, .ctx = ctx};
    char line[CONFIG_FILE_LINE_MAX];
    int rc = ERR_OK;
    while (rc == ERR_OK) {
        // getline would take any length; a fixed buffer bounds what a file can make us hold.
        size_t len = 0;
        int ch = 0;
        while (len + 1 < sizeof line && (ch = fgetc(f)) != EOF && ch != '\n')
            line[len++] = (char)ch;
        if (ch == EOF && len == 0) break;
        r.line_no++;
        line[len] = '\0';
        if (len + 1 >= sizeof line) {
            rc = fail(&r, err, ERR_FORMAT, "line too long");
            break;
        }
        rc = one_line(&r, line, len, err);
        if (ch == EOF) break;
    }
    if (rc == ERR_OK && ferror(f)) rc = errmsg_set(err, ERR_IO, "%s: read error", path);
    fclose(f);
    return rc;
}
