/* api/anthropic: Messages requests translated into chat messages and tools (every block type,
 * tool_choice, thinking), the refusals, the response-side content blocks (tool calls as
 * tool_use with parsed input), stop reasons and the error shape; allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/anthropic.h"
#include "api/errors.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#include "json_assert.h"

static const char *tool_conversation =
    "{\"model\":\"m\",\"max_tokens\":10,"
    "\"system\":[{\"type\":\"text\",\"text\":\"Be "
    "brief.\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\","
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}],"
    "\"tool_choice\":{\"type\":\"auto\"},"
    "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},"
    "\"metadata\":{\"user_id\":\"u1\"},"
    "\"messages\":["
    "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":["
    "{\"type\":\"thinking\",\"thinking\":\"Need the tool.\",\"signature\":\"sig\"},"
    "{\"type\":\"text\",\"text\":\"Checking.\"},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":"
    "\"Paris\"}}]},"
    "{\"role\":\"user\",\"content\":["
    "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"sunny\"},"
    "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"is_error\":true,"
    "\"content\":[{\"type\":\"text\",\"text\":\"timeout\"}]},"
    "{\"type\":\"text\",\"text\":\"Thanks\"}]}]}";

static void test_tool_conversation(void **state)
{
    (void)state;
    json_t *body = test_json_parse(tool_conversation);
    struct anthropic_chat c;
    struct api_fail f = {0};
    assert_true(anthropic_to_chat(body, &c, &f));
    assert_json_eq(
        c.messages,
        "[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Be brief.\"}]},"
        "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":\"Checking.\",\"reasoning_content\":\"Need the "
        "tool.\","
        "\"tool_calls\":[{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":"
        "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"sunny\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"toolu_2\",\"content\":["
        "{\"type\":\"text\",\"text\":\"Error:\"},{\"type\":\"text\",\"text\":\"timeout\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Thanks\"}]}]");
    assert_json_eq(c.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                            "\"description\":\"Weather\",\"parameters\":{\"type\":\"object\","
                            "\"properties\":{\"city\":{\"type\":\"string\"}}}}}]");
    assert_int_equal(c.enable_thinking, 1);
    anthropic_chat_deinit(&c);
    json_decref(body);
}

static void test_text_image_and_options(void **state)
{
    (void)state;
    json_t *body = test_json_parse(
        "{\"system\":\"S\",\"tool_choice\":{\"type\":\"none\"},\"thinking\":{\"type\":"
        "\"disabled\"},"
        "\"tools\":[{\"name\":\"t\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
        "\"data\":\"AAAA\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"x\","
        "\"is_error\":true,\"content\":\"boom\"}]}]}");
    struct anthropic_chat c;
    struct api_fail f = {0};
    assert_true(anthropic_to_chat(body, &c, &f));
    assert_json_eq(
        c.messages,
        "[{\"role\":\"system\",\"content\":\"S\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"x\",\"content\":\"Error: boom\"}]");
    assert_null(c.tools); // tool_choice none hides them
    assert_int_equal(c.enable_thinking, 0);
    anthropic_chat_deinit(&c);
    json_decref(body);
}

static void test_tool_choice(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"{\"type\":\"auto\"}", NULL},
        {"{\"type\":\"any\"}", "\"required\""},
        {"{\"type\":\"tool\",\"name\":\"t\",\"disable_parallel_tool_use\":true}",
         "{\"type\":\"function\",\"function\":{\"name\":\"t\"}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":%s,"
                 "\"tools\":[{\"name\":\"t\",\"input_schema\":{\"type\":\"object\"}}]}",
                 cases[i][0]);
        json_t *body = test_json_parse(text);
        struct anthropic_chat c;
        struct api_fail f = {0};
        assert_true(anthropic_to_chat(body, &c, &f));
        assert_non_null(c.tools);
        if (cases[i][1])
            assert_json_eq(c.tool_choice, cases[i][1]);
        else
            assert_null(c.tool_choice);
        assert_int_equal(c.is_parallel, i != 2);
        anthropic_chat_deinit(&c);
        json_decref(body);
    }
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
        {"{}", "missing_required_parameter", "messages"},
        {"{\"messages\":[]}", "invalid_value", "messages"},
        {"{\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}", "invalid_value",
         "messages[0]"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "invalid_type",
         "messages[0].content"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":"
         "{\"type\":\"url\",\"url\":\"https://x/y.png\"}}]}]}",
         "unsupported_content_part_type", "messages[0].content[0].source"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\"}]}]}",
         "unsupported_content_part_type", "messages[0].content[0]"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
         "\"name\":\"n\"}]}]}",
         "invalid_type", "messages[0].content[0].input"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
         "\"web_search_20250305\",\"name\":\"web_search\"}]}",
         "invalid_value", "tools[0]"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"n\"}]}",
         "invalid_type", "tools[0].input_schema"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"tool\"}"
         "}",
         "invalid_type", "tool_choice.name"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":{\"type\":\"enabled\"}"
         "}",
         "missing_required_parameter", "thinking.budget_tokens"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"metadata\":3}", "invalid_type",
         "metadata"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *body = test_json_parse(cases[i].body);
        struct anthropic_chat c;
        struct api_fail f = {0};
        if (anthropic_to_chat(body, &c, &f)) fail_msg("case %zu accepted", i);
        assert_int_equal(f.status, 400);
        assert_string_equal(f.code, cases[i].code);
        assert_string_equal(f.param, cases[i].param);
        assert_true(strlen(f.message) > 0);
        assert_null(c.messages);
        json_decref(body);
    }
}

static void test_content_blocks(void **state)
{
    (void)state;
    char name[] = "get_weather", args[] = "{\"city\":\"Paris\",\"days\":2}", id[] = "call_7";
    char name2[] = "noop", args2[] = "{}";
    struct toolcall calls[2] = {{name, args, id}, {name2, args2, NULL}};
    struct anthropic_output o = {
        .reasoning = {"think", 5}, .text = {"Hi", 2}, .calls = calls, .n_calls = 2};
    json_t *content = anthropic_content_json(&o);
    assert_non_null(content);
    assert_int_equal(json_array_size(content), 4);
    assert_json_eq(json_array_get(content, 0),
                   "{\"type\":\"thinking\",\"thinking\":\"think\",\"signature\":\"\"}");
    assert_json_eq(json_array_get(content, 1), "{\"type\":\"text\",\"text\":\"Hi\"}");
    assert_json_eq(json_array_get(content, 2),
                   "{\"type\":\"tool_use\",\"id\":\"call_7\",\"name\":\"get_weather\","
                   "\"input\":{\"city\":\"Paris\",\"days\":2}}");
    const json_t *t2 = json_array_get(content, 3);
    assert_string_equal(json_string_value(json_object_get(t2, "type")), "tool_use");
    assert_true(strncmp(json_string_value(json_object_get(t2, "id")), "toolu_", 6) == 0);
    assert_true(json_is_object(json_object_get(t2, "input")));
    assert_int_equal(json_object_size(json_object_get(t2, "input")), 0);
    json_decref(content);

    struct anthropic_output empty = {.text = {NULL, 0}};
    content = anthropic_content_json(&empty);
    assert_json_eq(content, "[{\"type\":\"text\",\"text\":\"\"}]");
    json_decref(content);

    struct anthropic_output only_call = {.calls = calls, .n_calls = 1};
    content = anthropic_content_json(&only_call);
    assert_int_equal(json_array_size(content), 1); // no empty text block beside a tool_use
    json_decref(content);
}

static void test_stop_reasons_and_errors(void **state)
{
    (void)state;
    assert_string_equal(anthropic_stop_reason("tool_calls", false), "tool_use");
    assert_string_equal(anthropic_stop_reason("length", false), "max_tokens");
    assert_string_equal(anthropic_stop_reason("stop", true), "stop_sequence");
    assert_string_equal(anthropic_stop_reason("stop", false), "end_turn");
    assert_string_equal(api_error_anthropic_type(400), "invalid_request_error");
    assert_string_equal(api_error_anthropic_type(401), "authentication_error");
    assert_string_equal(api_error_anthropic_type(404), "not_found_error");
    assert_string_equal(api_error_anthropic_type(413), "request_too_large");
    assert_string_equal(api_error_anthropic_type(429), "rate_limit_error");
    assert_string_equal(api_error_anthropic_type(500), "api_error");
    assert_string_equal(api_error_anthropic_type(503), "overloaded_error");
    json_t *e = api_error_anthropic_json("not_found_error", "no model \xff here");
    assert_json_eq(e, "{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\","
                      "\"message\":\"no model ? here\"}}");
    json_decref(e);
}

static const char *ev_type(const json_t *list, size_t i)
{
    return json_string_value(json_object_get(json_array_get(list, i), "type"));
}

/* thinking → text → tool_use → text again: each change closes the open block and the indices
 * count up; the tool_use input arrives as one input_json_delta the SDK can parse. */
