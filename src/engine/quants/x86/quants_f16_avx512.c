/* AVX-512 products of F16 weights with F32 activations in the AVX2 set's arithmetic, two rows
 * per zmm: the low half runs row r's 8-lane chain, the high half row r + 1's, against the
 * token's 8 floats broadcast to both halves, so each half does exactly the AVX2 kernel's lane
 * operations (same bits, the strict goldens hold) at twice the FMA width.
 * Batches: a tile is 8 rows x up to F16_TILE_COLS tokens. Its rows are converted to float once
 * per block of KBLOCK elements into an L1 panel laid out as the loop reads it, and every
 * 6-token group then runs 24 zmm chains over the panel with no conversion in the loop (the
 * conversions had cost as many issue slots as the FMAs). The chains live in memory between
 * element blocks; the order of each lane's additions is unchanged. An odd last row is the AVX2
 * kernel's own 1-row tile. Compiled with AVX-512 F/BW/VL/DQ. */
#include "engine/quants/blocks.h"
#include "engine/quants/x86/quants_x86.h"
#include "engine/quants/x86/quants_avx2_internal.h"

#include <immintrin.h>

#define PAIRS     4   // row pairs per register block
#define COLS      6   // tokens per register block (QUANT_ORDER_LANES)
#define KBLOCK    256 // elements per panel block: 4 pairs x 256 floats x 2 = 8 KiB
#define VEC_PAIRS 4   // row pairs per block in the single-row order (4 chains each), one token

_Static_assert(F16_TILE_COLS % COLS == 0 && F16_TILE_COLS <= QUANT_TILE_COLS_MAX,
               "the tile's tokens come in whole register blocks");

/* Rows r and r + 1, 8 halves each from element i, as 16 floats (row r low). */
INLINE_ALWAYS __m512 load_pair(const uint8_t *row, size_t stride, int64_t i)
{
    const __m128i lo = _mm_loadu_si128((const __m128i *)(row + 2 * i));
    const __m128i hi = _mm_loadu_si128((const __m128i *)(row + stride + 2 * i));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

INLINE_ALWAYS __m512 load_act8(const float *a)
{
    return _mm512_broadcast_f32x8(_mm256_loadu_ps(a));
}

INLINE_ALWAYS __m256 half_lo(__m512 v)
{
    return _mm512_castps512_ps256(v);
}

INLINE_ALWAYS __m256 half_hi(__m512 v)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

INLINE_ALWAYS float half_at(const uint8_t *row, int64_t j)
{
    uint16_t h;
    memcpy(&h, row + 2 * j, 2);
    return _cvtsh_ss(h);
}

/* a[j] read without assuming alignment: activation rows may start at any byte. */
INLINE_ALWAYS float act_at(const float *a, int64_t j)
{
    float v;
    memcpy(&v, (const char *)a + 4 * j, 4);
    return v;
}

/* The AVX2 kernel's QUANT_ORDER_LANES finish of one output: lanes summed, then the n mod 8
 * tail element by element in float. */
INLINE_ALWAYS float finish_lanes(__m256 acc, const uint8_t *row, const float *a, int64_t i,
                                 int64_t n)
{
    float sum = hsum_f32x8(acc);
    for (int64_t j = i; j < n; j++)
        sum += half_at(row, j) * act_at(a, j);
    return sum;
}

/* finish_lanes for one token's 8 rows at once (chains of rows 2p, 2p + 1 in acc[p]) when no
 * tail follows: the same three rounds of additions per row (lane j + lane j + 4, then j + 2,
 * then 1), each round done for all rows by one vector add after shuffles, instead of a
 * horizontal sum per output (those had cost an eighth of a short row's tile). */
INLINE_ALWAYS void finish_8_rows(const __m512 acc[PAIRS], float *out)
{
    // Round 1: 128-bit quarter 0 of a row's 8 lanes onto quarter 1, for rows 0-3 and 4-7.
    const __m512 r03 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[0], acc[1], 0x88),
                                     _mm512_shuffle_f32x4(acc[0], acc[1], 0xdd));
    const __m512 r47 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2], acc[3], 0x88),
                                     _mm512_shuffle_f32x4(acc[2], acc[3], 0xdd));
    // Quarter k now holds row k's (low) and row k + 4's (high) four sums. Round 2: j + 2.
    const __m512 h =
        _mm512_add_ps(_mm512_shuffle_ps(r03, r47, 0x44), _mm512_shuffle_ps(r03, r47, 0xee));
    // Round 3: element 0 + 1 of each pair; rows k and k + 4 land in elements 4k and 4k + 2.
    const __m512 sums = _mm512_add_ps(h, _mm512_movehdup_ps(h));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm256_storeu_ps(out, _mm512_castps512_ps256(_mm512_permutexvar_ps(order, sums)));
}

