/* The non-linear 4-bit block types (IQ4_NL, IQ4_XS) and MXFP4: layouts as ggml-common.h
 * defines them, their value tables, and the kernel symbols quants.c puts in its table. Never
 * include this from outside engine/quants. */
#ifndef ENGINE_QUANTS_QUANTS_IQ_INTERNAL_H
#define ENGINE_QUANTS_QUANTS_IQ_INTERNAL_H

#include "engine/quants/quants_internal.h"

#include <stdint.h>

#define QK4_NL   32
#define QK_MXFP4 32

struct block_iq4_nl {
    half_bits d;
    uint8_t qs[QK4_NL / 2]; // element j: table[qs[j] & 15], element j+16: table[qs[j] >> 4]
} PACKED;
struct block_iq4_xs {
    half_bits d;
    uint16_t scales_h;           // bits 2i, 2i+1: high bits of sub-block i's 6-bit scale
    uint8_t scales_l[QK_K / 64]; // low nibbles of the scales, two sub-blocks per byte
    uint8_t qs[QK_K / 2];        // eight IQ4_NL-style sub-blocks of 32
} PACKED;
struct block_mxfp4 {
    uint8_t e; // E8M0 shared exponent: scale 2^(e - 128) against the doubled FP4 values
    uint8_t qs[QK_MXFP4 / 2];
} PACKED;

_Static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(struct block_mxfp4) == 17, "mxfp4 layout");

/* The sixteen levels of IQ4_NL / IQ4_XS, and of MXFP4 (E2M1 values doubled). */
extern const int8_t iq4nl_values[16];
extern const int8_t mxfp4_values[16];

/* 2^(e - 128): half the E8M0 scale, matching the doubled table. */
static inline float e8m0_half_to_f32(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return bits_to_f32(bits);
}

/* Scale (-32..31) of sub-block ib (0..7) of an IQ4_XS super-block. */
static inline int iq4_xs_scale(const struct block_iq4_xs *b, int ib)
{
    const int lo = (b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
    const int hi = (b->scales_h >> (2 * ib)) & 3;
    return (lo | (hi << 4)) - 32;
}

#define QUANT_DECL_IQ(t)                                                                           \
    void t##_to_float_ref(const void *x, float *y, int64_t n);                                     \
    void t##_from_float_ref(const float *x, void *y, int64_t n);                                   \
    void t##_vec_dot_ref(int64_t n, float *s, const void *x, const void *y);                       \
    void t##_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y);                      \
    void t##_vec_dot_tile_avx2(const struct quant_tile *tile);
QUANT_DECL_IQ(iq4_nl)
QUANT_DECL_IQ(iq4_xs)
QUANT_DECL_IQ(mxfp4)
#undef QUANT_DECL_IQ

/* engine/quants/x86/quants_iq_avx512.c: the AVX2 kernels' bits with AVX-512 VNNI. */
#define QUANT_DECL_IQ_AVX512(t)                                                                    \
    void t##_vec_dot_avx512(int64_t n, float *s, const void *x, const void *y);                    \
    void t##_vec_dot_tile_avx512(const struct quant_tile *tile);
QUANT_DECL_IQ_AVX512(iq4_nl)
QUANT_DECL_IQ_AVX512(iq4_xs)
QUANT_DECL_IQ_AVX512(mxfp4)
#undef QUANT_DECL_IQ_AVX512

#if defined(__aarch64__)
/* engine/quants/arm/quants_iq_{neon,dotprod}.c: the AVX2 kernels' bits on NEON. */
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
#endif

#endif
