/* Pillow-compatible bilinear and bicubic resampling (see clip_prep.h). */
#include "engine/mtmd/clip_prep.h"

#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define PREC_BITS   22 // 32 bits - 8 for the pixel - 2 of headroom
#define SIZE_MAX_PX 65536u

/* One axis' filter: for output i, inputs bounds[2i] .. + bounds[2i+1] with k weights each. */
struct axis {
    int ksize;
    int *bounds;     // (2 * n_out)
    int32_t *weight; // (n_out * ksize) fixed point
};

static double tri(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's bicubic kernel (a = -0.5), radius 2. */
static double cubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

static int axis_init(struct axis *a, int n_in, int n_out, bool is_bicubic)
{
    const double scale = (double)n_in / n_out;
    const double fscale = scale < 1.0 ? 1.0 : scale;
    // the kernel's radius (1 for the triangle, 2 for the cubic), widened when shrinking
    const double support = fscale * (is_bicubic ? 2.0 : 1.0);
    a->ksize = (int)ceil(support) * 2 + 1;
    a->bounds = mem_alloc((size_t)n_out * 2 * sizeof(int));
    a->weight = mem_alloc((size_t)n_out * (size_t)a->ksize * sizeof(int32_t));
    double *w = mem_alloc((size_t)a->ksize * sizeof(double));
    if (!a->bounds || !a->weight || !w) {
        mem_free(w);
        return ERR_NOMEM;
    }
    for (int o = 0; o < n_out; o++) {
        const double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5);
        if (lo < 0) lo = 0;
        int hi = (int)(center + support + 0.5);
        if (hi > n_in) hi = n_in;
        const int cnt = hi - lo;
        double sum = 0.0;
        for (int x = 0; x < cnt; x++) {
            const double d = (x + lo - center + 0.5) / fscale;
            w[x] = is_bicubic ? cubic(d) : tri(d);
            sum += w[x];
        }
        for (int x = 0; x < a->ksize; x++) {
            double v = x < cnt && sum != 0.0 ? w[x] / sum : 0.0;
            if (x >= cnt) v = 0.0;
            // round half away from zero, then truncate, as Pillow does
            a->weight[(size_t)o * a->ksize + x] =
                (int32_t)(v * (double)(1 << PREC_BITS) + (v < 0 ? -0.5 : 0.5));
        }
        a->bounds[2 * o] = lo;
        a->bounds[2 * o + 1] = cnt;
    }
    mem_free(w);
    return ERR_OK;
}

static void axis_deinit(struct axis *a)
{
    mem_free(a->bounds);
    mem_free(a->weight);
}

