/* AVX-512 dots of IQ4_NL, IQ4_XS and MXFP4 weights against Q8_0 / Q8_K activations: two
 * 32-value blocks per zmm (levels by one vpshufb over the table broadcast to every 128-bit
 * lane, products by one vpdpbusd, 16 exact int32 lanes of 4 products each, converted at once),
 * then each block's 8 lanes fused into the same 8-lane float chain as the AVX2 kernel with the
 * block's scale, block by block, and reduced as it reduces: bit for bit the AVX2 kernels'
 * results (quants_iq_avx2.c). Tiles look each row's levels up once per block pair for all
 * columns, and give the single dot's bits for every output. Compiled with the AVX-512
 * F/BW/VL/DQ/VNNI flags; called only when kernels_init detected them. */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"

#include <immintrin.h>
#include <stddef.h>

#define INLINE_ALWAYS static inline __attribute__((always_inline))

/* The levels of 64 values: lanes hold [lo(a), hi(a), lo(b), hi(b)] of the nibble bytes a, b. */
INLINE_ALWAYS __m512i levels64(__m512i table, __m128i qa, __m128i qb)
{
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(qa, qa)),
                                         _mm256_set_m128i(qb, qb), 1);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lo = _mm512_and_si512(q, m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    return _mm512_shuffle_epi8(table, _mm512_mask_blend_epi64(0xCC, lo, hi));
}

/* 16 int32 lanes, lane k the products of bytes 4k..4k+3 of w and a (exact: |w| <= 127 and the
 * activations are in -127..127). The sign of w moves onto a, as _mm256_sign_epi8 does. */
INLINE_ALWAYS __m512 dot64(__m512i w, __m512i a)
{
    const __mmask64 neg = _mm512_movepi8_mask(w);
    const __m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
    const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), sa);
    return _mm512_cvtepi32_ps(d);
}

/* The AVX2 kernels' 8-lane sum: high half onto low, then (l0 + l2) + (l1 + l3). */
INLINE_ALWAYS float lanes_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* acc + block 0's lanes * s0, then + block 1's lanes * s1: the AVX2 chain's two steps. */
INLINE_ALWAYS __m256 fma_pair(__m256 acc, __m512 p, float s0, float s1)
{
    acc = _mm256_fmadd_ps(_mm512_castps512_ps256(p), _mm256_set1_ps(s0), acc);
    return _mm256_fmadd_ps(_mm512_extractf32x8_ps(p, 1), _mm256_set1_ps(s1), acc);
}

/* ---- IQ4_NL and MXFP4: 32-value blocks against Q8_0 ---- */

struct blk32 {
    const uint8_t *qs;
    float d;
};

INLINE_ALWAYS struct blk32 blk32_at(int type, const void *row, int64_t i)
{
    if (type == QUANT_MXFP4) {
        const struct block_mxfp4 *b = (const struct block_mxfp4 *)row + i;
        return (struct blk32){b->qs, e8m0_half_to_f32(b->e)};
    }
    const struct block_iq4_nl *b = (const struct block_iq4_nl *)row + i;
    return (struct blk32){b->qs, half_to_f32(b->d)};
}

INLINE_ALWAYS __m512i act_pair(const struct block_q8_0 *a, int64_t i)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a[i].qs)),
                              _mm256_loadu_si256((const __m256i *)a[i + 1].qs), 1);
}

/* An NR x NC tile (compile-time shape, so the accumulators stay in registers). The scale of a
 * block is dy * dx, as the AVX2 kernel forms it. */
