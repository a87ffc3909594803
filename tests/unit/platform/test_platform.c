/* platform/: chip detection from sample /proc/cpuinfo texts, the platform registry, the cpu
 * platform's path claims, model directory detection and model.json, and the vendor plumbing
 * (SoC and NPU driver under a fake sysfs root, a runtime library without a needed symbol). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "platform/cpu/cpu.h"
#include "platform/cpuinfo.h"
#include "platform/detect.h"
#include "platform/vendor.h"
#include "platform/platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    assert_int_equal(n, 4);
    assert_string_equal(list[0]->id, "cpu");
    assert_string_equal(list[1]->id, "rkllm");
    assert_string_equal(list[2]->id, "rknn2");
    assert_string_equal(list[3]->id, "rknn3");
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

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(data, 1, len, f);
    fclose(f);
}

static void remove_file(const char *dir, const char *name)
{
    char path[512];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < sizeof path);
    unlink(path);
}

/* Detects dir; returns the platform id or the error message. */
static const char *detect(const char *dir, struct platform_detection *d)
{
    static struct errmsg err;
    errmsg_clear(&err);
    if (platform_detect_model(dir, d, &err) != ERR_OK) return err.msg;
    return d->platform->id;
}

static void test_directory_detection(void **state)
{
    (void)state;
    struct platform_detection d;
    char dir[] = "/tmp/llamapi-detect-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_non_null(strstr(detect(dir, &d), "holds no model"));
    write_file(dir, "Qwen3-4B-rk3576-w8a8.rkllm", "x", 1);
    assert_string_equal(detect(dir, &d), "rkllm");
    assert_string_equal(d.chip, "rk3576");
    assert_non_null(strstr(d.file, "/Qwen3-4B-rk3576-w8a8.rkllm"));
    write_file(dir, "other.rkllm", "x", 1);
    assert_non_null(strstr(detect(dir, &d), "ambiguous"));
    remove_file(dir, "other.rkllm");
    // An .rknn without tokenizer files is not rknn2; with them the directory is ambiguous.
    write_file(dir, "model.rknn", "x", 1);
    assert_string_equal(detect(dir, &d), "rkllm");
    write_file(dir, "tokenizer.json", "{}", 2);
    const char *msg = detect(dir, &d);
    assert_non_null(strstr(msg, "ambiguous"));
    assert_non_null(strstr(msg, "model.rknn (rknn2)"));
    assert_non_null(strstr(msg, "(rkllm)"));
    // model.json decides.
    static const char manifest[] = "{\"platform\":\"rknn2\",\"seq_len\":512,\"chip\":\"RK3588\"}";
    write_file(dir, "model.json", manifest, strlen(manifest));
    assert_string_equal(detect(dir, &d), "rknn2");
    assert_int_equal(d.manifest.seq_len, 512);
    assert_string_equal(d.chip, "rk3588");
    assert_non_null(strstr(d.file, "/model.rknn"));
    write_file(dir, "model.json", "{\"platform\":\"npu9\"}", strlen("{\"platform\":\"npu9\"}"));
    assert_non_null(strstr(detect(dir, &d), "'npu9', which does not exist"));
    write_file(dir, "model.json", "{\"seq_len\":\"x\"}", strlen("{\"seq_len\":\"x\"}"));
    assert_non_null(strstr(detect(dir, &d), "'seq_len' must be an integer"));
    write_file(dir, "model.json", "{\"file\":\"../x\"}", strlen("{\"file\":\"../x\"}"));
    assert_non_null(strstr(detect(dir, &d), "'file' must be a name inside"));
    remove_file(dir, "model.json");
    remove_file(dir, "tokenizer.json");
    remove_file(dir, "Qwen3-4B-rk3576-w8a8.rkllm");
    // The rknn3 set: its tokenizer .gguf is not a cpu model.
    write_file(dir, "model.weight", "x", 1);
    write_file(dir, "model.tokenizer.gguf", "GGUF\3\0\0\0", 8);
    assert_non_null(strstr(detect(dir, &d), "no tokenizer.json"));
    write_file(dir, "model.embed.bin", "x", 1);
    assert_string_equal(detect(dir, &d), "rknn3");
    assert_non_null(strstr(d.file, "/model.rknn"));
    write_file(dir, "chat.gguf", "GGUF\3\0\0\0", 8);
    assert_non_null(strstr(detect(dir, &d), "ambiguous"));
    static const char *const names[] = {"model.weight", "model.tokenizer.gguf", "model.embed.bin",
                                        "model.rknn", "chat.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        remove_file(dir, names[i]);
    rmdir(dir);
}

static void test_vendor_host_facts(void **state)
{
    (void)state;
    char root[] = "/tmp/llamapi-sysfs-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct vendor_config vc;
    memset(&vc, 0, sizeof vc);
    snprintf(vc.sysfs_root, sizeof vc.sysfs_root, "%s", root);
    vendor_configure(&vc);
    char out[64];
    assert_false(vendor_soc_detect(out, sizeof out));
    assert_false(vendor_npu_driver_version(out, sizeof out));
    char sub[512];
    snprintf(sub, sizeof sub, "%s/proc", root);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/proc/device-tree", root);
    mkdir(sub, 0700);
    static const char compat[] = "rockchip,rk3588s-orangepi-5\0rockchip,rk3588\0";
    write_file(sub, "compatible", compat, sizeof compat - 1);
    assert_true(vendor_soc_detect(out, sizeof out));
    assert_string_equal(out, "RK3588");
    static const char mainline[] = "xunlong,orangepi-5\0rockchip,rk3588s\0";
    write_file(sub, "compatible", mainline, sizeof mainline - 1);
    assert_true(vendor_soc_detect(out, sizeof out));
    assert_string_equal(out, "RK3588S");
    struct platform_chip chips[2];
    assert_int_equal(vendor_soc_chips(chips, 2), 1);
    assert_string_equal(chips[0].chip_type, "RK3588S");
    assert_true(vendor_chip_matches("rk3588", "RK3588S"));
    assert_false(vendor_chip_matches("rk3576", "RK3588"));
    snprintf(sub, sizeof sub, "%s/proc/rknpu", root);
    mkdir(sub, 0700);
    write_file(sub, "version", "RKNPU driver: v0.9.8\n", 21);
    assert_true(vendor_npu_driver_version(out, sizeof out));
    assert_string_equal(out, "0.9.8");
    remove_file(sub, "version");
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/proc/device-tree", root);
    remove_file(sub, "compatible");
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/proc", root);
    rmdir(sub);
    rmdir(root);
    memset(&vc, 0, sizeof vc);
    vendor_configure(&vc);
}

/* mkdir for each of root + the given relative paths, in order. */
static void make_dirs(const char *root, const char *const *rel, size_t n)
{
    char path[512];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", root, rel[i]);
        assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
    }
}

