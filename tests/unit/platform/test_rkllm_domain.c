/* platform/rockchip/rkllm_domain: ids stay within 1..15 on the SoCs with many domains (0 is
 * rknn2's, 16 and above the driver refuses), a model over 4 GiB takes consecutive ids, freed
 * ids are taken again, running out is ERR_LIMIT with the reason, and the other SoCs share 0. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "platform/rockchip/rkllm_domain.h"

#include <string.h>

static void socs(void **state)
{
    (void)state;
    assert_true(rkllm_domain_soc_has_many("RK3588"));
    assert_true(rkllm_domain_soc_has_many("RK3588S"));
    assert_true(rkllm_domain_soc_has_many("RK3576"));
    assert_false(rkllm_domain_soc_has_many("RK3562"));
    assert_false(rkllm_domain_soc_has_many("RV1126B"));
    assert_false(rkllm_domain_soc_has_many(""));
}

static void spans(void **state)
{
    (void)state;
    assert_int_equal(rkllm_domain_span(0), 1);
    assert_int_equal(rkllm_domain_span(RKLLM_DOMAIN_BYTES), 1);
    assert_int_equal(rkllm_domain_span(RKLLM_DOMAIN_BYTES + 1), 2);
    assert_int_equal(rkllm_domain_span(UINT64_MAX), RKLLM_DOMAIN_CAP);
}

static void ids_stay_within_1_to_15(void **state)
{
    (void)state;
    struct errmsg err;
    errmsg_clear(&err);
    int first[RKLLM_DOMAIN_CAP];
    for (int k = 0; k < RKLLM_DOMAIN_CAP - 1; k++) {
        assert_int_equal(rkllm_domain_take(true, 1, &first[k], &err), ERR_OK);
        assert_int_equal(first[k], k + 1);
    }
    int more = -1;
    assert_int_equal(rkllm_domain_take(true, 1, &more, &err), ERR_LIMIT);
    assert_int_equal(more, -1);
    assert_non_null(strstr(err.msg, "within 1-15"));
    rkllm_domain_give(true, first[6], 1); // id 7 free again
    assert_int_equal(rkllm_domain_take(true, 1, &more, &err), ERR_OK);
    assert_int_equal(more, 7);
    for (int k = 0; k < RKLLM_DOMAIN_CAP - 1; k++)
        rkllm_domain_give(true, first[k], 1);
}

static void a_large_model_takes_a_run(void **state)
{
    (void)state;
    struct errmsg err;
    errmsg_clear(&err);
    int a, b, c;
    assert_int_equal(rkllm_domain_take(true, 1, &a, &err), ERR_OK); // 1
    assert_int_equal(rkllm_domain_take(true, 2, &b, &err), ERR_OK); // 2-3
    assert_int_equal(b, 2);
    rkllm_domain_give(true, a, 1);
    assert_int_equal(rkllm_domain_take(true, 2, &c, &err), ERR_OK); // 1 alone is too short
    assert_int_equal(c, 4);
    assert_int_equal(rkllm_domain_take(true, RKLLM_DOMAIN_CAP, &a, &err), ERR_LIMIT);
    rkllm_domain_give(true, b, 2);
    rkllm_domain_give(true, c, 2);
}

static void other_socs_share_domain_0(void **state)
{
    (void)state;
    struct errmsg err;
    errmsg_clear(&err);
    for (int k = 0; k < 40; k++) {
        int d = -1;
        assert_int_equal(rkllm_domain_take(false, 1, &d, &err), ERR_OK);
        assert_int_equal(d, 0);
    }
    rkllm_domain_give(false, 0, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(socs),
        cmocka_unit_test(spans),
        cmocka_unit_test(ids_stay_within_1_to_15),
        cmocka_unit_test(a_large_model_takes_a_run),
        cmocka_unit_test(other_socs_share_domain_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
