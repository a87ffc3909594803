/* Scalar reference kernels for the K-quant super-blocks (256 elements: Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K) and their Q8_K activations. Every format is decoded to one shape, struct kdec
 * (integer quants plus integer sub-block scales and mins), so dequantize and dot share one
 * formula per super-block: x = d * sc[j] * q - dmin * m[j].
 * Quantizing is round-to-nearest with a small per-sub-block scale search (a few candidate
 * scales, each refit by least squares), scales quantized against the super-block maximum,
 * then quants recomputed with the stored scales. No importance weighting, so files it writes
 * are somewhat worse than llama.cpp's (test_quants has the measured bounds); good enough for
 * activations and synthetic test models. */
#include "engine/quants/quants_ref.h"
#include "engine/quants/blocks.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

struct kdec {
    int8_t q[QK_K]; // element quants (signed for Q3_K/Q6_K, unsigned range for the others)
    int16_t sc[16]; // per sub-block integer scale
    int16_t m[16];  // per sub-block integer min (0 for Q3_K/Q6_K)
    float d, dmin;  // super-block scales
    int sub_len;    // 16 or 32 elements per sub-block
};

typedef void (*kdec_fn)(const void *blk, struct kdec *k);

static int nearest(float v)
{
    return (int)lrintf(v);
}

