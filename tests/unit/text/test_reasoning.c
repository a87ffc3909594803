/* text/reasoning: recorded-style outputs per family, in one go and under every chunking;
 * outputs that start inside the block; detection and prompt-opening on the real templates and
 * their golden renders. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "text/reasoning.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rs_case {
    const char *label;
    enum reasoning_format fmt;
    bool starts_inside;
    const char *text;
    const char *reasoning; // NULL: none
    const char *content;   // NULL: none
};

#define THINK     REASONING_FORMAT_THINK
#define SEED      REASONING_FORMAT_SEED
#define COMMAND_R REASONING_FORMAT_COMMAND_R
#define MISTRAL   REASONING_FORMAT_MISTRAL
#define APRIEL    REASONING_FORMAT_APRIEL
#define NONE      REASONING_FORMAT_NONE
#define HARMONY   REASONING_FORMAT_HARMONY

static const struct rs_case cases[] = {
    {"qwen3", THINK, false,
     "<think>\nThe user asks for 2+2. That is 4.\n</think>\n\nThe answer is 4.",
     "The user asks for 2+2. That is 4.", "The answer is 4."},
    {"no block", THINK, false, "Hello! How can I help?", NULL, "Hello! How can I help?"},
    {"empty block", THINK, false, "<think>\n\n</think>\n\nHi", NULL, "Hi"},
    {"leading whitespace", THINK, false, "\n\n<think>a  b</think>  c ", "a  b", "c "},
    {"starts inside (deepseek r1, qwen3.5)", THINK, true,
     "Let me think.\nOK, 17 is prime.\n</think>\n\nYes, 17 is prime.",
     "Let me think.\nOK, 17 is prime.", "Yes, 17 is prime."},
    {"starts inside, never closed", THINK, true, "Still thinking when max_tokens hit ",
     "Still thinking when max_tokens hit", NULL},
    {"unclosed block", THINK, false, "<think>\nstep one\nstep two", "step one\nstep two", NULL},
    {"marker later is content", THINK, false, "Answer: wrap it in <think> tags.</think>", NULL,
     "Answer: wrap it in <think> tags.</think>"},
    {"partial open at end", THINK, false, "<thi", NULL, "<thi"},
    {"partial close at end", THINK, false, "<think>abc </thi", "abc </thi", NULL},
    {"second block is content", THINK, false, "<think>a</think>b<think>c</think>", "a",
     "b<think>c</think>"},
    {"utf-8", THINK, false, "<think>考虑一下……二加二等于四。</think>答案是四。",
     "考虑一下……二加二等于四。", "答案是四。"},
    {"seed-oss", SEED, false,
     "<seed:think>\nThe budget allows a short plan.\n</seed:think>Here is the plan.",
     "The budget allows a short plan.", "Here is the plan."},
    {"seed ignores plain think", SEED, false, "<think>x</think>", NULL, "<think>x</think>"},
    {"command r7b", COMMAND_R, false,
     "<|START_THINKING|>I will look up the weather.<|END_THINKING|><|START_RESPONSE|>It is "
     "sunny.<|END_RESPONSE|>",
     "I will look up the weather.", "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>"},
    {"magistral", MISTRAL, false, "[THINK]Hmm, 3 * 7 = 21.[/THINK]\n21", "Hmm, 3 * 7 = 21.", "21"},
    {"apriel", APRIEL, false,
     "The user wants a haiku about rain.\nFive, seven, five.\n[BEGIN FINAL RESPONSE]\nSoft rain "
     "on the roof",
     "The user wants a haiku about rain.\nFive, seven, five.", "Soft rain on the roof"},
    {"none", NONE, false, "<think>x</think> y", NULL, "<think>x</think> y"},
    {"gpt-oss", HARMONY, false,
     "<|channel|>analysis<|message|>User greets. Reply briefly.<|end|><|start|>assistant"
     "<|channel|>final<|message|>Hello! How can I help?",
     "User greets. Reply briefly.", "Hello! How can I help?"},
    {"gpt-oss final only", HARMONY, false, "<|channel|>final<|message|> Hi there", NULL,
     "Hi there"},
    {"gpt-oss unclosed analysis", HARMONY, false, "<|channel|>analysis<|message|>thinking ",
     "thinking", NULL},
    {"gpt-oss partial header at end", HARMONY, false,
     "<|channel|>analysis<|message|>a<|end|><|start|>assist", "a", "<|start|>assist"},
    {"gpt-oss tool call is content", HARMONY, false,
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":"
     "\"Paris\"}",
     NULL,
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":"
     "\"Paris\"}"},
};

#define N_CASES (sizeof cases / sizeof cases[0])

static void check(const struct rs_case *c, const char *r, const char *content)
{
    const char *wr = c->reasoning ? c->reasoning : "", *wc = c->content ? c->content : "";
    if (strcmp(r ? r : "", wr) != 0)
        fail_msg("%s: reasoning \"%s\", want \"%s\"", c->label, r ? r : "", wr);
    if (strcmp(content ? content : "", wc) != 0)
        fail_msg("%s: content \"%s\", want \"%s\"", c->label, content ? content : "", wc);
}

static void test_split_whole_outputs(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_CASES; k++) {
        const struct rs_case *c = &cases[k];
        struct reasoning_result r;
        assert_int_equal(reasoning_split(c->fmt, c->starts_inside, c->text, strlen(c->text), &r),
                         ERR_OK);
        check(c, r.reasoning, r.content);
        assert_int_equal(r.reasoning == NULL, c->reasoning == NULL);
        assert_int_equal(r.content == NULL, c->content == NULL);
        reasoning_result_deinit(&r);
    }
}

static void assert_utf8_complete(struct str s)
{
    if (s.len == 0) return;
    size_t i = s.len;
    while (i > 0 && ((unsigned char)s.ptr[i - 1] & 0xC0) == 0x80)
        i--;
    assert_true(i > 0);
    unsigned char c = (unsigned char)s.ptr[i - 1];
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    assert_int_equal(s.len - (i - 1), need);
}

static void take(const struct reasoning_delta *d, struct buf *r, struct buf *c)
{
    assert_utf8_complete(d->reasoning);
    assert_utf8_complete(d->content);
    if (d->reasoning.len) {
        assert_int_equal(c->len, 0); // reasoning never follows content
        assert_int_equal(buf_append(r, d->reasoning.ptr, d->reasoning.len), ERR_OK);
    }
    assert_int_equal(buf_append(c, d->content.ptr, d->content.len), ERR_OK);
}

static void run_stream(const struct rs_case *c, const size_t *cuts, int n_cuts)
{
    struct reasoning_stream *s = NULL;
    assert_int_equal(reasoning_stream_new(c->fmt, c->starts_inside, &s), ERR_OK);
    struct buf r, ct;
    buf_init(&r);
    buf_init(&ct);
    assert_int_equal(buf_append(&r, "", 0), ERR_OK);
    assert_int_equal(buf_append(&ct, "", 0), ERR_OK);
    struct reasoning_delta d;
    size_t len = strlen(c->text), prev = 0;
    for (int k = 0; k <= n_cuts; k++) {
        size_t end = k < n_cuts ? cuts[k] : len;
        assert_int_equal(reasoning_stream_feed(s, c->text + prev, end - prev, &d), ERR_OK);
        take(&d, &r, &ct);
        prev = end;
    }
    assert_int_equal(reasoning_stream_finish(s, &d), ERR_OK);
    take(&d, &r, &ct);
    check(c, r.data, ct.data);
    assert_int_equal(reasoning_stream_feed(s, "x", 1, &d), ERR_INVALID);
    buf_deinit(&r);
    buf_deinit(&ct);
    reasoning_stream_free(s);
}

static void test_stream_every_chunking(void **state)
{
    (void)state;
    size_t cuts[256];
    for (size_t k = 0; k < N_CASES; k++) {
        size_t len = strlen(cases[k].text);
        assert_true(len < 256);
        for (size_t i = 0; i <= len; i++) {
            size_t one[1] = {i};
            run_stream(&cases[k], one, 1);
            for (size_t j = i; j <= len; j += 3) {
                size_t two[2] = {i, j};
                run_stream(&cases[k], two, 2);
            }
        }
        for (size_t i = 0; i < len; i++)
            cuts[i] = i + 1;
        run_stream(&cases[k], cuts, (int)len);
    }
}

static uint64_t rng_next(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* Random outputs from markers, their prefixes, UTF-8 and whitespace: streaming under a random
 * chunking equals the one-shot split, for every format and both starting states. */
