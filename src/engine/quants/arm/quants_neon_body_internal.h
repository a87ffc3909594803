/* The NEON kernels, written once and compiled twice: by quants_neon.c for ARMv8.0 (int8 dots
 * by smull/smlal2 + sadalp) and by quants_dotprod.c with +dotprod (sdot); dot16 picks by
 * __ARM_FEATURE_DOTPROD. The includer defines ISA (the symbol suffix) first.
 *
 * Float weights and the 32-element formats follow the x86 (AVX2) kernels' arithmetic step by
 * step - their 8-lane vectors as pairs of 4-lane ones, the same fused operations, the same
 * reduction order, each QUANT_ORDER_* the tile asks for - so an aarch64 build computes the
 * same bits as an x86 one and the strict goldens hold on both.
 * K-quants: each sub-block's integer dot is exact, reduced once per super-block, then scaled
 * and summed with the scalar reference's own float expression, so they equal the reference
 * bit for bit. */
#include "engine/quants/arm/quants_arm.h"
#include "engine/quants/arm/quants_neon_internal.h"

#include <math.h>
#include <stddef.h>

#define PASTE2(a, b) a##_##b
#define PASTE(a, b)  PASTE2(a, b)
#define KERNEL(name) PASTE(name, ISA)

/* ---- float weights against F32 activations ---- */

/* The x86 kernels' 8-lane vectors are two float32x4 here (elements 0..3, 4..7 of each group). */
struct f32x8 {
    float32x4_t lo, hi;
};

INLINE_ALWAYS struct f32x8 load_w8(int type, const uint8_t *p)
{
    struct f32x8 v;
    if (type == QUANT_F16) {
        const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
        v.lo = vcvt_f32_f16(vget_low_f16(h));
        v.hi = vcvt_high_f32_f16(h);
    } else if (type == QUANT_BF16) {
        const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(p));
        v.lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        v.hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
    } else {
        v.lo = vreinterpretq_f32_u8(vld1q_u8(p));
        v.hi = vreinterpretq_f32_u8(vld1q_u8(p + 16));
    }
    return v;
}

INLINE_ALWAYS float load_w1(int type, const uint8_t *p)
{
    uint16_t h;
    float f;
    if (type == QUANT_F16) {
        memcpy(&h, p, 2);
        return h2f(h);
    }
    if (type == QUANT_BF16) {
        memcpy(&h, p, 2);
        return bf16_to_f32(h);
    }
    memcpy(&f, p, 4);
    return f;
}

INLINE_ALWAYS struct f32x8 fma8(struct f32x8 acc, struct f32x8 a, struct f32x8 b)
{
    acc.lo = vfmaq_f32(acc.lo, a.lo, b.lo);
    acc.hi = vfmaq_f32(acc.hi, a.hi, b.hi);
    return acc;
}

/* The x86 8-lane sum: high half onto low, then (l0 + l2) + (l1 + l3). */
INLINE_ALWAYS float hsum8(struct f32x8 v)
{
    const float32x4_t s = vaddq_f32(v.lo, v.hi);
    return vaddv_f32(vadd_f32(vget_low_f32(s), vget_high_f32(s)));
}

static const struct f32x8 zero8 = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};

