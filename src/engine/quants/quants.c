/* The kernel table: one row per tensor type, a scalar-reference table and an AVX2 table, and
 * the one place that picks between them (quant_init). Kernels live in quants_ref.c,
 * quants_k_ref.c and the *_avx2.c files. */
#include "engine/quants/quants.h"
#include "engine/cpufeat.h"
#include "engine/quants/quants_internal.h"
#include "util/checked.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

#define ROW_REF(id, nm, blen, bbytes, dot, pre)                                                    \
    [id] = {.name = nm,                                                                            \
            .block_len = blen,                                                                     \
            .block_bytes = bbytes,                                                                 \
            .dot_type = dot,                                                                       \
            .to_float = pre##_to_float_ref,                                                        \
            .from_float = pre##_from_float_ref,                                                    \
            .vec_dot = pre##_vec_dot_ref,                                                          \
            .vec_dot_tile = NULL}

#define ROW_AVX2(id, nm, blen, bbytes, dot, pre)                                                   \
    [id] = {.name = nm,                                                                            \
            .block_len = blen,                                                                     \
            .block_bytes = bbytes,                                                                 \
            .dot_type = dot,                                                                       \
            .to_float = pre##_to_float_ref,                                                        \
            .from_float = pre##_from_float_ref,                                                    \
            .vec_dot = pre##_vec_dot_avx2,                                                         \
            .vec_dot_tile = pre##_vec_dot_tile_avx2}

// Activation-only formats: no vec_dot of their own.
#define ROW_ACT(id, nm, blen, bbytes, pre)                                                         \
    [id] = {.name = nm,                                                                            \
            .block_len = blen,                                                                     \
            .block_bytes = bbytes,                                                                 \
            .dot_type = id,                                                                        \
            .to_float = pre##_to_float_ref,                                                        \
            .from_float = pre##_from_float_ref,                                                    \
            .vec_dot = NULL,                                                                       \
            .vec_dot_tile = NULL}

/* Dot types, as ggml pairs them: integer dots against 8-bit activations (Q8_1 where the weight
 * has a min, so the min term needs the activation block sum; Q8_K with its 16-element sums for
 * super-blocks), float weights against F32 activations. */
#define TYPE_ROWS(ROW)                                                                             \
    ROW(QUANT_F32, "f32", 1, 4, QUANT_F32, f32), ROW(QUANT_F16, "f16", 1, 2, QUANT_F32, f16),      \
        ROW(QUANT_BF16, "bf16", 1, 2, QUANT_F32, bf16),                                            \
        ROW(QUANT_Q4_0, "q4_0", QK4_0, sizeof(struct block_q4_0), QUANT_Q8_0, q4_0),               \
        ROW(QUANT_Q4_1, "q4_1", QK4_1, sizeof(struct block_q4_1), QUANT_Q8_1, q4_1),               \
        ROW(QUANT_Q5_0, "q5_0", QK5_0, sizeof(struct block_q5_0), QUANT_Q8_0, q5_0),               \
        ROW(QUANT_Q5_1, "q5_1", QK5_1, sizeof(struct block_q5_1), QUANT_Q8_1, q5_1),               \
        ROW(QUANT_Q8_0, "q8_0", QK8_0, sizeof(struct block_q8_0), QUANT_Q8_0, q8_0),               \
        ROW(QUANT_Q2_K, "q2_K", QK_K, sizeof(struct block_q2_K), QUANT_Q8_K, q2_K),                \
        ROW(QUANT_Q3_K, "q3_K", QK_K, sizeof(struct block_q3_K), QUANT_Q8_K, q3_K),                \
        ROW(QUANT_Q4_K, "q4_K", QK_K, sizeof(struct block_q4_K), QUANT_Q8_K, q4_K),                \
        ROW(QUANT_Q5_K, "q5_K", QK_K, sizeof(struct block_q5_K), QUANT_Q8_K, q5_K),                \
        ROW(QUANT_Q6_K, "q6_K", QK_K, sizeof(struct block_q6_K), QUANT_Q8_K, q6_K),                \
        ROW_ACT(QUANT_Q8_1, "q8_1", QK8_1, sizeof(struct block_q8_1), q8_1),                       \
        ROW_ACT(QUANT_Q8_K, "q8_K", QK_K, sizeof(struct block_q8_K), q8_K)

static const struct quant_traits table_ref[QUANT_TYPE_MAX] = {TYPE_ROWS(ROW_REF)};

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_AVX2_KERNELS 1
static const struct quant_traits table_avx2[QUANT_TYPE_MAX] = {TYPE_ROWS(ROW_AVX2)};
#else
#define HAVE_AVX2_KERNELS 0
#endif

/* Set once by quant_init before worker threads start, read-only afterwards. */
static const struct quant_traits *table_active = table_ref;
static bool is_initialized;

static bool cpu_has_avx2(void)
{
#if HAVE_AVX2_KERNELS
    return cpufeat_has_avx2_fma_f16c();
#else
    return false;
#endif
}

void quant_init(void)
{
    if (is_initialized) return;
    is_initialized = true;
    const char *no_simd = getenv("LLAMAPI_NO_SIMD");
    if (no_simd && strcmp(no_simd, "1") == 0) return;
#if HAVE_AVX2_KERNELS
    if (cpu_has_avx2()) table_active = table_avx2;
#endif
}

static const struct quant_traits *lookup(const struct quant_traits *table, uint32_t type)
{
    if (type >= QUANT_TYPE_MAX || table[type].name == NULL) return NULL;
    return &table[type];
}

const struct quant_traits *quant_traits_of(uint32_t type)
{
    return lookup(table_active, type);
}

const struct quant_traits *quant_traits_ref(uint32_t type)
{
    return lookup(table_ref, type);
}

int quant_row_bytes(uint32_t type, int64_t n, size_t *out)
{
    const struct quant_traits *t = lookup(table_ref, type);
    if (!t || n < 0 || n % t->block_len != 0) return ERR_INVALID;
    size_t bytes;
    if ((uint64_t)(n / t->block_len) > SIZE_MAX ||
        !size_mul((size_t)(n / t->block_len), t->block_bytes, &bytes))
        return ERR_LIMIT;
    *out = bytes;
    return ERR_OK;
}

bool quant_using_avx2(void)
{
#if HAVE_AVX2_KERNELS
    return table_active == table_avx2;
#else
    return false;
#endif
}
