/* text/toolcall: recorded-style outputs of each family, parsed in one go and streamed under
 * every 2-piece split, byte by byte and sampled 3-piece splits; malformed calls as content;
 * format detection from the real templates; allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "text/reasoning.h"
#include "text/toolcall/toolcall.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct want_call {
    const char *name, *args, *id;
};

struct tc_case {
    const char *label;
    enum toolcall_format fmt;
    const char *text;
    const char *content; // NULL: no content
    int n_calls;
    struct want_call calls[3];
};

/* The reasoning a case's harmony analysis messages carry (the other cases have none). */
static const struct {
    const char *label, *reasoning;
} case_reasonings[] = {
    {"harmony later analysis is reasoning", "The city is Paris."},
};

#define HERMES  TOOLCALL_FORMAT_HERMES
#define LLAMA3  TOOLCALL_FORMAT_LLAMA3
#define MISTRAL TOOLCALL_FORMAT_MISTRAL
#define GENERIC TOOLCALL_FORMAT_GENERIC
#define HARMONY TOOLCALL_FORMAT_HARMONY
#define LFM2    TOOLCALL_FORMAT_LFM2

static const struct tc_case cases[] = {
    // gpt-oss harmony: what is left after the reasoning stage took the first analysis message
    {"harmony call, recipient in the channel",
     HARMONY,
     "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
     "<|message|>{\"location\": \"Paris, France\"}",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris, France\"}", NULL}}},
    {"harmony call, recipient in the role (template form, output start)",
     HARMONY,
     " to=functions.get_weather<|channel|>commentary json<|message|>{\"location\":\"Tokyo\"}"
     "<|call|>",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Tokyo\"}", NULL}}},
    {"harmony call, recipient in the role after analysis",
     HARMONY,
     "<|start|>assistant to=functions.lookup<|channel|>commentary <|constrain|>json<|message|>"
     "{\"q\": {\"a\": [1, 2]}, \"s\": \"}\"}",
     NULL,
     1,
     {{"lookup", "{\"q\":{\"a\":[1,2]},\"s\":\"}\"}", NULL}}},
    {"harmony preamble then call",
     HARMONY,
     "<|channel|>commentary<|message|>Checking the weather.<|end|><|start|>assistant<|channel|>"
     "commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Oslo\"}"
     "<|call|>",
     "Checking the weather.",
     1,
     {{"get_weather", "{\"location\":\"Oslo\"}", NULL}}},
    {"harmony call on the analysis channel",
     HARMONY,
     "<|channel|>analysis to=functions.search <|constrain|>json<|message|>{\"query\":\"東京\"}",
     NULL,
     1,
     {{"search", "{\"query\":\"東京\"}", NULL}}},
    {"harmony two calls",
     HARMONY,
     "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|>"
     "<|start|>assistant<|channel|>commentary to=functions.b json<|message|>{\"x\":true}<|call|>",
     NULL,
     2,
     {{"a", "{}", NULL}, {"b", "{\"x\":true}", NULL}}},
    {"harmony final text", HARMONY, "Hello! How can I help?", "Hello! How can I help?", 0, {{0}}},
    {"harmony stray commentary before final",
     HARMONY,
     "<|channel|>commentary to=assistant<|channel|>final<|message|>Done.",
     "Done.",
     0,
     {{0}}},
    {"harmony undeclared recipient dropped",
     HARMONY,
     "<|channel|>analysis to=browser.search code<|message|>{\"query\":\"x\"}<|call|>",
     NULL,
     0,
     {{0}}},
    {"harmony malformed arguments are content",
     HARMONY,
     "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{not json",
     "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{not json",
     0,
     {{0}}},
    {"harmony later analysis is reasoning",
     HARMONY,
     "<|channel|>commentary<|message|>Let me think again.<|end|><|start|>assistant<|channel|>"
     "analysis<|message|> The city is Paris. <|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
     "Let me think again.",
     1,
     {{"get_weather", "{\"city\":\"Paris\"}", NULL}}},
    {"harmony partial header at the end is content",
     HARMONY,
     "Sure.<|start|>assist",
     "Sure.<|start|>assist",
     0,
     {{0}}},
    // harmony outputs recorded in the reference's own parser tests (after our reasoning stage)
    {"harmony recorded: role recipient, analysis channel",
     HARMONY,
     " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}",
     NULL,
     1,
     {{"special_function", "{\"arg1\":1}", NULL}}},
    {"harmony recorded: channel recipient without a content type",
     HARMONY,
     "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}",
     NULL,
     1,
     {{"special_function", "{\"arg1\":1}", NULL}}},
    {"harmony recorded: role recipient with a constraint",
     HARMONY,
     " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
     NULL,
     1,
     {{"special_function", "{\"arg1\":1}", NULL}}},
    {"harmony recorded: edit call after analysis",
     HARMONY,
     "<|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json<|message|>"
     "{\"oldString\": \"if (part < railCount - 1) {\", \"newString\": \"if (part < 4) {\", "
     "\"replaceAll\": false}",
     NULL,
     1,
     {{"edit",
       "{\"oldString\":\"if (part < railCount - 1) {\",\"newString\":\"if (part < 4) {\","
       "\"replaceAll\":false}",
       NULL}}},
    {"harmony recorded: final with a constraint (structured output)",
     HARMONY,
     "<|start|>assistant<|channel|>final <|constrain|>json<|message|>{\"amount\": 123.45}",
     "{\"amount\": 123.45}",
     0,
     {{0}}},
    {"harmony recorded: built-in recipient in the role is dropped",
     HARMONY,
     "<|start|>assistant to=container.exec<|channel|>commentary<|message|>python3 -c "
     "'print(\"hello\")'",
     NULL,
     0,
     {{0}}},
    // Hermes 2 Pro / Qwen 2.5 / Qwen 3
    {"hermes one call",
     HERMES,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris, France\", "
     "\"unit\": \"celsius\"}}\n</tool_call>",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris, France\",\"unit\":\"celsius\"}", NULL}}},
    {"hermes two calls after text",
     HERMES,
     "I'll check both cities.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"location\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
     "\"arguments\": {\"location\": \"London\"}}\n</tool_call>",
     "I'll check both cities.",
     2,
     {{"get_weather", "{\"location\":\"Paris\"}", NULL},
      {"get_weather", "{\"location\":\"London\"}", NULL}}},
    {"hermes content after call",
     HERMES,
     "<tool_call>{\"name\":\"ping\",\"arguments\":{}}</tool_call>\n\nDone.",
     "Done.",
     1,
     {{"ping", "{}", NULL}}},
    {"qwen3.5 xml",
     HERMES,
     "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n"
     "<parameter=days>\n3\n</parameter>\n<parameter=note>\nline one\nline two\n</parameter>\n"
     "</function>\n</tool_call>",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\",\"days\":3,\"note\":\"line one\\nline two\"}",
       NULL}}},
    {"hermes arguments as a string",
     HERMES,
     "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"llama\\\"}\"}\n"
     "</tool_call>",
     NULL,
     1,
     {{"search", "{\"query\":\"llama\"}", NULL}}},
    {"hermes unterminated at end",
     HERMES,
     "Sure.\n<tool_call>\n{\"name\": \"x\", \"arguments\": {\"a\": [1, 2]}}",
     "Sure.",
     1,
     {{"x", "{\"a\":[1,2]}", NULL}}},
    {"hermes malformed json is content",
     HERMES,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
     "\"Paris\"\n</tool_call>",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
     "\"Paris\"\n</tool_call>",
     0,
     {{0}}},
    {"hermes no name is content",
     HERMES,
     "A <tool_call>{\"arguments\": {}}</tool_call> B",
     "A <tool_call>{\"arguments\": {}}</tool_call> B",
     0,
     {{0}}},
    {"hermes non-object arguments is content",
     HERMES,
     "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
     "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
     0,
     {{0}}},
    {"hermes plain text with angle brackets",
     HERMES,
     "Use <b>bold</b> and <tool and x < y.  ",
     "Use <b>bold</b> and <tool and x < y.  ",
     0,
     {{0}}},
    {"hermes utf-8 content",
     HERMES,
     "Température à Paris : 21 °C — 東京は晴れ。\n<tool_call>{\"name\":\"t\",\"arguments\":"
     "{\"city\":\"東京\"}}</tool_call>",
     "Température à Paris : 21 °C — 東京は晴れ。",
     1,
     {{"t", "{\"city\":\"東京\"}", NULL}}},
    {"glm 4.x arg_key",
     HERMES,
     "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
     "Checking.",
     1,
     {{"get_weather", "{\"city\":\"Paris\",\"days\":3}", NULL}}},
    {"glm without arguments",
     HERMES,
     "<tool_call>get_time</tool_call>",
     NULL,
     1,
     {{"get_time", "{}", NULL}}},
    {"hermes two objects in one block",
     HERMES,
     "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n{\"name\": \"b\", \"arguments\": "
     "{\"x\": null}}\n</tool_call>",
     NULL,
     2,
     {{"a", "{}", NULL}, {"b", "{\"x\":null}", NULL}}},
    {"hermes words in block is content",
     HERMES,
     "<tool_call>some words</tool_call>",
     "<tool_call>some words</tool_call>",
     0,
     {{0}}},
    {"hermes tag mentioned in prose",
     HERMES,
     "I'll use <tool_call> tags",
     "I'll use <tool_call> tags",
     0,
     {{0}}},
    {"glm needs the name right after the tag",
     HERMES,
     "<tool_call> get_time</tool_call>",
     "<tool_call> get_time</tool_call>",
     0,
     {{0}}},
    {"hermes bare json fallback",
     HERMES,
     "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}",
     NULL,
     1,
     {{"get_time", "{\"tz\":\"UTC\"}", NULL}}},

    // Llama 3.1 / 3.2 / 3.3
    {"llama3 json",
     LLAMA3,
     "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\"}", NULL}}},
    {"llama3 type function",
     LLAMA3,
     "\n{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"location\": "
     "\"Paris\", \"unit\": \"celsius\"}}",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\",\"unit\":\"celsius\"}", NULL}}},
    {"llama3 semicolon separated",
     LLAMA3,
     "{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {\"y\": 2}}",
     NULL,
     2,
     {{"a", "{\"x\":1}", NULL}, {"b", "{\"y\":2}", NULL}}},
    {"llama3 builtin tool",
     LLAMA3,
     "<|python_tag|>brave_search.call(query=\"current weather in Menlo Park, California\")",
     NULL,
     1,
     {{"brave_search", "{\"query\":\"current weather in Menlo Park, California\"}", NULL}}},
    {"llama3 python_tag json",
     LLAMA3,
     "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\"}", NULL}}},
    {"llama3 code interpreter",
     LLAMA3,
     "<|python_tag|>import math\nprint(math.sqrt(2))",
     NULL,
     1,
     {{"python", "{\"code\":\"import math\\nprint(math.sqrt(2))\"}", NULL}}},
    {"llama3 json answer is content", LLAMA3, "{\"answer\": 42}", "{\"answer\": 42}", 0, {{0}}},
    {"llama3 json then text is content",
     LLAMA3,
     "{\"name\": \"a\", \"parameters\": {}} is what I would call.",
     "{\"name\": \"a\", \"parameters\": {}} is what I would call.",
     0,
     {{0}}},
    {"llama3 plain",
     LLAMA3,
     "The weather in Paris is sunny, 21 °C.",
     "The weather in Paris is sunny, 21 °C.",
     0,
     {{0}}},

    // Mistral Nemo / Small 3.2 / Devstral
    {"mistral nemo array",
     MISTRAL,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}, "
     "\"id\": \"abcDEF123\"}]",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\"}", "abcDEF123"}}},
    {"mistral small 3.2 call id",
     MISTRAL,
     "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"location\": \"Paris\"}",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\"}", "a1b2c3d4e"}}},
    {"devstral two calls",
     MISTRAL,
     "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]"
     "{\"tz\": \"CET\"}",
     NULL,
     2,
     {{"get_weather", "{\"location\":\"Paris\"}", NULL}, {"get_time", "{\"tz\":\"CET\"}", NULL}}},
    {"mistral text then call",
     MISTRAL,
     "Let me look that up. [TOOL_CALLS]search[ARGS]{\"q\": \"x\"}",
     "Let me look that up.",
     1,
     {{"search", "{\"q\":\"x\"}", NULL}}},
    {"mistral bad name is content",
     MISTRAL,
     "[TOOL_CALLS]get weather now",
     "[TOOL_CALLS]get weather now",
     0,
     {{0}}},
    {"mistral unterminated array is content",
     MISTRAL,
     "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}",
     "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}",
     0,
     {{0}}},
    {"mistral bare array",
     MISTRAL,
     "[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}]",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\"}", NULL}}},
    {"mistral brackets in text",
     MISTRAL,
     "See [1] and [TOOL] notes [ARGS].",
     "See [1] and [TOOL] notes [ARGS].",
     0,
     {{0}}},

    // LFM2 / LFM2.5: a Python list of calls between its markers
    {"lfm2 one call",
     LFM2,
     "<|tool_call_start|>[get_weather(city=\"Paris\", days=3)]<|tool_call_end|>",
     NULL,
     1,
     {{"get_weather", "{\"city\":\"Paris\",\"days\":3}", NULL}}},
    {"lfm2 content then two calls",
     LFM2,
     "Let me check. <|tool_call_start|>[a(x=1.5), b(flag=True, s='it\\'s', n=None)]"
     "<|tool_call_end|>",
     "Let me check.",
     2,
     {{"a", "{\"x\":1.5}", NULL}, {"b", "{\"flag\":true,\"s\":\"it's\",\"n\":null}", NULL}}},
    {"lfm2 no arguments",
     LFM2,
     "<|tool_call_start|>[get_time()]<|tool_call_end|>",
     NULL,
     1,
     {{"get_time", "{}", NULL}}},
    {"lfm2 JSON body",
     LFM2,
     "<|tool_call_start|>[{\"name\": \"f\", \"arguments\": {\"k\": 1}}]<|tool_call_end|>",
     NULL,
     1,
     {{"f", "{\"k\":1}", NULL}}},
    {"lfm2 malformed call is content",
     LFM2,
     "<|tool_call_start|>[f(x=]<|tool_call_end|>",
     "<|tool_call_start|>[f(x=]<|tool_call_end|>",
     0,
     {{0}}},
    {"lfm2 unclosed block is content",
     LFM2,
     "<|tool_call_start|>[f(x=1)]",
     "<|tool_call_start|>[f(x=1)]",
     0,
     {{0}}},
    // Generic fallback
    {"generic object",
     GENERIC,
     "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}",
     NULL,
     1,
     {{"get_weather", "{\"location\":\"Paris\"}", NULL}}},
    {"generic array",
     GENERIC,
     " [{\"name\":\"a\",\"arguments\":{}}, {\"name\":\"b\",\"arguments\":{\"k\":\"v\"}}]\n",
     NULL,
     2,
     {{"a", "{}", NULL}, {"b", "{\"k\":\"v\"}", NULL}}},
    {"generic tool_calls wrapper",
     GENERIC,
     "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"x\": true}}]}",
     NULL,
     1,
     {{"a", "{\"x\":true}", NULL}}},
    {"generic openai shape",
     GENERIC,
     "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}}",
     NULL,
     1,
     {{"f", "{\"a\":1}", NULL}}},
    {"generic json content",
     GENERIC,
     "  {\"response\": \"hi\"}",
     "  {\"response\": \"hi\"}",
     0,
     {{0}}},
    {"generic call inside text is content",
     GENERIC,
     "Sure: {\"name\": \"a\", \"arguments\": {}}",
     "Sure: {\"name\": \"a\", \"arguments\": {}}",
     0,
     {{0}}},
    {"generic tags are content",
     GENERIC,
     "<tool_call>{\"name\":\"a\"}</tool_call>",
     "<tool_call>{\"name\":\"a\"}</tool_call>",
     0,
     {{0}}},
};