/* Rows [0, 2 np) of the tile as floats for elements [k0, k0 + kn), kn a multiple of 8: step
 * s (8 elements) of pair p is the 16 floats at panel[(s * PAIRS + p) * 16], row 2p low. A
 * streaming pass also prefetches the next tile's rows. */
static void fill_panel(float *panel, const struct quant_tile *t, int np, int64_t k0, int64_t kn)
{
    const uint8_t *x = t->x;
    for (int64_t s = 0; s < kn / 8; s++) {
        const int64_t i = k0 + 8 * s;
        for (int p = 0; p < np; p++) {
            const uint8_t *row = x + 2 * p * t->x_stride;
            if (t->is_stream && s % 4 == 0) {
                const char *ahead = (const char *)row + 2 * i + 2 * np * t->x_stride;
                _mm_prefetch(ahead, _MM_HINT_T0);
                _mm_prefetch(ahead + t->x_stride, _MM_HINT_T0);
            }
            _mm512_store_ps(panel + (s * PAIRS + p) * 16, load_pair(row, t->x_stride, i));
        }
    }
}

/* NP pairs from p0 x NC tokens from c0 over the panel's kn elements (from k0), continuing the
 * chains in acc_mem ([c][p], PAIRS per token) after the first block. */
INLINE_ALWAYS void block_panel(const struct quant_tile *t, const float *panel, int p0, int NP,
                               int c0, int NC, int64_t k0, int64_t kn, __m512 *acc_mem)
{
    const float *y[COLS];
    for (int c = 0; c < NC; c++)
        y[c] = (const float *)((const uint8_t *)t->y + (c0 + c) * t->y_stride) + k0;
    __m512 acc[PAIRS][COLS];
    for (int p = 0; p < NP; p++)
        for (int c = 0; c < NC; c++)
            acc[p][c] = k0 == 0 ? _mm512_setzero_ps() : acc_mem[(c0 + c) * PAIRS + p0 + p];
    for (int64_t s = 0; s < kn / 8; s++) {
        __m512 w[PAIRS];
        for (int p = 0; p < NP; p++)
            w[p] = _mm512_load_ps(panel + (s * PAIRS + p0 + p) * 16);
        for (int c = 0; c < NC; c++) {
            const __m512 a = load_act8(y[c] + 8 * s);
            for (int p = 0; p < NP; p++)
                acc[p][c] = _mm512_fmadd_ps(w[p], a, acc[p][c]);
        }
    }
    for (int p = 0; p < NP; p++)
        for (int c = 0; c < NC; c++)
            acc_mem[(c0 + c) * PAIRS + p0 + p] = acc[p][c];
}

/* The panel's np pairs x the tile's nc tokens, in blocks of constant shape (a flat dispatch,
 * so each is unrolled into registers): 4 pairs x 6, 3, 2 or 1 tokens, or one pair x 6 or 1. */
