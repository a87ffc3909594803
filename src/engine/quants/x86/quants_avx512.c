/* AVX-512 kernels, bit for bit the AVX2 kernels' results (the same integer dots, the same
 * float operations per output in the same order), only wider: float weights (F32, F16,
 * BF16) against F32 activations, and the repacked Q8_0_R16 / Q4_0_R16 weights against Q8_0_S
 * activations with VNNI (vpdpbusd), where each zmm holds 4 quants of 16 weight rows, so one
 * instruction advances 16 outputs by 4 elements and no horizontal sums are needed. Every
 * output is computed the same way whatever the tile shape, so the single dot equals every
 * tile. Compiled with the AVX-512 F/BW/VL/DQ/VNNI flags; only called when quant_init detected
 * them. */
#include "engine/quants/quants_internal.h"

#include <immintrin.h>
#include <stddef.h>

#define INLINE_ALWAYS static inline __attribute__((always_inline))

/* Bytes ahead of the current block that a streaming tile prefetches (measured: the hardware
 * prefetcher alone keeps about 2/3 of the bandwidth a matvec reaches with this). */
#define PF_BYTES 1024

/* Calls fn(type, t, R, C) with C = t->n_cols as a compile-time constant (1..8). */
#define SWITCH_COLS(fn, type, t, R)                                                                \
    do {                                                                                           \
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
        case 8:                                                                                    \
            fn(type, t, R, 8);                                                                     \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* fn over R = 1..4 and every column count. A flat dispatch switch. */
#define SWITCH_RC4(fn, type, t)                                                                    \
    do {                                                                                           \
        switch ((t)->n_rows) {                                                                     \
        case 1:                                                                                    \
            SWITCH_COLS(fn, type, t, 1);                                                           \
            break;                                                                                 \
        case 2:                                                                                    \
            SWITCH_COLS(fn, type, t, 2);                                                           \
            break;                                                                                 \
        case 3:                                                                                    \
            SWITCH_COLS(fn, type, t, 3);                                                           \
            break;                                                                                 \
        case 4:                                                                                    \
            SWITCH_COLS(fn, type, t, 4);                                                           \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* ---- float weights x F32 activations ---- */

/* 8 weights as floats, in both halves of a zmm (the broadcasts are loads, no shuffle). */
INLINE_ALWAYS __m512 load_w8x2(int type, const uint8_t *p)
{
    switch (type) {
    case QUANT_F16:
        return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)));
    case QUANT_BF16: {
        __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    default:
        return _mm512_broadcast_f32x8(_mm256_loadu_ps((const float *)p));
    }
}

/* 16 consecutive weights as floats. */
INLINE_ALWAYS __m512 load_w16(int type, const uint8_t *p)
{
    switch (type) {
    case QUANT_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    case QUANT_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
    default:
        return _mm512_loadu_ps((const float *)p);
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

/* Sum of 8 float lanes: high half onto low, then pairs (as the AVX2 kernels add them). */
INLINE_ALWAYS float hsum_f32x8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* QUANT_ORDER_LANES: one 8-lane FMA chain per output over the row, lanes summed, the
 * remaining elements added one by one. Two tokens share a zmm (token c in the low half,
 * c + 1 in the high), the weights broadcast to both halves, so each half runs exactly the AVX2
 * kernel's chain. Straight-line kernel for NR rows x NC tokens. */
INLINE_ALWAYS void tile_float(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t esz = type == QUANT_F32 ? 4 : 2;
    const int NP = (NC + 1) / 2; // token pairs
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    const bool stream = NC == 1 || t->is_stream;
    __m512 acc[4][4];
    for (int r = 0; r < NR; r++)
        for (int p = 0; p < NP; p++)
            acc[r][p] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= t->n; i += 8) {
        __m512 w[4];
        for (int r = 0; r < NR; r++) {
            const uint8_t *p = x + r * t->x_stride + (size_t)i * esz;
            if (stream && (i & 15) == 0) _mm_prefetch((const char *)p + PF_BYTES, _MM_HINT_T0);
            w[r] = load_w8x2(type, p);
        }
        for (int p = 0; p < NP; p++) {
            const float *a0 = (const float *)(y + 2 * p * t->y_stride) + i;
            __m512 a = _mm512_castps256_ps512(_mm256_loadu_ps(a0));
            if (2 * p + 1 < NC)
                a = _mm512_insertf32x8(
                    a, _mm256_loadu_ps((const float *)((const uint8_t *)a0 + t->y_stride)), 1);
            else
                a = _mm512_insertf32x8(a, _mm256_setzero_ps(), 1);
            for (int r = 0; r < NR; r++)
                acc[r][p] = _mm512_fmadd_ps(w[r], a, acc[r][p]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) {
            const __m512 v = acc[r][c / 2];
            float sum =
                hsum_f32x8(c % 2 ? _mm512_extractf32x8_ps(v, 1) : _mm512_castps512_ps256(v));
            const uint8_t *a = y + c * t->y_stride;
            for (int64_t j = i; j < t->n; j++)
                sum += load_w1(type, x + r * t->x_stride + (size_t)j * esz) *
                       load_w1(QUANT_F32, a + (size_t)j * 4);
            t->s[c * t->s_stride + r] = sum;
        }
}

/* QUANT_ORDER_VEC: the AVX2 kernels' four 8-lane chains per 32 elements are the halves of two
 * zmm chains (c0 | c1 and c2 | c3), reduced as (c0 + c2) + (c1 + c3), then lanes high onto low
 * and two horizontal adds; the remaining elements as the AVX2 kernel adds them. */
INLINE_ALWAYS void tile_float_vec(int type, const struct quant_tile *t, int NR, int NC)
{
    const size_t esz = type == QUANT_F32 ? 4 : 2;
    const uint8_t *x = t->x;
    const uint8_t *y = t->y;
    const int64_t np = t->n & ~(int64_t)31;
    const bool stream = NC == 1 || t->is_stream;
    __m512 acc[4][8][2];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c][0] = acc[r][c][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; i += 32) {
        __m512 w[4][2];
        for (int r = 0; r < NR; r++) {
            const uint8_t *p = x + r * t->x_stride + (size_t)i * esz;
            if (stream) _mm_prefetch((const char *)p + PF_BYTES, _MM_HINT_T0);
            w[r][0] = load_w16(type, p);
            w[r][1] = load_w16(type, p + 16 * esz);
        }
        for (int c = 0; c < NC; c++) {
            const float *a = (const float *)(y + c * t->y_stride) + i;
            const __m512 a0 = _mm512_loadu_ps(a), a1 = _mm512_loadu_ps(a + 16);
            for (int r = 0; r < NR; r++) {
                acc[r][c][0] = _mm512_fmadd_ps(w[r][0], a0, acc[r][c][0]);
                acc[r][c][1] = _mm512_fmadd_ps(w[r][1], a1, acc[r][c][1]);
            }
        }
    }
    for (int r = 0; r < NR; r++) {
        const uint8_t *w = x + r * t->x_stride;
        for (int c = 0; c < NC; c++) {
            const uint8_t *a = y + c * t->y_stride;
            float head = 0.0f;
            if (np > 0) {
                const __m512 s2 = _mm512_add_ps(acc[r][c][0], acc[r][c][1]);
                const __m256 v =
                    _mm256_add_ps(_mm512_castps512_ps256(s2), _mm512_extractf32x8_ps(s2, 1));
                __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
                h = _mm_hadd_ps(h, h);
                h = _mm_hadd_ps(h, h);
                head = _mm_cvtss_f32(h);
            }
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

#define FLOAT_ENTRY_POINTS(ty, TYPE)                                                               \
    void ty##_vec_dot_tile_avx512(const struct quant_tile *tile)                                   \
    {                                                                                              \
        if (tile->order == QUANT_ORDER_VEC && TYPE != QUANT_BF16)                                  \
            SWITCH_RC4(tile_float_vec, TYPE, tile);                                                \
        else                                                                                       \
            SWITCH_RC4(tile_float, TYPE, tile);                                                    \
    }                                                                                              \
    void ty##_vec_dot_avx512(int64_t n, float *s, const void *x, const void *y)                    \
    {                                                                                              \
        struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};        \
        tile_float(TYPE, &one, 1, 1);                                                              \
    }

FLOAT_ENTRY_POINTS(f32, QUANT_F32)
FLOAT_ENTRY_POINTS(f16, QUANT_F16)
FLOAT_ENTRY_POINTS(bf16, QUANT_BF16)

/* ---- 16-row interleaved Q8_0 / Q4_0 x Q8_0_S ---- */

INLINE_ALWAYS int32_t load_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE_ALWAYS float load_f32(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* Prefetches the next blocks of a tile's row groups (streaming tiles only). */
INLINE_ALWAYS void prefetch_groups(const uint8_t *const wb[4], int G, size_t gblk)
{
    for (int g = 0; g < G; g++)
        for (size_t off = 0; off < gblk; off += 64)
            _mm_prefetch((const char *)wb[g] + PF_BYTES + off, _MM_HINT_T0);
}

/* Q4_0_R16 in QUANT_ORDER_BLOCKS (the AVX2 kernels' order for Q4_0 matrices with a multiple
 * of 8 rows, which every repacked matrix has): per block and (row, token) the exact integer
 * dot (the stored nibbles are q + 8; the activation's c8 = -8 * sum starts the sum), then
 * acc += dot * (dx * dy). Bit for bit the AVX2 result. Straight-line kernel over G groups of
 * 16 rows and NC tokens. */
INLINE_ALWAYS void tile_q4_r16(int type, const struct quant_tile *t, int G, int NC)
{
    (void)type;
    const size_t gblk = 16 * sizeof(struct block_q4_0), ablk = sizeof(struct block_q8_0s);
    const size_t gstride = 16 * t->x_stride;
    const bool stream = NC == 1 || t->is_stream;
    const uint8_t *y = t->y;
    __m512 acc[4][8];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            acc[g][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < t->n / QK4_0; b++) {
        const uint8_t *wb[4];
        for (int g = 0; g < G; g++)
            wb[g] = (const uint8_t *)t->x + g * gstride + (size_t)b * gblk;
        if (stream) prefetch_groups(wb, G, gblk);
        __m512i dot[4][8];
        for (int c = 0; c < NC; c++) {
            const __m512i init = _mm512_set1_epi32(load_i32(y + c * t->y_stride + (size_t)b * ablk +
                                                            offsetof(struct block_q8_0s, c8)));
            for (int g = 0; g < G; g++)
                dot[g][c] = init;
        }
        for (int k = 0; k < 8; k++) { // chunks 0..3 low nibbles (elements 4k..), 4..7 high
            __m512i w[4];
            for (int g = 0; g < G; g++) {
                __m512i raw = _mm512_loadu_si512(wb[g] + 32 + 64 * (k & 3));
                if (k >= 4) raw = _mm512_srli_epi16(raw, 4);
                w[g] = _mm512_and_si512(raw, _mm512_set1_epi8(0x0f));
            }
            const size_t e = (size_t)(k & 3) * 4 + (k >= 4 ? 16 : 0);
            for (int c = 0; c < NC; c++) {
                const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk;
                const __m512i av =
                    _mm512_set1_epi32(load_i32(a + offsetof(struct block_q8_0s, qs) + e));
                for (int g = 0; g < G; g++)
                    dot[g][c] = _mm512_dpbusd_epi32(dot[g][c], w[g], av);
            }
        }
        for (int g = 0; g < G; g++) {
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wb[g]));
            for (int c = 0; c < NC; c++) {
                const __m512 dy = _mm512_set1_ps(load_f32(y + c * t->y_stride + (size_t)b * ablk));
                acc[g][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[g][c]), _mm512_mul_ps(dx, dy),
                                            acc[g][c]);
            }
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            _mm512_storeu_ps(t->s + c * t->s_stride + 16 * g, acc[g][c]);
}

/* Q8_0_R16 in QUANT_ORDER_LANES (the AVX2 kernels' order for Q8_0): per block and (row,
 * token) eight exact int32 sums of 4 products (chunk k = the AVX2 kernel's lane k; the stored
 * weights are q + 128, the activation's c128[k] starts each sum), each fused into its own
 * float chain with dx * dy; the eight chains added as AVX2 adds its lanes. Bit for bit the
 * AVX2 result. Straight-line kernel over G groups of 16 rows and NC tokens. */
INLINE_ALWAYS void tile_q8_r16(int type, const struct quant_tile *t, int G, int NC)
{
    (void)type;
    const size_t gblk = 16 * sizeof(struct block_q8_0), ablk = sizeof(struct block_q8_0s);
    const size_t gstride = 16 * t->x_stride;
    const bool stream = NC == 1 || t->is_stream;
    const uint8_t *y = t->y;
    __m512 acc[2][4][8];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++)
            for (int k = 0; k < 8; k++)
                acc[g][c][k] = _mm512_setzero_ps();
    for (int64_t b = 0; b < t->n / QK8_0; b++) {
        const uint8_t *wb[4];
        for (int g = 0; g < G; g++)
            wb[g] = (const uint8_t *)t->x + g * gstride + (size_t)b * gblk;
        if (stream) prefetch_groups(wb, G, gblk);
        __m512 dxdy[2][4];
        for (int g = 0; g < G; g++) {
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wb[g]));
            for (int c = 0; c < NC; c++)
                dxdy[g][c] = _mm512_mul_ps(
                    dx, _mm512_set1_ps(load_f32(y + c * t->y_stride + (size_t)b * ablk)));
        }
        for (int k = 0; k < 8; k++) {
            __m512i w[2];
            for (int g = 0; g < G; g++)
                w[g] = _mm512_loadu_si512(wb[g] + 32 + 64 * k);
            for (int c = 0; c < NC; c++) {
                const uint8_t *a = y + c * t->y_stride + (size_t)b * ablk;
                const __m512i av =
                    _mm512_set1_epi32(load_i32(a + offsetof(struct block_q8_0s, qs) + 4 * k));
                const __m512i init = _mm512_set1_epi32(
                    load_i32(a + offsetof(struct block_q8_0s, c128) + 4 * (size_t)k));
                for (int g = 0; g < G; g++) {
                    const __m512i dot = _mm512_dpbusd_epi32(init, w[g], av);
                    acc[g][c][k] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), dxdy[g][c], acc[g][c][k]);
                }
            }
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < NC; c++) {
            const __m512(*l) = acc[g][c];
            const __m512 sum =
                _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                              _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7])));
            _mm512_storeu_ps(t->s + c * t->s_stride + 16 * g, sum);
        }
}

