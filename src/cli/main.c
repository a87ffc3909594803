/* llamapi: the command-line client. Server-facing subcommands talk HTTP to llamapi-server;
 * `serve` runs the server in the foreground; local tools (tokenize, template, …) read files. */
#include "cli/cmd_chat.h"
#include "cli/cmd_pull.h"
#include "cli/cmd_template.h"
#include "cli/cmd_tokenize.h"
#include "cli/commands.h"
#include "server/version.h"

#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: llamapi [--host H] [--port P] [--api-key K] [--json] COMMAND [ARGS]\n\n"
               "commands:\n"
               "  serve [FLAGS]          run llamapi-server in the foreground (same flags)\n"
               "  platforms              list platforms and detected chips\n"
               "  ps                     list loaded models\n"
               "  load PATH|NAME [--id ID] [--instances N] [--queue-size N] [--embedding]\n"
               "       [--pooling mean|cls|last]\n"
               "  unload ID\n"
               "  resize ID INSTANCES\n"
               "  chat MODEL [-p PROMPT] [--system TEXT] [--max-tokens N] [--temperature T]\n"
               "       [--seed N]   talk to a model: one turn with -p, else a line per turn\n"
               "  run PATH|NAME|ID [--id ID] [chat options]   load the model if needed, then chat\n"
               "  tokenize -m FILE.gguf [--ids|--pieces] [--no-special] [--add-bos] [-p TEXT]\n"
               "  detokenize -m FILE.gguf IDS...\n"
               "  template render (--template FILE.jinja | -m FILE.gguf) --context CTX.json\n"
               "  pull [--hub-url URL] [--models-dir DIR] [--offline] org/repo[:QUANT]\n"
               "       | org/repo/path/file.gguf   download a model from the hub\n"
               "  ls [--models-dir DIR]           list downloaded models\n"
               "  rm [--models-dir DIR] org/repo[:QUANT] | org/repo/path/file.gguf\n"
               "  version\n\n"
               "The server address comes from --host/--port or LLAMAPI_HOST/LLAMAPI_PORT\n"
               "(default 127.0.0.1:9265); the key from --api-key or LLAMAPI_API_KEY.\n"
               "pull, ls and rm: --models-dir or LLAMAPI_MODELS_DIR (default\n"
               "~/.cache/llamapi/models, /var/lib/llamapi/models for root); --hub-url or\n"
               "LLAMAPI_HUB_URL, HF_ENDPOINT (default https://huggingface.co); HF_TOKEN.\n");
}

/* Replaces this process with the llamapi-server binary next to this one. */
static int run_serve(char *argv0, int argc, char **argv)
{
    char self[PATH_MAX], server[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "llamapi: cannot locate myself (%s)\n", argv0);
        return 1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(server, sizeof server, "%s/llamapi-server", self);
    char *args[256];
    int k = 0;
    args[k++] = server;
    for (int i = 0; i < argc && k < 255; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    execv(server, args);
    fprintf(stderr, "llamapi: cannot run %s\n", server);
    return 1;
}

/* Local subcommands: they read files themselves and take argv with their own name first. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} local_commands[] = {
    {"tokenize", cli_cmd_tokenize},
    {"detokenize", cli_cmd_detokenize},
    {"template", cli_cmd_template},
    {"pull", cli_cmd_pull},
    {"ls", cli_cmd_ls},
    {"rm", cli_cmd_rm},
};

struct command {
    const char *name;
    int (*run)(const struct cli_opts *o, int argc, char **argv);
};

static const struct command commands[] = {
    {"platforms", cli_cmd_platforms},
    {"ps", cli_cmd_ps},
    {"load", cli_cmd_load},
    {"unload", cli_cmd_unload},
    {"resize", cli_cmd_resize},
    {"chat", cli_cmd_chat},
    {"run", cli_cmd_run},
};

int main(int argc, char **argv)
{
    const char *host = NULL, *port = NULL, *key = NULL;
    struct cli_opts o = {0};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.is_json = true;
        else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc)
            host = argv[++i];
        else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
            port = argv[++i];
        else if (strcmp(argv[i], "--api-key") == 0 && i + 1 < argc)
            key = argv[++i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "llamapi: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[i];
    if (strcmp(cmd, "serve") == 0) return run_serve(argv[0], argc - i - 1, argv + i + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("llamapi %s\n", LLAMAPI_VERSION);
        return 0;
    }
    for (size_t k = 0; k < sizeof local_commands / sizeof local_commands[0]; k++)
        if (strcmp(cmd, local_commands[k].name) == 0)
            return local_commands[k].run(argc - i, argv + i);
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(cmd, commands[k].name) != 0) continue;
        client_init(&o.client, host, port, key);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int rc = commands[k].run(&o, argc - i - 1, argv + i + 1);
        curl_global_cleanup();
        return rc;
    }
    fprintf(stderr, "llamapi: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
