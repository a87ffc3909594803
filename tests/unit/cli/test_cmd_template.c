/* cli/cmd_template: `llamapi template render` over files, built-ins and a GGUF's template; exit
 * codes for usage, input and render errors; the printed prompt. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cli/cmd_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void write_file(const char *name, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Runs the command with stdout captured into out (NUL-terminated); returns its exit code. */
static int run(int argc, char **argv, char *out, size_t cap)
{
    char path[128];
    snprintf(path, sizeof path, "%s/stdout", dir);
    fflush(stdout);
    int saved = dup(1);
    FILE *f = fopen(path, "w+b");
    assert_non_null(f);
    dup2(fileno(f), 1);
    int rc = cli_cmd_template(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    fclose(f);
    return rc;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/llamapi-cmd-template-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = {"t.jinja", "ctx.json", "bad.json", "raise.jinja", "stdout"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    return rmdir(dir);
}

static void test_render_file_and_builtin(void **state)
{
    (void)state;
    char tpl[128], ctx[128], out[4096];
    write_file("t.jinja",
               "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
               "{{ strftime_now('%Y-%m-%d') }}\n",
               tpl, sizeof tpl);
    write_file("ctx.json",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
               "\"add_generation_prompt\": true}",
               ctx, sizeof ctx);
    char *argv1[] = {"template",  "render", "--template", tpl,
                     "--context", ctx,      "--now",      "2026-01-02T03:04:05"};
    assert_int_equal(run(8, argv1, out, sizeof out), 0);
    assert_string_equal(out, "[user:Hi]2026-01-02");
    char *argv2[] = {"template", "render", "--builtin", "chatml", "--context", ctx};
    assert_int_equal(run(6, argv2, out, sizeof out), 0);
    assert_string_equal(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

static void test_errors(void **state)
{
    (void)state;
    char tpl[128], ctx[128], bad[128], out[4096];
    write_file("raise.jinja", "{{ raise_exception('no') }}", tpl, sizeof tpl);
    write_file("ctx.json", "{}", ctx, sizeof ctx);
    write_file("bad.json", "{not json", bad, sizeof bad);
    char *raise[] = {"template", "render", "--template", tpl, "--context", ctx};
    assert_int_equal(run(6, raise, out, sizeof out), 1);
    assert_string_equal(out, "");
    char *badctx[] = {"template", "render", "--template", tpl, "--context", bad};
    assert_int_equal(run(6, badctx, out, sizeof out), 1);
    char *nobuiltin[] = {"template", "render", "--builtin", "nope", "--context", ctx};
    assert_int_equal(run(6, nobuiltin, out, sizeof out), 1);
    char *nomodel[] = {"template", "render", "-m", "/nonexistent.gguf", "--context", ctx};
    assert_int_equal(run(6, nomodel, out, sizeof out), 1);
    char *usage1[] = {"template"};
    assert_int_equal(run(1, usage1, out, sizeof out), 2);
    char *usage2[] = {"template", "render", "--context", ctx};
    assert_int_equal(run(4, usage2, out, sizeof out), 2);
    char *usage3[] = {"template", "render", "--builtin", "chatml", "-m", "x", "--context", ctx};
    assert_int_equal(run(8, usage3, out, sizeof out), 2);
}

static void test_model_template(void **state)
{
    (void)state;
    static char model[] = "../shared/models/vocab/ggml-vocab-phi-3.gguf";
    if (access(model, R_OK) != 0) {
        printf("skip: %s not found\n", model);
        skip();
    }
    char ctx[128], out[4096];
    write_file("ctx.json",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
               "\"add_generation_prompt\": true}",
               ctx, sizeof ctx);
    char *argv[] = {"template", "render", "-m", model, "--context", ctx};
    assert_int_equal(run(6, argv, out, sizeof out), 0);
    // Phi-3's template, with bos_token taken from the model's vocabulary
    assert_string_equal(out, "<s><|user|>\nHi<|end|>\n<|assistant|>\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_file_and_builtin),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_model_template),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
