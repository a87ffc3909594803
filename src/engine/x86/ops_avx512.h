/* AVX-512 variants of the ops.h and attn.h kernels (x86 builds only; engine/x86/ is compiled
 * for x86 alone with the AVX-512 F/BW/VL/DQ flags): include and call under
 * #if defined(__x86_64__) || defined(__i386__), and only when cpufeat_has_avx512(). */
#ifndef ENGINE_X86_OPS_AVX512_H
#define ENGINE_X86_OPS_AVX512_H

#include "engine/ops.h"

/* The AVX-512 kernel table. Every kernel gives the AVX2 variant's bits (16 lanes where AVX2
 * has 8, the same operations per lane and the same reduction trees), except rmsnorm, whose
 * double sum of squares runs in 8 lanes (ops.h). Cannot fail. */
const struct ops_kernels *ops_avx512_kernels(void);

#endif
