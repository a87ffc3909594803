/* llamapi chat: a conversation with a loaded model through the server's streamed chat
 * completions. One turn with -p; otherwise a prompt loop on stdin that keeps the history, so
 * a model can be tried from a terminal (or a script's pipe) without writing a client. */
#define _POSIX_C_SOURCE 200809L // getline()
#include "cli/cmd_chat.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct chat_opts {
    const char *model;
    const char *prompt; // one turn, then exit; NULL: read turns from stdin
    const char *system;
    json_t *params; // sampling fields copied into every request
};

/* One streamed answer as it arrives. */
struct turn {
    struct buf pending;    // the part of the stream after the last complete event
    struct buf answer;     // the assistant's content
    struct buf error_body; // the whole body of a non-200 answer
    char error[512];       // an `event: error` message
    bool is_done;          // data: [DONE] seen
};

static void print_content(struct turn *t, const char *text, FILE *to, bool is_answer)
{
    fputs(text, to);
    fflush(to);
    if (is_answer) buf_append_cstr(&t->answer, text);
}

/* One SSE event: `data:` payload lines, an optional `event:` name; comments are skipped. */
static void on_event(struct turn *t, char *event)
{
    const char *name = "", *data = NULL;
    for (char *line = strtok(event, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "event:", 6) == 0)
            name = line + 6 + (line[6] == ' ');
        else if (strncmp(line, "data:", 5) == 0)
            data = line + 5 + (line[5] == ' ');
    }
    if (!data) return;
    if (strcmp(data, "[DONE]") == 0) {
        t->is_done = true;
        return;
    }
    json_t *j = json_loads(data, 0, NULL);
    if (strcmp(name, "error") == 0) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        snprintf(t->error, sizeof t->error, "%s", msg ? msg : data);
    } else {
        json_t *delta = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
        const char *reasoning = json_string_value(json_object_get(delta, "reasoning_content"));
        const char *content = json_string_value(json_object_get(delta, "content"));
        // Reasoning goes to stderr so that stdout carries the answer alone.
        if (reasoning) print_content(t, reasoning, stderr, false);
        if (content) print_content(t, content, stdout, true);
    }
    json_decref(j);
}

static bool on_data(void *ctx, int status, const char *data, size_t n)
{
    struct turn *t = ctx;
    if (status != 200) return buf_append(&t->error_body, data, n) == ERR_OK;
    if (buf_append(&t->pending, data, n) != ERR_OK) return false;
    char *start = t->pending.data, *end;
    while ((end = strstr(start, "\n\n")) != NULL) {
        *end = '\0';
        on_event(t, start);
        start = end + 2;
    }
    size_t rest = t->pending.len - (size_t)(start - t->pending.data);
    memmove(t->pending.data, start, rest + 1);
    t->pending.len = rest;
    return true;
}

static void turn_deinit(struct turn *t)
{
    buf_deinit(&t->pending);
    buf_deinit(&t->answer);
    buf_deinit(&t->error_body);
}

/* Sends the conversation and prints the answer as it streams. On success the answer is
 * appended to messages. Returns 0, 1 when the server refused or failed, 3 when it cannot be
 * reached at all. */
static int run_turn(const struct cli_opts *o, const struct chat_opts *c, json_t *messages)
{
    json_t *body = json_deep_copy(c->params);
    json_object_set_new(body, "model", json_string(c->model));
    json_object_set(body, "messages", messages);
    json_object_set_new(body, "stream", json_true());
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct turn t = {0};
    struct errmsg err;
    errmsg_clear(&err);
    int status = 0;
    int rc = text ? client_stream(&o->client, "POST", "/v1/chat/completions", text, on_data, &t,
                                  &status, &err)
                  : ERR_NOMEM;
    free(text);
    int exit_status = 0;
    if (rc != ERR_OK) {
        fprintf(stderr, "llamapi: %s\n", err.msg[0] ? err.msg : err_str(rc));
        exit_status = 3;
    } else if (status != 200) {
        json_t *j = t.error_body.data ? json_loads(t.error_body.data, 0, NULL) : NULL;
        const char *msg =
            json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        fprintf(stderr, "llamapi: server answered %d: %s\n", status,
                msg ? msg : (t.error_body.data ? t.error_body.data : ""));
        json_decref(j);
        exit_status = 1;
    } else {
        if (t.answer.len == 0 || t.answer.data[t.answer.len - 1] != '\n') putchar('\n');
        if (t.error[0] || !t.is_done) {
            fprintf(stderr, "llamapi: the answer was cut: %s\n",
                    t.error[0] ? t.error : "the stream ended early");
            exit_status = 1;
        } else {
            json_array_append_new(messages,
                                  json_pack("{s:s, s:s%}", "role", "assistant", "content",
                                            t.answer.data ? t.answer.data : "", t.answer.len));
        }
    }
    turn_deinit(&t);
    return exit_status;
}

static json_t *new_history(const struct chat_opts *c)
{
    json_t *m = json_array();
    if (c->system)
        json_array_append_new(m, json_pack("{s:s, s:s}", "role", "system", "content", c->system));
    return m;
}

