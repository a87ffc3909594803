/* AVX-VNNI variants of the 32-element block dots (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): vpdpbusd
 * does the u8 x s8 multiply and the 4-way add in one instruction. Weights are made unsigned
 * by an offset (q + 8, q + 16, x ^ 0x80) whose effect is removed by starting each token's
 * accumulation at -offset * sum(y), computed once per activation block for all rows. The
 * int32 lane sums are exactly those of quants_avx2.c, and the float steps are the same, so
 * results are bit-identical to the plain AVX2 kernels. kernels_init selects these only when
 * the CPU reports AVX-VNNI; this file alone adds that ISA on top of the AVX2 flags. */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>

#define PF_TILES 1 // prefetch distance in tiles (see quants_avx2.c)

/* Unsigned quants of one block and the offset subtracted from them (0 for the formats with a
 * min, whose quants are unsigned already). */
INLINE_ALWAYS __m256i block_quants_u(int type, const uint8_t *blk)
{
    switch (type) {
    case QUANT_Q8_0:
        return _mm256_xor_si256(
            _mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)blk)->qs),
            _mm256_set1_epi8((char)0x80));
    case QUANT_Q4_0:
        return nibbles_32(((const struct block_q4_0 *)blk)->qs);
    case QUANT_Q4_1:
        return nibbles_32(((const struct block_q4_1 *)blk)->qs);
    case QUANT_Q5_0: {
        const struct block_q5_0 *b = (const struct block_q5_0 *)blk;
        uint32_t qh;
        memcpy(&qh, b->qh, 4);
        __m256i hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(nibbles_32(b->qs), hi);
    }
    default: { // QUANT_Q5_1
        const struct block_q5_1 *b = (const struct block_q5_1 *)blk;
        uint32_t qh;
        memcpy(&qh, b->qh, 4);
        __m256i hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(nibbles_32(b->qs), hi);
    }
    }
}

INLINE_ALWAYS int quant_offset(int type)
{
    switch (type) {
    case QUANT_Q8_0:
        return 128;
    case QUANT_Q4_0:
        return 8;
    case QUANT_Q5_0:
        return 16;
    default:
        return 0;
    }
}

INLINE_ALWAYS size_t block_size_of(int type)
{
    switch (type) {
    case QUANT_Q8_0:
        return sizeof(struct block_q8_0);
    case QUANT_Q4_0:
        return sizeof(struct block_q4_0);
    case QUANT_Q4_1:
        return sizeof(struct block_q4_1);
    case QUANT_Q5_0:
        return sizeof(struct block_q5_0);
    default:
        return sizeof(struct block_q5_1);
    }
}

