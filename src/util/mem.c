/* Counting allocator with failure injection. Counters are atomics so the hot path takes no
 * lock; injection is a test-only feature and costs one atomic load per allocation. */
#include "util/mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_llong live_count;
static atomic_llong fail_countdown = -1;
static atomic_llong failed_count;

static int should_fail(void)
{
    long long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (n < 0) return 0;
    n = atomic_fetch_sub(&fail_countdown, 1);
    if (n == 0) {
        atomic_fetch_add(&failed_count, 1);
        return 1;
    }
    if (n < 0) atomic_store(&fail_countdown, -1);
    return 0;
}

void *mem_alloc(size_t size)
{
    if (should_fail()) return NULL;
    void *p = malloc(size ? size : 1);
    if (p) atomic_fetch_add_explicit(&live_count, 1, memory_order_relaxed);
    return p;
}

void *mem_calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) return NULL;
    if (should_fail()) return NULL;
    void *p = calloc(1, total ? total : 1);
    if (p) atomic_fetch_add_explicit(&live_count, 1, memory_order_relaxed);
    return p;
}

void *mem_realloc(void *p, size_t size)
{
    if (!p) return mem_alloc(size);
    if (should_fail()) return NULL;
    return realloc(p, size ? size : 1);
}

void mem_free(void *p)
{
    if (!p) return;
    atomic_fetch_sub_explicit(&live_count, 1, memory_order_relaxed);
    free(p);
}

char *mem_strndup(const char *s, size_t len)
{
    if (len == SIZE_MAX) return NULL;
    char *d = mem_alloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *mem_strdup(const char *s)
{
    return mem_strndup(s, strlen(s));
}

void mem_fail_after(int64_t n)
{
    atomic_store(&fail_countdown, (long long)n);
}

int64_t mem_live_count(void)
{
    return atomic_load(&live_count);
}

int64_t mem_failed_count(void)
{
    return atomic_load(&failed_count);
}