#define N_CASES (sizeof cases / sizeof cases[0])

static void check_calls(const struct tc_case *c, const struct toolcall *calls, int n)
{
    if (n != c->n_calls) fail_msg("%s: %d calls, want %d", c->label, n, c->n_calls);
    for (int i = 0; i < n; i++) {
        const struct want_call *w = &c->calls[i];
        if (strcmp(calls[i].name, w->name) != 0 || strcmp(calls[i].arguments, w->args) != 0)
            fail_msg("%s: call %d is %s %s, want %s %s", c->label, i, calls[i].name,
                     calls[i].arguments, w->name, w->args);
        if (w->id)
            assert_string_equal(calls[i].id, w->id);
        else
            assert_null(calls[i].id);
    }
}

static const char *case_reasoning(const struct tc_case *c)
{
    for (size_t i = 0; i < sizeof case_reasonings / sizeof case_reasonings[0]; i++)
        if (strcmp(c->label, case_reasonings[i].label) == 0) return case_reasonings[i].reasoning;
    return NULL;
}

static void check_reasoning(const struct tc_case *c, const char *want, const char *got)
{
    want = want ? want : "";
    if (strcmp(got ? got : "", want) != 0)
        fail_msg("%s: reasoning \"%s\", want \"%s\"", c->label, got ? got : "(null)", want);
}

