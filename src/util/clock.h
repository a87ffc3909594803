/* Monotonic and wall clocks in the units the rest of the code uses. */
#ifndef UTIL_CLOCK_H
#define UTIL_CLOCK_H

#include <stdint.h>

/* Monotonic time in nanoseconds / milliseconds since an arbitrary origin. Cannot fail. */
int64_t clock_now_ns(void);
double clock_now_ms(void);

/* Wall-clock Unix time in seconds. Cannot fail. */
int64_t clock_unix_s(void);

#endif
