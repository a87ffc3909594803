/* Embedding benchmark: embeddings/s of the BERT encoder on a synthetic bge-small-shaped model
 * (12 layers, 384 wide, 12 heads, FFN 1536, vocab 30522, F16 matrices) written to build/,
 * for 64 inputs of 32 tokens and 8 inputs of 512 tokens, 2 threads, in batches of the
 * encoder's default capacity. With LLAMAPI_REF_BIN=<dir holding llama-embedding> the same
 * file and inputs (as text, one word token per word) run through the reference's
 * llama-embedding (its wall time minus that of a one-line run, i.e. without start-up and
 * load) and the ratio is printed. Then a decoder as an embedding model: a small synthetic
 * qwen3 (4 layers of Qwen3-Embedding-0.6B's shape, its vocabulary size, F16) on the same two
 * workloads with last-token pooling, packed into one KV allocation as the cpu platform does,
 * against the same inputs decoded for logits in the same run (what the pass costs without
 * skipping the output matrix), and against the reference's llama-embedding --pooling last.
 * BENCH_EMBED_ONLY=bert or decoder runs one part. Usage: bench_embed [bert-path [decoder-path]] */
#include "engine/bert/bert.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "engine/kernels.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/gguf/synth.h"
#include "engine/threadpool.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BGE_VOCAB "../shared/models/vocab/ggml-vocab-bert-bge.gguf"
#define N_EMBD    384
#define N_HEAD    12
#define N_FF      1536
#define N_LAYER   12
#define N_POS     512
#define N_VOCAB   30522
#define N_THREADS 2
#define MAX_WORDS 30000

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static float next_f(void)
{
    return (float)(next_u32() & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static int add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int64_t n0,
                      int64_t n1, float scale, float offset)
{
    const size_t n = (size_t)(n0 * n1);
    size_t row = 0;
    float *f = mem_alloc(n * sizeof *f);
    if (!f || quant_row_bytes(type, n0, &row) != ERR_OK) return ERR_NOMEM;
    void *data = mem_alloc(row * (size_t)n1);
    if (!data) {
        mem_free(f);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        f[i] = offset + scale * next_f();
    for (int64_t r = 0; r < n1; r++)
        quant_traits_of(type)->from_float(f + r * n0, (uint8_t *)data + (size_t)r * row, n0);
    const int64_t ne[2] = {n0, n1};
    int rc = gguf_writer_add_tensor(w, name, type, n1 > 1 ? 2 : 1, ne, data, row * (size_t)n1);
    mem_free(data);
    mem_free(f);
    return rc;
}

/* The bge vocabulary when present, else placeholder tokens. */
static int add_vocab(struct gguf_writer *w)
{
    int rc = gguf_writer_add_str(w, "tokenizer.ggml.model", "bert");
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", 2);
    struct gguf *g = NULL;
    struct errmsg err;
    struct str *toks = mem_calloc(N_VOCAB, sizeof *toks);
    char(*names)[16] = mem_calloc(N_VOCAB, 16);
    if (!toks || !names) rc = ERR_NOMEM;
    if (rc == ERR_OK && gguf_open(BGE_VOCAB, &g, &err) == ERR_OK) {
        for (int i = 0; i < N_VOCAB; i++)
            if (gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &toks[i]) != ERR_OK)
                rc = ERR_FORMAT;
        (void)gguf_writer_add_str(w, "tokenizer.ggml.pre", "bert-bge");
    } else {
        for (int i = 0; rc == ERR_OK && i < N_VOCAB; i++) {
            snprintf(names[i], 16, "[unused%d]", i);
            toks[i] = (struct str){names[i], strlen(names[i])};
        }
    }
    if (rc == ERR_OK) rc = gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, N_VOCAB);
    static const char *const ids[] = {"cls", "seperator", "unknown", "padding"};
    static const uint32_t vals[] = {101, 102, 100, 0};
    for (int i = 0; rc == ERR_OK && i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", ids[i]);
        rc = gguf_writer_add_u32(w, key, vals[i]);
    }
    gguf_close(g);
    mem_free(toks);
    mem_free(names);
    return rc;
}

