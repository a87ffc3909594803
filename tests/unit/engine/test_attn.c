/* engine/attn: the tiled attention against a plain double-precision softmax, the AVX2,
 * AVX-512 and NEON variants against the scalar reference bit for bit (a variant the CPU lacks
 * reported skipped by name), and the invariance rule: a query's output is the same alone as in
 * any block, whatever the other queries' key counts. The same with the layer features on
 * (windows over wrapped ring rows, soft-caps, sinks), the single-pass arithmetic also bit for
 * bit against a plain per-query twin written from attn.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/attn.h"
#include "engine/kernels.h"
#include "engine/ops.h"
#if defined(__aarch64__)
#include "engine/arm/attn_neon.h"
#include "engine/arm/cpufeat_arm.h"
#define run_neon attn_run_neon
#else
#define run_neon attn_run_ref // never called: the neon variant exists on aarch64 only
#endif
#include "util/mem.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define run_avx2   attn_run_avx2
#define run_avx512 attn_run_avx512
#else // never called: attn_have_avx2() and attn_have_avx512() are false off x86
#define run_avx2   attn_run_ref
#define run_avx512 attn_run_ref
#endif

#define N_VARIANTS 4
static const char *const variant_names[N_VARIANTS] = {"scalar", "avx2", "avx512", "neon"};

static bool have_neon(void)
{
#if defined(__aarch64__)
    return cpufeat_arm_hw_level() >= CPUFEAT_ARM_NEON;
#else
    return false;
#endif
}

/* Whether the CPU runs variant v; prints a skip line naming it when not and is_report. */
static bool have_variant(int v, bool is_report)
{
    const bool have = v == 0 || (v == 1 && attn_have_avx2()) || (v == 2 && attn_have_avx512()) ||
                      (v == 3 && have_neon());
    static const char *const needs[N_VARIANTS] = {"", "AVX2+FMA+F16C", "AVX-512 F/BW/VL/DQ+VNNI",
                                                  "Advanced SIMD on aarch64"};
    if (!have && is_report) printf("skip: %s variant (CPU lacks %s)\n", variant_names[v], needs[v]);
    return have;
}

static void (*variant_fn(int v))(const struct attn_block *)
{
    return v == 0 ? attn_run_ref : v == 1 ? run_avx2 : v == 2 ? run_avx512 : run_neon;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static float rng_float(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) & 0xffffff) / 8388608.0f - 1.0f;
}

#define MAX_KEYS 300
#define STRIDE   (2 * ATTN_HEAD_DIM_MAX) // two heads per position, like a GQA cache row

struct fixture {
    uint16_t *k, *v; // MAX_KEYS rows of STRIDE halves
    float *q;        // ATTN_QUERIES_MAX rows of ATTN_HEAD_DIM_MAX
};

static void fixture_make(struct fixture *f, float score_mag)
{
    f->k = mem_alloc(sizeof(uint16_t) * MAX_KEYS * STRIDE);
    f->v = mem_alloc(sizeof(uint16_t) * MAX_KEYS * STRIDE);
    f->q = mem_alloc(sizeof(float) * ATTN_QUERIES_MAX * ATTN_HEAD_DIM_MAX);
    assert_true(f->k && f->v && f->q);
    for (size_t i = 0; i < (size_t)MAX_KEYS * STRIDE; i++) {
        f->k[i] = ops_f32_to_f16(rng_float());
        f->v[i] = ops_f32_to_f16(rng_float() * 2.0f);
    }
    for (size_t i = 0; i < (size_t)ATTN_QUERIES_MAX * ATTN_HEAD_DIM_MAX; i++)
        f->q[i] = rng_float() * score_mag;
}

static void fixture_free(struct fixture *f)
{
    mem_free(f->k);
    mem_free(f->v);
    mem_free(f->q);
}

static struct attn_block block_of(const struct fixture *f, int hd, int head, int arith)
{
    return (struct attn_block){.arith = (enum attn_arith)arith,
                               .head_dim = hd,
                               .scale = 1.0f / sqrtf((float)hd),
                               .k = f->k + head * ATTN_HEAD_DIM_MAX,
                               .v = f->v + head * ATTN_HEAD_DIM_MAX,
                               .kv_stride = STRIDE};
}

