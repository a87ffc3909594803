/* A regular-expression subset (JSON Schema `pattern`) -> a GBNF expression over the JSON text
 * of a string: literals, `.`, classes `[...]`/`[^...]` with ranges, \d \w \s \D \W \S and
 * escaped punctuation, groups `(...)`/`(?:...)`, `|`, quantifiers ? * + {m} {m,} {m,n} (a lazy
 * `?` suffix is accepted: same language), `^`/`$` only at the ends. Characters JSON escapes
 * (`"`, `\`, controls) are matched in their escaped form. Not a regex engine. */
#ifndef TEXT_JSON_REGEX_H
#define TEXT_JSON_REGEX_H

#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"

/* Appends to out a GBNF expression matching `"` + (the JSON text of a string whose value
 * matches pattern[0..len)) + `"`. An unanchored start or end matches any characters there,
 * written with the rule any_char_rule (which must match one JSON string character). where
 * names the schema location in messages. Errors: ERR_UNSUPPORTED (a construct outside the
 * subset; err says which and at what offset), ERR_NOMEM. out may hold a partial expression on
 * error. */
int json_regex_to_gbnf(const char *pattern, size_t len, const char *any_char_rule,
                       const char *where, struct buf *out, struct errmsg *err);

#endif
