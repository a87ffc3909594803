/* api/native_prompt and api/metrics: llama.cpp's prompt shapes (string, ids, mixed, list of
 * one, {prompt_string}), its logit_bias forms, the Prometheus text, and the llama-server
 * flags of server/config that feed the native endpoints. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/metrics.h"
#include "api/native/native_prompt.h"
#include "server/config.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fake tokenizer: one token per byte (id = byte value + 10), BOS = 1 when add_special;
 * parse_special turns the text "<s>" into id 1. Records the flags of the last call. */
struct fake_tok {
    int n_calls;
    bool last_add_special, last_parse_special;
};

static int fake_encode(const void *ctx, struct str text, bool add_special, bool parse_special,
                       struct tok_ids *out)
{
    struct fake_tok *ft = (struct fake_tok *)(uintptr_t)ctx; // test-only: counts calls
    ft->n_calls++;
    ft->last_add_special = add_special;
    ft->last_parse_special = parse_special;
    if (add_special && tok_ids_push(out, 1) != ERR_OK) return ERR_NOMEM;
    for (size_t i = 0; i < text.len; i++) {
        if (parse_special && text.len - i >= 3 && memcmp(text.ptr + i, "<s>", 3) == 0) {
            if (tok_ids_push(out, 1) != ERR_OK) return ERR_NOMEM;
            i += 2;
            continue;
        }
        if (tok_ids_push(out, (unsigned char)text.ptr[i] + 10) != ERR_OK) return ERR_NOMEM;
    }
    return ERR_OK;
}

static struct fake_tok ft_state;
static const struct native_tokenizer fake = {
    .encode = fake_encode, .ctx = &ft_state, .n_vocab = 300};

/* Parses JSON text as a prompt; returns the rc and fills ids/f. */
static int parse(const char *json, bool add_special, struct tok_ids *ids, struct api_fail *f)
{
    json_error_t jerr;
    json_t *j = json_loads(json, JSON_DECODE_ANY, &jerr);
    assert_non_null(j);
    tok_ids_init(ids);
    memset(f, 0, sizeof *f);
    int rc = native_prompt_parse(j, "prompt", &fake, add_special, true, ids, f);
    json_decref(j);
    return rc;
}

static void assert_ids(const struct tok_ids *ids, const int32_t *want, size_t n)
{
    assert_int_equal(ids->n_ids, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids->ids[i], want[i]);
}

/* A prompt that cannot fit the context is refused before its text is encoded: a string
 * longer than the bound, or more text after the context is used up. */
static void test_prompt_context_bound(void **state)
{
    (void)state;
    const struct native_tokenizer bounded = {
        .encode = fake_encode, .ctx = &ft_state, .n_vocab = 300, .n_ctx = 4, .text_bytes_max = 8};
    static const char *const over[] = {"\"123456789\"", "{\"prompt_string\": \"123456789\"}",
                                       "[1, 2, 3, 4, \"a\"]", "[1, \"123456789\"]", NULL};
    static const char *const fits[] = {"\"12345678\"", "[1, 2, 3, \"a\"]", "[1, 2, 3, 4, 5]", NULL};
    for (int k = 0; k < 2; k++) {
        for (const char *const *p = k ? fits : over; *p; p++) {
            json_t *j = json_loads(*p, JSON_DECODE_ANY, NULL);
            struct tok_ids ids;
            tok_ids_init(&ids);
            struct api_fail f = {0};
            int rc = native_prompt_parse(j, "prompt", &bounded, false, true, &ids, &f);
            if (k) {
                assert_int_equal(rc, ERR_OK);
            } else {
                assert_int_not_equal(rc, ERR_OK);
                assert_string_equal(f.code, "context_length_exceeded");
                assert_non_null(strstr(f.message, "more than 4 tokens"));
            }
            tok_ids_deinit(&ids);
            json_decref(j);
        }
    }
}

