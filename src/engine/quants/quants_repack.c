/* Load-time repacking of Q8_0 / Q4_0 / Q5_0 / Q4_K / Q6_K weight matrices into the 16-row
 * interleaved layouts the AVX-512 VNNI tiles read (layout in quants_repack.h), and the scalar
 * Q8_0_S activation format those tiles take. Portable C: the layout is data, only its consumers are SIMD. */
#include "engine/quants/quants_repack.h"
#include "engine/quants/blocks.h"
#include "engine/quants/quant_types.h"
#include "engine/quants/quants_ref.h"
#include "util/err.h"

#include <math.h>

#define GROUP 16 // rows per interleaved group

void q8_0s_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q8_0s *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int k = 0; k < QK8_0 / 4; k++) {
            int part = 0;
            for (int j = 4 * k; j < 4 * k + 4; j++) {
                b[i].qs[j] = (int8_t)nearbyintf(x[j] * id); // half to even, as Q8_0 activations
                part += b[i].qs[j];
            }
            b[i].c128[k] = -128 * part;
            sum += part;
        }
        b[i].c8 = -8 * sum;
        b[i].d = half_to_f32(f32_to_half(amax / 127.0f));
    }
}

void q8_0s_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q8_0s *b = x;
    for (int64_t i = 0; i < n / QK8_0; i++)
        for (int j = 0; j < QK8_0; j++)
            y[i * QK8_0 + j] = b[i].d * (float)b[i].qs[j];
}

void q8_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in)
{
    const int64_t nb = n_in / QK8_0;
    const struct block_q8_0 *w = src;
    uint8_t *out = dst;
    for (int64_t g = 0; g < n_out / GROUP; g++) {
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < GROUP; r++) {
                const struct block_q8_0 *blk = &w[(g * GROUP + r) * nb + b];
                memcpy(out + 2 * r, &blk->d, 2);
                for (int k = 0; k < QK8_0 / 4; k++)
                    for (int e = 0; e < 4; e++)
                        out[32 + 64 * k + 4 * r + e] = (uint8_t)(blk->qs[4 * k + e] + 128);
            }
            out += GROUP * sizeof(struct block_q8_0);
        }
    }
}

void q4_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in)
{
    const int64_t nb = n_in / QK4_0;
    const struct block_q4_0 *w = src;
    uint8_t *out = dst;
    for (int64_t g = 0; g < n_out / GROUP; g++) {
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < GROUP; r++) {
                const struct block_q4_0 *blk = &w[(g * GROUP + r) * nb + b];
                memcpy(out + 2 * r, &blk->d, 2);
                for (int k = 0; k < QK4_0 / 8; k++)
                    memcpy(out + 32 + 64 * k + 4 * r, blk->qs + 4 * k, 4);
            }
            out += GROUP * sizeof(struct block_q4_0);
        }
    }
}

void q5_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in)
{
    const int64_t nb = n_in / QK5_0;
    const struct block_q5_0 *w = src;
    uint8_t *out = dst;
    for (int64_t g = 0; g < n_out / GROUP; g++) {
        for (int64_t b = 0; b < nb; b++) {
            uint64_t masks[8] = {0};
            for (int r = 0; r < GROUP; r++) {
                const struct block_q5_0 *blk = &w[(g * GROUP + r) * nb + b];
                const uint32_t qh = (uint32_t)blk->qh[0] | (uint32_t)blk->qh[1] << 8 |
                                    (uint32_t)blk->qh[2] << 16 | (uint32_t)blk->qh[3] << 24;
                memcpy(out + 2 * r, &blk->d, 2);
                for (int k = 0; k < 8; k++)
                    for (int e = 0; e < 4; e++) {
                        const int elem = 4 * (k & 3) + e + (k >= 4 ? 16 : 0);
                        masks[k] |= (uint64_t)((qh >> elem) & 1) << (4 * r + e);
                    }
                for (int k = 0; k < QK5_0 / 8; k++)
                    memcpy(out + 96 + 64 * k + 4 * r, blk->qs + 4 * k, 4);
            }
            for (int k = 0; k < 8; k++) // little-endian, as the kernel loads them
                for (int i = 0; i < 8; i++)
                    out[32 + 8 * k + i] = (uint8_t)(masks[k] >> (8 * i));
            out += GROUP * sizeof(struct block_q5_0);
        }
    }
}

/* Writes value v (< 64) of a Q4_K_R16 super-block's 256 scale/min values (layout in
 * quants_repack.h): nib is its 128 low-nibble bytes, hb its 64 high-bit bytes. */
static void k4_r16_put(uint8_t *nib, uint8_t *hb, int j, uint8_t v)
{
    nib[j % 128] |= (uint8_t)((v & 0xf) << (j >= 128 ? 4 : 0));
    hb[j % 64] |= (uint8_t)((v >> 4) << (2 * (j / 64)));
}

