/* JSON helpers for unit tests. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "json_assert.h"

#include <stdio.h>
#include <string.h>

json_t *test_json_parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j) fail_msg("bad test JSON at %d: %s", e.position, e.text);
    return j;
}

void assert_json_eq(const json_t *got, const char *want_text)
{
    json_t *want = test_json_parse(want_text);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
        char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
        print_error("got:  %s\nwant: %s\n", g, w);
        json_free_t free_fn;
        json_get_alloc_funcs(NULL, &free_fn); // whatever the test binary set up
        free_fn(g);
        free_fn(w);
        json_decref(want);
        fail();
    }
    json_decref(want);
}

json_t *test_sse_events(const struct buf *b)
{
    json_t *list = json_array();
    const char *p = b->data ? b->data : "";
    while (*p) {
        char name[96];
        int n = 0;
        assert_int_equal(sscanf(p, "event: %95s\n%n", name, &n), 1);
        p += n;
        assert_true(strncmp(p, "data: ", 6) == 0);
        p += 6;
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        json_t *data = json_loadb(p, (size_t)(end - p), 0, NULL);
        assert_non_null(data);
        assert_string_equal(json_string_value(json_object_get(data, "type")), name);
        json_array_append_new(list, data);
        p = end + 2;
    }
    return list;
}