static void panel_cols(const struct quant_tile *t, const float *panel, int np, int nc, int64_t k0,
                       int64_t kn, __m512 *acc_mem)
{
    for (int c0 = 0; c0 < nc;) {
        const int take = nc - c0 >= COLS ? COLS : nc - c0 >= 3 ? 3 : nc - c0;
        if (np == PAIRS && take == COLS)
            block_panel(t, panel, 0, PAIRS, c0, COLS, k0, kn, acc_mem);
        else if (np == PAIRS && take == 3)
            block_panel(t, panel, 0, PAIRS, c0, 3, k0, kn, acc_mem);
        else if (np == PAIRS && take == 2)
            block_panel(t, panel, 0, PAIRS, c0, 2, k0, kn, acc_mem);
        else if (np == PAIRS)
            block_panel(t, panel, 0, PAIRS, c0, 1, k0, kn, acc_mem);
        else
            for (int p = 0; p < np; p++) // the pairs left at a range's end, one at a time
                if (take == COLS)
                    block_panel(t, panel, p, 1, c0, COLS, k0, kn, acc_mem);
                else
                    for (int c = c0; c < c0 + take; c++)
                        block_panel(t, panel, p, 1, c, 1, k0, kn, acc_mem);
        c0 += take;
    }
}

/* QUANT_ORDER_LANES for up to PAIRS row pairs from the tile's first row. */
static void run_lanes_pairs(const struct quant_tile *t, int np)
{
    const int64_t n8 = t->n & ~(int64_t)7;
    _Alignas(64) float panel[KBLOCK / 8 * PAIRS * 16];
    _Alignas(64) __m512 acc_mem[F16_TILE_COLS * PAIRS];
    for (int64_t c0 = 0; c0 < t->n_cols; c0 += F16_TILE_COLS) {
        const int nc = t->n_cols - c0 < F16_TILE_COLS ? (int)(t->n_cols - c0) : F16_TILE_COLS;
        struct quant_tile part = *t;
        part.y = (const uint8_t *)t->y + c0 * t->y_stride;
        for (int i = 0; n8 == 0 && i < nc * PAIRS; i++) // rows under 8 long: no block runs
            acc_mem[i] = _mm512_setzero_ps();
        for (int64_t k0 = 0; k0 < n8; k0 += KBLOCK) {
            const int64_t kn = n8 - k0 < KBLOCK ? n8 - k0 : KBLOCK;
            fill_panel(panel, t, np, k0, kn);
            panel_cols(&part, panel, np, nc, k0, kn, acc_mem);
        }
        if (np == PAIRS && n8 == t->n) {
            for (int c = 0; c < nc; c++)
                finish_8_rows(acc_mem + c * PAIRS, t->s + (c0 + c) * t->s_stride);
            continue;
        }
        for (int p = 0; p < np; p++) {
            const uint8_t *row = (const uint8_t *)t->x + 2 * p * t->x_stride;
            for (int c = 0; c < nc; c++) {
                const float *a = (const float *)((const uint8_t *)part.y + c * t->y_stride);
                const __m512 v = acc_mem[c * PAIRS + p];
                float *s = t->s + (c0 + c) * t->s_stride + 2 * p;
                s[0] = finish_lanes(half_lo(v), row, a, n8, t->n);
                s[1] = finish_lanes(half_hi(v), row + t->x_stride, a, n8, t->n);
            }
        }
    }
}

static void run_lanes(const struct quant_tile *t)
{
    const int n_pairs = t->n_rows / 2;
    for (int p0 = 0; p0 < n_pairs; p0 += PAIRS) {
        struct quant_tile part = *t;
        part.x = (const uint8_t *)t->x + 2 * p0 * t->x_stride;
        part.s = t->s + 2 * p0;
        run_lanes_pairs(&part, n_pairs - p0 < PAIRS ? n_pairs - p0 : PAIRS);
    }
}

/* The AVX2 kernel's QUANT_ORDER_VEC finish: (c0 + c2) + (c1 + c3) was added lane-wise by the
 * caller; here its high half onto low, two horizontal adds, then the tail in double. */