void q4_K_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in)
{
    const int64_t nb = n_in / QK_K;
    const struct block_q4_K *w = src;
    uint8_t *out = dst;
    for (int64_t g = 0; g < n_out / GROUP; g++) {
        for (int64_t b = 0; b < nb; b++) {
            memset(out, 0, Q4_K_R16_QS);
            for (int r = 0; r < GROUP; r++) {
                const struct block_q4_K *blk = &w[(g * GROUP + r) * nb + b];
                memcpy(out + 2 * r, &blk->d, 2);
                memcpy(out + 32 + 2 * r, &blk->dmin, 2);
                for (int s = 0; s < 8; s++) {
                    uint8_t sc, m;
                    k4_scale_min(s, blk->scales, &sc, &m);
                    k4_r16_put(out + 64, out + 192, 16 * s + r, sc);
                    k4_r16_put(out + 64, out + 192, 128 + 32 * (s / 2) + 2 * r + s % 2, m);
                }
                for (int p = 0; p < 4; p++)
                    for (int k = 0; k < 8; k++)
                        memcpy(out + Q4_K_R16_QS + 512 * p + 64 * k + 4 * r,
                               blk->qs + 32 * p + 4 * k, 4);
            }
            out += GROUP * sizeof(struct block_q4_K);
        }
    }
}

void q6_K_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in)
{
    const int64_t nb = n_in / QK_K;
    const struct block_q6_K *w = src;
    uint8_t *out = dst;
    for (int64_t g = 0; g < n_out / GROUP; g++) {
        for (int64_t b = 0; b < nb; b++) {
            memset(out, 0, GROUP * sizeof(struct block_q6_K));
            for (int r = 0; r < GROUP; r++) {
                const struct block_q6_K *blk = &w[(g * GROUP + r) * nb + b];
                memcpy(out + 2 * r, &blk->d, 2);
                for (int j = 0; j < 16; j++)
                    out[Q6_K_R16_SC + 16 * j + r] = (uint8_t)blk->scales[j];
                for (int e = 0; e < QK_K; e++) { // the file's element order (q6_K_decode)
                    const int n = e / 128, s = (e % 128) / 32, l = e % 32;
                    const uint8_t byte = blk->ql[64 * n + 32 * (s & 1) + l];
                    const int lo = s < 2 ? byte & 0xf : byte >> 4;
                    const int hi = (blk->qh[32 * n + l] >> (2 * s)) & 3;
                    const int j = e / 16, k = (e % 16) / 4, lane = 4 * r + e % 4;
                    out[Q6_K_R16_QL + 64 * (4 * (j / 2) + k) + lane] |=
                        (uint8_t)(lo << (j & 1 ? 4 : 0));
                    out[Q6_K_R16_QH + 64 * (4 * (j / 4) + k) + lane] |=
                        (uint8_t)(hi << (2 * (j % 4)));
                }
            }
            out += GROUP * sizeof(struct block_q6_K);
        }
    }
}

/* ---- one row back out of a group (the embedding lookup of a tied, repacked matrix) ---- */

static void q8_0_unpack_r16(const uint8_t *gb, int r, void *out)
{
    struct block_q8_0 *blk = out;
    memcpy(&blk->d, gb + 2 * r, 2);
    for (int k = 0; k < QK8_0 / 4; k++)
        for (int e = 0; e < 4; e++)
            blk->qs[4 * k + e] = (int8_t)(gb[32 + 64 * k + 4 * r + e] - 128);
}

static void q4_0_unpack_r16(const uint8_t *gb, int r, void *out)
{
    struct block_q4_0 *blk = out;
    memcpy(&blk->d, gb + 2 * r, 2);
    for (int k = 0; k < QK4_0 / 8; k++)
        memcpy(blk->qs + 4 * k, gb + 32 + 64 * k + 4 * r, 4);
}

static void q5_0_unpack_r16(const uint8_t *gb, int r, void *out)
{
    struct block_q5_0 *blk = out;
    memcpy(&blk->d, gb + 2 * r, 2);
    uint32_t qh = 0;
    for (int k = 0; k < 8; k++) {
        uint64_t mask = 0;
        for (int i = 0; i < 8; i++)
            mask |= (uint64_t)gb[32 + 8 * k + i] << (8 * i);
        for (int e = 0; e < 4; e++) {
            const int elem = 4 * (k & 3) + e + (k >= 4 ? 16 : 0);
            qh |= (uint32_t)((mask >> (4 * r + e)) & 1) << elem;
        }
    }
    for (int i = 0; i < 4; i++)
        blk->qh[i] = (uint8_t)(qh >> (8 * i));
    for (int k = 0; k < QK5_0 / 8; k++)
        memcpy(blk->qs + 4 * k, gb + 96 + 64 * k + 4 * r, 4);
}