static void test_random_stream_equals_oneshot(void **state)
{
    (void)state;
    static const char *frag[] = {
        "<think>",
        "</think>",
        "<thi",
        "</th",
        "<seed:think>",
        "</seed:think>",
        "<|START_THINKING|>",
        "<|END_THINKING|>",
        "[THINK]",
        "[/THINK]",
        "[BEGIN FINAL RESPONSE]",
        "[BEGIN",
        " ",
        "\n",
        "word",
        "é",
        "考虑",
        "<",
        "[",
    };
    const int n_frag = (int)(sizeof frag / sizeof frag[0]);
    uint64_t x = 99;
    char text[256];
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = 0;
        for (int k = (int)(rng_next(&x) % 10); k > 0; k--) {
            const char *f = frag[rng_next(&x) % n_frag];
            memcpy(text + len, f, strlen(f));
            len += strlen(f);
        }
        text[len] = '\0';
        enum reasoning_format fmt = (enum reasoning_format)(rng_next(&x) % 6);
        bool inside = rng_next(&x) % 2;
        struct reasoning_result r;
        assert_int_equal(reasoning_split(fmt, inside, text, len, &r), ERR_OK);
        struct rs_case c = {"random", fmt, inside, text, r.reasoning, r.content};
        size_t cuts[6];
        int n_cuts = (int)(rng_next(&x) % 6);
        for (int i = 0; i < n_cuts; i++) {
            cuts[i] = (i ? cuts[i - 1] : 0) + (len ? rng_next(&x) % (len + 1) : 0) / 3;
            cuts[i] = cuts[i] > len ? len : cuts[i];
        }
        run_stream(&c, cuts, n_cuts);
        reasoning_result_deinit(&r);
    }
}

