/* The kernel tables: one row per tensor type, a scalar-reference table and the SIMD tables
 * (AVX2, AVX2 with AVX-VNNI, AVX-512; NEON, with dotprod, with i8mm), filled for the sets this
 * CPU runs; quant_select makes the set engine/kernels.c chose the active one. Kernels live in
 * quants_ref.c, quants_k_ref.c, quants_repack.c and the x86/ and arm/ files. */
#include "engine/quants/quants.h"
#include "engine/cpufeat.h"
#include "engine/quants/blocks.h"
#include "engine/quants/quants_ref.h"
#include "engine/quants/quants_repack.h"
#include "util/checked.h"
#include "util/err.h"

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
        ROW(QUANT_IQ4_NL, "iq4_nl", QK4_NL, sizeof(struct block_iq4_nl), QUANT_Q8_0, iq4_nl),      \
        ROW(QUANT_IQ4_XS, "iq4_xs", QK_K, sizeof(struct block_iq4_xs), QUANT_Q8_K, iq4_xs),        \
        ROW(QUANT_MXFP4, "mxfp4", QK_MXFP4, sizeof(struct block_mxfp4), QUANT_Q8_0, mxfp4),        \
        ROW_ACT(QUANT_Q8_1, "q8_1", QK8_1, sizeof(struct block_q8_1), q8_1),                       \
        ROW_ACT(QUANT_Q8_K, "q8_K", QK_K, sizeof(struct block_q8_K), q8_K),                        \
        ROW_ACT(QUANT_Q8_0_S, "q8_0_s", QK8_0, sizeof(struct block_q8_0s), q8_0s),                 \
        ROW_R16(QUANT_Q8_0_R16, "q8_0_r16", QK8_0, sizeof(struct block_q8_0), QUANT_Q8_0_S),       \
        ROW_R16(QUANT_Q4_0_R16, "q4_0_r16", QK4_0, sizeof(struct block_q4_0), QUANT_Q8_0_S),       \
        ROW_R16(QUANT_Q5_0_R16, "q5_0_r16", QK5_0, sizeof(struct block_q5_0), QUANT_Q8_0_S),       \
        ROW_R16(QUANT_Q4_K_R16, "q4_K_r16", QK_K, sizeof(struct block_q4_K), QUANT_Q8_K),          \
        ROW_R16(QUANT_Q6_K_R16, "q6_K_r16", QK_K, sizeof(struct block_q6_K), QUANT_Q8_K)

/* Repacked weights: no single-row kernels; the tile kernels are patched into the tables
 * whose kernel set has them (quant_repack_type offers a type only then). */
#define ROW_R16(id, nm, blen, bbytes, dot)                                                         \
    [id] = {.name = nm,                                                                            \
            .block_len = blen,                                                                     \
            .block_bytes = bbytes,                                                                 \
            .dot_type = dot,                                                                       \
            .rows_interleaved = 16}

static const struct quant_traits table_ref[QUANT_TYPE_MAX] = {TYPE_ROWS(ROW_REF)};

#if defined(__x86_64__) || defined(__i386__)
#include "engine/quants/x86/quants_x86.h"
#define HAVE_AVX2_KERNELS 1
/* Completed by quant_select (the SIMD activation quantizers) before any reader exists. */
static struct quant_traits table_avx2[QUANT_TYPE_MAX] = {TYPE_ROWS(ROW_AVX2)};
/* The AVX2 table with the AVX-VNNI dots patched in; filled by quant_select. */
static struct quant_traits table_vnni[QUANT_TYPE_MAX];
/* The AVX-512 table: the AVX2 one with the AVX-512 kernels patched in; filled by quant_select. */
static struct quant_traits table_avx512[QUANT_TYPE_MAX];
#else
#define HAVE_AVX2_KERNELS 0
#endif

