/* The single-pass arithmetic of the tiled attention (engine/attn.h) over one converted tile
 * in NEON — aarch64 builds only; attn_neon.c calls it. Not for use outside the attention
 * module. */
#ifndef ENGINE_ARM_ATTN_SINGLE_NEON_H
#define ENGINE_ARM_ATTN_SINGLE_NEON_H

#include "engine/attn.h"

/* Every query of b that sees keys [k0, k0 + n) steps through them: kr and vr hold the tile's
 * keys and values as F32 rows of head_dim floats (row j: position k0 + j), b->out[i] the
 * query's half accumulator and state[i] its running maximum and sum, all updated in place
 * with attn_run_ref's bits. Cannot fail. */
void attn_single_tile_neon(const struct attn_block *b, const float *kr, const float *vr, int k0,
                           int n, float state[][2]);

#endif
