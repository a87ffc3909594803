/* `llamapi pull`, `llamapi ls` and `llamapi rm`: the local models folder fed from a Hugging
 * Face-compatible hub (hub/hub.h), without a server. */
#ifndef CLI_CMD_PULL_H
#define CLI_CMD_PULL_H

/* llamapi pull [--hub-url URL] [--models-dir DIR] [--offline] org/repo[:QUANT] |
 * org/repo/path/file.gguf — downloads the model (its split parts and mmproj) unless present and
 * prints its path on stdout; progress on stderr (a bar on a terminal, else a line a second).
 * argv[0] is the subcommand name. Returns the exit status: 0 ok, 1 failure (message on
 * stderr), 2 usage error. */
int cli_cmd_pull(int argc, char **argv);

/* llamapi ls [--models-dir DIR]: one line per downloaded file (repository, file, size;
 * unfinished downloads marked). Same exit statuses. */
int cli_cmd_ls(int argc, char **argv);

/* llamapi rm [--models-dir DIR] org/repo[:QUANT] | org/repo/path/file.gguf: deletes what the
 * reference names (see hub_remove). Same exit statuses. */
int cli_cmd_rm(int argc, char **argv);

#endif
