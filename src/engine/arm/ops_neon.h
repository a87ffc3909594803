/* NEON variants of the ops.h kernels (aarch64 builds only; engine/arm/ is compiled for ARM
 * alone): include and call under #if defined(__aarch64__). */
#ifndef ENGINE_ARM_OPS_NEON_H
#define ENGINE_ARM_OPS_NEON_H

#include "engine/ops.h"

/* The NEON kernel table: every ARMv8-A core has Advanced SIMD and half<->float conversion.
 * mad_f16, scale_f16, f32_to_f16 and swiglu give the scalar references' bits (the same fused
 * or rounded steps per lane); dot_f16 sums its float products in double as the reference does,
 * in another order. Cannot fail. */
const struct ops_kernels *ops_neon_kernels(void);

#endif