static void check_content(const struct tc_case *c, const char *got)
{
    const char *want = c->content ? c->content : "";
    if (strcmp(got ? got : "", want) != 0)
        fail_msg("%s: content \"%s\", want \"%s\"", c->label, got ? got : "(null)", want);
}

static void test_parse_whole_outputs(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_CASES; k++) {
        const struct tc_case *c = &cases[k];
        struct toolcall_result r;
        assert_int_equal(toolcall_parse(c->fmt, c->text, strlen(c->text), &r), ERR_OK);
        check_content(c, r.content);
        if (!c->content) assert_null(r.content);
        check_reasoning(c, case_reasoning(c), r.reasoning);
        if (!case_reasoning(c)) assert_null(r.reasoning);
        check_calls(c, r.calls, r.n_calls);
        toolcall_result_deinit(&r);
        assert_null(r.calls);
    }
}

static void assert_utf8_complete(struct str s)
{
    size_t i = s.len;
    while (i > 0 && ((unsigned char)s.ptr[i - 1] & 0xC0) == 0x80)
        i--;
    assert_true(i > 0);
    unsigned char c = (unsigned char)s.ptr[i - 1];
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    assert_int_equal(s.len - (i - 1), need);
}

static void collect(const struct toolcall_events *ev, struct buf *content, struct buf *reasoning,
                    int *next_index)
{
    for (int i = 0; i < ev->n; i++) {
        const struct toolcall_event *e = &ev->ev[i];
        if (e->kind != TOOLCALL_EVENT_CALL) {
            struct buf *to = e->kind == TOOLCALL_EVENT_CONTENT ? content : reasoning;
            assert_true(e->content.len > 0);
            assert_utf8_complete(e->content);
            assert_int_equal(buf_append(to, e->content.ptr, e->content.len), ERR_OK);
        } else {
            assert_int_equal(e->index, *next_index);
            assert_non_null(e->call);
            (*next_index)++;
        }
    }
}

