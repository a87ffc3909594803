/* The tokenize/detokenize subcommands: flags parsing, stdin reading and printing around
 * platform/cpu/vocab_gguf.h and text/tokenizer/tokenizer.h. */
#include "cli/cmd_tokenize.h"

#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "util/buf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tokenize_args {
    const char *model;
    const char *prompt; // NULL: read stdin
    bool is_pieces;
    bool parse_special;
    bool add_special;
};

static int usage_tokenize(void)
{
    fprintf(stderr, "usage: llamapi tokenize -m FILE.gguf [--ids|--pieces] [--no-special] "
                    "[--add-bos] [-p TEXT]\n");
    return 2;
}

static int usage_detokenize(void)
{
    fprintf(stderr, "usage: llamapi detokenize -m FILE.gguf [--special] ID...\n");
    return 2;
}

static bool parse_tokenize_args(int argc, char **argv, struct tokenize_args *a)
{
    *a = (struct tokenize_args){NULL, NULL, false, true, false};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if ((strcmp(s, "-m") == 0 || strcmp(s, "--model") == 0) && i + 1 < argc)
            a->model = argv[++i];
        else if ((strcmp(s, "-p") == 0 || strcmp(s, "--prompt") == 0) && i + 1 < argc)
            a->prompt = argv[++i];
        else if (strcmp(s, "--ids") == 0)
            a->is_pieces = false;
        else if (strcmp(s, "--pieces") == 0)
            a->is_pieces = true;
        else if (strcmp(s, "--no-special") == 0)
            a->parse_special = false;
        else if (strcmp(s, "--add-bos") == 0)
            a->add_special = true;
        else
            return false;
    }
    return a->model != NULL;
}

static bool read_stdin(struct buf *b)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (buf_append(b, chunk, n) != ERR_OK) return false;
    }
    return !ferror(stdin);
}

static void print_escaped(struct str p)
{
    for (size_t i = 0; i < p.len; i++) {
        unsigned char c = (unsigned char)p.ptr[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\')
            fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void print_ids(const struct tokenizer *t, const struct tok_ids *ids, bool is_pieces)
{
    for (size_t i = 0; i < ids->n_ids; i++) {
        if (is_pieces) {
            printf("%d\t", (int)ids->ids[i]);
            print_escaped(tok_piece(t, ids->ids[i]));
            putchar('\n');
        } else {
            printf(i ? " %d" : "%d", (int)ids->ids[i]);
        }
    }
    if (!is_pieces) putchar('\n');
}

static struct tokenizer *open_tokenizer(const char *path)
{
    struct tokenizer *t = NULL;
    struct errmsg err = {{0}};
    int rc = vocab_tokenizer_from_file(path, &t, &err);
    if (rc != ERR_OK) {
        fprintf(stderr, "llamapi: %s: %s\n", path, err.msg[0] ? err.msg : err_str(rc));
        return NULL;
    }
    return t;
}

int cli_cmd_tokenize(int argc, char **argv)
{
    struct tokenize_args a;
    if (!parse_tokenize_args(argc, argv, &a)) return usage_tokenize();
    struct buf text;
    buf_init(&text);
    if (!a.prompt && !read_stdin(&text)) {
        fprintf(stderr, "llamapi: reading stdin: %s\n", strerror(errno));
        buf_deinit(&text);
        return 1;
    }
    struct str s = a.prompt ? str_from_cstr(a.prompt) : (struct str){text.data, text.len};
    struct tokenizer *t = open_tokenizer(a.model);
    int status = t ? 0 : 1;
    struct tok_ids ids;
    tok_ids_init(&ids);
    if (t) {
        int rc = tok_encode(t, s, a.add_special, a.parse_special, &ids);
        if (rc == ERR_OK) {
            print_ids(t, &ids, a.is_pieces);
        } else {
            fprintf(stderr, "llamapi: tokenize: %s\n", err_str(rc));
            status = 1;
        }
    }
    tok_ids_deinit(&ids);
    tok_free(t);
    buf_deinit(&text);
    return status;
}

/* Parses the id arguments; false (with a message) on a malformed one. */
static bool parse_id_args(int argc, char **argv, int first, struct tok_ids *ids)
{
    for (int i = first; i < argc; i++) {
        char *end;
        errno = 0;
        long v = strtol(argv[i], &end, 10);
        if (errno || end == argv[i] || *end || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "llamapi: detokenize: bad token id '%s'\n", argv[i]);
            return false;
        }
        if (tok_ids_push(ids, (tok_id)v) != ERR_OK) return false;
    }
    return true;
}

int cli_cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL;
    bool render_special = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if ((strcmp(argv[i], "-m") == 0 || strcmp(argv[i], "--model") == 0) && i + 1 < argc)
            model = argv[++i];
        else if (strcmp(argv[i], "--special") == 0)
            render_special = true;
        else
            return usage_detokenize();
    }
    if (!model) return usage_detokenize();
    struct tok_ids ids;
    tok_ids_init(&ids);
    if (!parse_id_args(argc, argv, i, &ids)) {
        tok_ids_deinit(&ids);
        return 2;
    }
    struct tokenizer *t = open_tokenizer(model);
    int status = t ? 0 : 1;
    struct buf out;
    buf_init(&out);
    if (t) {
        int rc = tok_decode(t, ids.ids, ids.n_ids, render_special, &out);
        if (rc == ERR_OK) {
            fwrite(out.data ? out.data : "", 1, out.len, stdout);
            putchar('\n');
        } else {
            fprintf(stderr, "llamapi: detokenize: %s (ids must be < %d)\n", err_str(rc),
                    (int)tok_n_tokens(t));
            status = 1;
        }
    }
    buf_deinit(&out);
    tok_ids_deinit(&ids);
    tok_free(t);
    return status;
}
