/* `llamapi template render`: loads a template, renders it with text/jinja and prints it. */
#include "cli/cmd_template.h"
#include "engine/gguf/gguf.h"
#include "text/chat_template.h"
#include "text/jinja/jinja.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct template_args {
    const char *template_path;
    const char *model_path;
    const char *builtin;
    const char *context_path;
    const char *now;
};

static void usage(void)
{
    fprintf(stderr, "usage: llamapi template render (--template FILE.jinja | -m MODEL.gguf | "
                    "--builtin NAME)\n"
                    "                               --context CONTEXT.json "
                    "[--now YYYY-MM-DDTHH:MM:SS]\n"
                    "built-in templates:");
    for (size_t i = 0; chat_template_builtin_name(i); i++)
        fprintf(stderr, " %s", chat_template_builtin_name(i));
    fprintf(stderr, "\n");
}

static int parse_args(int argc, char **argv, struct template_args *a)
{
    if (argc < 2 || strcmp(argv[1], "render") != 0) return -1;
    for (int i = 2; i < argc; i++) {
        const char **dst = !strcmp(argv[i], "--template") ? &a->template_path
                           : !strcmp(argv[i], "-m") || !strcmp(argv[i], "--model") ? &a->model_path
                           : !strcmp(argv[i], "--builtin")                         ? &a->builtin
                           : !strcmp(argv[i], "--context") ? &a->context_path
                           : !strcmp(argv[i], "--now")     ? &a->now
                                                           : NULL;
        if (!dst || i + 1 >= argc) return -1;
        *dst = argv[++i];
    }
    int sources = !!a->template_path + !!a->model_path + !!a->builtin;
    return sources == 1 && a->context_path ? 0 : -1;
}

static int read_all(FILE *f, struct buf *b)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (buf_append(b, chunk, n) != ERR_OK) return ERR_NOMEM;
    return ferror(f) ? ERR_IO : ERR_OK;
}

static int read_path(const char *path, struct buf *b)
{
    if (!strcmp(path, "-")) return read_all(stdin, b);
    FILE *f = fopen(path, "rb");
    if (!f) return ERR_IO;
    int rc = read_all(f, b);
    fclose(f);
    return rc;
}

/* The token text for the id stored under id_key, copied into out (empty when absent). */
static void model_token(const struct gguf *g, const char *id_key, char *out, size_t cap)
{
    uint32_t id;
    struct str s;
    out[0] = 0;
    if (gguf_get_u32(g, id_key, &id) == ERR_OK &&
        gguf_get_arr_str(g, "tokenizer.ggml.tokens", id, &s) == ERR_OK)
        snprintf(out, cap, "%.*s", (int)s.len, s.ptr);
}

/* Template source and default bos/eos from a GGUF file. */
static int load_model_template(const char *path, struct buf *src, json_t *ctx)
{
    struct gguf *g;
    struct errmsg err;
    int rc = gguf_open(path, &g, &err);
    if (rc != ERR_OK) {
        bool named = strncmp(err.msg, path, strlen(path)) == 0; // I/O errors name the path
        fprintf(stderr, "llamapi: %s%s%s\n", named ? "" : path, named ? "" : ": ", err.msg);
        return rc;
    }
    struct str tmpl;
    if (gguf_get_str(g, "tokenizer.chat_template", &tmpl) == ERR_OK) {
        rc = buf_append(src, tmpl.ptr, tmpl.len);
    } else {
        fprintf(stderr, "llamapi: %s has no tokenizer.chat_template; using chatml\n", path);
        rc = buf_append_cstr(src, chat_template_default());
    }
    char tok[512];
    model_token(g, "tokenizer.ggml.bos_token_id", tok, sizeof tok);
    if (!json_object_get(ctx, "bos_token")) json_object_set_new(ctx, "bos_token", json_string(tok));
    model_token(g, "tokenizer.ggml.eos_token_id", tok, sizeof tok);
    if (!json_object_get(ctx, "eos_token")) json_object_set_new(ctx, "eos_token", json_string(tok));
    gguf_close(g);
    return rc;
}

static int parse_now(const char *s, struct tm *tm)
{
    memset(tm, 0, sizeof *tm);
    if (sscanf(s, "%d-%d-%dT%d:%d:%d", &tm->tm_year, &tm->tm_mon, &tm->tm_mday, &tm->tm_hour,
               &tm->tm_min, &tm->tm_sec) != 6)
        return ERR_INVALID;
    tm->tm_year -= 1900;
    tm->tm_mon -= 1;
    tm->tm_isdst = -1;
    struct tm probe = *tm;
    if (mktime(&probe) == (time_t)-1) // fills tm_wday/tm_yday; the wall time is kept as given
        return ERR_INVALID;
    tm->tm_wday = probe.tm_wday;
    tm->tm_yday = probe.tm_yday;
    return ERR_OK;
}

static int render(const struct template_args *a, json_t *ctx)
{
    struct buf src, out;
    struct errmsg err;
    struct tm now;
    struct jinja_template *t = NULL;
    int rc = ERR_OK;
    buf_init(&src);
    buf_init(&out);
    if (a->template_path) {
        rc = read_path(a->template_path, &src);
        if (rc != ERR_OK) fprintf(stderr, "llamapi: cannot read %s\n", a->template_path);
    } else if (a->model_path) {
        rc = load_model_template(a->model_path, &src, ctx);
    } else if (chat_template_builtin(a->builtin)) {
        rc = buf_append_cstr(&src, chat_template_builtin(a->builtin));
    } else {
        fprintf(stderr, "llamapi: unknown built-in template '%s'\n", a->builtin);
        rc = ERR_NOT_FOUND;
    }
    if (rc == ERR_OK && a->now && parse_now(a->now, &now) != ERR_OK) {
        fprintf(stderr, "llamapi: --now wants YYYY-MM-DDTHH:MM:SS\n");
        rc = ERR_INVALID;
    }
    if (rc == ERR_OK && (rc = jinja_template_new(src.data ? src.data : "", src.len, &t, &err)))
        fprintf(stderr, "llamapi: template: %s\n", err.msg);
    struct jinja_render_opts opts = {.now = a->now ? &now : NULL};
    if (rc == ERR_OK && (rc = jinja_template_render_opts(t, ctx, &opts, &out, &err)))
        fprintf(stderr, "llamapi: render failed (%s): %s\n", err_str(rc), err.msg);
    if (rc == ERR_OK) fwrite(out.data ? out.data : "", 1, out.len, stdout);
    jinja_template_free(t);
    buf_deinit(&src);
    buf_deinit(&out);
    return rc;
}

int cli_cmd_template(int argc, char **argv)
{
    struct template_args a = {0};
    if (parse_args(argc, argv, &a) != 0) {
        usage();
        return 2;
    }
    struct buf text;
    buf_init(&text);
    json_error_t jerr;
    json_t *ctx = NULL;
    if (read_path(a.context_path, &text) != ERR_OK)
        fprintf(stderr, "llamapi: cannot read %s\n", a.context_path);
    else if (!(ctx = json_loadb(text.data ? text.data : "", text.len, 0, &jerr)))
        fprintf(stderr, "llamapi: %s: line %d: %s\n", a.context_path, jerr.line, jerr.text);
    else if (!json_is_object(ctx))
        fprintf(stderr, "llamapi: %s: the context must be a JSON object\n", a.context_path);
    buf_deinit(&text);
    int rc = ctx && json_is_object(ctx) ? render(&a, ctx) : ERR_INVALID;
    json_decref(ctx);
    return rc == ERR_OK ? 0 : 1;
}