static void test_prompt_string_and_ids(void **state)
{
    (void)state;
    struct tok_ids ids;
    struct api_fail f;
    assert_int_equal(parse("\"ab\"", true, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){1, 'a' + 10, 'b' + 10}, 3);
    tok_ids_deinit(&ids);

    // Token arrays are taken as given: no BOS even with add_special.
    assert_int_equal(parse("[5, 6, 299]", true, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){5, 6, 299}, 3);
    tok_ids_deinit(&ids);

    // A list of one prompt is that prompt; {"prompt_string"} is its text.
    assert_int_equal(parse("[[7, 8]]", true, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){7, 8}, 2);
    tok_ids_deinit(&ids);
    assert_int_equal(parse("[\"a\"]", true, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){1, 'a' + 10}, 2);
    tok_ids_deinit(&ids);
    assert_int_equal(parse("{\"prompt_string\": \"a\"}", false, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){'a' + 10}, 1);
    tok_ids_deinit(&ids);

    // Special tokens written in the text are parsed.
    assert_int_equal(parse("\"<s>a\"", false, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){1, 'a' + 10}, 2);
    tok_ids_deinit(&ids);
}

static void test_prompt_mixed(void **state)
{
    (void)state;
    struct tok_ids ids;
    struct api_fail f;
    // Only a string in first position gets add_special (llama.cpp's tokenize_mixed).
    assert_int_equal(parse("[\"a\", 5, \"b\"]", true, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){1, 'a' + 10, 5, 'b' + 10}, 4);
    assert_false(ft_state.last_add_special);
    tok_ids_deinit(&ids);
    assert_int_equal(parse("[5, \"a\"]", true, &ids, &f), ERR_OK);
    assert_ids(&ids, (const int32_t[]){5, 'a' + 10}, 2);
    tok_ids_deinit(&ids);
}

static void test_prompt_errors(void **state)
{
    (void)state;
    struct tok_ids ids;
    struct api_fail f;
    const struct {
        const char *json;
        const char *code;
    } cases[] = {
        {"[1, 300]", "invalid_value"}, // outside the vocab
        {"[-1]", "invalid_value"},
        {"[]", "invalid_value"},             // empty
        {"[\"a\", \"b\"]", "invalid_value"}, // two prompts
        {"[[1], [2]]", "invalid_value"},
        {"7", "invalid_type"},
        {"true", "invalid_type"},
        {"[1, 2.5]", "invalid_type"},
        {"[1, null]", "invalid_type"},
        {"{\"x\": 1}", "invalid_type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = parse(cases[i].json, true, &ids, &f);
        assert_int_not_equal(rc, ERR_OK);
        assert_int_equal(f.status, 400);
        assert_string_equal(f.code, cases[i].code);
        assert_string_equal(f.param, "prompt");
        tok_ids_deinit(&ids);
    }
    tok_ids_init(&ids);
    memset(&f, 0, sizeof f);
    assert_int_not_equal(native_prompt_parse(NULL, "prompt", &fake, true, true, &ids, &f), ERR_OK);
    assert_string_equal(f.code, "missing_required_parameter");
    tok_ids_deinit(&ids);
}

static bool bias(const char *json, struct gen_params *g, struct api_fail *f)
{
    json_error_t jerr;
    json_t *j = json_loads(json, JSON_DECODE_ANY, &jerr);
    assert_non_null(j);
    memset(g, 0, sizeof *g);
    memset(f, 0, sizeof *f);
    bool ok = native_logit_bias_parse(j, &fake, g, f);
    json_decref(j);
    return ok;
}

static void test_logit_bias_forms(void **state)
{
    (void)state;
    struct gen_params *g = mem_alloc(sizeof *g);
    assert_non_null(g);
    struct api_fail f;
    assert_true(bias("[[15, 1.5], [16, false]]", g, &f));
    assert_int_equal(g->n_logit_bias, 2);
    assert_int_equal(g->logit_bias[0].token, 15);
    assert_true(fabsf(g->logit_bias[0].bias - 1.5f) < 1e-6f);
    assert_true(isinf(g->logit_bias[1].bias) && g->logit_bias[1].bias < 0);

    // Text biases every token of the text, tokenized without BOS and with specials as text.
    assert_true(bias("[[\"ab\", -2]]", g, &f));
    assert_int_equal(g->n_logit_bias, 2);
    assert_int_equal(g->logit_bias[0].token, 'a' + 10);
    assert_int_equal(g->logit_bias[1].token, 'b' + 10);
    assert_false(ft_state.last_add_special);
    assert_false(ft_state.last_parse_special);

    // Objects: decimal keys are ids, other keys text; -100 bans.
    assert_true(bias("{\"42\": -100, \"c\": 3}", g, &f));
    assert_int_equal(g->n_logit_bias, 2);
    assert_int_equal(g->logit_bias[0].token, 42);
    assert_true(isinf(g->logit_bias[0].bias));
    assert_int_equal(g->logit_bias[1].token, 'c' + 10);

    assert_true(bias("null", g, &f));
    assert_int_equal(g->n_logit_bias, 0);
    mem_free(g);
}

static void test_logit_bias_errors(void **state)
{
    (void)state;
    struct gen_params *g = mem_alloc(sizeof *g);
    assert_non_null(g);
    struct api_fail f;
    const char *bad[] = {
        "3",           "\"x\"",          "[[1]]",         "[[1, 2, 3]]",
        "[1]",         "[[1, \"big\"]]", "[[1, 101]]",    "[[300, 1]]",
        "[[null, 1]]", "{\"1\": true}",  "{\"5\": 1000}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(bias(bad[i], g, &f));
        assert_int_equal(f.status, 400);
        assert_string_equal(f.param, "logit_bias");
    }
    // The total is bounded.
    struct buf b;
    buf_init(&b);
    buf_append_cstr(&b, "[");
    for (int i = 0; i < GEN_MAX_LOGIT_BIAS + 1; i++)
        buf_printf(&b, "%s[%d, 1]", i ? "," : "", i % 300);
    buf_append_cstr(&b, "]");
    assert_false(bias(b.data, g, &f));
    assert_int_equal(f.status, 400);
    buf_deinit(&b);
    mem_free(g);
}

/* Every non-comment line is `name{labels} value`; returns the value of one series or NAN. */
static double sample_value(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        assert_non_null(end); // every line ends with a newline
        if (line[0] != '#') {
            const char *sp = memchr(line, ' ', (size_t)(end - line));
            assert_non_null(sp);
            if ((size_t)(sp - line) == n && memcmp(line, series, n) == 0)
                return strtod(sp + 1, NULL);
        }
        line = end + 1;
    }
    return NAN;
}