/* The NPU's device node: a render node counts only when sysfs binds it to rknpu (a panfrost
 * GPU node does not), /dev/rknpu counts, and the reason names what is missing; the driver
 * version comes from /sys/module first; RV1126B and RK3582 are named. */
static void test_vendor_npu_node(void **state)
{
    (void)state;
    char root[] = "/tmp/llamapi-npu-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct vendor_config vc;
    memset(&vc, 0, sizeof vc);
    snprintf(vc.sysfs_root, sizeof vc.sysfs_root, "%s", root);
    vendor_configure(&vc);
    char node[64], why[512], sub[512];
    assert_false(vendor_npu_node(node, sizeof node, why, sizeof why));
    assert_non_null(strstr(why, "no NPU device node: no /dev/dri/renderD* of the rknpu driver"));
    static const char *const dirs[] = {"dev",
                                       "dev/dri",
                                       "sys",
                                       "sys/class",
                                       "sys/class/drm",
                                       "sys/class/drm/renderD128",
                                       "sys/class/drm/renderD128/device",
                                       "sys/class/drm/renderD129",
                                       "sys/class/drm/renderD129/device",
                                       "sys/module",
                                       "sys/module/rknpu",
                                       "proc",
                                       "proc/device-tree"};
    make_dirs(root, dirs, sizeof dirs / sizeof dirs[0]);
    snprintf(sub, sizeof sub, "%s/dev/dri", root);
    write_file(sub, "renderD128", "", 0);
    snprintf(sub, sizeof sub, "%s/sys/class/drm/renderD128/device", root);
    write_file(sub, "uevent", "DRIVER=panfrost\n", 16);
    assert_false(vendor_npu_node(node, sizeof node, why, sizeof why));
    assert_non_null(strstr(why, "/dev/dri/renderD128 is panfrost"));
    snprintf(sub, sizeof sub, "%s/dev/dri", root);
    write_file(sub, "renderD129", "", 0);
    snprintf(sub, sizeof sub, "%s/sys/class/drm/renderD129/device/driver", root);
    assert_int_equal(symlink("../../../../bus/platform/drivers/RKNPU", sub), 0);
    assert_true(vendor_npu_node(node, sizeof node, why, sizeof why));
    assert_string_equal(node, "/dev/dri/renderD129");
    snprintf(sub, sizeof sub, "%s/sys/module/rknpu", root);
    write_file(sub, "version", "0.9.8\n", 6);
    assert_true(vendor_npu_driver_version(node, sizeof node));
    assert_string_equal(node, "0.9.8");
    snprintf(sub, sizeof sub, "%s/proc/device-tree", root);
    static const char rv[] = "rockchip,rv1126b-evb\0rockchip,rv1126b\0";
    write_file(sub, "compatible", rv, sizeof rv - 1);
    assert_true(vendor_soc_detect(node, sizeof node));
    assert_string_equal(node, "RV1126B");
    static const char r82[] = "radxa,rock-5c\0rockchip,rk3582\0rockchip,rk3588s\0";
    write_file(sub, "compatible", r82, sizeof r82 - 1);
    assert_true(vendor_soc_detect(node, sizeof node));
    assert_string_equal(node, "RK3582");
    // Leave nothing behind: files and the link, then the directories deepest first.
    static const char *const files[] = {"dev/dri/renderD128",
                                        "dev/dri/renderD129",
                                        "sys/class/drm/renderD128/device/uevent",
                                        "sys/class/drm/renderD129/device/driver",
                                        "sys/module/rknpu/version",
                                        "proc/device-tree/compatible"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(sub, sizeof sub, "%s/%s", root, files[i]);
        assert_int_equal(unlink(sub), 0);
    }
    for (size_t i = sizeof dirs / sizeof dirs[0]; i-- > 0;) {
        snprintf(sub, sizeof sub, "%s/%s", root, dirs[i]);
        assert_int_equal(rmdir(sub), 0);
    }
    assert_int_equal(rmdir(root), 0);
    memset(&vc, 0, sizeof vc);
    vendor_configure(&vc);
}