static void run_stream(const struct tc_case *c, const char *want_reasoning, const size_t *cuts,
                       int n_cuts)
{
    struct toolcall_stream *s = NULL;
    assert_int_equal(toolcall_stream_new(c->fmt, &s), ERR_OK);
    struct buf content, reasoning;
    buf_init(&content);
    buf_init(&reasoning);
    assert_int_equal(buf_append(&content, "", 0), ERR_OK);
    assert_int_equal(buf_append(&reasoning, "", 0), ERR_OK);
    struct toolcall_events ev;
    size_t len = strlen(c->text), prev = 0;
    int next_index = 0;
    for (int k = 0; k <= n_cuts; k++) {
        size_t end = k < n_cuts ? cuts[k] : len;
        assert_int_equal(toolcall_stream_feed(s, c->text + prev, end - prev, &ev), ERR_OK);
        collect(&ev, &content, &reasoning, &next_index);
        prev = end;
    }
    assert_int_equal(toolcall_stream_finish(s, &ev), ERR_OK);
    collect(&ev, &content, &reasoning, &next_index);
    check_content(c, content.data);
    check_reasoning(c, want_reasoning, reasoning.data);
    buf_deinit(&reasoning);
    int n = 0;
    const struct toolcall *calls = toolcall_stream_calls(s, &n);
    assert_int_equal(n, next_index);
    check_calls(c, calls, n);
    assert_int_equal(toolcall_stream_feed(s, "x", 1, &ev), ERR_INVALID);
    buf_deinit(&content);
    toolcall_stream_free(s);
}