static int add_layer(struct gguf_writer *w, int il)
{
    static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    char name[64];
    int rc = ERR_OK;
    for (int k = 0; rc == ERR_OK && k < 4; k++) {
        snprintf(name, sizeof name, "blk.%d.%s.weight", il, mats[k]);
        rc = add_tensor(w, name, QUANT_F16, N_EMBD, N_EMBD, 0.08f, 0.0f);
        snprintf(name, sizeof name, "blk.%d.%s.bias", il, mats[k]);
        if (rc == ERR_OK) rc = add_tensor(w, name, QUANT_F32, N_EMBD, 1, 0.05f, 0.0f);
    }
    static const struct {
        const char *name;
        int64_t n0, n1;
    } rest[] = {
        {"ffn_up.weight", N_EMBD, N_FF},         {"ffn_up.bias", N_FF, 1},
        {"ffn_down.weight", N_FF, N_EMBD},       {"ffn_down.bias", N_EMBD, 1},
        {"attn_output_norm.weight", N_EMBD, 1},  {"attn_output_norm.bias", N_EMBD, 1},
        {"layer_output_norm.weight", N_EMBD, 1}, {"layer_output_norm.bias", N_EMBD, 1},
    };
    for (size_t k = 0; rc == ERR_OK && k < sizeof rest / sizeof rest[0]; k++) {
        snprintf(name, sizeof name, "blk.%d.%s", il, rest[k].name);
        const bool is_mat = rest[k].n1 > 1, is_norm_w = strstr(rest[k].name, "norm.weight");
        rc = add_tensor(w, name, is_mat ? QUANT_F16 : QUANT_F32, rest[k].n0, rest[k].n1,
                        is_mat ? 0.05f : 0.05f, is_norm_w ? 1.0f : 0.0f);
    }
    return rc;
}

static int write_model(const char *path)
{
    struct gguf_writer *w;
    struct errmsg err;
    if (gguf_writer_new(&w) != ERR_OK) return ERR_NOMEM;
    int rc = gguf_writer_add_str(w, "general.architecture", "bert");
    static const struct {
        const char *key;
        uint32_t v;
    } hp[] = {{"bert.embedding_length", N_EMBD},  {"bert.block_count", N_LAYER},
              {"bert.feed_forward_length", N_FF}, {"bert.attention.head_count", N_HEAD},
              {"bert.context_length", N_POS},     {"bert.pooling_type", 1}};
    for (size_t i = 0; rc == ERR_OK && i < sizeof hp / sizeof hp[0]; i++)
        rc = gguf_writer_add_u32(w, hp[i].key, hp[i].v);
    if (rc == ERR_OK) rc = gguf_writer_add_f32(w, "bert.attention.layer_norm_epsilon", 1e-12f);
    if (rc == ERR_OK) rc = gguf_writer_add_bool(w, "bert.attention.causal", false);
    if (rc == ERR_OK) rc = add_vocab(w);
    if (rc == ERR_OK)
        rc = add_tensor(w, "token_embd.weight", QUANT_F16, N_EMBD, N_VOCAB, 0.5f, 0.0f);
    if (rc == ERR_OK) rc = add_tensor(w, "token_types.weight", QUANT_F32, N_EMBD, 2, 0.5f, 0.0f);
    if (rc == ERR_OK)
        rc = add_tensor(w, "position_embd.weight", QUANT_F32, N_EMBD, N_POS, 0.5f, 0.0f);
    if (rc == ERR_OK)
        rc = add_tensor(w, "token_embd_norm.weight", QUANT_F32, N_EMBD, 1, 0.05f, 1.0f);
    if (rc == ERR_OK) rc = add_tensor(w, "token_embd_norm.bias", QUANT_F32, N_EMBD, 1, 0.05f, 0.0f);
    for (int il = 0; rc == ERR_OK && il < N_LAYER; il++)
        rc = add_layer(w, il);
    if (rc == ERR_OK) rc = gguf_writer_to_file(w, path, &err);
    gguf_writer_free(w);
    return rc;
}

/* One workload: n_inputs lines of n_words word tokens, as ids ([CLS] … [SEP]) and as text. */
struct workload {
    int n_inputs, n_tokens;
    int32_t *ids; // (n_inputs, n_tokens)
    struct buf text;
};

/* Word-initial tokens of lower-case letters (the text form tokenizes back to exactly them). */
static int word_tokens(const struct tokenizer *tok, int32_t *out)
{
    int n = 0;
    for (int32_t id = 1000; id < tok_n_tokens(tok) && n < MAX_WORDS; id++) {
        struct str s = tok_text(tok, id);
        if (s.len < 6 || memcmp(s.ptr, "\xe2\x96\x81", 3) != 0) continue;
        bool ok = true;
        for (size_t i = 3; i < s.len && ok; i++)
            ok = s.ptr[i] >= 'a' && s.ptr[i] <= 'z';
        if (ok) out[n++] = id;
    }
    return n;
}

