/* util/: buffers, checked arithmetic, the counting allocator and its failure injection. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "util/buf.h"
#include "util/checked.h"
#include "util/err.h"
#include "util/mem.h"

static void test_buf_append_and_printf(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    assert_int_equal(buf_append_cstr(&b, "hello"), ERR_OK);
    assert_int_equal(buf_printf(&b, " %d-%s", 42, "x"), ERR_OK);
    assert_string_equal(b.data, "hello 42-x");
    assert_int_equal(b.len, 10);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(buf_append_byte(&b, 'a'), ERR_OK);
    assert_int_equal(b.len, 1010);
    assert_int_equal(b.data[1010], '\0');
    buf_deinit(&b);
    assert_null(b.data);
}

static void test_buf_unchanged_on_alloc_failure(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    assert_int_equal(buf_append_cstr(&b, "abc"), ERR_OK);
    mem_fail_after(0);
    char big[200] = {0};
    assert_int_equal(buf_append(&b, big, sizeof big), ERR_NOMEM);
    mem_fail_after(-1);
    assert_string_equal(b.data, "abc");
    buf_deinit(&b);
}

static void test_checked_overflow(void **state)
{
    (void)state;
    size_t r = 7;
    assert_false(size_mul(SIZE_MAX / 2 + 1, 2, &r));
    assert_int_equal(r, 7);
    assert_true(size_mul(3, 4, &r));
    assert_int_equal(r, 12);
    assert_false(size_add(SIZE_MAX, 1, &r));
    uint64_t u;
    assert_false(u64_mul(UINT64_C(1) << 63, 2, &u));
    assert_null(mem_calloc(SIZE_MAX / 4, 8));
}

static void test_mem_counts_live_allocations(void **state)
{
    (void)state;
    int64_t before = mem_live_count();
    char *s = mem_strdup("abc");
    assert_non_null(s);
    assert_int_equal(mem_live_count(), before + 1);
    mem_free(s);
    assert_int_equal(mem_live_count(), before);
    mem_fail_after(1);
    void *a = mem_alloc(8);
    void *b = mem_alloc(8);
    void *c = mem_alloc(8);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    mem_free(a);
    mem_free(c);
}

static void test_errmsg(void **state)
{
    (void)state;
    struct errmsg e;
    errmsg_clear(&e);
    assert_int_equal(errmsg_set(&e, ERR_FORMAT, "bad %s at %d", "thing", 3), ERR_FORMAT);
    assert_string_equal(e.msg, "bad thing at 3");
    assert_string_equal(err_str(ERR_NOMEM), "out of memory");
    assert_string_equal(err_str(12345), "unknown error");
    assert_int_equal(errmsg_set(NULL, ERR_IO, "x"), ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_append_and_printf),
        cmocka_unit_test(test_buf_unchanged_on_alloc_failure),
        cmocka_unit_test(test_checked_overflow),
        cmocka_unit_test(test_mem_counts_live_allocations),
        cmocka_unit_test(test_errmsg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
