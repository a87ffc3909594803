/* server/: route matching and route families, API-key comparison, flag/environment parsing,
 * JSON body checks, and the error shape of each API family. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/errors.h"
#include "api/handlers.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/cors.h"
#include "server/http.h"
#include "server/routes.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void handler_a(const struct api_ctx *c, const struct api_request *r, struct api_response *o)
{
    (void)c, (void)r, (void)o;
}

static void handler_b(const struct api_ctx *c, const struct api_request *r, struct api_response *o)
{
    (void)c, (void)r, (void)o;
}

static const struct route sample[] = {
    {"GET", "/v1/models", handler_a, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"GET", "/v1/models/{id}", handler_b, ROUTE_BODY_NONE, false, API_FAMILY_OPENAI},
    {"POST", "/v1/models/load", handler_a, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
    {"POST", "/v1/chat/completions", handler_a, ROUTE_BODY_JSON, false, API_FAMILY_OPENAI},
};

static void test_routes(void **state)
{
    (void)state;
    const struct route *r = NULL;
    struct str param;
    char allow[64];
    size_t n = sizeof sample / sizeof sample[0];
    assert_int_equal(route_find(sample, n, "GET", "/v1/models", &r, &param, allow, 64),
                     ROUTE_MATCH_OK);
    assert_ptr_equal(r, &sample[0]);
    assert_int_equal(param.len, 0);
    assert_int_equal(route_find(sample, n, "GET", "/v1/models/org/name", &r, &param, allow, 64),
                     ROUTE_MATCH_OK);
    assert_ptr_equal(r, &sample[1]);
    assert_int_equal(param.len, 8);
    assert_memory_equal(param.ptr, "org/name", 8);
    // the exact POST route wins over the GET pattern for POST
    assert_int_equal(route_find(sample, n, "POST", "/v1/models/load", &r, &param, allow, 64),
                     ROUTE_MATCH_OK);
    assert_ptr_equal(r, &sample[2]);
    assert_int_equal(route_find(sample, n, "DELETE", "/v1/models/load", &r, &param, allow, 64),
                     ROUTE_MATCH_BAD_METHOD);
    assert_string_equal(allow, "GET, POST");
    assert_int_equal(route_find(sample, n, "GET", "/v1/chat/completions", &r, &param, allow, 64),
                     ROUTE_MATCH_BAD_METHOD);
    assert_string_equal(allow, "POST");
    assert_int_equal(route_find(sample, n, "GET", "/v1/models/", &r, &param, allow, 64),
                     ROUTE_MATCH_NO_PATH);
    assert_int_equal(route_find(sample, n, "GET", "/nope", &r, &param, allow, 64),
                     ROUTE_MATCH_NO_PATH);
}

static void test_server_table_has_public_health_only(void **state)
{
    (void)state;
    size_t n;
    const struct route *t = routes_table(&n);
    int n_public = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].is_public) {
            n_public++;
            // Health, and the chat page (a browser loads it before it knows a key).
            assert_true(strcmp(t[i].pattern, "/health") == 0 ||
                        strcmp(t[i].pattern, "/v1/health") == 0 || strcmp(t[i].pattern, "/") == 0 ||
                        strcmp(t[i].pattern, "/webui/{id}") == 0);
            assert_string_equal(t[i].method, "GET");
            assert_int_equal(t[i].body, ROUTE_BODY_NONE);
            // which models are loaded is not public: health's ?model= needs the key
            if (strstr(t[i].pattern, "health"))
                assert_string_equal(route_private_query(&t[i]), "model");
            else
                assert_null(route_private_query(&t[i]));
        }
    }
    assert_int_equal(n_public, 4);
}

/* A control byte in the path, raw or %-encoded, would end the C string libmicrohttpd routes
 * on ("/metrics%00.css" served /metrics); the query is not the path. */
