/* Jinja template interpreter for chat templates: the subset of Jinja2 3.1 that model chat
 * templates use, rendering like Hugging Face transformers' environment (immutable sandbox,
 * trim_blocks, lstrip_blocks, loopcontrols, tojson with ensure_ascii=False, raise_exception,
 * strftime_now). Statements: if/elif/else, for (with else, filters, loop.*, break/continue),
 * set (incl. tuples, namespace attributes, blocks), macro, call, filter, raw. Values follow
 * Python: str()/repr() printing, json.dumps output, insertion-ordered dicts. Not a general
 * Jinja: no extends/include/import/block, no recursive loops, no autoescape, integers are
 * 64-bit, and lazy generators (map, select, ...) are materialized (they print as lists). */
#ifndef TEXT_JINJA_H
#define TEXT_JINJA_H

#include "util/buf.h"
#include "util/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct jinja_template;

/* Per-render options. A zeroed struct means defaults. */
struct jinja_render_opts {
    const struct tm *now; // strftime_now() time; NULL = local time at the call
    int64_t max_steps;    // evaluation steps before ERR_LIMIT; <= 0 = default (10 million)
    size_t max_bytes;     // scratch memory before ERR_LIMIT; 0 = default (256 MiB)
    size_t max_out_bytes; // bytes the output buffer may reach before ERR_LIMIT, so a caller
                          // that can use only so much stops early (a string built longer than
                          // this is refused as soon as it is built); 0 = max_bytes
    bool *is_out_over;    // set true when the render stopped at max_out_bytes; may be NULL
};

/* Parses src (len bytes, need not be NUL-terminated; borrowed for the call only) once.
 * ERR_FORMAT with "line L col C: why" in err for a syntax error or unknown tag, ERR_LIMIT for
 * nesting deeper than 200, ERR_NOMEM. On success *out is the caller's; free with
 * jinja_template_free(). The template is immutable: any number of threads may render it at once. */
int jinja_template_new(const char *src, size_t len, struct jinja_template **out,
                       struct errmsg *err);

/* Renders with the variables of context (a JSON object, borrowed; NULL = no variables) and
 * appends the text to out. ERR_INVALID when the template raised (raise_exception: err holds the
 * message as given) or failed at run time (type error, undefined attribute, unknown filter:
 * err holds "line L col C: why"), ERR_LIMIT when the step, depth or memory limit was hit,
 * ERR_NOMEM; ERR_INVALID also for a NULL template or buffer. On failure out may hold a partial
 * render. Thread-safe for a shared template; context is only read. */
int jinja_template_render(const struct jinja_template *t, const json_t *context, struct buf *out,
                          struct errmsg *err);

/* Same with options (opts may be NULL). */
int jinja_template_render_opts(const struct jinja_template *t, const json_t *context,
                               const struct jinja_render_opts *opts, struct buf *out,
                               struct errmsg *err);

/* Frees a template. jinja_template_free(NULL) is a no-op. */
void jinja_template_free(struct jinja_template *t);

#endif