struct two_fns {
    int (*cos_fn)(void);
    int (*missing)(void);
};

static void test_vendor_lib_symbols(void **state)
{
    (void)state;
    struct vendor_lib lib;
    struct two_fns fns;
    static const struct vendor_sym one[] = {{"cos", offsetof(struct two_fns, cos_fn)}};
    static const struct vendor_sym two[] = {{"cos", offsetof(struct two_fns, cos_fn)},
                                            {"rkllm_init", offsetof(struct two_fns, missing)}};
    assert_int_equal(vendor_lib_open(&lib, "libllamapi-none.so", one, 1, &fns, sizeof fns),
                     ERR_UNSUPPORTED);
    assert_non_null(strstr(lib.reason, "libllamapi-none.so"));
    assert_int_equal(vendor_lib_open(&lib, "libm.so.6", two, 2, &fns, sizeof fns), ERR_UNSUPPORTED);
    assert_string_equal(lib.reason,
                        "libm.so.6 does not export rkllm_init (not a supported version)");
    assert_null(fns.cos_fn); // nothing half-resolved
    assert_false(lib.is_available);
    assert_int_equal(vendor_lib_open(&lib, "libm.so.6", one, 1, &fns, sizeof fns), ERR_OK);
    assert_true(lib.is_available);
    assert_non_null(fns.cos_fn);
    vendor_lib_close(&lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpuinfo_x86),
        cmocka_unit_test(test_cpuinfo_big_little),
        cmocka_unit_test(test_cpuinfo_garbage_and_limits),
        cmocka_unit_test(test_cpuinfo_detect_host),
        cmocka_unit_test(test_registry_and_claims),
        cmocka_unit_test(test_directory_detection),
        cmocka_unit_test(test_vendor_host_facts),
        cmocka_unit_test(test_vendor_npu_node),
        cmocka_unit_test(test_vendor_lib_symbols),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