static void test_stream_events(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out);
    struct anthropic_stream st = {0};
    assert_int_equal(anthropic_stream_start("msg_1", "m", 12, &out), ERR_OK);
    struct anthropic_output step1 = {.reasoning = {"hm", 2}};
    struct anthropic_output step2 = {.reasoning = {"m.", 2}, .text = {"Sure", 4}};
    char name[] = "get_weather", args[] = "{\"city\":\"Paris\"}", id[] = "toolu_9";
    struct toolcall call = {name, args, id};
    struct anthropic_output step3 = {.text = {"!", 1}, .calls = &call, .n_calls = 1};
    struct anthropic_output step4 = {.text = {"Done", 4}};
    assert_int_equal(anthropic_stream_delta(&st, &step1, &out), ERR_OK);
    assert_int_equal(anthropic_stream_delta(&st, &step2, &out), ERR_OK);
    assert_int_equal(anthropic_stream_delta(&st, &step3, &out), ERR_OK);
    assert_int_equal(anthropic_stream_delta(&st, &step4, &out), ERR_OK);
    assert_int_equal(anthropic_stream_finish(&st, "tool_use", NULL,
                                             json_pack("{s:i}", "output_tokens", 9), &out),
                     ERR_OK);
    json_t *ev = test_sse_events(&out);
    static const char *const want[] = {
        "message_start",       "ping",
        "content_block_start", "content_block_delta",
        "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta",
        "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta",
        "content_block_stop",  "content_block_start",
        "content_block_delta", "content_block_stop",
        "message_delta",       "message_stop",
    };
    assert_int_equal(json_array_size(ev), sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_string_equal(ev_type(ev, i), want[i]);
    assert_json_eq(json_object_get(json_array_get(ev, 0), "message"),
                   "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\","
                   "\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                   "\"usage\":{\"input_tokens\":12,\"output_tokens\":0}}");
    assert_json_eq(json_array_get(ev, 2), "{\"type\":\"content_block_start\",\"index\":0,"
                                          "\"content_block\":{\"type\":\"thinking\","
                                          "\"thinking\":\"\",\"signature\":\"\"}}");
    assert_json_eq(json_array_get(ev, 4),
                   "{\"type\":\"content_block_delta\",\"index\":0,"
                   "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"m.\"}}");
    assert_json_eq(json_array_get(ev, 6), "{\"type\":\"content_block_start\",\"index\":1,"
                                          "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
    assert_json_eq(json_array_get(ev, 8), "{\"type\":\"content_block_delta\",\"index\":1,"
                                          "\"delta\":{\"type\":\"text_delta\",\"text\":\"!\"}}");
    assert_json_eq(
        json_array_get(ev, 10),
        "{\"type\":\"content_block_start\",\"index\":2,\"content_block\":"
        "{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"get_weather\",\"input\":{}}}");
    const json_t *ij = json_object_get(json_array_get(ev, 11), "delta");
    assert_string_equal(json_string_value(json_object_get(ij, "type")), "input_json_delta");
    json_t *input = json_loads(json_string_value(json_object_get(ij, "partial_json")), 0, NULL);
    assert_json_eq(input, "{\"city\":\"Paris\"}");
    json_decref(input);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 12), "index")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 13), "index")), 3);
    assert_json_eq(json_array_get(ev, 16),
                   "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\","
                   "\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}");
    json_decref(ev);

    // A message that produced nothing still has one (empty) text block.
    buf_clear(&out);
    struct anthropic_stream empty = {0};
    assert_int_equal(
        anthropic_stream_finish(&empty, "end_turn", json_string("x"), json_object(), &out), ERR_OK);
    ev = test_sse_events(&out);
    assert_int_equal(json_array_size(ev), 4);
    assert_string_equal(ev_type(ev, 0), "content_block_start");
    assert_string_equal(ev_type(ev, 1), "content_block_stop");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(ev, 2), "delta"), "stop_sequence")),
                        "x");
    json_decref(ev);
    buf_deinit(&out);
}

/* Every allocation of the translation fails in turn: a clean failure (500) or success, and
 * nothing leaks either way. */
static void test_allocation_failures(void **state)
{
    (void)state;
    json_t *body = test_json_parse(tool_conversation);
    int64_t base = mem_live_count();
    bool succeeded = false;
    for (int64_t n = 0; n < 2000 && !succeeded; n++) {
        struct anthropic_chat c;
        struct api_fail f = {0};
        mem_fail_after(n);
        bool ok = anthropic_to_chat(body, &c, &f);
        mem_fail_after(-1);
        if (ok) {
            succeeded = true;
            anthropic_chat_deinit(&c);
        } else {
            assert_int_equal(f.status, 500);
        }
        assert_int_equal(mem_live_count(), base);
    }
    assert_true(succeeded);
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
        cmocka_unit_test(test_tool_conversation), cmocka_unit_test(test_text_image_and_options),
        cmocka_unit_test(test_tool_choice),       cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_content_blocks),    cmocka_unit_test(test_stop_reasons_and_errors),
        cmocka_unit_test(test_stream_events),     cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
