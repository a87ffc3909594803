/* The sampler's passes over the whole vocabulary in AVX2 and AVX-512 (x86 builds only; call
 * when cpufeat says the set runs). sampler.c picks them by cpufeat_isa(). */
#ifndef ENGINE_X86_SAMPLER_X86_H
#define ENGINE_X86_SAMPLER_X86_H

#include <stdint.h>

/* The first index of the largest value of x[0..n) that is not NaN and above -inf; -1 when
 * there is none. The scalar loop's answer exactly (max is exact in any order). */
int32_t sampler_argmax_avx2(const float *x, int32_t n);
int32_t sampler_argmax_avx512(const float *x, int32_t n);

/* The first j in [i, n) with x[j] > t (NaN never), or n: top-k's scan for candidates that
 * beat the heap's worst. */
int32_t sampler_next_above_avx2(const float *x, int32_t i, int32_t n, float t);
int32_t sampler_next_above_avx512(const float *x, int32_t i, int32_t n, float t);

/* sum of e^(x[i] - m) in double, e^ by ops_expf_poly's operations (within a few ulp of expf),
 * the lanes' float terms added into double lanes, then the lanes in a fixed order: the same
 * value for the same input every time, within 1e-6 relative of the scalar sum. */
double sampler_sum_exp_avx2(const float *x, int32_t n, float m);
double sampler_sum_exp_avx512(const float *x, int32_t n, float m);

#endif
