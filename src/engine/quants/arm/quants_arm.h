/* The ARM kernel symbols the dispatch table in quants.c points at (engine/quants/arm/). The
 * aarch64 build alone compiles them: include under #if defined(__aarch64__).
 * - *_neon (quants_neon.c): ARMv8.0 Advanced SIMD; int8 products by smull/smlal2 + sadalp.
 * - *_dotprod (quants_dotprod.c, built with +dotprod): the same kernels with sdot.
 * - *_i8mm (quants_i8mm.c, built with +i8mm): 2x2 Q4_0 tiles by smmla.
 * Float and 32-element kernels give the x86 (AVX2) kernels' bits for every QUANT_ORDER_*;
 * K-quant kernels give the scalar reference's bits. */
#ifndef ENGINE_QUANTS_ARM_QUANTS_ARM_H
#define ENGINE_QUANTS_ARM_QUANTS_ARM_H

#include "engine/quants/quant_types.h"

#include <stdint.h>

#define QUANT_DECL_ARM(ty, isa)                                                                    \
    void ty##_vec_dot_##isa(int64_t n, float *s, const void *x, const void *y);
#define QUANT_DECL_ARM_TILE(ty, isa) void ty##_vec_dot_tile_##isa(const struct quant_tile *t);
#define QUANT_DECL_ARM_SET(isa)                                                                    \
    QUANT_DECL_ARM(f32, isa)                                                                       \
    QUANT_DECL_ARM(f16, isa)                                                                       \
    QUANT_DECL_ARM(bf16, isa)                                                                      \
    QUANT_DECL_ARM(q4_0, isa)                                                                      \
    QUANT_DECL_ARM(q4_1, isa)                                                                      \
    QUANT_DECL_ARM(q5_0, isa)                                                                      \
    QUANT_DECL_ARM(q5_1, isa)                                                                      \
    QUANT_DECL_ARM(q8_0, isa)                                                                      \
    QUANT_DECL_ARM(q2_K, isa)                                                                      \
    QUANT_DECL_ARM(q3_K, isa)                                                                      \
    QUANT_DECL_ARM(q4_K, isa)                                                                      \
    QUANT_DECL_ARM(q5_K, isa)                                                                      \
    QUANT_DECL_ARM(q6_K, isa)                                                                      \
    QUANT_DECL_ARM_TILE(f32, isa)                                                                  \
    QUANT_DECL_ARM_TILE(f16, isa)                                                                  \
    QUANT_DECL_ARM_TILE(bf16, isa)                                                                 \
    QUANT_DECL_ARM_TILE(q4_0, isa)                                                                 \
    QUANT_DECL_ARM_TILE(q4_1, isa)                                                                 \
    QUANT_DECL_ARM_TILE(q5_0, isa)                                                                 \
    QUANT_DECL_ARM_TILE(q5_1, isa)                                                                 \
    QUANT_DECL_ARM_TILE(q8_0, isa)                                                                 \
    void q8_0_activations_##isa(const float *x, void *y, int64_t n);                               \
    void q8_1_activations_##isa(const float *x, void *y, int64_t n);                               \
    void q8_K_from_float_##isa(const float *x, void *y, int64_t n);
QUANT_DECL_ARM_SET(neon)
QUANT_DECL_ARM_SET(dotprod)
#undef QUANT_DECL_ARM_SET
#undef QUANT_DECL_ARM
#undef QUANT_DECL_ARM_TILE

/* The IQ types and MXFP4 (quants_iq_neon.c, quants_iq_dotprod.c): the AVX2 kernels' bits. */
#define QUANT_DECL_IQ_ARM(t, isa)                                                                  \
    void t##_vec_dot_##isa(int64_t n, float *s, const void *x, const void *y);                     \
    void t##_vec_dot_tile_##isa(const struct quant_tile *tile);
QUANT_DECL_IQ_ARM(iq4_nl, neon)
QUANT_DECL_IQ_ARM(iq4_xs, neon)
QUANT_DECL_IQ_ARM(mxfp4, neon)
QUANT_DECL_IQ_ARM(iq4_nl, dotprod)
QUANT_DECL_IQ_ARM(iq4_xs, dotprod)
QUANT_DECL_IQ_ARM(mxfp4, dotprod)
#undef QUANT_DECL_IQ_ARM

/* Q4_0 tiles by smmla for QUANT_ORDER_BLOCKS (whole-block integer dots, which is what smmla
 * yields); other orders go to the dotprod tile. */
void q4_0_vec_dot_tile_i8mm(const struct quant_tile *t);

#endif
