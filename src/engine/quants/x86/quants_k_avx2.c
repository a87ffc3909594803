/* AVX2 dot kernels for the K-quant super-blocks against Q8_K activations. Every format is
 * handled as eight 32-element chunks of unsigned quants with a 16-lane int16 scale vector,
 * plus one correction per super-block taken from the activation's 16-element sums (the mins
 * of Q2_K/Q4_K/Q5_K, the -4/-32 offsets of Q3_K/Q6_K). As in quants_avx2.c, the single dot is
 * the 1x1 tile, so every tile shape agrees with it bit for bit. */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>

#define PF_TILES 1 // prefetch distance in tiles (see quants_avx2.c)

/* One weight row's super-block, decoded once and shared by all tokens of a tile. */
struct ksb {
    const uint8_t *blk;
    int16_t sc[16]; // integer scale per sub-block (8 used by the 32-element formats)
    __m256i corr;   // int16 per 16-element sub-block: multiplies the activation's bsums
    float d;        // scale of the main term
    float corr_d;   // scale of the correction term (subtracted)
};

INLINE_ALWAYS size_t kblock_size(int type)
{
    switch (type) {
    case QUANT_Q2_K:
        return sizeof(struct block_q2_K);
    case QUANT_Q3_K:
        return sizeof(struct block_q3_K);
    case QUANT_Q4_K:
        return sizeof(struct block_q4_K);
    case QUANT_Q5_K:
        return sizeof(struct block_q5_K);
    default:
        return sizeof(struct block_q6_K);
    }
}

/* A 16-lane vector with lanes 2j and 2j+1 = v[j] (a 32-element sub-block's value for both of
 * its 16-element halves). */
INLINE_ALWAYS __m256i dup_pairs(const int16_t *v)
{
    __m128i a = _mm_loadu_si128((const __m128i *)v); // v[0..7]
    return _mm256_set_m128i(_mm_unpackhi_epi16(a, a), _mm_unpacklo_epi16(a, a));
}

INLINE_ALWAYS void kprep(int type, const uint8_t *blk, struct ksb *k)
{
    int16_t c[16];
    k->blk = blk;
    switch (type) {
    case QUANT_Q2_K: {
        const struct block_q2_K *b = (const struct block_q2_K *)blk;
        for (int j = 0; j < 16; j++) {
            k->sc[j] = b->scales[j] & 0xf;
            c[j] = b->scales[j] >> 4;
        }
        k->corr = _mm256_loadu_si256((const __m256i *)c);
        k->d = _cvtsh_ss(b->d);
        k->corr_d = _cvtsh_ss(b->dmin);
        break;
    }
    case QUANT_Q3_K: {
        const struct block_q3_K *b = (const struct block_q3_K *)blk;
        int8_t s[16];
        k3_scales(b->scales, s);
        for (int j = 0; j < 16; j++) {
            k->sc[j] = s[j];
            c[j] = (int16_t)(4 * s[j]); // quants are stored +4
        }
        k->corr = _mm256_loadu_si256((const __m256i *)c);
        k->d = k->corr_d = _cvtsh_ss(b->d);
        break;
    }
    case QUANT_Q4_K:
    case QUANT_Q5_K: {
        const uint8_t *scales = blk + offsetof(struct block_q4_K, scales); // same header for both
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            k4_scale_min(j, scales, &sc, &m);
            k->sc[j] = sc;
            c[j] = m;
        }
        k->corr = dup_pairs(c);
        k->d = load_half(blk);
        k->corr_d = load_half(blk + offsetof(struct block_q4_K, dmin));
        break;
    }
    default: { // QUANT_Q6_K
        const struct block_q6_K *b = (const struct block_q6_K *)blk;
        for (int j = 0; j < 16; j++) {
            k->sc[j] = b->scales[j];
            c[j] = (int16_t)(32 * b->scales[j]); // quants are stored +32
        }
        k->corr = _mm256_loadu_si256((const __m256i *)c);
        k->d = k->corr_d = _cvtsh_ss(b->d);
        break;
    }
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
    __m256i m = _mm256_set1_epi8((char)(1 << bit));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m),
                            _mm256_set1_epi8((char)value));
}

INLINE_ALWAYS __m256i load32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Chunk kc (elements 32kc..32kc+31) of the super-block: unsigned quants and their scales. */
INLINE_ALWAYS void kchunk(int type, const struct ksb *k, int kc, __m256i *q, __m256i *scale)
{
    const int n = kc / 4, s = kc % 4; // for the 128-element halves of Q2_K, Q3_K, Q6_K
    switch (type) {
    case QUANT_Q2_K:
        *q = shift_and(load32(k->blk + offsetof(struct block_q2_K, qs) + 32 * n), 2 * s, 3);
        break;
    case QUANT_Q3_K: {
        const size_t qs = offsetof(struct block_q3_K, qs),
                     hmask = offsetof(struct block_q3_K, hmask);
        __m256i lo = shift_and(load32(k->blk + qs + 32 * n), 2 * s, 3);
        *q = _mm256_or_si256(lo, bit_as(load32(k->blk + hmask), 4 * n + s, 4));
        break;
    }
    case QUANT_Q4_K:
        *q = shift_and(load32(k->blk + offsetof(struct block_q4_K, qs) + 32 * (kc / 2)),
                       4 * (kc % 2), 0xf);
        break;
    case QUANT_Q5_K: {
        const size_t qs = offsetof(struct block_q5_K, qs), qh = offsetof(struct block_q5_K, qh);
        __m256i lo = shift_and(load32(k->blk + qs + 32 * (kc / 2)), 4 * (kc % 2), 0xf);
        *q = _mm256_or_si256(lo, bit_as(load32(k->blk + qh), kc, 16));
        break;
    }
    default: { // Q6_K
        const size_t ql = offsetof(struct block_q6_K, ql), qh = offsetof(struct block_q6_K, qh);
        __m256i lo = shift_and(load32(k->blk + ql + 64 * n + 32 * (s & 1)), s < 2 ? 0 : 4, 0xf);
        __m256i hi = shift_and(load32(k->blk + qh + 32 * n), 2 * s, 3);
        *q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        break;
    }
    }
    if (type == QUANT_Q4_K || type == QUANT_Q5_K)
        *scale = _mm256_set1_epi16(k->sc[kc]);
    else
        *scale = _mm256_set_m128i(_mm_set1_epi16(k->sc[2 * kc + 1]), _mm_set1_epi16(k->sc[2 * kc]));
}

