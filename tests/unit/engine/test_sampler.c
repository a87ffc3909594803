/* engine/sampler: each stage on hand-made logits, draw frequencies against known softmaxes,
 * greedy, bans, penalties, determinism, probability reports and allocation failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/sampler.h"
#include "engine/cpufeat.h"
#include "engine/kernels.h"
#if defined(__x86_64__) || defined(__i386__)
#include "engine/x86/sampler_x86.h"
#endif
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_DRAWS 10000

/* All filters off, temperature 1: draws follow the plain softmax. */
static struct sampler_params plain_params(int64_t seed)
{
    struct sampler_params p = sampler_params_default();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

static struct sampler *make(const struct sampler_params *p, int32_t n_vocab)
{
    struct sampler *s = NULL;
    assert_int_equal(sampler_new(p, n_vocab, &s), ERR_OK);
    assert_non_null(s);
    return s;
}

/* Draws N_DRAWS tokens from the same logits (copied fresh each time) and counts them. */
static void count_draws(struct sampler *s, const float *logits, int32_t n, int *counts)
{
    float *tmp = malloc((size_t)n * sizeof *tmp);
    assert_non_null(tmp);
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int i = 0; i < N_DRAWS; i++) {
        memcpy(tmp, logits, (size_t)n * sizeof *tmp);
        int32_t t = -1;
        assert_int_equal(sampler_sample(s, tmp, &t), ERR_OK);
        assert_true(t >= 0 && t < n);
        counts[t]++;
    }
    free(tmp);
}

static void softmax(const float *l, int n, double *p)
{
    double m = -INFINITY, z = 0;
    for (int i = 0; i < n; i++)
        m = l[i] > m ? l[i] : m;
    for (int i = 0; i < n; i++)
        z += (p[i] = exp(l[i] - m));
    for (int i = 0; i < n; i++)
        p[i] /= z;
}

/* Frequency within 4 standard deviations of the expected probability. */
static void assert_freq(int count, double p)
{
    double f = (double)count / N_DRAWS;
    double sd = sqrt(p * (1 - p) / N_DRAWS);
    if (fabs(f - p) > 4 * sd + 1e-9) fail_msg("frequency %.4f, expected %.4f (sd %.4f)", f, p, sd);
}

static void test_defaults_match_llama_cpp(void **state)
{
    (void)state;
    struct sampler_params p = sampler_params_default();
    assert_true(p.temperature == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f);
    assert_true(p.repeat_penalty == 1.0f && p.repeat_last_n == 64);
    assert_true(p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f);
    assert_int_equal(p.seed, SAMPLER_SEED_RANDOM);
}

static void test_plain_softmax_distribution(void **state)
{
    (void)state;
    float logits[5] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
    double p[5];
    int counts[5];
    softmax(logits, 5, p);
    struct sampler_params prm = plain_params(1234);
    struct sampler *s = make(&prm, 5);
    count_draws(s, logits, 5, counts);
    for (int i = 0; i < 5; i++)
        assert_freq(counts[i], p[i]);
    sampler_free(s);
}

static void test_temperature_sharpens_and_flattens(void **state)
{
    (void)state;
    float logits[2] = {0.0f, 1.0f};
    int counts[2];
    double p[2];
    float scaled[2];
    const float temps[] = {0.5f, 2.0f};
    for (int k = 0; k < 2; k++) {
        struct sampler_params prm = plain_params(99 + k);
        prm.temperature = temps[k];
        struct sampler *s = make(&prm, 2);
        count_draws(s, logits, 2, counts);
        for (int i = 0; i < 2; i++)
            scaled[i] = logits[i] / temps[k];
        softmax(scaled, 2, p);
        assert_freq(counts[1], p[1]);
        sampler_free(s);
    }
}

