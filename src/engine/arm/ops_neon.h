/* NEON variants of the ops.h kernels (aarch64 builds only; engine/arm/ is compiled for ARM
 * alone): include and call under #if defined(__aarch64__). */
#ifndef ENGINE_ARM_OPS_NEON_H
#define ENGINE_ARM_OPS_NEON_H

#include "engine/ops.h"

/* The NEON kernel table: every ARMv8-A core has Advanced SIMD and half<->float conversion.
 * Each kernel gives the AVX2 variant's bits (mad_f16, scale_f16, f32_to_f16, swiglu and rope
 * are also the scalar references' bits; dot_f16 follows the AVX2 summation order; rmsnorm's
 * double sum runs in lanes, see ops.h). Cannot fail. */
const struct ops_kernels *ops_neon_kernels(void);

#endif
