/* engine/model_recr: hybrid models with recurrent layers, on synthetic lfm2 models (short-conv
 * layers 0, 2, 3 around attention layer 1), qwen35 / qwen35moe models (Gated DeltaNet layers 0
 * and 2, gated attention layers 1 and 3, a next-token-prediction block the decoder skips),
 * mamba2 (Mamba-2 mixers alone), granitehybrid (Mamba-2 around attention layer 1) and
 * nemotron_h (one block per layer: Mamba-2, FFN, attention, FFN). A token's
 * logits are the same bits whether its
 * prompt is fed one token per decode, in chunks, or beside another sequence; the memory a
 * sequence needs counts the recurrent state and its checkpoints; a truncation keeps a prefix
 * only where the state is known (the current position or a checkpoint), and continuing from a
 * checkpoint gives the bits of computing cold; view sequences carry the state in the bound
 * memory; malformed metadata and tensors are ERR_FORMAT naming the key or tensor; every
 * allocation of loading and of a sequence may fail cleanly. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf_write.h"
#include "engine/gguf/synth.h"
#include "engine/model/model.h"
#include "engine/quants/quants.h"
#include "engine/threadpool.h"
#include "util/mem.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_CTX 128
#define N_TOK 40

struct fix {
    char path[64];
    struct engine_model *m;
    struct threadpool *tp;
    int n_vocab;
    int32_t toks[N_TOK];
};

static struct synth_params hybrid_params(const char *arch)
{
    struct synth_params p = synth_params_default();
    p.arch = arch;
    p.n_layer = 4;
    p.seed = 5;
    p.n_vocab = synth_builtin_vocab_size(arch);
    return p;
}

static void write_file(struct gguf_writer *w, char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/test_model_recr_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct errmsg err = {{0}};
    assert_int_equal(gguf_writer_to_file(w, path, &err), ERR_OK);
}

static void fix_init(struct fix *f, const char *arch, const char *type)
{
    struct synth_params p = hybrid_params(arch);
    p.type = type;
    struct gguf_writer *w;
    struct errmsg err = {{0}};
    if (synth_build(&p, &w, &err) != ERR_OK) fail_msg("synth: %s", err.msg);
    write_file(w, f->path, sizeof f->path);
    gguf_writer_free(w);
    if (engine_model_load(f->path, &f->m, &err) != ERR_OK) fail_msg("load: %s", err.msg);
    assert_int_equal(threadpool_new(2, &f->tp), ERR_OK);
    f->n_vocab = engine_model_info(f->m)->n_vocab;
    for (int i = 0; i < N_TOK; i++)
        f->toks[i] = (int32_t)(3 + (i * 37 + 11) % 280);
}

static void fix_deinit(struct fix *f)
{
    threadpool_free(f->tp);
    engine_model_free(f->m);
    unlink(f->path);
}

/* Feeds toks[0..n) as prompt in chunks of `chunk`. */
static void feed(struct fix *f, struct engine_seq *s, const int32_t *toks, int n, int chunk)
{
    struct errmsg err = {{0}};
    for (int i = 0; i < n; i += chunk) {
        struct engine_batch_item it = {
            .seq = s, .tokens = toks + i, .n_tokens = n - i < chunk ? n - i : chunk};
        if (engine_decode(f->m, f->tp, &it, 1, &err) != ERR_OK) fail_msg("decode: %s", err.msg);
    }
}