/* QUANT_ORDER_LANES: one 8-lane FMA chain per output, then the tail one by one. */
INLINE_ALWAYS void tile_float(int type, const struct quant_tile *t)
{
    const size_t esz = type == QUANT_F32 ? 4 : 2;
    const uint8_t *x = t->x, *y = t->y;
    const int nr = t->n_rows, nc = t->n_cols;
    struct f32x8 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            acc[r][c] = zero8;
    int64_t i = 0;
    for (; i + 8 <= t->n; i += 8) {
        struct f32x8 w[QUANT_TILE_MAX];
        for (int r = 0; r < nr; r++)
            w[r] = load_w8(type, x + r * t->x_stride + (size_t)i * esz);
        for (int c = 0; c < nc; c++) {
            const struct f32x8 a = load_w8(QUANT_F32, y + c * t->y_stride + (size_t)i * 4);
            for (int r = 0; r < nr; r++)
                acc[r][c] = fma8(acc[r][c], w[r], a);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) {
            float sum = hsum8(acc[r][c]);
            const uint8_t *a = y + c * t->y_stride;
            for (int64_t j = i; j < t->n; j++)
                sum += load_w1(type, x + r * t->x_stride + (size_t)j * esz) *
                       load_w1(QUANT_F32, a + (size_t)j * 4);
            t->s[c * t->s_stride + r] = sum;
        }
}

/* QUANT_ORDER_VEC: four 8-lane chains per 32 elements, (c0 + c2) + (c1 + c3), high half onto
 * low, then two horizontal adds ((l0 + l1) + (l2 + l3)); the tail as the x86 kernel does it. */
INLINE_ALWAYS float reduce_vec4(const struct f32x8 c[4])
{
    const float32x4_t lo = vaddq_f32(vaddq_f32(c[0].lo, c[2].lo), vaddq_f32(c[1].lo, c[3].lo));
    const float32x4_t hi = vaddq_f32(vaddq_f32(c[0].hi, c[2].hi), vaddq_f32(c[1].hi, c[3].hi));
    const float32x4_t h = vaddq_f32(lo, hi);
    const float32x4_t p = vpaddq_f32(h, h);
    return vgetq_lane_f32(vpaddq_f32(p, p), 0);
}

INLINE_ALWAYS void tile_float_vec(int type, const struct quant_tile *t)
{
    const size_t esz = type == QUANT_F32 ? 4 : 2;
    const uint8_t *x = t->x, *y = t->y;
    const int nr = t->n_rows, nc = t->n_cols;
    const int64_t np = t->n & ~(int64_t)31;
    struct f32x8 acc[QUANT_TILE_MAX][QUANT_TILE_MAX][4];
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            for (int j = 0; j < 4; j++)
                acc[r][c][j] = zero8;
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++) {
            struct f32x8 w[QUANT_TILE_MAX];
            for (int r = 0; r < nr; r++)
                w[r] = load_w8(type, x + r * t->x_stride + (size_t)(i + 8 * j) * esz);
            for (int c = 0; c < nc; c++) {
                const struct f32x8 a =
                    load_w8(QUANT_F32, y + c * t->y_stride + (size_t)(i + 8 * j) * 4);
                for (int r = 0; r < nr; r++)
                    acc[r][c][j] = fma8(acc[r][c][j], w[r], a);
            }
        }
    for (int r = 0; r < nr; r++) {
        const uint8_t *w = x + r * t->x_stride;
        for (int c = 0; c < nc; c++) {
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
                    sum =
                        fmaf(load_w1(type, w + (size_t)j * 4), load_w1(QUANT_F32, a + 4 * j), sum);
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

#define FLOAT_ENTRY(ty, TYPE, HAS_VEC)                                                             \
    void KERNEL(ty##_vec_dot_tile)(const struct quant_tile *t)                                     \
    {                                                                                              \
        if (HAS_VEC && t->order == QUANT_ORDER_VEC)                                                \
            tile_float_vec(TYPE, t);                                                               \
        else                                                                                       \
            tile_float(TYPE, t);                                                                   \
    }                                                                                              \
    void KERNEL(ty##_vec_dot)(int64_t n, float *s, const void *x, const void *y)                   \
    {                                                                                              \
        const struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};  \
        KERNEL(ty##_vec_dot_tile)(&one);                                                           \
    }

FLOAT_ENTRY(f32, QUANT_F32, true)
FLOAT_ENTRY(f16, QUANT_F16, true)
FLOAT_ENTRY(bf16, QUANT_BF16, false)

/* ---- 32-element blocks against Q8_0 (symmetric) or Q8_1 (with a min) ---- */

/* QUANT_ORDER_LANES: per block and (row, column), the 8 integer lanes converted and fused
 * into an 8-lane float chain with dx*dy; formats with a min add m*s per block to a separate
 * float; at the end the 8 lanes summed as x86 does, plus that. */
#define TILE_Q32(ty, act, has_min, MIN_OF, SUM_OF)                                                 \
    static void ty##_tile_lanes(const struct quant_tile *t)                                        \
    {                                                                                              \
        const int nr = t->n_rows, nc = t->n_cols;                                                  \
        struct f32x8 acc[QUANT_TILE_MAX][QUANT_TILE_MAX];                                          \
        float macc[QUANT_TILE_MAX][QUANT_TILE_MAX];                                                \
        for (int r = 0; r < nr; r++)                                                               \
            for (int c = 0; c < nc; c++) {                                                         \
                acc[r][c] = zero8;                                                                 \
                macc[r][c] = 0.0f;                                                                 \
            }                                                                                      \
        for (int64_t b = 0; b < t->n / 32; b++) {                                                  \
            int8x16_t w[QUANT_TILE_MAX][2];                                                        \
            float dx[QUANT_TILE_MAX], mx[QUANT_TILE_MAX];                                          \
            for (int r = 0; r < nr; r++) {                                                         \
                const struct block_##ty *blk =                                                     \
                    (const struct block_##ty *)((const uint8_t *)t->x + r * t->x_stride) + b;      \
                ty##_quants(blk, w[r]);                                                            \
                dx[r] = h2f(blk->d);                                                               \
                mx[r] = has_min ? h2f(MIN_OF(*blk)) : 0.0f;                                        \
            }                                                                                      \
            for (int c = 0; c < nc; c++) {                                                         \
                const struct act *ab =                                                             \
                    (const struct act *)((const uint8_t *)t->y + c * t->y_stride) + b;             \
                const float dy = h2f(ab->d);                                                       \
                const float ms = has_min ? h2f(SUM_OF(*ab)) : 0.0f;                                \
                for (int r = 0; r < nr; r++) {                                                     \
                    int32x4_t l[2];                                                                \
                    lanes8(w[r], ab->qs, l);                                                       \
                    const float32x4_t d = vdupq_n_f32(dx[r] * dy);                                 \
                    acc[r][c].lo = vfmaq_f32(acc[r][c].lo, vcvtq_f32_s32(l[0]), d);                \
                    acc[r][c].hi = vfmaq_f32(acc[r][c].hi, vcvtq_f32_s32(l[1]), d);                \
                    if (has_min) macc[r][c] += mx[r] * ms;                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++)                                                               \
            for (int c = 0; c < nc; c++)                                                           \
                t->s[c * t->s_stride + r] = hsum8(acc[r][c]) + macc[r][c];                         \
    }

#define NO_FIELD(b)  ((b).d)
#define MIN_FIELD(b) ((b).m)
#define SUM_FIELD(b) ((b).s)
TILE_Q32(q4_0, block_q8_0, false, NO_FIELD, NO_FIELD)
TILE_Q32(q5_0, block_q8_0, false, NO_FIELD, NO_FIELD)
TILE_Q32(q8_0, block_q8_0, false, NO_FIELD, NO_FIELD)
TILE_Q32(q4_1, block_q8_1, true, MIN_FIELD, SUM_FIELD)
TILE_Q32(q5_1, block_q8_1, true, MIN_FIELD, SUM_FIELD)

/* QUANT_ORDER_BLOCKS (Q4_0): per block and (row, column) the exact integer dot, fused into one
 * float with dx*dy. */
static void q4_0_tile_blocks(const struct quant_tile *t)
{
    float acc[QUANT_TILE_MAX][QUANT_TILE_MAX] = {{0}};
    for (int64_t b = 0; b < t->n / 32; b++) {
        int8x16_t w[QUANT_TILE_MAX][2];
        float dx[QUANT_TILE_MAX];
        for (int r = 0; r < t->n_rows; r++) {
            const struct block_q4_0 *blk =
                (const struct block_q4_0 *)((const uint8_t *)t->x + r * t->x_stride) + b;
            q4_0_quants(blk, w[r]);
            dx[r] = h2f(blk->d);
        }
        for (int c = 0; c < t->n_cols; c++) {
            const struct block_q8_0 *ab =
                (const struct block_q8_0 *)((const uint8_t *)t->y + c * t->y_stride) + b;
            const float dy = h2f(ab->d);
            for (int r = 0; r < t->n_rows; r++) {
                int32x4_t l[2];
                lanes8(w[r], ab->qs, l);
                acc[r][c] = fmaf((float)vaddvq_s32(vaddq_s32(l[0], l[1])), dx[r] * dy, acc[r][c]);
            }
        }
    }
    for (int r = 0; r < t->n_rows; r++)
        for (int c = 0; c < t->n_cols; c++)
            t->s[c * t->s_stride + r] = acc[r][c];
}

#define Q32_ENTRY(ty, BLOCKS)                                                                      \
    void KERNEL(ty##_vec_dot_tile)(const struct quant_tile *t)                                     \
    {                                                                                              \
        if (BLOCKS && t->order == QUANT_ORDER_BLOCKS)                                              \
            q4_0_tile_blocks(t);                                                                   \
        else                                                                                       \
            ty##_tile_lanes(t);                                                                    \
    }                                                                                              \
    void KERNEL(ty##_vec_dot)(int64_t n, float *s, const void *x, const void *y)                   \
    {                                                                                              \
        const struct quant_tile one = {.n = n, .x = x, .y = y, .s = s, .n_rows = 1, .n_cols = 1};  \
        ty##_tile_lanes(&one);                                                                     \
    }

Q32_ENTRY(q4_0, true)
Q32_ENTRY(q5_0, false)
Q32_ENTRY(q8_0, false)
Q32_ENTRY(q4_1, false)
Q32_ENTRY(q5_1, false)

/* ---- K-quant super-blocks against Q8_K ---- */

INLINE_ALWAYS int16x8_t bsums_at(const struct block_q8_K *b, int half)
{
    const uint8_t *p = (const uint8_t *)b + offsetof(struct block_q8_K, bsums) + 16 * half;
    return vreinterpretq_s16_u8(vld1q_u8(p));
}

/* sum_j m[j] * bsums[j] over the 16 sub-blocks of 16 elements. */
INLINE_ALWAYS int32_t mins_dot16(const struct block_q8_K *b, const uint8_t m[16])
{
    const uint8x16_t mv = vld1q_u8(m);
    const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mv)));
    const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mv));
    const int16x8_t b0 = bsums_at(b, 0), b1 = bsums_at(b, 1);
    int32x4_t acc = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
    acc = vmlal_high_s16(acc, m0, b0);
    acc = vmlal_s16(acc, vget_low_s16(m1), vget_low_s16(b1));
    acc = vmlal_high_s16(acc, m1, b1);
    return vaddvq_s32(acc);
}

/* The same over 8 sub-blocks of 32 elements (bsums added in pairs; each pair fits int16). */
INLINE_ALWAYS int32_t mins_dot32(const struct block_q8_K *b, const uint8_t m[8])
{
    const int16x8_t mv = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
    const int16x8_t pairs = vpaddq_s16(bsums_at(b, 0), bsums_at(b, 1));
    int32x4_t acc = vmull_s16(vget_low_s16(mv), vget_low_s16(pairs));
    acc = vmlal_high_s16(acc, mv, pairs);
    return vaddvq_s32(acc);
}

INLINE_ALWAYS uint8x16_t shr_u8(uint8x16_t v, int n)
{
    return vshlq_u8(v, vdupq_n_s8((int8_t)-n));
}

/* The reference's per-super-block expression, in its order. */
INLINE_ALWAYS float k_term(float d, float dmin, float dy, int32_t sumi, int32_t summ)
{
    return (d * dy) * (float)sumi - (dmin * dy) * (float)summ;
}

void KERNEL(q2_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q2_K *a = x;
    const struct block_q8_K *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t m[16];
        int32x4_t acc = vdupq_n_s32(0);
        for (int nn = 0; nn < 2; nn++) {
            const uint8x16_t q[2] = {vld1q_u8(a[i].qs + 32 * nn), vld1q_u8(a[i].qs + 32 * nn + 16)};
            for (int sh = 0; sh < 4; sh++)
                for (int h = 0; h < 2; h++) {
                    const int k = 8 * nn + 2 * sh + h; // sub-block of 16 elements
                    int8x16_t w =
                        vreinterpretq_s8_u8(vandq_u8(shr_u8(q[h], 2 * sh), vdupq_n_u8(3)));
                    int32x4_t d = dot16(vdupq_n_s32(0), w, vld1q_s8(b[i].qs + 16 * k));
                    acc = vmlaq_n_s32(acc, d, a[i].scales[k] & 0xf);
                }
        }
        for (int j = 0; j < 16; j++)
            m[j] = a[i].scales[j] >> 4;
        sum += k_term(h2f(a[i].d), h2f(a[i].dmin), b[i].d, vaddvq_s32(acc), mins_dot16(&b[i], m));
    }
    *s = sum;
}

void KERNEL(q3_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q3_K *a = x;
    const struct block_q8_K *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        k3_scales(a[i].scales, sc);
        const uint8x16_t hm[2] = {vld1q_u8(a[i].hmask), vld1q_u8(a[i].hmask + 16)};
        int32x4_t acc = vdupq_n_s32(0);
        for (int nn = 0; nn < 2; nn++) {
            const uint8x16_t q[2] = {vld1q_u8(a[i].qs + 32 * nn), vld1q_u8(a[i].qs + 32 * nn + 16)};
            for (int sh = 0; sh < 4; sh++)
                for (int h = 0; h < 2; h++) {
                    const int k = 8 * nn + 2 * sh + h;
                    uint8x16_t lo = vandq_u8(shr_u8(q[h], 2 * sh), vdupq_n_u8(3));
                    uint8x16_t hi = vandq_u8(
                        vtstq_u8(hm[h], vdupq_n_u8((uint8_t)(1u << (4 * nn + sh)))), vdupq_n_u8(4));
                    int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(4));
                    int32x4_t d = dot16(vdupq_n_s32(0), w, vld1q_s8(b[i].qs + 16 * k));
                    acc = vmlaq_n_s32(acc, d, sc[k]);
                }
        }
        sum += k_term(h2f(a[i].d), 0.0f, b[i].d, vaddvq_s32(acc), 0);
    }
    *s = sum;
}

/* Q4_K and Q5_K: 64-element chunk c holds elements 64c..64c+31 in the low nibbles of
 * qs[32c..32c+31] and the next 32 in the high nibbles; Q5_K's fifth bit of element e is bit
 * e / 32 of qh[e % 32]. Sub-blocks of 32 elements. */
INLINE_ALWAYS void k45_vec_dot(int64_t n, float *s, const void *x, const void *y, bool five)
{
    const struct block_q8_K *b = y;
    const size_t bsize = five ? sizeof(struct block_q5_K) : sizeof(struct block_q4_K);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)x + (size_t)i * bsize;
        half_bits d, dmin;
        memcpy(&d, blk, 2);
        memcpy(&dmin, blk + 2, 2);
        const uint8_t *scales = blk + 4;
        const uint8_t *qh = blk + 16;
        const uint8_t *qs = five ? blk + 48 : blk + 16;
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++)
            k4_scale_min(j, scales, &sc[j], &m[j]);
        uint8x16_t hb[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if (five) {
            hb[0] = vld1q_u8(qh);
            hb[1] = vld1q_u8(qh + 16);
        }
        int32x4_t acc = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t q[2] = {vld1q_u8(qs + 32 * c), vld1q_u8(qs + 32 * c + 16)};
            const int8_t *yq = b[i].qs + 64 * c;
            int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
            for (int h = 0; h < 2; h++) {
                uint8x16_t wl = vandq_u8(q[h], vdupq_n_u8(0x0f)), wh = vshrq_n_u8(q[h], 4);
                if (five) {
                    const uint8x16_t ten = vdupq_n_u8(0x10);
                    wl = vorrq_u8(
                        wl, vandq_u8(vtstq_u8(hb[h], vdupq_n_u8((uint8_t)(1u << (2 * c)))), ten));
                    wh = vorrq_u8(
                        wh, vandq_u8(vtstq_u8(hb[h], vdupq_n_u8((uint8_t)(2u << (2 * c)))), ten));
                }
                lo = dot16(lo, vreinterpretq_s8_u8(wl), vld1q_s8(yq + 16 * h));
                hi = dot16(hi, vreinterpretq_s8_u8(wh), vld1q_s8(yq + 32 + 16 * h));
            }
            acc = vmlaq_n_s32(acc, lo, sc[2 * c]);
            acc = vmlaq_n_s32(acc, hi, sc[2 * c + 1]);
        }
        sum += k_term(h2f(d), h2f(dmin), b[i].d, vaddvq_s32(acc), mins_dot32(&b[i], m));
    }
    *s = sum;
}

