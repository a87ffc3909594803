/* NEON variants of the recurrent scans (ssm.h has their contracts); aarch64 builds only
 * (engine/arm/ is compiled for ARM alone), every ARMv8-A core runs them. Internal to engine/. */
#ifndef ENGINE_ARM_SSM_NEON_H
#define ENGINE_ARM_SSM_NEON_H

/* ssm_delta_step_ref's arithmetic per element, its dots in the reference's NEON order (four
 * 4-lane accumulators over whole 16-element steps, then the rest in float). Cannot fail. */
void ssm_delta_step_neon(int n, float *state, const float *q, const float *k, const float *v,
                         float decay, float beta, float scale, float *out);

/* ssm_ssd_step_ref's arithmetic per element, its dots in the reference's NEON scan order (the
 * same accumulators, the rest in float). Cannot fail. */
void ssm_ssd_step_neon(int head_dim, int n, float *state, const float *x, const float *b,
                       const float *c, float decay, float dt, float *y);

#endif
