/* Scalar reference kernels for the float types and the 32-element block formats (Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q8_1). Portable C, the ground truth the SIMD variants are tested against.
 * Quantizers follow ggml's reference rounding so files we write match llama.cpp's. */
#include "engine/quants/quants_ref.h"
#include "engine/quants/blocks.h"

#include <math.h>
#include <string.h>

void f32_to_float_ref(const void *x, float *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

void f32_from_float_ref(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

/* Rows may sit at any byte offset (a row inside a file, a test's misaligned copy). */
static float load_f32(const void *p, int64_t i)
{
    float f;
    memcpy(&f, (const uint8_t *)p + 4 * i, 4);
    return f;
}

void f32_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += load_f32(x, i) * load_f32(y, i);
    *s = sum;
}

void f16_to_float_ref(const void *x, float *y, int64_t n)
{
    const uint8_t *p = x; // may be unaligned inside a file
    for (int64_t i = 0; i < n; i++) {
        half_bits h;
        memcpy(&h, p + 2 * i, 2);
        y[i] = half_to_f32(h);
    }
}

void f16_from_float_ref(const float *x, void *y, int64_t n)
{
    uint8_t *p = y;
    for (int64_t i = 0; i < n; i++) {
        half_bits h = f32_to_half(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* F16 weights against F32 activations. */
void f16_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const uint8_t *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        half_bits h;
        memcpy(&h, a + 2 * i, 2);
        sum += half_to_f32(h) * load_f32(y, i);
    }
    *s = sum;
}

void bf16_to_float_ref(const void *x, float *y, int64_t n)
{
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        y[i] = bf16_to_f32(h);
    }
}

void bf16_from_float_ref(const float *x, void *y, int64_t n)
{
    uint8_t *p = y;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = f32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* BF16 weights against F32 activations. */
void bf16_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const uint8_t *a = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, a + 2 * i, 2);
        sum += bf16_to_f32(h) * load_f32(y, i);
    }
    *s = sum;
}

/* Largest |v| of a block and the signed value that has it. */
static float block_absmax(const float *x, int n, float *signed_max)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    *signed_max = max;
    return amax;
}

static void block_minmax(const float *x, int n, float *min, float *max)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    *min = lo;
    *max = hi;
}

static uint8_t clamp_u8(float v, int max)
{
    int q = (int)v; // v >= 0 by construction: truncation = floor
    return (uint8_t)(q > max ? max : q < 0 ? 0 : q);
}

void q4_0_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q4_0 *b = x;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        float d = half_to_f32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((b[i].qs[j] & 0xf) - 8) * d;
            y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void q4_0_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q4_0 *b = y;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        float max;
        block_absmax(x, QK4_0, &max);
        float d = max / -8.0f; // the extreme value maps to -8, using all 16 levels
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_half(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            uint8_t lo = clamp_u8(x[j] * id + 8.5f, 15);
            uint8_t hi = clamp_u8(x[j + 16] * id + 8.5f, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void q4_0_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q4_0 *a = x;
    const struct block_q8_0 *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            isum += ((a[i].qs[j] & 0xf) - 8) * b[i].qs[j];
            isum += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        }
        sum += (float)isum * (half_to_f32(a[i].d) * half_to_f32(b[i].d));
    }
    *s = sum;
}

void q4_1_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q4_1 *b = x;
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        float d = half_to_f32(b[i].d), m = half_to_f32(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(b[i].qs[j] & 0xf) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

void q4_1_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q4_1 *b = y;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min, max;
        block_minmax(x, QK4_1, &min, &max);
        float d = (max - min) / 15.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_half(d);
        b[i].m = f32_to_half(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            uint8_t lo = clamp_u8((x[j] - min) * id + 0.5f, 15);
            uint8_t hi = clamp_u8((x[j + 16] - min) * id + 0.5f, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void q4_1_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q4_1 *a = x;
    const struct block_q8_1 *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int isum = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            isum += (a[i].qs[j] & 0xf) * b[i].qs[j];
            isum += (a[i].qs[j] >> 4) * b[i].qs[j + 16];
        }
        // x = q*dx + m, y = qy*dy: sum x*y = dx*dy*sum(q*qy) + m*dy*sum(qy), the latter stored in s
        sum += (float)isum * (half_to_f32(a[i].d) * half_to_f32(b[i].d)) +
               half_to_f32(a[i].m) * half_to_f32(b[i].s);
    }
    *s = sum;
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

/* The 32 unsigned 5-bit quants of a Q5_0/Q5_1 block, in element order. */
static void q5_unpack(const uint8_t *qs, const uint8_t *qh4, int *q)
{
    uint32_t qh = load_u32(qh4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4);
        q[j + 16] = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
    }
}

static void q5_pack(const uint8_t *q, uint8_t *qs, uint8_t *qh4)
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
        qh |= (uint32_t)(q[j] >> 4) << j;
        qh |= (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    store_u32(qh4, qh);
}

