/* AVX-512 VNNI kernels over row pairs: a zmm holds the same block of two weight rows (lanes
 * 0-7 the first row, 8-15 the second), so one vpdpbusd / vpdpwssd and one FMA advance two
 * outputs, with the activation block broadcast to both halves. Each 8-lane half runs exactly
 * the AVX2 kernel's arithmetic for its row (quants_avx2.c, quants_k_avx2.c): the same exact
 * int32 lane sums (4 adjacent products per lane), the same float FMA chain per lane, the same
 * final reduction. So the results are the AVX2 bits, for every tile shape (QUANT_TILE_MAX x
 * QUANT_TILE_MAX; an odd last row pairs with itself and its half is dropped). Q5_0's signed
 * quants are taken unsigned (q + 16) and 16 * sum(y) per lane removed, which keeps the lane
 * sums exact. The K-quant decoding mirrors quants_k_avx2.c for the three types here. Compiled
 * with the AVX-512 flags (and AVX2's, so its helpers apply); only called after kernels_init saw
 * AVX-512 F/BW/VL/DQ + VNNI.
 * Measured (one thread, CPU time, a 256 x 4096 matrix times 64 tokens, best of 7 interleaved
 * rounds, loaded machine) against the AVX2 tiles: Q4_1 x1.33, Q5_0 x1.50, Q5_1 x1.37 with
 * 4 x 8 tiles (the weight block's expansion shared by 8 tokens). */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>

#define PF_TILES 1 // prefetch distance in tiles (as the AVX2 kernels)