static void test_path_control_bytes(void **state)
{
    (void)state;
    assert_false(route_path_has_control("/v1/models"));
    assert_false(route_path_has_control("/v1/models/org%2Fname%20x"));
    assert_false(route_path_has_control("/health?model=%00"));
    assert_false(route_path_has_control("/a%2"));
    assert_false(route_path_has_control("/a%zz"));
    assert_true(route_path_has_control("/metrics%00.css"));
    assert_true(route_path_has_control("/metrics%0a"));
    assert_true(route_path_has_control("/metrics%1F"));
    assert_true(route_path_has_control("/metrics%7f"));
    assert_true(route_path_has_control("/metrics\x01"));
    assert_true(route_path_has_control("/x%00?y"));
}

/* llama-server serves its OpenAI routes with and without the /v1 prefix. */
static void test_server_table_routes_without_v1(void **state)
{
    (void)state;
    size_t n;
    const struct route *t = routes_table(&n);
    const char *paths[] = {"/chat/completions",
                           "/completions",
                           "/embeddings",
                           "/responses",
                           "/chat/completions/input_tokens",
                           "/responses/input_tokens"};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        const struct route *r = NULL;
        struct str param;
        char allow[64];
        assert_int_equal(route_find(t, n, "POST", paths[k], &r, &param, allow, sizeof allow),
                         ROUTE_MATCH_OK);
    }
    const struct route *r = NULL;
    struct str param;
    char allow[64];
    assert_int_equal(route_find(t, n, "GET", "/models", &r, &param, allow, sizeof allow),
                     ROUTE_MATCH_OK);
    assert_int_equal(route_find(t, n, "POST", "/chat/completions", &r, &param, allow, sizeof allow),
                     ROUTE_MATCH_OK);
    assert_ptr_equal(r->handler, api_chat_completions);
}

static void test_auth(void **state)
{
    (void)state;
    assert_true(auth_key_equal("secret", 6, "secret", 6));
    assert_false(auth_key_equal("secreT", 6, "secret", 6));
    assert_false(auth_key_equal("secre", 5, "secret", 6));
    assert_false(auth_key_equal("secrets", 7, "secret", 6));
    assert_false(auth_key_equal("", 0, "secret", 6));
    char *keys[] = {"k1", "another-key"};
    assert_true(auth_request_allowed(NULL, 0, NULL, NULL));
    assert_false(auth_request_allowed(keys, 2, NULL, NULL));
    assert_true(auth_request_allowed(keys, 2, "Bearer another-key", NULL));
    assert_true(auth_request_allowed(keys, 2, "bearer k1", NULL));
    assert_false(auth_request_allowed(keys, 2, "Bearer k2", NULL));
    assert_false(auth_request_allowed(keys, 2, "k1", NULL)); // scheme required
    assert_true(auth_request_allowed(keys, 2, NULL, "k1"));
    assert_false(auth_request_allowed(keys, 2, "Basic azE=", "nope"));
    // RFC 9110 5.5: whitespace around the value is not part of it
    assert_true(auth_request_allowed(keys, 2, "Bearer k1 ", NULL));
    assert_true(auth_request_allowed(keys, 2, "Bearer \tk1\t \t", NULL));
    assert_true(auth_request_allowed(keys, 2, NULL, "k1 "));
    assert_false(auth_request_allowed(keys, 2, "Bearer k1 x", NULL));
    assert_false(auth_request_allowed(keys, 2, "Bearer  ", NULL));
}

static int parse(struct server_config *c, struct errmsg *e, int argc, char **argv)
{
    config_defaults(c);
    errmsg_clear(e);
    return config_parse(c, argc, argv, e);
}