/* Adds the user's text, runs the turn, and takes the text back out when it failed, so the
 * history only holds answered turns. */
static int ask(const struct cli_opts *o, const struct chat_opts *c, json_t *messages,
               const char *text)
{
    json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "user", "content", text));
    int rc = run_turn(o, c, messages);
    if (rc != 0) json_array_remove(messages, json_array_size(messages) - 1);
    return rc;
}

/* Turns from stdin, one line each, until EOF or /bye; /clear forgets the conversation. */
static int prompt_loop(const struct cli_opts *o, const struct chat_opts *c, json_t **messages)
{
    const bool is_tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (is_tty) fputs(">>> ", stderr);
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0) continue;
        if (strcmp(line, "/bye") == 0) break;
        if (strcmp(line, "/clear") == 0) {
            json_decref(*messages);
            *messages = new_history(c);
            continue;
        }
        rc = ask(o, c, *messages, line);
        if (rc == 3) break; // no server: nothing more will work
    }
    free(line);
    return rc == 3 ? 1 : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: llamapi chat MODEL [-p PROMPT] [--system TEXT] [--max-tokens N] "
                    "[--temperature T] [--seed N]\n");
    return 2;
}

/* A numeric option's value as JSON, or NULL when it is not a number. */
static json_t *number_arg(const char *v, bool is_integer)
{
    char *end;
    if (is_integer) {
        long long x = strtoll(v, &end, 10);
        return *v && !*end ? json_integer(x) : NULL;
    }
    double x = strtod(v, &end);
    return *v && !*end ? json_real(x) : NULL;
}

static bool parse_args(int argc, char **argv, struct chat_opts *c)
{
    static const struct {
        const char *flag, *field;
        bool is_integer;
    } numbers[] = {
        {"--max-tokens", "max_tokens", true},
        {"--temperature", "temperature", false},
        {"--seed", "seed", true},
    };
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (c->model) return false;
            c->model = a;
            continue;
        }
        if (i + 1 >= argc) return false;
        const char *v = argv[++i];
        if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            c->prompt = v;
            continue;
        }
        if (strcmp(a, "--system") == 0) {
            c->system = v;
            continue;
        }
        size_t k = 0;
        while (k < sizeof numbers / sizeof numbers[0] && strcmp(a, numbers[k].flag) != 0)
            k++;
        if (k == sizeof numbers / sizeof numbers[0]) return false;
        json_t *x = number_arg(v, numbers[k].is_integer);
        if (!x) return false;
        json_object_set_new(c->params, numbers[k].field, x);
    }
    return c->model != NULL;
}

int cli_cmd_chat(const struct cli_opts *o, int argc, char **argv)
{
    struct chat_opts c = {.params = json_object()};
    if (!c.params) return 1;
    if (!parse_args(argc, argv, &c)) {
        json_decref(c.params);
        return usage();
    }
    json_t *messages = new_history(&c);
    int rc = c.prompt ? (ask(o, &c, messages, c.prompt) != 0) : prompt_loop(o, &c, &messages);
    json_decref(messages);
    json_decref(c.params);
    return rc;
}

/* The model `run` talks to: --id, else MODEL itself when that is a loaded model's id, else
 * the id MODEL's file name gives; loaded from MODEL first when the server does not have it. */
static int ensure_loaded(const struct cli_opts *o, const char *model, const char *id, char *out,
                         size_t cap)
{
    int status = id ? 0 : cli_model_status(o, model);
    if (status < 0) return 1;
    if (status == 200) {
        snprintf(out, cap, "%s", model);
        return 0;
    }
    if (id)
        snprintf(out, cap, "%s", id);
    else
        cli_default_id(model, out, cap);
    status = cli_model_status(o, out);
    if (status < 0) return 1;
    if (status == 200) return 0;
    char path[4096];
    cli_model_path_arg(model, path, sizeof path);
    json_t *body = json_pack("{s:s, s:s}", "model_id", out, "model_path", path);
    int rc = body ? cli_post_load(o, body, stderr) : 1; // stdout carries only the answers
    json_decref(body);
    return rc;
}

int cli_cmd_run(const struct cli_opts *o, int argc, char **argv)
{
    // chat's arguments with MODEL replaced by the id, and --id taken out
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return 1;
    const char *model = NULL, *id = NULL;
    int n = 0, model_at = -1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
            id = argv[++i];
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
            model_at = n;
            args[n++] = argv[i];
        } else {
            args[n++] = argv[i];
            if (argv[i][0] == '-' && i + 1 < argc) args[n++] = argv[++i]; // the option's value
        }
    }
    int rc = 2;
    char resolved[512];
    if (!model)
        fprintf(stderr, "usage: llamapi run PATH|NAME|ID [--id ID] [chat options]\n");
    else if ((rc = ensure_loaded(o, model, id, resolved, sizeof resolved)) == 0) {
        args[model_at] = resolved;
        rc = cli_cmd_chat(o, n, args);
    }
    free(args);
    return rc;
}