void q4_0_r16_tile_avx512(const struct quant_tile *tile)
{
    switch (tile->n_rows) {
    case 16:
        SWITCH_COLS(tile_q4_r16, 0, tile, 1);
        break;
    case 32:
        SWITCH_COLS(tile_q4_r16, 0, tile, 2);
        break;
    case 48:
        SWITCH_COLS(tile_q4_r16, 0, tile, 3);
        break;
    case 64:
        SWITCH_COLS(tile_q4_r16, 0, tile, 4);
        break;
    default:
        break;
    }
}

/* One Q8_0_R16 tile of G groups and 1..4 tokens (2 x 4 x 8 float chains already exceed the
 * 32 registers, so larger tiles are cut into these). */
static void q8_r16_part(const struct quant_tile *t, int G)
{
    switch (t->n_cols * 2 + G - 3) {
    case 0:
        tile_q8_r16(0, t, 1, 1);
        break;
    case 1:
        tile_q8_r16(0, t, 2, 1);
        break;
    case 2:
        tile_q8_r16(0, t, 1, 2);
        break;
    case 3:
        tile_q8_r16(0, t, 2, 2);
        break;
    case 4:
        tile_q8_r16(0, t, 1, 3);
        break;
    case 5:
        tile_q8_r16(0, t, 2, 3);
        break;
    case 6:
        tile_q8_r16(0, t, 1, 4);
        break;
    case 7:
        tile_q8_r16(0, t, 2, 4);
        break;
    default:
        break;
    }
}