/* softmax(q.k * scale) . v in double. */
static void naive(const struct attn_block *b, int i, double *out)
{
    const int hd = b->head_dim, n = b->n_keys[i];
    double s[MAX_KEYS], mx = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++) {
        double acc = 0.0;
        for (int d = 0; d < hd; d++)
            acc += (double)b->q[i][d] * ops_f16_to_f32(b->k[(size_t)j * b->kv_stride + d]);
        s[j] = acc * b->scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    for (int d = 0; d < hd; d++)
        out[d] = 0.0;
    for (int j = 0; j < n; j++) {
        const double p = exp(s[j] - mx);
        sum += p;
        for (int d = 0; d < hd; d++)
            out[d] += p * ops_f16_to_f32(b->v[(size_t)j * b->kv_stride + d]);
    }
    for (int d = 0; d < hd; d++)
        out[d] /= sum;
}

static const int head_dims[] = {4, 12, 40, 64, 72, 100, 128};
static const int key_counts[] = {1, 5, 63, 64, 65, 129, 300};

static const char *const arith_names[] = {"single-pass", "tile-softmax"};

/* Every query against the double-precision result (outputs are weighted means of values in
 * [-2, 2]: an absolute bound; the single-pass arithmetic rounds its query and accumulator to
 * half), for each arithmetic and each variant the machine has. */
static void test_attn_matches_naive(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 3.0f);
    static float out[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX];
    double want[ATTN_HEAD_DIM_MAX];
    for (int av = 0; av < 2 * N_VARIANTS; av++) {
        const int variant = av % N_VARIANTS, arith = av / N_VARIANTS;
        const double tol = arith == ATTN_ARITH_TILE_SOFTMAX ? 1e-4 : 2e-2;
        if (!have_variant(variant, true)) continue;
        for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++) {
            struct attn_block b = block_of(&f, head_dims[h], 1, arith);
            b.n_q = (int)(sizeof key_counts / sizeof key_counts[0]);
            for (int i = 0; i < b.n_q; i++) {
                b.q[i] = f.q + (size_t)i * ATTN_HEAD_DIM_MAX;
                b.n_keys[i] = key_counts[i];
                b.out[i] = out[i];
            }
            variant_fn(variant)(&b);
            for (int i = 0; i < b.n_q; i++) {
                naive(&b, i, want);
                for (int d = 0; d < b.head_dim; d++)
                    if (fabs(out[i][d] - want[d]) > tol)
                        fail_msg("%s %s hd %d keys %d dim %d: %.9g vs %.9g", variant_names[variant],
                                 arith_names[arith], b.head_dim, b.n_keys[i], d, out[i][d],
                                 want[d]);
            }
        }
    }
    fixture_free(&f);
}

/* The SIMD variants give the scalar reference's bits; with large scores too (the running
 * maximum then changes often and the exponentials span many binades). */
static void test_attn_simd_equals_ref(void **state)
{
    (void)state;
    bool any = false;
    for (int v = 1; v < N_VARIANTS; v++)
        any |= have_variant(v, true);
    if (!any) skip();
    for (int mav = 0; mav < 4 * N_VARIANTS; mav++) {
        const int ma = mav % 4, variant = mav / 4;
        if (variant == 0 || !have_variant(variant, false)) continue;
        const int mag = ma % 2, arith = ma / 2;
        struct fixture f;
        fixture_make(&f, mag ? 40.0f : 1.0f);
        static float a[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX], r[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX];
        for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++) {
            struct attn_block ba = block_of(&f, head_dims[h], 0, arith), br;
            ba.n_q = ATTN_QUERIES_MAX;
            for (int i = 0; i < ba.n_q; i++) {
                ba.q[i] = f.q + (size_t)i * ATTN_HEAD_DIM_MAX;
                ba.n_keys[i] = 1 + (i * 37) % MAX_KEYS;
                ba.out[i] = a[i];
            }
            br = ba;
            for (int i = 0; i < br.n_q; i++)
                br.out[i] = r[i];
            variant_fn(variant)(&ba);
            attn_run_ref(&br);
            for (int i = 0; i < ba.n_q; i++)
                if (memcmp(a[i], r[i], sizeof(float) * (size_t)ba.head_dim) != 0)
                    fail_msg("%s hd %d query %d (%d keys): %s differs from scalar",
                             arith_names[arith], ba.head_dim, i, ba.n_keys[i],
                             variant_names[variant]);
        }
        fixture_free(&f);
    }
}