/* Set once by quant_select before worker threads start, read-only afterwards. */
static const struct quant_traits *table_active = table_ref;
static const char *simd_name = "scalar";
static enum quant_simd simd_active = QUANT_SIMD_SCALAR;
static struct cpufeat_caps caps_hw; // the sets this CPU runs: the tables filled

#if defined(__aarch64__)
/* ARM: a NEON table, the same with sdot (dotprod), and that with smmla Q4_0 tiles (i8mm).
 * Float and 32-element kernels give the AVX2 kernels' bits, K-quants the references'. */
#include "engine/quants/arm/quants_arm.h"
#define HAVE_ARM_KERNELS 1
#define ROW_ARM(id, nm, blen, bbytes, dot, pre, dot_fn)                                            \
    [id] = {.name = nm,                                                                            \
            .block_len = blen,                                                                     \
            .block_bytes = bbytes,                                                                 \
            .dot_type = dot,                                                                       \
            .to_float = pre##_to_float_ref,                                                        \
            .from_float = pre##_from_float_ref,                                                    \
            .vec_dot = dot_fn,                                                                     \
            .vec_dot_tile = NULL}
#define ROW_NEON(id, nm, blen, bbytes, dot, pre)                                                   \
    ROW_ARM(id, nm, blen, bbytes, dot, pre, pre##_vec_dot_neon)
#define ROW_DOTPROD(id, nm, blen, bbytes, dot, pre)                                                \
    ROW_ARM(id, nm, blen, bbytes, dot, pre, pre##_vec_dot_dotprod)
static struct quant_traits table_neon[QUANT_TYPE_MAX] = {TYPE_ROWS(ROW_NEON)};
static struct quant_traits table_dotprod[QUANT_TYPE_MAX] = {TYPE_ROWS(ROW_DOTPROD)};
static struct quant_traits table_i8mm[QUANT_TYPE_MAX]; // filled by fill_arm
static quant_from_float_fn arm_q8_0_act, arm_q8_1_act; // NULL: the references

static void fill_arm(void)
{
    table_neon[QUANT_Q8_K].from_float = q8_K_from_float_neon;
    table_dotprod[QUANT_Q8_K].from_float = q8_K_from_float_dotprod;
#define ARM_TILES(ty, id)                                                                          \
    table_neon[id].vec_dot_tile = ty##_vec_dot_tile_neon;                                          \
    table_dotprod[id].vec_dot_tile = ty##_vec_dot_tile_dotprod
    ARM_TILES(f32, QUANT_F32);
    ARM_TILES(f16, QUANT_F16);
    ARM_TILES(bf16, QUANT_BF16);
    ARM_TILES(q4_0, QUANT_Q4_0);
    ARM_TILES(q4_1, QUANT_Q4_1);
    ARM_TILES(q5_0, QUANT_Q5_0);
    ARM_TILES(q5_1, QUANT_Q5_1);
    ARM_TILES(q8_0, QUANT_Q8_0);
    ARM_TILES(iq4_nl, QUANT_IQ4_NL);
    ARM_TILES(iq4_xs, QUANT_IQ4_XS);
    ARM_TILES(mxfp4, QUANT_MXFP4);
#undef ARM_TILES
    memcpy(table_i8mm, table_dotprod, sizeof table_i8mm);
    table_i8mm[QUANT_Q4_0].vec_dot_tile = q4_0_vec_dot_tile_i8mm;
}
#else
#define HAVE_ARM_KERNELS 0
#endif

#if HAVE_AVX2_KERNELS
static void patch_vnni(uint32_t type, quant_vec_dot_fn dot, quant_vec_dot_tile_fn tile)
{
    table_vnni[type].vec_dot = dot;
    table_vnni[type].vec_dot_tile = tile;
}

static void patch_avx512(uint32_t type, quant_vec_dot_fn dot, quant_vec_dot_tile_fn tile, int rows,
                         int cols)
{
    if (dot) table_avx512[type].vec_dot = dot;
    table_avx512[type].vec_dot_tile = tile;
    table_avx512[type].tile_rows = rows;
    table_avx512[type].tile_cols = cols;
}

/* The AVX2 table with the repacked Q8_0/Q4_0/Q5_0/Q4_K tiles: Q8_0_R16 and Q5_0_R16 16 rows x 3
 * tokens (8 float chains per output fill the registers), Q4_0_R16 and Q4_K_R16 32 x 4 (2 x 4
 * int32 and float accumulators); the IQ types' own kernels; row-pair kernels in the file's
 * layout for the types (or shapes) not repacked; F16 two rows per zmm, 8 x 48 over a panel
 * of converted rows; Q6_K_R16 as
 * Q4_K_R16, 32 x 4; BF16 vdpbf16ps kernels where the CPU has AVX512_BF16. Zmm ports of the
 * F32 tiles and Q2_K measured no faster on Sapphire Rapids (512-bit operations issue on two
 * ports, 256-bit ones on three), so those keep the AVX2 kernels. */
static void fill_avx512(bool has_bf16)
{
    memcpy(table_avx512, table_avx2, sizeof table_avx512);
    patch_avx512(QUANT_Q8_0_R16, NULL, q8_0_r16_tile_avx512, 16, 3);
    patch_avx512(QUANT_Q4_0_R16, NULL, q4_0_r16_tile_avx512, 32, 4);
    patch_avx512(QUANT_Q5_0_R16, NULL, q5_0_r16_tile_avx512, 16, 3);
    patch_avx512(QUANT_Q4_K_R16, NULL, q4_K_r16_tile_avx512, 32, 4);
    patch_avx512(QUANT_Q6_K_R16, NULL, q6_K_r16_tile_avx512, 32, 4); // x86/quants_k_avx512.c
    table_avx512[QUANT_Q8_0_S].from_float = q8_0s_from_float_avx512;
    patch_avx512(QUANT_IQ4_NL, iq4_nl_vec_dot_avx512, iq4_nl_vec_dot_tile_avx512, 0, 0);
    patch_avx512(QUANT_IQ4_XS, iq4_xs_vec_dot_avx512, iq4_xs_vec_dot_tile_avx512, 0, 0);
    patch_avx512(QUANT_MXFP4, mxfp4_vec_dot_avx512, mxfp4_vec_dot_tile_avx512, 0, 0);
    // Row-pair VNNI kernels in the file's layout (x86/quants_pair_avx512.c), the AVX2 bits.
    patch_avx512(QUANT_Q4_1, q4_1_vec_dot_avx512, q4_1_vec_dot_tile_avx512, 4, 8);
    patch_avx512(QUANT_Q5_0, q5_0_vec_dot_avx512, q5_0_vec_dot_tile_avx512, 4, 8);
    patch_avx512(QUANT_Q5_1, q5_1_vec_dot_avx512, q5_1_vec_dot_tile_avx512, 4, 8);
    patch_avx512(QUANT_Q3_K, q3_K_vec_dot_avx512, q3_K_vec_dot_tile_avx512, 0, 0);
    patch_avx512(QUANT_Q5_K, q5_K_vec_dot_avx512, q5_K_vec_dot_tile_avx512, 0, 0);
    // F16: two rows per zmm, each half the AVX2 lane arithmetic (x86/quants_f16_avx512.c).
    patch_avx512(QUANT_F16, NULL, f16_vec_dot_tile_avx512, 8, F16_TILE_COLS);
    // BF16 with vdpbf16ps where the CPU has it: the activations become BF16, as the
    // reference's (x86/quants_bf16_avx512.c); else the AVX2 kernel against F32 activations.
    if (has_bf16) {
        patch_avx512(QUANT_BF16, bf16_vec_dot_avx512bf16, bf16_vec_dot_tile_avx512bf16, 8, 6);
        table_avx512[QUANT_BF16].dot_type = QUANT_BF16;
        table_avx512[QUANT_BF16].from_float = bf16_from_float_avx512;
    }
}
#endif

#if HAVE_AVX2_KERNELS
/* The x86 tables of the sets hw runs. */
static void fill_x86(const struct cpufeat_caps *hw)
{
    if (hw->has_avx2) {
        table_avx2[QUANT_Q8_0].from_float = q8_0_from_float_avx2;
        table_avx2[QUANT_Q8_1].from_float = q8_1_from_float_avx2;
        table_avx2[QUANT_Q8_K].from_float = q8_K_from_float_avx2;
        // Q4_0 matrices repacked 16 rows at a time: 8 rows per maddubs (x86/quants_r16_avx2.c).
        table_avx2[QUANT_Q4_0_R16].vec_dot_tile = q4_0_r16_tile_avx2;
        table_avx2[QUANT_Q4_0_R16].tile_rows = 16;
        table_avx2[QUANT_Q4_0_R16].tile_cols = 4;
        table_avx2[QUANT_Q8_0_S].from_float = q8_0s_from_float_avx2; // that tile's activations
    }
    if (hw->has_avx2 && hw->has_avx_vnni) {
        memcpy(table_vnni, table_avx2, sizeof table_vnni);
        patch_vnni(QUANT_Q4_0, q4_0_vec_dot_vnni, q4_0_vec_dot_tile_vnni);
        patch_vnni(QUANT_Q4_1, q4_1_vec_dot_vnni, q4_1_vec_dot_tile_vnni);
        patch_vnni(QUANT_Q5_0, q5_0_vec_dot_vnni, q5_0_vec_dot_tile_vnni);
        patch_vnni(QUANT_Q5_1, q5_1_vec_dot_vnni, q5_1_vec_dot_tile_vnni);
        patch_vnni(QUANT_Q8_0, q8_0_vec_dot_vnni, q8_0_vec_dot_tile_vnni);
    }
    if (hw->has_avx2 && hw->has_avx512) fill_avx512(hw->has_avx512_bf16);
}
#endif

/* The table of set, or NULL when this build has none or the CPU cannot run it. */
static const struct quant_traits *table_of(enum quant_simd set)
{
    switch (set) {
    case QUANT_SIMD_SCALAR:
        return table_ref;
#if HAVE_AVX2_KERNELS
    case QUANT_SIMD_AVX2:
        return caps_hw.has_avx2 ? table_avx2 : NULL;
    case QUANT_SIMD_AVX2_VNNI:
        return caps_hw.has_avx2 && caps_hw.has_avx_vnni ? table_vnni : NULL;
    case QUANT_SIMD_AVX512:
        return caps_hw.has_avx2 && caps_hw.has_avx512 ? table_avx512 : NULL;
#endif
#if HAVE_ARM_KERNELS
    case QUANT_SIMD_NEON:
        return caps_hw.has_neon ? table_neon : NULL;
    case QUANT_SIMD_NEON_DOTPROD:
        return caps_hw.has_dotprod ? table_dotprod : NULL;
    case QUANT_SIMD_NEON_I8MM:
        return caps_hw.has_i8mm ? table_i8mm : NULL;
#endif
    default:
        return NULL;
    }
}

static const char *name_of(enum quant_simd set)
{
    static const char *const names[] = {
        [QUANT_SIMD_SCALAR] = "scalar",       [QUANT_SIMD_AVX2] = "avx2",
        [QUANT_SIMD_AVX2_VNNI] = "avx2+vnni", [QUANT_SIMD_AVX512] = "avx512",
        [QUANT_SIMD_NEON] = "neon",           [QUANT_SIMD_NEON_DOTPROD] = "neon+dotprod",
        [QUANT_SIMD_NEON_I8MM] = "neon+i8mm",
    };
    return names[set];
}

void quant_select(const struct cpufeat_caps *hw, enum quant_simd set)
{
    caps_hw = *hw;
#if HAVE_AVX2_KERNELS
    fill_x86(hw);
#endif
#if HAVE_ARM_KERNELS
    fill_arm();
#endif
    const struct quant_traits *table = table_of(set);
    if (!table) return; // a set the CPU lacks: keep the references
    table_active = table;
    simd_name = name_of(set);
    simd_active = set;
#if HAVE_ARM_KERNELS
    if (set != QUANT_SIMD_SCALAR) { // the same bytes as the reference, every level
        arm_q8_0_act = q8_0_activations_neon;
        arm_q8_1_act = q8_1_activations_neon;
    }
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
    return HAVE_AVX2_KERNELS && table_active != table_ref;
}

bool quant_follows_avx2(void)
{
    return table_active != table_ref; // every SIMD set mirrors the AVX2 arithmetic
}

const struct quant_traits *quant_traits_simd(uint32_t type, enum quant_simd simd)
{
    const struct quant_traits *table = table_of(simd);
    return table ? lookup(table, type) : NULL;
}

enum quant_simd quant_simd_active(void)
{
    return simd_active;
}

uint32_t quant_repack_type(uint32_t type, int64_t n_out, int64_t n_in)
{
    const uint32_t to = quant_r16_packed_type(type);
    const struct quant_traits *t = lookup(table_active, to);
    if (to == type || !t || !t->vec_dot_tile || n_out <= 0 || n_out % t->rows_interleaved != 0 ||
        n_in <= 0 || n_in % t->block_len != 0)
        return type;
    return to;
}

int quant_repack(uint32_t type, const void *src, void *dst, int64_t n_out, int64_t n_in)
{
    const uint32_t to = quant_repack_type(type, n_out, n_in);
    return to == type ? ERR_INVALID : quant_r16_repack(to, src, dst, n_out, n_in);
}

int quant_get_row(uint32_t type, const void *matrix, int64_t row, int64_t n, float *out)
{
    const uint32_t base = quant_r16_base_type(type);
    const struct quant_traits *tr = quant_traits_of(base);
    size_t row_bytes;
    if (!tr || !tr->to_float || row < 0 || quant_row_bytes(base, n, &row_bytes) != ERR_OK)
        return ERR_INVALID;
    if (base == type) {
        tr->to_float((const uint8_t *)matrix + (size_t)row * row_bytes, out, n);
        return ERR_OK;
    }
    // a group of g rows takes g rows' bytes, block after block, each g rows' blocks
    const int64_t g = quant_traits_ref(type)->rows_interleaved;
    const uint8_t *group = (const uint8_t *)matrix + (size_t)(row / g * g) * row_bytes;
    uint8_t blk[sizeof(struct block_q6_K)]; // the largest of the blocks (all packed)
    _Static_assert(sizeof(struct block_q4_K) <= sizeof blk &&
                       sizeof(struct block_q8_0) <= sizeof blk,
                   "block buffer");
    for (int64_t b = 0; b < n / tr->block_len; b++) {
        quant_r16_unpack_block(type, group + (size_t)(b * g) * tr->block_bytes, (int)(row % g),
                               blk);
        tr->to_float(blk, out + b * tr->block_len, tr->block_len);
    }
    return ERR_OK;
}

const char *quant_simd_name(void)
{
    return simd_name;
}

void quant_q8_0_activations(const float *x, void *y, int64_t n)
{
#if HAVE_ARM_KERNELS
    if (arm_q8_0_act) {
        arm_q8_0_act(x, y, n);
        return;
    }
#endif
#if HAVE_AVX2_KERNELS
    if (quant_using_avx2()) {
        q8_0_activations_avx2(x, y, n);
        return;
    }
#endif
    q8_0_activations_ref(x, y, n);
}

void quant_q8_1_activations(const float *x, void *y, int64_t n)
{
#if HAVE_ARM_KERNELS
    if (arm_q8_1_act) {
        arm_q8_1_act(x, y, n);
        return;
    }
#endif
#if HAVE_AVX2_KERNELS
    if (quant_using_avx2()) {
        q8_1_activations_avx2(x, y, n);
        return;
    }
#endif
    q8_1_activations_ref(x, y, n);
}
