/* Scalar reference kernels for ops.h and the one table that selects between them and the AVX2
 * variants. Half conversions follow IEEE 754 binary16 with round to nearest even, as F16C
 * does, so both paths store identical cache bits. */
#include "engine/ops.h"
#include "engine/cpufeat.h"

#include <pthread.h>
#include <stdlib.h>
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
float ops_dot_f16_tail(int64_t i, int64_t n, const uint16_t *a, const uint16_t *b)
{
    double s = 0.0;
    for (; i < n; i++)
        s += (double)(ops_f16_to_f32(a[i]) * ops_f16_to_f32(b[i]));
    return (float)s;
}

void ops_mad_f16_tail(int64_t i, int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    for (; i < n; i++)
        y[i] = ops_f32_to_f16(ops_f16_to_f32(y[i]) + ops_f16_to_f32(x[i]) * s);
}

static float dot_f16_ref(int64_t n, const uint16_t *a, const uint16_t *b)
{
    return ops_dot_f16_tail(0, n, a, b);
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

static const struct ops_kernels kernels_ref = {
    .dot_f16 = dot_f16_ref,
    .mad_f16 = mad_f16_ref,
    .scale_f16 = scale_f16_ref,
    .f32_to_f16 = f32_to_f16_ref,
};

static const struct ops_kernels kernels_avx2 = {
    .dot_f16 = ops_dot_f16_avx2,
    .mad_f16 = ops_mad_f16_avx2,
    .scale_f16 = ops_scale_f16_avx2,
    .f32_to_f16 = ops_f32_to_f16_avx2,
};

// Set once under pthread_once before any kernel thread reads it (the CPU feature flags).
static const struct ops_kernels *kernels_sel = &kernels_ref;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

bool ops_have_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return cpufeat_has_avx2_fma_f16c();
#else
    return false;
#endif
}

static void select_kernels(void)
{
    const char *no_simd = getenv("LLAMAPI_NO_SIMD");
    if (ops_have_avx2() && !(no_simd && strcmp(no_simd, "1") == 0)) kernels_sel = &kernels_avx2;
}

void ops_init(void)
{
    pthread_once(&init_once, select_kernels);
}

const struct ops_kernels *ops_get(void)
{
    return kernels_sel;
}

const struct ops_kernels *ops_ref(void)
{
    return &kernels_ref;
}