static int make_workload(struct workload *wl, const struct tokenizer *tok, const int32_t *words,
                         int n_words, int n_inputs, int n_tokens)
{
    wl->n_inputs = n_inputs;
    wl->n_tokens = n_tokens;
    wl->ids = mem_alloc((size_t)n_inputs * (size_t)n_tokens * sizeof *wl->ids);
    buf_init(&wl->text);
    if (!wl->ids) return ERR_NOMEM;
    for (int i = 0; i < n_inputs; i++) {
        int32_t *row = wl->ids + (size_t)i * n_tokens;
        row[0] = 101;
        row[n_tokens - 1] = 102;
        for (int j = 1; j < n_tokens - 1; j++) {
            row[j] = n_words > 0 ? words[next_u32() % (uint32_t)n_words]
                                 : (int32_t)(1000 + next_u32() % 29000);
            if (n_words > 0) {
                struct str s = tok_text(tok, row[j]);
                buf_append(&wl->text, j > 1 ? " " : "", j > 1 ? 1 : 0);
                buf_append(&wl->text, s.ptr + 3, s.len - 3);
            }
        }
        buf_append(&wl->text, "\n", 1);
    }
    return ERR_OK;
}

/* Seconds for one pass over the workload, in batches of at most n_batch tokens. */
static double run_once(struct engine_encoder *e, struct threadpool *tp, const struct workload *wl,
                       float *out)
{
    const int per_batch = engine_encoder_info(e)->n_batch_tokens / wl->n_tokens;
    const int32_t *ptrs[64];
    int lens[64];
    struct errmsg err;
    double t0 = clock_now_ms();
    for (int i0 = 0; i0 < wl->n_inputs; i0 += per_batch) {
        int n = wl->n_inputs - i0 < per_batch ? wl->n_inputs - i0 : per_batch;
        for (int k = 0; k < n; k++) {
            ptrs[k] = wl->ids + (size_t)(i0 + k) * wl->n_tokens;
            lens[k] = wl->n_tokens;
        }
        if (engine_encoder_embed(e, tp, ptrs, lens, n, out, &err) != ERR_OK) {
            fprintf(stderr, "embed: %s\n", err.msg);
            return -1;
        }
    }
    return (clock_now_ms() - t0) / 1000.0;
}

/* Wall seconds of one reference run over a text file (process start-up included). */
static double ref_process(const char *bin_dir, const char *model, const char *txt)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s/llama-embedding -m %s -f %s -t %d -c 2048 -b 2048 -ub 2048 --pooling mean "
             "--embd-normalize 2 --embd-output-format json >/dev/null 2>&1",
             bin_dir, model, txt, N_THREADS);
    double t0 = clock_now_ms();
    int rc = system(cmd);
    double s = (clock_now_ms() - t0) / 1000.0;
    return rc == 0 ? s : -1;
}

/* The reference's seconds for the workload: the best of three runs minus the best of three
 * runs over one short line (start-up and model load), or -1. */
static double run_reference(const char *bin_dir, const char *model, const struct workload *wl)
{
    char txt[256], one[256];
    snprintf(txt, sizeof txt, "build/bench_embed_%d.txt", wl->n_tokens);
    snprintf(one, sizeof one, "build/bench_embed_one.txt");
    FILE *f = fopen(txt, "w"), *g = fopen(one, "w");
    if (f) fwrite(wl->text.data, 1, wl->text.len, f);
    if (g) fputs("word\n", g);
    if (f) fclose(f);
    if (g) fclose(g);
    if (!f || !g) return -1;
    double best = 1e9, base = 1e9;
    for (int r = 0; r < 3; r++) {
        double s = ref_process(bin_dir, model, txt), b = ref_process(bin_dir, model, one);
        if (s < 0 || b < 0) return -1;
        best = s < best ? s : best;
        base = b < base ? b : base;
    }
    return best > base ? best - base : -1;
}