static void test_stream_every_split(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_CASES; k++) {
        size_t len = strlen(cases[k].text);
        for (size_t i = 0; i <= len; i++) {
            size_t cut[1] = {i};
            run_stream(&cases[k], case_reasoning(&cases[k]), cut, 1);
        }
    }
}

static void test_stream_byte_by_byte_and_three_pieces(void **state)
{
    (void)state;
    size_t cuts[512];
    for (size_t k = 0; k < N_CASES; k++) {
        size_t len = strlen(cases[k].text);
        assert_true(len < 512);
        for (size_t i = 0; i < len; i++)
            cuts[i] = i + 1;
        run_stream(&cases[k], case_reasoning(&cases[k]), cuts, (int)len);
        for (size_t i = 0; i <= len; i += 3) {
            for (size_t j = i; j <= len; j += 5) {
                size_t cut[2] = {i, j};
                run_stream(&cases[k], case_reasoning(&cases[k]), cut, 2);
            }
        }
    }
}

/* Content is released as soon as it cannot belong to a call; marker prefixes wait. */
static void test_stream_is_incremental(void **state)
{
    (void)state;
    struct toolcall_stream *s = NULL;
    assert_int_equal(toolcall_stream_new(HERMES, &s), ERR_OK);
    struct toolcall_events ev;
    assert_int_equal(toolcall_stream_feed(s, "Checking the", 12, &ev), ERR_OK);
    assert_int_equal(ev.n, 1);
    assert_int_equal(ev.ev[0].content.len, 12);
    assert_int_equal(toolcall_stream_feed(s, " weather.\n<tool", 15, &ev), ERR_OK);
    assert_int_equal(ev.n, 1);
    assert_int_equal(ev.ev[0].content.len, 9); // " weather." (newline and "<tool" held)
    assert_memory_equal(ev.ev[0].content.ptr, " weather.", 9);
    assert_int_equal(toolcall_stream_feed(s, "_call>\n{\"name\": \"f\", ", 21, &ev), ERR_OK);
    assert_int_equal(ev.n, 0);
    const char *rest = "\"arguments\": {}}\n</tool_call>";
    assert_int_equal(toolcall_stream_feed(s, rest, strlen(rest), &ev), ERR_OK);
    assert_int_equal(ev.n, 1);
    assert_int_equal(ev.ev[0].kind, TOOLCALL_EVENT_CALL);
    assert_int_equal(ev.ev[0].index, 0);
    assert_string_equal(ev.ev[0].call->name, "f");
    assert_string_equal(ev.ev[0].call->arguments, "{}");
    assert_int_equal(toolcall_stream_finish(s, &ev), ERR_OK);
    assert_int_equal(ev.n, 0);
    toolcall_stream_free(s);

    // A prefix that stops matching the marker is released at once.
    assert_int_equal(toolcall_stream_new(MISTRAL, &s), ERR_OK);
    assert_int_equal(toolcall_stream_feed(s, "x [TOOL", 7, &ev), ERR_OK);
    assert_int_equal(ev.n, 1);
    assert_int_equal(ev.ev[0].content.len, 1);
    assert_int_equal(toolcall_stream_feed(s, "S] y", 4, &ev), ERR_OK);
    assert_int_equal(ev.n, 1);
    assert_memory_equal(ev.ev[0].content.ptr, " [TOOLS] y", 10);
    toolcall_stream_free(s);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p) p[n] = '\0';
    fclose(f);
    return p;
}

