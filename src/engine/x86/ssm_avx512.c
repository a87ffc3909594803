/* AVX-512 variants of the recurrent scans (ssm_x86.h), in the reference's AVX-512 arithmetic
 * (ggml-cpu built with AVX512F: ggml_vec_dot_f32 and the Mamba-2 branch of ssm_scan): over
 * each whole 64-element step four 16-lane fused multiply-add accumulators, added (a0 + a2) +
 * (a1 + a3), then across lanes as GCC's _mm512_reduce_add_ps does (upper 8 lanes onto the
 * lower, upper 4 onto the lower, then (l0 + l2) + (l1 + l3)), written out here so another
 * compiler's expansion cannot change it; the remaining products added to that float one by
 * one, each with one fused multiply-add (its compiler contracts the scalar `sum += x * y`).
 * The element updates are the scalar references', so only the dots' order differs from them
 * and from the AVX2 scans, as the reference's AVX-512 and AVX2 builds differ. */
#include "engine/x86/ssm_x86.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#define STEP 64 // elements per accumulation step: 4 accumulators of 16 lanes

/* The four accumulators' sum in the reference's reduction order. */
static inline float reduce4(const __m512 s[4])
{
    const __m512 t = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q)); // l0 + l2, l1 + l3
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}

/* Decays the row and returns its dot with k: one pass where the reference makes two (the
 * products read the decayed values, as they would from memory). */
static float decay_dot(int n, float *row, const float *k, float decay)
{
    const int np = n & ~(STEP - 1);
    const __m512 vd = _mm512_set1_ps(decay);
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const __m512 r = _mm512_mul_ps(_mm512_loadu_ps(row + i + 16 * j), vd);
            _mm512_storeu_ps(row + i + 16 * j, r);
            s[j] = _mm512_fmadd_ps(r, _mm512_loadu_ps(k + i + 16 * j), s[j]);
        }
    float sum = reduce4(s);
    for (int i = np; i < n; i++) {
        row[i] *= decay;
        sum = fmaf(row[i], k[i], sum);
    }
    return sum;
}

/* row += k * d (fused), then returns the updated row's dot with q; one pass, as above. */
static float mad_dot(int n, float *row, const float *k, float d, const float *q)
{
    const int np = n & ~(STEP - 1);
    const __m512 vd = _mm512_set1_ps(d);
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const int o = i + 16 * j;
            const __m512 r = _mm512_fmadd_ps(_mm512_loadu_ps(k + o), vd, _mm512_loadu_ps(row + o));
            _mm512_storeu_ps(row + o, r);
            s[j] = _mm512_fmadd_ps(r, _mm512_loadu_ps(q + o), s[j]);
        }
    float sum = reduce4(s);
    for (int i = np; i < n; i++) {
        row[i] = fmaf(k[i], d, row[i]);
        sum = fmaf(row[i], q[i], sum);
    }
    return sum;
}

void ssm_delta_step_avx512(int n, float *state, const float *q, const float *k, const float *v,
                           float decay, float beta, float scale, float *out)
{
    for (int j = 0; j < n; j++) { // row by row, as in ssm_delta_step_ref
        float *row = state + (size_t)j * (size_t)n;
        const float d = (v[j] - decay_dot(n, row, k, decay)) * beta;
        out[j] = mad_dot(n, row, k, d, q) * scale;
    }
}

/* One channel's state row through the scan; returns its dot with c. */
static float ssd_row(int n, float *row, const float *b, const float *c, float decay, float x_dt)
{
    const int np = n & ~(STEP - 1);
    const __m512 vd = _mm512_set1_ps(decay), vx = _mm512_set1_ps(x_dt);
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const int o = i + 16 * j;
            const __m512 kept = _mm512_mul_ps(_mm512_loadu_ps(row + o), vd);
            const __m512 r = _mm512_add_ps(kept, _mm512_mul_ps(_mm512_loadu_ps(b + o), vx));
            _mm512_storeu_ps(row + o, r);
            s[j] = _mm512_fmadd_ps(r, _mm512_loadu_ps(c + o), s[j]);
        }
    float sum = reduce4(s);
    for (int i = np; i < n; i++) {
        const float kept = row[i] * decay, added = b[i] * x_dt;
        row[i] = kept + added;
        sum = fmaf(row[i], c[i], sum);
    }
    return sum;
}

void ssm_ssd_step_avx512(int head_dim, int n, float *state, const float *x, const float *b,
                         const float *c, float decay, float dt, float *y)
{
    for (int i = 0; i < head_dim; i++)
        y[i] = ssd_row(n, state + (size_t)i * (size_t)n, b, c, decay, x[i] * dt);
}
