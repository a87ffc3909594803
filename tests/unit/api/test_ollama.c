/* api/ollama: the options → shared-parameter mapping (every option, num_predict's special
 * values, type errors naming the option, format "json" and schemas, the extension fields),
 * the NDJSON line writer and stream adapter, names, image media types, message conversion
 * (images, tool calls with object arguments, tool results), think values and timestamps.
 * The mapping runs under allocation-failure injection. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/errors.h"
#include "api/ollama/call.h"
#include "api/ollama/common.h"
#include "api/ollama/convert.h"
#include "api/ollama/ndjson.h"
#include "api/ollama/options.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#include "json_assert.h"

/* Maps the request text; asserts success and compares the body with want. */
static void map_ok(const char *req_text, const char *want)
{
    json_t *req = test_json_parse(req_text);
    struct api_fail f = {0};
    json_t *body = NULL;
    assert_true(ollama_options_to_body(req, &body, &f));
    assert_json_eq(body, want);
    json_decref(body);
    json_decref(req);
}

/* Maps the request text; asserts a 400 whose message contains needle. */
static void map_fails(const char *req_text, const char *needle)
{
    json_t *req = test_json_parse(req_text);
    struct api_fail f = {0};
    json_t *body = (json_t *)1;
    assert_false(ollama_options_to_body(req, &body, &f));
    assert_null(body);
    assert_int_equal(f.status, 400);
    if (!strstr(f.message, needle)) fail_msg("'%s' does not contain '%s'", f.message, needle);
    json_decref(req);
}

static void test_sampling_options(void **state)
{
    (void)state;
    map_ok("{\"options\": {\"temperature\": 0.2, \"top_k\": 5, \"top_p\": 0.9, \"min_p\": 0.1,"
           " \"seed\": 42, \"repeat_penalty\": 1.1, \"repeat_last_n\": 32,"
           " \"presence_penalty\": 0.5, \"frequency_penalty\": 0.25, \"mirostat\": 2,"
           " \"mirostat_tau\": 4.0, \"mirostat_eta\": 0.2}}",
           "{\"temperature\": 0.2, \"top_k\": 5, \"top_p\": 0.9, \"min_p\": 0.1, \"seed\": 42,"
           " \"repeat_penalty\": 1.1, \"repeat_last_n\": 32, \"presence_penalty\": 0.5,"
           " \"frequency_penalty\": 0.25, \"mirostat\": 2, \"mirostat_tau\": 4.0,"
           " \"mirostat_eta\": 0.2}");
    // Integers written as whole floats (Go clients) become integers.
    map_ok("{\"options\": {\"top_k\": 40.0, \"seed\": 7.0}}", "{\"top_k\": 40, \"seed\": 7}");
    map_ok("{\"options\": {\"stop\": [\"\\n\", \"User:\"]}}", "{\"stop\": [\"\\n\", \"User:\"]}");
    map_ok("{\"options\": {\"stop\": \"END\"}}", "{\"stop\": \"END\"}");
    map_ok("{}", "{}");
    map_ok("{\"options\": null}", "{}");
}

static void test_num_predict(void **state)
{
    (void)state;
    map_ok("{\"options\": {\"num_predict\": 128}}", "{\"max_tokens\": 128}");
    map_ok("{\"options\": {\"num_predict\": -1}}", "{}"); // endless: until the context ends
    map_ok("{\"options\": {\"num_predict\": -2}}", "{}"); // fill the context: the same here
    map_ok("{\"options\": {\"num_predict\": 0}}", "{\"max_tokens\": 1}");
    // bounded as max_tokens is on the other routes (it used to be clamped)
    map_ok("{\"options\": {\"num_predict\": 2147483647}}", "{\"max_tokens\": 2147483647}");
    map_ok("{\"options\": {\"num_predict\": 64.0}}", "{\"max_tokens\": 64}");
    map_fails("{\"options\": {\"num_predict\": 2147483648}}", "num_predict");
    map_fails("{\"options\": {\"num_predict\": 9223372036854775807}}", "num_predict");
    map_fails("{\"options\": {\"num_predict\": 1e12}}", "num_predict");
    map_fails("{\"options\": {\"num_predict\": 1e300}}", "num_predict");
    map_fails("{\"options\": {\"num_predict\": -3}}", "num_predict");
    map_fails("{\"options\": {\"num_predict\": 2.5}}", "num_predict");
}

