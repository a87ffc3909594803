/* The block layouts of the tensor types, as ggml-common.h defines them (little-endian, no
 * padding), with the scalar half/bfloat conversions and the decoders of packed scales that
 * every kernel of every instruction set reads them with. Layouts only: no kernels. Include
 * from engine/quants and its per-ISA folders only. */
#ifndef ENGINE_QUANTS_BLOCKS_H
#define ENGINE_QUANTS_BLOCKS_H

#include <stddef.h>
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
// Kernels that read Q4_1 and Q5_1 (and Q4_K and Q5_K) alike rely on their shared header.
_Static_assert(offsetof(struct block_q4_1, m) == offsetof(struct block_q5_1, m), "q4_1/q5_1 min");
_Static_assert(offsetof(struct block_q4_K, dmin) == offsetof(struct block_q5_K, dmin) &&
                   offsetof(struct block_q4_K, scales) == offsetof(struct block_q5_K, scales),
               "q4_K/q5_K header");

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

#endif
