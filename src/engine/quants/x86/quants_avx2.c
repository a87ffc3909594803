/* AVX2+FMA+F16C dot kernels for the float types (against F32 activations) and the 32-element
 * block formats (against Q8_0 / Q8_1). One generic tile routine per family, specialised by
 * constant tile shape, so the single dot and every tile shape run the same operations in the
 * same order per output and agree bit for bit. Compiled with -mavx2 -mfma -mf16c; only called
 * when kernels_init detected those features. */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>

/* Weight rows are prefetched this many tiles ahead (measured: one tile is enough to keep
 * a matvec streaming from DRAM; more evicts in batched mode). */
#define PF_TILES 1

/* ---- float weights x F32 activations ---- */

INLINE_ALWAYS __m256 load_w8(int type, const uint8_t *p)
{
    switch (type) {
    case QUANT_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    case QUANT_BF16: {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    default:
        return _mm256_loadu_ps((const float *)p);
    }
}

INLINE_ALWAYS float load_w1(int type, const uint8_t *p)
{
    uint16_t h;
    float f;
    switch (type) {
    case QUANT_F16:
        memcpy(&h, p, 2);
        return _cvtsh_ss(h);
    case QUANT_BF16:
        memcpy(&h, p, 2);
        return bf16_to_f32(h);
    default:
        memcpy(&f, p, 4);
        return f;
    }
}

/* Straight-line kernel: NR x NC accumulators live in registers once the loops are unrolled. */
INLINE_ALWAYS void tile_float(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t esz = type == QUANT_F32 ? 4 : 2;
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    __m256 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= t->n; i += 8) {
        __m256 w[QUANT_TILE_MAX];
        for (int r = 0; r < NR; r++) {
            const uint8_t *p = x + r * t->x_stride + (size_t)i * esz;
            if (NC == 1 || t->is_stream) // later tiles of the rows read them from cache
                _mm_prefetch((const char *)p + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
            w[r] = load_w8(type, p);
        }
        for (int c = 0; c < NC; c++) {
            __m256 a = _mm256_loadu_ps((const float *)(y + c * t->y_stride) + i);
            for (int r = 0; r < NR; r++)
                acc[r][c] = _mm256_fmadd_ps(w[r], a, acc[r][c]);
        }
    }
    for (int r = 0; r < NR; r++) {
        for (int c = 0; c < NC; c++) {
            float sum = hsum_f32x8(acc[r][c]);
            const uint8_t *a = y + c * t->y_stride;
            for (int64_t j = i; j < t->n; j++)
                sum += load_w1(type, x + r * t->x_stride + (size_t)j * esz) *
                       load_w1(QUANT_F32, a + (size_t)j * 4);
            t->s[c * t->s_stride + r] = sum;
        }
    }
}

/* Four chains reduced as (c0 + c2) + (c1 + c3), then lanes: high half onto low, two
 * horizontal adds (QUANT_ORDER_VEC). */
INLINE_ALWAYS float reduce_vec4(const __m256 c[4])
{
    __m256 v = _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3]));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_hadd_ps(h, h);
    h = _mm_hadd_ps(h, h);
    return _mm_cvtss_f32(h);
}

