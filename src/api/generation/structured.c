/* Structured-output grammars. */
#include "api/generation/structured.h"

#include "api/client_watch.h"
#include "text/grammar/gbnf.h"
#include "text/grammar/grammar.h"
#include "text/grammar/json_schema.h"

#include "util/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static bool compile_check(const struct buf *g, const char *param, struct api_fail *f)
{
    struct gbnf *compiled = NULL;
    struct errmsg err;
    errmsg_clear(&err);
    int rc = gbnf_compile(g->data ? g->data : "", g->len, &compiled, &err);
    // The matcher's own limits are met when its start state is built: checked here too, so
    // that a grammar the platform would refuse is a 400 naming the field, not a bare error.
    struct grammar_state *start = NULL;
    if (rc == ERR_OK) rc = grammar_state_new(compiled, &start);
    if (rc == ERR_LIMIT && !err.msg[0])
        errmsg_set(&err, rc, "the grammar's start expands past the matcher's limits");
    grammar_state_free(start);
    gbnf_free(compiled);
    if (rc == ERR_OK) return true;
    if (rc == ERR_NOMEM)
        return api_failf(f, 500, NULL, NULL, "out of memory compiling the grammar");
    return api_failf(f, 400, "invalid_grammar", param, "%s: %s", param,
                     err.msg[0] ? err.msg : err_str(rc));
}

static bool schema_grammar(const json_t *schema, const char *param, struct buf *out,
                           struct api_fail *f)
{
    struct errmsg err;
    errmsg_clear(&err);
    int rc = json_schema_to_gbnf_cancel(schema, client_watch_is_abandoned, out, &err);
    if (rc == ERR_OK) return compile_check(out, param, f);
    buf_clear(out);
    if (rc == ERR_CANCELLED) return api_fail_cancelled(f);
    if (rc == ERR_NOMEM)
        return api_failf(f, 500, NULL, NULL, "out of memory converting the schema");
    return api_failf(f, 400, rc == ERR_UNSUPPORTED ? "unsupported_schema" : "invalid_schema", param,
                     "%s", err.msg[0] ? err.msg : err_str(rc));
}

static bool response_format_grammar(const json_t *rf, struct buf *out, struct api_fail *f)
{
    if (!json_is_object(rf))
        return api_failf(f, 400, "invalid_type", "response_format",
                         "Invalid type for 'response_format': expected an object, but got %s.",
                         v_type_name(rf));
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!type)
        return api_failf(f, 400, "invalid_value", "response_format.type",
                         "'response_format.type' must be text, json_object or json_schema");
    if (strcmp(type, "text") == 0) return true;
    const json_t *schema = json_object_get(rf, "schema"); // flat shape, also llama.cpp's
    if (strcmp(type, "json_schema") == 0) {
        const json_t *js = json_object_get(rf, "json_schema");
        if (json_is_object(js) && json_object_get(js, "schema"))
            schema = json_object_get(js, "schema");
        if (!json_is_object(schema))
            return api_failf(f, 400, "invalid_value", "response_format.json_schema.schema",
                             "json_schema needs a 'schema' object");
        return schema_grammar(schema, "response_format.json_schema.schema", out, f);
    }
    if (strcmp(type, "json_object") == 0) {
        if (json_is_object(schema)) return schema_grammar(schema, "response_format.schema", out, f);
        return json_schema_any_object_gbnf(out) == ERR_OK ||
               api_failf(f, 500, NULL, NULL, "out of memory");
    }
    return api_failf(f, 400, "invalid_value", "response_format.type",
                     "'response_format.type' must be text, json_object or json_schema, not "
                     "'%.40s'",
                     type);
}

bool structured_from_body(const json_t *body, struct buf *out, struct api_fail *f)
{
    const json_t *rf = json_object_get(body, "response_format");
    const json_t *grammar = json_object_get(body, "grammar");
    const json_t *schema = json_object_get(body, "json_schema");
    if (rf && !json_is_null(rf)) return response_format_grammar(rf, out, f);
    if (grammar && !json_is_null(grammar)) {
        if (!json_is_string(grammar))
            return api_failf(f, 400, "invalid_type", "grammar",
                             "Invalid type for 'grammar': expected a string, but got %s.",
                             v_type_name(grammar));
        if (buf_append(out, json_string_value(grammar), json_string_length(grammar)) != ERR_OK)
            return api_failf(f, 500, NULL, NULL, "out of memory");
        return compile_check(out, "grammar", f);
    }
    if (schema && !json_is_null(schema)) {
        if (!json_is_object(schema))
            return api_failf(f, 400, "invalid_type", "json_schema",
                             "Invalid type for 'json_schema': expected an object, but got %s.",
                             v_type_name(schema));
        return schema_grammar(schema, "json_schema", out, f);
    }
    return true;
}

