/* The scalar pieces of ops.h's reference kernels that the SIMD variants (engine/x86/,
 * engine/arm/) reuse, so that their leftover elements take exactly the reference's loops. Not
 * for use outside the ops family. */
#ifndef ENGINE_OPS_REF_H
#define ENGINE_OPS_REF_H

#include <stdbool.h>
#include <stdint.h>

/* The dot tail adds the products of elements [i, n) to the running double sum of the SIMD
 * part; the mad tail is mad_f16 over elements [i, n). Cannot fail. */
double ops_dot_f16_tail(int64_t i, int64_t n, const uint16_t *a, const uint16_t *b, double sum);
void ops_mad_f16_tail(int64_t i, int64_t n, uint16_t *y, const uint16_t *x, float s);

/* The reference RoPE for pairs [i0, n_rot / 2) only. Cannot fail. */
void ops_rope_tail(float *x, const float *cs, const float *sn, int n_rot, bool neox, int i0);

/* geglu's scalar form for elements [i, n) (the reference kernel from i = 0). Cannot fail. */
void ops_geglu_tail(int64_t i, int64_t n, float *g, const float *u);

/* The reference rmsnorm and rope, for the SIMD tables that keep them (the AVX2 one).
 * Contracts as in struct ops_kernels. Cannot fail. */
void ops_rmsnorm_ref(int64_t n, float *y, const float *x, const float *w, float eps);
void ops_rope_ref(float *x, const float *cs, const float *sn, int n_rot, bool neox);

#endif
