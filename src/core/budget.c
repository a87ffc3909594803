/* Memory budget with a lock-free compare-and-swap reservation. */
#include "core/budget.h"

#include <stdio.h>
#include <string.h>

uint64_t budget_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    fclose(f);
    return (uint64_t)kib * 1024;
}

void budget_init(struct budget *b, uint64_t limit_bytes)
{
    if (limit_bytes == 0) {
        uint64_t avail = budget_mem_available();
        limit_bytes = avail ? avail / 4 * 3 : (uint64_t)4 << 30;
    }
    b->limit_bytes = limit_bytes;
    atomic_init(&b->used_bytes, 0);
}

bool budget_reserve(struct budget *b, uint64_t bytes)
{
    uint_least64_t used = atomic_load(&b->used_bytes);
    for (;;) {
        if (bytes > b->limit_bytes || used > b->limit_bytes - bytes) return false;
        if (atomic_compare_exchange_weak(&b->used_bytes, &used, used + bytes)) return true;
    }
}

void budget_release(struct budget *b, uint64_t bytes)
{
    atomic_fetch_sub(&b->used_bytes, bytes);
}