static int clamp_int(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- decoders (the ggml layouts) ---- */

static void q2_K_decode(const void *blk, struct kdec *k)
{
    const struct block_q2_K *b = blk;
    k->d = half_to_f32(b->d);
    k->dmin = half_to_f32(b->dmin);
    k->sub_len = 16;
    for (int j = 0; j < 16; j++) {
        k->sc[j] = b->scales[j] & 0xf;
        k->m[j] = b->scales[j] >> 4;
    }
    // element 128n + 32s + l sits in qs[32n + l] at bits 2s
    for (int e = 0; e < QK_K; e++)
        k->q[e] = (int8_t)((b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
}

static void q3_K_decode(const void *blk, struct kdec *k)
{
    const struct block_q3_K *b = blk;
    int8_t sc[16];
    k3_scales(b->scales, sc);
    k->d = half_to_f32(b->d);
    k->dmin = 0.0f;
    k->sub_len = 16;
    for (int j = 0; j < 16; j++) {
        k->sc[j] = sc[j];
        k->m[j] = 0;
    }
    // low 2 bits as Q2_K; the high bit of element 128n + 32s + l is bit 4n + s of hmask[l],
    // and a clear high bit means "minus 4"
    for (int e = 0; e < QK_K; e++) {
        int n = e / 128, s = (e % 128) / 32, l = e % 32;
        int lo = (b->qs[32 * n + l] >> (2 * s)) & 3;
        int hi = (b->hmask[l] >> (4 * n + s)) & 1;
        k->q[e] = (int8_t)(lo - (hi ? 0 : 4));
    }
}

static void k4_decode_scales(const uint8_t *scales, struct kdec *k)
{
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        k4_scale_min(j, scales, &sc, &m);
        k->sc[j] = sc;
        k->m[j] = m;
    }
    k->sub_len = 32;
}

static void q4_K_decode(const void *blk, struct kdec *k)
{
    const struct block_q4_K *b = blk;
    k->d = half_to_f32(b->d);
    k->dmin = half_to_f32(b->dmin);
    k4_decode_scales(b->scales, k);
    // 64-element chunk c: low nibbles of qs[32c..] then high nibbles
    for (int e = 0; e < QK_K; e++) {
        uint8_t byte = b->qs[32 * (e / 64) + e % 32];
        k->q[e] = (int8_t)((e % 64) < 32 ? byte & 0xf : byte >> 4);
    }
}

static void q5_K_decode(const void *blk, struct kdec *k)
{
    const struct block_q5_K *b = blk;
    k->d = half_to_f32(b->d);
    k->dmin = half_to_f32(b->dmin);
    k4_decode_scales(b->scales, k);
    // as Q4_K, plus the 5th bit of element e in qh[e % 32] at bit e / 32
    for (int e = 0; e < QK_K; e++) {
        uint8_t byte = b->qs[32 * (e / 64) + e % 32];
        int lo = (e % 64) < 32 ? byte & 0xf : byte >> 4;
        int hi = (b->qh[e % 32] >> (e / 32)) & 1;
        k->q[e] = (int8_t)(lo | (hi << 4));
    }
}

static void q6_K_decode(const void *blk, struct kdec *k)
{
    const struct block_q6_K *b = blk;
    k->d = half_to_f32(b->d);
    k->dmin = 0.0f;
    k->sub_len = 16;
    for (int j = 0; j < 16; j++) {
        k->sc[j] = b->scales[j];
        k->m[j] = 0;
    }
    // element 128n + 32s + l: low 4 bits from ql[64n + 32(s & 1) + l] (low nibble for s < 2),
    // high 2 bits from qh[32n + l] at bits 2s
    for (int e = 0; e < QK_K; e++) {
        int n = e / 128, s = (e % 128) / 32, l = e % 32;
        uint8_t byte = b->ql[64 * n + 32 * (s & 1) + l];
        int lo = s < 2 ? byte & 0xf : byte >> 4;
        int hi = (b->qh[32 * n + l] >> (2 * s)) & 3;
        k->q[e] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* ---- encoders (inverse of the decoders) ---- */

static void q2_K_encode(const struct kdec *k, void *blk)
{
    struct block_q2_K *b = blk;
    memset(b, 0, sizeof *b);
    b->d = f32_to_half(k->d);
    b->dmin = f32_to_half(k->dmin);
    for (int j = 0; j < 16; j++)
        b->scales[j] = (uint8_t)(k->sc[j] | (k->m[j] << 4));
    for (int e = 0; e < QK_K; e++)
        b->qs[32 * (e / 128) + e % 32] |= (uint8_t)(k->q[e] << (2 * ((e % 128) / 32)));
}

static void q3_K_encode(const struct kdec *k, void *blk)
{
    struct block_q3_K *b = blk;
    memset(b, 0, sizeof *b);
    b->d = f32_to_half(k->d);
    for (int j = 0; j < 16; j++) {
        int v = k->sc[j] + 32;
        b->scales[j % 8] |= (uint8_t)((v & 0xf) << (j < 8 ? 0 : 4));
        b->scales[8 + j % 4] |= (uint8_t)((v >> 4) << (2 * (j / 4)));
    }
    for (int e = 0; e < QK_K; e++) {
        int n = e / 128, s = (e % 128) / 32, l = e % 32;
        int v = k->q[e] + 4; // 0..7
        b->qs[32 * n + l] |= (uint8_t)((v & 3) << (2 * s));
        b->hmask[l] |= (uint8_t)((v >> 2) << (4 * n + s));
    }
}

static void k4_encode_scales(const struct kdec *k, uint8_t *q)
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)(k->sc[j] | ((k->sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)(k->m[j] | ((k->m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((k->sc[j + 4] & 0xf) | ((k->m[j + 4] & 0xf) << 4));
    }
}

static void q4_K_encode(const struct kdec *k, void *blk)
{
    struct block_q4_K *b = blk;
    memset(b, 0, sizeof *b);
    b->d = f32_to_half(k->d);
    b->dmin = f32_to_half(k->dmin);
    k4_encode_scales(k, b->scales);
    for (int e = 0; e < QK_K; e++)
        b->qs[32 * (e / 64) + e % 32] |= (uint8_t)(k->q[e] << ((e % 64) < 32 ? 0 : 4));
}

static void q5_K_encode(const struct kdec *k, void *blk)
{
    struct block_q5_K *b = blk;
    memset(b, 0, sizeof *b);
    b->d = f32_to_half(k->d);
    b->dmin = f32_to_half(k->dmin);
    k4_encode_scales(k, b->scales);
    for (int e = 0; e < QK_K; e++) {
        b->qs[32 * (e / 64) + e % 32] |= (uint8_t)((k->q[e] & 0xf) << ((e % 64) < 32 ? 0 : 4));
        b->qh[e % 32] |= (uint8_t)((k->q[e] >> 4) << (e / 32));
    }
}

static void q6_K_encode(const struct kdec *k, void *blk)
{
    struct block_q6_K *b = blk;
    memset(b, 0, sizeof *b);
    b->d = f32_to_half(k->d);
    for (int j = 0; j < 16; j++)
        b->scales[j] = (int8_t)k->sc[j];
    for (int e = 0; e < QK_K; e++) {
        int n = e / 128, s = (e % 128) / 32, l = e % 32;
        int v = k->q[e] + 32; // 0..63
        b->ql[64 * n + 32 * (s & 1) + l] |= (uint8_t)((v & 0xf) << (s < 2 ? 0 : 4));
        b->qh[32 * n + l] |= (uint8_t)((v >> 4) << (2 * s));
    }
}

/* ---- shared dequantize and dot ---- */

static void k_to_float(kdec_fn decode, size_t bsize, const void *x, float *y, int64_t n)
{
    struct kdec k;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        decode((const uint8_t *)x + (size_t)i * bsize, &k);
        for (int e = 0; e < QK_K; e++) {
            int j = e / k.sub_len;
            y[e] = (k.d * (float)k.sc[j]) * (float)k.q[e] - k.dmin * (float)k.m[j];
        }
    }
}

/* Against Q8_K: per super-block, d*dy * sum_j sc_j (q . qy)_j - dmin*dy * sum_j m_j sum(qy)_j,
 * the sums of qy taken from the activation's bsums. */
static void k_vec_dot(kdec_fn decode, size_t bsize, int64_t n, float *s, const void *x,
                      const void *y)
{
    const struct block_q8_K *a = y;
    struct kdec k;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        decode((const uint8_t *)x + (size_t)i * bsize, &k);
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < QK_K / k.sub_len; j++) {
            int32_t dot = 0, ysum = 0;
            for (int e = j * k.sub_len; e < (j + 1) * k.sub_len; e++)
                dot += k.q[e] * a[i].qs[e];
            for (int h = 0; h < k.sub_len / 16; h++)
                ysum += a[i].bsums[j * k.sub_len / 16 + h];
            sumi += k.sc[j] * dot;
            summ += k.m[j] * ysum;
        }
        sum += (k.d * a[i].d) * (float)sumi - (k.dmin * a[i].d) * (float)summ;
    }
    *s = sum;
}

/* ---- quantizers ---- */

struct kshape {
    int sub_len;    // 16 or 32
    int q_lo, q_hi; // quant range
    int sc_max;     // largest integer scale (and min)
    bool has_min;   // asymmetric (scale + min) or symmetric (signed scale)
};

/* Fits x ~ off + s * q (q integer in [q_lo, q_hi]) for one sub-block: candidate scales
 * around the range-derived one, each followed by a least-squares refit of (off, s) for its
 * quants; the candidate with the smallest squared error wins. off stays 0 for symmetric
 * formats and <= 0 for the others (their min is stored as a non-negative amount subtracted). */
static void fit_sub_block(const float *x, int n, const struct kshape *sh, float *s_out,
                          float *off_out)
{
    float lo = 0.0f, hi = x[0], amax = 0.0f, max = 0.0f;
    for (int e = 0; e < n; e++) {
        lo = x[e] < lo ? x[e] : lo;
        hi = x[e] > hi ? x[e] : hi;
        if (fabsf(x[e]) > amax) {
            amax = fabsf(x[e]);
            max = x[e];
        }
    }
    float s0 = sh->has_min ? (hi > lo ? (hi - lo) / (float)sh->q_hi : 0.0f) : max / (float)sh->q_lo;
    float off0 = sh->has_min ? lo : 0.0f;
    *s_out = s0;
    *off_out = off0;
    if (s0 == 0.0f) return;
    float best = INFINITY;
    for (int i = -4; i <= 4; i++) {
        float s = s0 * (1.0f + 0.04f * (float)i);
        double sq = 0, sqq = 0, sx = 0, sqx = 0;
        int q[32];
        for (int e = 0; e < n; e++) {
            q[e] = clamp_int(nearest((x[e] - off0) / s), sh->q_lo, sh->q_hi);
            sq += q[e];
            sqq += (double)q[e] * q[e];
            sx += x[e];
            sqx += (double)q[e] * x[e];
        }
        double det = n * sqq - sq * sq, fs = s, foff = 0.0;
        if (sh->has_min && det > 0) {
            fs = (n * sqx - sq * sx) / det;
            foff = (sx - fs * sq) / n;
        }
        if (!sh->has_min || det <= 0 || foff > 0) {
            foff = 0.0;
            fs = sqq > 0 ? sqx / sqq : s;
        }
        double err = 0;
        for (int e = 0; e < n; e++) {
            double d = foff + fs * q[e] - x[e];
            err += d * d;
        }
        if (err < best && fs != 0.0) {
            best = (float)err;
            *s_out = (float)fs;
            *off_out = (float)foff;
        }
    }
}

/* Asymmetric formats: x ~ d*sc*q - dmin*m, q in [0, q_hi]. */
static void k_quantize_asym(const float *x, const struct kshape *sh, struct kdec *k)
{
    float scale[16], minv[16], max_scale = 0.0f, max_min = 0.0f;
    int n_sub = QK_K / sh->sub_len;
    for (int j = 0; j < n_sub; j++) {
        float off;
        fit_sub_block(x + j * sh->sub_len, sh->sub_len, sh, &scale[j], &off);
        scale[j] = scale[j] > 0.0f ? scale[j] : 0.0f;
        minv[j] = -off;
        max_scale = scale[j] > max_scale ? scale[j] : max_scale;
        max_min = minv[j] > max_min ? minv[j] : max_min;
    }
    k->d = half_to_f32(f32_to_half(max_scale / (float)sh->sc_max));
    k->dmin = half_to_f32(f32_to_half(max_min / (float)sh->sc_max));
    for (int j = 0; j < n_sub; j++) {
        k->sc[j] = (int16_t)(k->d > 0 ? clamp_int(nearest(scale[j] / k->d), 0, sh->sc_max) : 0);
        k->m[j] = (int16_t)(k->dmin > 0 ? clamp_int(nearest(minv[j] / k->dmin), 0, sh->sc_max) : 0);
        float ds = k->d * (float)k->sc[j], dm = k->dmin * (float)k->m[j];
        for (int e = j * sh->sub_len; e < (j + 1) * sh->sub_len; e++)
            k->q[e] = (int8_t)(ds > 0 ? clamp_int(nearest((x[e] + dm) / ds), 0, sh->q_hi) : 0);
    }
}

/* Symmetric formats: x ~ d*sc*q, q in [q_lo, q_hi]; the extreme scale of the super-block maps
 * to the negative end of the integer scale range, as ggml does. */
static void k_quantize_sym(const float *x, const struct kshape *sh, struct kdec *k)
{
    float scale[16], max_scale = 0.0f;
    for (int j = 0; j < 16; j++) {
        float off;
        fit_sub_block(x + j * 16, 16, sh, &scale[j], &off);
        max_scale = fabsf(scale[j]) > fabsf(max_scale) ? scale[j] : max_scale;
    }
    // integer scales in [-sc_max-1, sc_max]
    k->d = half_to_f32(f32_to_half(max_scale / (float)(-sh->sc_max - 1)));
    k->dmin = 0.0f;
    for (int j = 0; j < 16; j++) {
        k->sc[j] =
            (int16_t)(k->d != 0 ? clamp_int(nearest(scale[j] / k->d), -sh->sc_max - 1, sh->sc_max)
                                : 0);
        k->m[j] = 0;
        float ds = k->d * (float)k->sc[j];
        for (int e = j * 16; e < (j + 1) * 16; e++)
            k->q[e] = (int8_t)(ds != 0 ? clamp_int(nearest(x[e] / ds), sh->q_lo, sh->q_hi) : 0);
    }
}

typedef void (*kenc_fn)(const struct kdec *k, void *blk);

static void k_from_float(const struct kshape *sh, kenc_fn encode, size_t bsize, const float *x,
                         void *y, int64_t n)
{
    struct kdec k;
    k.sub_len = sh->sub_len;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        if (sh->has_min)
            k_quantize_asym(x, sh, &k);
        else
            k_quantize_sym(x, sh, &k);
        encode(&k, (uint8_t *)y + (size_t)i * bsize);
    }
}

static const struct kshape shape_q2_K = {16, 0, 3, 15, true};
static const struct kshape shape_q3_K = {16, -4, 3, 31, false};
static const struct kshape shape_q4_K = {32, 0, 15, 63, true};
static const struct kshape shape_q5_K = {32, 0, 31, 63, true};
static const struct kshape shape_q6_K = {16, -32, 31, 127, false};

#define K_ENTRY_POINTS(ty)                                                                         \
    void ty##_to_float_ref(const void *x, float *y, int64_t n)                                     \
    {                                                                                              \
        k_to_float(ty##_decode, sizeof(struct block_##ty), x, y, n);                               \
    }                                                                                              \
    void ty##_from_float_ref(const float *x, void *y, int64_t n)                                   \
    {                                                                                              \
        k_from_float(&shape_##ty, ty##_encode, sizeof(struct block_##ty), x, y, n);                \
    }                                                                                              \
    void ty##_vec_dot_ref(int64_t n, float *s, const void *x, const void *y)                       \
    {                                                                                              \
        k_vec_dot(ty##_decode, sizeof(struct block_##ty), n, s, x, y);                             \
    }

K_ENTRY_POINTS(q2_K)
K_ENTRY_POINTS(q3_K)
K_ENTRY_POINTS(q4_K)
K_ENTRY_POINTS(q5_K)
K_ENTRY_POINTS(q6_K)

/* ---- Q8_K activations ---- */

void q8_K_to_float_ref(const void *x, float *y, int64_t n)
{
    const struct block_q8_K *b = x;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K)
        for (int e = 0; e < QK_K; e++)
            y[e] = b[i].d * (float)b[i].qs[e];
}

/* As ggml: the extreme value maps to -127 (so q stays in [-127, 127]), round to nearest even. */
void q8_K_from_float_ref(const float *x, void *y, int64_t n)
{
    struct block_q8_K *b = y;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int e = 0; e < QK_K; e++)
            if (fabsf(x[e]) > amax) {
                amax = fabsf(x[e]);
                max = x[e];
            }
        memset(b[i].bsums, 0, sizeof b[i].bsums);
        if (amax == 0.0f) {
            b[i].d = 0.0f;
            memset(b[i].qs, 0, sizeof b[i].qs);
            continue;
        }
        float iscale = -127.0f / max;
        for (int e = 0; e < QK_K; e++) {
            b[i].qs[e] = (int8_t)clamp_int(nearest(iscale * x[e]), -127, 127);
            b[i].bsums[e / 16] = (int16_t)(b[i].bsums[e / 16] + b[i].qs[e]);
        }
        b[i].d = 1.0f / iscale;
    }
}