static void test_stream_holds_partial_markers(void **state)
{
    (void)state;
    struct reasoning_stream *s = NULL;
    assert_int_equal(reasoning_stream_new(THINK, false, &s), ERR_OK);
    struct reasoning_delta d;
    assert_int_equal(reasoning_stream_feed(s, "<th", 3, &d), ERR_OK);
    assert_int_equal(d.reasoning.len + d.content.len, 0);
    assert_false(reasoning_stream_is_inside(s));
    assert_int_equal(reasoning_stream_feed(s, "ink>Plan: add. </th", 19, &d), ERR_OK);
    assert_true(reasoning_stream_is_inside(s));
    assert_int_equal(d.reasoning.len, 10);
    assert_memory_equal(d.reasoning.ptr, "Plan: add. ", 10);
    assert_int_equal(reasoning_stream_feed(s, "ink>\n\n4", 7, &d), ERR_OK);
    assert_false(reasoning_stream_is_inside(s));
    assert_int_equal(d.reasoning.len, 0);
    assert_int_equal(d.content.len, 1);
    assert_memory_equal(d.content.ptr, "4", 1);
    reasoning_stream_free(s);
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

static void test_detect_on_real_templates(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        enum reasoning_format fmt;
    } t[] = {
        {"Qwen-Qwen3-0.6B.jinja", THINK},
        {"Qwen-QwQ-32B.jinja", THINK},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", THINK},
        {"HuggingFaceTB-SmolLM3-3B.jinja", THINK},
        {"ByteDance-Seed-OSS.jinja", SEED},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", COMMAND_R},
        {"Apriel-1.6-15b-Thinker-fixed.jinja", APRIEL},
        {"openai-gpt-oss-120b.jinja", HARMONY},
        {"microsoft-Phi-3.5-mini-instruct.jinja", NONE},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", NONE},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", NONE},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", NONE},
    };
    assert_int_equal(reasoning_format_detect(NULL), NONE);
    char path[256];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(path, sizeof path, "../shared/templates/%s", t[i].file);
        char *src = read_file(path);
        if (!src) {
            printf("skip: %s not found\n", path);
            skip();
        }
        if (reasoning_format_detect(src) != t[i].fmt)
            fail_msg("%s: detected %d, want %d", t[i].file, reasoning_format_detect(src), t[i].fmt);
        free(src);
    }
}