/* QUANT_ORDER_VEC for NR x NC outputs. */
INLINE_ALWAYS void tile_float_vec(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t esz = type == QUANT_F32 ? 4 : 2;
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    const int64_t np = t->n & ~(int64_t)31;
    __m256 acc[QUANT_TILE_MAX][QUANT_TILE_MAX][4];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            for (int j = 0; j < 4; j++)
                acc[r][c][j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < np; i += 32) {
        for (int j = 0; j < 4; j++) {
            __m256 w[QUANT_TILE_MAX];
            for (int r = 0; r < NR; r++) {
                const uint8_t *p = x + r * t->x_stride + (size_t)(i + 8 * j) * esz;
                if ((NC == 1 || t->is_stream) && j == 0)
                    _mm_prefetch((const char *)p + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
                w[r] = load_w8(type, p);
            }
            for (int c = 0; c < NC; c++) {
                __m256 a = _mm256_loadu_ps((const float *)(y + c * t->y_stride) + i + 8 * j);
                for (int r = 0; r < NR; r++)
                    acc[r][c][j] = _mm256_fmadd_ps(w[r], a, acc[r][c][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++) {
        const uint8_t *w = x + r * t->x_stride;
        for (int c = 0; c < NC; c++) {
            const uint8_t *a = y + c * t->y_stride;
            const float head = np > 0 ? reduce_vec4(acc[r][c]) : 0.0f;
            float out;
            if (type == QUANT_F32) {
                float sum = head;
                const int64_t fused = t->n - ((t->n - np) & 3);
                int64_t j = np;
                for (; j < fused; j++) {
                    const float p =
                        load_w1(type, w + (size_t)j * 4) * load_w1(QUANT_F32, a + 4 * j);
                    sum += p;
                }
                for (; j < t->n; j++)
                    sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(load_w1(type, w + (size_t)j * 4)),
                                                     _mm_set_ss(load_w1(QUANT_F32, a + 4 * j)),
                                                     _mm_set_ss(sum)));
                out = sum;
            } else {
                double sum = head;
                for (int64_t j = np; j < t->n; j++)
                    sum += (double)(load_w1(type, w + (size_t)j * esz) *
                                    load_w1(QUANT_F32, a + 4 * j));
                out = (float)sum;
            }
            t->s[c * t->s_stride + r] = out;
        }
    }
}

static void tile_f32(const struct quant_tile *t)
{
    if (t->order == QUANT_ORDER_VEC)
        TILE_SWITCH(tile_float_vec, QUANT_F32, t);
    else
        TILE_SWITCH(tile_float, QUANT_F32, t);
}

static void tile_f16(const struct quant_tile *t)
{
    if (t->order == QUANT_ORDER_VEC)
        TILE_SWITCH(tile_float_vec, QUANT_F16, t);
    else
        TILE_SWITCH(tile_float, QUANT_F16, t);
}

static void tile_bf16(const struct quant_tile *t)
{
    TILE_SWITCH(tile_float, QUANT_BF16, t);
}

/* ---- 32-element blocks x Q8_0 / Q8_1 ---- */

/* The 32 quants of one weight block as bytes in element order: signed values for the
 * symmetric formats (Q4_0, Q5_0, Q8_0), unsigned for the ones with a min (Q4_1, Q5_1). */
INLINE_ALWAYS __m256i block_quants(int type, const uint8_t *blk)
{
    switch (type) {
    case QUANT_Q8_0:
        return _mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)blk)->qs);
    case QUANT_Q4_0:
        return _mm256_sub_epi8(nibbles_32(((const struct block_q4_0 *)blk)->qs),
                               _mm256_set1_epi8(8));
    case QUANT_Q4_1:
        return nibbles_32(((const struct block_q4_1 *)blk)->qs);
    case QUANT_Q5_0: {
        const struct block_q5_0 *b = (const struct block_q5_0 *)blk;
        uint32_t qh;
        memcpy(&qh, b->qh, 4);
        __m256i hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        __m256i q = _mm256_or_si256(nibbles_32(b->qs), hi);
        return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
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

INLINE_ALWAYS bool has_min(int type)
{
    return type == QUANT_Q4_1 || type == QUANT_Q5_1;
}

/* Straight-line kernel. Per block and (row, token): sum of 32 int8 products as 8 int32 lanes,
 * scaled by dx*dy into float lanes; formats with a min add m*s (s = dy*sum(qy)) per block. */
INLINE_ALWAYS void tile_q32(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t wsz = block_size_of(type);
    const size_t asz = has_min(type) ? sizeof(struct block_q8_1) : sizeof(struct block_q8_0);
    const size_t aq = has_min(type) ? 4 : 2; // offset of the activation quants
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    __m256 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    float macc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) {
            acc[r][c] = _mm256_setzero_ps();
            macc[r][c] = 0.0f;
        }
    const int64_t nb = t->n / 32;
    for (int64_t b = 0; b < nb; b++) {
        __m256i q[QUANT_TILE_MAX], aq_abs[QUANT_TILE_MAX];
        __m256 dx[QUANT_TILE_MAX];
        float mx[QUANT_TILE_MAX]; // the weight block's min (formats with a min)
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = x + r * t->x_stride + (size_t)b * wsz;
            // the next tile's rows: keeps enough of the weight stream in flight from DRAM
            if (NC == 1 || t->is_stream) // later tiles of the rows read them from cache
                _mm_prefetch((const char *)blk + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
            q[r] = block_quants(type, blk);
            aq_abs[r] = has_min(type) ? q[r] : _mm256_sign_epi8(q[r], q[r]);
            dx[r] = _mm256_set1_ps(load_half(blk));
            mx[r] = has_min(type) ? load_half(blk + offsetof(struct block_q4_1, m)) : 0.0f;
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *ablk = y + c * t->y_stride + (size_t)b * asz;
            __m256i qy = _mm256_loadu_si256((const __m256i *)(ablk + aq));
            __m256 dy = _mm256_set1_ps(load_half(ablk));
            const float ms = has_min(type) ? load_half(ablk + 2) : 0.0f; // the block's d*sum(q)
            for (int r = 0; r < NR; r++) {
                __m256i sy = has_min(type) ? qy : _mm256_sign_epi8(qy, q[r]);
                __m256 p = _mm256_cvtepi32_ps(madd_u8_i8(aq_abs[r], sy));
                acc[r][c] = _mm256_fmadd_ps(p, _mm256_mul_ps(dx[r], dy), acc[r][c]);
                if (has_min(type)) macc[r][c] += mx[r] * ms;
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            t->s[c * t->s_stride + r] = hsum_f32x8(acc[r][c]) + macc[r][c];
}

/* QUANT_ORDER_BLOCKS for a format without a min: per block the exact integer dot of each
 * (row, token), fused into one float per output with the block's dx*dy; the rows of a token
 * share one 4-lane accumulator. */
INLINE_ALWAYS void tile_q32_blocks(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t wsz = block_size_of(type);
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    __m128 acc[QUANT_TILE_MAX];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm_setzero_ps();
    const int64_t nb = t->n / 32;
    for (int64_t b = 0; b < nb; b++) {
        __m256i q[QUANT_TILE_MAX], aq_abs[QUANT_TILE_MAX];
        const uint8_t *blks[4];
        for (int r = 0; r < 4; r++) // rows past NR repeat the last one; their lanes are unused
            blks[r] = x + (r < NR ? r : NR - 1) * t->x_stride + (size_t)b * wsz;
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = blks[r];
            if (NC == 1 || t->is_stream) // later tiles of the rows read them from cache
                _mm_prefetch((const char *)blk + PF_TILES * NR * t->x_stride, _MM_HINT_T0);
            q[r] = block_quants(type, blk);
            aq_abs[r] = _mm256_sign_epi8(q[r], q[r]);
        }
        const __m128 dx = load_half4(blks);
        for (int c = 0; c < NC; c++) {
            const uint8_t *ablk = y + c * t->y_stride + (size_t)b * sizeof(struct block_q8_0);
            __m256i qy = _mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)ablk)->qs);
            __m256i p[4];
            for (int r = 0; r < 4; r++)
                p[r] = r < NR ? madd_u8_i8(aq_abs[r], _mm256_sign_epi8(qy, q[r]))
                              : _mm256_setzero_si256();
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

static void tile_q8_0(const struct quant_tile *t)
{
    TILE_SWITCH(tile_q32, QUANT_Q8_0, t);
}

static void tile_q4_0(const struct quant_tile *t)
{
    if (t->order == QUANT_ORDER_BLOCKS)
        TILE_SWITCH(tile_q32_blocks, QUANT_Q4_0, t);
    else
        TILE_SWITCH(tile_q32, QUANT_Q4_0, t);
}

static void tile_q4_1(const struct quant_tile *t)
{
    TILE_SWITCH(tile_q32, QUANT_Q4_1, t);
}

static void tile_q5_0(const struct quant_tile *t)
{
    TILE_SWITCH(tile_q32, QUANT_Q5_0, t);
}

static void tile_q5_1(const struct quant_tile *t)
{
    TILE_SWITCH(tile_q32, QUANT_Q5_1, t);
}

/* Public entry points: the single dot is the 1x1 tile. */
#define ENTRY_POINTS(ty)                                                                           \
    void ty##_vec_dot_tile_avx2(const struct quant_tile *tile)                                     \
    {                                                                                              \
        tile_##ty(tile);                                                                           \
    }                                                                                              \
    void ty##_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y)                      \
    {                                                                                              \
        struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};        \
        tile_##ty(&one);                                                                           \
    }

ENTRY_POINTS(f32)
ENTRY_POINTS(f16)
ENTRY_POINTS(bf16)
ENTRY_POINTS(q8_0)
ENTRY_POINTS(q4_0)
ENTRY_POINTS(q4_1)
ENTRY_POINTS(q5_0)
ENTRY_POINTS(q5_1)

/* ---- activation quantizers, byte-identical to the references ---- */

/* roundf (half away from zero) on 8 lanes: truncate, then step away from zero when the
 * dropped fraction is at least one half (exact for |v| < 2^23). */
INLINE_ALWAYS __m256 round_half_away(__m256 v)
{
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    __m256 step = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                _mm256_or_ps(_mm256_set1_ps(1.0f), sign));
    return _mm256_add_ps(t, step);
}

/* One 32-float block to 32 int8 quants at qs; returns the scale (as the reference computes it)
 * and the quant sum in *qsum. */
INLINE_ALWAYS float quantize_block_8bit(const float *x, int8_t *qs, int *qsum)
{
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float d = _mm_cvtss_f32(m) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[k], id)));
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    *qsum = hsum_i32x8(sum);
    // packs work per 128-bit lane: undo their interleave with one cross-lane permute
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, p);
    return d;
}