static void test_format_detect_on_real_templates(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        enum toolcall_format fmt;
    } t[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", HERMES},
        {"Qwen-Qwen3-0.6B.jinja", HERMES},
        {"Qwen3.5-4B.jinja", HERMES},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", LLAMA3},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", MISTRAL},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", MISTRAL},
        {"unsloth-mistral-Devstral-Small-2507.jinja", MISTRAL},
        {"ibm-granite-granite-4.0.jinja", HERMES},
        {"GLM-4.6.jinja", HERMES},
        {"google-gemma-2-2b-it.jinja", GENERIC},
        {"microsoft-Phi-3.5-mini-instruct.jinja", GENERIC},
        {"openai-gpt-oss-120b.jinja", HARMONY},
        {"LFM2-8B-A1B.jinja", LFM2},
        {"LFM2.5-8B-A1B.jinja", LFM2},
    };
    assert_int_equal(toolcall_format_detect(NULL), GENERIC);
    assert_string_equal(toolcall_format_name(LFM2), "lfm2");
    assert_int_equal(toolcall_format_detect("{{ messages }}"), GENERIC);
    assert_string_equal(toolcall_format_name(MISTRAL), "mistral");
    char path[256];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(path, sizeof path, "../shared/templates/%s", t[i].file);
        char *src = read_file(path);
        if (!src) {
            printf("skip: %s not found\n", path);
            skip();
        }
        if (toolcall_format_detect(src) != t[i].fmt)
            fail_msg("%s detected as %s", t[i].file,
                     toolcall_format_name(toolcall_format_detect(src)));
        free(src);
    }
}

/* The expected call of a golden case, from its context: compact arguments whether the
 * message gave an object or a string. Returns false if the case has no tool call. */
static bool golden_expected(json_t *c, char *name, size_t name_cap, char **args)
{
    json_t *msgs = json_object_get(json_object_get(c, "context"), "messages");
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *tc = json_object_get(json_array_get(msgs, i), "tool_calls");
        json_t *fn = json_object_get(json_array_get(tc, 0), "function");
        if (!fn) continue;
        snprintf(name, name_cap, "%s", json_string_value(json_object_get(fn, "name")));
        json_t *a = json_object_get(fn, "arguments");
        json_t *parsed = json_is_string(a) ? json_loads(json_string_value(a), 0, NULL) : NULL;
        *args = json_dumps(parsed ? parsed : a, JSON_COMPACT);
        json_decref(parsed);
        return true;
    }
    return false;
}

/* Cuts the first assistant turn out of a golden render, as the model would have generated it. */
static char *golden_turn(const char *out, const char *header, const char *end)
{
    const char *p = strstr(out, header);
    if (!p) return NULL;
    p += strlen(header);
    const char *q = strstr(p, end);
    return q ? strndup(p, (size_t)(q - p)) : NULL;
}

/* Parses a turn the way the api layer will: reasoning first, then tool calls on the content,
 * one shot and byte by byte. */
static void golden_check(const char *label, const char *turn, enum toolcall_format fmt,
                         bool starts_inside, const char *name, const char *args)
{
    struct reasoning_result rr;
    enum reasoning_format rf = fmt == HARMONY ? REASONING_FORMAT_HARMONY : REASONING_FORMAT_THINK;
    assert_int_equal(reasoning_split(rf, starts_inside, turn, strlen(turn), &rr), ERR_OK);
    const char *content = rr.content ? rr.content : "";
    struct toolcall_result r;
    assert_int_equal(toolcall_parse(fmt, content, strlen(content), &r), ERR_OK);
    if (r.n_calls != 1) fail_msg("%s: %d calls in \"%s\"", label, r.n_calls, turn);
    assert_string_equal(r.calls[0].name, name);
    assert_string_equal(r.calls[0].arguments, args);
    assert_null(r.content);
    struct tc_case c = {label, fmt, content, NULL, 1, {{name, args, NULL}}};
    size_t cuts[1024], len = strlen(content);
    assert_true(len < 1024);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    run_stream(&c, NULL, cuts, (int)len);
    toolcall_result_deinit(&r);
    reasoning_result_deinit(&rr);
}