static void test_greedy_is_argmax_lowest_id_on_ties(void **state)
{
    (void)state;
    struct sampler_params prm = sampler_params_default();
    prm.temperature = 0.0f;
    struct sampler *s = make(&prm, 6);
    float a[6] = {0.1f, 3.0f, -2.0f, 3.0f, NAN, 2.9f};
    int32_t t = -1;
    assert_int_equal(sampler_sample(s, a, &t), ERR_OK);
    assert_int_equal(t, 1);
    float b[6] = {NAN, -1.0f, -0.5f, -3.0f, -0.5f, -9.0f};
    assert_int_equal(sampler_sample(s, b, &t), ERR_OK);
    assert_int_equal(t, 2);
    sampler_free(s);
}

static void test_bias_bans_and_boosts(void **state)
{
    (void)state;
    struct sampler_bias bias[] = {{1, -INFINITY}, {3, 5.0f}, {3, -1.0f}};
    struct sampler_params prm = sampler_params_default();
    prm.temperature = 0.0f;
    prm.logit_bias = bias;
    prm.n_logit_bias = 2;
    struct sampler *s = make(&prm, 4);
    bias[0].bias = 0.0f; // the sampler holds its own copy
    float a[4] = {1.0f, 9.0f, 2.0f, 0.0f};
    int32_t t = -1;
    assert_int_equal(sampler_sample(s, a, &t), ERR_OK);
    assert_int_equal(t, 3); // 0 + 5 beats 2; 9 is banned
    assert_true(a[1] == -INFINITY);
    sampler_free(s);

    // Banned tokens are never drawn, whatever the seed.
    struct sampler_bias ban = {0, -INFINITY};
    prm = plain_params(7);
    prm.logit_bias = &ban;
    prm.n_logit_bias = 1;
    s = make(&prm, 3);
    float l[3] = {5.0f, 0.0f, 0.0f};
    int counts[3];
    count_draws(s, l, 3, counts);
    assert_int_equal(counts[0], 0);
    assert_freq(counts[1], 0.5);
    sampler_free(s);

    // Entries for the same token add up.
    prm = sampler_params_default();
    prm.temperature = 0.0f;
    prm.logit_bias = &bias[1];
    prm.n_logit_bias = 2;
    s = make(&prm, 4);
    float c[4] = {4.5f, 0.0f, 0.0f, 0.0f};
    assert_int_equal(sampler_sample(s, c, &t), ERR_OK);
    assert_int_equal(t, 0); // 0 + 5 - 1 = 4 < 4.5
    sampler_free(s);
}

static void test_all_banned_is_an_error(void **state)
{
    (void)state;
    struct sampler_bias bias[] = {{0, -INFINITY}, {1, -INFINITY}};
    for (int greedy = 0; greedy < 2; greedy++) {
        struct sampler_params prm = greedy ? sampler_params_default() : plain_params(1);
        if (greedy) prm.temperature = 0.0f;
        prm.logit_bias = bias;
        prm.n_logit_bias = 2;
        struct sampler *s = make(&prm, 2);
        float l[2] = {1.0f, 2.0f};
        int32_t t = 77;
        assert_int_equal(sampler_sample(s, l, &t), ERR_INVALID);
        assert_int_equal(t, 77);
        sampler_free(s);
    }
}

static void test_repeat_penalty_llama_cpp_semantics(void **state)
{
    (void)state;
    struct sampler_params prm = sampler_params_default();
    prm.temperature = 0.0f;
    prm.repeat_penalty = 2.0f;
    prm.repeat_last_n = 3;
    struct sampler *s = make(&prm, 5);
    // Window after five accepts: {2, 0, 0} (1 and 3 fell out).
    int32_t hist[] = {1, 3, 2, 0, 0};
    for (int i = 0; i < 5; i++)
        assert_int_equal(sampler_accept(s, hist[i]), ERR_OK);
    float l[5] = {4.0f, 3.0f, -1.0f, 3.5f, 0.0f};
    int32_t t = -1;
    assert_int_equal(sampler_sample(s, l, &t), ERR_OK);
    assert_true(l[0] == 2.0f);  // positive: divided once, though it occurs twice
    assert_true(l[1] == 3.0f);  // outside the window
    assert_true(l[2] == -2.0f); // negative: multiplied
    assert_true(l[3] == 3.5f);
    assert_true(l[4] == 0.0f);
    assert_int_equal(t, 3);
    assert_int_equal(sampler_accept(s, 5), ERR_INVALID);
    assert_int_equal(sampler_accept(s, -1), ERR_INVALID);
    sampler_free(s);
}