/* The single-pass arithmetic in blocks of every size from 1 to 19 queries (the SIMD variants
 * run queries in groups, so partial groups of each size occur), the queries of a block seeing
 * different key ranges (windows and causal ends that split a tile), at the common head sizes
 * (256 too: several accumulator passes) and ones with a masked or double tail: each SIMD
 * variant gives the reference's bits. */
static void test_attn_single_pass_blocks_equal_ref(void **state)
{
    (void)state;
    static const int dims[] = {64, 128, 80, 96, 36, 256};
    static float a[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX], r[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX];
    for (int mag = 0; mag < 2; mag++) {
        struct fixture f;
        fixture_make(&f, mag ? 30.0f : 2.0f);
        for (size_t h = 0; h < sizeof dims / sizeof dims[0]; h++)
            for (int n_q = 1; n_q <= 19; n_q++) {
                struct attn_block br = block_of(&f, dims[h], 1, ATTN_ARITH_SINGLE_PASS), ba;
                br.n_q = n_q;
                for (int i = 0; i < n_q; i++) {
                    br.q[i] = f.q + (size_t)((i * 7 + n_q) % ATTN_QUERIES_MAX) * ATTN_HEAD_DIM_MAX;
                    br.n_keys[i] = MAX_KEYS - (i / 3) * 11 - n_q; // 3 heads per position
                    br.key_lo[i] = (i + n_q) % 4 == 0 ? (i * 29) % 150 : 0;
                    br.out[i] = r[i];
                }
                attn_run_ref(&br);
                ba = br;
                for (int i = 0; i < n_q; i++)
                    ba.out[i] = a[i];
                for (int variant = 1; variant < N_VARIANTS; variant++) {
                    if (!have_variant(variant, false)) continue;
                    variant_fn(variant)(&ba);
                    for (int i = 0; i < n_q; i++)
                        if (memcmp(a[i], r[i], sizeof(float) * (size_t)ba.head_dim) != 0)
                            fail_msg("%s hd %d block of %d, query %d (keys %d..%d): differs "
                                     "from scalar",
                                     variant_names[variant], ba.head_dim, n_q, i, ba.key_lo[i],
                                     ba.n_keys[i]);
                }
            }
        fixture_free(&f);
    }
}

/* A query alone gives the bits it gets in a full block of queries with other key counts (as a
 * decode token and a prompt chunk's row would), for each variant. */
static void test_attn_query_independent_of_block(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 4.0f);
    static float blk[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX];
    float one[ATTN_HEAD_DIM_MAX];
    for (int av = 0; av < 2 * N_VARIANTS; av++) {
        const int variant = av % N_VARIANTS, arith = av / N_VARIANTS;
        if (!have_variant(variant, false)) continue;
        void (*run)(const struct attn_block *) = variant_fn(variant);
        for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++) {
            struct attn_block b = block_of(&f, head_dims[h], 1, arith);
            b.n_q = ATTN_QUERIES_MAX;
            for (int i = 0; i < b.n_q; i++) {
                b.q[i] = f.q + (size_t)i * ATTN_HEAD_DIM_MAX;
                b.n_keys[i] = MAX_KEYS - (i * 53) % 200;
                b.out[i] = blk[i];
            }
            run(&b);
            for (int i = 0; i < b.n_q; i += 7) {
                struct attn_block s = block_of(&f, head_dims[h], 1, arith);
                s.n_q = 1;
                s.q[0] = b.q[i];
                s.n_keys[0] = b.n_keys[i];
                s.out[0] = one;
                run(&s);
                if (memcmp(one, blk[i], sizeof(float) * (size_t)b.head_dim) != 0)
                    fail_msg("%s %s hd %d query %d: alone differs from in a block",
                             variant_names[variant], arith_names[arith], b.head_dim, i);
            }
        }
    }
    fixture_free(&f);
}

/* ---- Layer features: windows over ring rows, soft-caps, sinks ---- */

#define RING 224 // ring rows: position p in row p % RING (fewer than MAX_KEYS, so rows wrap)

static float half_round(float x)
{
    return ops_f16_to_f32(ops_f32_to_f16(x));
}

/* The K (or V) row of position pos as the block addresses it. */
static const uint16_t *row_of(const struct attn_block *b, const uint16_t *base, int pos)
{
    const int r = b->ring > 0 ? pos % b->ring : pos;
    return base + (size_t)r * b->kv_stride;
}