static void bench_one(struct engine_encoder *e, struct threadpool *tp, const struct workload *wl,
                      const char *ref_bin, const char *model)
{
    float *out = mem_alloc((size_t)64 * N_EMBD * sizeof(float));
    double best = 1e9;
    (void)run_once(e, tp, wl, out); // warm-up
    for (int r = 0; r < 3; r++) {
        double s = run_once(e, tp, wl, out);
        if (s > 0 && s < best) best = s;
    }
    printf("%2d inputs x %3d tokens: llamapi %.3f s, %.1f embeddings/s, %.0f tokens/s\n",
           wl->n_inputs, wl->n_tokens, best, wl->n_inputs / best,
           (double)wl->n_inputs * wl->n_tokens / best);
    if (ref_bin && wl->text.len) {
        const double rb = run_reference(ref_bin, model, wl);
        if (rb > 0)
            printf("%2d inputs x %3d tokens: reference %.3f s, %.1f embeddings/s; "
                   "llamapi/reference speed %.2f\n",
                   wl->n_inputs, wl->n_tokens, rb, wl->n_inputs / rb, rb / best);
        else
            printf("reference run failed (see %s/llama-embedding)\n", ref_bin);
    }
    mem_free(out);
}

/* ---- a decoder as an embedding model ---- */

#define DEC_SEQS (ENGINE_BATCH_MAX / 32) // inputs per decode call at 32 tokens

/* Word-initial tokens of the synthetic model's tokenizer (letters only). */
static int dec_words(const struct tokenizer *tok, struct str *out, int cap)
{
    int n = 0;
    for (int32_t id = 0; id < tok_n_tokens(tok) && n < cap; id++) {
        struct str s = tok_text(tok, id);
        if (s.len < 5 || memcmp(s.ptr, "\xe2\x96\x81", 3) != 0) continue;
        bool ok = true;
        for (size_t i = 3; i < s.len && ok; i++)
            ok = s.ptr[i] >= 'a' && s.ptr[i] <= 'z';
        if (ok) out[n++] = (struct str){s.ptr + 3, s.len - 3};
    }
    return n;
}

/* n_inputs lines of random words, each tokenized by our tokenizer to exactly n_tokens ids
 * (words are added while they fit, the rest padded with the last word's token). */
static int dec_workload(struct workload *wl, const struct tokenizer *tok, int n_inputs,
                        int n_tokens)
{
    struct str words[256];
    const int n_words = dec_words(tok, words, 256);
    wl->n_inputs = n_inputs;
    wl->n_tokens = n_tokens;
    wl->ids = mem_alloc((size_t)n_inputs * (size_t)n_tokens * sizeof *wl->ids);
    buf_init(&wl->text);
    if (!wl->ids || n_words == 0) return ERR_NOMEM;
    struct buf line;
    struct tok_ids ids;
    buf_init(&line);
    tok_ids_init(&ids);
    for (int i = 0; i < n_inputs; i++) {
        line.len = 0;
        size_t n_ok = 0;
        for (;;) {
            const struct str w = words[next_u32() % (uint32_t)n_words];
            const size_t before = line.len;
            buf_append(&line, line.len ? " " : "", line.len ? 1 : 0);
            buf_append(&line, w.ptr, w.len);
            ids.n_ids = 0;
            tok_encode(tok, (struct str){line.data, line.len}, true, false, &ids);
            if ((int)ids.n_ids > n_tokens) {
                line.len = before;
                break;
            }
            n_ok = ids.n_ids;
        }
        ids.n_ids = 0;
        tok_encode(tok, (struct str){line.data, line.len}, true, false, &ids);
        int32_t *row = wl->ids + (size_t)i * n_tokens;
        for (int j = 0; j < n_tokens; j++)
            row[j] = ids.ids[j < (int)n_ok ? j : (int)n_ok - 1];
        buf_append(&wl->text, line.data, line.len);
        buf_append(&wl->text, "\n", 1);
    }
    buf_deinit(&line);
    tok_ids_deinit(&ids);
    return ERR_OK;
}

/* Seconds for one pass: inputs packed into decode calls of at most ENGINE_BATCH_MAX tokens,
 * each on a view over kv (is_hidden: last-token hidden states) or on its own sequence
 * (logits). */
