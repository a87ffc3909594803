/* The one allocator every module uses, so tests can count live allocations and fail the Nth
 * one. Thin wrappers over malloc; thread-safe. */
#ifndef UTIL_MEM_H
#define UTIL_MEM_H

#include <stddef.h>
#include <stdint.h>

/* malloc/calloc/realloc/free equivalents. Return NULL on failure (or on an injected failure).
 * mem_calloc checks n * size for overflow. mem_free(NULL) is a no-op. */
void *mem_alloc(size_t size);
void *mem_calloc(size_t n, size_t size);
void *mem_realloc(void *p, size_t size);
void mem_free(void *p);

/* Copies a NUL-terminated string / len bytes plus a NUL. Caller frees with mem_free(). */
char *mem_strdup(const char *s);
char *mem_strndup(const char *s, size_t len);

/* Test hooks. mem_fail_after(n): the allocation after n more successful ones fails (n = -1
 * disables). mem_live_count(): allocations not yet freed. mem_failed_count(): injected
 * failures so far. */
void mem_fail_after(int64_t n);
int64_t mem_live_count(void);
int64_t mem_failed_count(void);

#endif
