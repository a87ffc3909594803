/* CPU feature detection for kernel dispatch: one answer for every SIMD table in the engine. */
#ifndef ENGINE_CPUFEAT_H
#define ENGINE_CPUFEAT_H

#include <stdbool.h>

/* True on x86 CPUs with AVX2, FMA and F16C, and an OS that saves the AVX state (OSXSAVE and
 * XCR0). Cannot fail; false on other architectures. Thread-safe. */
bool cpufeat_has_avx2_fma_f16c(void);

#endif
