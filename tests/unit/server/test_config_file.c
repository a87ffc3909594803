/* server/config_file.c and --config: the reader's framing, every error naming its file and
 * line, flags overriding the file, repeatable keys, switches, and the --models-preset reader
 * (server/presets.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "server/config.h"
#include "server/config_file.h"
#include "server/presets.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes text to a fresh temporary file; its path goes to out (caller unlinks). */
static void write_file(char *out, size_t cap, const char *text)
{
    snprintf(out, cap, "/tmp/llamapi-conf-XXXXXX");
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* config_parse over argv with --config pointing at a file holding text. */
static int parse_with(struct server_config *c, struct errmsg *e, const char *text, int argc,
                      char **extra, char *path, size_t path_cap)
{
    write_file(path, path_cap, text);
    char *argv[16] = {"llamapi-server", "--config", path};
    for (int i = 0; i < argc && i < 13; i++)
        argv[3 + i] = extra[i];
    config_defaults(c);
    errmsg_clear(e);
    int rc = config_parse(c, 3 + argc, argv, e);
    unlink(path);
    return rc;
}

static void test_config_file_values_and_override(void **state)
{
    (void)state;
    struct server_config c;
    struct errmsg e;
    char path[64];
    const char *text = "# the service's settings\n"
                       "\n"
                       "host = 0.0.0.0\n"
                       "  port=9300   \n"
                       "; a comment in the INI style\n"
                       "api-key = one\n"
                       "api-key = two\n"
                       "metrics = true\n"
                       "models-dir = \"/var/lib/llamapi/models\"\n"
                       "temp = 0.5\n"
                       "no-slots = false\n"
                       "model = /m/a.gguf\n"
                       "model = /m/b.gguf"; // last line without a newline
    char *flags[] = {"--port", "9400", "-m", "/m/c.gguf"};
    assert_int_equal(parse_with(&c, &e, text, 4, flags, path, sizeof path), CONFIG_PARSE_OK);
    assert_string_equal(c.host, "0.0.0.0");
    assert_int_equal(c.port, 9400); // the command line wins
    assert_int_equal(c.n_api_keys, 2);
    assert_string_equal(c.api_keys[1], "two");
    assert_true(c.metrics_enabled);
    assert_false(c.slots_disabled);
    assert_string_equal(c.models_dir, "/var/lib/llamapi/models");
    assert_true(c.gen_defaults.temperature > 0.49f && c.gen_defaults.temperature < 0.51f);
    assert_int_equal(c.n_model_paths, 3); // repeatable: the file's, then the command line's
    assert_string_equal(c.model_paths[2], "/m/c.gguf");
    assert_string_equal(c.config_file, path);
    config_deinit(&c);

    // A switch set true in the file is turned off by its false spelling, and the environment
    // overrides the file too.
    setenv("LLAMAPI_PORT", "9500", 1);
    assert_int_equal(
        parse_with(&c, &e, "metrics = true\nport = 9300\n", 0, NULL, path, sizeof path),
        CONFIG_PARSE_OK);
    unsetenv("LLAMAPI_PORT");
    assert_int_equal(c.port, 9500);
    assert_true(c.metrics_enabled);
    config_deinit(&c);
}

/* Runs text as a --config file and checks the error names the file, the line and the reason. */
static void expect_error(const char *text, int line, const char *reason)
{
    struct server_config c;
    struct errmsg e;
    char path[64], want[128];
    assert_true(parse_with(&c, &e, text, 0, NULL, path, sizeof path) < 0);
    snprintf(want, sizeof want, "%s:%d: ", path, line);
    if (strncmp(e.msg, want, strlen(want)) != 0 || !strstr(e.msg, reason))
        fail_msg("expected '%s…%s', got '%s'", want, reason, e.msg);
    config_deinit(&c);
}

static void test_config_file_errors_name_file_and_line(void **state)
{
    (void)state;
    expect_error("port = 1\nbogus-flag = 3\n", 2, "unknown key 'bogus-flag'");
    expect_error("# c\n\nport = many\n", 3, "'many' is not an integer");
    expect_error("port = 70000\n", 1, "out of range");
    expect_error("host = x\nport 9000\n", 2, "no '='");
    expect_error("metrics = yes\n", 1, "expected true or false, got 'yes'");
    expect_error("= 3\n", 1, "empty key");
    expect_error("[section]\nport = 1\n", 1, "sections are not allowed");
    expect_error("port =\n", 1, "needs a value");
    expect_error("help = true\n", 1, "cannot be set in a config file");
    expect_error("config = /etc/other.conf\n", 1, "cannot be set in a config file");
    expect_error("log-format = xml\n", 1, "expected 'text' or 'json'");
    expect_error("pooling = best\n", 1, "is not one of");
    expect_error("-t = 4\n", 1, "unknown key '-t'"); // long names only
    expect_error("t = 4\n", 1, "unknown key 't'");
    expect_error("grammar = root ::= \"a\"\n", 1, "per request");

    // A line longer than the reader's buffer is refused, not split.
    char *big = mem_alloc(CONFIG_FILE_LINE_MAX + 32);
    assert_non_null(big);
    memset(big, 'a', CONFIG_FILE_LINE_MAX + 20);
    memcpy(big, "host = ", 7);
    big[CONFIG_FILE_LINE_MAX + 20] = '\0';
    expect_error(big, 1, "line too long");
    mem_free(big);

    // A missing file names itself.
    struct server_config c;
    struct errmsg e;
    char *argv[] = {"x", "--config", "/nonexistent/llamapi.conf"};
    config_defaults(&c);
    errmsg_clear(&e);
    assert_int_equal(config_parse(&c, 3, argv, &e), ERR_IO);
    assert_non_null(strstr(e.msg, "/nonexistent/llamapi.conf: No such file"));
    config_deinit(&c);
}

static int count_pair(void *ctx, const char *section, const char *key, const char *value,
                      struct errmsg *err)
{
    (void)err;
    int *n = ctx;
    if (strcmp(key, "stop") == 0) return errmsg_set(err, ERR_INVALID, "stopped at %s", value);
    if (*n == 1) assert_string_equal(section, "b");
    (*n)++;
    return ERR_OK;
}

static void test_config_file_sections_and_callback_errors(void **state)
{
    (void)state;
    char path[64];
    struct errmsg e;
    int n = 0;
    write_file(path, sizeof path, "a = 1\n[ b ]\nc = \"\"\nstop = here\nd = 2\n");
    errmsg_clear(&e);
    assert_int_equal(config_file_read(path, true, count_pair, &n, &e), ERR_INVALID);
    assert_int_equal(n, 2);
    char want[128];
    snprintf(want, sizeof want, "%s:4: stopped at here", path);
    assert_string_equal(e.msg, want);
    unlink(path);
    write_file(path, sizeof path, "[b\n");
    assert_int_equal(config_file_read(path, true, count_pair, &n, &e), ERR_FORMAT);
    assert_non_null(strstr(e.msg, ":1: a section header must end with ']'"));
    unlink(path);
}

static void test_presets_read(void **state)
{
    (void)state;
    char path[64];
    struct errmsg e;
    struct preset_list *l = mem_alloc(sizeof *l);
    assert_non_null(l);
    write_file(path, sizeof path,
               "version = 1\n"
               "[*]\n"
               "ctx-size = 2048\n"
               "parallel = 2\n"
               "\n"
               "[chat]\n"
               "model = /m/chat.gguf\n"
               "parallel = 4\n"
               "[embed]\n"
               "model = embed/embed.gguf\n"
               "embedding = true\n"
               "pooling = mean\n"
               "[spare]\n"
               "model = spare.gguf\n"
               "load-on-startup = false\n");
    errmsg_clear(&e);
    assert_int_equal(presets_read(path, l, &e), ERR_OK);
    unlink(path);
    assert_int_equal(l->n, 3);
    assert_string_equal(l->items[0].id, "chat");
    assert_int_equal(l->items[0].n_parallel, 4);
    assert_int_equal(l->items[0].n_ctx, 2048); // from [*]
    assert_string_equal(l->items[1].model, "embed/embed.gguf");
    assert_int_equal(l->items[1].is_embedding, 1);
    assert_int_equal(l->items[1].n_parallel, 2);
    assert_string_equal(l->items[1].pooling, "mean");
    assert_false(l->items[2].load_on_startup);
    assert_true(l->items[0].load_on_startup);

    const struct {
        const char *text;
        const char *want;
    } bad[] = {
        {"[a]\nmodel = x\nn-gpu-layers = 9\n", ":3: unknown key 'n-gpu-layers'"},
        {"[a]\nparallel = 0\n", ":2: parallel: 0 is out of range"},
        {"[a]\nmodel = x\n[b]\nmodel = y\n[a]\nc = 1\n", ":6: section [a] appears twice"},
        {"port = 1\n", ":1: 'port' outside a section"},
        {"[a]\nembedding = 1\n", ":2: embedding: expected true or false"},
        {"[a]\npooling = max\n", ":2: pooling: 'max' is not one of"},
        {"[a]\nparallel = 2\n", ": [a] has no 'model'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, sizeof path, bad[i].text);
        errmsg_clear(&e);
        l->n = 77;
        assert_true(presets_read(path, l, &e) < 0);
        assert_int_equal(l->n, 77); // untouched on failure
        if (strncmp(e.msg, path, strlen(path)) != 0 || !strstr(e.msg, bad[i].want))
            fail_msg("case %zu: expected '%s…%s', got '%s'", i, path, bad[i].want, e.msg);
        unlink(path);
    }
    mem_free(l);
}

/* Every allocation of a --config read (keys, models) and of a preset read fails in turn:
 * each run ends in ERR_NOMEM or success, and nothing leaks. */
static void test_config_file_fault_injection(void **state)
{
    (void)state;
    char conf[64], preset[64];
    write_file(conf, sizeof conf, "api-key = a\napi-key = b\nmodel = /m/x.gguf\nport = 1\n");
    write_file(preset, sizeof preset, "[*]\nparallel = 2\n[a]\nmodel = a.gguf\n");
    struct preset_list *l = mem_alloc(sizeof *l);
    assert_non_null(l);
    int64_t live = mem_live_count();
    bool conf_ok = false, preset_ok = false;
    for (int64_t n = 0; n < 64 && !(conf_ok && preset_ok); n++) {
        struct server_config c;
        struct errmsg e;
        char *argv[] = {"x", "--config", conf};
        config_defaults(&c);
        mem_fail_after(n);
        int rc = config_parse(&c, 3, argv, &e);
        mem_fail_after(-1);
        assert_true(rc == CONFIG_PARSE_OK || rc == ERR_NOMEM);
        conf_ok |= rc == CONFIG_PARSE_OK;
        config_deinit(&c);
        mem_fail_after(n);
        rc = presets_read(preset, l, &e);
        mem_fail_after(-1);
        assert_true(rc == ERR_OK || rc == ERR_NOMEM);
        preset_ok |= rc == ERR_OK;
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(conf_ok && preset_ok);
    mem_free(l);
    unlink(conf);
    unlink(preset);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_file_values_and_override),
        cmocka_unit_test(test_config_file_errors_name_file_and_line),
        cmocka_unit_test(test_config_file_sections_and_callback_errors),
        cmocka_unit_test(test_presets_read),
        cmocka_unit_test(test_config_file_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