INLINE_ALWAYS __m512i pair_i(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

INLINE_ALWAYS __m512 pair_f(float lo, float hi)
{
    return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

/* Calls fn(type, t, NR, NC) with NR = t->n_rows (1..4) and NC = t->n_cols (1..8) as
 * compile-time constants. A flat dispatch switch. */
#define CASE_R(fn, type, t, R)                                                                     \
    case R:                                                                                        \
        switch ((t)->n_cols) {                                                                     \
        case 1:                                                                                    \
            fn(type, t, R, 1);                                                                     \
            break;                                                                                 \
        case 2:                                                                                    \
            fn(type, t, R, 2);                                                                     \
            break;                                                                                 \
        case 3:                                                                                    \
            fn(type, t, R, 3);                                                                     \
            break;                                                                                 \
        case 4:                                                                                    \
            fn(type, t, R, 4);                                                                     \
            break;                                                                                 \
        case 5:                                                                                    \
            fn(type, t, R, 5);                                                                     \
            break;                                                                                 \
        case 6:                                                                                    \
            fn(type, t, R, 6);                                                                     \
            break;                                                                                 \
        case 7:                                                                                    \
            fn(type, t, R, 7);                                                                     \
            break;                                                                                 \
        default:                                                                                   \
            fn(type, t, R, 8);                                                                     \
            break;                                                                                 \
        }                                                                                          \
        break
#define TILE_SWITCH_4X8(fn, type, t)                                                               \
    do {                                                                                           \
        switch ((t)->n_rows) {                                                                     \
            CASE_R(fn, type, t, 1);                                                                \
            CASE_R(fn, type, t, 2);                                                                \
            CASE_R(fn, type, t, 3);                                                                \
        default:                                                                                   \
            CASE_R(fn, type, t, 4);                                                                \
        }                                                                                          \
    } while (0)

#define Q32_COLS_MAX 8 // the 32-element kernel's tile: 4 rows x 8 tokens

INLINE_ALWAYS __m512i bcast_256(const uint8_t *p)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* ---- 32-element blocks: Q4_1, Q5_0, Q5_1 ---- */

/* The 32 quants of a weight block as unsigned bytes in element order (Q5_0 as q + 16). */
INLINE_ALWAYS __m256i block_uquants(int type, const uint8_t *blk)
{
    uint32_t qh;
    switch (type) {
    case QUANT_Q4_1:
        return nibbles_32(((const struct block_q4_1 *)blk)->qs);
    case QUANT_Q5_0: {
        const struct block_q5_0 *b = (const struct block_q5_0 *)blk;
        memcpy(&qh, b->qh, 4);
        return _mm256_or_si256(nibbles_32(b->qs),
                               _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    }
    default: { // QUANT_Q5_1
        const struct block_q5_1 *b = (const struct block_q5_1 *)blk;
        memcpy(&qh, b->qh, 4);
        return _mm256_or_si256(nibbles_32(b->qs),
                               _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    }
    }
}

INLINE_ALWAYS size_t block_size_of(int type)
{
    return type == QUANT_Q4_1   ? sizeof(struct block_q4_1)
           : type == QUANT_Q5_0 ? sizeof(struct block_q5_0)
                                : sizeof(struct block_q5_1);
}

/* Straight-line kernel (NR x NC as compile-time constants). Per block and (row pair, token):
 * the int32 lane sums, scaled by dx*dy into the pair's float lanes; formats with a min add
 * m*s (s = dy*sum(qy)) per block and output in float, as the AVX2 kernel does. */
INLINE_ALWAYS void tile_q32p(int type, const struct quant_tile *t, int NR, int NC)
{
    const int NP = (NR + 1) / 2;
    const bool is_min = type != QUANT_Q5_0;
    const size_t wsz = block_size_of(type);
    const size_t asz = is_min ? sizeof(struct block_q8_1) : sizeof(struct block_q8_0);
    const size_t aq = is_min ? 4 : 2; // offset of the activation quants
    const uint8_t *x = t->x, *y = t->y;
    __m512 acc[2][Q32_COLS_MAX];
    __m128 macc[Q32_COLS_MAX]; // the min terms of the tile's rows (lanes) per token
    for (int c = 0; c < NC; c++) {
        macc[c] = _mm_setzero_ps();
        for (int p = 0; p < NP; p++)
            acc[p][c] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < t->n / 32; b++) {
        __m512i q[2];
        __m512 dx[2];
        float mx[QUANT_TILE_MAX] = {0};
        for (int p = 0; p < NP; p++) {
            const int r0 = 2 * p, r1 = 2 * p + 1 < NR ? 2 * p + 1 : r0;
            const uint8_t *b0 = x + r0 * t->x_stride + (size_t)b * wsz;
            const uint8_t *b1 = x + r1 * t->x_stride + (size_t)b * wsz;
            if (NC == 1 || t->is_stream) { // later tiles of the rows read them from cache
                _mm_prefetch((const char *)b0 + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
                if (r1 != r0)
                    _mm_prefetch((const char *)b1 + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
            }
            q[p] = pair_i(block_uquants(type, b0), block_uquants(type, b1));
            dx[p] = pair_f(load_half(b0), load_half(b1));
            mx[r0] = is_min ? load_half(b0 + offsetof(struct block_q4_1, m)) : 0.0f;
            mx[r1] = is_min ? load_half(b1 + offsetof(struct block_q4_1, m)) : 0.0f;
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *ablk = y + c * t->y_stride + (size_t)b * asz;
            const __m512i qy = bcast_256(ablk + aq);
            const __m512 dy = _mm512_set1_ps(load_half(ablk));
            const float ms = is_min ? load_half(ablk + 2) : 0.0f; // the block's d*sum(q)
            const __m512i off =
                is_min ? _mm512_setzero_si512()
                       : _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), qy);
            for (int p = 0; p < NP; p++) {
                const __m512i d =
                    _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q[p], qy), off);
                acc[p][c] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(dx[p], dy), acc[p][c]);
            }
            if (is_min) // mul then add, each rounded, as the AVX2 kernel's scalar update
                macc[c] = _mm_add_ps(macc[c], _mm_mul_ps(_mm_loadu_ps(mx), _mm_set1_ps(ms)));
        }
    }
    for (int c = 0; c < NC; c++) {
        float m[4];
        _mm_storeu_ps(m, macc[c]);
        for (int p = 0; p < NP; p++) {
            t->s[c * t->s_stride + 2 * p] =
                hsum_f32x8(_mm512_castps512_ps256(acc[p][c])) + m[2 * p];
            if (2 * p + 1 < NR)
                t->s[c * t->s_stride + 2 * p + 1] =
                    hsum_f32x8(_mm512_extractf32x8_ps(acc[p][c], 1)) + m[2 * p + 1];
        }
    }
}

/* ---- K-quant super-blocks: Q3_K, Q5_K (quants_k_avx2.c's decoding) ----
 * Here the pairs gain nothing measurable (x0.99-1.02 of AVX2, bench below): vpmaddubsw and
 * vpdpwssd on zmm issue on one port, their ymm forms on two, so the multiplies per (row, token)
 * cost the same cycles. Q2_K measured x0.94-0.97 and keeps the AVX2 kernel. */

/* One weight row's super-block, decoded once and shared by all tokens of a tile. */
struct ksb {
    const uint8_t *blk;
    int16_t sc[16]; // integer scale per sub-block (8 used by Q5_K)
    __m256i corr;   // int16 per 16-element sub-block: multiplies the activation's bsums
    float d;        // scale of the main term
    float corr_d;   // scale of the correction term (subtracted)
};

INLINE_ALWAYS size_t kblock_size(int type)
{
    return type == QUANT_Q3_K ? sizeof(struct block_q3_K) : sizeof(struct block_q5_K);
}

INLINE_ALWAYS void kprep(int type, const uint8_t *blk, struct ksb *k)
{
    int16_t c[16];
    k->blk = blk;
    if (type == QUANT_Q3_K) {
        const struct block_q3_K *b = (const struct block_q3_K *)blk;
        int8_t s[16];
        k3_scales(b->scales, s);
        for (int j = 0; j < 16; j++) {
            k->sc[j] = s[j];
            c[j] = (int16_t)(4 * s[j]); // quants are stored +4
        }
        k->corr = _mm256_loadu_si256((const __m256i *)c);
        k->d = k->corr_d = _cvtsh_ss(b->d);
    } else { // QUANT_Q5_K
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            k4_scale_min(j, blk + offsetof(struct block_q5_K, scales), &sc, &m);
            k->sc[j] = sc;
            c[2 * j] = c[2 * j + 1] = m; // one min per 32 elements, for both bsums
        }
        k->corr = _mm256_loadu_si256((const __m256i *)c);
        k->d = load_half(blk);
        k->corr_d = load_half(blk + offsetof(struct block_q5_K, dmin));
    }
}