/* dot(k, q) in the documented 8-lane order (attn.h), on half keys. */
static float dot_lanes_plain(const uint16_t *k, const float *q, int n)
{
    const int np = n & ~31;
    float c[4][8] = {{0}};
    for (int i = 0; i < np; i++)
        c[i % 32 / 8][i % 8] = fmaf(ops_f16_to_f32(k[i]), q[i], c[i % 32 / 8][i % 8]);
    float h[4];
    for (int l = 0; l < 4; l++)
        h[l] = ((c[0][l] + c[2][l]) + (c[1][l] + c[3][l])) +
               ((c[0][l + 4] + c[2][l + 4]) + (c[1][l + 4] + c[3][l + 4]));
    double sum = (double)((h[0] + h[1]) + (h[2] + h[3]));
    for (int i = np; i < n; i++)
        sum += (double)(ops_f16_to_f32(k[i]) * q[i]);
    return (float)sum;
}

/* The single-pass arithmetic written out for one query, key by key over its own window, with
 * the soft-cap and the sink as attn.h states them: the straightforward twin of every variant. */
static void single_pass_plain(const struct attn_block *b, int i, float *out)
{
    const int hd = b->head_dim;
    const float scale = b->softcap != 0.0f ? b->scale / b->softcap : b->scale;
    float qr[ATTN_HEAD_DIM_MAX], mx = -INFINITY, sum = 0.0f;
    for (int d = 0; d < hd; d++) {
        qr[d] = half_round(b->q[i][d]);
        out[d] = 0.0f;
    }
    for (int j = b->key_lo[i]; j < b->n_keys[i]; j++) {
        float sc = dot_lanes_plain(row_of(b, b->k, j), qr, hd) * scale;
        if (b->softcap != 0.0f) sc = b->softcap * tanhf(sc);
        float ms = 1.0f, vs = 1.0f;
        if (sc > mx) {
            ms = expf(mx - sc);
            mx = sc;
            for (int d = 0; d < hd; d++)
                out[d] = half_round(out[d] * ms);
        } else {
            vs = expf(sc - mx);
        }
        const uint16_t *v = row_of(b, b->v, j);
        for (int d = 0; d < hd; d++)
            out[d] = half_round(fmaf(ops_f16_to_f32(v[d]), vs, out[d]));
        sum = fmaf(sum, ms, vs);
    }
    if (b->has_sinks) {
        float ms = 1.0f, vs = 1.0f;
        if (b->sink[i] > mx) {
            ms = expf(mx - b->sink[i]);
            for (int d = 0; d < hd; d++)
                out[d] *= ms;
        } else {
            vs = expf(b->sink[i] - mx);
        }
        sum = fmaf(sum, ms, vs);
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < hd; d++)
        out[d] *= inv;
}

/* softmax over the window's capped scores and the sink, times v, in double. */
static void naive_features(const struct attn_block *b, int i, double *out)
{
    const int hd = b->head_dim, lo = b->key_lo[i], n = b->n_keys[i];
    double s[MAX_KEYS], mx = b->has_sinks ? b->sink[i] : -INFINITY, sum = 0.0;
    for (int j = lo; j < n; j++) {
        double acc = 0.0;
        const uint16_t *k = row_of(b, b->k, j);
        for (int d = 0; d < hd; d++)
            acc += (double)b->q[i][d] * ops_f16_to_f32(k[d]);
        s[j] = acc * b->scale;
        if (b->softcap != 0.0f) s[j] = b->softcap * tanh(s[j] / b->softcap);
        mx = s[j] > mx ? s[j] : mx;
    }
    for (int d = 0; d < hd; d++)
        out[d] = 0.0;
    if (b->has_sinks) sum = exp(b->sink[i] - mx);
    for (int j = lo; j < n; j++) {
        const double p = exp(s[j] - mx);
        const uint16_t *v = row_of(b, b->v, j);
        sum += p;
        for (int d = 0; d < hd; d++)
            out[d] += p * ops_f16_to_f32(v[d]);
    }
    for (int d = 0; d < hd; d++)
        out[d] /= sum;
}

/* A block of n_q queries at consecutive positions ending at MAX_KEYS - 1 - shift, each with a
 * window of win keys (0: none), a soft-cap, and sinks when is_sink. With is_ring the keys are
 * read from a ring of RING rows (rows wrap) whose rows outside every window hold NaN. */
