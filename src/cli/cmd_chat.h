/* `llamapi chat MODEL`: streamed chat with a model the server has loaded. */
#ifndef CLI_CMD_CHAT_H
#define CLI_CMD_CHAT_H

#include "cli/commands.h"

/* Takes the arguments after "chat". One turn with -p PROMPT, else one turn per stdin line
 * (EOF or /bye ends, /clear forgets the history). The answer streams to stdout, reasoning to
 * stderr. Returns 0, 1 when a request failed (with -p) or the server is unreachable, 2 on a
 * usage error. */
int cli_cmd_chat(const struct cli_opts *o, int argc, char **argv);

/* `llamapi run PATH|NAME|ID [--id ID] [chat options]`: chat with the model, loading it first
 * (one instance, id from --id or the file name) when the server does not have it, like
 * `ollama run`. Returns as cli_cmd_chat, or 1 when the load failed. */
int cli_cmd_run(const struct cli_opts *o, int argc, char **argv);

#endif
