/* api/response_store: conversations come back equal and independent, the oldest is evicted
 * after RESPONSE_STORE_MAX, over-large entries and ids are refused, and a failed allocation
 * leaves the store as it was. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/responses/response_store.h"
#include "util/err.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

static void test_put_get(void **state)
{
    (void)state;
    struct response_store *s = NULL;
    assert_int_equal(response_store_new(&s), ERR_OK);
    json_t *conv = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    assert_int_equal(response_store_put(s, "resp_1", conv), ERR_OK);
    json_t *got = response_store_get(s, "resp_1");
    assert_true(json_equal(got, conv));
    json_array_clear(got); // a copy: changing it leaves the stored one alone
    json_decref(got);
    got = response_store_get(s, "resp_1");
    assert_true(json_equal(got, conv));
    json_decref(got);
    assert_null(response_store_get(s, "resp_2"));
    response_store_free(s);
    json_decref(conv);
}

static void test_eviction_and_limits(void **state)
{
    (void)state;
    struct response_store *s = NULL;
    assert_int_equal(response_store_new(&s), ERR_OK);
    for (int i = 0; i < RESPONSE_STORE_MAX + 3; i++) {
        char id[32];
        snprintf(id, sizeof id, "resp_%d", i);
        json_t *conv = json_pack("[i]", i);
        assert_int_equal(response_store_put(s, id, conv), ERR_OK);
        json_decref(conv);
    }
    for (int i = 0; i < RESPONSE_STORE_MAX + 3; i++) {
        char id[32];
        snprintf(id, sizeof id, "resp_%d", i);
        json_t *got = response_store_get(s, id);
        if (i < 3) {
            assert_null(got); // the three oldest were evicted
        } else {
            assert_non_null(got);
            assert_int_equal(json_integer_value(json_array_get(got, 0)), i);
        }
        json_decref(got);
    }
    // Over the per-entry bound: refused, and nothing else changes.
    char *big = mem_alloc(RESPONSE_STORE_ENTRY_MAX + 1);
    memset(big, 'x', RESPONSE_STORE_ENTRY_MAX);
    big[RESPONSE_STORE_ENTRY_MAX] = '\0';
    json_t *conv = json_pack("[s]", big);
    mem_free(big);
    assert_int_equal(response_store_put(s, "resp_big", conv), ERR_LIMIT);
    json_decref(conv);
    assert_null(response_store_get(s, "resp_big"));
    conv = json_array();
    char long_id[80];
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    assert_int_equal(response_store_put(s, long_id, conv), ERR_INVALID);
    assert_int_equal(response_store_put(s, "", conv), ERR_INVALID);
    json_decref(conv);
    json_t *still = response_store_get(s, "resp_3");
    assert_non_null(still);
    json_decref(still);
    response_store_free(s);
    response_store_free(NULL);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    int64_t base = mem_live_count();
    json_t *conv = json_pack("[{s:s}]", "role", "user");
    for (int64_t n = 0; n < 20; n++) {
        struct response_store *s = NULL;
        mem_fail_after(n);
        int rc = response_store_new(&s);
        if (rc == ERR_OK) rc = response_store_put(s, "resp_x", conv);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            json_t *got = response_store_get(s, "resp_x");
            assert_true(json_equal(got, conv));
            json_decref(got);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
        }
        response_store_free(s);
    }
    json_decref(conv);
    assert_int_equal(mem_live_count(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_eviction_and_limits),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
