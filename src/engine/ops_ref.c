/* The scalar reference kernels of ops.h (the ops_ref table), the scalar conversions and
 * exponentials every variant shares, and the scalar tails the SIMD variants finish with. Half
 * conversions follow IEEE 754 binary16 with round to nearest even, as F16C does, so every
 * variant stores identical cache bits. */
#include "engine/ops_ref.h"
#include "engine/ops.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

uint16_t ops_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) // inf or nan (keep nan quiet)
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | (ax >> 13 & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) // rounds to >= 65520: overflow to inf
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {   // result is subnormal or zero
        if (ax < 0x33000000u) // below half the smallest subnormal
            return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; // 14..24 bits dropped to reach 2^-24 units
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((ax >> 13) - (112u << 10)); // rebias exponent 127 -> 15
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1)))
        q++; // may carry into the exponent, which is still correct
    return (uint16_t)(sign | q);
}

float ops_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1f) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        x = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        x = sign;
    } else { // subnormal: normalize
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Products in float, summed in double. */
double ops_dot_f16_tail(int64_t i, int64_t n, const uint16_t *a, const uint16_t *b, double sum)
{
    for (; i < n; i++)
        sum += (double)(ops_f16_to_f32(a[i]) * ops_f16_to_f32(b[i]));
    return sum;
}

void ops_mad_f16_tail(int64_t i, int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    for (; i < n; i++)
        y[i] = ops_f32_to_f16(fmaf(ops_f16_to_f32(x[i]), s, ops_f16_to_f32(y[i])));
}

static float dot_f16_ref(int64_t n, const uint16_t *a, const uint16_t *b)
{
    return (float)ops_dot_f16_tail(0, n, a, b, 0.0);
}

static void mad_f16_ref(int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    ops_mad_f16_tail(0, n, y, x, s);
}

static void scale_f16_ref(int64_t n, uint16_t *y, float s)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = ops_f32_to_f16(ops_f16_to_f32(y[i]) * s);
}

static void f32_to_f16_ref(int64_t n, const float *x, uint16_t *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = ops_f32_to_f16(x[i]);
}

static void round_f16_ref(int64_t n, float *x)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = ops_f16_to_f32(ops_f32_to_f16(x[i]));
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* x = n ln2 + b with n integral (the 1.5 * 2^23 shift rounds x / ln2 to an integer whose
 * bits land in the low mantissa), ln2 split in two parts; e^b by a polynomial in b and b^2;
 * 2^n built in the exponent field. Scaling in two steps covers |n| > 126, where 2^n alone
 * would overflow or go subnormal; |n| > 192 saturates to 0 or infinity. */
float ops_expf_poly(float x)
{
    const float shift = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, shift);
    const float n = z - shift;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = f32_bits(z) << 23;
    const float k = bits_f32(e + f32_bits(1.0f));
    const float u = b * b;
    const float j = fmaf(
        fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
        u, 0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(k, j, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = bits_f32(g + 0x7f000000u), s2 = bits_f32(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

static void swiglu_ref(int64_t n, float *g, const float *u)
{
    const int64_t nv = n & ~(int64_t)7;
    for (int64_t i = 0; i < nv; i++)
        g[i] = g[i] / (1.0f + ops_expf_poly(0.0f - g[i])) * u[i];
    for (int64_t i = nv; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static float gelu_table[65536];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_fill(void)
{
    for (uint32_t b = 0; b < 65536; b++) {
        const float h = ops_f16_to_f32((uint16_t)b);
        const float g =
            0.5f * h *
            (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
        gelu_table[b] = ops_f16_to_f32(ops_f32_to_f16(g));
    }
}

const float *ops_gelu_table(void)
{
    pthread_once(&gelu_once, gelu_fill);
    return gelu_table;
}

void ops_geglu_tail(int64_t i, int64_t n, float *g, const float *u)
{
    const float *tab = ops_gelu_table();
    for (; i < n; i++) {
        const float x = g[i];
        g[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x * u[i] : tab[ops_f32_to_f16(x)] * u[i];
    }
}

static void geglu_ref(int64_t n, float *g, const float *u)
{
    ops_geglu_tail(0, n, g, u);
}

/* Squares in float, summed in double in element order, as the reference does. */
void ops_rmsnorm_ref(int64_t n, float *y, const float *x, const float *w, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

void ops_rope_tail(float *x, const float *cs, const float *sn, int n_rot, bool neox, int i0)
{
    const int half = n_rot / 2;
    for (int i = i0; i < half; i++) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b], c = cs[i], s = sn[i];
        if (!neox && (half & 1) && i == half - 1) {
            x[a] = c * x0 - s * x1;
            x[b] = c * x1 + s * x0;
        } else {
            x[a] = fmaf(c, x0, -(s * x1));
            x[b] = fmaf(s, x0, c * x1);
        }
    }
}

void ops_rope_ref(float *x, const float *cs, const float *sn, int n_rot, bool neox)
{
    ops_rope_tail(x, cs, sn, n_rot, neox, 0);
}

static const struct ops_kernels kernels_ref = {
    .dot_f16 = dot_f16_ref,
    .mad_f16 = mad_f16_ref,
    .scale_f16 = scale_f16_ref,
    .f32_to_f16 = f32_to_f16_ref,
    .round_f16 = round_f16_ref,
    .swiglu = swiglu_ref,
    .rmsnorm = ops_rmsnorm_ref,
    .rope = ops_rope_ref,
    .geglu = geglu_ref,
};

const struct ops_kernels *ops_ref(void)
{
    return &kernels_ref;
}
