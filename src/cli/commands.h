/* The CLI's server-facing subcommands. Each takes the arguments after the subcommand name and
 * returns the process exit status (0 ok, 1 request failed, 2 usage error). */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

#include "cli/client.h"

#include <jansson.h>
#include <stdio.h>

#include <stdbool.h>

struct cli_opts {
    struct client client;
    bool is_json; // print raw responses
};

int cli_cmd_platforms(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_ps(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_load(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_unload(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_resize(const struct cli_opts *o, int argc, char **argv);

/* A path that exists locally, made absolute (the server may run elsewhere in the tree);
 * anything else as given, for the server to resolve under its --models-dir. */
void cli_model_path_arg(const char *arg, char *out, size_t cap);

/* The id a model gets by default: its file name without ".gguf". */
void cli_default_id(const char *path, char *out, size_t cap);

/* POST /v1/models/load with body; prints the server's message to say, or the error. The exit
 * status. */
int cli_post_load(const struct cli_opts *o, const json_t *body, FILE *say);

/* The status of GET /v1/models/ID (200 when loaded, 404 when not), or -1 with the reason
 * printed when the server cannot be reached. */
int cli_model_status(const struct cli_opts *o, const char *id);

#endif
