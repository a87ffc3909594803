/* api/responses_convert: Responses input items (messages with parts, function_call,
 * function_call_output, reasoning), instructions, previous conversations, tools and
 * reasoning.effort into chat terms; refusals; the output items built from an answer (function
 * calls with call ids) and their round trip back into chat history; allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/responses/responses_convert.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#include "json_assert.h"

static const char *items_body =
    "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"reasoning\":{\"effort\":\"high\"},"
    "\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\",\"description\":\"W\","
    "\"parameters\":{\"type\":\"object\"},\"strict\":true}],\"tool_choice\":\"auto\","
    "\"input\":["
    "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Weather?\"},"
    "{\"type\":\"input_image\",\"image_url\":\"data:image/png;base64,AAAA\"}]},"
    "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],"
    "\"content\":[{\"type\":\"reasoning_text\",\"text\":\"use tool\"}]},"
    "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"get_weather\","
    "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"},"
    "{\"type\":\"function_call\",\"call_id\":\"call_2\",\"name\":\"get_weather\","
    "\"arguments\":\"{}\"},"
    "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"sunny\"},"
    "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
    "\"text\":\"It is \"},{\"type\":\"output_text\",\"text\":\"sunny.\"}]},"
    "{\"role\":\"developer\",\"content\":\"dev\"}]}";

static void test_items(void **state)
{
    (void)state;
    json_t *body = test_json_parse(items_body);
    struct responses_chat c;
    struct api_fail f = {0};
    assert_true(responses_to_chat(body, NULL, &c, &f));
    const char *history =
        "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather?\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}}]},"
        "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"use tool\","
        "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
        "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
        "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"},"
        "{\"role\":\"assistant\",\"content\":\"It is sunny.\"},"
        "{\"role\":\"developer\",\"content\":\"dev\"}]";
    assert_json_eq(c.history, history);
    assert_int_equal(json_array_size(c.messages), json_array_size(c.history) + 1);
    assert_json_eq(json_array_get(c.messages, 0),
                   "{\"role\":\"system\",\"content\":\"Be brief.\"}");
    assert_true(json_equal(json_array_get(c.messages, 1), json_array_get(c.history, 0)));
    assert_json_eq(c.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                            "\"description\":\"W\",\"parameters\":{\"type\":\"object\"}}}]");
    assert_int_equal(c.enable_thinking, 1);
    responses_chat_deinit(&c);
    json_decref(body);
}

static void test_string_input_previous_and_options(void **state)
{
    (void)state;
    json_t *prev = test_json_parse("[{\"role\":\"user\",\"content\":\"hi\"},"
                                   "{\"role\":\"assistant\",\"content\":\"hello\"}]");
    json_t *body = test_json_parse(
        "{\"input\":\"again\",\"reasoning\":{\"effort\":\"minimal\"},"
        "\"tool_choice\":\"none\",\"tools\":[{\"type\":\"function\",\"name\":\"t\"}],"
        "\"text\":{\"format\":{\"type\":\"text\"}}}");
    struct responses_chat c;
    struct api_fail f = {0};
    assert_true(responses_to_chat(body, prev, &c, &f));
    assert_json_eq(c.messages, "[{\"role\":\"user\",\"content\":\"hi\"},"
                               "{\"role\":\"assistant\",\"content\":\"hello\"},"
                               "{\"role\":\"user\",\"content\":\"again\"}]");
    assert_true(json_equal(c.messages, c.history)); // no instructions
    assert_null(c.tools);
    assert_int_equal(c.enable_thinking, 0);
    assert_int_equal(json_array_size(prev), 2); // the stored conversation is not modified
    responses_chat_deinit(&c);
    json_decref(body);
    json_decref(prev);
}

struct bad_case {
    const char *body;
    const char *code;
    const char *param;
};

static void test_refusals(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"{}", "missing_required_parameter", "input"},
        {"{\"input\":5}", "invalid_type", "input"},
        {"{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "invalid_value", "input[0]"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\","
         "\"file_id\":\"f\"}]}]}",
         "unsupported_value", "input[0].content[0]"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\"}]}]}",
         "unsupported_content_part_type", "input[0].content[0]"},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"n\","
         "\"arguments\":{}}]}",
         "invalid_type", "input[0].arguments"},
        {"{\"input\":[{\"type\":\"item_reference\",\"id\":\"x\"}]}", "unsupported_value",
         "input[0]"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "unsupported_value",
         "tools[0]"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"xml\"}}}", "invalid_value",
         "text.format.type"},
        {"{\"input\":\"x\",\"tool_choice\":{\"type\":\"function\"}}", "invalid_type",
         "tool_choice.name"},
        {"{\"input\":\"x\",\"reasoning\":{\"effort\":\"max\"}}", "invalid_value",
         "reasoning.effort"},
        {"{\"input\":\"x\",\"tool_choice\":\"sometimes\"}", "invalid_value", "tool_choice"},
        {"{\"input\":\"x\",\"background\":true}", "unsupported_value", "background"},
        {"{\"input\":\"x\",\"instructions\":3}", "invalid_type", "instructions"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *body = test_json_parse(cases[i].body);
        struct responses_chat c;
        struct api_fail f = {0};
        if (responses_to_chat(body, NULL, &c, &f)) fail_msg("case %zu accepted", i);
        if (f.status != 400) fail_msg("case %zu: status %d (%s)", i, f.status, f.message);
        assert_string_equal(f.code, cases[i].code);
        assert_string_equal(f.param, cases[i].param);
        assert_null(c.messages);
        json_decref(body);
    }
}

static void test_tool_choice_and_structured(void **state)
{
    (void)state;
    json_t *body =
        test_json_parse("{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"t\"}],"
                        "\"tool_choice\":{\"type\":\"function\",\"name\":\"t\"},"
                        "\"parallel_tool_calls\":false,\"grammar\":\"root ::= \\\"a\\\"\","
                        "\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"n\","
                        "\"schema\":{\"type\":\"object\"}}}}");
    struct responses_chat c;
    struct api_fail f = {0};
    assert_true(responses_to_chat(body, NULL, &c, &f));
    assert_json_eq(c.tool_choice, "{\"type\":\"function\",\"function\":{\"name\":\"t\"}}");
    assert_false(c.is_parallel);
    assert_json_eq(c.structured,
                   "{\"response_format\":{\"type\":\"json_schema\",\"name\":\"n\","
                   "\"schema\":{\"type\":\"object\"}},\"grammar\":\"root ::= \\\"a\\\"\"}");
    responses_chat_deinit(&c);
    json_decref(body);
    body = test_json_parse(
        "{\"input\":\"x\",\"tool_choice\":\"required\",\"text\":{\"format\":{\"type\":\"text\"}}}");
    assert_true(responses_to_chat(body, NULL, &c, &f));
    assert_json_eq(c.tool_choice, "\"required\"");
    assert_true(c.is_parallel);
    assert_null(c.structured); // plain text asks for no constraint
    responses_chat_deinit(&c);
    json_decref(body);
}

static void test_output_items(void **state)
{
    (void)state;
    char name[] = "get_weather", args[] = "{\"city\":\"Paris\"}", id[] = "abc";
    char name2[] = "noop", args2[] = "{}";
    struct toolcall calls[2] = {{name, args, id}, {name2, args2, NULL}};
    struct responses_output o = {
        .reasoning = {"think", 5}, .text = {"Hi", 2}, .calls = calls, .n_calls = 2};
    json_t *out = responses_output_json(&o);
    assert_int_equal(json_array_size(out), 4);
    json_t *rs = json_array_get(out, 0), *msg = json_array_get(out, 1);
    json_t *fc = json_array_get(out, 2), *fc2 = json_array_get(out, 3);
    assert_string_equal(json_string_value(json_object_get(rs, "type")), "reasoning");
    assert_true(strncmp(json_string_value(json_object_get(rs, "id")), "rs_", 3) == 0);
    assert_json_eq(json_object_get(rs, "content"),
                   "[{\"type\":\"reasoning_text\",\"text\":\"think\"}]");
    assert_true(strncmp(json_string_value(json_object_get(msg, "id")), "msg_", 4) == 0);
    json_object_del(msg, "id");
    assert_json_eq(msg, "{\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\","
                        "\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\","
                        "\"annotations\":[],\"logprobs\":[]}]}");
    assert_true(strncmp(json_string_value(json_object_get(fc, "id")), "fc_", 3) == 0);
    json_object_del(fc, "id");
    assert_json_eq(fc, "{\"type\":\"function_call\",\"status\":\"completed\",\"call_id\":\"abc\","
                       "\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}");
    const char *call_id2 = json_string_value(json_object_get(fc2, "call_id"));
    assert_true(strncmp(call_id2, "call_", 5) == 0);

    // Output items read back as the assistant turn of the stored conversation.
    json_t *history = json_array();
    struct api_fail f = {0};
    assert_true(responses_items_to_chat(out, "output", history, &f));
    assert_int_equal(json_array_size(history), 1);
    json_t *turn = json_array_get(history, 0);
    assert_string_equal(json_string_value(json_object_get(turn, "content")), "Hi");
    assert_string_equal(json_string_value(json_object_get(turn, "reasoning_content")), "think");
    json_t *tc = json_object_get(turn, "tool_calls");
    assert_int_equal(json_array_size(tc), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(tc, 0), "id")), "abc");
    assert_string_equal(json_string_value(json_object_get(json_array_get(tc, 1), "id")), call_id2);
    json_decref(history);
    json_decref(out);

    // Cut short: the message says so; its calls are complete.
    o.is_incomplete = true;
    out = responses_output_json(&o);
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 1), "status")),
                        "incomplete");
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 2), "status")),
                        "completed");
    json_decref(out);

    struct responses_output empty = {.text = {NULL, 0}};
    out = responses_output_json(&empty);
    assert_int_equal(json_array_size(out), 1);
    assert_json_eq(json_object_get(json_array_get(out, 0), "content"),
                   "[{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[],\"logprobs\":[]}]");
    json_decref(out);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    json_t *body = test_json_parse(items_body);
    json_t *prev = test_json_parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
    int64_t base = mem_live_count();
    bool succeeded = false;
    for (int64_t n = 0; n < 4000 && !succeeded; n++) {
        struct responses_chat c;
        struct api_fail f = {0};
        mem_fail_after(n);
        bool ok = responses_to_chat(body, prev, &c, &f);
        mem_fail_after(-1);
        if (ok) {
            succeeded = true;
            responses_chat_deinit(&c);
        } else {
            assert_int_equal(f.status, 500);
        }
        assert_int_equal(mem_live_count(), base);
    }
    assert_true(succeeded);
    json_decref(prev);
    json_decref(body);
}

static void *json_mem_alloc(size_t n)
{
    return mem_alloc(n);
}

int main(void)
{
    json_set_alloc_funcs(json_mem_alloc, mem_free); // jansson's allocations become injectable
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items),
        cmocka_unit_test(test_string_input_previous_and_options),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tool_choice_and_structured),
        cmocka_unit_test(test_output_items),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