static void test_frequency_presence_openai_semantics(void **state)
{
    (void)state;
    struct sampler_params prm = sampler_params_default();
    prm.temperature = 0.0f;
    prm.frequency_penalty = 0.5f;
    prm.presence_penalty = 0.25f;
    struct sampler *s = make(&prm, 4);
    int32_t hist[] = {2, 2, 2, 1};
    for (int i = 0; i < 4; i++)
        assert_int_equal(sampler_accept(s, hist[i]), ERR_OK);
    float l[4] = {1.0f, 1.0f, 3.0f, -1.0f};
    int32_t t = -1;
    assert_int_equal(sampler_sample(s, l, &t), ERR_OK);
    assert_true(l[0] == 1.0f);
    assert_true(l[1] == 1.0f - 0.5f - 0.25f);
    assert_true(l[2] == 3.0f - 1.5f - 0.25f);
    assert_true(l[3] == -1.0f);
    assert_int_equal(t, 2);
    // A second sample applies the penalties again from the same counts (not cumulatively).
    float l2[4] = {1.0f, 1.0f, 3.0f, -1.0f};
    assert_int_equal(sampler_sample(s, l2, &t), ERR_OK);
    assert_true(l2[2] == 3.0f - 1.5f - 0.25f);
    // After a reset the window is empty.
    sampler_reset(s);
    float l3[4] = {1.0f, 1.0f, 3.0f, -1.0f};
    assert_int_equal(sampler_sample(s, l3, &t), ERR_OK);
    assert_true(l3[2] == 3.0f);
    sampler_free(s);
}

static void test_top_k_keeps_k_best(void **state)
{
    (void)state;
    float logits[6] = {0.0f, 2.0f, 1.0f, 2.0f, -1.0f, 1.9f};
    struct sampler_params prm = plain_params(5);
    prm.top_k = 2;
    struct sampler *s = make(&prm, 6);
    int counts[6];
    count_draws(s, logits, 6, counts);
    assert_int_equal(counts[1] + counts[3], N_DRAWS); // the two 2.0s (5 loses at 1.9)
    assert_freq(counts[1], 0.5);
    sampler_free(s);
}

