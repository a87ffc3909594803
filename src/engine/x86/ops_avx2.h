/* AVX2 + FMA + F16C variants of the ops.h kernels (x86 builds only; engine/x86/ is compiled
 * for x86 alone): include and call under #if defined(__x86_64__) || defined(__i386__). */
#ifndef ENGINE_X86_OPS_AVX2_H
#define ENGINE_X86_OPS_AVX2_H

#include "engine/ops.h"

#include <stdbool.h>

/* True when the CPU runs the AVX2 table (AVX2, FMA and F16C). Cannot fail. */
bool ops_have_avx2(void);

/* The AVX2 kernel table (rmsnorm and rope are the references' there); call only when
 * ops_have_avx2(). Cannot fail. */
const struct ops_kernels *ops_avx2_kernels(void);

#endif
