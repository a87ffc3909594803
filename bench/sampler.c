/* Sampler cost per token at a Qwen-sized vocabulary (151936) for the common settings, against a
 * reference measured in the same run: a full qsort of the vocabulary, which is what a chain
 * without partial selection pays for top-k or top-p. */
#include "engine/kernels.h"
#include "engine/sampler.h"
#include "util/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_VOCAB 151936
#define N_ITER  200

struct pair {
    float logit;
    int32_t id;
};

static int cmp_pair(const void *a, const void *b)
{
    float x = ((const struct pair *)a)->logit, y = ((const struct pair *)b)->logit;
    return (x < y) - (x > y);
}

/* Logits shaped like a language model's: a Gaussian bulk with a thin head of likely tokens. */
static void make_logits(float *l, uint64_t seed)
{
    for (int i = 0; i < N_VOCAB; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        double u1 = ((seed >> 11) + 1.0) * 0x1.0p-53;
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        double u2 = (seed >> 11) * 0x1.0p-53;
        l[i] = (float)(2.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    for (int i = 0; i < 50; i++)
        l[(i * 7919) % N_VOCAB] += 12.0f - (float)i * 0.2f;
}

static double time_sampler(const char *label, struct sampler_params p, const float *logits,
                           float *tmp)
{
    struct sampler *s = NULL;
    if (sampler_new(&p, N_VOCAB, &s) != 0) return -1;
    int32_t t = 0;
    int64_t t0 = clock_now_ns();
    for (int i = 0; i < N_ITER; i++) {
        memcpy(tmp, logits, N_VOCAB * sizeof *tmp);
        sampler_sample(s, tmp, &t);
    }
    double us = (double)(clock_now_ns() - t0) / 1e3 / N_ITER;
    sampler_free(s);
    printf("%-44s %8.1f us/token\n", label, us);
    return us;
}

int main(void)
{
    kernels_init();
    float *logits = malloc(N_VOCAB * sizeof *logits), *tmp = malloc(N_VOCAB * sizeof *tmp);
    struct pair *pairs = malloc(N_VOCAB * sizeof *pairs);
    if (!logits || !tmp || !pairs) return 1;
    make_logits(logits, 1);

    int64_t t0 = clock_now_ns();
    for (int i = 0; i < N_ITER / 10; i++) {
        memcpy(tmp, logits, N_VOCAB * sizeof *tmp);
        for (int k = 0; k < N_VOCAB; k++)
            pairs[k] = (struct pair){tmp[k], k};
        qsort(pairs, N_VOCAB, sizeof *pairs, cmp_pair);
    }
    double ref = (double)(clock_now_ns() - t0) / 1e3 / (N_ITER / 10);
    printf("%-44s %8.1f us/token (reference)\n", "copy + full qsort of the vocabulary", ref);

    struct sampler_params d = sampler_params_default();
    d.seed = 1;
    double a = time_sampler("defaults (k40 p.95 minp.05 T.8)", d, logits, tmp);
    struct sampler_params p = d;
    p.top_k = 0;
    p.min_p = 0.0f;
    double b = time_sampler("top_k off, top_p 0.95", p, logits, tmp);
    p = d;
    p.top_k = 0;
    p.top_p = 1.0f;
    double c = time_sampler("top_k off, min_p 0.05 only", p, logits, tmp);
    p = d;
    p.temperature = 0.0f;
    double g = time_sampler("greedy", p, logits, tmp);
    p = d;
    p.repeat_penalty = 1.1f;
    p.n_probs = 10;
    double e = time_sampler("defaults + penalties + n_probs 10", p, logits, tmp);
    printf("ratios to reference: defaults %.3f, top_p %.3f, min_p %.3f, greedy %.3f, probs %.3f\n",
           a / ref, b / ref, c / ref, g / ref, e / ref);
    free(pairs);
    free(tmp);
    free(logits);
    return 0;
}
