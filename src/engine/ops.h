/* Small float kernels of the forward pass that are not weight-matrix products: half-precision
 * conversion, the dot/axpy steps attention runs over the F16 KV cache, RMS norm, RoPE, SwiGLU
 * and GeGLU. Each has a scalar reference (ops_ref.c, which also holds the scalar conversions
 * below) and SIMD variants (x86/ops_avx2.c, x86/ops_avx512.c, arm/ops_neon.c); kernels_init()
 * (engine/kernels.h) installs one set per process and ops.c holds it. */
#ifndef ENGINE_OPS_H
#define ENGINE_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* Attention works on half-precision rows the way the reference CPU flash-attention kernel
 * does (queries rounded to half, a half accumulator), so greedy outputs follow it. */
struct ops_kernels {
    /* Returns sum of a[i] * b[i], both in IEEE half bits. */
    float (*dot_f16)(int64_t n, const uint16_t *a, const uint16_t *b);
    /* y[i] = half(y[i] + x[i] * s); x and y in half bits. */
    void (*mad_f16)(int64_t n, uint16_t *y, const uint16_t *x, float s);
    /* y[i] = half(y[i] * s). */
    void (*scale_f16)(int64_t n, uint16_t *y, float s);
    /* y[i] = half(x[i]), round to nearest even. */
    void (*f32_to_f16)(int64_t n, const float *x, uint16_t *y);
    /* x[i] = float(half(x[i])) in place: the inputs the reference's F16 products see. */
    void (*round_f16)(int64_t n, float *x);
    /* g[i] = silu(g[i]) * u[i] with the reference's arithmetic: each full group of 8 uses
     * its polynomial exponential (ops_expf_poly), the rest libm's expf. */
    void (*swiglu)(int64_t n, float *g, const float *u);
    /* y[i] = (x[i] * (1 / sqrtf(mean + eps))) * w[i], mean = (float)(sum of the float squares
     * x[i] * x[i] in double / n); y may be x. The SIMD variants add the squares in another
     * order (still in double), which can move the rounding to float only when the double sum
     * falls within a few of its ulps of a float rounding boundary. */
    void (*rmsnorm)(int64_t n, float *y, const float *x, const float *w, float eps);
    /* Rotates one head in place with the token's cos/sin table (n_rot / 2 pairs; NeoX halves
     * or adjacent pairs), rounding as the reference's x86 build does: each output one FMA
     * over one rounded product, x0' = fma(cos, x0, -(sin * x1)), x1' = fma(sin, x0, cos * x1);
     * only an odd last pair of the adjacent layout uses two rounded products. Every variant
     * gives these bits. */
    void (*rope)(float *x, const float *cs, const float *sn, int n_rot, bool neox);
    /* g[i] = gelu(g[i]) * u[i] with the reference's GELU (tanh form, its half table): 0 for
     * g[i] <= -10, g[i] * u[i] for g[i] >= 10, else ops_gelu_table()[half(g[i])] * u[i]. Every
     * variant gives these bits. */
    void (*geglu)(int64_t n, float *g, const float *u);
};

/* Makes k (static; name: "avx2", "avx512", "neon") the table ops_get returns. Only
 * kernels_init calls it, once, before any kernel thread reads the table. Cannot fail. */
void ops_select(const struct ops_kernels *k, const char *name);

/* The selected kernels (the references before kernels_init). Cannot fail. */
const struct ops_kernels *ops_get(void);
/* The scalar references, for tests. */
const struct ops_kernels *ops_ref(void);

/* Scalar half <-> float conversions (round to nearest even). Cannot fail. */
uint16_t ops_f32_to_f16(float f);
float ops_f16_to_f32(uint16_t h);

/* GELU of every half value, indexed by its bits: half(0.5 h (1 + tanh(sqrt(2/pi) h (1 + 0.044715
 * h^2)))) as a float, h the half as a float, as the reference tabulates it (65536 floats,
 * filled on the first call; thread-safe). Cannot fail. */
const float *ops_gelu_table(void);

/* e^x as the reference's vectorized exponential computes it (a degree-5 polynomial on a
 * range-reduced argument, with fused multiply-adds; within a few ulp of expf, but not equal
 * to it). Scalar; the AVX2 swiglu gives the same bits per lane. Cannot fail. */
float ops_expf_poly(float x);

/* "scalar", "avx2", "avx512" or "neon": the set kernels_init chose (static string). */
const char *ops_variant_name(void);

#endif