static void test_config_flags(void **state)
{
    (void)state;
    struct server_config c;
    struct errmsg e;
    char *defaults[] = {"x"};
    assert_int_equal(parse(&c, &e, 1, defaults), CONFIG_PARSE_OK);
    assert_string_equal(c.host, "127.0.0.1");
    assert_int_equal(c.port, 9265);
    assert_int_equal(c.request_queue_size, 32);
    config_deinit(&c);

    char *ok[] = {"x", "--host", "0.0.0.0", "--port=8080",  "--api-key", "a",  "--api-key",
                  "b", "-t",     "3",       "--log-format", "json",      "-m", "/m.gguf"};
    assert_int_equal(parse(&c, &e, 14, ok), CONFIG_PARSE_OK);
    assert_string_equal(c.host, "0.0.0.0");
    assert_int_equal(c.port, 8080);
    assert_int_equal(c.n_api_keys, 2);
    assert_string_equal(c.api_keys[1], "b");
    assert_int_equal(c.n_threads, 3);
    assert_int_equal(c.log_format, LOG_FORMAT_JSON);
    assert_int_equal(c.n_model_paths, 1);
    config_deinit(&c);

    char *unknown[] = {"x", "--bogus"};
    assert_int_equal(parse(&c, &e, 2, unknown), ERR_INVALID);
    assert_non_null(strstr(e.msg, "unknown flag '--bogus'"));
    char *missing[] = {"x", "--port"};
    assert_int_equal(parse(&c, &e, 2, missing), ERR_INVALID);
    assert_non_null(strstr(e.msg, "needs a value"));
    char *range[] = {"x", "--port", "70000"};
    assert_int_equal(parse(&c, &e, 3, range), ERR_INVALID);
    assert_non_null(strstr(e.msg, "out of range"));
    char *nan[] = {"x", "--threads", "two"};
    assert_int_equal(parse(&c, &e, 3, nan), ERR_INVALID);
    char *fmt[] = {"x", "--log-format", "xml"};
    assert_int_equal(parse(&c, &e, 3, fmt), ERR_INVALID);
    char *help[] = {"x", "--help"};
    assert_int_equal(parse(&c, &e, 2, help), CONFIG_PARSE_HELP);
    config_deinit(&c);
}

/* Every llama-server flag is accepted: the ones that work set fields, tuning we do differently
 * is listed for the start-up warning, and what needs a download fails naming the flag. */
static void test_config_llama_server_flags(void **state)
{
    (void)state;
    struct server_config c;
    struct errmsg e;
    char *works[] = {"x",
                     "--predict",
                     "7",
                     "--temperature",
                     "0.5",
                     "--alias",
                     "tinyllama-2,fim,code",
                     "--tags",
                     "chat,small",
                     "--slot-save-path",
                     "/tmp/slots",
                     "--context-shift",
                     "--cors-origins",
                     "localhost",
                     "--ignore-eos",
                     "--offline",
                     "--embeddings",
                     "--log-verbose"};
    assert_int_equal(parse(&c, &e, 18, works), CONFIG_PARSE_OK);
    assert_int_equal(c.gen_defaults.max_tokens, 7);
    assert_true(c.gen_defaults.temperature > 0.49f && c.gen_defaults.temperature < 0.51f);
    assert_string_equal(c.tags, "chat,small");
    assert_string_equal(c.slot_save_path, "/tmp/slots");
    assert_true(c.gen_defaults.is_context_shift);
    assert_string_equal(c.cors_origins, "localhost");
    assert_true(c.gen_defaults.ignore_eos);
    assert_true(c.force_embedding);
    assert_int_equal(c.verbosity, 1);
    assert_string_equal(c.ignored_flags, "");
    assert_string_equal(c.alias, "tinyllama-2,fim,code");
    config_deinit(&c);

    // Tuning: accepted, named once in the warning list, values consumed ('_' reads as '-').
    char *tuning[] = {
        "x",    "-ngl", "99",   "-fa",         "on", "--kv-unified", "--backend_sampling",
        "-ctk", "q8_0", "-kvu", "--cache-ram", "0",  "--port",       "1"};
    assert_int_equal(parse(&c, &e, 14, tuning), CONFIG_PARSE_OK);
    assert_string_equal(
        c.ignored_flags,
        "--n-gpu-layers --flash-attn --backend-sampling --cache-type-k --cache-ram");
    assert_true(c.is_kv_unified);
    assert_int_equal(c.port, 1);
    config_deinit(&c);

    // Refused: a clear message naming the flag and what to do instead.
    char *mu[] = {"x", "-mu", "https://example.com/m.gguf"};
    assert_int_equal(parse(&c, &e, 3, mu), ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "--model-url: downloading"));
    assert_non_null(strstr(e.msg, "with -m"));
    config_deinit(&c);

    // The hub flags (src/hub/): stored for start-up, --offline a real setting.
    char *hf[] = {"x",        "-hf",       "ggml-org/models:Q8_0", "-hff",
                  "a/b.gguf", "--hub-url", "http://127.0.0.1:1",   "-hft",
                  "tok",      "--offline"};
    assert_int_equal(parse(&c, &e, 10, hf), CONFIG_PARSE_OK);
    assert_string_equal(c.hf_repo, "ggml-org/models:Q8_0");
    assert_string_equal(c.hf_file, "a/b.gguf");
    assert_string_equal(c.hub_url, "http://127.0.0.1:1");
    assert_string_equal(c.hf_token, "tok");
    assert_true(c.is_offline);
    char *lora[] = {"x", "--lora", "a.gguf"};
    assert_int_equal(parse(&c, &e, 3, lora), ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "LoRA"));
    config_deinit(&c);
}

