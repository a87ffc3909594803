/* JSON helpers for unit tests: parse test literals, compare JSON values with a readable diff. */
#ifndef TESTS_JSON_ASSERT_H
#define TESTS_JSON_ASSERT_H

#include "util/buf.h"

#include <jansson.h>

/* Parses a JSON literal of the test (any value); fails the test when it is not JSON. */
json_t *test_json_parse(const char *text);

/* Fails the test, printing both sides, unless got equals the JSON in want_text. */
void assert_json_eq(const json_t *got, const char *want_text);

/* The `event: NAME` / `data: JSON` pairs of an SSE buffer as an array of the data objects;
 * fails the test on bad framing or when data.type does not name its event. */
json_t *test_sse_events(const struct buf *b);

#endif
