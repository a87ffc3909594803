/* `llamapi tokenize` and `llamapi detokenize`: run a model's tokenizer locally on a GGUF file
 * (a vocab-only GGUF is enough), without a server. */
#ifndef CLI_CMD_TOKENIZE_H
#define CLI_CMD_TOKENIZE_H

/* llamapi tokenize -m FILE.gguf [--ids|--pieces] [--no-special] [--add-bos] [-p TEXT]
 * Tokenizes TEXT (or all of stdin) and prints the ids space-separated on one line, or with
 * --pieces one "id<TAB>piece" line per token (control bytes in pieces escaped as \n, \t,
 * \xNN). Special tokens written in the text are parsed unless --no-special; --add-bos adds
 * the model's bos/eos (cls/sep) as its vocab says. argv[0] is the subcommand name. Returns
 * the process exit status: 0 ok, 1 failure (message on stderr), 2 usage error. */
int cli_cmd_tokenize(int argc, char **argv);

/* llamapi detokenize -m FILE.gguf [--special] ID...
 * Prints the text of the ids followed by a newline; --special renders control tokens. Same
 * exit statuses. */
int cli_cmd_detokenize(int argc, char **argv);

#endif