static void test_cors_policy(void **state)
{
    (void)state;
    char out[64];
    // "*": the Origin is reflected with credentials (browsers refuse "*" then), else "*".
    assert_true(cors_allow_origin("*", true, "http://web.example", out, sizeof out));
    assert_string_equal(out, "http://web.example");
    assert_true(cors_allow_origin("*", false, "http://web.example", out, sizeof out));
    assert_string_equal(out, "*");
    assert_true(cors_allow_origin("*", true, NULL, out, sizeof out));
    assert_string_equal(out, "*");
    // "localhost": loopback hosts at any port, nothing else, not even look-alikes.
    const char *ok[] = {"http://localhost",       "http://localhost:8080", "http://127.0.0.1",
                        "https://127.0.0.1:3000", "http://[::1]",          "http://[::1]:3000",
                        "http://LOCALHOST"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_true(cors_allow_origin("localhost", true, ok[i], out, sizeof out));
        assert_string_equal(out, ok[i]);
    }
    const char *bad[] = {"http://web.mydomain.fr",
                         "http://evil.com",
                         "http://notlocalhost",
                         "http://localhost.evil.com",
                         "http://localhost@evil.com",
                         "http://127.0.0.1.evil.com",
                         "localhost",
                         "http://[::1",
                         ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(cors_allow_origin("localhost", true, bad[i], out, sizeof out));
    assert_false(cors_allow_origin("localhost", true, NULL, out, sizeof out));
    // A list: exact members only.
    assert_true(cors_allow_origin("http://a.test, https://b.test", true, "https://b.test", out,
                                  sizeof out));
    assert_string_equal(out, "https://b.test");
    assert_false(
        cors_allow_origin("http://a.test,https://b.test", true, "http://b.test", out, sizeof out));
    // Too long for the buffer: not reflected (never truncated).
    assert_false(cors_allow_origin("*", true, "http://a-very-long-origin-name.example.test:12345/x",
                                   out, 16));

    // --tools without --cors-origins makes the policy "localhost"; explicit origins win.
    struct server_config c;
    struct errmsg e;
    char *tools[] = {"x", "--tools", "all"};
    assert_int_equal(parse(&c, &e, 3, tools), CONFIG_PARSE_OK);
    assert_string_equal(c.cors_origins, "localhost");
    config_deinit(&c);
    char *both[] = {"x", "--cors-origins", "*", "--tools", "all", "--no-cors-credentials"};
    assert_int_equal(parse(&c, &e, 6, both), CONFIG_PARSE_OK);
    assert_string_equal(c.cors_origins, "*");
    assert_true(c.is_cors_no_credentials);
    assert_string_equal(c.cors_methods, "GET, POST, DELETE, OPTIONS");
    assert_string_equal(c.cors_headers, "*");
    config_deinit(&c);
}

static void test_config_environment_and_key_file(void **state)
{
    (void)state;
    struct server_config c;
    struct errmsg e;
    setenv("LLAMAPI_PORT", "1234", 1);
    setenv("LLAMAPI_HOST", "127.0.0.2", 1);
    char *argv1[] = {"x", "--port", "4321"}; // flags override the environment
    assert_int_equal(parse(&c, &e, 3, argv1), CONFIG_PARSE_OK);
    assert_int_equal(c.port, 4321);
    assert_string_equal(c.host, "127.0.0.2");
    config_deinit(&c);
    setenv("LLAMAPI_PORT", "zero", 1);
    char *argv0[] = {"x"};
    assert_int_equal(parse(&c, &e, 1, argv0), ERR_INVALID);
    assert_non_null(strstr(e.msg, "LLAMAPI_PORT"));
    unsetenv("LLAMAPI_PORT");
    unsetenv("LLAMAPI_HOST");

    char path[] = "/tmp/llamapi-keys-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# comment\nkey-one\n\n  \nkey-two  \r\n", f);
    fclose(f);
    char *kf[] = {"x", "--api-key-file", path};
    assert_int_equal(parse(&c, &e, 3, kf), CONFIG_PARSE_OK);
    assert_int_equal(c.n_api_keys, 2);
    assert_string_equal(c.api_keys[0], "key-one");
    assert_string_equal(c.api_keys[1], "key-two");
    config_deinit(&c);
    unlink(path);
    char *nofile[] = {"x", "--api-key-file", "/nonexistent/keys"};
    assert_int_equal(parse(&c, &e, 3, nofile), ERR_INVALID);
    assert_non_null(strstr(e.msg, "cannot open"));
    config_deinit(&c);
}

