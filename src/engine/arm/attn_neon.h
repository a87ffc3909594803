/* The NEON variant of the tiled attention (engine/attn.h) — aarch64 builds only (engine/arm/
 * is compiled for ARM alone): include and call under #if defined(__aarch64__). */
#ifndef ENGINE_ARM_ATTN_NEON_H
#define ENGINE_ARM_ATTN_NEON_H

#include "engine/attn.h"

/* attn_run with Advanced SIMD, bit-identical to attn_run_ref (and so to the x86 variants):
 * every ARMv8-A core has it. Same contract as attn_run. */
void attn_run_neon(const struct attn_block *b);

#endif