INLINE_ALWAYS float finish_vec(__m256 v, bool has_head, const uint8_t *row, const float *a,
                               int64_t np, int64_t n)
{
    double sum = 0.0;
    if (has_head) {
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        h = _mm_hadd_ps(h, h);
        h = _mm_hadd_ps(h, h);
        sum = _mm_cvtss_f32(h);
    }
    for (int64_t j = np; j < n; j++)
        sum += (double)(half_at(row, j) * act_at(a, j));
    return (float)sum;
}

/* QUANT_ORDER_VEC (four 8-lane chains per output over each 32 elements) for rows
 * [r0, r0 + 2 NP) and token c0. */
INLINE_ALWAYS void block_vec(const struct quant_tile *t, int64_t r0, int64_t c0, int NP)
{
    const uint8_t *x = (const uint8_t *)t->x + r0 * t->x_stride;
    const float *y = (const float *)((const uint8_t *)t->y + c0 * t->y_stride);
    const int64_t np = t->n & ~(int64_t)31;
    __m512 acc[VEC_PAIRS][4];
    for (int p = 0; p < NP; p++)
        for (int j = 0; j < 4; j++)
            acc[p][j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; i += 32) {
        for (int j = 0; j < 4; j++) {
            const __m512 a = load_act8(y + i + 8 * j);
            for (int p = 0; p < NP; p++) {
                const uint8_t *row = x + 2 * p * t->x_stride;
                if (j == 0) {
                    const char *ahead = (const char *)row + 2 * i + 2 * NP * t->x_stride;
                    _mm_prefetch(ahead, _MM_HINT_T0);
                    _mm_prefetch(ahead + t->x_stride, _MM_HINT_T0);
                }
                acc[p][j] = _mm512_fmadd_ps(load_pair(row, t->x_stride, i + 8 * j), a, acc[p][j]);
            }
        }
    }
    for (int p = 0; p < NP; p++) {
        const uint8_t *row = x + 2 * p * t->x_stride;
        const __m512 v =
            _mm512_add_ps(_mm512_add_ps(acc[p][0], acc[p][2]), _mm512_add_ps(acc[p][1], acc[p][3]));
        float *s = t->s + c0 * t->s_stride + r0 + 2 * p;
        s[0] = finish_vec(half_lo(v), np > 0, row, y, np, t->n);
        s[1] = finish_vec(half_hi(v), np > 0, row + t->x_stride, y, np, t->n);
    }
}

/* The AVX2 kernel on one row x up to QUANT_TILE_MAX tokens at a time: an odd last row. */
static void last_row_avx2(const struct quant_tile *t, int64_t r)
{
    for (int64_t c0 = 0; c0 < t->n_cols; c0 += QUANT_TILE_MAX) {
        struct quant_tile one = *t;
        one.x = (const uint8_t *)t->x + r * t->x_stride;
        one.y = (const uint8_t *)t->y + c0 * t->y_stride;
        one.s = t->s + c0 * t->s_stride + r;
        one.n_rows = 1;
        one.n_cols = t->n_cols - c0 < QUANT_TILE_MAX ? (int)(t->n_cols - c0) : QUANT_TILE_MAX;
        f16_vec_dot_tile_avx2(&one);
    }
}

static void run_vec(const struct quant_tile *t)
{
    const int64_t n_pairs = t->n_rows / 2;
    for (int64_t c0 = 0; c0 < t->n_cols; c0++) {
        int64_t p0 = 0;
        for (; p0 + VEC_PAIRS <= n_pairs; p0 += VEC_PAIRS)
            block_vec(t, 2 * p0, c0, VEC_PAIRS);
        for (; p0 < n_pairs; p0++)
            block_vec(t, 2 * p0, c0, 1);
    }
}

void f16_vec_dot_tile_avx512(const struct quant_tile *tile)
{
    if (tile->order == QUANT_ORDER_VEC)
        run_vec(tile);
    else
        run_lanes(tile);
    if (tile->n_rows % 2) last_row_avx2(tile, tile->n_rows - 1);
}