static void test_json_body(void **state)
{
    (void)state;
    json_t *j = NULL;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(http_parse_json_body("{\"a\":1}", 7, &j, &e), ERR_OK);
    json_decref(j);
    assert_int_equal(http_parse_json_body("", 0, &j, &e), ERR_FORMAT);
    assert_int_equal(http_parse_json_body("[1]", 3, &j, &e), ERR_FORMAT);
    assert_non_null(strstr(e.msg, "must be a JSON object"));
    assert_int_equal(http_parse_json_body("{\"a\":", 5, &j, &e), ERR_FORMAT);
    assert_non_null(strstr(e.msg, "line 1"));
    assert_int_equal(http_parse_json_body("{\"a\":1,\"a\":2}", 13, &j, &e), ERR_FORMAT);
    assert_int_equal(http_parse_json_body("{\"a\":NaN}", 9, &j, &e), ERR_FORMAT);
    const char bad_utf8[] = "{\"a\":\"\xff\xfe\"}";
    assert_int_equal(http_parse_json_body(bad_utf8, sizeof bad_utf8 - 1, &j, &e), ERR_FORMAT);
    char deep[300];
    memset(deep, '[', 200);
    deep[200] = '\0';
    assert_false(http_json_depth_ok(deep, 200, 64));
    assert_int_equal(http_parse_json_body(deep, 200, &j, &e), ERR_LIMIT);
    // brackets inside strings do not count, escaped quotes do not end strings
    const char *s = "{\"k\":\"[[[[\\\"[[[[\"}";
    assert_true(http_json_depth_ok(s, strlen(s), 2));
}

static void test_error_shape(void **state)
{
    (void)state;
    json_t *j = api_error_json("invalid_request_error", "model_not_found", "model", "no \xff");
    assert_non_null(j);
    json_t *err = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    assert_string_equal(json_string_value(json_object_get(err, "code")), "model_not_found");
    assert_string_equal(json_string_value(json_object_get(err, "param")), "model");
    assert_string_equal(json_string_value(json_object_get(err, "message")), "no ?");
    json_decref(j);
    j = api_error_json("server_error", NULL, NULL, "x");
    assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "param")));
    assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "code")));
    json_decref(j);
}