static void test_metrics_counters_and_text(void **state)
{
    (void)state;
    struct metrics m;
    metrics_init(&m);
    struct request_timings t = {
        .n_prompt = 10, .n_cached = 4, .n_predicted = 20, .prompt_ms = 500, .predicted_ms = 2000};
    metrics_request_started(&m);
    metrics_request_finished(&m, &t);
    metrics_request_started(&m);
    t.n_predicted = 1;
    metrics_request_finished(&m, &t);
    metrics_request_rejected(&m, METRICS_REJECT_QUEUE_FULL);
    metrics_request_started(NULL); // no-ops
    metrics_request_finished(NULL, &t);

    struct metrics_snapshot s;
    metrics_snapshot_take(&m, &s);
    assert_int_equal(s.prompt_tokens, 20);
    assert_int_equal(s.prompt_cached, 8); // counted apart from the evaluated ones
    assert_int_equal(s.predicted_tokens, 21);
    assert_int_equal(s.n_decode, (1 + 19) + (1 + 0));
    assert_int_equal(s.n_tokens_max, 34);
    assert_int_equal(s.requests, 2);
    s.requests_processing = 1;
    s.requests_deferred = 3;

    struct metrics_model models[] = {
        {.id = "a\"b", .queue_depth = 3, .n_idle = 1, .n_busy = 1},
        {.id = "tiny", .queue_depth = 0, .n_idle = 2},
    };
    struct buf out;
    buf_init(&out);
    assert_int_equal(metrics_format(&s, models, 2, &out), ERR_OK);
    const char *txt = out.data;
    assert_true(fabs(sample_value(txt, "llamacpp:prompt_tokens_total") - 20) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:tokens_predicted_total") - 21) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:prompt_seconds_total") - 1.0) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:prompt_tokens_seconds") - 20.0) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:predicted_tokens_seconds") - 21.0 / 4.0) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:requests_processing") - 1) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:requests_deferred") - 3) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:n_decode_total") - 21) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:prompt_tokens_cached_total") - 8) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamacpp:spec_decode_num_drafts_total")) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamapi_requests_rejected_total{reason=\"queue_full\"}") -
                     1) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamapi_requests_rejected_total{reason=\"unloading\"}")) <
                1e-9);
    // Label values are escaped.
    assert_true(fabs(sample_value(txt, "llamapi_queue_depth{model=\"a\\\"b\"}") - 3) < 1e-9);
    assert_true(fabs(sample_value(txt, "llamapi_instances{model=\"tiny\",state=\"idle\"}") - 2) <
                1e-9);
    assert_true(fabs(sample_value(txt, "llamapi_instances{model=\"a\\\"b\",state=\"busy\"}") - 1) <
                1e-9);
    assert_non_null(strstr(txt, "# TYPE llamacpp:prompt_tokens_total counter\n"));
    assert_non_null(strstr(txt, "# TYPE llamacpp:requests_processing gauge\n"));
    assert_non_null(strstr(txt, "# TYPE llamapi_instances gauge\n"));
    buf_deinit(&out);

    // A fresh server: no division by zero.
    struct metrics_snapshot zero = {0};
    buf_init(&out);
    assert_int_equal(metrics_format(&zero, NULL, 0, &out), ERR_OK);
    assert_true(fabs(sample_value(out.data, "llamacpp:prompt_tokens_seconds")) < 1e-9);
    buf_deinit(&out);
}