void q8_0_from_float_avx2(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        int qsum;
        float d = quantize_block_8bit(x, b[i].qs, &qsum);
        b[i].d = _cvtss_sh(d, 0);
    }
}

void q8_1_from_float_avx2(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        int qsum;
        float d = quantize_block_8bit(x, b[i].qs, &qsum);
        b[i].d = _cvtss_sh(d, 0);
        b[i].s = _cvtss_sh(d * (float)qsum, 0);
    }
}

/* 32 activations to int8 quants at qs as the reference's runtime quantizes them (scale
 * 127/amax, round half to even); returns amax and the quant sum in *qsum. */
INLINE_ALWAYS float quantize_block_act(const float *x, int8_t *qs, int *qsum)
{
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float mx = _mm_cvtss_f32(m);
    const __m256 id = _mm256_set1_ps(mx != 0.0f ? 127.0f / mx : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; k++) // cvtps rounds half to even in the default mode
        q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
    *qsum =
        hsum_i32x8(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, p);
    return mx;
}

void q8_1_activations_avx2(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        int qsum;
        const float d = quantize_block_act(x, b[i].qs, &qsum) / 127.0f;
        b[i].d = _cvtss_sh(d, 0);
        b[i].s = _cvtss_sh(d * (float)qsum, 0);
    }
}

