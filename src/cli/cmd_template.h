/* `llamapi template render`: renders a chat template (a file, a model's GGUF metadata or a
 * built-in) over a JSON context and prints the prompt. Runs locally; no server involved. */
#ifndef CLI_CMD_TEMPLATE_H
#define CLI_CMD_TEMPLATE_H

/* argv[0] is "template". Usage:
 *   template render (--template FILE.jinja | -m MODEL.gguf | --builtin NAME)
 *                   --context CONTEXT.json [--now YYYY-MM-DDTHH:MM:SS]
 * CONTEXT.json is the object of template variables (messages, tools, add_generation_prompt,
 * bos_token, ...; "-" reads stdin). With -m, bos_token/eos_token default to the model's.
 * Prints the render to stdout. Returns 0 on success, 1 on a render or input error (message on
 * stderr), 2 on bad usage. */
int cli_cmd_template(int argc, char **argv);

#endif