static void check_invariant(const char *arch, const char *type)
{
    struct fix f;
    fix_init(&f, arch, type);
    const size_t bytes = (size_t)f.n_vocab * sizeof(float);
    struct engine_seq *a, *b, *c, *d;
    assert_int_equal(engine_seq_new(f.m, N_CTX, &a), ERR_OK);
    assert_int_equal(engine_seq_new(f.m, N_CTX, &b), ERR_OK);
    assert_int_equal(engine_seq_new(f.m, N_CTX, &c), ERR_OK);
    assert_int_equal(engine_seq_new(f.m, N_CTX, &d), ERR_OK);
    feed(&f, a, f.toks, N_TOK, 1);
    feed(&f, b, f.toks, N_TOK, 7);
    // c in chunks of 5 beside d's other tokens, which start two tokens later
    int32_t other[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        other[i] = (int32_t)(5 + (i * 53) % 270);
    struct errmsg err = {{0}};
    feed(&f, d, other, 2, 2);
    for (int i = 0; i < N_TOK; i += 5) {
        struct engine_batch_item it[2] = {{.seq = d, .tokens = other + 2 + i, .n_tokens = 3},
                                          {.seq = c, .tokens = f.toks + i, .n_tokens = 5}};
        if (engine_decode(f.m, f.tp, it, 2, &err) != ERR_OK) fail_msg("decode: %s", err.msg);
    }
    assert_memory_equal(engine_seq_logits(a), engine_seq_logits(b), bytes);
    assert_memory_equal(engine_seq_logits(a), engine_seq_logits(c), bytes);
    // a sequence emptied and fed again starts from a zero state, not the old one
    engine_seq_truncate(b, 0);
    assert_int_equal(engine_seq_pos(b), 0);
    feed(&f, b, f.toks, N_TOK, 16);
    assert_memory_equal(engine_seq_logits(a), engine_seq_logits(b), bytes);
    engine_seq_free(a);
    engine_seq_free(b);
    engine_seq_free(c);
    engine_seq_free(d);
    fix_deinit(&f);
}

static void test_invariant(void **state)
{
    (void)state;
    check_invariant("lfm2", "f32");
    check_invariant("lfm2", "q8_0");
    check_invariant("qwen35", "f32");
    check_invariant("qwen35", "q8_0");
    check_invariant("qwen35moe", "q8_0");
    check_invariant("mamba2", "f32");
    check_invariant("granitehybrid", "q8_0");
    check_invariant("nemotron_h", "q8_0");
    check_invariant("lfm2moe", "q8_0");
    check_invariant("falcon-h1", "q8_0");
    check_invariant("nemotron_h_moe", "q8_0");
}

static void test_memory(void **state)
{
    (void)state;
    struct fix f;
    fix_init(&f, "lfm2", "f32");
    const struct engine_model_info *in = engine_model_info(f.m);
    const size_t e = (size_t)in->n_embd, kvd = (size_t)in->n_head_kv * (size_t)in->head_dim;
    // three conv layers of two past inputs per channel; one attention layer grows
    assert_int_equal(in->state_bytes, 3 * 2 * e * sizeof(float));
    assert_int_equal(in->kv_bytes_per_token, 2 * kvd * 2);
    assert_true(in->n_checkpoints >= 2 && in->n_checkpoints <= 8);
    assert_int_equal(engine_seq_bytes(f.m, 101) - engine_seq_bytes(f.m, 100),
                     in->kv_bytes_per_token);
    const size_t fixed = in->state_bytes * (size_t)(1 + in->n_checkpoints);
    assert_true(engine_seq_bytes(f.m, 1) > fixed + (size_t)in->n_vocab * sizeof(float));
    assert_int_equal(engine_kv_bytes(f.m, 100), 2 * 100 * kvd * 2 + in->state_bytes);
    fix_deinit(&f);

    // qwen35: two DeltaNet layers, each a 3-input tail of 2 * 2 * 16 + 4 * 16 conv channels and
    // 4 heads of 16 x 16; two attention layers grow; the next-token block is not a layer
    fix_init(&f, "qwen35", "f32");
    in = engine_model_info(f.m);
    assert_int_equal(in->n_layer, 4);
    assert_int_equal(in->state_bytes, 2 * (3 * 128 + 4 * 16 * 16) * sizeof(float));
    assert_int_equal(in->kv_bytes_per_token, 2 * 2 * (size_t)in->n_head_kv * in->head_dim * 2);
    fix_deinit(&f);
}

/* Explicit state sizes (gguf-synth --ssm-*) load, decode and count: a qwen35 of 8 value
 * heads of width 8 and 4 key heads, a mamba2 of 4 heads of 32 channels, states of 32, 1 group. */
static void test_state_sizes(void **state)
{
    (void)state;
    struct synth_params p = hybrid_params("qwen35");
    p.ssm_state = 8;
    p.ssm_heads = 8;
    p.ssm_groups = 4;
    struct gguf_writer *w;
    struct errmsg err = {{0}};
    struct fix f = {0};
    assert_int_equal(synth_build(&p, &w, &err), ERR_OK);
    write_file(w, f.path, sizeof f.path);
    gguf_writer_free(w);
    assert_int_equal(engine_model_load(f.path, &f.m, &err), ERR_OK);
    // two DeltaNet layers: a 3-input tail of 2 * 8 * 4 + 8 * 8 conv channels, 8 heads of 8 x 8
    assert_int_equal(engine_model_info(f.m)->state_bytes, 2 * (3 * 128 + 8 * 8 * 8) * 4);
    assert_int_equal(threadpool_new(1, &f.tp), ERR_OK);
    struct engine_seq *s;
    assert_int_equal(engine_seq_new(f.m, N_CTX, &s), ERR_OK);
    const int32_t toks[4] = {1, 40, 41, 42};
    feed(&f, s, toks, 4, 4);
    assert_non_null(engine_seq_logits(s));
    engine_seq_free(s);
    fix_deinit(&f);

    p = hybrid_params("mamba2");
    p.ssm_state = 32;
    p.ssm_heads = 4;
    p.ssm_groups = 1;
    memset(&f, 0, sizeof f);
    assert_int_equal(synth_build(&p, &w, &err), ERR_OK);
    write_file(w, f.path, sizeof f.path);
    gguf_writer_free(w);
    assert_int_equal(engine_model_load(f.path, &f.m, &err), ERR_OK);
    // four layers: a 3-input tail of 128 + 2 * 32 channels, and 128 channels of 32 states
    assert_int_equal(engine_model_info(f.m)->state_bytes, 4 * (3 * 192 + 128 * 32) * 4);
    assert_int_equal(threadpool_new(1, &f.tp), ERR_OK);
    assert_int_equal(engine_seq_new(f.m, N_CTX, &s), ERR_OK);
    feed(&f, s, toks, 4, 2);
    assert_non_null(engine_seq_logits(s));
    engine_seq_free(s);
    fix_deinit(&f);
}

/* Truncation keeps what the state can say: everything at pos, a checkpoint, else nothing; and
 * a continuation from a checkpoint is the cold computation's bits. */
static void check_checkpoints(const char *arch)
{
    struct fix f;
    fix_init(&f, arch, "q8_0");
    const size_t bytes = (size_t)f.n_vocab * sizeof(float);
    struct engine_seq *s, *cold;
    assert_int_equal(engine_seq_new(f.m, N_CTX, &s), ERR_OK);
    assert_int_equal(engine_seq_new(f.m, N_CTX, &cold), ERR_OK);
    feed(&f, s, f.toks, 20, 8);
    engine_seq_truncate(s, 20); // the current position: nothing to cut
    assert_int_equal(engine_seq_pos(s), 20);
    engine_seq_truncate(s, 12); // no checkpoint: nothing is known before 20
    assert_int_equal(engine_seq_pos(s), 0);
    feed(&f, s, f.toks, 12, 12);
    engine_seq_checkpoint(s);
    feed(&f, s, f.toks + 12, 14, 5);
    engine_seq_checkpoint(s); // at 26
    feed(&f, s, f.toks + 26, 4, 4);
    engine_seq_truncate(s, 25); // the latest checkpoint at or before 25 is 12
    assert_int_equal(engine_seq_pos(s), 12);
    engine_seq_truncate(s, 30); // beyond pos: clamps, keeps 12
    assert_int_equal(engine_seq_pos(s), 12);
    // a different continuation of the 12-token prefix, against the same tokens fed cold
    int32_t branch[N_TOK];
    memcpy(branch, f.toks, sizeof branch);
    for (int i = 12; i < N_TOK; i++)
        branch[i] = (int32_t)(7 + (i * 29) % 250);
    feed(&f, s, branch + 12, N_TOK - 12, 9);
    feed(&f, cold, branch, N_TOK, N_TOK);
    assert_memory_equal(engine_seq_logits(s), engine_seq_logits(cold), bytes);
    // the checkpoint at 26 belonged to the first continuation and is gone; 12 remains
    engine_seq_truncate(s, 30);
    assert_int_equal(engine_seq_pos(s), 12);
    // more saves than slots: the oldest go, the latest stay
    const int n_ckpt = engine_model_info(f.m)->n_checkpoints;
    for (int i = 0; i < n_ckpt + 2; i++) {
        feed(&f, s, branch + 12 + i, 1, 1);
        engine_seq_checkpoint(s);
    }
    const int last = engine_seq_pos(s);
    feed(&f, s, branch + last, 2, 2);
    engine_seq_truncate(s, last + 1);
    assert_int_equal(engine_seq_pos(s), last);
    engine_seq_truncate(s, 12);
    assert_int_equal(engine_seq_pos(s), 0);
    engine_seq_free(s);
    engine_seq_free(cold);
    fix_deinit(&f);
}

static void test_checkpoints(void **state)
{
    (void)state;
    check_checkpoints("lfm2");
    check_checkpoints("qwen35");
    check_checkpoints("mamba2");
    check_checkpoints("granitehybrid");
    check_checkpoints("nemotron_h");
    check_checkpoints("falcon-h1");
}

/* A view sequence finds its state in the bound memory and gives an owned sequence's hidden
 * state. */
static void test_view(void **state)
{
    (void)state;
    struct fix f;
    fix_init(&f, "qwen35", "f32");
    const int e = engine_model_info(f.m)->n_embd;
    const size_t need = engine_kv_bytes(f.m, 32);
    void *mem = mem_alloc(need);
    struct engine_seq *v, *s;
    assert_int_equal(engine_seq_new_view(f.m, &v), ERR_OK);
    assert_int_equal(engine_seq_bind(v, mem, need - 1, 32), ERR_INVALID);
    assert_int_equal(engine_seq_bind(v, (char *)mem + 2, need, 32), ERR_INVALID); // misaligned
    assert_int_equal(engine_seq_bind(v, mem, need, 32), ERR_OK);
    assert_int_equal(engine_seq_new(f.m, 32, &s), ERR_OK);
    float *hv = mem_calloc((size_t)e, sizeof *hv), *hs = mem_calloc((size_t)e, sizeof *hs);
    struct errmsg err = {{0}};
    struct engine_batch_item a = {
        .seq = v, .tokens = f.toks, .n_tokens = 20, .output = ENGINE_OUTPUT_LAST, .hidden = hv};
    struct engine_batch_item b = a;
    b.seq = s;
    b.hidden = hs;
    assert_int_equal(engine_decode(f.m, f.tp, &a, 1, &err), ERR_OK);
    assert_int_equal(engine_decode(f.m, f.tp, &b, 1, &err), ERR_OK);
    assert_memory_equal(hv, hs, (size_t)e * sizeof *hv);
    // bound again, it starts empty: the state of the first use does not leak into the next
    assert_int_equal(engine_seq_bind(v, mem, need, 32), ERR_OK);
    assert_int_equal(engine_decode(f.m, f.tp, &a, 1, &err), ERR_OK);
    assert_memory_equal(hv, hs, (size_t)e * sizeof *hv);
    mem_free(hv);
    mem_free(hs);
    engine_seq_free(v);
    engine_seq_free(s);
    mem_free(mem);
    fix_deinit(&f);
}

/* A copy of the synthetic arch without its tokenizer, with key `drop_key` and tensor
 * `drop_tensor` left out (NULL: none); the caller adds replacements. */
static struct gguf_writer *hybrid_copy(const char *arch, const char *drop_key,
                                       const char *drop_tensor, void **bytes, struct gguf **g)
{
    struct synth_params p = hybrid_params(arch);
    struct gguf_writer *src, *w;
    struct errmsg err = {{0}};
    size_t len;
    assert_int_equal(synth_build(&p, &src, &err), ERR_OK);
    assert_int_equal(gguf_writer_to_memory(src, bytes, &len), ERR_OK);
    gguf_writer_free(src);
    assert_int_equal(gguf_open_memory(*bytes, len, g, &err), ERR_OK);
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    for (int64_t i = 0; i < gguf_key_count(*g); i++) {
        char key[128];
        struct str name = gguf_key_name(*g, i);
        snprintf(key, sizeof key, "%.*s", (int)name.len, name.ptr);
        if (str_has_prefix(name, "tokenizer.") || (drop_key && strcmp(key, drop_key) == 0))
            continue;
        enum gguf_value_type t = gguf_key_type(*g, i), et;
        int64_t n;
        const void *data;
        struct str v;
        if (t == GGUF_VALUE_STRING && gguf_get_str(*g, key, &v) == ERR_OK)
            assert_int_equal(gguf_writer_add_strn(w, key, v), ERR_OK);
        else if (t == GGUF_VALUE_ARRAY && gguf_get_arr_data(*g, key, &et, &n, &data) == ERR_OK)
            assert_int_equal(gguf_writer_add_arr(w, key, et, data, n), ERR_OK);
        else
            assert_int_equal(gguf_writer_add_scalar(w, key, t, gguf_key_raw(*g, i)), ERR_OK);
    }
    for (int64_t i = 0; i < gguf_tensor_count(*g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(*g, i);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (drop_tensor && strcmp(name, drop_tensor) == 0) continue;
        assert_int_equal(
            gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->size), ERR_OK);
    }
    return w;
}

static int load_writer(struct gguf_writer *w, struct errmsg *err)
{
    char path[64];
    write_file(w, path, sizeof path);
    struct engine_model *m = NULL;
    int rc = engine_model_load(path, &m, err);
    engine_model_free(m);
    unlink(path);
    return rc;
}

static void expect_error(struct gguf_writer *w, int want, const char *msg_part)
{
    struct errmsg err = {{0}};
    assert_int_equal(load_writer(w, &err), want);
    if (!strstr(err.msg, msg_part)) fail_msg("'%s' does not name '%s'", err.msg, msg_part);
}

static void test_load_errors(void **state)
{
    (void)state;
    void *bytes;
    struct gguf *g;
    struct gguf_writer *w = hybrid_copy("lfm2", NULL, NULL, &bytes, &g);
    struct errmsg err = {{0}};
    assert_int_equal(load_writer(w, &err), ERR_OK); // the copy itself loads
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);

    w = hybrid_copy("lfm2", "lfm2.shortconv.l_cache", NULL, &bytes, &g);
    expect_error(w, ERR_FORMAT, "missing key 'lfm2.shortconv.l_cache'");
    gguf_writer_add_u32(w, "lfm2.shortconv.l_cache", 1000);
    expect_error(w, ERR_FORMAT, "lfm2.shortconv.l_cache");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);

    const int32_t short_kv[3] = {0, 2, 0}, odd_kv[4] = {0, 3, 0, 0}, mixed_kv[4] = {1, 2, 0, 0};
    const int32_t *kvs[3] = {short_kv, odd_kv, mixed_kv};
    const int n_kv[3] = {3, 4, 4}, want[3] = {ERR_FORMAT, ERR_FORMAT, ERR_UNSUPPORTED};
    for (int k = 0; k < 3; k++) {
        w = hybrid_copy("lfm2", "lfm2.attention.head_count_kv", NULL, &bytes, &g);
        gguf_writer_add_arr(w, "lfm2.attention.head_count_kv", GGUF_VALUE_I32, kvs[k], n_kv[k]);
        expect_error(w, want[k], "lfm2.attention.head_count_kv");
        gguf_writer_free(w);
        gguf_close(g);
        mem_free(bytes);
    }

    w = hybrid_copy("lfm2", NULL, "blk.2.shortconv.conv.weight", &bytes, &g);
    expect_error(w, ERR_FORMAT, "missing tensor 'blk.2.shortconv.conv.weight'");
    float taps[4 * 64] = {0};
    const int64_t ne[2] = {4, 64};
    gguf_writer_add_tensor(w, "blk.2.shortconv.conv.weight", QUANT_F32, 2, ne, taps, sizeof taps);
    expect_error(w, ERR_FORMAT, "tensor 'blk.2.shortconv.conv.weight': shape [4, 64]");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);

    w = hybrid_copy("lfm2", NULL, "token_embd_norm.weight", &bytes, &g);
    expect_error(w, ERR_FORMAT, "missing tensor 'token_embd_norm.weight'");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);

    w = hybrid_copy("lfm2", NULL, "blk.0.shortconv.in_proj.weight", &bytes, &g);
    expect_error(w, ERR_FORMAT, "missing tensor 'blk.0.shortconv.in_proj.weight'");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);
}