/* Straight-line kernel: per super-block, int32 lane sums per (row, token) over the eight
 * chunks, then one float update with the main and correction terms. */
INLINE_ALWAYS void tile_k(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t wsz = kblock_size(type), asz = sizeof(struct block_q8_K);
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    __m256 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm256_setzero_ps();
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
        __m256i sumi[QUANT_TILE_MAX][QUANT_TILE_MAX];
        for (int r = 0; r < NR; r++)
            for (int c = 0; c < NC; c++)
                sumi[r][c] = _mm256_setzero_si256();
        for (int kc = 0; kc < 8; kc++) {
            __m256i q[QUANT_TILE_MAX], sc[QUANT_TILE_MAX];
            for (int r = 0; r < NR; r++)
                kchunk(type, &k[r], kc, &q[r], &sc[r]);
            for (int c = 0; c < NC; c++) {
                __m256i qy = load32(y + c * t->y_stride + (size_t)b * asz + 4 + 32 * kc);
                for (int r = 0; r < NR; r++) {
                    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], qy), sc[r]);
                    sumi[r][c] = _mm256_add_epi32(sumi[r][c], p);
                }
            }
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *ablk = y + c * t->y_stride + (size_t)b * asz;
            float dy;
            memcpy(&dy, ablk, 4);
            __m256i bsums = load32(ablk + offsetof(struct block_q8_K, bsums));
            for (int r = 0; r < NR; r++) {
                __m256 corr = _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, k[r].corr));
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r][c]),
                                            _mm256_set1_ps(k[r].d * dy), acc[r][c]);
                acc[r][c] = _mm256_fnmadd_ps(corr, _mm256_set1_ps(k[r].corr_d * dy), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            t->s[c * t->s_stride + r] = hsum_f32x8(acc[r][c]);
}

#define K_ENTRY_POINTS(ty, TYPE)                                                                   \
    static void tile_##ty(const struct quant_tile *t)                                              \
    {                                                                                              \
        TILE_SWITCH(tile_k, TYPE, t);                                                              \
    }                                                                                              \
    void ty##_vec_dot_tile_avx2(const struct quant_tile *tile)                                     \
    {                                                                                              \
        tile_##ty(tile);                                                                           \
    }                                                                                              \
    void ty##_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y)                      \
    {                                                                                              \
        struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};        \
        tile_##ty(&one);                                                                           \
    }

K_ENTRY_POINTS(q2_K, QUANT_Q2_K)
K_ENTRY_POINTS(q3_K, QUANT_Q3_K)
K_ENTRY_POINTS(q4_K, QUANT_Q4_K)
K_ENTRY_POINTS(q5_K, QUANT_Q5_K)
K_ENTRY_POINTS(q6_K, QUANT_Q6_K)

/* Q8_K activations, byte-identical to q8_K_from_float_ref: the first value of largest
 * magnitude maps to -127, quants rounded to nearest even (the default mode lrintf uses). */
void q8_K_from_float_avx2(const float *x, void *y, int64_t n)
{
    struct block_q8_K *b = y;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 vmax = _mm256_setzero_ps();
        for (int e = 0; e < QK_K; e += 8)
            vmax = _mm256_max_ps(vmax,
                                 _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + e)));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float amax = _mm_cvtss_f32(m);
        memset(b[i].bsums, 0, sizeof b[i].bsums);
        if (amax == 0.0f) {
            b[i].d = 0.0f;
            memset(b[i].qs, 0, sizeof b[i].qs);
            continue;
        }
        float max = amax;
        for (int e = 0; e < QK_K; e++)
            if (x[e] == amax || x[e] == -amax) {
                max = x[e];
                break;
            }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int g = 0; g < QK_K / 16; g++) {
            __m256i q[2];
            for (int h = 0; h < 2; h++) {
                __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(x + 16 * g + 8 * h));
                v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[h] = _mm256_min_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(127));
            }
            b[i].bsums[g] = (int16_t)hsum_i32x8(_mm256_add_epi32(q[0], q[1]));
            __m128i p = _mm_packs_epi16(
                _mm_packs_epi32(_mm256_castsi256_si128(q[0]), _mm256_extracti128_si256(q[0], 1)),
                _mm_packs_epi32(_mm256_castsi256_si128(q[1]), _mm256_extracti128_si256(q[1], 1)));
            _mm_storeu_si128((__m128i *)(b[i].qs + 16 * g), p);
        }
        b[i].d = 1.0f / iscale;
    }
}