/* Q8_0_S: the Q8_0 activation quants (ties to even) with the offset sums the repacked Q4_0
 * kernels start from: c128[k] = -128 * (sum of quants 4k..4k+3), c8 = -8 * their total. */
void q8_0s_from_float_avx2(const float *x, void *y, int64_t n)
{
    struct block_q8_0s *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        int sum;
        const float mx = quantize_block_act(x, b[i].qs, &sum);
        const __m256i qs = _mm256_loadu_si256((const __m256i *)b[i].qs);
        const __m256i part = madd_u8_i8(_mm256_set1_epi8(1), qs); // sums of 4 adjacent quants
        _mm256_storeu_si256((__m256i *)b[i].c128,
                            _mm256_mullo_epi32(part, _mm256_set1_epi32(-128)));
        b[i].c8 = -8 * sum;
        b[i].d = _cvtsh_ss(_cvtss_sh(mx / 127.0f, 0));
    }
}

void q8_0_activations_avx2(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[k]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float mx = _mm_cvtss_f32(m);
        const __m256 id = _mm256_set1_ps(mx != 0.0f ? 127.0f / mx : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++) // cvtps rounds half to even in the default mode
            q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
        __m256i p =
            _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)b[i].qs, p);
        b[i].d = _cvtss_sh(mx / 127.0f, 0);
    }
}