/* One qwen35 key replaced by a u32 value (or dropped when value < 0): the load fails with want
 * and a message naming msg_part. */
static void qwen35_key_error(const char *key, int64_t value, int want, const char *msg_part)
{
    void *bytes;
    struct gguf *g;
    struct gguf_writer *w = hybrid_copy("qwen35", key, NULL, &bytes, &g);
    if (value >= 0) gguf_writer_add_u32(w, key, (uint32_t)value);
    expect_error(w, want, msg_part);
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);
}

static void test_qwen35_load_errors(void **state)
{
    (void)state;
    qwen35_key_error("qwen35.ssm.state_size", -1, ERR_FORMAT,
                     "missing key 'qwen35.ssm.state_size'");
    qwen35_key_error("qwen35.ssm.conv_kernel", 1, ERR_FORMAT, "qwen35.ssm.conv_kernel");
    qwen35_key_error("qwen35.ssm.inner_size", 60, ERR_FORMAT, "ssm.inner_size 60");
    qwen35_key_error("qwen35.ssm.time_step_rank", 3, ERR_FORMAT, "not a multiple of");
    qwen35_key_error("qwen35.ssm.state_size", 1000, ERR_FORMAT, "qwen35.ssm.state_size");
    qwen35_key_error("qwen35.full_attention_interval", 0, ERR_FORMAT,
                     "qwen35.full_attention_interval");
    qwen35_key_error("qwen35.nextn_predict_layers", 5, ERR_FORMAT, "qwen35.nextn_predict_layers");
    qwen35_key_error("qwen35.rope.dimension_sections", -1, ERR_FORMAT,
                     "qwen35.rope.dimension_sections");

    // sections that leave a rotated pair to the extra (fourth) position
    void *bytes;
    struct gguf *g;
    struct gguf_writer *w =
        hybrid_copy("qwen35", "qwen35.rope.dimension_sections", NULL, &bytes, &g);
    const int32_t sec[4] = {1, 1, 1, 1};
    gguf_writer_add_arr(w, "qwen35.rope.dimension_sections", GGUF_VALUE_I32, sec, 4);
    expect_error(w, ERR_UNSUPPORTED, "extra position");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);

    const char *tensors[] = {"blk.0.ssm_a",
                             "blk.2.ssm_dt.bias",
                             "blk.0.ssm_norm.weight",
                             "blk.2.attn_gate.weight",
                             "blk.0.ssm_conv1d.weight",
                             "blk.1.attn_q.weight"};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        w = hybrid_copy("qwen35", NULL, tensors[i], &bytes, &g);
        char msg[96];
        snprintf(msg, sizeof msg, "missing tensor '%s'", tensors[i]);
        expect_error(w, ERR_FORMAT, msg);
        gguf_writer_free(w);
        gguf_close(g);
        mem_free(bytes);
    }
    // the gated query is twice the heads' width: a plain one is refused by shape
    w = hybrid_copy("qwen35", NULL, "blk.1.attn_q.weight", &bytes, &g);
    float q[64 * 64] = {0};
    const int64_t ne[2] = {64, 64};
    gguf_writer_add_tensor(w, "blk.1.attn_q.weight", QUANT_F32, 2, ne, q, sizeof q);
    expect_error(w, ERR_FORMAT, "tensor 'blk.1.attn_q.weight': shape [64, 64, 1, 1]");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);
}

