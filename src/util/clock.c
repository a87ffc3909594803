/* clock_gettime wrappers. */
#include "util/clock.h"

#include <time.h>

int64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double clock_now_ms(void)
{
    return (double)clock_now_ns() / 1e6;
}

int64_t clock_unix_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}
