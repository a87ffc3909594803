/* platform/: chip detection from sample /proc/cpuinfo texts, the platform registry and the
 * cpu platform's path claims. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "platform/cpu.h"
#include "platform/cpuinfo.h"
#include "platform/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t read_file(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(out, 1, cap, f);
    fclose(f);
    return n;
}

static void test_cpuinfo_x86(void **state)
{
    (void)state;
    char text[4096];
    size_t len = read_file("tests/data/cpuinfo-x86.txt", text, sizeof text);
    struct platform_chip chips[4];
    int n = cpuinfo_parse(text, len, chips, 4);
    assert_int_equal(n, 1);
    assert_string_equal(chips[0].chip_type, "Intel(R) Xeon(R) Processor");
    assert_int_equal(chips[0].count, 2);
}

static void test_cpuinfo_big_little(void **state)
{
    (void)state;
    char text[8192];
    size_t len = read_file("tests/data/cpuinfo-rk3588.txt", text, sizeof text);
    struct platform_chip chips[4];
    int n = cpuinfo_parse(text, len, chips, 4);
    assert_int_equal(n, 2);
    assert_string_equal(chips[0].chip_type, "Cortex-A55");
    assert_int_equal(chips[0].count, 4);
    assert_string_equal(chips[1].chip_type, "Cortex-A76");
    assert_int_equal(chips[1].count, 4);
}

static void test_cpuinfo_garbage_and_limits(void **state)
{
    (void)state;
    struct platform_chip chips[1];
    assert_int_equal(cpuinfo_parse("", 0, chips, 1), 0);
    assert_int_equal(cpuinfo_parse("no colon here\n\n\n", 16, chips, 1), 0);
    const char *two = "processor: 0\nmodel name: A\n\nprocessor: 1\nmodel name: B\n";
    assert_int_equal(cpuinfo_parse(two, strlen(two), chips, 1), 1); // capped at max
    assert_string_equal(chips[0].chip_type, "A");
    const char *unknown_arm = "processor: 0\nCPU implementer: 0x51\nCPU part: 0x802\n";
    assert_int_equal(cpuinfo_parse(unknown_arm, strlen(unknown_arm), chips, 1), 1);
    assert_string_equal(chips[0].chip_type, "ARM implementer 0x51 part 0x802");
}

static void test_cpuinfo_detect_host(void **state)
{
    (void)state;
    struct platform_chip chips[8];
    int n = cpuinfo_detect(chips, 8);
    assert_true(n >= 1);
    int total = 0;
    for (int i = 0; i < n; i++)
        total += chips[i].count;
    assert_int_equal(total, (int)sysconf(_SC_NPROCESSORS_ONLN));
}

static void test_registry_and_claims(void **state)
{
    (void)state;
    size_t n;
    const struct platform *const *list = platform_list(&n);
    assert_int_equal(n, 1);
    assert_string_equal(list[0]->id, "cpu");
    assert_ptr_equal(platform_find("cpu"), &cpu_platform);
    assert_null(platform_find("rknn"));

    char dir[] = "/tmp/llamapi-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[256], other[256], found[512];
    snprintf(file, sizeof file, "%s/a.gguf", dir);
    snprintf(other, sizeof other, "%s/b.gguf", dir);
    assert_null(platform_detect(dir)); // empty directory
    FILE *f = fopen(file, "wb");
    fwrite("GGUF\3\0\0\0", 1, 8, f);
    fclose(f);
    assert_ptr_equal(platform_detect(file), &cpu_platform);
    assert_true(cpu_resolve_gguf(dir, found, sizeof found));
    assert_string_equal(found, file);
    f = fopen(other, "wb");
    fwrite("NOPE", 1, 4, f);
    fclose(f);
    assert_null(platform_detect(other));                      // wrong magic
    assert_false(cpu_resolve_gguf(dir, found, sizeof found)); // two .gguf files: ambiguous
    assert_null(platform_detect("/nonexistent/path"));
    unlink(file);
    unlink(other);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpuinfo_x86),
        cmocka_unit_test(test_cpuinfo_big_little),
        cmocka_unit_test(test_cpuinfo_garbage_and_limits),
        cmocka_unit_test(test_cpuinfo_detect_host),
        cmocka_unit_test(test_registry_and_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