static void test_accepted_not_applied(void **state)
{
    (void)state;
    // Load-time and runner options are checked but set nothing; unknown options are ignored.
    map_ok("{\"options\": {\"num_ctx\": 8192, \"num_batch\": 512, \"num_gpu\": 99,"
           " \"main_gpu\": 0, \"num_thread\": 4, \"num_keep\": 5, \"typical_p\": 0.9,"
           " \"use_mmap\": true, \"numa\": false, \"low_vram\": false, \"penalize_newline\": true,"
           " \"made_up\": {\"x\": 1}, \"temperature\": null}}",
           "{}");
    map_fails("{\"options\": {\"num_ctx\": \"big\"}}", "\"num_ctx\" must be of type integer");
    map_fails("{\"options\": {\"use_mmap\": 1}}", "\"use_mmap\" must be of type bool");
}

static void test_type_errors(void **state)
{
    (void)state;
    map_fails("{\"options\": {\"temperature\": \"hot\"}}",
              "option \"temperature\" must be of type number, not string");
    map_fails("{\"options\": {\"top_k\": 0.5}}", "\"top_k\" must be of type integer");
    map_fails("{\"options\": {\"stop\": [\"a\", 1]}}", "\"stop\" must be of type []string");
    map_fails("{\"options\": [1]}", "options must be an object");
}

static void test_format(void **state)
{
    (void)state;
    map_ok("{\"format\": \"json\"}", "{\"response_format\": {\"type\": \"json_object\"}}");
    map_ok("{\"format\": \"\"}", "{}");
    map_ok("{\"format\": null}", "{}");
    map_ok("{\"format\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}}",
           "{\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
           "\"format\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": "
           "\"integer\"}}}}}}");
    map_fails("{\"format\": \"yaml\"}", "invalid format");
    map_fails("{\"format\": 3}", "invalid format");
}

static void test_extensions(void **state)
{
    (void)state;
    map_ok("{\"grammar\": \"root ::= \\\"a\\\"\", \"logit_bias\": {\"2\": -100},"
           " \"tool_choice\": \"required\", \"parallel_tool_calls\": false, \"keep_alive\": \"5m\","
           " \"model\": \"m\"}",
           "{\"grammar\": \"root ::= \\\"a\\\"\", \"logit_bias\": {\"2\": -100},"
           " \"tool_choice\": \"required\", \"parallel_tool_calls\": false}");
}

static void test_options_alloc_failures(void **state)
{
    (void)state;
    json_t *req = test_json_parse(
        "{\"options\": {\"temperature\": 0.5, \"stop\": [\"x\"], \"num_predict\": 9},"
        " \"format\": {\"type\": \"object\"}, \"grammar\": \"root ::= \\\"a\\\"\"}");
    int64_t base = mem_live_count();
    bool succeeded = false;
    for (int64_t n = 0; n < 200 && !succeeded; n++) {
        mem_fail_after(n);
        struct api_fail f = {0};
        json_t *body = NULL;
        bool ok = ollama_options_to_body(req, &body, &f);
        mem_fail_after(-1);
        if (ok) {
            succeeded = true;
            assert_int_equal(json_object_size(body), 5);
            json_decref(body);
        } else {
            assert_null(body);
            assert_int_equal(f.status, 500);
        }
        assert_int_equal(mem_live_count(), base);
    }
    assert_true(succeeded);
    json_decref(req);
}

static void test_ndjson_append(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    assert_int_equal(ndjson_append(&b, json_pack("{s:s, s:b}", "status", "a\nb", "done", 1)),
                     ERR_OK);
    assert_int_equal(ndjson_append(&b, json_pack("{s:i}", "n", 2)), ERR_OK);
    // One object per line: a newline inside a string is escaped, never raw.
    const char want[] = "{\"status\":\"a\\nb\",\"done\":true}\n{\"n\":2}\n";
    assert_int_equal(b.len, sizeof want - 1);
    assert_memory_equal(b.data, want, b.len);
    assert_int_equal(ndjson_append(&b, NULL), ERR_NOMEM);
    buf_deinit(&b);
}

struct producer {
    int calls;
    bool *freed;
};

/* Nothing on the first call (held-back text), a line on the second, the last on the third. */
static enum sse_status produce(void *ctx, struct buf *out, int timeout_ms)
{
    (void)timeout_ms;
    struct producer *p = ctx;
    p->calls++;
    if (p->calls == 1) return SSE_MORE;
    ndjson_append(out, json_pack("{s:i, s:b}", "i", p->calls, "done", p->calls == 3));
    return p->calls == 3 ? SSE_END : SSE_MORE;
}

static void producer_free(void *ctx)
{
    struct producer *p = ctx;
    *p->freed = true;
}