/* Straight-line kernel, the same shape as tile_q32 in quants_avx2.c. */
INLINE_ALWAYS void tile_q32_vnni(int type, const struct quant_tile *t, int NR, int NC)
{
    const bool has_min = type == QUANT_Q4_1 || type == QUANT_Q5_1;
    const size_t wsz = block_size_of(type);
    const size_t asz = has_min ? sizeof(struct block_q8_1) : sizeof(struct block_q8_0);
    const size_t aq = has_min ? 4 : 2;
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    __m256 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    float macc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) {
            acc[r][c] = _mm256_setzero_ps();
            macc[r][c] = 0.0f;
        }
    const __m256i offset = _mm256_set1_epi8((char)quant_offset(type));
    for (int64_t b = 0; b < t->n / 32; b++) {
        __m256i q[QUANT_TILE_MAX];
        __m256 dx[QUANT_TILE_MAX];
        float mx[QUANT_TILE_MAX]; // the weight block's min (formats with a min)
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = x + r * t->x_stride + (size_t)b * wsz;
            if (NC == 1 || t->is_stream) // later tiles of the rows read them from cache
                _mm_prefetch((const char *)blk + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
            q[r] = block_quants_u(type, blk);
            dx[r] = _mm256_set1_ps(load_half(blk));
            mx[r] = has_min ? load_half(blk + offsetof(struct block_q4_1, m)) : 0.0f;
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *ablk = y + c * t->y_stride + (size_t)b * asz;
            __m256i qy = _mm256_loadu_si256((const __m256i *)(ablk + aq));
            __m256 dy = _mm256_set1_ps(load_half(ablk));
            const float ms = has_min ? load_half(ablk + 2) : 0.0f; // the block's d*sum(q)
            __m256i start = _mm256_setzero_si256();
            if (quant_offset(type) != 0)
                start = _mm256_sub_epi32(start, _mm256_dpbusd_avx_epi32(start, offset, qy));
            for (int r = 0; r < NR; r++) {
                __m256 p = _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(start, q[r], qy));
                acc[r][c] = _mm256_fmadd_ps(p, _mm256_mul_ps(dx[r], dy), acc[r][c]);
                if (has_min) macc[r][c] += mx[r] * ms;
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            t->s[c * t->s_stride + r] = hsum_f32x8(acc[r][c]) + macc[r][c];
}

/* QUANT_ORDER_BLOCKS (formats without a min), the same shape as tile_q32_blocks in
 * quants_avx2.c: exact integer block dots fused into one float per output. */
INLINE_ALWAYS void tile_q32_vnni_blocks(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t wsz = block_size_of(type);
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    __m128 acc[QUANT_TILE_MAX];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm_setzero_ps();
    const __m256i offset = _mm256_set1_epi8((char)quant_offset(type));
    for (int64_t b = 0; b < t->n / 32; b++) {
        __m256i q[QUANT_TILE_MAX];
        const uint8_t *blks[4];
        for (int r = 0; r < 4; r++) // rows past NR repeat the last one; their lanes are unused
            blks[r] = x + (r < NR ? r : NR - 1) * t->x_stride + (size_t)b * wsz;
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = blks[r];
            if (NC == 1 || t->is_stream) // later tiles of the rows read them from cache
                _mm_prefetch((const char *)blk + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
            q[r] = block_quants_u(type, blk);
        }
        const __m128 dx = load_half4(blks);
        for (int c = 0; c < NC; c++) {
            const uint8_t *ablk = y + c * t->y_stride + (size_t)b * sizeof(struct block_q8_0);
            __m256i qy = _mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)ablk)->qs);
            __m256i start = _mm256_setzero_si256();
            if (quant_offset(type) != 0)
                start = _mm256_sub_epi32(start, _mm256_dpbusd_avx_epi32(start, offset, qy));
            __m256i p[4];
            for (int r = 0; r < 4; r++)
                p[r] = r < NR ? _mm256_dpbusd_avx_epi32(start, q[r], qy) : _mm256_setzero_si256();
            const __m128 dot = _mm_cvtepi32_ps(hsum4_small_i32x8(p));
            acc[c] = _mm_fmadd_ps(dot, _mm_mul_ps(dx, _mm_set1_ps(load_half(ablk))), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) {
        float out[4];
        _mm_storeu_ps(out, acc[c]);
        for (int r = 0; r < NR; r++)
            t->s[c * t->s_stride + r] = out[r];
    }
}

#define VNNI_ENTRY_POINTS(ty, TYPE)                                                                \
    static void tile_##ty(const struct quant_tile *t)                                              \
    {                                                                                              \
        if (TYPE == QUANT_Q4_0 && t->order == QUANT_ORDER_BLOCKS)                                  \
            TILE_SWITCH(tile_q32_vnni_blocks, TYPE, t);                                            \
        else                                                                                       \
            TILE_SWITCH(tile_q32_vnni, TYPE, t);                                                   \
    }                                                                                              \
    void ty##_vec_dot_tile_vnni(const struct quant_tile *tile)                                     \
    {                                                                                              \
        tile_##ty(tile);                                                                           \
    }                                                                                              \
    void ty##_vec_dot_vnni(int64_t n, float *s, const void *x, const void *y)                      \
    {                                                                                              \
        struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};        \
        tile_##ty(&one);                                                                           \
    }

VNNI_ENTRY_POINTS(q8_0, QUANT_Q8_0)
VNNI_ENTRY_POINTS(q4_0, QUANT_Q4_0)
VNNI_ENTRY_POINTS(q4_1, QUANT_Q4_1)
VNNI_ENTRY_POINTS(q5_0, QUANT_Q5_0)
VNNI_ENTRY_POINTS(q5_1, QUANT_Q5_1)
