/* GBNF grammars as llama.cpp defines them (grammars/README.md): parsed once per request into a
 * compact, immutable form that text/grammar/grammar.c matches bytes against. This module only
 * parses and checks; it does not match. Token references (`<[id]>`, `<text>`) are not supported. */
#ifndef TEXT_GBNF_H
#define TEXT_GBNF_H

#include <stddef.h>

#include "util/err.h"

struct gbnf;

/* Limits that keep a hostile grammar from exhausting memory or time. */
#define GBNF_SRC_LEN_MAX    (4u << 20) // bytes of grammar text
#define GBNF_N_ELEMS_MAX    (1u << 20) // compiled elements, after repetitions are expanded
#define GBNF_N_RULES_MAX    (1u << 16) // named plus generated rules
#define GBNF_REPEAT_MAX     2000       // m and n in {m,n}, as llama.cpp
#define GBNF_NEST_DEPTH_MAX 128        // nested parentheses

/* Parses and compiles the grammar text src[0..len) (not NUL-terminated; a NUL byte is an
 * error). On success *out is a compiled grammar; caller frees with gbnf_free(). It is
 * immutable, so any number of threads may share it.
 * Errors: ERR_FORMAT for a syntax error ("line L, column C: expected ..."), an undefined rule,
 * a rule defined twice, a missing `root`, left recursion, or a root that can match nothing;
 * ERR_LIMIT when a limit above is exceeded; ERR_UNSUPPORTED for token references; ERR_NOMEM.
 * err (may be NULL) gets the message; *out is written only on success. */
int gbnf_compile(const char *src, size_t len, struct gbnf **out, struct errmsg *err);

/* Frees a compiled grammar. gbnf_free(NULL) is a no-op. */
void gbnf_free(struct gbnf *g);

/* Number of rules (named and generated). Cannot fail. */
size_t gbnf_n_rules(const struct gbnf *g);

#endif
