/* AVX2 + FMA variants of the recurrent scans (ssm_x86.h), in the reference's x86 arithmetic:
 * its float dot keeps four 8-lane accumulators over each whole 32-element step, reduces them
 * in a fixed tree and adds the remaining products in double; the Mamba-2 scan keeps the same
 * four accumulators and adds its tail in float. So a given row always sums the same way, and
 * the same way as the reference's AVX2 build. */
#include "engine/x86/ssm_x86.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#define STEP 32 // elements per accumulation step: 4 accumulators of 8 lanes

/* The four accumulators' sum: (0 + 2) + (1 + 3), then the halves, then two horizontal adds. */
static float reduce4(__m256 s0, __m256 s1, __m256 s2, __m256 s3)
{
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

/* Decays the row and returns its dot with k in the float-dot order: one pass where the reference
 * makes two (the products read the decayed values, as they would from memory). */
static float decay_dot(int n, float *row, const float *k, float decay)
{
    const int np = n & ~(STEP - 1);
    const __m256 vd = _mm256_set1_ps(decay);
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8 * j), vd);
            _mm256_storeu_ps(row + i + 8 * j, r);
            s[j] = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i + 8 * j), s[j]);
        }
    double sum = reduce4(s[0], s[1], s[2], s[3]);
    for (int i = np; i < n; i++) {
        row[i] *= decay;
        sum += (double)(row[i] * k[i]);
    }
    return (float)sum;
}

/* row += k * d (fused), then returns the updated row's dot with q in the float-dot order;
 * one pass, as above. */
static float mad_dot(int n, float *row, const float *k, float d, const float *q)
{
    const int np = n & ~(STEP - 1);
    const __m256 vd = _mm256_set1_ps(d);
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const int o = i + 8 * j;
            const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + o), vd, _mm256_loadu_ps(row + o));
            _mm256_storeu_ps(row + o, r);
            s[j] = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + o), s[j]);
        }
    double sum = reduce4(s[0], s[1], s[2], s[3]);
    for (int i = np; i < n; i++) {
        row[i] = fmaf(k[i], d, row[i]);
        sum += (double)(row[i] * q[i]);
    }
    return (float)sum;
}

void ssm_delta_step_avx2(int n, float *state, const float *q, const float *k, const float *v,
                         float decay, float beta, float scale_out, float *out)
{
    for (int j = 0; j < n; j++) { // row by row, as in ssm_delta_step_ref
        float *row = state + (size_t)j * (size_t)n;
        const float d = (v[j] - decay_dot(n, row, k, decay)) * beta;
        out[j] = mad_dot(n, row, k, d, q) * scale_out;
    }
}

/* One channel's state row through the scan; returns its dot with c. */
static float ssd_row(int n, float *row, const float *b, const float *c, float decay, float x_dt)
{
    const int np = n & ~(STEP - 1);
    const __m256 vd = _mm256_set1_ps(decay), vx = _mm256_set1_ps(x_dt);
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int i = 0; i < np; i += STEP)
        for (int j = 0; j < 4; j++) {
            const int o = i + 8 * j;
            const __m256 kept = _mm256_mul_ps(_mm256_loadu_ps(row + o), vd);
            const __m256 r = _mm256_add_ps(kept, _mm256_mul_ps(_mm256_loadu_ps(b + o), vx));
            _mm256_storeu_ps(row + o, r);
            s[j] = _mm256_fmadd_ps(r, _mm256_loadu_ps(c + o), s[j]);
        }
    float sum = reduce4(s[0], s[1], s[2], s[3]);
    for (int i = np; i < n; i++) {
        const float kept = row[i] * decay, added = b[i] * x_dt;
        row[i] = kept + added;
        sum = fmaf(row[i], c[i], sum);
    }
    return sum;
}

void ssm_ssd_step_avx2(int head_dim, int n, float *state, const float *x, const float *b,
                       const float *c, float decay, float dt, float *y)
{
    for (int i = 0; i < head_dim; i++)
        y[i] = ssd_row(n, state + (size_t)i * (size_t)n, b, c, decay, x[i] * dt);
}
