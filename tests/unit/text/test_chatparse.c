/* text/chatparse: the stop -> reasoning -> tool-call pipeline on recorded-style outputs under
 * every 2-piece split and byte by byte; stops that end a message mid-call; errors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "text/chatparse.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <string.h>

struct cp_case {
    const char *label;
    struct chatparse_params p;
    const char *text;
    const char *reasoning, *content; // "" when none
    int stop_index;
    int n_calls;
    const char *name, *args; // first call
};

static const char *stops_obs[] = {"\nObservation:"};
static const char *stops_stop[] = {"STOP", "<|im_end|>"};

static const struct cp_case cases[] = {
    {"qwen3 thinking then call",
     {NULL, 0, REASONING_FORMAT_THINK, false, true, TOOLCALL_FORMAT_HERMES},
     "<think>\nThe user wants the weather; call the tool.\n</think>\n\n<tool_call>\n{\"name\": "
     "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
     "The user wants the weather; call the tool.",
     "",
     -1,
     1,
     "get_weather",
     "{\"city\":\"Paris\"}"},
    {"deepseek style, prompt opened the block, stop string",
     {stops_obs, 1, REASONING_FORMAT_THINK, true, true, TOOLCALL_FORMAT_GENERIC},
     "2 + 2 is basic.\n</think>\n\nThe answer is 4.\nObservation: ignored tail",
     "2 + 2 is basic.",
     "The answer is 4.",
     0,
     0,
     NULL,
     NULL},
    {"stop ends an unterminated call",
     {stops_stop, 2, REASONING_FORMAT_NONE, false, true, TOOLCALL_FORMAT_HERMES},
     "Calling.\n<tool_call>{\"name\":\"f\",\"arguments\":{\"x\":1}}<|im_end|> trailing",
     "",
     "Calling.",
     1,
     1,
     "f",
     "{\"x\":1}"},
    {"stop inside reasoning",
     {stops_stop, 2, REASONING_FORMAT_THINK, false, true, TOOLCALL_FORMAT_HERMES},
     "<think>I should STOP here</think>answer",
     "I should",
     "",
     0,
     0,
     NULL,
     NULL},
    {"tools off keeps tags as content",
     {NULL, 0, REASONING_FORMAT_THINK, false, false, TOOLCALL_FORMAT_HERMES},
     "<think>x</think>Use <tool_call>{\"name\":\"f\"}</tool_call> literally.",
     "x",
     "Use <tool_call>{\"name\":\"f\"}</tool_call> literally.",
     -1,
     0,
     NULL,
     NULL},
    {"mistral call after text, utf-8",
     {stops_stop, 2, REASONING_FORMAT_NONE, false, true, TOOLCALL_FORMAT_MISTRAL},
     "Je vérifie la météo à Zürich.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Zürich\"}",
     "",
     "Je vérifie la météo à Zürich.",
     -1,
     1,
     "get_weather",
     "{\"city\":\"Zürich\"}"},
    {"gpt-oss analysis, preamble, later analysis, call (harmony)",
     {NULL, 0, REASONING_FORMAT_HARMONY, false, true, TOOLCALL_FORMAT_HARMONY},
     "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
     "commentary<|message|>One moment.<|end|><|start|>assistant<|channel|>analysis<|message|> "
     "Paris it is.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
     "<|constrain|>json<|message|>{\"city\": \"Paris\"}",
     "Need the weather.Paris it is.",
     "One moment.",
     -1,
     1,
     "get_weather",
     "{\"city\":\"Paris\"}"},
    {"gpt-oss final answer with tools offered (harmony)",
     {NULL, 0, REASONING_FORMAT_HARMONY, false, true, TOOLCALL_FORMAT_HARMONY},
     "<|channel|>analysis<|message|>No tool needed.<|end|><|start|>assistant<|channel|>final"
     "<|message|>It is 4.",
     "No tool needed.",
     "It is 4.",
     -1,
     0,
     NULL,
     NULL},
};

#define N_CASES (sizeof cases / sizeof cases[0])

struct acc {
    struct buf r, c;
    int stop_index, n_calls;
    const char *name0;
};

static void take(struct acc *a, const struct chatparse_delta *d)
{
    assert_int_equal(buf_append(&a->r, d->reasoning.ptr, d->reasoning.len), ERR_OK);
    for (int i = 0; i < d->n_ev; i++) {
        const struct toolcall_event *e = &d->ev[i];
        if (e->kind == TOOLCALL_EVENT_CONTENT) {
            assert_int_equal(buf_append(&a->c, e->content.ptr, e->content.len), ERR_OK);
        } else {
            assert_int_equal(e->index, a->n_calls);
            a->n_calls++;
        }
    }
    if (d->stop_index >= 0) {
        assert_int_equal(a->stop_index, -1);
        a->stop_index = d->stop_index;
    }
}

static void run(const struct cp_case *k, const size_t *cuts, int n_cuts)
{
    struct chatparse *c = NULL;
    assert_int_equal(chatparse_new(&k->p, &c, NULL), ERR_OK);
    struct acc a = {.stop_index = -1};
    buf_init(&a.r);
    buf_init(&a.c);
    assert_int_equal(buf_append(&a.r, "", 0), ERR_OK);
    assert_int_equal(buf_append(&a.c, "", 0), ERR_OK);
    struct chatparse_delta d;
    size_t len = strlen(k->text), prev = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        assert_int_equal(chatparse_feed(c, k->text + prev, end - prev, &d), ERR_OK);
        take(&a, &d);
        prev = end;
    }
    assert_int_equal(chatparse_finish(c, &d), ERR_OK);
    take(&a, &d);
    if (strcmp(a.r.data, k->reasoning) != 0 || strcmp(a.c.data, k->content) != 0)
        fail_msg("%s: reasoning \"%s\" content \"%s\"", k->label, a.r.data, a.c.data);
    assert_int_equal(a.stop_index, k->stop_index);
    assert_int_equal(chatparse_is_stopped(c), k->stop_index >= 0);
    int n = 0;
    const struct toolcall *calls = chatparse_calls(c, &n);
    assert_int_equal(n, k->n_calls);
    assert_int_equal(a.n_calls, k->n_calls);
    if (n > 0) {
        assert_string_equal(calls[0].name, k->name);
        assert_string_equal(calls[0].arguments, k->args);
    }
    buf_deinit(&a.r);
    buf_deinit(&a.c);
    chatparse_free(c);
}

static void test_every_split_and_byte_by_byte(void **state)
{
    (void)state;
    size_t cuts[512];
    for (size_t k = 0; k < N_CASES; k++) {
        size_t len = strlen(cases[k].text);
        assert_true(len < 512);
        for (size_t i = 0; i <= len; i++) {
            size_t one[1] = {i};
            run(&cases[k], one, 1);
        }
        for (size_t i = 0; i < len; i++)
            cuts[i] = i + 1;
        run(&cases[k], cuts, (int)len);
    }
}

static void test_after_stop_nothing_more(void **state)
{
    (void)state;
    struct chatparse_params p = {stops_stop, 2, REASONING_FORMAT_NONE, false, false, 0};
    struct chatparse *c = NULL;
    assert_int_equal(chatparse_new(&p, &c, NULL), ERR_OK);
    struct chatparse_delta d;
    assert_int_equal(chatparse_feed(c, "abc STOP def", 12, &d), ERR_OK);
    assert_int_equal(d.stop_index, 0);
    assert_true(chatparse_is_stopped(c));
    assert_int_equal(chatparse_feed(c, "more", 4, &d), ERR_OK);
    assert_int_equal(d.n_ev + (int)d.reasoning.len, 0);
    assert_int_equal(d.stop_index, -1);
    assert_int_equal(chatparse_finish(c, &d), ERR_OK);
    assert_int_equal(d.n_ev, 0);
    chatparse_free(c);
}

static void test_errors(void **state)
{
    (void)state;
    const char *many[17];
    for (int i = 0; i < 17; i++)
        many[i] = "x";
    struct chatparse_params p = {many, 17, REASONING_FORMAT_NONE, false, false, 0};
    struct chatparse *c = NULL;
    struct errmsg e;
    assert_int_equal(chatparse_new(&p, &c, &e), ERR_LIMIT);
    assert_non_null(strstr(e.msg, "stop"));
    p.n_stops = 1;
    p.reasoning_format = (enum reasoning_format)77;
    assert_int_equal(chatparse_new(&p, &c, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "format"));
    assert_null(c);
    chatparse_free(NULL);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    int64_t live = mem_live_count();
    const struct cp_case *k = &cases[0];
    bool saw_ok = false;
    for (int64_t n = 0; n < 200 && !saw_ok; n++) {
        struct chatparse *c = NULL;
        mem_fail_after(n);
        int rc = chatparse_new(&k->p, &c, NULL);
        struct chatparse_delta d;
        size_t len = strlen(k->text), half = len / 2;
        if (rc == ERR_OK) rc = chatparse_feed(c, k->text, half, &d);
        if (rc == ERR_OK) rc = chatparse_feed(c, k->text + half, len - half, &d);
        if (rc == ERR_OK) rc = chatparse_finish(c, &d);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            saw_ok = true;
            int n_calls;
            chatparse_calls(c, &n_calls);
            assert_int_equal(n_calls, 1);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
            if (c) // sticky
                assert_int_equal(chatparse_finish(c, &d), ERR_NOMEM);
        }
        chatparse_free(c);
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(saw_ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_split_and_byte_by_byte),
        cmocka_unit_test(test_after_stop_nothing_more),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
