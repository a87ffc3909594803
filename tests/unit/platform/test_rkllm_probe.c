/* platform/rockchip/rkllm_probe: the verdict for each release's facts (1.2.1-1.2.3 and 1.3.0
 * accepted; 1.2.0 / 1.2.1b1, 1.1.x and unknown layouts refused with what was found), and the
 * default-param call itself against functions of this file that return each release's
 * RKLLMParam by value, as the runtime does: the written size and the defaults it reads. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "platform/rockchip/rkllm_probe.h"

#include <string.h>

static unsigned char bytes[sizeof(struct rkllm_param_room)];

static struct rkllm_abi_verdict judge(size_t cpus_at, size_t written_end, bool has_kv)
{
    memset(bytes, 0, sizeof bytes);
    if (cpus_at) bytes[cpus_at] = 4;
    struct rkllm_probe_facts f = {bytes, written_end, has_kv};
    struct rkllm_abi_verdict v;
    rkllm_abi_classify(&f, &v);
    return v;
}

static void accepts_1_3_0_and_1_2_1(void **state)
{
    (void)state;
    struct rkllm_abi_verdict v = judge(65, 180, true);
    assert_int_equal(v.abi, 13);
    assert_string_equal(v.found, "1.3.0");
    assert_string_equal(v.reason, "");
    v = judge(93, 206, true);
    assert_int_equal(v.abi, 12);
    assert_string_equal(v.found, "1.2.1-1.2.3");
    v = judge(65, 0, true); // written size unseen: the defaults decide
    assert_int_equal(v.abi, 13);
    v = judge(93, 102, true); // a runtime leaving the reserved tail unwritten
    assert_int_equal(v.abi, 12);
}

static void refuses_1_2_0_and_1_2_1b1_by_name(void **state)
{
    (void)state;
    struct rkllm_abi_verdict v = judge(93, 206, false);
    assert_int_equal(v.abi, 0);
    assert_string_equal(v.found, "1.2.0 or 1.2.1b1");
    assert_non_null(strstr(v.reason, "looks like 1.2.0 or 1.2.1b1"));
    assert_non_null(strstr(v.reason, "rkllm_get_kv_cache_size"));
    assert_non_null(strstr(v.reason, "--rkllm-abi"));
}

static void refuses_unknown_layouts(void **state)
{
    (void)state;
    struct rkllm_abi_verdict v = judge(0, 180, true); // 1.1.x: no enabled_cpus_num
    assert_int_equal(v.abi, 0);
    assert_string_equal(v.found, "an unknown release");
    assert_non_null(strstr(v.reason, "neither byte 65"));
    v = judge(65, 300, true); // a larger struct than any release we know
    assert_int_equal(v.abi, 0);
    assert_non_null(strstr(v.reason, "wrote 300 bytes"));
    v = judge(65, 200, true); // 1.3.0's defaults in a 1.2-sized struct
    assert_int_equal(v.abi, 0);
    assert_non_null(strstr(v.reason, "wrote 200 bytes, not 184"));
    v = judge(65, 180, false);
    assert_int_equal(v.abi, 0);
    memset(bytes, 0, sizeof bytes);
    bytes[65] = bytes[93] = 4;
    struct rkllm_probe_facts f = {bytes, 206, true};
    rkllm_abi_classify(&f, &v);
    assert_int_equal(v.abi, 0);
    assert_non_null(strstr(v.reason, "fit both"));
}

/* Each release's rkllm_createDefaultParam, as far as the probe can tell: the struct by value
 * with every field set (the reserved bytes zeroed), enabled_cpus_num 4. */
static struct rkllm12_param defaults12(void)
{
    struct rkllm12_param p;
    memset(&p, 0, sizeof p);
    p.max_context_len = 512;
    p.top_k = 40;
    p.extend_param.enabled_cpus_num = 4;
    return p;
}

static struct rkllm13_param defaults13(void)
{
    struct rkllm13_param p;
    memset(&p, 0, sizeof p);
    p.max_context_len = 512;
    p.top_k = 40;
    p.extend_param.enabled_cpus_num = 4;
    return p;
}

struct bigger {
    struct rkllm13_param p;
    unsigned char more[200];
};

static struct bigger defaults_bigger(void)
{
    struct bigger b;
    memset(&b, 0, sizeof b);
    b.p.extend_param.enabled_cpus_num = 4;
    return b;
}

static struct rkllm_abi_verdict probe(void (*fn)(void), bool has_kv, size_t *written_end)
{
    static struct rkllm_param_room room;
    rkllm_default_param(fn, &room, written_end);
    struct rkllm_probe_facts f = {room.u.bytes, *written_end, has_kv};
    struct rkllm_abi_verdict v;
    rkllm_abi_classify(&f, &v);
    return v;
}

static void calls_into_the_room(void **state)
{
    (void)state;
    size_t end;
    struct rkllm_abi_verdict v = probe((void (*)(void))defaults12, true, &end);
    assert_int_equal(v.abi, 12);
#if defined(__x86_64__) || defined(__aarch64__)
    assert_in_range(end, 185, sizeof(struct rkllm12_param));
#endif
    v = probe((void (*)(void))defaults12, false, &end);
    assert_string_equal(v.found, "1.2.0 or 1.2.1b1");
    v = probe((void (*)(void))defaults13, true, &end);
    assert_int_equal(v.abi, 13);
#if defined(__x86_64__) || defined(__aarch64__)
    assert_in_range(end, 100, sizeof(struct rkllm13_param));
    v = probe((void (*)(void))defaults_bigger, true, &end);
    assert_int_equal(v.abi, 0);
    assert_true(end > sizeof(struct rkllm12_param));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_1_3_0_and_1_2_1),
        cmocka_unit_test(refuses_1_2_0_and_1_2_1b1_by_name),
        cmocka_unit_test(refuses_unknown_layouts),
        cmocka_unit_test(calls_into_the_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