/* Keywords whose values are data, not schemas: a "$ref" key inside them is not a reference. */
static bool is_data_keyword(const char *key)
{
    return strcmp(key, "const") == 0 || strcmp(key, "enum") == 0 || strcmp(key, "default") == 0 ||
           strcmp(key, "examples") == 0;
}

/* Rewrites every local "$ref" ("#" or "#/...") in schema v to point below base, the JSON
 * pointer where v sits in the wrapper schema: a tool's parameters keep resolving their own
 * "$defs" once wrapped. False when out of memory. */
static bool rebase_refs(json_t *v, const char *base)
{
    if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) if (!rebase_refs(item, base)) return false;
        return true;
    }
    if (!json_is_object(v)) return true;
    const char *key;
    json_t *item;
    json_object_foreach(v, key, item)
    {
        const char *ref = json_string_value(item);
        if (strcmp(key, "$ref") == 0 && ref && ref[0] == '#') {
            char *moved = NULL;
            size_t len = strlen(base) + strlen(ref);
            if (len < SIZE_MAX / 2) moved = mem_alloc(len + 1);
            if (!moved) return false;
            snprintf(moved, len + 1, "%s%s", base, ref + 1);
            int rc = json_string_set(item, moved);
            mem_free(moved);
            if (rc != 0) return false;
        } else if (!is_data_keyword(key) && !rebase_refs(item, base)) {
            return false;
        }
    }
    return true;
}

/* A copy of a tool's parameters (or an empty object schema) with its local refs moved below
 * base. NULL when out of memory. */
static json_t *params_copy(const json_t *fn, const char *base)
{
    const json_t *params = json_object_get(fn, "parameters");
    json_t *args =
        json_is_object(params) ? json_deep_copy(params) : json_pack("{s:s}", "type", "object");
    if (args && !rebase_refs(args, base)) {
        json_decref(args);
        return NULL;
    }
    return args;
}

/* The JSON schema of one call of tool t in the family's JSON shape; it becomes the wrapper's
 * anyOf[index]. */
static json_t *call_schema(const json_t *fn, enum toolcall_format format, size_t index)
{
    const char *args_key = format == TOOLCALL_FORMAT_LLAMA3 ? "parameters" : "arguments";
    char base[96];
    snprintf(base, sizeof base, "#/anyOf/%zu/properties/%s", index, args_key);
    json_t *args = params_copy(fn, base);
    return json_pack("{s:s, s:{s:{s:O}, s:o}, s:[s, s]}", "type", "object", "properties", "name",
                     "const", json_object_get(fn, "name"), args_key, args, "required", "name",
                     args_key);
}

/* Wraps the schema grammar (its root renamed to `call`) in the family's call markers. */
static bool wrap_calls(struct buf *schema_g, enum toolcall_format format, bool parallel,
                       struct buf *out, struct api_fail *f)
{
    // json_schema_to_gbnf defines `root ::=` at the start of a line; rename it to `call`.
    char *p = schema_g->data ? strstr(schema_g->data, "root ::=") : NULL;
    if (!p || (p != schema_g->data && p[-1] != '\n'))
        return api_failf(f, 500, NULL, NULL, "tool grammar: no root rule");
    memcpy(p, "call", 4);
    const char *one = "call", *sep = "\", \"", *pre = "", *post = "";
    if (format == TOOLCALL_FORMAT_HERMES) {
        one = "\"<tool_call>\\n\" call \"\\n</tool_call>\"";
        sep = "\"\\n\"";
    } else if (format == TOOLCALL_FORMAT_MISTRAL) {
        pre = "\"[TOOL_CALLS][\" ";
        post = " \"]\"";
    } else if (format == TOOLCALL_FORMAT_LLAMA3) {
        sep = "\"; \"";
    } else if (format == TOOLCALL_FORMAT_LFM2) { // JSON calls in its list, which it parses
        pre = "\"<|tool_call_start|>[\" ";
        post = " \"]<|tool_call_end|>\"";
    } else {
        parallel = false; // the generic format is one JSON object
    }
    int rc = parallel ? buf_printf(out, "root ::= %s%s (%s %s)*%s\n", pre, one, sep, one, post)
                      : buf_printf(out, "root ::= %s%s%s\n", pre, one, post);
    if (rc == ERR_OK) rc = buf_append(out, schema_g->data, schema_g->len);
    return rc == ERR_OK || api_failf(f, 500, NULL, NULL, "out of memory");
}

