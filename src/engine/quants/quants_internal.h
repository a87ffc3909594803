/* Internals shared by the files of engine/quants: the on-disk block layouts (as ggml-common.h
 * defines them; little-endian, no padding), half/bfloat conversions and the kernel symbols the
 * dispatch table in quants.c points at. Never include this from outside engine/quants. */
#ifndef ENGINE_QUANTS_QUANTS_INTERNAL_H
#define ENGINE_QUANTS_QUANTS_INTERNAL_H

#include "engine/quants/quants.h"

#include <stdint.h>
#include <string.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K  256 // elements per K-quant super-block

typedef uint16_t half_bits; // IEEE binary16, stored as its bits

/* Blocks are byte-packed (the layouts have no padding anyway) so a row may start at any byte
 * offset: gguf aligns tensors, but rows inside a tensor and callers' buffers need not be. */
#define PACKED __attribute__((packed))

struct block_q4_0 {
    half_bits d;           // scale
    uint8_t qs[QK4_0 / 2]; // element j in the low nibble of qs[j], element j+16 in the high one
} PACKED;
struct block_q4_1 {
    half_bits d, m; // scale, min: x = q * d + m
    uint8_t qs[QK4_1 / 2];
} PACKED;
struct block_q5_0 {
    half_bits d;
    uint8_t qh[4]; // bit j (uint32 LE) = 5th bit of element j
    uint8_t qs[QK5_0 / 2];
} PACKED;
struct block_q5_1 {
    half_bits d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} PACKED;
struct block_q8_0 {
    half_bits d;
    int8_t qs[QK8_0];
} PACKED;
struct block_q8_1 {
    half_bits d, s; // scale, d * sum(qs)
    int8_t qs[QK8_1];
} PACKED;
struct block_q2_K {
    uint8_t scales[QK_K / 16]; // low nibble scale, high nibble min, per 16 elements
    uint8_t qs[QK_K / 4];      // 2-bit quants, 4 per byte
    half_bits d, dmin;         // super-block scales of scales and mins
} PACKED;
struct block_q3_K {
    uint8_t hmask[QK_K / 8]; // high bit of each 3-bit quant
    uint8_t qs[QK_K / 4];    // low 2 bits
    uint8_t scales[12];      // 16 6-bit scales (biased by 32), packed
    half_bits d;
} PACKED;
struct block_q4_K {
    half_bits d, dmin;
    uint8_t scales[12]; // 8 6-bit scales and 8 6-bit mins, packed
    uint8_t qs[QK_K / 2];
} PACKED;
struct block_q5_K {
    half_bits d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} PACKED;
struct block_q6_K {
    uint8_t ql[QK_K / 2];     // low 4 bits
    uint8_t qh[QK_K / 4];     // high 2 bits
    int8_t scales[QK_K / 16]; // per 16 elements
    half_bits d;
} PACKED;
struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; // sum of each 16 quants
} PACKED;

/* The activations of the repacked Q8_0/Q4_0 kernels: Q8_0's quants and scale (d is the
 * half-rounded scale, as a float) and the integer corrections that remove the offsets of the
 * unsigned stored weights, so the kernels' integer dots are exact: c8 = -8 * sum(qs) (Q4_0's
 * nibbles are q + 8), c128[k] = -128 * sum(qs[4k..4k+3]) (Q8_0 is stored as q + 128; Q5_0 as
 * q + 16 takes c128[k] / 8). */
struct block_q8_0s {
    float d;
    int32_t c8;
    int32_t c128[QK8_0 / 4];
    int8_t qs[QK8_0];
} PACKED;

_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(struct block_q8_K) == 292, "q8_K layout");

static inline float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Exact binary16 -> binary32, including subnormals, infinities and NaN. */
static inline float half_to_f32(half_bits h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp != 0) return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0) return bits_to_f32(sign);
    // subnormal: man * 2^-24
    float f = (float)man * 5.9604644775390625e-8f;
    return sign ? -f : f;
}

/* binary32 -> binary16 with round-to-nearest-even (what F16C's vcvtps2ph does in mode 0). */
static inline half_bits f32_to_half(float f)
{
    uint32_t u = f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (half_bits)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); // NaN stays NaN
    if (a >= 0x477ff000u) // rounds to >= 65520: inf
        return (half_bits)(sign | 0x7c00);
    if (a < 0x38800000u) { // result subnormal or zero: value / 2^-24, rounded to even
        float v = bits_to_f32(a) * 16777216.0f;
        uint32_t m = (uint32_t)v;
        float rem = v - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
        return (half_bits)(sign | m);
    }
    uint32_t r = a + 0xfff + ((a >> 13) & 1) - 0x38000000u; // rebias exponent, round to even
    return (half_bits)(sign | (r >> 13));
}