/* The templates' own renders of an assistant tool call are what a model trained on them
 * writes; parsing them back must give the call that was rendered. */
static void test_golden_template_renders(void **state)
{
    (void)state;
    static const struct {
        const char *file, *header, *end;
        enum toolcall_format fmt;
        bool starts_inside; // the template opened <think> before the turn
    } t[] = {
        {"GLM-4.6", "<|assistant|>", "<|observation|>", HERMES, false},
        {"GLM-4.7-Flash", "<|assistant|>", "<|observation|>", HERMES, true},
        {"ibm-granite-granite-4.0", "<|start_of_role|>assistant<|end_of_role|>", "<|end_of_text|>",
         HERMES, false},
        {"Qwen-Qwen2.5-7B-Instruct", "<|im_start|>assistant\n", "<|im_end|>", HERMES, false},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "<|im_start|>assistant\n", "<|im_end|>",
         HERMES, false},
        {"Qwen3.5-4B", "<|im_start|>assistant\n", "<|im_end|>", HERMES, false},
        {"meta-llama-Llama-3.1-8B-Instruct", "<|start_header_id|>assistant<|end_header_id|>\n\n",
         "<|eot_id|>", LLAMA3, false},
        {"meta-llama-Llama-3.2-3B-Instruct", "<|start_header_id|>assistant<|end_header_id|>\n\n",
         "<|eot_id|>", LLAMA3, false},
        {"unsloth-mistral-Devstral-Small-2507", "[/INST]", "</s>", MISTRAL, false},
        {"openai-gpt-oss-120b", "<|start|>assistant", "<|call|>", HARMONY, false},
    };
    char path[256], name[128], label[256];
    int n_checked = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(path, sizeof path, "../shared/templates/%s.golden.json", t[i].file);
        json_t *root = json_load_file(path, 0, NULL);
        if (!root) {
            printf("skip: %s not found\n", path);
            skip();
        }
        json_t *cs = json_object_get(root, "cases");
        for (size_t k = 0; k < json_array_size(cs); k++) {
            json_t *c = json_array_get(cs, k);
            const char *cname = json_string_value(json_object_get(c, "name"));
            const char *out = json_string_value(json_object_get(c, "output"));
            char *args = NULL;
            if (!out || strncmp(cname, "tool_roundtrip", 14) != 0 ||
                !golden_expected(c, name, sizeof name, &args))
                continue;
            char *turn = golden_turn(out, t[i].header, t[i].end);
            if (!turn) fail_msg("%s/%s: no assistant turn", t[i].file, cname);
            snprintf(label, sizeof label, "%s/%s", t[i].file, cname);
            golden_check(label, turn, t[i].fmt, t[i].starts_inside, name, args);
            n_checked++;
            free(turn);
            free(args);
        }
        json_decref(root);
    }
    assert_true(n_checked >= 10);
    printf("golden tool-call renders: %d parsed back\n", n_checked);
}

