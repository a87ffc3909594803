/* Sampler chain over one logits vector. Candidates live in one buffer sized for n_vocab at
 * creation; top-k and top-p use bounded heap selection instead of sorting the vocabulary.
 * Random numbers: MT19937 (Matsumoto & Nishimura, 1998) seeded with the low 32 bits of the
 * seed, each draw two outputs scaled to [0, 1) as C++'s generate_canonical<double, 53> does,
 * and the draw, temperature and top-p arithmetic follow llama.cpp's samplers
 * (src/llama-sampler.cpp), so a seeded request samples the tokens llama-server samples. */
#include "engine/sampler.h"

#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Top-p without top-k: first the best TOP_P_FIRST_M by heap selection (enough for peaked
 * distributions), else buckets TOP_P_BUCKET_RANGE / TOP_P_N_BUCKETS nats wide below the best
 * logit; tokens further down share the last bucket (their mass is below e^-32 each). */
#define TOP_P_FIRST_M      64
#define TOP_P_N_BUCKETS    256
#define TOP_P_BUCKET_RANGE 32.0f

#define MT_N 624 // MT19937 state words
#define MT_M 397

struct cand {
    int32_t id;
    float logit;
    float p; // probability within the current candidate set, when a stage computed it
};

/* Owned by the one thread that has the sampler; nothing here is shared. */
struct sampler {
    struct sampler_params p; // validated copy; p.logit_bias points at bias below
    int32_t n_vocab;
    uint64_t seed;             // the seed actually used
    uint32_t mt[MT_N];         // MT19937 state
    int32_t mt_i;              // next state word to temper (MT_N: regenerate first)
    struct cand *cand;         // n_vocab candidates
    int32_t n_cand;            // candidates in use
    bool is_sorted;            // cand[0..n_cand) is in descending (logit, -id) order
    struct sampler_bias *bias; // n_logit_bias entries, token ids validated
    int32_t *hist;             // ring of the last repeat_last_n accepted tokens (NULL when off)
    int32_t hist_len;          // entries in use, <= repeat_last_n
    int32_t hist_head;         // next slot to write
    int32_t *counts;           // n_vocab occurrence counts of the tokens in hist (NULL when off)
    float *raw;                // n_vocab copy of the incoming logits (NULL unless n_probs > 0)
    struct sampler_prob top_raw[SAMPLER_N_PROBS_MAX];
    struct sampler_prob top_post[SAMPLER_N_PROBS_MAX];
    int32_t n_top_raw, n_top_post;
    struct sampler_prob chosen_raw, chosen_post;
    float mu; // Mirostat's running surprise bound (2 tau at the start)
};

/* ---- random numbers ---------------------------------------------------------------------- */