static void test_metrics_format_nomem(void **state)
{
    (void)state;
    struct metrics_snapshot s = {0};
    struct metrics_model mm = {.id = "m"};
    for (int n = 0;; n++) {
        struct buf out;
        buf_init(&out);
        mem_fail_after(n);
        int rc = metrics_format(&s, &mm, 1, &out);
        mem_fail_after(-1);
        buf_deinit(&out);
        if (rc == ERR_OK) break;
        assert_int_equal(rc, ERR_NOMEM);
        assert_true(n < 1000);
    }
}

/* Every allocation of the parsers fails in turn: an error, nothing leaked, never a crash. */
static void test_native_prompt_nomem(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *prompt = json_loads("[\"abc\", 5, \"de\"]", 0, &jerr);
    json_t *lb = json_loads("[[\"xy\", 1], [7, false], {\"a\": 1}]", 0, &jerr);
    json_t *lb_obj = json_loads("{\"12\": 1, \"pq\": -1}", 0, &jerr);
    assert_non_null(prompt);
    assert_non_null(lb);
    assert_non_null(lb_obj);
    struct gen_params *g = mem_alloc(sizeof *g);
    assert_non_null(g);
    int64_t live = mem_live_count();
    for (int n = 0;; n++) {
        struct tok_ids ids;
        tok_ids_init(&ids);
        struct api_fail f = {0};
        mem_fail_after(n);
        int rc = native_prompt_parse(prompt, "prompt", &fake, true, true, &ids, &f);
        memset(g, 0, sizeof *g);
        bool ok = native_logit_bias_parse(lb_obj, &fake, g, &f);
        mem_fail_after(-1);
        tok_ids_deinit(&ids);
        assert_int_equal(mem_live_count(), live);
        if (rc == ERR_OK && ok) break;
        assert_true(rc == ERR_OK || f.status == 500);
        assert_true(n < 1000);
    }
    struct api_fail f = {0};
    memset(g, 0, sizeof *g);
    assert_false(native_logit_bias_parse(lb, &fake, g, &f)); // a nested object is not a pair
    mem_free(g);
    json_decref(prompt);
    json_decref(lb);
    json_decref(lb_obj);
}