void q5_0_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q5_0 *b = x;
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        int q[QK5_0];
        q5_unpack(b[i].qs, b[i].qh, q);
        float d = half_to_f32(b[i].d);
        for (int j = 0; j < QK5_0; j++)
            y[j] = (float)(q[j] - 16) * d;
    }
}

void q5_0_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q5_0 *b = y;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        float max;
        block_absmax(x, QK5_0, &max);
        float d = max / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_half(d);
        uint8_t q[QK5_0];
        for (int j = 0; j < QK5_0; j++)
            q[j] = clamp_u8(x[j] * id + 16.5f, 31);
        q5_pack(q, b[i].qs, b[i].qh);
    }
}

void q5_0_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q5_0 *a = x;
    const struct block_q8_0 *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        int q[QK5_0], isum = 0;
        q5_unpack(a[i].qs, a[i].qh, q);
        for (int j = 0; j < QK5_0; j++)
            isum += (q[j] - 16) * b[i].qs[j];
        sum += (float)isum * (half_to_f32(a[i].d) * half_to_f32(b[i].d));
    }
    *s = sum;
}

void q5_1_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q5_1 *b = x;
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        int q[QK5_1];
        q5_unpack(b[i].qs, b[i].qh, q);
        float d = half_to_f32(b[i].d), m = half_to_f32(b[i].m);
        for (int j = 0; j < QK5_1; j++)
            y[j] = (float)q[j] * d + m;
    }
}

void q5_1_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q5_1 *b = y;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min, max;
        block_minmax(x, QK5_1, &min, &max);
        float d = (max - min) / 31.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_half(d);
        b[i].m = f32_to_half(min);
        uint8_t q[QK5_1];
        for (int j = 0; j < QK5_1; j++)
            q[j] = clamp_u8((x[j] - min) * id + 0.5f, 31);
        q5_pack(q, b[i].qs, b[i].qh);
    }
}

void q5_1_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q5_1 *a = x;
    const struct block_q8_1 *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        int q[QK5_1], isum = 0;
        q5_unpack(a[i].qs, a[i].qh, q);
        for (int j = 0; j < QK5_1; j++)
            isum += q[j] * b[i].qs[j];
        sum += (float)isum * (half_to_f32(a[i].d) * half_to_f32(b[i].d)) +
               half_to_f32(a[i].m) * half_to_f32(b[i].s);
    }
    *s = sum;
}

void q8_0_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q8_0 *b = x;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        float d = half_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++)
            y[j] = (float)b[i].qs[j] * d;
    }
}

/* Symmetric 8-bit: d = absmax / 127, q = round-half-away(x / d). Returns d. */
static float quantize_8bit(const float *x, int8_t *q, int *qsum)
{
    float max;
    float amax = block_absmax(x, 32, &max);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        q[j] = (int8_t)roundf(x[j] * id);
        sum += q[j];
    }
    *qsum = sum;
    return d;
}

void q8_0_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        int qsum;
        b[i].d = f32_to_half(quantize_8bit(x, b[i].qs, &qsum));
    }
}

void q8_0_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q8_0 *a = x;
    const struct block_q8_0 *b = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int isum = 0;
        for (int j = 0; j < QK8_0; j++)
            isum += a[i].qs[j] * b[i].qs[j];
        sum += (float)isum * (half_to_f32(a[i].d) * half_to_f32(b[i].d));
    }
    *s = sum;
}

void q8_1_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q8_1 *b = x;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        float d = half_to_f32(b[i].d);
        for (int j = 0; j < QK8_1; j++)
            y[j] = (float)b[i].qs[j] * d;
    }
}

void q8_1_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        int qsum;
        float d = quantize_8bit(x, b[i].qs, &qsum);
        b[i].d = f32_to_half(d);
        b[i].s = f32_to_half(d * (float)qsum);
    }
}

void q8_0_activations_ref(const float *x, void *y, int64_t n)
{
    struct block_q8_0 *b = y;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float max;
        float amax = block_absmax(x, QK8_0, &max);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < QK8_0; j++)
            b[i].qs[j] = (int8_t)nearbyintf(x[j] * id); // default rounding: half to even
        b[i].d = f32_to_half(amax / 127.0f);
    }
}

void q8_1_activations_ref(const float *x, void *y, int64_t n)
{
    struct block_q8_1 *b = y;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float max;
        float amax = block_absmax(x, QK8_1, &max);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int qsum = 0;
        for (int j = 0; j < QK8_1; j++) {
            b[i].qs[j] = (int8_t)nearbyintf(x[j] * id); // default rounding: half to even
            qsum += b[i].qs[j];
        }
        const float d = amax / 127.0f;
        b[i].d = f32_to_half(d);
        b[i].s = f32_to_half(d * (float)qsum);
    }
}