static void test_top_p_keeps_smallest_prefix(void **state)
{
    (void)state;
    float logits[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    for (int use_k = 0; use_k < 2; use_k++) {
        struct sampler_params prm = plain_params(11);
        prm.top_k = use_k ? 3 : 0; // sorted and unsorted paths
        prm.top_p = 0.75f;
        struct sampler *s = make(&prm, 4);
        int counts[4];
        count_draws(s, logits, 4, counts);
        assert_int_equal(counts[1] + counts[3], N_DRAWS);
        assert_freq(counts[1], 0.5 / 0.8);
        sampler_free(s);
    }
    // top_p <= 0 leaves only the best token.
    struct sampler_params prm = plain_params(3);
    prm.top_p = 0.0f;
    struct sampler *s = make(&prm, 4);
    int counts[4];
    count_draws(s, logits, 4, counts);
    assert_int_equal(counts[1], N_DRAWS);
    sampler_free(s);
}

static void test_min_p_drops_below_fraction_of_max(void **state)
{
    (void)state;
    float logits[4] = {logf(0.6f), logf(0.3f), logf(0.06f), logf(0.04f)};
    struct sampler_params prm = plain_params(21);
    prm.min_p = 0.08f; // threshold 0.048
    struct sampler *s = make(&prm, 4);
    int counts[4];
    count_draws(s, logits, 4, counts);
    assert_int_equal(counts[3], 0);
    assert_freq(counts[0], 0.6 / 0.96);
    assert_freq(counts[2], 0.06 / 0.96);
    sampler_free(s);
}

/* Filters act at temperature 1 and the temperature applies to what is left, as in llama.cpp:
 * with top_k 2 and temperature 2, only tokens 0 and 1 appear, in ratio e^(1/2). */
static void test_filters_then_temperature(void **state)
{
    (void)state;
    float logits[3] = {1.0f, 0.0f, -5.0f};
    struct sampler_params prm = plain_params(8);
    prm.top_k = 2;
    prm.temperature = 2.0f;
    struct sampler *s = make(&prm, 3);
    int counts[3];
    count_draws(s, logits, 3, counts);
    assert_int_equal(counts[2], 0);
    double e = exp(0.5);
    assert_freq(counts[0], e / (1 + e));
    sampler_free(s);
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* A 150k vocabulary without top-k: top-p must find the same nucleus a full sort finds. The
 * mass is spread so the nucleus needs more than the first selection round. */
static void test_top_p_large_vocab_matches_full_sort(void **state)
{
    (void)state;
    const int32_t n = 150000;
    float *logits = malloc(n * sizeof *logits), *sorted = malloc(n * sizeof *sorted);
    float *tmp = malloc(n * sizeof *tmp);
    assert_true(logits && sorted && tmp);
    uint64_t x = 42;
    for (int32_t i = 0; i < n; i++)
        logits[i] = (float)(lcg(&x) % 1000) / 1000.0f * (i % 3 == 0 ? 8.0f : 1.0f);
    memcpy(sorted, logits, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_desc);
    double z = 0, cum = 0;
    for (int32_t i = 0; i < n; i++)
        z += exp(sorted[i] - sorted[0]);
    int32_t keep = 0;
    while (cum < 0.5 * z)
        cum += exp(sorted[keep++] - sorted[0]);
    float thr = sorted[keep - 1];
    assert_true(keep > 512);

    struct sampler_params prm = plain_params(77);
    prm.top_p = 0.5f;
    prm.n_probs = 5;
    struct sampler *s = make(&prm, n);
    for (int k = 0; k < 20; k++) {
        memcpy(tmp, logits, n * sizeof *tmp);
        int32_t t = -1;
        assert_int_equal(sampler_sample(s, tmp, &t), ERR_OK);
        assert_true(logits[t] >= thr);
        struct sampler_probs pr;
        sampler_get_probs(s, SAMPLER_DIST_POST, &pr);
        assert_int_equal(pr.n_top, 5);
        assert_float_equal(pr.top[0].prob, 1.0 / cum, 1e-3 / cum);
    }
    sampler_free(s);
    free(tmp);
    free(sorted);
    free(logits);
}

/* The draw reproduces llama.cpp's: MT19937 seeded with the seed, u = (x1 + x2 * 2^32) / 2^64
 * from two outputs, the first candidate whose running weight reaches u * total. With seed 5489
 * (the reference algorithm's default) the first outputs are 3499211612, 581869302, 3890346734,
 * 3586334585, …, so u runs 0.1355, 0.8350, 0.9689, 0.2210, 0.3082: over four equal logits that
 * is tokens 0, 3, 3, 0, 1. */
static void test_draw_follows_mt19937(void **state)
{
    (void)state;
    struct sampler_params prm = plain_params(5489);
    struct sampler *s = make(&prm, 4);
    const int32_t want[5] = {0, 3, 3, 0, 1};
    for (int i = 0; i < 5; i++) {
        float logits[4] = {0.5f, 0.5f, 0.5f, 0.5f};
        int32_t t = -1;
        assert_int_equal(sampler_sample(s, logits, &t), ERR_OK);
        assert_int_equal(t, want[i]);
    }
    sampler_free(s);
    // One candidate left (top_k 1): the draw still takes its number, as llama.cpp's does.
    prm.top_k = 1;
    s = make(&prm, 4);
    float one[4] = {0.0f, 2.0f, 0.0f, 0.0f};
    int32_t t = -1;
    assert_int_equal(sampler_sample(s, one, &t), ERR_OK);
    assert_int_equal(t, 1);
    sampler_free(s);
}

/* Mirostat steers the surprise: a tiny target keeps only the best token, a large one keeps
 * the distribution (both versions); parameters outside their ranges are refused. */
static void test_mirostat(void **state)
{
    (void)state;
    for (int32_t version = 1; version <= 2; version++) {
        for (int pass = 0; pass < 2; pass++) {
            struct sampler_params prm = plain_params(11);
            prm.mirostat = version;
            prm.mirostat_tau = pass == 0 ? 0.01f : 12.0f;
            prm.mirostat_eta = pass == 0 ? 0.0f : 0.1f;
            struct sampler *s = make(&prm, 4);
            int seen[4] = {0};
            for (int i = 0; i < 400; i++) {
                float logits[4] = {1.0f, 0.8f, 0.6f, 0.4f};
                int32_t t = -1;
                assert_int_equal(sampler_sample(s, logits, &t), ERR_OK);
                assert_true(t >= 0 && t < 4);
                seen[t]++;
            }
            if (pass == 0)
                assert_int_equal(seen[0], 400);
            else
                assert_true(seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
            sampler_free(s);
        }
    }
    struct sampler_params bad = plain_params(1);
    bad.mirostat = 3;
    struct sampler *s = NULL;
    assert_int_equal(sampler_new(&bad, 4, &s), ERR_INVALID);
    bad.mirostat = 2;
    bad.mirostat_tau = 0.0f;
    assert_int_equal(sampler_new(&bad, 4, &s), ERR_INVALID);
}

static void test_same_seed_same_tokens(void **state)
{
    (void)state;
    float logits[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    int32_t seq[3][64];
    const int64_t seeds[3] = {123, 123, 124};
    for (int k = 0; k < 3; k++) {
        struct sampler_params prm = plain_params(seeds[k]);
        struct sampler *s = make(&prm, 8);
        assert_int_equal(sampler_seed(s), (uint64_t)seeds[k]);
        for (int i = 0; i < 64; i++) {
            float tmp[8];
            memcpy(tmp, logits, sizeof tmp);
            assert_int_equal(sampler_sample(s, tmp, &seq[k][i]), ERR_OK);
        }
        // reset replays the stream
        sampler_reset(s);
        for (int i = 0; i < 64; i++) {
            float tmp[8];
            int32_t t;
            memcpy(tmp, logits, sizeof tmp);
            assert_int_equal(sampler_sample(s, tmp, &t), ERR_OK);
            assert_int_equal(t, seq[k][i]);
        }
        sampler_free(s);
    }
    assert_memory_equal(seq[0], seq[1], sizeof seq[0]);
    assert_true(memcmp(seq[0], seq[2], sizeof seq[0]) != 0);

    struct sampler_params prm = plain_params(SAMPLER_SEED_RANDOM);
    struct sampler *a = make(&prm, 8), *b = make(&prm, 8);
    assert_true(sampler_seed(a) != sampler_seed(b));
    sampler_free(a);
    sampler_free(b);
}

static void test_probs_raw_and_post(void **state)
{
    (void)state;
    float logits[5] = {2.0f, 1.0f, 0.0f, 3.0f, -1.0f};
    double p[5];
    softmax(logits, 5, p);
    struct sampler_bias ban = {3, -INFINITY};
    struct sampler_params prm = plain_params(4);
    prm.top_k = 2;
    prm.n_probs = 3;
    prm.logit_bias = &ban;
    prm.n_logit_bias = 1;
    struct sampler *s = make(&prm, 5);
    float tmp[5];
    memcpy(tmp, logits, sizeof tmp);
    int32_t t = -1;
    assert_int_equal(sampler_sample(s, tmp, &t), ERR_OK);
    assert_true(t == 0 || t == 1);

    struct sampler_probs raw, post;
    sampler_get_probs(s, SAMPLER_DIST_RAW, &raw);
    assert_int_equal(raw.n_top, 3); // raw ignores the ban
    assert_int_equal(raw.top[0].token, 3);
    assert_int_equal(raw.top[1].token, 0);
    assert_int_equal(raw.top[2].token, 1);
    assert_float_equal(raw.top[0].prob, p[3], 1e-5);
    assert_float_equal(raw.top[1].logprob, log(p[0]), 1e-5);
    assert_int_equal(raw.chosen.token, t);
    assert_float_equal(raw.chosen.prob, p[t], 1e-5);

    sampler_get_probs(s, SAMPLER_DIST_POST, &post);
    assert_int_equal(post.n_top, 2); // only two candidates survive top-k
    double e = exp(1.0);
    assert_int_equal(post.top[0].token, 0);
    assert_float_equal(post.top[0].prob, e / (1 + e), 1e-5);
    assert_float_equal(post.top[1].prob, 1 / (1 + e), 1e-5);
    assert_int_equal(post.chosen.token, t);
    sampler_free(s);

    // Greedy: the post distribution is one-hot on the argmax.
    prm.temperature = 0.0f;
    s = make(&prm, 5);
    memcpy(tmp, logits, sizeof tmp);
    assert_int_equal(sampler_sample(s, tmp, &t), ERR_OK);
    assert_int_equal(t, 0);
    sampler_get_probs(s, SAMPLER_DIST_POST, &post);
    assert_int_equal(post.n_top, 1);
    assert_true(post.top[0].prob == 1.0f && post.top[0].logprob == 0.0f);
    sampler_get_probs(s, SAMPLER_DIST_RAW, &raw);
    assert_float_equal(raw.chosen.prob, p[0], 1e-5);
    sampler_free(s);
}

static void test_invalid_params(void **state)
{
    (void)state;
    struct sampler *s = (struct sampler *)&s;
    struct sampler_params p = sampler_params_default();
    assert_int_equal(sampler_new(&p, 0, &s), ERR_INVALID);
    struct sampler_bias bad = {10, 1.0f};
    p.logit_bias = &bad;
    p.n_logit_bias = 1;
    assert_int_equal(sampler_new(&p, 10, &s), ERR_INVALID);
    bad = (struct sampler_bias){0, INFINITY};
    assert_int_equal(sampler_new(&p, 10, &s), ERR_INVALID);
    p = sampler_params_default();
    p.min_p = 1.5f;
    assert_int_equal(sampler_new(&p, 10, &s), ERR_INVALID);
    p = sampler_params_default();
    p.repeat_penalty = 0.0f;
    assert_int_equal(sampler_new(&p, 10, &s), ERR_INVALID);
    p = sampler_params_default();
    p.temperature = NAN;
    assert_int_equal(sampler_new(&p, 10, &s), ERR_INVALID);
    p = sampler_params_default();
    p.n_probs = SAMPLER_N_PROBS_MAX + 1;
    assert_int_equal(sampler_new(&p, 10, &s), ERR_INVALID);
    assert_ptr_equal(s, (struct sampler *)&s); // untouched on failure
}

static void test_new_allocation_failures(void **state)
{
    (void)state;
    struct sampler_bias bias = {1, 2.0f};
    struct sampler_params p = sampler_params_default();
    p.repeat_penalty = 1.1f;
    p.n_probs = 2;
    p.logit_bias = &bias;
    p.n_logit_bias = 1;
    int64_t live = mem_live_count();
    int n_ok = 0;
    for (int64_t n = 0; n < 20; n++) {
        struct sampler *s = NULL;
        mem_fail_after(n);
        int rc = sampler_new(&p, 100, &s);
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            n_ok++;
            sampler_free(s);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
            assert_null(s);
        }
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(n_ok > 0 && n_ok < 20);
}

#if defined(__x86_64__) || defined(__i386__)
static int32_t argmax_scalar(const float *x, int32_t n)
{
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > (best < 0 ? -INFINITY : x[best])) best = i;
    return best;
}

/* The AVX2 and AVX-512 vocabulary passes: argmax equals the scalar loop's index (first of
 * tied maxima, NaN never, none when all are -inf or NaN), the scan for the next logit above a
 * threshold the scalar loop's, and the exponential sum is within
 * 1e-6 relative of sum expf in double, -inf terms adding 0; lengths around the vector widths
 * and a Qwen-sized vocabulary. A set the CPU lacks is reported skipped. */
static void test_vocab_passes_simd(void **state)
{
    (void)state;
    struct {
        const char *name;
        bool has;
        int32_t (*argmax)(const float *, int32_t);
        double (*sum_exp)(const float *, int32_t, float);
        int32_t (*next_above)(const float *, int32_t, int32_t, float);
    } sets[] = {
        {"avx2", cpufeat_has_avx2_fma_f16c(), sampler_argmax_avx2, sampler_sum_exp_avx2,
         sampler_next_above_avx2},
        {"avx512", cpufeat_has_avx512(), sampler_argmax_avx512, sampler_sum_exp_avx512,
         sampler_next_above_avx512},
    };
    const int32_t big = 151936;
    float *x = mem_alloc((size_t)big * sizeof *x);
    assert_non_null(x);
    srand(7);
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!sets[k].has) {
            printf("skip: %s vocabulary passes (CPU lacks the set)\n", sets[k].name);
            continue;
        }
        for (int32_t n = 1; n <= big; n = n < 70 ? n + 1 : n * 3 + 7) {
            if (n > big) n = big;
            for (int pattern = 0; pattern < 4; pattern++) {
                for (int32_t i = 0; i < n; i++) {
                    const float r = (float)rand() / (float)RAND_MAX * 20.0f - 10.0f;
                    x[i] = pattern == 3 ? -INFINITY : i % 7 == 3 ? -INFINITY : r;
                    if (pattern == 1 && i % 5 == 1) x[i] = NAN;
                    if (pattern == 2) x[i] = (float)(i % 4); // tied maxima
                }
                if (pattern == 1 && n > 2) x[n - 1] = 50.0f; // the maximum in the tail
                const int32_t want = argmax_scalar(x, n), got = sets[k].argmax(x, n);
                if (got != want)
                    fail_msg("%s argmax n=%d pattern %d: %d vs %d", sets[k].name, n, pattern, got,
                             want);
                const float ts[] = {-INFINITY, 0.0f, 9.0f, 9.99f, 60.0f};
                for (int32_t from = 0; from <= n && from < 40; from += 3)
                    for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
                        int32_t w = from;
                        while (w < n && !(x[w] > ts[j]))
                            w++;
                        const int32_t g = sets[k].next_above(x, from, n, ts[j]);
                        if (g != w)
                            fail_msg("%s next_above n=%d from %d t %g: %d vs %d", sets[k].name, n,
                                     from, (double)ts[j], g, w);
                    }
                if (want < 0 || pattern == 1) continue;
                const float m = x[want];
                double z = 0.0;
                for (int32_t i = 0; i < n; i++)
                    z += expf(x[i] - m);
                const double zs = sets[k].sum_exp(x, n, m);
                if (!(fabs(zs - z) <= 1e-6 * z))
                    fail_msg("%s sum_exp n=%d pattern %d: %.17g vs %.17g", sets[k].name, n, pattern,
                             zs, z);
            }
            if (n == big) break;
        }
        float none[3] = {NAN, -INFINITY, NAN};
        assert_int_equal(sets[k].argmax(none, 3), -1);
    }
    mem_free(x);
}
#endif