/* The golden renders say which generation prompts leave the model inside <think>. */
static void test_prompt_opens_on_golden_renders(void **state)
{
    (void)state;
    static const struct {
        const char *file, *case_name;
        bool opens;
    } t[] = {
        {"Qwen3.5-4B.golden.json", "user_only", true},
        {"Qwen3.5-4B.golden.json", "thinking_off", false},
        {"Qwen-Qwen3-0.6B.golden.json", "user_only", false},
        {"llama-cpp-deepseek-r1.golden.json", "user_only", true},
    };
    char path[256];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(path, sizeof path, "../shared/templates/%s", t[i].file);
        json_t *root = json_load_file(path, 0, NULL);
        if (!root) {
            printf("skip: %s not found\n", path);
            skip();
        }
        json_t *cs = json_object_get(root, "cases");
        const char *out = NULL;
        for (size_t k = 0; k < json_array_size(cs); k++) {
            json_t *c = json_array_get(cs, k);
            if (strcmp(json_string_value(json_object_get(c, "name")), t[i].case_name) == 0)
                out = json_string_value(json_object_get(c, "output"));
        }
        if (!out) fail_msg("%s: no case %s", t[i].file, t[i].case_name);
        assert_int_equal(reasoning_prompt_opens(THINK, out, strlen(out)), t[i].opens);
        json_decref(root);
    }
    assert_true(reasoning_prompt_opens(APRIEL, "", 0));
    assert_false(reasoning_prompt_opens(NONE, "<think>", 7));
    assert_true(reasoning_prompt_opens(MISTRAL, "[INST]q[/INST][THINK]\n", 22));
}

static void test_allocation_failures_and_invalid(void **state)
{
    (void)state;
    int64_t live = mem_live_count();
    const struct rs_case *c = &cases[0];
    int n_ok = 0;
    for (int64_t n = 0; n < 12; n++) {
        struct reasoning_result r;
        mem_fail_after(n);
        int rc = reasoning_split(c->fmt, false, c->text, strlen(c->text), &r);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            n_ok++;
            check(c, r.reasoning, r.content);
            reasoning_result_deinit(&r);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
            assert_null(r.reasoning);
            assert_null(r.content);
        }
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(n_ok > 0 && n_ok < 12);
    struct reasoning_stream *s = NULL;
    assert_int_equal(reasoning_stream_new((enum reasoning_format)99, false, &s), ERR_INVALID);
    assert_null(s);
    reasoning_stream_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_whole_outputs),
        cmocka_unit_test(test_stream_every_chunking),
        cmocka_unit_test(test_random_stream_equals_oneshot),
        cmocka_unit_test(test_stream_holds_partial_markers),
        cmocka_unit_test(test_detect_on_real_templates),
        cmocka_unit_test(test_prompt_opens_on_golden_renders),
        cmocka_unit_test(test_allocation_failures_and_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
