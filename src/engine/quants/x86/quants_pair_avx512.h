/* AVX-512 kernels that multiply two weight rows per zmm register (x86/quants_pair_avx512.c):
 * Q4_1, Q5_0, Q5_1 against Q8_0/Q8_1 and Q3_K, Q5_K against Q8_K, in the file's row
 * layout (no repacking). Each gives the AVX2 kernel's bits. Declared for the dispatch table
 * in quants.c; only called after kernels_init saw AVX-512 F/BW/VL/DQ + VNNI. */
#ifndef ENGINE_QUANTS_X86_QUANTS_PAIR_AVX512_H
#define ENGINE_QUANTS_X86_QUANTS_PAIR_AVX512_H

#include "engine/quants/quants.h"

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
