/* Random ids from getrandom(2); falls back to a clock-and-counter mix if it is unavailable. */
#define _GNU_SOURCE // getrandom
#include "api/ids.h"

#include "util/clock.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>

void api_make_id(const char *prefix, char *out, size_t cap)
{
    static atomic_uint_fast64_t counter;
    uint64_t r[2];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        uint64_t x = (uint64_t)clock_now_ns() ^ (atomic_fetch_add(&counter, 1) << 32);
        r[0] = x * 0x9E3779B97F4A7C15ull;
        r[1] = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
    }
    snprintf(out, cap, "%s%016llx%08llx", prefix, (unsigned long long)r[0],
             (unsigned long long)(r[1] & 0xffffffffu));
}
