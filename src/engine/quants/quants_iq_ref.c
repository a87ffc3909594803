/* Scalar references of IQ4_NL, IQ4_XS and MXFP4: dequantization, a quantizer (nearest level
 * under a block scale chosen from the block's extreme value; good enough for synthetic models,
 * not the reference quantizer's search), and dot products against Q8_0 / Q8_K activations in
 * block order. */
#include "engine/quants/quants_ref.h"
#include "engine/quants/blocks.h"

#include <math.h>

const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Index of the table level nearest v. */
static uint8_t nearest(const int8_t *table, float v)
{
    int best = 0;
    float bd = fabsf(v - (float)table[0]);
    for (int k = 1; k < 16; k++) {
        const float d = fabsf(v - (float)table[k]);
        if (d < bd) {
            bd = d;
            best = k;
        }
    }
    return (uint8_t)best;
}

/* The element of largest magnitude (its sign kept). */
static float signed_absmax(const float *x, int n)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > fabsf(m)) m = x[i];
    return m;
}

/* 32 values as table indices under scale d into 16 nibble pairs. */
static void pack32(const int8_t *table, const float *x, float d, uint8_t *qs)
{
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(nearest(table, x[j] * id) | (nearest(table, x[j + 16] * id) << 4));
}

static void unpack32(const int8_t *table, const uint8_t *qs, float d, float *y)
{
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)table[qs[j] & 0xf];
        y[j + 16] = d * (float)table[qs[j] >> 4];
    }
}

/* Integer dot of 32 table-coded values with 32 int8 activations. */
static int idot32(const int8_t *table, const uint8_t *qs, const int8_t *q8)
{
    int s1 = 0, s2 = 0;
    for (int j = 0; j < 16; j++) {
        s1 += q8[j] * table[qs[j] & 0xf];
        s2 += q8[j + 16] * table[qs[j] >> 4];
    }
    return s1 + s2;
}

void iq4_nl_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_iq4_nl *b = x;
    for (int64_t i = 0; i < n / QK4_NL; i++)
        unpack32(iq4nl_values, b[i].qs, half_to_f32(b[i].d), y + i * QK4_NL);
}

void iq4_nl_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_iq4_nl *b = y;
    for (int64_t i = 0; i < n / QK4_NL; i++, x += QK4_NL) {
        // the extreme element maps to the table's -127
        const half_bits dh = f32_to_half(signed_absmax(x, QK4_NL) / -127.0f);
        b[i].d = dh;
        pack32(iq4nl_values, x, half_to_f32(dh), b[i].qs);
    }
}

void iq4_nl_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_iq4_nl *a = x;
    const struct block_q8_0 *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_NL; i++)
        sum += (half_to_f32(b[i].d) * half_to_f32(a[i].d)) *
               (float)idot32(iq4nl_values, a[i].qs, b[i].qs);
    *s = sum;
}

void iq4_xs_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_iq4_xs *b = x;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = half_to_f32(b[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++)
            unpack32(iq4nl_values, b[i].qs + 16 * ib, d * (float)iq4_xs_scale(&b[i], ib),
                     y + i * QK_K + 32 * ib);
    }
}

void iq4_xs_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_iq4_xs *b = y;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sub[QK_K / 32], amax = 0.0f;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            sub[ib] = signed_absmax(x + 32 * ib, 32) / -127.0f;
            amax = fabsf(sub[ib]) > amax ? fabsf(sub[ib]) : amax;
        }
        const half_bits dh = f32_to_half(amax / 31.0f);
        const float d = half_to_f32(dh), id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = dh;
        b[i].scales_h = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int ls = (int)lrintf(sub[ib] * id);
            ls = ls < -32 ? -32 : ls > 31 ? 31 : ls;
            const int u = ls + 32;
            if (ib % 2 == 0)
                b[i].scales_l[ib / 2] = (uint8_t)(u & 0xf);
            else
                b[i].scales_l[ib / 2] |= (uint8_t)((u & 0xf) << 4);
            b[i].scales_h |= (uint16_t)((u >> 4) << (2 * ib));
            pack32(iq4nl_values, x + 32 * ib, d * (float)ls, b[i].qs + 16 * ib);
        }
    }
}

void iq4_xs_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_iq4_xs *a = x;
    const struct block_q8_K *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = half_to_f32(a[i].d) * b[i].d;
        for (int ib = 0; ib < QK_K / 32; ib++)
            sum += (d * (float)iq4_xs_scale(&a[i], ib)) *
                   (float)idot32(iq4nl_values, a[i].qs + 16 * ib, b[i].qs + 32 * ib);
    }
    *s = sum;
}

void mxfp4_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_mxfp4 *b = x;
    for (int64_t i = 0; i < n / QK_MXFP4; i++)
        unpack32(mxfp4_values, b[i].qs, e8m0_half_to_f32(b[i].e), y + i * QK_MXFP4);
}

void mxfp4_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_mxfp4 *b = y;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, x += QK_MXFP4) {
        const float amax = fabsf(signed_absmax(x, QK_MXFP4));
        // smallest exponent whose scale fits the extreme value in the table's 12
        int e = 0;
        while (e < 254 && amax > 12.0f * e8m0_half_to_f32((uint8_t)e))
            e++;
        b[i].e = (uint8_t)e;
        pack32(mxfp4_values, x, e8m0_half_to_f32((uint8_t)e), b[i].qs);
    }
}

void mxfp4_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_mxfp4 *a = x;
    const struct block_q8_0 *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_MXFP4; i++)
        sum += (half_to_f32(b[i].d) * e8m0_half_to_f32(a[i].e)) *
               (float)idot32(mxfp4_values, a[i].qs, b[i].qs);
    *s = sum;
}