struct feat_case {
    int win;
    float cap;
    bool is_sink, is_ring;
};

static struct attn_block feat_block(const struct fixture *f, const struct feat_case *c, int hd,
                                    int arith, int n_q, float (*out)[ATTN_HEAD_DIM_MAX])
{
    struct attn_block b = block_of(f, hd, 0, arith);
    b.softcap = c->cap;
    b.has_sinks = c->is_sink;
    b.ring = c->is_ring ? RING : 0;
    b.n_q = n_q;
    for (int i = 0; i < n_q; i++) {
        const int pos = MAX_KEYS - n_q + i; // the last query sees every key
        b.q[i] = f->q + (size_t)i * ATTN_HEAD_DIM_MAX;
        b.n_keys[i] = pos + 1;
        b.key_lo[i] = c->win > 0 && pos + 1 > c->win ? pos + 1 - c->win : 0;
        b.sink[i] = c->is_sink ? (float)(i % 5) * 1.5f - 2.0f : 0.0f;
        b.out[i] = out[i];
    }
    return b;
}

/* The fixture's keys and values copied into ring rows (k, v of RING * STRIDE halves): each
 * position a query of b sees, in row position % RING; every other row NaN. */
static void ring_fill(const struct fixture *f, const struct attn_block *b, uint16_t *k, uint16_t *v)
{
    int lo = b->key_lo[0], hi = 0;
    for (int i = 0; i < b->n_q; i++) {
        lo = b->key_lo[i] < lo ? b->key_lo[i] : lo;
        hi = b->n_keys[i] > hi ? b->n_keys[i] : hi;
    }
    assert_true(hi - lo <= RING);
    for (size_t i = 0; i < (size_t)RING * STRIDE; i++)
        k[i] = v[i] = 0x7e00; // NaN
    for (int p = lo; p < hi; p++) {
        memcpy(k + (size_t)(p % RING) * STRIDE, f->k + (size_t)p * STRIDE,
               sizeof(uint16_t) * STRIDE);
        memcpy(v + (size_t)(p % RING) * STRIDE, f->v + (size_t)p * STRIDE,
               sizeof(uint16_t) * STRIDE);
    }
}

static const struct feat_case feat_cases[] = {
    {.win = 0, .cap = 0.0f, .is_sink = false, .is_ring = false}, // plain, for the ring's twin
    {.win = 100, .cap = 0.0f, .is_sink = false, .is_ring = false},
    {.win = 0, .cap = 5.0f, .is_sink = false, .is_ring = false},
    {.win = 0, .cap = 0.0f, .is_sink = true, .is_ring = false},
    {.win = 37, .cap = 0.0f, .is_sink = true, .is_ring = true},
    {.win = 150, .cap = 3.0f, .is_sink = true, .is_ring = true},
    {.win = 1, .cap = 0.0f, .is_sink = false, .is_ring = true},
};
#define N_FEAT_CASES (int)(sizeof feat_cases / sizeof feat_cases[0])

/* Runs case c for one variant, arithmetic, head_dim and block size into out, through a ring
 * copy of the fixture when the case asks for one. */
static void feat_run(const struct fixture *f, int c, int variant, int arith, int hd, int n_q,
                     float (*out)[ATTN_HEAD_DIM_MAX], struct attn_block *used)
{
    static uint16_t rk[RING * STRIDE], rv[RING * STRIDE];
    struct attn_block b = feat_block(f, &feat_cases[c], hd, arith, n_q, out);
    if (feat_cases[c].is_ring) {
        ring_fill(f, &b, rk, rv);
        b.k = rk;
        b.v = rv;
    }
    variant_fn(variant)(&b);
    *used = b;
}

/* Every variant with windows (over wrapped ring rows too), soft-caps and sinks: the
 * single-pass arithmetic equals its plain per-query twin bit for bit; both arithmetics agree
 * with the double-precision softmax. */