static inline float bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); // quiet NaN
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* Decodes the 6-bit scale j and min j (j < 8) of a Q4_K/Q5_K super-block. */
static inline void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Decodes the 16 signed scales (-32..31) of a Q3_K super-block. */
static inline void k3_scales(const uint8_t *packed, int8_t *out)
{
    for (int j = 0; j < 16; j++) {
        int lo = (packed[j % 8] >> (j < 8 ? 0 : 4)) & 0xf;
        int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* Scalar references (quants_ref.c, quants_k_ref.c). Names: <type>_<op>_ref. */
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
#undef QUANT_DECL_REF
void q8_1_to_float_ref(const void *x, float *y, int64_t n);
void q8_1_from_float_ref(const float *x, void *y, int64_t n);
void q8_K_to_float_ref(const void *x, float *y, int64_t n);
void q8_K_from_float_ref(const float *x, void *y, int64_t n);
void q8_0s_to_float_ref(const void *x, float *y, int64_t n);
void q8_0s_from_float_ref(const float *x, void *y, int64_t n);

/* Row-interleaved layouts (quants_repack.c). A group of 16 rows takes 16 rows' bytes; per
 * 32-element block b it holds the 16 rows' half scales (32 bytes), then 64-byte chunks whose
 * 4-byte lane r holds 4 consecutive quants of row r: Q8_0_R16 8 chunks of elements 4k..4k+3
 * stored + 128 (unsigned), Q4_0_R16 4 chunks of the packed bytes qs[4k..4k+3] (low nibbles
 * elements 4k.., high nibbles 16+4k..). Q5_0_R16 puts the fifth bits between the scales and
 * Q4_0_R16's 4 chunks, as 8 64-bit masks: bit 4r+e of mask k is the fifth bit of the element
 * whose low nibble is byte 4r+e of chunk k & 3 (low nibbles for k < 4, high ones after), so a
 * masked byte add completes a chunk's quants (stored q + 16, unsigned). n_out is a multiple
 * of 16. */
void q8_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);
void q4_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);
void q5_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);

/* Q4_K_R16: per 256-element super-block, 16 rows' d (32 bytes), dmin (32 bytes), their 6-bit
 * scales and mins as 256 values (scale of sub-block s, row r: value 16s + r; min: value
 * 128 + 32(s / 2) + 2r + s % 2, so each pair of sub-blocks' mins is a row-interleaved int16
 * pair) stored in 128 bytes of low nibbles (value j in byte j % 128, high nibble for j >= 128)
 * and 64 bytes of high bit pairs (value j in byte j % 64 at bit 2(j / 64)), then for each
 * 64-element pair p eight 64-byte chunks k whose lane r holds Q4_K's packed bytes
 * qs[32p + 4k .. + 3] of row r (low nibbles sub-block 2p, high ones 2p + 1). 16 rows' bytes. */
#define Q4_K_R16_QS 256 // offset of the quants in a group's super-block
void q4_K_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);

/* Q6_K_R16: per 256-element super-block, 16 rows' d (32 bytes), their int8 scales (256
 * bytes: sub-block j of row r in byte 16j + r), then 32 chunks of low nibbles, chunk
 * 4(j / 2) + k holding in lane r row r's elements 16j + 4k .. + 3 for even j (low nibbles)
 * and 16(j + 1) + 4k .. for the odd sub-block after it (high nibbles), then 16 chunks of high
 * bit pairs, chunk 4(j / 4) + k holding in lane r the top 2 bits of elements 16j + 4k .. + 3
 * at bits 2(j % 4). Quants stored q + 32 (0..63). 16 rows' bytes. */
#define Q6_K_R16_SC 32   // offset of the scales in a group's super-block
#define Q6_K_R16_QL 288  // of the low nibbles
#define Q6_K_R16_QH 2336 // of the high bit pairs
void q6_K_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);

/* The repacked formats, one table in quants_repack.c: the repacked type made from type (type
 * itself when there is none), the type a repacked type was made from (type itself when it is
 * not one); the repack of a matrix into packed (ERR_INVALID when packed is no repacked type);
 * block r of a group's block (group_block: one 32- or 256-element block of 16 rows) back in
 * the base type's layout, byte for byte the block the repack read. */
uint32_t quant_r16_packed_type(uint32_t type);
uint32_t quant_r16_base_type(uint32_t type);
int quant_r16_repack(uint32_t packed, const void *src, void *dst, int64_t n_out, int64_t n_in);
void quant_r16_unpack_block(uint32_t type, const void *group_block, int r, void *blk);

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

/* AVX2+FMA+F16C variants (x86/quants_avx2.c, x86/quants_k_avx2.c); only called after kernels_init saw
 * the CPU features. */
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
void q8_0_activations_ref(const float *x, void *y, int64_t n);
void q8_1_activations_avx2(const float *x, void *y, int64_t n);
void q8_1_activations_ref(const float *x, void *y, int64_t n);
void q8_1_from_float_avx2(const float *x, void *y, int64_t n);
void q8_K_from_float_avx2(const float *x, void *y, int64_t n);
#undef QUANT_DECL_AVX2

#endif
