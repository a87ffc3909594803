/* The scalar reference kernels the tables of quants.c point at and the SIMD kernels are
 * tested against. Include from engine/quants only. */
#ifndef ENGINE_QUANTS_QUANTS_REF_H
#define ENGINE_QUANTS_QUANTS_REF_H

#include <stdint.h>

/* The scalar references of every type in the table (quants_ref.c, quants_k_ref.c,
 * quants_iq_ref.c). Names: <type>_<op>_ref. */
#define QUANT_DECL_REF(t)                                                                          \
    void t##_to_float_ref(const void *x, float *y, int64_t n);                                     \
    void t##_from_float_ref(const float *x, void *y, int64_t n);                                   \
    void t##_vec_dot_ref(int64_t n, float *s, const void *x, const void *y);
QUANT_DECL_REF(f32)
QUANT_DECL_REF(f16)
QUANT_DECL_REF(bf16)
QUANT_DECL_REF(q4_0)
QUANT_DECL_REF(q4_1)
QUANT_DECL_REF(q5_0)
QUANT_DECL_REF(q5_1)
QUANT_DECL_REF(q8_0)
QUANT_DECL_REF(q2_K)
QUANT_DECL_REF(q3_K)
QUANT_DECL_REF(q4_K)
QUANT_DECL_REF(q5_K)
QUANT_DECL_REF(q6_K)
QUANT_DECL_REF(iq4_nl)
QUANT_DECL_REF(iq4_xs)
QUANT_DECL_REF(mxfp4)
#undef QUANT_DECL_REF
void q8_1_to_float_ref(const void *x, float *y, int64_t n);
void q8_1_from_float_ref(const float *x, void *y, int64_t n);
void q8_K_to_float_ref(const void *x, float *y, int64_t n);
void q8_K_from_float_ref(const float *x, void *y, int64_t n);
void q8_0s_to_float_ref(const void *x, float *y, int64_t n);
void q8_0s_from_float_ref(const float *x, void *y, int64_t n);

/* Q8_0 and Q8_1 activations as the reference's x86 runtime quantizes them (quants.h's
 * quant_q8_0_activations, quant_q8_1_activations). */
void q8_0_activations_ref(const float *x, void *y, int64_t n);
void q8_1_activations_ref(const float *x, void *y, int64_t n);

#endif