static void test_attn_features_match_plain(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 3.0f);
    static float out[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX];
    float plain[ATTN_HEAD_DIM_MAX];
    double want[ATTN_HEAD_DIM_MAX];
    for (int av = 0; av < 2 * N_VARIANTS; av++) {
        const int variant = av % N_VARIANTS, arith = av / N_VARIANTS;
        const double tol = arith == ATTN_ARITH_TILE_SOFTMAX ? 1e-4 : 2e-2;
        if (!have_variant(variant, false)) continue;
        for (int c = 0; c < N_FEAT_CASES; c++)
            for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++) {
                struct attn_block b;
                feat_run(&f, c, variant, arith, head_dims[h], 40, out, &b);
                for (int i = 0; i < b.n_q; i++) {
                    naive_features(&b, i, want);
                    if (arith == ATTN_ARITH_SINGLE_PASS) single_pass_plain(&b, i, plain);
                    for (int d = 0; d < b.head_dim; d++) {
                        if (fabs(out[i][d] - want[d]) > tol)
                            fail_msg("%s %s case %d hd %d query %d dim %d: %.9g vs %.9g",
                                     variant_names[variant], arith_names[arith], c, b.head_dim, i,
                                     d, out[i][d], want[d]);
                        if (arith == ATTN_ARITH_SINGLE_PASS &&
                            memcmp(&out[i][d], &plain[d], sizeof(float)) != 0)
                            fail_msg("%s case %d hd %d query %d dim %d: %.9g, plain %.9g",
                                     variant_names[variant], c, b.head_dim, i, d, out[i][d],
                                     plain[d]);
                    }
                }
            }
    }
    fixture_free(&f);
}

/* With the features on, the SIMD variants give the scalar reference's bits in both
 * arithmetics, and a ring cache gives the bits of the same keys laid out by position. */
static void test_attn_features_simd_equals_ref(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 20.0f);
    static float a[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX], r[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX];
    for (int av = 0; av < 2 * N_VARIANTS; av++) {
        const int variant = av % N_VARIANTS, arith = av / N_VARIANTS;
        if (!have_variant(variant, false)) continue;
        for (int c = 0; c < N_FEAT_CASES; c++)
            for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++) {
                struct attn_block ba, br;
                feat_run(&f, c, variant, arith, head_dims[h], ATTN_QUERIES_MAX, a, &ba);
                struct feat_case lin = feat_cases[c];
                lin.is_ring = false; // the reference reads the positional layout
                br = feat_block(&f, &lin, head_dims[h], arith, ATTN_QUERIES_MAX, r);
                attn_run_ref(&br);
                for (int i = 0; i < ba.n_q; i++)
                    if (memcmp(a[i], r[i], sizeof(float) * (size_t)ba.head_dim) != 0)
                        fail_msg("%s %s case %d hd %d query %d: differs from scalar",
                                 variant_names[variant], arith_names[arith], c, ba.head_dim, i);
            }
    }
    fixture_free(&f);
}

/* With the features on, a query alone gives its bits in a full block (a decode token and a
 * prompt chunk's row). */
static void test_attn_features_query_independent(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, 4.0f);
    static float blk[ATTN_QUERIES_MAX][ATTN_HEAD_DIM_MAX], one[1][ATTN_HEAD_DIM_MAX];
    for (int av = 0; av < 2 * N_VARIANTS; av++) {
        const int variant = av % N_VARIANTS, arith = av / N_VARIANTS;
        if (!have_variant(variant, false)) continue;
        for (int c = 1; c < N_FEAT_CASES; c++) {
            struct attn_block b;
            feat_run(&f, c, variant, arith, 72, ATTN_QUERIES_MAX, blk, &b);
            for (int i = 0; i < b.n_q; i += 9) {
                struct attn_block s = b;
                s.n_q = 1;
                s.q[0] = b.q[i];
                s.key_lo[0] = b.key_lo[i];
                s.n_keys[0] = b.n_keys[i];
                s.sink[0] = b.sink[i];
                s.out[0] = one[0];
                variant_fn(variant)(&s);
                if (memcmp(one[0], blk[i], sizeof(float) * 72) != 0)
                    fail_msg("%s %s case %d query %d: alone differs from in a block",
                             variant_names[variant], arith_names[arith], c, i);
            }
        }
    }
    fixture_free(&f);
}

int main(void)
{
    kernels_init();
    printf("attention variant in use: %s\n", attn_variant_name());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attn_matches_naive),
        cmocka_unit_test(test_attn_simd_equals_ref),
        cmocka_unit_test(test_attn_single_pass_blocks_equal_ref),
        cmocka_unit_test(test_attn_query_independent_of_block),
        cmocka_unit_test(test_attn_features_match_plain),
        cmocka_unit_test(test_attn_features_simd_equals_ref),
        cmocka_unit_test(test_attn_features_query_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