static void test_ndjson_stream(void **state)
{
    (void)state;
    bool freed = false;
    struct producer p = {0, &freed};
    struct api_response resp;
    memset(&resp, 0, sizeof resp);
    ndjson_respond(&resp, produce, producer_free, &p, "{\"first\":true}\n");
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.content_type, "application/x-ndjson");
    struct buf all;
    buf_init(&all);
    char chunk[7]; // small reads: lines arrive in pieces, as the HTTP pump reads them
    long n;
    while ((n = resp.stream.read(resp.stream.cls, chunk, sizeof chunk)) != -1) {
        assert_true(n > 0);
        buf_append(&all, chunk, (size_t)n);
    }
    const char want[] = "{\"first\":true}\n{\"i\":2,\"done\":false}\n{\"i\":3,\"done\":true}\n";
    assert_int_equal(all.len, sizeof want - 1);
    assert_memory_equal(all.data, want, all.len);
    assert_false(freed);
    resp.stream.free(resp.stream.cls);
    assert_true(freed);
    buf_deinit(&all);
}

static void test_names(void **state)
{
    (void)state;
    char out[64];
    ollama_name_of("small", out, sizeof out);
    assert_string_equal(out, "small:latest");
    ollama_name_of("qwen2.5:0.5b", out, sizeof out);
    assert_string_equal(out, "qwen2.5:0.5b");
    ollama_name_of("host:5000/org/model", out, sizeof out); // a port is not a tag
    assert_string_equal(out, "host:5000/org/model:latest");
    // Hugging Face names as Ollama takes them; :latest is the hub's default choice.
    assert_true(ollama_hub_ref("hf.co/org/repo:Q4_K_M", out, sizeof out));
    assert_string_equal(out, "org/repo:Q4_K_M");
    assert_true(ollama_hub_ref("huggingface.co/org/repo:latest", out, sizeof out));
    assert_string_equal(out, "org/repo");
    assert_true(ollama_hub_ref("hf.co/org/repo", out, sizeof out));
    assert_string_equal(out, "org/repo");
    assert_false(ollama_hub_ref("qwen2.5:0.5b", out, sizeof out));
    assert_false(ollama_hub_ref("registry.ollama.ai/library/x", out, sizeof out));
    assert_false(ollama_hub_ref("hf.co/org/repo:Q8_0", out, 8)); // does not fit
    json_t *body = test_json_parse("{\"name\": \"m:1b\"}");
    struct api_fail f = {0};
    assert_string_equal(ollama_request_name(body, &f), "m:1b");
    json_decref(body);
    body = test_json_parse("{\"model\": 5}");
    assert_null(ollama_request_name(body, &f));
    assert_int_equal(f.status, 400);
    json_decref(body);
}

static void test_image_mime(void **state)
{
    (void)state;
    assert_string_equal(ollama_image_mime("iVBORw0KGgoAAAANSUhEUg"), "image/png");
    assert_string_equal(ollama_image_mime("/9j/4AAQSkZJRg"), "image/jpeg");
    assert_string_equal(ollama_image_mime("R0lGODlhAQABAA"), "image/gif");
    assert_string_equal(ollama_image_mime("UklGRiQAAABXRUJQ"), "image/webp");
    assert_string_equal(ollama_image_mime("AAAA"), "image/png");
}

static void test_messages(void **state)
{
    (void)state;
    json_t *msgs = test_json_parse(
        "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
        " {\"role\": \"user\", \"content\": \"What is it?\", \"images\": [\"/9j/AAAA\"]},"
        " {\"role\": \"assistant\", \"content\": \"\", \"thinking\": \"hmm\", \"tool_calls\":"
        "   [{\"function\": {\"name\": \"look\", \"arguments\": {\"x\": 1, \"y\": \"z\"}}}]},"
        " {\"role\": \"tool\", \"content\": \"a cat\", \"tool_name\": \"look\"}]");
    struct api_fail f = {0};
    json_t *out = ollama_messages_to_chat(msgs, &f);
    assert_non_null(out);
    assert_json_eq(
        out, "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
             " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"What is it?\"},"
             "   {\"type\": \"image_url\", \"image_url\": {\"url\": "
             "\"data:image/jpeg;base64,/9j/AAAA\"}}]},"
             " {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"hmm\","
             "  \"tool_calls\": [{\"id\": \"call_0\", \"type\": \"function\", \"function\":"
             "   {\"name\": \"look\", \"arguments\": \"{\\\"x\\\":1,\\\"y\\\":\\\"z\\\"}\"}}]},"
             " {\"role\": \"tool\", \"content\": \"a cat\", \"name\": \"look\", \"tool_call_id\": "
             "\"look\"}]");
    json_decref(out);
    json_decref(msgs);
    static const char *const bad[] = {
        "[{\"role\": \"wizard\", \"content\": \"x\"}]",
        "[{\"role\": \"user\", \"content\": 5}]",
        "[{\"role\": \"user\", \"content\": \"x\", \"images\": [5]}]",
        "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"arguments\": {}}}]}]",
        "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", "
        "\"arguments\": \"{}\"}}]}]",
        "{\"role\": \"user\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *m = test_json_parse(bad[i]);
        struct api_fail e = {0};
        assert_null(ollama_messages_to_chat(m, &e));
        assert_int_equal(e.status, 400);
        json_decref(m);
    }
}

