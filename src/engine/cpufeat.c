/* cpuid-based detection. <cpuid.h> works with gcc and clang alike (clang 14's
 * __builtin_cpu_supports does not know "f16c"). Bits from the Intel SDM, CPUID leaves 1 and 7. */
#include "engine/cpufeat.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stdint.h>

static bool os_saves_avx_state(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 0x6) == 0x6; // XMM and YMM state enabled
}

bool cpufeat_has_avx2_fma_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), f16c = c & (1u << 29);
    if (!fma || !osxsave || !f16c || !os_saves_avx_state()) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return b & (1u << 5); // AVX2
}
#else
bool cpufeat_has_avx2_fma_f16c(void)
{
    return false;
}
#endif