/* gpt-oss harmony: an optional analysis message, then a commentary message to one of the
 * functions with its arguments (the header as the reference's harmony parser reads it). The
 * arguments follow the union of the named functions' parameter schemas: with several
 * functions the name and its schema are not tied together (the schema grammars' rule names
 * would collide), so a required call may pair a name with another function's arguments. */
static bool harmony_calls(const json_t *names, struct buf *schema_g, struct buf *out,
                          struct api_fail *f)
{
    char *p = schema_g->data ? strstr(schema_g->data, "root ::=") : NULL;
    if (!p || (p != schema_g->data && p[-1] != '\n'))
        return api_failf(f, 500, NULL, NULL, "tool grammar: no root rule");
    memcpy(p, "args", 4);
    int rc = buf_printf(out, "root ::= analysis? \"<|channel|>commentary to=functions.\" "
                             "fname \" <|constrain|>json<|message|>\" args\n"
                             "analysis ::= \"<|channel|>analysis<|message|>\" "
                             "([^<] | \"<\" [^|])* \"<|end|><|start|>assistant\"\n"
                             "fname ::= ");
    for (size_t i = 0; rc == ERR_OK && i < json_array_size(names); i++) {
        const char *n = json_string_value(json_array_get(names, i));
        rc = buf_printf(out, "%s\"", i ? " | " : "");
        for (; rc == ERR_OK && *n; n++) // a GBNF literal: quote, backslash and controls escaped
            rc = *n == '"' || *n == '\\'    ? buf_printf(out, "\\%c", *n)
                 : (unsigned char)*n < 0x20 ? buf_printf(out, "\\x%02X", (unsigned char)*n)
                                            : buf_printf(out, "%c", *n);
        if (rc == ERR_OK) rc = buf_printf(out, "\"");
    }
    if (rc == ERR_OK) rc = buf_printf(out, "\n");
    if (rc == ERR_OK) rc = buf_append(out, schema_g->data, schema_g->len);
    return rc == ERR_OK || api_failf(f, 500, NULL, NULL, "out of memory");
}

bool structured_tool_choice_forces(const json_t *tool_choice)
{
    const char *choice = json_string_value(tool_choice);
    const json_t *fn = json_object_get(tool_choice, "function");
    return (choice && strcmp(choice, "required") == 0) || json_object_get(fn, "name");
}

bool structured_tool_grammar(const json_t *tools, const json_t *tool_choice, bool parallel,
                             enum toolcall_format format, struct buf *out, struct api_fail *f)
{
    const char *choice = json_string_value(tool_choice);
    const char *forced =
        json_string_value(json_object_get(json_object_get(tool_choice, "function"), "name"));
    bool is_required = choice && strcmp(choice, "required") == 0;
    if ((!is_required && !forced) || json_array_size(tools) == 0) return true;
    bool is_harmony = format == TOOLCALL_FORMAT_HARMONY;
    json_t *any = json_array(), *names = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        const json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (forced && (!name || strcmp(name, forced) != 0)) continue;
        if (!is_harmony) {
            json_array_append_new(any, call_schema(fn, format, json_array_size(any)));
            continue;
        }
        char base[64];
        snprintf(base, sizeof base, "#/anyOf/%zu", json_array_size(any));
        json_array_append_new(any, params_copy(fn, base));
        json_array_append_new(names, json_string(name ? name : ""));
    }
    if (json_array_size(any) == 0) {
        json_decref(any);
        json_decref(names);
        return api_failf(f, 400, "invalid_value", "tool_choice",
                         "tool_choice names the function '%.100s', which is not in tools",
                         forced ? forced : "");
    }
    json_t *schema = json_pack("{s:o}", "anyOf", any);
    struct buf g;
    buf_init(&g);
    bool ok =
        schema_grammar(schema, "tools", &g, f) &&
        (is_harmony ? harmony_calls(names, &g, out, f) : wrap_calls(&g, format, parallel, out, f));
    json_decref(schema);
    json_decref(names);
    buf_deinit(&g);
    return ok && compile_check(out, "tool_choice", f);
}