/* Mamba-2's keys and per-head tensors. */
static void test_mamba2_load_errors(void **state)
{
    (void)state;
    void *bytes;
    struct gguf *g;
    struct gguf_writer *w = hybrid_copy("mamba2", "mamba2.ssm.group_count", NULL, &bytes, &g);
    expect_error(w, ERR_FORMAT, "missing key 'mamba2.ssm.group_count'");
    gguf_writer_add_u32(w, "mamba2.ssm.group_count", 3); // does not divide the 8 heads
    expect_error(w, ERR_FORMAT, "groups the heads");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);
    const char *tensors[] = {"blk.1.ssm_conv1d.bias", "blk.0.ssm_d", "blk.3.ssm_norm.weight",
                             "blk.2.ssm_in.weight"};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        w = hybrid_copy("mamba2", NULL, tensors[i], &bytes, &g);
        char msg[96];
        snprintf(msg, sizeof msg, "missing tensor '%s'", tensors[i]);
        expect_error(w, ERR_FORMAT, msg);
        gguf_writer_free(w);
        gguf_close(g);
        mem_free(bytes);
    }
    // A as a vector of the wrong length
    w = hybrid_copy("mamba2", NULL, "blk.0.ssm_a", &bytes, &g);
    float a[4] = {-1, -1, -1, -1};
    const int64_t ne[2] = {1, 4};
    gguf_writer_add_tensor(w, "blk.0.ssm_a", QUANT_F32, 2, ne, a, sizeof a);
    expect_error(w, ERR_FORMAT, "tensor 'blk.0.ssm_a': shape [1, 4], expected [1, 8]");
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);
    // granitehybrid's conv bias is optional
    w = hybrid_copy("granitehybrid", NULL, "blk.0.ssm_conv1d.bias", &bytes, &g);
    struct errmsg err = {{0}};
    assert_int_equal(load_writer(w, &err), ERR_OK);
    gguf_writer_free(w);
    gguf_close(g);
    mem_free(bytes);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    struct synth_params p = hybrid_params("qwen35");
    struct gguf_writer *w;
    struct errmsg err = {{0}};
    char path[64];
    assert_int_equal(synth_build(&p, &w, &err), ERR_OK);
    write_file(w, path, sizeof path);
    gguf_writer_free(w);
    const int64_t live = mem_live_count();
    bool done = false;
    for (int64_t n = 0; n < 600 && !done; n++) {
        struct engine_model *m = NULL;
        struct engine_seq *s = NULL;
        mem_fail_after(n);
        int rc = engine_model_load(path, &m, &err);
        if (rc == ERR_OK) rc = engine_seq_new(m, 16, &s);
        mem_fail_after(-1);
        if (rc == ERR_OK)
            done = true;
        else
            assert_int_equal(rc, ERR_NOMEM);
        engine_seq_free(s);
        engine_model_free(m);
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(done);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariant),          cmocka_unit_test(test_memory),
        cmocka_unit_test(test_checkpoints),        cmocka_unit_test(test_view),
        cmocka_unit_test(test_load_errors),        cmocka_unit_test(test_qwen35_load_errors),
        cmocka_unit_test(test_mamba2_load_errors), cmocka_unit_test(test_state_sizes),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