static uint64_t splitmix64_next(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* MT19937's next 32-bit output (the reference algorithm's generate-then-temper). */
static uint32_t mt_next(struct sampler *s)
{
    if (s->mt_i >= MT_N) {
        for (int i = 0; i < MT_N; i++) {
            uint32_t y = (s->mt[i] & 0x80000000u) | (s->mt[(i + 1) % MT_N] & 0x7fffffffu);
            s->mt[i] = s->mt[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        s->mt_i = 0;
    }
    uint32_t y = s->mt[s->mt_i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* Uniform in [0, 1): two outputs, low word first, over 2^64 (generate_canonical<double, 53>
 * on a 32-bit engine, as llama.cpp's std::uniform_real_distribution<double> draws). */
static double rng_uniform(struct sampler *s)
{
    double lo = mt_next(s);
    double hi = mt_next(s);
    double r = (lo + hi * 4294967296.0) / 18446744073709551616.0;
    return r < 1.0 ? r : nextafter(1.0, 0.0);
}

static void rng_seed(struct sampler *s)
{
    s->mt[0] = (uint32_t)s->seed;
    for (uint32_t i = 1; i < MT_N; i++)
        s->mt[i] = 1812433253u * (s->mt[i - 1] ^ (s->mt[i - 1] >> 30)) + i;
    s->mt_i = MT_N;
}

/* ---- ordering and selection -------------------------------------------------------------- */

/* Total order used everywhere: higher logit first, then lower id, so ties are deterministic. */
static bool cand_better(const struct cand *a, const struct cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Min-heap (worst candidate at the root) over h[0..n). */
static void heap_sift_down(struct cand *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_better(&h[w], &h[l])) w = l;
        if (r < n && cand_better(&h[w], &h[r])) w = r;
        if (w == i) return;
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void heap_build(struct cand *h, int32_t n)
{
    for (int32_t i = n / 2 - 1; i >= 0; i--)
        heap_sift_down(h, n, i);
}

/* Turns the min-heap h[0..n) into descending order in place (heapsort). */
static void heap_sort_desc(struct cand *h, int32_t n)
{
    for (int32_t end = n - 1; end > 0; end--) {
        struct cand t = h[0];
        h[0] = h[end];
        h[end] = t;
        heap_sift_down(h, end, 0);
    }
}

/* Moves the best m of c[0..n) to c[0..m) in descending order; the rest stay behind them in
 * some order. O(n log m). */
static void select_top_inplace(struct cand *c, int32_t n, int32_t m)
{
    heap_build(c, m);
    for (int32_t i = m; i < n; i++) {
        if (cand_better(&c[i], &c[0])) {
            struct cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            heap_sift_down(c, m, 0);
        }
    }
    heap_sort_desc(c, m);
}

/* The passes over the whole vocabulary: these scalar loops, or the SIMD ones kernels_init
 * installs (x86/: AVX2, AVX-512). */
static int32_t argmax_ref(const float *x, int32_t n)
{
    int32_t best = -1;
    float best_l = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        if (x[i] > best_l) { // NaN compares false, so it never wins
            best_l = x[i];
            best = i;
        }
    }
    return best;
}

static double sum_exp_ref(const float *x, int32_t n, float m)
{
    double z = 0.0;
    for (int32_t i = 0; i < n; i++)
        z += expf(x[i] - m);
    return z;
}

static int32_t next_above_ref(const float *x, int32_t i, int32_t n, float t)
{
    for (; i < n; i++)
        if (x[i] > t) return i;
    return n;
}

// Set once by kernels_init before any sampler runs.
static struct sampler_passes vocab = {
    .argmax = argmax_ref,
    .next_above = next_above_ref,
    .sum_exp = sum_exp_ref,
};

void sampler_passes_select(const struct sampler_passes *p)
{
    vocab = *p;
}

/* Writes the best m of logits[0..n) to out[0..m) in descending order, without copying the rest.
 * NaN counts as -inf. */
static void select_top_logits(const float *logits, int32_t n, int32_t m, struct cand *out)
{
    for (int32_t i = 0; i < m; i++) {
        float l = logits[i];
        out[i] = (struct cand){i, isnan(l) ? -INFINITY : l, 0.0f};
    }
    heap_build(out, m);
    // A later token beats the worst kept one only with a larger logit (on a tie its id is
    // larger; NaN counts as -inf), so the scan skips to the next logit above the root's.
    for (int32_t i = vocab.next_above(logits, m, n, out[0].logit); i < n;
         i = vocab.next_above(logits, i + 1, n, out[0].logit)) {
        out[0] = (struct cand){i, logits[i], 0.0f};
        heap_sift_down(out, m, 0);
    }
    heap_sort_desc(out, m);
}

/* ---- construction ------------------------------------------------------------------------ */

static bool params_valid(const struct sampler_params *p, int32_t n_vocab)
{
    if (isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p)) return false;
    if (!(p->min_p <= 1.0f) || !(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return false;
    if (!isfinite(p->frequency_penalty) || !isfinite(p->presence_penalty)) return false;
    if (p->repeat_last_n < 0 || p->n_probs < 0 || p->n_probs > SAMPLER_N_PROBS_MAX) return false;
    if (p->mirostat < 0 || p->mirostat > 2) return false;
    if (p->mirostat && (!(p->mirostat_tau > 0.0f) || !isfinite(p->mirostat_tau) ||
                        !(p->mirostat_eta >= 0.0f) || !(p->mirostat_eta <= 1.0f)))
        return false;
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias)) return false;
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const struct sampler_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab || isnan(b->bias) || b->bias == INFINITY)
            return false;
    }
    return true;
}

static bool penalties_on(const struct sampler_params *p)
{
    return p->repeat_last_n > 0 && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                    p->presence_penalty != 0.0f);
}

/* A clock-derived seed of 32 bits, the width MT19937 is seeded with, so sampler_seed()
 * reports the seed that reproduces the draw. */
static uint64_t random_seed(const struct sampler *s)
{
    uint64_t x = (uint64_t)clock_now_ns() ^ ((uint64_t)clock_unix_s() << 32) ^ (uintptr_t)s;
    return splitmix64_next(&x) & 0xffffffffu;
}

int sampler_new(const struct sampler_params *p, int32_t n_vocab, struct sampler **out)
{
    if (!p || !out || n_vocab < 1 || !params_valid(p, n_vocab)) return ERR_INVALID;
    struct sampler *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = mem_calloc((size_t)n_vocab, sizeof *s->cand);
    if (!s->cand) goto out_free;
    if (p->n_logit_bias > 0) {
        s->bias = mem_calloc((size_t)p->n_logit_bias, sizeof *s->bias);
        if (!s->bias) goto out_free;
        memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    if (penalties_on(p)) {
        s->hist = mem_calloc((size_t)p->repeat_last_n, sizeof *s->hist);
        s->counts = mem_calloc((size_t)n_vocab, sizeof *s->counts);
        if (!s->hist || !s->counts) goto out_free;
    }
    if (p->n_probs > 0) {
        s->raw = mem_calloc((size_t)n_vocab, sizeof *s->raw);
        if (!s->raw) goto out_free;
    }
    s->seed = p->seed == SAMPLER_SEED_RANDOM ? random_seed(s) : (uint64_t)p->seed;
    rng_seed(s);
    s->mu = 2.0f * p->mirostat_tau;
    *out = s;
    return ERR_OK;
out_free:
    sampler_free(s);
    return ERR_NOMEM;
}

void sampler_free(struct sampler *s)
{
    if (!s) return;
    mem_free(s->raw);
    mem_free(s->counts);
    mem_free(s->hist);
    mem_free(s->bias);
    mem_free(s->cand);
    mem_free(s);
}

void sampler_reset(struct sampler *s)
{
    if (s->counts) {
        for (int32_t i = 0; i < s->hist_len; i++)
            s->counts[s->hist[i]] = 0;
    }
    s->hist_len = 0;
    s->hist_head = 0;
    s->n_top_raw = 0;
    s->n_top_post = 0;
    rng_seed(s);
    s->mu = 2.0f * s->p.mirostat_tau;
}

uint64_t sampler_seed(const struct sampler *s)
{
    return s->seed;
}

int sampler_accept(struct sampler *s, int32_t token)
{
    if (token < 0 || token >= s->n_vocab) return ERR_INVALID;
    if (!s->hist) return ERR_OK;
    int32_t cap = s->p.repeat_last_n;
    if (s->hist_len == cap)
        s->counts[s->hist[s->hist_head]]--;
    else
        s->hist_len++;
    s->hist[s->hist_head] = token;
    s->counts[token]++;
    s->hist_head = (s->hist_head + 1) % cap;
    return ERR_OK;
}

/* ---- chain stages ------------------------------------------------------------------------ */

static void apply_bias(const struct sampler *s, float *logits)
{
    for (int32_t i = 0; i < s->p.n_logit_bias; i++)
        logits[s->bias[i].token] += s->bias[i].bias;
}

/* Each distinct token in the window is penalised once: its count is negated while the loop
 * runs to mark it done, then restored, so no per-token scratch memory is needed. */
static void apply_penalties(struct sampler *s, float *logits)
{
    const struct sampler_params *p = &s->p;
    for (int32_t i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        int32_t n = s->counts[t];
        if (n <= 0) continue;
        float l = logits[t];
        // llama.cpp: non-positive logits are multiplied, positive ones divided.
        l = l <= 0.0f ? l * p->repeat_penalty : l / p->repeat_penalty;
        l -= (float)n * p->frequency_penalty + p->presence_penalty;
        logits[t] = l;
        s->counts[t] = -n;
    }
    for (int32_t i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        if (s->counts[t] < 0) s->counts[t] = -s->counts[t];
    }
}

static float cand_max_logit(const struct sampler *s)
{
    if (s->is_sorted) return s->cand[0].logit;
    float m = -INFINITY;
    for (int32_t i = 0; i < s->n_cand; i++)
        m = s->cand[i].logit > m ? s->cand[i].logit : m;
    return m;
}

/* Sets p on every candidate (softmax at the candidates' current logits). Returns false when
 * all are -inf. */
static bool cand_softmax(struct sampler *s)
{
    float m = cand_max_logit(s);
    if (m == -INFINITY) return false;
    float z = 0.0f; // single precision, summed and divided as llama.cpp's top-p does
    for (int32_t i = 0; i < s->n_cand; i++) {
        float e = expf(s->cand[i].logit - m);
        s->cand[i].p = e;
        z += e;
    }
    for (int32_t i = 0; i < s->n_cand; i++)
        s->cand[i].p /= z;
    return true;
}

static void stage_top_k(struct sampler *s, const float *logits)
{
    int32_t k = s->p.top_k;
    if (k > 0 && k < s->n_vocab) {
        select_top_logits(logits, s->n_vocab, k, s->cand);
        s->n_cand = k;
        s->is_sorted = true;
        return;
    }
    for (int32_t i = 0; i < s->n_vocab; i++)
        s->cand[i] = (struct cand){i, isnan(logits[i]) ? -INFINITY : logits[i], 0.0f};
    s->n_cand = s->n_vocab;
    s->is_sorted = false;
}

/* Returns how many of the sorted c[0..m) reach cumulative probability top_p counting from
 * base, or 0 if they do not. */
static int32_t top_p_cut(const struct cand *c, int32_t m, double base, float top_p)
{
    float cum = (float)base; // single precision, as llama.cpp accumulates it
    for (int32_t i = 0; i < m; i++) {
        cum += c[i].p;
        if (cum >= top_p) return i + 1;
    }
    return 0;
}

static int32_t bucket_of(float logit, float max_logit)
{
    float d = (max_logit - logit) * (TOP_P_N_BUCKETS / TOP_P_BUCKET_RANGE);
    return d >= TOP_P_N_BUCKETS - 1 ? TOP_P_N_BUCKETS - 1 : (int32_t)d; // -inf: last bucket
}

/* Moves the candidates of c[from..n) whose bucket is in [lo, hi) to c[from..), keeping the
 * others behind them; returns the end of the moved run. */
static int32_t gather_buckets(struct cand *c, int32_t n, int32_t from, float max_logit, int32_t lo,
                              int32_t hi)
{
    int32_t w = from;
    for (int32_t i = from; i < n; i++) {
        int32_t b = bucket_of(c[i].logit, max_logit);
        if (b >= lo && b < hi) {
            struct cand t = c[w];
            c[w++] = c[i];
            c[i] = t;
        }
    }
    return w;
}

/* Top-p over unsorted candidates without sorting them all: bucket the mass by distance from
 * the best logit, keep every bucket above the one where the mass reaches top_p whole, and sort
 * only that boundary bucket. The kept set equals the full sort's; its order is not sorted. */
static void top_p_buckets(struct sampler *s, float top_p, float max_logit)
{
    double mass[TOP_P_N_BUCKETS] = {0};
    for (int32_t i = 0; i < s->n_cand; i++)
        mass[bucket_of(s->cand[i].logit, max_logit)] += s->cand[i].p;
    int32_t b = 0;
    double cum = 0.0;
    for (; b < TOP_P_N_BUCKETS - 1 && cum + mass[b] < top_p; b++)
        cum += mass[b];
    // Two partitions: buckets <= b to the front (one pass over all), then < b within those.
    int32_t w = gather_buckets(s->cand, s->n_cand, 0, max_logit, 0, b + 1);
    int32_t k = gather_buckets(s->cand, w, 0, max_logit, 0, b);
    select_top_inplace(s->cand + k, w - k, w - k);
    int32_t keep = top_p_cut(s->cand + k, w - k, cum, top_p);
    s->n_cand = keep > 0 ? k + keep : w; // rounding can leave the full set just short
    s->is_sorted = false;
}

/* Keeps the smallest prefix (by probability) whose mass reaches top_p, at least one token.
 * Unsorted candidates (no top-k) first try the best TOP_P_FIRST_M, which suffices for peaked
 * distributions, then fall back to buckets. */
static void stage_top_p(struct sampler *s)
{
    float top_p = s->p.top_p;
    if (top_p >= 1.0f || s->n_cand <= 1) return;
    if (top_p <= 0.0f) top_p = 0.0f; // the first token alone reaches it
    cand_softmax(s);
    int32_t m = s->n_cand < TOP_P_FIRST_M || s->is_sorted ? s->n_cand : TOP_P_FIRST_M;
    if (!s->is_sorted) select_top_inplace(s->cand, s->n_cand, m);
    int32_t keep = top_p_cut(s->cand, m, 0.0, top_p);
    if (keep > 0 || m == s->n_cand) {
        s->n_cand = keep > 0 ? keep : m;
        s->is_sorted = true;
        return;
    }
    top_p_buckets(s, top_p, s->cand[0].logit);
}

/* p_i >= min_p * p_max, done in logit space: l_i >= l_max + log(min_p). */
static void stage_min_p(struct sampler *s)
{
    if (s->p.min_p <= 0.0f || s->n_cand <= 1) return;
    float thr = cand_max_logit(s) + logf(s->p.min_p);
    int32_t w = 0;
    for (int32_t i = 0; i < s->n_cand; i++) {
        if (s->cand[i].logit >= thr) s->cand[w++] = s->cand[i];
    }
    s->n_cand = w > 0 ? w : 1; // the max always passes unless rounding; keep one anyway
}

/* The seeded draw over the candidates' logits, as llama.cpp's dist sampler: weights
 * e^(l - l_max) in single precision summed in double, the first candidate whose running sum
 * reaches u * sum, and p normalized on the way. One random number per draw, also for a single
 * candidate (as there). Returns the index of the drawn candidate. */
static int32_t draw(struct sampler *s)
{
    double u = rng_uniform(s);
    if (s->n_cand == 1) {
        s->cand[0].p = 1.0f;
        return 0;
    }
    float m = cand_max_logit(s);
    double sum = 0.0;
    for (int32_t i = 0; i < s->n_cand; i++) {
        s->cand[i].p = expf(s->cand[i].logit - m);
        sum += s->cand[i].p;
    }
    double target = sum * u, run = 0.0;
    int32_t chosen = -1;
    for (int32_t i = 0; i < s->n_cand; i++) {
        run += s->cand[i].p;
        if (chosen < 0 && run >= target) chosen = i;
        s->cand[i].p = (float)(s->cand[i].p / sum);
    }
    return chosen >= 0 ? chosen : s->n_cand - 1;
}

/* ---- Mirostat ------------------------------------------------------------------------------ */

#define MIROSTAT_M 100 // v1 estimates the Zipf exponent from the best M tokens (llama.cpp's m)

/* v1: top-k with k from the estimated Zipf exponent s_hat and the bound mu (candidates have p
 * over the whole vocabulary). */
static void mirostat_v1_cut(struct sampler *s)
{
    int32_t m = s->n_cand < MIROSTAT_M ? s->n_cand : MIROSTAT_M;
    select_top_inplace(s->cand, s->n_cand, m);
    float sum_tb = 0.0f, sum_tt = 0.0f;
    for (int32_t i = 0; i + 1 < m; i++) {
        float t = logf((float)(i + 2) / (float)(i + 1));
        float b = logf(s->cand[i].p / s->cand[i + 1].p);
        sum_tb += t * b;
        sum_tt += t * t;
    }
    float s_hat = sum_tt > 0.0f ? sum_tb / sum_tt : 1.0f;
    float eps = s_hat - 1.0f;
    float k =
        powf((eps * powf(2.0f, s->mu)) / (1.0f - powf((float)s->n_vocab, -eps)), 1.0f / s_hat);
    int32_t ki = isfinite(k) && k >= 1.0f ? (k < (float)s->n_cand ? (int32_t)k : s->n_cand) : 1;
    if (ki > m) select_top_inplace(s->cand, s->n_cand, ki);
    s->n_cand = ki;
    s->is_sorted = true;
}

/* v2: keeps the tokens whose surprise -log2 p is at most mu (at least the best one). */
static void mirostat_v2_cut(struct sampler *s)
{
    float p_min = exp2f(-s->mu);
    int32_t w = 0;
    for (int32_t i = 0; i < s->n_cand; i++)
        if (s->cand[i].p >= p_min) s->cand[w++] = s->cand[i];
    if (w == 0) {
        select_top_inplace(s->cand, s->n_cand, 1);
        w = 1;
    }
    select_top_inplace(s->cand, w, w);
    s->n_cand = w;
    s->is_sorted = true;
}

/* Cuts the (temperature-scaled) candidates as Mirostat does, draws, and moves mu toward tau
 * by the draw's surprise. Returns the index of the drawn candidate. */
static int32_t mirostat_draw(struct sampler *s)
{
    cand_softmax(s); // cannot fail: the best candidate is finite
    if (s->p.mirostat == 1)
        mirostat_v1_cut(s);
    else
        mirostat_v2_cut(s);
    int32_t idx = draw(s); // renormalizes p over the kept tokens
    float surprise = -log2f(s->cand[idx].p);
    s->mu -= s->p.mirostat_eta * (surprise - s->p.mirostat_tau);
    return idx;
}

/* ---- probability reports ----------------------------------------------------------------- */

static struct sampler_prob prob_make(int32_t token, float logit, float lse)
{
    float lp = logit - lse;
    return (struct sampler_prob){token, expf(lp), logit == -INFINITY ? -INFINITY : lp};
}

static float logsumexp(const float *x, int32_t n)
{
    const int32_t best = vocab.argmax(x, n);
    if (best < 0) return -INFINITY;
    const float m = x[best];
    return m + (float)log(vocab.sum_exp(x, n, m));
}

/* The raw distribution's top n_probs and the chosen token, from the saved copy of the logits.
 * The top list is selected into the candidate buffer, which the chain no longer needs. */
static void record_raw(struct sampler *s, int32_t token)
{
    int32_t n = s->p.n_probs < s->n_vocab ? s->p.n_probs : s->n_vocab;
    float lse = logsumexp(s->raw, s->n_vocab);
    select_top_logits(s->raw, s->n_vocab, n, s->cand);
    s->n_top_raw = 0;
    for (int32_t i = 0; i < n && s->cand[i].logit > -INFINITY; i++)
        s->top_raw[s->n_top_raw++] = prob_make(s->cand[i].id, s->cand[i].logit, lse);
    float l = isnan(s->raw[token]) ? -INFINITY : s->raw[token];
    s->chosen_raw = prob_make(token, l, lse);
}

static struct sampler_prob prob_from_p(int32_t token, float p)
{
    return (struct sampler_prob){token, p, p > 0.0f ? logf(p) : -INFINITY};
}

static void record_post(struct sampler *s, int32_t chosen_idx)
{
    s->chosen_post = prob_from_p(s->cand[chosen_idx].id, s->cand[chosen_idx].p);
    int32_t n = s->p.n_probs < s->n_cand ? s->p.n_probs : s->n_cand;
    if (!s->is_sorted) select_top_inplace(s->cand, s->n_cand, n);
    s->n_top_post = 0;
    for (int32_t i = 0; i < n && s->cand[i].p > 0.0f; i++)
        s->top_post[s->n_top_post++] = prob_from_p(s->cand[i].id, s->cand[i].p);
}

void sampler_get_probs(const struct sampler *s, enum sampler_dist which, struct sampler_probs *out)
{
    bool is_raw = which == SAMPLER_DIST_RAW;
    out->top = is_raw ? s->top_raw : s->top_post;
    out->n_top = is_raw ? s->n_top_raw : s->n_top_post;
    out->chosen = is_raw ? s->chosen_raw : s->chosen_post;
}

/* ---- the chain --------------------------------------------------------------------------- */

static int sample_greedy(struct sampler *s, const float *logits, int32_t *out_token)
{
    const int32_t best = vocab.argmax(logits, s->n_vocab);
    if (best < 0) return ERR_INVALID;
    if (s->raw) record_raw(s, best);
    s->chosen_post = prob_from_p(best, 1.0f);
    s->top_post[0] = s->chosen_post;
    s->n_top_post = s->p.n_probs > 0 ? 1 : 0;
    *out_token = best;
    return ERR_OK;
}

int sampler_sample(struct sampler *s, float *logits, int32_t *out_token)
{
    s->n_top_raw = 0;
    s->n_top_post = 0;
    if (s->raw) memcpy(s->raw, logits, (size_t)s->n_vocab * sizeof *logits);
    apply_bias(s, logits);
    if (s->hist) apply_penalties(s, logits);
    if (s->p.temperature <= 0.0f) return sample_greedy(s, logits, out_token);

    if (s->p.mirostat) {
        int32_t k = s->p.top_k;
        s->p.top_k = 0; // every token is a candidate; Mirostat makes the cut
        stage_top_k(s, logits);
        s->p.top_k = k;
    } else {
        stage_top_k(s, logits);
    }
    if (cand_max_logit(s) == -INFINITY) return ERR_INVALID;
    if (!s->p.mirostat) {
        stage_top_p(s);
        stage_min_p(s);
    }
    // llama.cpp divides each logit by the temperature; where a tiny temperature would overflow
    // that to inf (and inf - inf in the draw), scale relative to the best logit instead.
    float t = s->p.temperature;
    float m = cand_max_logit(s);
    bool is_finite = isfinite(m / t); // lower logits only shrink toward -inf, which is safe
    for (int32_t i = 0; i < s->n_cand; i++)
        s->cand[i].logit = is_finite ? s->cand[i].logit / t : (s->cand[i].logit - m) / t;
    // The best candidate is finite, so the draw is defined.
    int32_t idx = s->p.mirostat ? mirostat_draw(s) : draw(s);
    int32_t token = s->cand[idx].id;
    if (s->p.n_probs > 0) {
        record_post(s, idx);
        record_raw(s, token);
    }
    *out_token = token;
    return ERR_OK;
}