INLINE_ALWAYS void tile32(int type, const struct quant_tile *t, int NR, int NC)
{
    const __m128i table16 =
        _mm_loadu_si128((const __m128i *)(type == QUANT_MXFP4 ? mxfp4_values : iq4nl_values));
    const __m512i table = _mm512_broadcast_i32x4(table16);
    __m256 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm256_setzero_ps();
    const int64_t nb = t->n / 32;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m512i w[QUANT_TILE_MAX];
        float dx[QUANT_TILE_MAX][2];
        for (int r = 0; r < NR; r++) {
            const void *row = (const uint8_t *)t->x + r * t->x_stride;
            const struct blk32 b0 = blk32_at(type, row, i), b1 = blk32_at(type, row, i + 1);
            w[r] = levels64(table, _mm_loadu_si128((const __m128i *)b0.qs),
                            _mm_loadu_si128((const __m128i *)b1.qs));
            dx[r][0] = b0.d;
            dx[r][1] = b1.d;
        }
        for (int c = 0; c < NC; c++) {
            const struct block_q8_0 *a =
                (const struct block_q8_0 *)((const uint8_t *)t->y + c * t->y_stride);
            const __m512i av = act_pair(a, i);
            const float dy0 = half_to_f32(a[i].d), dy1 = half_to_f32(a[i + 1].d);
            for (int r = 0; r < NR; r++)
                acc[r][c] = fma_pair(acc[r][c], dot64(w[r], av), dy0 * dx[r][0], dy1 * dx[r][1]);
        }
    }
    if (i < nb) { // an odd last block: the lower half of a pair
        for (int r = 0; r < NR; r++) {
            const struct blk32 b0 = blk32_at(type, (const uint8_t *)t->x + r * t->x_stride, i);
            const __m128i q = _mm_loadu_si128((const __m128i *)b0.qs);
            const __m512i wr = levels64(table, q, q);
            for (int c = 0; c < NC; c++) {
                const struct block_q8_0 *a =
                    (const struct block_q8_0 *)((const uint8_t *)t->y + c * t->y_stride) + i;
                const __m512i av =
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a->qs));
                const __m512 p = dot64(wr, av);
                acc[r][c] = _mm256_fmadd_ps(_mm512_castps512_ps256(p),
                                            _mm256_set1_ps(half_to_f32(a->d) * b0.d), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            t->s[c * t->s_stride + r] = lanes_sum(acc[r][c]);
}

/* ---- IQ4_XS: 256-value super-blocks against Q8_K, sub-blocks in pairs ---- */

INLINE_ALWAYS void tile_xs(int type, const struct quant_tile *t, int NR, int NC)
{
    (void)type;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_values));
    __m256 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < t->n / QK_K; i++) {
        const struct block_iq4_xs *wb[QUANT_TILE_MAX];
        for (int r = 0; r < NR; r++)
            wb[r] = (const struct block_iq4_xs *)((const uint8_t *)t->x + r * t->x_stride) + i;
        for (int ib = 0; ib < QK_K / 32; ib += 2) {
            __m512i w[QUANT_TILE_MAX];
            float ls[QUANT_TILE_MAX][2];
            for (int r = 0; r < NR; r++) {
                const uint8_t *qs = wb[r]->qs + 16 * ib;
                w[r] = levels64(table, _mm_loadu_si128((const __m128i *)qs),
                                _mm_loadu_si128((const __m128i *)(qs + 16)));
                ls[r][0] = (float)iq4_xs_scale(wb[r], ib);
                ls[r][1] = (float)iq4_xs_scale(wb[r], ib + 1);
            }
            for (int c = 0; c < NC; c++) {
                const struct block_q8_K *a =
                    (const struct block_q8_K *)((const uint8_t *)t->y + c * t->y_stride) + i;
                const __m512i av = _mm512_loadu_si512((const void *)(a->qs + 32 * ib));
                for (int r = 0; r < NR; r++) {
                    const float d = half_to_f32(wb[r]->d) * a->d;
                    acc[r][c] = fma_pair(acc[r][c], dot64(w[r], av), d * ls[r][0], d * ls[r][1]);
                }
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            t->s[c * t->s_stride + r] = lanes_sum(acc[r][c]);
}

/* Calls fn(type, t, NR, NC) with the shape as constants (1..QUANT_TILE_MAX each). A flat
 * dispatch over the sixteen shapes. */
#define SHAPE(fn, type, t, R)                                                                      \
    switch ((t)->n_cols) {                                                                         \
    case 1:                                                                                        \
        fn(type, t, R, 1);                                                                         \
        break;                                                                                     \
    case 2:                                                                                        \
        fn(type, t, R, 2);                                                                         \
        break;                                                                                     \
    case 3:                                                                                        \
        fn(type, t, R, 3);                                                                         \
        break;                                                                                     \
    default:                                                                                       \
        fn(type, t, R, 4);                                                                         \
        break;                                                                                     \
    }
#define TILE_ENTRY(name, fn, type)                                                                 \
    void name##_vec_dot_tile_avx512(const struct quant_tile *t)                                    \
    {                                                                                              \
        switch (t->n_rows) {                                                                       \
        case 1:                                                                                    \
            SHAPE(fn, type, t, 1)                                                                  \
            break;                                                                                 \
        case 2:                                                                                    \
            SHAPE(fn, type, t, 2)                                                                  \
            break;                                                                                 \
        case 3:                                                                                    \
            SHAPE(fn, type, t, 3)                                                                  \
            break;                                                                                 \
        default:                                                                                   \
            SHAPE(fn, type, t, 4)                                                                  \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    void name##_vec_dot_avx512(int64_t n, float *s, const void *x, const void *y)                  \
    {                                                                                              \
        const struct quant_tile t = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};    \
        fn(type, &t, 1, 1);                                                                        \
    }
TILE_ENTRY(iq4_nl, tile32, QUANT_IQ4_NL)
TILE_ENTRY(mxfp4, tile32, QUANT_MXFP4)
TILE_ENTRY(iq4_xs, tile_xs, QUANT_IQ4_XS)