/* Value j (< 256) of a Q4_K_R16 super-block's scales and mins (see k4_r16_put). */
static uint8_t k4_r16_get(const uint8_t *gb, int j)
{
    const uint8_t lo = (uint8_t)((gb[64 + j % 128] >> (j >= 128 ? 4 : 0)) & 0xf);
    const uint8_t hi = (uint8_t)((gb[192 + j % 64] >> (2 * (j / 64))) & 3);
    return (uint8_t)(lo | hi << 4);
}

static void q4_K_unpack_r16(const uint8_t *gb, int r, void *out)
{
    struct block_q4_K *blk = out;
    memcpy(&blk->d, gb + 2 * r, 2);
    memcpy(&blk->dmin, gb + 32 + 2 * r, 2);
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; s++) {
        sc[s] = k4_r16_get(gb, 16 * s + r);
        m[s] = k4_r16_get(gb, 128 + 32 * (s / 2) + 2 * r + s % 2);
    }
    // the inverse of k4_scale_min: sub-blocks 0..3 in the low 6 bits of bytes 0..7, 4..7 in
    // the nibbles of bytes 8..11 with their top 2 bits above the first ones
    for (int i = 0; i < 4; i++) {
        blk->scales[i] = (uint8_t)(sc[i] | (sc[i + 4] >> 4) << 6);
        blk->scales[i + 4] = (uint8_t)(m[i] | (m[i + 4] >> 4) << 6);
        blk->scales[i + 8] = (uint8_t)((sc[i + 4] & 0xf) | (m[i + 4] & 0xf) << 4);
    }
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < 8; k++)
            memcpy(blk->qs + 32 * p + 4 * k, gb + Q4_K_R16_QS + 512 * p + 64 * k + 4 * r, 4);
}

static void q6_K_unpack_r16(const uint8_t *gb, int r, void *out)
{
    struct block_q6_K *blk = out;
    memset(blk, 0, sizeof *blk);
    memcpy(&blk->d, gb + 2 * r, 2);
    for (int j = 0; j < 16; j++)
        blk->scales[j] = (int8_t)gb[Q6_K_R16_SC + 16 * j + r];
    for (int e = 0; e < QK_K; e++) { // the inverse of q6_K_repack_r16's element loop
        const int j = e / 16, k = (e % 16) / 4, lane = 4 * r + e % 4;
        const int lo = (gb[Q6_K_R16_QL + 64 * (4 * (j / 2) + k) + lane] >> (j & 1 ? 4 : 0)) & 0xf;
        const int hi = (gb[Q6_K_R16_QH + 64 * (4 * (j / 4) + k) + lane] >> (2 * (j % 4))) & 3;
        const int n = e / 128, s = (e % 128) / 32, l = e % 32;
        blk->ql[64 * n + 32 * (s & 1) + l] |= (uint8_t)(lo << (s < 2 ? 0 : 4));
        blk->qh[32 * n + l] |= (uint8_t)(hi << (2 * s));
    }
}

/* The repacked formats: the type each is made from and its two conversions. */
static const struct {
    uint32_t base, packed;
    void (*repack)(const void *src, void *dst, int64_t n_out, int64_t n_in);
    void (*unpack)(const uint8_t *group_block, int r, void *blk);
} formats[] = {
    {QUANT_Q8_0, QUANT_Q8_0_R16, q8_0_repack_r16, q8_0_unpack_r16},
    {QUANT_Q4_0, QUANT_Q4_0_R16, q4_0_repack_r16, q4_0_unpack_r16},
    {QUANT_Q5_0, QUANT_Q5_0_R16, q5_0_repack_r16, q5_0_unpack_r16},
    {QUANT_Q4_K, QUANT_Q4_K_R16, q4_K_repack_r16, q4_K_unpack_r16},
    {QUANT_Q6_K, QUANT_Q6_K_R16, q6_K_repack_r16, q6_K_unpack_r16},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

uint32_t quant_r16_packed_type(uint32_t type)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].base == type) return formats[i].packed;
    return type;
}

uint32_t quant_r16_base_type(uint32_t type)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].packed == type) return formats[i].base;
    return type;
}

int quant_r16_repack(uint32_t packed, const void *src, void *dst, int64_t n_out, int64_t n_in)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].packed == packed) {
            formats[i].repack(src, dst, n_out, n_in);
            return ERR_OK;
        }
    return ERR_INVALID;
}

void quant_r16_unpack_block(uint32_t type, const void *group_block, int r, void *blk)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].packed == type) formats[i].unpack(group_block, r, blk);
}
