/* api/responses_stream: the event sequence for reasoning → text → function call → text
 * (types, sequence numbers, item ids and output indices as the SDKs check them), the final
 * output array, and the empty answer. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/responses/responses_stream.h"
#include "util/err.h"

#include <stdio.h>
#include <string.h>

#include "json_assert.h"

static const char *str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    assert_non_null(s);
    return s;
}

static int int_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    assert_true(json_is_integer(v));
    return (int)json_integer_value(v);
}

static void test_mixed_output(void **state)
{
    (void)state;
    struct responses_stream st;
    assert_int_equal(responses_stream_init(&st), ERR_OK);
    struct buf out;
    buf_init(&out);
    assert_int_equal(responses_stream_event(&st, "response.created", json_object(), &out), ERR_OK);
    char name[] = "get_weather", args[] = "{\"city\":\"Paris\"}";
    struct toolcall call = {name, args, NULL};
    struct responses_output steps[] = {
        {.reasoning = {"Think", 5}},
        {.reasoning = {"ing.", 4}, .text = {"Sure", 4}},
        {.text = {"!", 1}, .calls = &call, .n_calls = 1},
        {.text = {"Done", 4}},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        assert_int_equal(responses_stream_delta(&st, &steps[i], &out), ERR_OK);
    assert_int_equal(responses_stream_close(&st, &out), ERR_OK);
    json_t *ev = test_sse_events(&out);
    static const char *const want[] = {
        "response.created",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    };
    size_t n = sizeof want / sizeof want[0];
    assert_int_equal(json_array_size(ev), n);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(ev, i);
        assert_string_equal(str_of(e, "type"), want[i]);
        assert_int_equal(int_of(e, "sequence_number"), (int)i);
    }
    // Item events name the item opened at their output_index.
    const char *ids[4] = {0};
    for (size_t i = 1; i < n; i++) {
        const json_t *e = json_array_get(ev, i);
        int idx = int_of(e, "output_index");
        assert_true(idx >= 0 && idx < 4);
        if (strcmp(want[i], "response.output_item.added") == 0) {
            assert_null(ids[idx]);
            ids[idx] = str_of(json_object_get(e, "item"), "id");
        } else if (strcmp(want[i], "response.output_item.done") == 0) {
            assert_string_equal(str_of(json_object_get(e, "item"), "id"), ids[idx]);
        } else {
            assert_string_equal(str_of(e, "item_id"), ids[idx]);
        }
    }
    assert_true(strncmp(ids[0], "rs_", 3) == 0 && strncmp(ids[1], "msg_", 4) == 0);
    assert_true(strncmp(ids[2], "fc_", 3) == 0 && strncmp(ids[3], "msg_", 4) == 0);
    assert_string_equal(str_of(json_array_get(ev, 5), "text"), "Thinking.");
    assert_string_equal(str_of(json_array_get(ev, 12), "text"), "Sure!");
    assert_string_equal(str_of(json_array_get(ev, 16), "delta"), args);
    assert_string_equal(str_of(json_array_get(ev, 17), "arguments"), args);
    assert_string_equal(str_of(json_array_get(ev, 17), "name"), name);
    const json_t *added_call = json_object_get(json_array_get(ev, 15), "item");
    assert_string_equal(str_of(added_call, "arguments"), "");
    assert_string_equal(str_of(added_call, "status"), "in_progress");

    // The output holds the finished items, equal to their item.done events.
    assert_int_equal(json_array_size(st.output), 4);
    assert_true(
        json_equal(json_array_get(st.output, 0), json_object_get(json_array_get(ev, 7), "item")));
    assert_true(
        json_equal(json_array_get(st.output, 2), json_object_get(json_array_get(ev, 18), "item")));
    const json_t *fc = json_array_get(st.output, 2);
    assert_string_equal(str_of(fc, "type"), "function_call");
    assert_true(strncmp(str_of(fc, "call_id"), "call_", 5) == 0);
    assert_string_equal(str_of(fc, "status"), "completed");
    const json_t *last = json_array_get(st.output, 3);
    assert_string_equal(str_of(json_array_get(json_object_get(last, "content"), 0), "text"),
                        "Done");
    assert_string_equal(str_of(json_array_get(st.output, 1), "status"), "completed");
    assert_string_equal(str_of(last, "status"), "completed");
    json_decref(ev);
    buf_deinit(&out);
    responses_stream_deinit(&st);
}

/* An answer cut short (max_output_tokens) marks the message it ends in "incomplete", as OpenAI
 * does; the items finished before it stay completed. */
static void test_cut_answer(void **state)
{
    (void)state;
    struct responses_stream st;
    assert_int_equal(responses_stream_init(&st), ERR_OK);
    struct buf out;
    buf_init(&out);
    char name[] = "noop", args[] = "{}";
    struct toolcall call = {name, args, NULL};
    struct responses_output steps[] = {
        {.text = {"Sure", 4}, .calls = &call, .n_calls = 1},
        {.text = {"Then", 4}},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        assert_int_equal(responses_stream_delta(&st, &steps[i], &out), ERR_OK);
    st.is_incomplete = true;
    assert_int_equal(responses_stream_close(&st, &out), ERR_OK);
    assert_int_equal(json_array_size(st.output), 3);
    assert_string_equal(str_of(json_array_get(st.output, 0), "status"), "completed");
    assert_string_equal(str_of(json_array_get(st.output, 1), "status"), "completed");
    assert_string_equal(str_of(json_array_get(st.output, 2), "status"), "incomplete");
    json_t *ev = test_sse_events(&out);
    const json_t *done = json_array_get(ev, json_array_size(ev) - 1);
    assert_string_equal(str_of(done, "type"), "response.output_item.done");
    assert_string_equal(str_of(json_object_get(done, "item"), "status"), "incomplete");
    json_decref(ev);
    buf_deinit(&out);
    responses_stream_deinit(&st);
}

static void test_empty_answer(void **state)
{
    (void)state;
    struct responses_stream st;
    assert_int_equal(responses_stream_init(&st), ERR_OK);
    struct buf out;
    buf_init(&out);
    assert_int_equal(responses_stream_close(&st, &out), ERR_OK);
    json_t *ev = test_sse_events(&out);
    assert_int_equal(json_array_size(ev), 5); // added, part added, text done, part done, item done
    assert_string_equal(str_of(json_array_get(ev, 0), "type"), "response.output_item.added");
    assert_string_equal(str_of(json_array_get(ev, 4), "type"), "response.output_item.done");
    assert_int_equal(json_array_size(st.output), 1);
    assert_string_equal(str_of(json_array_get(st.output, 0), "type"), "message");
    json_decref(ev);
    buf_deinit(&out);
    responses_stream_deinit(&st);
    responses_stream_deinit(&st); // twice is harmless
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_output),
        cmocka_unit_test(test_cut_answer),
        cmocka_unit_test(test_empty_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
