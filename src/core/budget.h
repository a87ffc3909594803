/* A memory budget for instance KV caches: loads and resizes reserve bytes before creating an
 * instance, so what does not fit becomes a partial load instead of an OOM kill. */
#ifndef CORE_BUDGET_H
#define CORE_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct budget {
    uint64_t limit_bytes; // immutable after init
    atomic_uint_least64_t used_bytes;
};

/* limit_bytes 0 means: 75% of MemAvailable from /proc/meminfo (4 GiB when unreadable). */
void budget_init(struct budget *b, uint64_t limit_bytes);

/* Reserves bytes; false (nothing reserved) when the limit would be exceeded. Thread-safe. */
bool budget_reserve(struct budget *b, uint64_t bytes);
void budget_release(struct budget *b, uint64_t bytes);

/* Reads MemAvailable in bytes (0 when unknown). */
uint64_t budget_mem_available(void);

#endif