INLINE_ALWAYS __m256i shift_and(__m256i v, int shift, int mask)
{
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
                            _mm256_set1_epi8((char)mask));
}

/* Bytes where bit `bit` of v is set, as `value`; 0 elsewhere. */
INLINE_ALWAYS __m256i bit_as(__m256i v, int bit, int value)
{
    const __m256i m = _mm256_set1_epi8((char)(1 << bit));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m),
                            _mm256_set1_epi8((char)value));
}

INLINE_ALWAYS __m256i load32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Chunk kc (elements 32kc..32kc+31) of the super-block: unsigned quants and their int16
 * scales (one per 16 elements, or one for the chunk). */
INLINE_ALWAYS void kchunk(int type, const struct ksb *k, int kc, __m256i *q, __m256i *scale)
{
    const int n = kc / 4, s = kc % 4; // for the 128-element halves of Q3_K
    if (type == QUANT_Q3_K) {
        const size_t qs = offsetof(struct block_q3_K, qs),
                     hmask = offsetof(struct block_q3_K, hmask);
        const __m256i lo = shift_and(load32(k->blk + qs + 32 * n), 2 * s, 3);
        *q = _mm256_or_si256(lo, bit_as(load32(k->blk + hmask), 4 * n + s, 4));
    } else { // QUANT_Q5_K
        const size_t qs = offsetof(struct block_q5_K, qs), qh = offsetof(struct block_q5_K, qh);
        const __m256i lo = shift_and(load32(k->blk + qs + 32 * (kc / 2)), 4 * (kc % 2), 0xf);
        *q = _mm256_or_si256(lo, bit_as(load32(k->blk + qh), kc, 16));
    }
    if (type == QUANT_Q5_K)
        *scale = _mm256_set1_epi16(k->sc[kc]);
    else
        *scale = _mm256_set_m128i(_mm_set1_epi16(k->sc[2 * kc + 1]), _mm_set1_epi16(k->sc[2 * kc]));
}

/* Straight-line kernel: per super-block, int32 lane sums per (row pair, token) over the eight
 * chunks (vpmaddubsw, then vpdpwssd with the scales: the AVX2 kernel's madd and add in one),
 * then one float update with the main and correction terms. */
