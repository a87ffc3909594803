/* engine/cpufeat: LLAMAPI_ISA picks a kernel set the CPU runs; a value naming no set is
 * ignored with one warning on stderr per process that names the accepted values. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/cpufeat.h"
#if defined(__aarch64__)
#include "engine/arm/cpufeat_arm.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs fn with stderr sent to a temporary file; the text written, in buf (NUL-terminated). */
static void capture_stderr(void (*fn)(void), char *buf, size_t cap)
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), 2) >= 0);
    fn();
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, cap - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

#if defined(__x86_64__) || defined(__i386__)
static enum cpufeat_isa seen[3];

static void pick_three_times(void)
{
    for (int i = 0; i < 3; i++)
        seen[i] = cpufeat_isa();
}

static void test_known_values(void **state)
{
    (void)state;
    char out[1024];
    const char *names[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        setenv("LLAMAPI_ISA", names[i], 1);
        capture_stderr(pick_three_times, out, sizeof out);
        assert_string_equal(out, ""); // accepted values never warn
        enum cpufeat_isa want = (enum cpufeat_isa)i, best = cpufeat_isa_best();
        assert_int_equal(seen[0], want < best ? want : best);
    }
    unsetenv("LLAMAPI_ISA");
}

static void test_unknown_value_warns_once(void **state)
{
    (void)state;
    char out[1024];
    setenv("LLAMAPI_ISA", "avx-512", 1);
    capture_stderr(pick_three_times, out, sizeof out);
    pick_three_times(); // later calls stay quiet too (stderr not captured: nothing expected)
    unsetenv("LLAMAPI_ISA");
    assert_int_equal(count_of(out, "LLAMAPI_ISA=avx-512"), 1);
    assert_non_null(strstr(out, "scalar, avx2, avx512"));
    for (int i = 0; i < 3; i++)
        assert_int_equal(seen[i], cpufeat_isa_best()); // ignored: the best set
}
#elif defined(__aarch64__)
static enum cpufeat_arm_level seen_arm;

static void pick_arm(void)
{
    for (int i = 0; i < 3; i++)
        seen_arm = cpufeat_arm_level();
}

static void test_known_values(void **state)
{
    (void)state;
    char out[1024];
    setenv("LLAMAPI_ISA", "neon", 1);
    capture_stderr(pick_arm, out, sizeof out);
    unsetenv("LLAMAPI_ISA");
    assert_string_equal(out, "");
}

static void test_unknown_value_warns_once(void **state)
{
    (void)state;
    char out[1024];
    setenv("LLAMAPI_ISA", "sve9", 1);
    capture_stderr(pick_arm, out, sizeof out);
    unsetenv("LLAMAPI_ISA");
    assert_int_equal(count_of(out, "LLAMAPI_ISA=sve9"), 1);
    assert_non_null(strstr(out, "scalar, neon, dotprod, i8mm"));
    assert_int_equal(seen_arm, cpufeat_arm_hw_level());
}
#else
static void test_known_values(void **state)
{
    (void)state;
    skip(); // no kernel sets to choose between on this architecture
}

static void test_unknown_value_warns_once(void **state)
{
    (void)state;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_unknown_value_warns_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
