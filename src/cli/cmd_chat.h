/* `llamapi chat MODEL`: streamed chat with a model the server has loaded. */
#ifndef CLI_CMD_CHAT_H
#define CLI_CMD_CHAT_H

#include "cli/commands.h"

/* Takes the arguments after "chat". One turn with -p PROMPT, else one turn per stdin line
 * (EOF or /bye ends, /clear forgets the history). The answer streams to stdout, reasoning to
 * stderr. Returns 0, 1 when a request failed (with -p) or the server is unreachable, 2 on a
 * usage error. */
int cli_cmd_chat(const struct cli_opts *o, int argc, char **argv);

#endif