static double dec_run(struct engine_model *m, struct threadpool *tp, const struct workload *wl,
                      bool is_hidden, struct engine_seq **seqs, uint8_t *kv, float *out)
{
    const int per_batch = ENGINE_BATCH_MAX / wl->n_tokens;
    const size_t one = engine_kv_bytes(m, wl->n_tokens);
    const int e = engine_model_info(m)->n_embd;
    struct engine_batch_item items[DEC_SEQS];
    struct errmsg err;
    double t0 = clock_now_ms();
    for (int i0 = 0; i0 < wl->n_inputs; i0 += per_batch) {
        const int n = wl->n_inputs - i0 < per_batch ? wl->n_inputs - i0 : per_batch;
        for (int k = 0; k < n; k++) {
            if (is_hidden)
                (void)engine_seq_bind(seqs[k], kv + (size_t)k * one, one, wl->n_tokens);
            else
                engine_seq_truncate(seqs[k], 0);
            items[k] = (struct engine_batch_item){
                .seq = seqs[k],
                .tokens = wl->ids + (size_t)(i0 + k) * wl->n_tokens,
                .n_tokens = wl->n_tokens,
                .output = is_hidden ? ENGINE_OUTPUT_LAST : ENGINE_OUTPUT_LOGITS,
                .hidden = out + (size_t)k * e,
            };
        }
        if (engine_decode(m, tp, items, n, &err) != ERR_OK) {
            fprintf(stderr, "decode: %s\n", err.msg);
            return -1;
        }
    }
    return (clock_now_ms() - t0) / 1000.0;
}

static double dec_best(struct engine_model *m, struct threadpool *tp, const struct workload *wl,
                       bool is_hidden, struct engine_seq **seqs, uint8_t *kv, float *out)
{
    double best = 1e9;
    (void)dec_run(m, tp, wl, is_hidden, seqs, kv, out); // warm-up
    for (int r = 0; r < 3; r++) {
        const double s = dec_run(m, tp, wl, is_hidden, seqs, kv, out);
        if (s > 0 && s < best) best = s;
    }
    return best;
}

/* The reference's seconds for the workload (as run_reference, with last-token pooling). */
static double dec_reference(const char *bin_dir, const char *model, const struct workload *wl)
{
    char txt[256], cmd[2048];
    snprintf(txt, sizeof txt, "build/bench_embed_dec_%d.txt", wl->n_tokens);
    FILE *f = fopen(txt, "w");
    if (!f) return -1;
    fwrite(wl->text.data, 1, wl->text.len, f);
    fclose(f);
    double best = 1e9, base = 1e9;
    for (int r = 0; r < 3; r++) {
        for (int one = 0; one < 2; one++) {
            snprintf(cmd, sizeof cmd,
                     "%s/llama-embedding -m %s %s%s -t %d -c 4096 -b 4096 -ub 512 --pooling last "
                     "--embd-normalize 2 --embd-output-format json >/dev/null 2>&1",
                     bin_dir, model, one ? "-p " : "-f ", one ? "word" : txt, N_THREADS);
            const double t0 = clock_now_ms();
            if (system(cmd) != 0) return -1;
            const double s = (clock_now_ms() - t0) / 1000.0;
            if (one)
                base = s < base ? s : base;
            else
                best = s < best ? s : best;
        }
    }
    return best > base ? best - base : -1;
}