INLINE_ALWAYS void tile_kp(int type, const struct quant_tile *t, int NR, int NC)
{
    const int NP = (NR + 1) / 2;
    const size_t wsz = kblock_size(type), asz = sizeof(struct block_q8_K);
    const uint8_t *x = t->x, *y = t->y;
    __m512 acc[2][QUANT_TILE_MAX];
    for (int p = 0; p < NP; p++)
        for (int c = 0; c < NC; c++)
            acc[p][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < t->n / QK_K; b++) {
        struct ksb k[QUANT_TILE_MAX];
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = x + r * t->x_stride + (size_t)b * wsz;
            for (size_t off = 0; off < wsz; off += 64)
                if (NC == 1 || t->is_stream) // later tiles of the rows read them from cache
                    _mm_prefetch((const char *)blk + off + PF_TILES * NR * t->x_stride,
                                 _MM_HINT_T0);
            kprep(type, blk, &k[r]);
        }
        __m512i sumi[2][QUANT_TILE_MAX];
        for (int p = 0; p < NP; p++)
            for (int c = 0; c < NC; c++)
                sumi[p][c] = _mm512_setzero_si512();
        for (int kc = 0; kc < 8; kc++) {
            __m512i q[2], sc[2];
            for (int p = 0; p < NP; p++) {
                const int r0 = 2 * p, r1 = 2 * p + 1 < NR ? 2 * p + 1 : r0;
                __m256i q0, q1, s0, s1;
                kchunk(type, &k[r0], kc, &q0, &s0);
                kchunk(type, &k[r1], kc, &q1, &s1);
                q[p] = pair_i(q0, q1);
                sc[p] = pair_i(s0, s1);
            }
            for (int c = 0; c < NC; c++) {
                const __m512i qy = bcast_256(y + c * t->y_stride + (size_t)b * asz + 4 + 32 * kc);
                for (int p = 0; p < NP; p++)
                    sumi[p][c] =
                        _mm512_dpwssd_epi32(sumi[p][c], _mm512_maddubs_epi16(q[p], qy), sc[p]);
            }
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *ablk = y + c * t->y_stride + (size_t)b * asz;
            float dy;
            memcpy(&dy, ablk, 4);
            const __m512i bsums = bcast_256(ablk + offsetof(struct block_q8_K, bsums));
            for (int p = 0; p < NP; p++) {
                const struct ksb *k0 = &k[2 * p], *k1 = &k[2 * p + 1 < NR ? 2 * p + 1 : 2 * p];
                const __m512 corr =
                    _mm512_cvtepi32_ps(_mm512_madd_epi16(bsums, pair_i(k0->corr, k1->corr)));
                acc[p][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[p][c]),
                                            pair_f(k0->d * dy, k1->d * dy), acc[p][c]);
                acc[p][c] =
                    _mm512_fnmadd_ps(corr, pair_f(k0->corr_d * dy, k1->corr_d * dy), acc[p][c]);
            }
        }
    }
    for (int p = 0; p < NP; p++)
        for (int c = 0; c < NC; c++) {
            t->s[c * t->s_stride + 2 * p] = hsum_f32x8(_mm512_castps512_ps256(acc[p][c]));
            if (2 * p + 1 < NR)
                t->s[c * t->s_stride + 2 * p + 1] =
                    hsum_f32x8(_mm512_extractf32x8_ps(acc[p][c], 1));
        }
}

/* Public entry points: the single dot is the 1x1 tile. */
#define PAIR_ENTRY_POINTS(ty, TYPE, kernel, tile_switch)                                           \
    void ty##_vec_dot_tile_avx512(const struct quant_tile *tile)                                   \
    {                                                                                              \
        tile_switch(kernel, TYPE, tile);                                                           \
    }                                                                                              \
    void ty##_vec_dot_avx512(int64_t n, float *s, const void *x, const void *y)                    \
    {                                                                                              \
        struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};        \
        kernel(TYPE, &one, 1, 1);                                                                  \
    }

PAIR_ENTRY_POINTS(q4_1, QUANT_Q4_1, tile_q32p, TILE_SWITCH_4X8)
PAIR_ENTRY_POINTS(q5_0, QUANT_Q5_0, tile_q32p, TILE_SWITCH_4X8)
PAIR_ENTRY_POINTS(q5_1, QUANT_Q5_1, tile_q32p, TILE_SWITCH_4X8)
PAIR_ENTRY_POINTS(q3_K, QUANT_Q3_K, tile_kp, TILE_SWITCH)
PAIR_ENTRY_POINTS(q5_K, QUANT_Q5_K, tile_kp, TILE_SWITCH)