int main(void)
{
    kernels_init(); // the vocabulary passes a model's samplers run
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_match_llama_cpp),
        cmocka_unit_test(test_plain_softmax_distribution),
        cmocka_unit_test(test_temperature_sharpens_and_flattens),
        cmocka_unit_test(test_greedy_is_argmax_lowest_id_on_ties),
        cmocka_unit_test(test_bias_bans_and_boosts),
        cmocka_unit_test(test_all_banned_is_an_error),
        cmocka_unit_test(test_repeat_penalty_llama_cpp_semantics),
        cmocka_unit_test(test_frequency_presence_openai_semantics),
        cmocka_unit_test(test_top_k_keeps_k_best),
        cmocka_unit_test(test_top_p_keeps_smallest_prefix),
        cmocka_unit_test(test_min_p_drops_below_fraction_of_max),
        cmocka_unit_test(test_filters_then_temperature),
        cmocka_unit_test(test_top_p_large_vocab_matches_full_sort),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_draw_follows_mt19937),
        cmocka_unit_test(test_mirostat),
        cmocka_unit_test(test_probs_raw_and_post),
        cmocka_unit_test(test_invalid_params),
        cmocka_unit_test(test_new_allocation_failures),
#if defined(__x86_64__) || defined(__i386__)
        cmocka_unit_test(test_vocab_passes_simd),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
