/* The x86 kernel symbols the dispatch tables in quants.c point at (engine/quants/x86/; x86
 * builds only: include under #if defined(__x86_64__) || defined(__i386__)), as
 * arm/quants_arm.h declares the ARM ones. Each is only called after kernels_init saw the CPU
 * features its file is compiled for:
 * - *_avx2 (quants_avx2.c, quants_k_avx2.c, quants_iq_avx2.c, quants_r16_avx2.c): AVX2 + FMA +
 *   F16C.
 * - *_vnni (quants_vnni_avx2.c): the same bits with AVX-VNNI.
 * - *_avx512 (quants_avx512.c, quants_k_avx512.c, quants_iq_avx512.c, quants_f16_avx512.c,
 *   quants_pair_avx512.c): AVX-512 F/BW/VL/DQ + VNNI; *_avx512bf16 (quants_bf16_avx512.c)
 *   also AVX512_BF16. */
#ifndef ENGINE_QUANTS_X86_QUANTS_X86_H
#define ENGINE_QUANTS_X86_QUANTS_X86_H

#include "engine/quants/quant_types.h"

#include <stdint.h>

/* AVX-512 kernels (x86/quants_avx512.c); only called after kernels_init saw the features. */
void q8_0_r16_tile_avx512(const struct quant_tile *tile);
void q4_0_r16_tile_avx512(const struct quant_tile *tile);
void q5_0_r16_tile_avx512(const struct quant_tile *tile);
void q4_K_r16_tile_avx512(const struct quant_tile *tile);
void q6_K_r16_tile_avx512(const struct quant_tile *tile); // x86/quants_k_avx512.c
void q8_0s_from_float_avx512(const float *x, void *y, int64_t n);
/* F16 with two rows per zmm in the AVX2 set's arithmetic (x86/quants_f16_avx512.c). */
#define F16_TILE_COLS 48 // tokens per F16 AVX-512 tile: its panel of converted rows serves them all
void f16_vec_dot_tile_avx512(const struct quant_tile *tile);
/* BF16 x BF16 activations with vdpbf16ps (x86/quants_bf16_avx512.c), only where AVX512_BF16 is. */
void bf16_vec_dot_avx512bf16(int64_t n, float *s, const void *x, const void *y);
void bf16_vec_dot_tile_avx512bf16(const struct quant_tile *tile);
void bf16_from_float_avx512(const float *x, void *y, int64_t n);

/* AVX2+FMA+F16C variants (x86/quants_avx2.c, x86/quants_k_avx2.c); only called after
 * kernels_init saw the CPU features. */
#define QUANT_DECL_AVX2(ty)                                                                        \
    void ty##_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y);                     \
    void ty##_vec_dot_tile_avx2(const struct quant_tile *tile);
QUANT_DECL_AVX2(f32)
QUANT_DECL_AVX2(f16)
QUANT_DECL_AVX2(bf16)
QUANT_DECL_AVX2(q4_0)
QUANT_DECL_AVX2(q4_1)
QUANT_DECL_AVX2(q5_0)
QUANT_DECL_AVX2(q5_1)
QUANT_DECL_AVX2(q8_0)
QUANT_DECL_AVX2(q2_K)
QUANT_DECL_AVX2(q3_K)
QUANT_DECL_AVX2(q4_K)
QUANT_DECL_AVX2(q5_K)
QUANT_DECL_AVX2(q6_K)
/* Q4_0_R16 in the Q4_0 block order on the AVX2 sets (x86/quants_r16_avx2.c). */
void q4_0_r16_tile_avx2(const struct quant_tile *tile);

/* AVX-VNNI variants of the 32-element block dots (x86/quants_vnni_avx2.c); bit-identical to the
 * AVX2 ones, used when the CPU also has AVX-VNNI. */
#define QUANT_DECL_VNNI(ty)                                                                        \
    void ty##_vec_dot_vnni(int64_t n, float *s, const void *x, const void *y);                     \
    void ty##_vec_dot_tile_vnni(const struct quant_tile *tile);
QUANT_DECL_VNNI(q4_0)
QUANT_DECL_VNNI(q4_1)
QUANT_DECL_VNNI(q5_0)
QUANT_DECL_VNNI(q5_1)
QUANT_DECL_VNNI(q8_0)
#undef QUANT_DECL_VNNI
void q8_0_from_float_avx2(const float *x, void *y, int64_t n);
void q8_0_activations_avx2(const float *x, void *y, int64_t n);
void q8_0s_from_float_avx2(const float *x, void *y, int64_t n);
void q8_1_activations_avx2(const float *x, void *y, int64_t n);
void q8_1_from_float_avx2(const float *x, void *y, int64_t n);
void q8_K_from_float_avx2(const float *x, void *y, int64_t n);
#undef QUANT_DECL_AVX2

/* The IQ types and MXFP4 (quants_iq_avx2.c, quants_iq_avx512.c). */
#define QUANT_DECL_IQ_AVX2(t)                                                                      \
    void t##_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y);                      \
    void t##_vec_dot_tile_avx2(const struct quant_tile *tile);
QUANT_DECL_IQ_AVX2(iq4_nl)
QUANT_DECL_IQ_AVX2(iq4_xs)
QUANT_DECL_IQ_AVX2(mxfp4)
#undef QUANT_DECL_IQ_AVX2
/* engine/quants/x86/quants_iq_avx512.c: the AVX2 kernels' bits with AVX-512 VNNI. */
#define QUANT_DECL_IQ_AVX512(t)                                                                    \
    void t##_vec_dot_avx512(int64_t n, float *s, const void *x, const void *y);                    \
    void t##_vec_dot_tile_avx512(const struct quant_tile *tile);
QUANT_DECL_IQ_AVX512(iq4_nl)
QUANT_DECL_IQ_AVX512(iq4_xs)
QUANT_DECL_IQ_AVX512(mxfp4)
#undef QUANT_DECL_IQ_AVX512

/* Two weight rows per zmm register (quants_pair_avx512.c): Q4_1, Q5_0, Q5_1 against
 * Q8_0/Q8_1 and Q3_K, Q5_K against Q8_K, in the file's row layout (no repacking); each gives
 * the AVX2 kernel's bits. */
#define QUANT_DECL_PAIR(ty)                                                                        \
    void ty##_vec_dot_avx512(int64_t n, float *s, const void *x, const void *y);                   \
    void ty##_vec_dot_tile_avx512(const struct quant_tile *tile);
QUANT_DECL_PAIR(q4_1)
QUANT_DECL_PAIR(q5_0)
QUANT_DECL_PAIR(q5_1)
QUANT_DECL_PAIR(q3_K)
QUANT_DECL_PAIR(q5_K)
#undef QUANT_DECL_PAIR

#endif
