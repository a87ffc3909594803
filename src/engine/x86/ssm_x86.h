/* AVX2 and AVX-512 variants of the recurrent scans (ssm.h has their contracts); only call the
 * AVX2 ones when the CPU has AVX2 and FMA, the AVX-512 ones when cpufeat_has_avx512().
 * Internal to engine/. */
#ifndef ENGINE_X86_SSM_X86_H
#define ENGINE_X86_SSM_X86_H

/* ssm_delta_step_ref's arithmetic per element, its dots in the reference's AVX2 order (four
 * 8-lane accumulators over whole 32-element steps, then the rest in double). */
void ssm_delta_step_avx2(int n, float *state, const float *q, const float *k, const float *v,
                         float decay, float beta, float scale, float *out);

/* ssm_ssd_step_ref's arithmetic per element, its dots in the reference's AVX2 scan order (the
 * same accumulators, the rest in float). */
void ssm_ssd_step_avx2(int head_dim, int n, float *state, const float *x, const float *b,
                       const float *c, float decay, float dt, float *y);

/* ssm_delta_step_ref's arithmetic per element, its dots in the reference's AVX-512 order (four
 * 16-lane accumulators over whole 64-element steps, then the rest in float). */
void ssm_delta_step_avx512(int n, float *state, const float *q, const float *k, const float *v,
                           float decay, float beta, float scale, float *out);

/* ssm_ssd_step_ref's arithmetic per element, its dots in the reference's AVX-512 scan order. */
void ssm_ssd_step_avx512(int head_dim, int n, float *state, const float *x, const float *b,
                         const float *c, float decay, float dt, float *y);

#endif
