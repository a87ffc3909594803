/* Structured-output cost in a whole generation: decode speed of the same model through the
 * cpu platform's scheduler (as the server runs it) without a grammar, under the json_object
 * grammar, under a JSON schema's grammar and under an array of integers (the worst case: the
 * sampled token is almost never a digit, so every step masks the vocabulary). Sampling at temperature 0.8 with fixed seeds, so
 * the grammar rejects many sampled tokens and pays the full vocabulary mask there. Runs the
 * modes in turn, `runs` times (each round starting with another mode), so machine load hits
 * all alike; prints the median decode
 * tokens/s of each and its ratio to the unconstrained run.
 *   bench_grammar_gen [-t THREADS] [-n TOKENS] [-r RUNS] MODEL */
#include "cpu_bench.h"
#include "text/grammar/json_schema.h"
#include "text/tokenizer/tokenizer.h"
#include "util/buf.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS      15
#define PROMPT_TOKENS 32

struct gen_result {
    double tok_per_s; // decode speed (prompt excluded)
    int n_predicted;
};

/* With BENCH_VERBOSE set, prints what a run generated, to see the grammar at work. */
static void print_text(struct request *r, const struct tokenizer *tok, const char *mode)
{
    if (!getenv("BENCH_VERBOSE") || !tok) return;
    struct gen_event ev;
    int cursor = 0;
    enum finish_reason fin;
    struct buf text;
    buf_init(&text);
    while (request_wait_events(r, &cursor, &ev, 1, 0, &fin) == 1)
        tok_decode(tok, &ev.token, 1, false, &text);
    printf("  %-12s %.*s\n", mode, (int)text.len, text.data ? text.data : "");
    buf_deinit(&text);
}

/* Generates up to n_tokens after a fixed prompt under grammar (NULL: none). False on error. */
static bool generate(struct platform_model *m, const struct platform_model_desc *d, char *grammar,
                     int n_tokens, int seed, const char *mode, struct gen_result *out)
{
    const int n_vocab = d->n_vocab;
    int32_t prompt[PROMPT_TOKENS];
    for (int k = 0; k < PROMPT_TOKENS; k++)
        prompt[k] = (int32_t)((k * 7919 + 13) % n_vocab);
    struct gen_params gp;
    gen_params_defaults(&gp);
    gp.temperature = 0.8f;
    gp.seed = seed;
    gp.max_tokens = n_tokens;
    gp.ignore_eos = true; // the same length unconstrained; a grammar may still end sooner
    gp.grammar = grammar; // request_new copies it
    struct request *r;
    if (request_new(REQUEST_GENERATE, prompt, PROMPT_TOKENS, &gp, n_tokens + 1, &r) != ERR_OK)
        return false;
    bench_run(m, r);
    struct request_timings t;
    struct errmsg err;
    errmsg_clear(&err);
    enum finish_reason fin = request_outcome(r, NULL, &err, &t);
    if (seed == 1) print_text(r, d->tokenizer, mode);
    request_release(r);
    if (fin == FINISH_ERROR || t.n_predicted < 2 || t.predicted_ms <= 0) {
        fprintf(stderr, "generation failed: %s\n", fin == FINISH_ERROR ? err.msg : "no tokens");
        return false;
    }
    out->tok_per_s = (double)t.n_predicted / t.predicted_ms * 1e3;
    out->n_predicted = t.n_predicted;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* An object with the shapes the structured-output tests use: nested object, array, enum,
 * required fields, free strings (where most of the vocabulary is allowed). */
static const char schema_text[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": "
    "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150}, \"mood\": {\"enum\": [\"calm\", "
    "\"busy\"]}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}, "
    "\"address\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "
    "\"required\": [\"city\"]}}, \"required\": [\"name\", \"age\", \"mood\", \"tags\", "
    "\"address\"]}";

/* The worst case: digits and commas only, so nearly every sampled token is rejected and the
 * full mask runs at every step. */
static const char int_array_schema_text[] = "{\"type\": \"array\", \"items\": {\"type\": "
                                            "\"integer\"}, \"minItems\": 32}";

static bool schema_gbnf(const char *text, struct buf *out)
{
    json_t *s = json_loads(text, 0, NULL);
    struct errmsg err;
    errmsg_clear(&err);
    int rc = s ? json_schema_to_gbnf(s, out, &err) : ERR_INVALID;
    json_decref(s);
    if (rc != ERR_OK) fprintf(stderr, "schema: %s\n", err.msg);
    return rc == ERR_OK;
}

int main(int argc, char **argv)
{
    int n_threads = 2, n_tokens = 64, runs = 3, i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-t"))
            n_threads = v;
        else if (!strcmp(argv[i], "-n"))
            n_tokens = v;
        else if (!strcmp(argv[i], "-r"))
            runs = v;
    }
    if (i >= argc || runs < 1 || runs > MAX_RUNS || n_tokens < 2 || n_tokens > 4096) {
        fprintf(stderr, "usage: bench_grammar_gen [-t THREADS] [-n TOKENS] [-r RUNS] MODEL\n");
        return 2;
    }
    struct platform_model_desc d;
    struct platform_model *m = bench_load(argv[i], PROMPT_TOKENS + n_tokens + 8, n_threads, &d);
    if (!m) return 1;
    struct buf any, schema, ints;
    buf_init(&any);
    buf_init(&schema);
    buf_init(&ints);
    if (json_schema_any_object_gbnf(&any) != ERR_OK || !schema_gbnf(schema_text, &schema) ||
        !schema_gbnf(int_array_schema_text, &ints))
        return 1;
    enum { N_MODES = 4 };
    const char *names[N_MODES] = {"none", "json_object", "json_schema", "int_array"};
    char *grammars[N_MODES] = {NULL, any.data, schema.data, ints.data};
    double speed[N_MODES][MAX_RUNS];
    int n_pred[N_MODES] = {0};
    // Each round starts with another mode, so no mode always runs first (cold) or last.
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < N_MODES; k++) {
            const int g = (k + r) % N_MODES;
            struct gen_result res;
            if (!generate(m, &d, grammars[g], n_tokens, r + 1, names[g], &res)) return 1;
            speed[g][r] = res.tok_per_s;
            n_pred[g] += res.n_predicted;
        }
    const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
    printf("%s, vocab %d, %d threads, up to %d tokens at temperature 0.8, median of %d:\n", name,
           d.n_vocab, n_threads, n_tokens, runs);
    qsort(speed[0], (size_t)runs, sizeof speed[0][0], cmp_double);
    double base = speed[0][runs / 2];
    for (int g = 0; g < N_MODES; g++) {
        if (g > 0) qsort(speed[g], (size_t)runs, sizeof speed[g][0], cmp_double);
        double v = speed[g][runs / 2];
        printf("  %-12s %7.2f tok/s  %5.1f tokens/run  %.3f of unconstrained (%+.1f%%)\n", names[g],
               v, (double)n_pred[g] / runs, base > 0 ? v / base : 0,
               base > 0 ? (v / base - 1) * 100 : 0);
    }
    buf_deinit(&any);
    buf_deinit(&schema);
    buf_deinit(&ints);
    bench_unload(m);
    return 0;
}
