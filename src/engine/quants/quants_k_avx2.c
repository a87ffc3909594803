#include "engine/quants/quants_internal.h"
#define STUB(ty)                                                                                   \
    void ty##_vec_dot_avx2(int64_t n, float *s, const void *x, const void *y)                      \
    {                                                                                              \
        ty##_vec_dot_ref(n, s, x, y);                                                              \
    }                                                                                              \
    void ty##_vec_dot_tile_avx2(const struct quant_tile *t)                                        \
    {                                                                                              \
        for (int r = 0; r < t->n_rows; r++)                                                        \
            for (int c = 0; c < t->n_cols; c++)                                                    \
                ty##_vec_dot_ref(t->n, &t->s[c * t->s_stride + r],                                 \
                                 (const uint8_t *)t->x + r * t->x_stride,                          \
                                 (const uint8_t *)t->y + c * t->y_stride);                         \
    }
STUB(q2_K)
STUB(q3_K)
STUB(q4_K)
STUB(q5_K)
STUB(q6_K)