/* Every route names its API family, and the families are where their APIs live. */
static void test_server_table_families(void **state)
{
    (void)state;
    size_t n;
    const struct route *t = routes_table(&n);
    for (size_t i = 0; i < n; i++) {
        assert_int_not_equal(t[i].family, API_FAMILY_NONE);
        enum api_family want = API_FAMILY_OPENAI;
        if (strncmp(t[i].pattern, "/v1/messages", 12) == 0) want = API_FAMILY_ANTHROPIC;
        if (strncmp(t[i].pattern, "/api/", 5) == 0) want = API_FAMILY_OLLAMA;
        assert_int_equal(t[i].family, want);
    }
    // A path no route matches takes the family of its neighbours, when they agree.
    assert_int_equal(route_family(t, n, "/api/nothing"), API_FAMILY_OLLAMA);
    assert_int_equal(route_family(t, n, "/api/"), API_FAMILY_OLLAMA);
    assert_int_equal(route_family(t, n, "/v1/messages/x/y/"), API_FAMILY_ANTHROPIC);
    assert_int_equal(route_family(t, n, "/v1/messagesx"), API_FAMILY_OPENAI);
    assert_int_equal(route_family(t, n, "/v1/nope"), API_FAMILY_OPENAI);
    assert_int_equal(route_family(t, n, "/api"), API_FAMILY_OPENAI);
    assert_int_equal(route_family(t, n, "/nope"), API_FAMILY_OPENAI);
    assert_int_equal(route_family(t, n, ""), API_FAMILY_OPENAI);
}

/* The body api_error_for gives status on path's family, parsed. */
static json_t *server_error_body(const char *path, int status, const char *type, const char *code)
{
    size_t n;
    const struct route *t = routes_table(&n);
    struct api_response resp = {0};
    api_error_for(&resp, route_family(t, n, path), status, type, code, "went \xff wrong");
    assert_int_equal(resp.status, status);
    json_t *j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
    buf_deinit(&resp.body);
    assert_non_null(j);
    return j;
}

/* The errors the server raises before a handler (401, 404, 405, 413, 503) and after one take
 * the shape of the route's family. */
static void test_error_shape_per_family(void **state)
{
    (void)state;
    static const int statuses[] = {400, 401, 404, 405, 413, 500, 503};
    static const char *anthropic_types[] = {"invalid_request_error", "authentication_error",
                                            "not_found_error",       "invalid_request_error",
                                            "request_too_large",     "api_error",
                                            "overloaded_error"};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        json_t *j = server_error_body("/v1/chat/completions", statuses[i], "some_type", "a_code");
        json_t *e = json_object_get(j, "error");
        assert_string_equal(json_string_value(json_object_get(e, "type")), "some_type");
        assert_string_equal(json_string_value(json_object_get(e, "code")), "a_code");
        assert_string_equal(json_string_value(json_object_get(e, "message")), "went ? wrong");
        assert_true(json_is_null(json_object_get(e, "param")));
        json_decref(j);

        j = server_error_body("/v1/messages", statuses[i], "some_type", "a_code");
        assert_int_equal(json_object_size(j), 2);
        assert_string_equal(json_string_value(json_object_get(j, "type")), "error");
        e = json_object_get(j, "error");
        assert_int_equal(json_object_size(e), 2);
        assert_string_equal(json_string_value(json_object_get(e, "type")), anthropic_types[i]);
        assert_string_equal(json_string_value(json_object_get(e, "message")), "went ? wrong");
        json_decref(j);

        j = server_error_body("/api/chat", statuses[i], "some_type", "a_code");
        assert_int_equal(json_object_size(j), 1);
        assert_string_equal(json_string_value(json_object_get(j, "error")), "went ? wrong");
        json_decref(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_server_table_has_public_health_only),
        cmocka_unit_test(test_server_table_routes_without_v1),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_path_control_bytes),
        cmocka_unit_test(test_config_flags),
        cmocka_unit_test(test_config_llama_server_flags),
        cmocka_unit_test(test_cors_policy),
        cmocka_unit_test(test_config_environment_and_key_file),
        cmocka_unit_test(test_json_body),
        cmocka_unit_test(test_error_shape),
        cmocka_unit_test(test_server_table_families),
        cmocka_unit_test(test_error_shape_per_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