void KERNEL(q4_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    k45_vec_dot(n, s, x, y, false);
}

void KERNEL(q5_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    k45_vec_dot(n, s, x, y, true);
}

void KERNEL(q6_K_vec_dot)(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q6_K *a = x;
    const struct block_q8_K *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int nn = 0; nn < 2; nn++) {
            const uint8_t *ql = a[i].ql + 64 * nn;
            const uint8x16_t qh[2] = {vld1q_u8(a[i].qh + 32 * nn),
                                      vld1q_u8(a[i].qh + 32 * nn + 16)};
            for (int sh = 0; sh < 4; sh++)
                for (int h = 0; h < 2; h++) {
                    const int k = 8 * nn + 2 * sh + h;
                    const uint8x16_t byte = vld1q_u8(ql + 32 * (sh & 1) + 16 * h);
                    uint8x16_t lo = sh < 2 ? vandq_u8(byte, vdupq_n_u8(0x0f)) : vshrq_n_u8(byte, 4);
                    uint8x16_t hi = vshlq_n_u8(vandq_u8(shr_u8(qh[h], 2 * sh), vdupq_n_u8(3)), 4);
                    int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
                    int32x4_t d = dot16(vdupq_n_s32(0), w, vld1q_s8(b[i].qs + 16 * k));
                    acc = vmlaq_n_s32(acc, d, a[i].scales[k]);
                }
        }
        sum += k_term(h2f(a[i].d), 0.0f, b[i].d, vaddvq_s32(acc), 0);
    }
    *s = sum;
}

