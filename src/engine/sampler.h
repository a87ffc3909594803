/* Token sampler: turns one logits vector (n_vocab floats) into one token id through a fixed
 * chain, in llama.cpp's default order: logit bias -> repetition / frequency / presence
 * penalties -> top-k -> top-p -> min-p -> temperature -> seeded draw; or, with mirostat,
 * bias -> penalties -> temperature -> Mirostat (Basu et al., 2020) as llama.cpp chains it. Not a grammar or a
 * stop-string filter (those live elsewhere). Penalties follow llama.cpp for repeat_penalty and
 * OpenAI's chat completions for frequency/presence, over the same window of accepted tokens. */
#ifndef ENGINE_SAMPLER_H
#define ENGINE_SAMPLER_H

#include <stdint.h>

#define SAMPLER_SEED_RANDOM (-1) // seed from the clock; sampler_seed() tells which one
#define SAMPLER_N_PROBS_MAX 100  // cap on n_probs (OpenAI allows top_logprobs <= 20)

struct sampler_bias {
    int32_t token; // 0 <= token < n_vocab
    float bias;    // added to the logit; -INFINITY bans the token; +inf and NaN are invalid
};

struct sampler_params {
    float temperature;       // <= 0: greedy (argmax after bias and penalties)
    int32_t top_k;           // <= 0 or >= n_vocab: disabled
    float top_p;             // >= 1: disabled; <= 0 keeps only the best token
    float min_p;             // <= 0: disabled; keeps p >= min_p * p_max; must be <= 1
    float repeat_penalty;    // > 0; 1: off. Divides positive logits, multiplies negative ones
    int32_t repeat_last_n;   // window (accepted tokens) for all penalties; 0: penalties off.
                             // llama.cpp's -1 ("context size") is resolved by the caller
    float frequency_penalty; // subtracted once per occurrence in the window
    float presence_penalty;  // subtracted once if the token occurs in the window
    int64_t seed;            // SAMPLER_SEED_RANDOM, or any other value used as is
    const struct sampler_bias *logit_bias; // n_logit_bias entries; copied by sampler_new
    int32_t n_logit_bias;                  // later entries for the same token add up
    int32_t n_probs;    // 0..SAMPLER_N_PROBS_MAX: record the top n_probs of each distribution
    int32_t mirostat;   // 0: off; 1 or 2: Mirostat v1/v2 replaces top-k/top-p/min-p (after
                        // bias, penalties and temperature), steering the surprise to tau
    float mirostat_tau; // target surprise in bits (> 0)
    float mirostat_eta; // learning rate of the running bound mu (0..1)
};

/* llama.cpp's defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1
 * (off), repeat_last_n 64, frequency/presence 0, random seed, no bias, no probabilities.
 * Callers start from this and override fields. Cannot fail. */
static inline struct sampler_params sampler_params_default(void)
{
    struct sampler_params p = {
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .seed = SAMPLER_SEED_RANDOM,
        .logit_bias = 0,
        .n_logit_bias = 0,
        .n_probs = 0,
        .mirostat = 0,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
    };
    return p;
}

struct sampler;

/* One token with its probability in a distribution. */
struct sampler_prob {
    int32_t token;
    float prob;    // 0..1
    float logprob; // natural log of prob, computed stably; -INFINITY when prob is 0
};

/* Which distribution sampler_get_probs() reports. */
enum sampler_dist {
    SAMPLER_DIST_RAW = 0,  // softmax of the logits exactly as passed to sampler_sample()
    SAMPLER_DIST_POST = 1, // the distribution the token was drawn from (after the whole chain;
                           // one-hot on the argmax when greedy)
};

/* A view of the last sample's probabilities; borrowed, valid until the next sampler_sample(),
 * sampler_reset() or sampler_free() on the same sampler. */
struct sampler_probs {
    const struct sampler_prob *top; // n_top entries, most probable first (ties: lower id first)
    int32_t n_top;                  // min(n_probs, tokens with a defined probability)
    struct sampler_prob chosen;     // the sampled token in this distribution
};

/* Creates a sampler for a vocabulary of n_vocab tokens. Everything it needs per token (the
 * candidate buffer, the penalty window and counts, the raw-logits copy when n_probs > 0) is
 * allocated here, so sampler_sample() never allocates. p and p->logit_bias are borrowed for the
 * call only. Returns ERR_INVALID for n_vocab < 1 or a field out of the range documented above,
 * ERR_NOMEM. Caller frees *out with sampler_free(). Thread-safe for distinct samplers; one
 * sampler belongs to one thread at a time. */
int sampler_new(const struct sampler_params *p, int32_t n_vocab, struct sampler **out);

/* Frees the sampler. sampler_free(NULL) is a no-op. */
void sampler_free(struct sampler *s);

/* Appends token to the penalty window (the oldest entry falls out after repeat_last_n). Feed the
 * prompt tokens too if they should count, as llama.cpp's server does. A no-op when every
 * penalty is off. Returns ERR_INVALID for a token outside [0, n_vocab); cannot fail otherwise. */
int sampler_accept(struct sampler *s, int32_t token);

/* Samples one token from logits (n_vocab floats). logits is modified in place (bias, penalties)
 * and must not be read for meaning afterwards. Does not accept the token: call
 * sampler_accept() with it. NaN logits count as -inf. Returns ERR_INVALID when every token is
 * banned (all logits -inf); then *out_token is unchanged. Allocates nothing. */
int sampler_sample(struct sampler *s, float *logits, int32_t *out_token);

/* Forgets the penalty window and restarts the random stream from the seed, so the same
 * sequence of calls gives the same tokens again. Cannot fail. */
void sampler_reset(struct sampler *s);

/* The seed in use (the drawn one when the params said SAMPLER_SEED_RANDOM). Cannot fail. */
uint64_t sampler_seed(const struct sampler *s);

/* The sampler's passes over a whole vocabulary of n logits x, each with the scalar loop's
 * answer (sum_exp within 1e-6 relative of it, the same value every time on one set). */
struct sampler_passes {
    // The first index of the largest x[i] that is not NaN and above -inf; -1 when none is.
    int32_t (*argmax)(const float *x, int32_t n);
    // The first j in [i, n) with x[j] > t (NaN never), or n.
    int32_t (*next_above)(const float *x, int32_t i, int32_t n, float t);
    // The sum of e^(x[i] - m) in double.
    double (*sum_exp)(const float *x, int32_t n, float m);
};

/* Makes p's passes (copied) the ones every sampler runs; the scalar loops until then. Only
 * kernels_init (engine/kernels.h) calls it, once, before any sampler exists. Cannot fail. */
void sampler_passes_select(const struct sampler_passes *p);

/* Fills *out with the top-n_probs view of the last sampler_sample() (n_top = 0 when n_probs
 * was 0 or nothing was sampled yet). Cannot fail. */
void sampler_get_probs(const struct sampler *s, enum sampler_dist which, struct sampler_probs *out);

#endif