static void test_utf8_sanitize(void **state)
{
    (void)state;
    const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        {"abc", 3, "abc"},
        {"\xc3\xa1", 2, "\xc3\xa1"},                                 // á
        {"\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80"},                 // U+1F600
        {"a\xc3", 2, "a\xef\xbf\xbd"},                               // truncated
        {"\x80x", 2, "\xef\xbf\xbdx"},                               // lone continuation
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 // overlong
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, // surrogate
        {"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, // > U+10FFFF
        {"", 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct buf out;
        buf_init(&out);
        assert_int_equal(native_utf8_sanitize(cases[i].in, cases[i].len, &out), ERR_OK);
        assert_int_equal(out.len, strlen(cases[i].want));
        assert_memory_equal(out.len ? out.data : "", cases[i].want, out.len);
        buf_deinit(&out);
    }
}

static int parse_args(struct server_config *c, int argc, char **argv, struct errmsg *e)
{
    config_defaults(c);
    errmsg_clear(e);
    return config_parse(c, argc, argv, e);
}

static void test_llama_server_flags(void **state)
{
    (void)state;
    struct server_config c;
    struct errmsg e;
    char *argv[] = {"x",
                    "--temp",
                    "0.25",
                    "--top-k",
                    "5",
                    "--top-p",
                    "0.5",
                    "--min-p",
                    "0.1",
                    "--repeat-penalty",
                    "1.2",
                    "-n",
                    "33",
                    "-s",
                    "4294967295",
                    "--metrics",
                    "--no-slots",
                    "-ngl",
                    "99",
                    "-fa",
                    "-b",
                    "64",
                    "-ub",
                    "32",
                    "--jinja",
                    "--pooling",
                    "cls",
                    "--embedding",
                    "--chat-template",
                    "chatml",
                    "--reasoning-format",
                    "deepseek",
                    "-cb",
                    "--no-ui",
                    "--models-max",
                    "3",
                    "--no-models-autoload"};
    assert_int_equal(parse_args(&c, (int)(sizeof argv / sizeof argv[0]), argv, &e),
                     CONFIG_PARSE_OK);
    assert_true(fabsf(c.gen_defaults.temperature - 0.25f) < 1e-6f);
    assert_int_equal(c.gen_defaults.top_k, 5);
    assert_true(fabsf(c.gen_defaults.top_p - 0.5f) < 1e-6f);
    assert_true(fabsf(c.gen_defaults.min_p - 0.1f) < 1e-6f);
    assert_true(fabsf(c.gen_defaults.repeat_penalty - 1.2f) < 1e-6f);
    assert_int_equal(c.gen_defaults.max_tokens, 33);
    assert_true(c.gen_defaults.seed == 4294967295LL);
    assert_true(c.metrics_enabled);
    assert_true(c.slots_disabled);
    assert_int_equal(c.gen_defaults.n_batch, 64); // "-fa" without a value did not swallow "-b"
    assert_int_equal(c.n_ubatch, 32);
    assert_string_equal(c.pooling, "cls");
    assert_true(c.force_embedding);
    assert_string_equal(c.chat_template, "chatml");
    assert_string_equal(c.reasoning_format, "deepseek");
    assert_int_equal(c.models_max, 3);
    assert_true(c.no_models_autoload);
    assert_true(c.is_webui_disabled); // --no-ui
    config_deinit(&c);

    // Defaults are llama.cpp's.
    char *none[] = {"x"};
    assert_int_equal(parse_args(&c, 1, none, &e), CONFIG_PARSE_OK);
    assert_true(fabsf(c.gen_defaults.temperature - 0.8f) < 1e-6f);
    assert_int_equal(c.gen_defaults.top_k, 40);
    assert_int_equal(c.gen_defaults.max_tokens, -1);
    assert_int_equal(c.gen_defaults.n_batch, 2048); // llama-server's -b
    assert_false(c.metrics_enabled);
    assert_false(c.slots_disabled);
    assert_false(c.is_webui_disabled); // the chat page is on by default
    config_deinit(&c);

    char *slots[] = {"x", "--no-slots", "--slots"};
    assert_int_equal(parse_args(&c, 3, slots, &e), CONFIG_PARSE_OK);
    assert_false(c.slots_disabled);
    config_deinit(&c);

    // --reranking is an embedding model with rank pooling, whatever --pooling said.
    char *rerank[] = {"x", "--reranking", "--pooling", "mean"};
    assert_int_equal(parse_args(&c, 4, rerank, &e), CONFIG_PARSE_OK);
    assert_true(c.reranking);
    assert_true(c.force_embedding);
    assert_string_equal(c.pooling, "rank");
    config_deinit(&c);
    char *no_rerank[] = {"x", "--pooling", "cls"};
    assert_int_equal(parse_args(&c, 3, no_rerank, &e), CONFIG_PARSE_OK);
    assert_false(c.force_embedding);
    assert_string_equal(c.pooling, "cls");
    config_deinit(&c);
}

static void test_llama_server_flag_errors(void **state)
{
    (void)state;
    struct server_config c;
    struct errmsg e;
    char *bad[][3] = {
        {"x", "--temp", "hot"},           {"x", "--temp", "3"},   {"x", "--top-p", "1.5"},
        {"x", "--pooling", "sideways"},   {"x", "-s", "-2"},      {"x", "--top-k", "1e3"},
        {"x", "--reasoning-format", "x"}, {"x", "--temp", "nan"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse_args(&c, 3, bad[i], &e), ERR_INVALID);
        assert_non_null(strstr(e.msg, bad[i][1]));
        config_deinit(&c);
    }
}

static void test_llama_arg_environment(void **state)
{
    (void)state;
    struct server_config c;
    struct errmsg e;
    setenv("LLAMA_ARG_CTX_SIZE", "777", 1);
    setenv("LLAMA_ARG_TEMPERATURE", "0.3", 1);
    setenv("LLAMA_ARG_ENDPOINT_SLOTS", "0", 1);
    setenv("LLAMA_ARG_ENDPOINT_METRICS", "1", 1);
    setenv("LLAMA_ARG_PORT", "1234", 1);
    setenv("LLAMAPI_PORT", "4321", 1); // ours win over llama-server's
    char *argv[] = {"x"};
    assert_int_equal(parse_args(&c, 1, argv, &e), CONFIG_PARSE_OK);
    assert_int_equal(c.n_ctx, 777);
    assert_true(fabsf(c.gen_defaults.temperature - 0.3f) < 1e-6f);
    assert_true(c.slots_disabled);
    assert_true(c.metrics_enabled);
    assert_int_equal(c.port, 4321);
    config_deinit(&c);
    char *flag[] = {"x", "-c", "99"}; // flags win over both
    assert_int_equal(parse_args(&c, 3, flag, &e), CONFIG_PARSE_OK);
    assert_int_equal(c.n_ctx, 99);
    config_deinit(&c);
    setenv("LLAMA_ARG_TOP_K", "many", 1);
    assert_int_equal(parse_args(&c, 1, argv, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "LLAMA_ARG_TOP_K"));
    config_deinit(&c);
    unsetenv("LLAMA_ARG_TOP_K");
    unsetenv("LLAMA_ARG_CTX_SIZE");
    unsetenv("LLAMA_ARG_TEMPERATURE");
    unsetenv("LLAMA_ARG_ENDPOINT_SLOTS");
    unsetenv("LLAMA_ARG_ENDPOINT_METRICS");
    unsetenv("LLAMA_ARG_PORT");
    unsetenv("LLAMAPI_PORT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prompt_string_and_ids),
        cmocka_unit_test(test_prompt_context_bound),
        cmocka_unit_test(test_prompt_mixed),
        cmocka_unit_test(test_prompt_errors),
        cmocka_unit_test(test_logit_bias_forms),
        cmocka_unit_test(test_logit_bias_errors),
        cmocka_unit_test(test_metrics_counters_and_text),
        cmocka_unit_test(test_metrics_format_nomem),
        cmocka_unit_test(test_native_prompt_nomem),
        cmocka_unit_test(test_utf8_sanitize),
        cmocka_unit_test(test_llama_server_flags),
        cmocka_unit_test(test_llama_server_flag_errors),
        cmocka_unit_test(test_llama_arg_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