static uint64_t rng_next(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* Random outputs built from markers, their prefixes, JSON fragments, UTF-8 and whitespace:
 * streaming under a random chunking must equal the one-shot parse (and never crash). */
static void test_random_outputs_stream_equals_oneshot(void **state)
{
    (void)state;
    static const char *frag[] = {
        "<tool_call>",
        "</tool_call>",
        "<tool_",
        "</tool",
        "[TOOL_CALLS]",
        "[ARGS]",
        "[CALL_ID]",
        "[TOOL",
        "<|python_tag|>",
        "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "\\",
        "{\"name\":\"g\",\"parameters\":{}}",
        "get_weather",
        "x.call(q=\"v\")",
        ";",
        " ",
        "\n",
        "é",
        "東京",
        "text ",
        "<function=f>",
        "<parameter=k>",
        "</parameter>",
        "</function>",
        "abc123def",
        "<|start|>assistant",
        "<|channel|>commentary",
        "<|channel|>analysis",
        " to=functions.f",
        " <|constrain|>json",
        "<|message|>",
        "<|end|>",
        "<|call|>",
        "<|chan",
        "<|tool_call_start|>",
        "<|tool_call_end|>",
        "<|tool_call",
        "f(a=1)",
        ", g(s='x')",
    };
    const int n_frag = (int)(sizeof frag / sizeof frag[0]);
    uint64_t x = 2026;
    char text[512];
    int n_with_calls = 0, n_with_content = 0;
    for (int iter = 0; iter < 5000; iter++) {
        size_t len = 0;
        int n = 1 + (int)(rng_next(&x) % 12);
        for (int k = 0; k < n; k++) {
            const char *f = frag[rng_next(&x) % n_frag];
            size_t fl = strlen(f);
            if (len + fl >= sizeof text) break;
            memcpy(text + len, f, fl);
            len += fl;
        }
        text[len] = '\0';
        enum toolcall_format fmt = (enum toolcall_format)(rng_next(&x) % 6);
        struct toolcall_result r;
        assert_int_equal(toolcall_parse(fmt, text, len, &r), ERR_OK);
        n_with_calls += r.n_calls > 0;
        n_with_content += r.content != NULL;
        struct tc_case c = {"random", fmt, text, r.content, r.n_calls, {{0}}};
        for (int i = 0; i < r.n_calls && i < 3; i++)
            c.calls[i] = (struct want_call){r.calls[i].name, r.calls[i].arguments, r.calls[i].id};
        if (r.n_calls <= 3) {
            size_t cuts[8];
            int n_cuts = (int)(rng_next(&x) % 8);
            for (int i = 0; i < n_cuts; i++)
                cuts[i] = len ? rng_next(&x) % (len + 1) : 0;
            for (int i = 1; i < n_cuts; i++) // sort the cut points
                for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
                    size_t t = cuts[j];
                    cuts[j] = cuts[j - 1];
                    cuts[j - 1] = t;
                }
            run_stream(&c, r.reasoning, cuts, n_cuts);
        }
        toolcall_result_deinit(&r);
    }
    printf("random outputs: %d with calls, %d with content\n", n_with_calls, n_with_content);
    assert_true(n_with_calls > 100 && n_with_content > 100);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    int64_t live = mem_live_count();
    for (size_t k = 0; k < N_CASES; k++) {
        const struct tc_case *c = &cases[k];
        bool saw_ok = false;
        for (int64_t n = 0; n < 64 && !saw_ok; n++) {
            struct toolcall_result r;
            mem_fail_after(n);
            int rc = toolcall_parse(c->fmt, c->text, strlen(c->text), &r);
            mem_fail_after(-1);
            if (rc == ERR_OK) {
                saw_ok = true;
                check_content(c, r.content);
                check_calls(c, r.calls, r.n_calls);
                toolcall_result_deinit(&r);
            } else {
                assert_int_equal(rc, ERR_NOMEM);
                assert_null(r.calls);
                assert_null(r.content);
            }
            assert_int_equal(mem_live_count(), live);
        }
        assert_true(saw_ok);
    }
}

/* Without declared tools a harmony call is dropped like any unsolicited message; the channels
 * still split. */
static void test_harmony_drop_calls(void **state)
{
    (void)state;
    static const char text[] =
        "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>"
        "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}";
    struct toolcall_stream *s = NULL;
    assert_int_equal(toolcall_stream_new(HARMONY, &s), ERR_OK);
    toolcall_stream_drop_calls(s);
    struct buf content, reasoning;
    buf_init(&content);
    buf_init(&reasoning);
    int next = 0;
    struct toolcall_events ev;
    for (size_t i = 0; i < sizeof text - 1; i++) {
        assert_int_equal(toolcall_stream_feed(s, text + i, 1, &ev), ERR_OK);
        collect(&ev, &content, &reasoning, &next);
    }
    assert_int_equal(toolcall_stream_finish(s, &ev), ERR_OK);
    collect(&ev, &content, &reasoning, &next);
    assert_int_equal(next, 0);
    assert_int_equal(content.len, 13);
    assert_memory_equal(content.data, "Let me check.", 13);
    assert_int_equal(reasoning.len, 0);
    buf_deinit(&content);
    buf_deinit(&reasoning);
    toolcall_stream_free(s);
}

static void test_invalid_format(void **state)
{
    (void)state;
    struct toolcall_stream *s = NULL;
    assert_int_equal(toolcall_stream_new((enum toolcall_format)42, &s), ERR_INVALID);
    assert_null(s);
    toolcall_stream_free(NULL);
    struct toolcall_result r;
    assert_int_equal(toolcall_parse(HERMES, "", 0, &r), ERR_OK);
    assert_null(r.content);
    assert_int_equal(r.n_calls, 0);
    toolcall_result_deinit(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_whole_outputs),
        cmocka_unit_test(test_stream_every_split),
        cmocka_unit_test(test_stream_byte_by_byte_and_three_pieces),
        cmocka_unit_test(test_stream_is_incremental),
        cmocka_unit_test(test_format_detect_on_real_templates),
        cmocka_unit_test(test_golden_template_renders),
        cmocka_unit_test(test_random_outputs_stream_equals_oneshot),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_harmony_drop_calls),
        cmocka_unit_test(test_invalid_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
