/* JSON Schema (a jansson json_t) -> GBNF grammar text for constrained generation, following the
 * shape of llama.cpp's common/json-schema-to-grammar.cpp: bounded whitespace, properties in
 * schema order with the required ones first, no extra properties unless additionalProperties
 * allows them. A keyword that constrains but cannot be expressed is an error, never ignored.
 * Supported: type (and type arrays), properties, required, additionalProperties, items,
 * prefixItems, minItems, maxItems, enum, const, anyOf, oneOf, allOf (objects), $ref to
 * #/$defs/..., #/definitions/... or any local pointer (recursion allowed), minLength,
 * maxLength, pattern (subset: see json_schema_to_gbnf), format (date, time, date-time, uuid),
 * integer minimum/maximum/exclusiveMinimum/exclusiveMaximum, number minimum/maximum when
 * integral and inclusive. */
#ifndef TEXT_JSON_SCHEMA_H
#define TEXT_JSON_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>

#include "text/grammar/gbnf.h"
#include "util/buf.h"
#include "util/err.h"

/* Appends to out the GBNF text of a grammar (root rule `root`) whose language is the JSON
 * texts valid under schema, within these documented limits:
 * - whitespace: none, one space, or one or two newlines plus up to 20 spaces/tabs, allowed
 *   after `{`, `[`, `,`, a key and `:`, and before `}`/`]` (as llama.cpp); never unbounded.
 * - numbers: integral parts of at most 16 digits, fractions of at most 16 (as llama.cpp);
 *   integers take any minimum/maximum (exclusive too); a number takes integral inclusive
 *   minimum/maximum only, and then no exponent.
 * - objects: required properties first, then optional ones, each group in schema order; a
 *   missing additionalProperties means none (as llama.cpp); extra keys cannot repeat a declared
 *   name (except through a \u escape) unless a name needs JSON escaping.
 * - arrays: prefixItems is an exact tuple (as llama.cpp); minItems/maxItems up to 2000.
 * - oneOf is treated as anyOf (exclusivity is not enforced).
 * - pattern: literals, `.`, classes `[...]`/`[^...]` with ranges, \d \w \s \D \W \S and escaped
 *   punctuation, groups `(...)`/`(?:...)`, `|`, quantifiers ? * + {m} {m,} {m,n} (lazy `?`
 *   suffix accepted), `^`/`$` only at the ends; an unanchored end matches any text there.
 * - ignored annotations: title, description, $schema, $id, $anchor, $comment, default,
 *   examples, readOnly, writeOnly, deprecated, contentMediaType, contentEncoding, and keywords
 *   JSON Schema does not define.
 * Errors (err names the keyword and the JSON pointer of its schema, e.g. "JSON schema keyword
 * 'not' at /properties/a is not supported"): ERR_UNSUPPORTED for a constraining keyword or
 * value outside the above (not, if/then/else, patternProperties, uniqueItems other than
 * false, multipleOf, min/maxProperties, fractional or exclusive bounds on numbers, other
 * formats, external $ref, ...); ERR_INVALID for a malformed schema (a keyword of the wrong
 * type, an unresolvable $ref, `false` where a value is required); ERR_LIMIT for nesting deeper
 * than 64 schemas or a grammar above GBNF_SRC_LEN_MAX; ERR_NOMEM. On error out may hold a
 * partial text; the caller clears it. schema is borrowed. */
int json_schema_to_gbnf(const json_t *schema, struct buf *out, struct errmsg *err);

/* json_schema_to_gbnf, polling is_cancelled (NULL: never) every few hundred schemas so a large
 * schema stops soon after its client has gone: then ERR_CANCELLED. The work is linear in the
 * schema's size. */
int json_schema_to_gbnf_cancel(const json_t *schema, bool (*is_cancelled)(void), struct buf *out,
                               struct errmsg *err);

/* Appends the grammar of any JSON object (response_format {"type": "json_object"}): root is an
 * object whose values are any JSON values, with the same whitespace policy. ERR_NOMEM only. */
int json_schema_any_object_gbnf(struct buf *out);

/* Convenience: json_schema_to_gbnf, then gbnf_compile. *out is written only on success; caller
 * frees it with gbnf_free(). Errors as json_schema_to_gbnf, plus ERR_UNSUPPORTED when the
 * schema's language is empty or a pattern nests nullable repetitions (`(a*)*`), and
 * gbnf_compile's ERR_LIMIT. */
int json_schema_compile(const json_t *schema, struct gbnf **out, struct errmsg *err);

#endif