/* ---- activation quantizers (the same bytes as the _ref versions) ---- */

/* Largest |x| of 32 floats. */
INLINE_ALWAYS float absmax32(const float *x)
{
    float32x4_t m = vabsq_f32(vld1q_f32(x)); // maxnm: NaN skipped, as the reference
    for (int j = 4; j < 32; j += 4)
        m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    return vmaxnmvq_f32(m);
}

/* q[j] = round-half-even(x[j] * id) for 16 values known to lie in [-127, 127] after rounding
 * (or clamped there); returns their int32 lane sums. */
INLINE_ALWAYS int32x4_t round16(const float *x, float id, int8_t *q)
{
    int32x4_t r[4];
    for (int j = 0; j < 4; j++) {
        r[j] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 4 * j), id));
        r[j] = vmaxq_s32(vminq_s32(r[j], vdupq_n_s32(127)), vdupq_n_s32(-127));
    }
    const int16x8_t lo = vcombine_s16(vmovn_s32(r[0]), vmovn_s32(r[1]));
    const int16x8_t hi = vcombine_s16(vmovn_s32(r[2]), vmovn_s32(r[3]));
    vst1q_s8(q, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
    return vaddq_s32(vaddq_s32(r[0], r[1]), vaddq_s32(r[2], r[3]));
}

