/* Structured output: the request fields that constrain generation, turned into one GBNF
 * grammar (validated by compiling it here, so mistakes are 400s naming the field before the
 * request is queued). OpenAI response_format (json_object, json_schema in the nested and the
 * flat shape), llama.cpp's `grammar` and `json_schema`, and forced tool calls. */
#ifndef API_STRUCTURED_H
#define API_STRUCTURED_H

#include "api/validate.h"
#include "text/toolcall/toolcall.h"
#include "util/buf.h"

/* Appends the grammar the body asks for to out (nothing when unconstrained). 400s:
 * invalid_value (response_format.type), invalid_type, invalid_grammar (GBNF syntax, with line
 * and column), unsupported_schema (a keyword we cannot express, named with its path),
 * invalid_schema. True when valid. */
bool structured_from_body(const json_t *body, struct buf *out, struct api_fail *f);

/* Grammar forcing a tool call in the model family's format: tool_choice "required" (any of
 * tools) or {"type":"function","function":{"name":…}} (that one), arguments matching the
 * tool's parameters schema; with parallel_tool_calls one or more calls, else exactly one.
 * Appends nothing when tool_choice does not force a call. 400 on an unknown function name or
 * an inexpressible schema. */
/* True when tool_choice (OpenAI form, may be NULL) forces a call: "required" or a named
 * function. Cannot fail. */
bool structured_tool_choice_forces(const json_t *tool_choice);

bool structured_tool_grammar(const json_t *tools, const json_t *tool_choice, bool parallel,
                             enum toolcall_format format, struct buf *out, struct api_fail *f);

#endif