static void test_tool_call_json(void **state)
{
    (void)state;
    char name[] = "get_weather", args[] = "{\"city\":\"Paris\"}", id[] = "call_x";
    struct toolcall tc = {name, args, id};
    json_t *j = ollama_tool_call_json(&tc, 2);
    assert_json_eq(j, "{\"id\": \"call_x\", \"function\": {\"index\": 2, \"name\": "
                      "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}");
    json_decref(j);
    char broken[] = "[1]"; // not an object: still a valid answer
    struct toolcall tb = {name, broken, id};
    j = ollama_tool_call_json(&tb, 0);
    assert_json_eq(json_object_get(json_object_get(j, "function"), "arguments"), "{}");
    json_decref(j);
}

static void test_think_and_stream(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        int want; // -2: a 400
    } cases[] = {
        {"{}", -1},
        {"{\"think\": true}", 1},
        {"{\"think\": false}", 0},
        {"{\"think\": \"high\"}", 1},
        {"{\"think\": \"low\"}", 1},
        {"{\"think\": \"max\"}", 1},
        {"{\"think\": \"extreme\"}", -2},
        {"{\"think\": 1}", -2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *b = test_json_parse(cases[i].body);
        struct api_fail f = {0};
        int think = 9;
        bool ok = ollama_think_parse(b, &think, &f);
        assert_int_equal(ok, cases[i].want != -2);
        if (ok) assert_int_equal(think, cases[i].want);
        json_decref(b);
    }
    json_t *b = test_json_parse("{\"stream\": \"yes\"}");
    struct api_fail f = {0};
    bool is_stream = false;
    assert_false(ollama_stream_parse(b, &is_stream, &f));
    json_decref(b);
    b = test_json_parse("{}");
    assert_true(ollama_stream_parse(b, &is_stream, &f));
    assert_true(is_stream); // Ollama streams unless told not to
    json_decref(b);
}

static void test_time_and_errors(void **state)
{
    (void)state;
    char t[OLLAMA_TIME_CAP];
    ollama_time_unix(0, t);
    assert_string_equal(t, "1970-01-01T00:00:00Z");
    ollama_time_unix(1796170215, t);
    assert_string_equal(t, "2026-12-02T00:10:15Z");
    ollama_time_now(t); // "…:SS.fffZ" with 1 to 9 fraction digits, none trailing zero
    size_t len = strlen(t);
    assert_true(len >= 20 && len <= 30 && t[len - 1] == 'Z');
    const char *dot = strchr(t, '.');
    if (dot) assert_true(t[len - 2] != '0' && len - (size_t)(dot - t) - 2 <= 9);
    json_t *e = api_error_ollama_json("model 'x' not found");
    assert_json_eq(e, "{\"error\": \"model 'x' not found\"}");
    json_decref(e);
    struct api_response resp;
    memset(&resp, 0, sizeof resp);
    struct api_fail f = {.status = 429};
    snprintf(f.message, sizeof f.message, "busy");
    ollama_fail_respond(&f, &resp);
    assert_int_equal(resp.status, 429);
    assert_int_equal(resp.n_headers, 1);
    assert_string_equal(resp.headers[0].name, "Retry-After");
    buf_deinit(&resp.body);
}

static void *json_mem_alloc(size_t n)
{
    return mem_alloc(n);
}

int main(void)
{
    json_set_alloc_funcs(json_mem_alloc, mem_free); // jansson's allocations become injectable
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling_options),
        cmocka_unit_test(test_num_predict),
        cmocka_unit_test(test_accepted_not_applied),
        cmocka_unit_test(test_type_errors),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_extensions),
        cmocka_unit_test(test_options_alloc_failures),
        cmocka_unit_test(test_ndjson_append),
        cmocka_unit_test(test_ndjson_stream),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_image_mime),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_tool_call_json),
        cmocka_unit_test(test_think_and_stream),
        cmocka_unit_test(test_time_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