static int bench_decoder(const char *path, const char *ref_bin)
{
    struct synth_params p = synth_params_default();
    p.arch = "qwen3";
    p.n_layer = 4;
    p.n_embd = 1024;
    p.n_head = 16;
    p.n_head_kv = 8;
    p.head_dim = 128;
    p.n_ff = 3072;
    p.n_vocab = 151669;
    p.n_ctx = 32768;
    p.tied = true;
    p.rope_base = 1000000.0f;
    p.norm_eps = 1e-6f;
    p.type = "f16";     // the reference's native build crashes on Q8_0 here (its AMX path)
    p.pooling_type = 3; // last
    struct errmsg err;
    struct gguf_writer *w;
    FILE *exists = fopen(path, "rb");
    if (exists) {
        fclose(exists);
    } else if (synth_build(&p, &w, &err) != ERR_OK ||
               gguf_writer_to_file(w, path, &err) != ERR_OK) {
        fprintf(stderr, "decoder model: %s\n", err.msg);
        return 1;
    }
    struct engine_model *m;
    struct tokenizer *tok;
    struct threadpool *tp;
    if (engine_model_load(path, &m, &err) != ERR_OK ||
        vocab_tokenizer_from_file(path, &tok, &err) != ERR_OK ||
        threadpool_new(N_THREADS, &tp) != ERR_OK) {
        fprintf(stderr, "decoder load: %s\n", err.msg);
        return 1;
    }
    printf("\nqwen3 decoder as an embedding model (4 layers of Qwen3-Embedding-0.6B's shape, "
           "vocab %d, F16), last-token pooling, %d threads, batches of %d tokens\n",
           p.n_vocab, N_THREADS, ENGINE_BATCH_MAX);
    struct engine_seq *views[DEC_SEQS] = {0}, *seqs[DEC_SEQS] = {0};
    uint8_t *kv = mem_alloc(engine_kv_bytes(m, ENGINE_BATCH_MAX));
    float *out = mem_alloc((size_t)DEC_SEQS * (size_t)p.n_embd * sizeof(float));
    for (int i = 0; i < DEC_SEQS; i++)
        if (engine_seq_new_view(m, &views[i]) != ERR_OK ||
            engine_seq_new(m, 512, &seqs[i]) != ERR_OK)
            return 1;
    static const int shapes[2][2] = {{64, 32}, {8, 512}};
    for (int s = 0; s < 2 && kv && out; s++) {
        struct workload wl;
        if (dec_workload(&wl, tok, shapes[s][0], shapes[s][1]) == ERR_OK) {
            const double h = dec_best(m, tp, &wl, true, views, kv, out);
            const double l = dec_best(m, tp, &wl, false, seqs, kv, out);
            printf("%2d inputs x %3d tokens: hidden states %.3f s, %.1f embeddings/s; "
                   "with logits %.3f s; hidden/logits speed %.2f\n",
                   wl.n_inputs, wl.n_tokens, h, wl.n_inputs / h, l, l / h);
            const double rb = ref_bin ? dec_reference(ref_bin, path, &wl) : -1;
            if (rb > 0)
                printf("%2d inputs x %3d tokens: reference %.3f s, %.1f embeddings/s; "
                       "llamapi/reference speed %.2f\n",
                       wl.n_inputs, wl.n_tokens, rb, wl.n_inputs / rb, rb / h);
            else if (ref_bin)
                printf("reference run failed (see %s/llama-embedding)\n", ref_bin);
        }
        mem_free(wl.ids);
        buf_deinit(&wl.text);
    }
    for (int i = 0; i < DEC_SEQS; i++) {
        engine_seq_free(views[i]);
        engine_seq_free(seqs[i]);
    }
    mem_free(out);
    mem_free(kv);
    threadpool_free(tp);
    tok_free(tok);
    engine_model_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "build/bench_embed_bge_small.gguf";
    const char *ref_bin = getenv("LLAMAPI_REF_BIN");
    const char *only = getenv("BENCH_EMBED_ONLY"); // "bert" or "decoder"
    const char *dec_path = argc > 2 ? argv[2] : "build/bench_embed_qwen3_f16.gguf";
    struct errmsg err;
    kernels_init();
    if (only && strcmp(only, "decoder") == 0) return bench_decoder(dec_path, ref_bin);
    if (write_model(path) != ERR_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    struct engine_encoder *e;
    struct threadpool *tp;
    struct tokenizer *tok;
    if (engine_encoder_load(path, NULL, &e, &err) != ERR_OK ||
        vocab_tokenizer_from_file(path, &tok, &err) != ERR_OK) {
        fprintf(stderr, "load: %s\n", err.msg);
        return 1;
    }
    if (threadpool_new(N_THREADS, &tp) != ERR_OK) return 1;
    int32_t *words = mem_alloc(MAX_WORDS * sizeof *words);
    const int n_words = words ? word_tokens(tok, words) : 0;
    printf("bge-small-shaped BERT (F16 matrices), %d threads, batches of %d tokens%s\n", N_THREADS,
           engine_encoder_info(e)->n_batch_tokens,
           n_words ? "" : " (no bge vocabulary: no reference run)");
    static const int shapes[2][2] = {{64, 32}, {8, 512}};
    for (int s = 0; s < 2; s++) {
        struct workload wl;
        if (make_workload(&wl, tok, words, n_words, shapes[s][0], shapes[s][1]) == ERR_OK)
            bench_one(e, tp, &wl, n_words ? ref_bin : NULL, path);
        mem_free(wl.ids);
        buf_deinit(&wl.text);
    }
    mem_free(words);
    tok_free(tok);
    threadpool_free(tp);
    engine_encoder_free(e);
    return only && strcmp(only, "bert") == 0 ? 0 : bench_decoder(dec_path, ref_bin);
}