static uint8_t clip8(int32_t v)
{
    v >>= PREC_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* Horizontal pass: (sw x h) -> (dw x h). */
static void pass_h(const uint8_t *src, int sw, int h, uint8_t *dst, int dw, const struct axis *a)
{
    for (int y = 0; y < h; y++)
        for (int o = 0; o < dw; o++) {
            const int lo = a->bounds[2 * o], cnt = a->bounds[2 * o + 1];
            const int32_t *k = a->weight + (size_t)o * a->ksize;
            int32_t acc[3] = {1 << (PREC_BITS - 1), 1 << (PREC_BITS - 1), 1 << (PREC_BITS - 1)};
            const uint8_t *p = src + ((size_t)y * sw + lo) * 3;
            for (int x = 0; x < cnt; x++, p += 3)
                for (int ch = 0; ch < 3; ch++)
                    acc[ch] += p[ch] * k[x];
            for (int ch = 0; ch < 3; ch++)
                dst[((size_t)y * dw + o) * 3 + ch] = clip8(acc[ch]);
        }
}

/* Vertical pass: (w x sh) -> (w x dh). */
static void pass_v(const uint8_t *src, int w, uint8_t *dst, int dh, const struct axis *a)
{
    const size_t row = (size_t)w * 3;
    for (int o = 0; o < dh; o++) {
        const int lo = a->bounds[2 * o], cnt = a->bounds[2 * o + 1];
        const int32_t *k = a->weight + (size_t)o * a->ksize;
        for (size_t i = 0; i < row; i++) {
            int32_t acc = 1 << (PREC_BITS - 1);
            for (int y = 0; y < cnt; y++)
                acc += src[(size_t)(lo + y) * row + i] * k[y];
            dst[(size_t)o * row + i] = clip8(acc);
        }
    }
}

static int resize(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t dw,
                  uint32_t dh, bool is_bicubic)
{
    if (!sw || !sh || !dw || !dh || sw > SIZE_MAX_PX || sh > SIZE_MAX_PX || dw > SIZE_MAX_PX ||
        dh > SIZE_MAX_PX)
        return ERR_INVALID;
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * sh * 3);
        return ERR_OK;
    }
    struct axis ah = {0}, av = {0};
    uint8_t *tmp = NULL;
    int rc = ERR_OK;
    if (sw != dw) rc = axis_init(&ah, (int)sw, (int)dw, is_bicubic);
    if (rc == ERR_OK && sh != dh) rc = axis_init(&av, (int)sh, (int)dh, is_bicubic);
    if (rc == ERR_OK && sw != dw && sh != dh) {
        tmp = mem_alloc((size_t)dw * sh * 3);
        if (!tmp) rc = ERR_NOMEM;
    }
    if (rc == ERR_OK) {
        if (sw != dw && sh != dh) {
            pass_h(src, (int)sw, (int)sh, tmp, (int)dw, &ah);
            pass_v(tmp, (int)dw, dst, (int)dh, &av);
        } else if (sw != dw) {
            pass_h(src, (int)sw, (int)sh, dst, (int)dw, &ah);
        } else {
            pass_v(src, (int)sw, dst, (int)dh, &av);
        }
    }
    mem_free(tmp);
    axis_deinit(&ah);
    axis_deinit(&av);
    return rc;
}

int clip_prep_resize(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t dw,
                     uint32_t dh)
{
    return resize(src, sw, sh, dst, dw, dh, false);
}

int clip_prep_resize_bicubic(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst,
                             uint32_t dw, uint32_t dh)
{
    return resize(src, sw, sh, dst, dw, dh, true);
}

int clip_prep_fit(const uint8_t *src, uint32_t sw, uint32_t sh, uint32_t side, uint8_t *dst)
{
    if (!sw || !sh || !side || sw > SIZE_MAX_PX || sh > SIZE_MAX_PX || side > SIZE_MAX_PX)
        return ERR_INVALID;
    if (sw == side && sh == side) {
        memcpy(dst, src, (size_t)side * side * 3);
        return ERR_OK;
    }
    // float arithmetic on purpose: the size rounding follows the reference's
    const float sx = (float)side / (float)sw, sy = (float)side / (float)sh;
    const float s = sx < sy ? sx : sy;
    uint32_t nw = (uint32_t)ceilf((float)sw * s), nh = (uint32_t)ceilf((float)sh * s);
    if (nw > side) nw = side;
    if (nh > side) nh = side;
    if (nw < 1) nw = 1;
    if (nh < 1) nh = 1;
    uint8_t *r = mem_alloc((size_t)nw * nh * 3);
    if (!r) return ERR_NOMEM;
    int rc = clip_prep_resize(src, sw, sh, r, nw, nh);
    if (rc == ERR_OK) {
        memset(dst, 0, (size_t)side * side * 3);
        const uint32_t ox = (side - nw) / 2, oy = (side - nh) / 2;
        for (uint32_t y = 0; y < nh; y++)
            memcpy(dst + ((size_t)(oy + y) * side + ox) * 3, r + (size_t)y * nw * 3,
                   (size_t)nw * 3);
    }
    mem_free(r);
    return rc;
}