void KERNEL(q8_0_activations)(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float amax = absmax32(x);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        round16(x, id, b[i].qs);
        round16(x + 16, id, b[i].qs + 16);
        b[i].d = f32_to_half(amax / 127.0f);
    }
}

void KERNEL(q8_1_activations)(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float amax = absmax32(x);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const int32x4_t s = vaddq_s32(round16(x, id, b[i].qs), round16(x + 16, id, b[i].qs + 16));
        const float d = amax / 127.0f;
        b[i].d = f32_to_half(d);
        b[i].s = f32_to_half(d * (float)vaddvq_s32(s));
    }
}

void KERNEL(q8_K_from_float)(const float *x, void *y, int64_t n)
{
    struct block_q8_K *b = y;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int e = 0; e < QK_K; e += 4)
            m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + e)));
        const float amax = vmaxnmvq_f32(m);
        if (!(amax > 0.0f)) { // zero (or NaN): as the reference, whose strict > never fires
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float max = 0.0f; // the first element of largest magnitude, with its sign
        for (int e = 0; e < QK_K; e++)
            if (fabsf(x[e]) == amax) {
                max = x[e];
                break;
            }
        const float iscale = -127.0f / max;
        int16_t bsums[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++)
            bsums[j] = (int16_t)vaddvq_s32(round16(x + 16 * j, iscale, b[i].qs + 16 * j));
        memcpy(b[i].bsums, bsums, sizeof bsums);
        b[i].d = 1.0f / iscale;
    }
}
