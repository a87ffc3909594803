/* The CLI's server-facing subcommands. Each takes the arguments after the subcommand name and
 * returns the process exit status (0 ok, 1 request failed, 2 usage error). */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

#include "cli/client.h"

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

#endif
