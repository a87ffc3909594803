/* JSON text whose numbers read back exactly in the fewest digits. jansson prints every real
 * with 17 significant digits, so 0.1 comes out as 0.10000000000000001 — in API answers, in
 * tool-call arguments re-serialized from model output, and in grammar literals made from a
 * schema's enum (which then force the model to write those digits). These pick, per
 * document, the lowest precision (15, 16 or 17 digits) at which every real in it reads back
 * as the same double. */
#ifndef TEXT_JSON_TEXT_H
#define TEXT_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* jansson takes non-const pointers even where it only reads (iteration) or adds a reference;
 * this passes a const value to those. */
static inline json_t *json_unconst(const json_t *j)
{
    return (json_t *)(uintptr_t)j;
}

/* 15, 16 or 17: the fewest significant digits at which every real in j round-trips. */
int json_text_precision(const json_t *j);

/* json_dumps / json_dumpb with flags and that precision. Free json_text_dumps' result with
 * free() (jansson's allocator). */
char *json_text_dumps(const json_t *j, size_t flags);
size_t json_text_dumpb(const json_t *j, char *buffer, size_t size, size_t flags);

/* The double of the shortest decimal that reads back as f (0.8f gives 0.8, not
 * 0.800000011920929): for float values (sampling parameters, log-probabilities, scores)
 * shown as JSON reals. NaN and infinities are returned unchanged. */
double json_text_float(float f);

#endif