void q8_0_r16_tile_avx512(const struct quant_tile *tile)
{
    struct quant_tile part = *tile;
    for (int c0 = 0; c0 < tile->n_cols; c0 += 4) {
        part.y = (const uint8_t *)tile->y + (size_t)c0 * tile->y_stride;
        part.n_cols = tile->n_cols - c0 < 4 ? tile->n_cols - c0 : 4;
        for (int r0 = 0; r0 < tile->n_rows; r0 += 32) {
            part.x = (const uint8_t *)tile->x + (size_t)r0 * tile->x_stride;
            part.s = tile->s + (size_t)c0 * tile->s_stride + r0;
            q8_r16_part(&part, tile->n_rows - r0 >= 32 ? 2 : 1);
        }
    }
}

/* Q8_0_S activations: quants byte-identical to quant_q8_0_activations (scale 127/amax, round
 * half to even in the default rounding mode), d half-rounded, and the offset corrections. */
void q8_0s_from_float_avx512(const float *x, void *y, int64_t n)
{
    struct block_q8_0s *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax =
            _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
        _mm_storeu_si128((__m128i *)b[i].qs, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(b[i].qs + 16), _mm512_cvtsepi32_epi8(q1));
        int32_t part[8], q[32]; // sums of 4 quants (a small share of the time: scalar)
        _mm512_storeu_si512(q, q0);
        _mm512_storeu_si512(q + 16, q1);
        int sum = 0;
        for (int k = 0; k < 8; k++) {
            part[k] = q[4 * k] + q[4 * k + 1] + q[4 * k + 2] + q[4 * k + 3];
            b[i].c128[k] = -128 * part[k];
            sum += part[k];
        }
        b[i].c8 = -8 * sum;
        b[i].d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, 0));
    }
}
