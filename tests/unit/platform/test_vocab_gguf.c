/* platform/vocab_gguf: struct vocab from GGUF metadata built in memory with the GGUF writer:
 * key types and defaults, family detection, bad files, the Phi-3 strip rule, and an
 * allocation-failure loop over open + load + tok_new. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

/* What a test file holds; fields left 0/NULL are not written. */
struct spec {
    const char *model;
    const char *pre;
    const char *arch;
    const char *name;
    bool with_tokens, with_merges, bad_type_array, short_scores, int_scores;
    int64_t bos; // written when >= 0 (may be out of range on purpose)
};

#define N_EXTRA 4
static const char *const k_extra[N_EXTRA] = {"he", "<|end|>", "\xe2\x96\x81he", "##e"};

static void *build_file(const struct spec *sp, size_t *len)
{
    struct gguf_writer *w;
    assert_int_equal(gguf_writer_new(&w), ERR_OK);
    if (sp->model)
        assert_int_equal(gguf_writer_add_str(w, "tokenizer.ggml.model", sp->model), ERR_OK);
    if (sp->pre) assert_int_equal(gguf_writer_add_str(w, "tokenizer.ggml.pre", sp->pre), ERR_OK);
    if (sp->arch)
        assert_int_equal(gguf_writer_add_str(w, "general.architecture", sp->arch), ERR_OK);
    if (sp->name) assert_int_equal(gguf_writer_add_str(w, "general.name", sp->name), ERR_OK);
    struct str toks[256 + N_EXTRA];
    static char bytes[256][3];
    int32_t types[256 + N_EXTRA];
    float scores[256 + N_EXTRA];
    int32_t iscores[256 + N_EXTRA];
    // ASCII printables stand for themselves; other bytes get distinct 2-byte texts, so the
    // list has no duplicates (the exact GPT-2 mapping does not matter here).
    for (int b = 0; b < 256; b++) {
        bool printable = b >= 33 && b <= 126;
        bytes[b][0] = (char)(printable ? b : 0xc4 + (b >> 6));
        bytes[b][1] = (char)(printable ? 0 : 0x80 + (b & 0x3f));
        toks[b] = (struct str){bytes[b], printable ? 1u : 2u};
        types[b] = 1;
        scores[b] = -1;
        iscores[b] = -1;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        toks[256 + i] = str_from_cstr(k_extra[i]);
        types[256 + i] = i == 1 ? 3 : 1;
        scores[256 + i] = (float)-i;
        iscores[256 + i] = -i;
    }
    int64_t n = 256 + N_EXTRA;
    if (sp->with_tokens)
        assert_int_equal(gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, n), ERR_OK);
    if (sp->bad_type_array)
        assert_int_equal(
            gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_VALUE_F32, scores, n), 0);
    else
        assert_int_equal(
            gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_VALUE_I32, types, n), 0);
    if (sp->int_scores)
        assert_int_equal(
            gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_VALUE_I32, iscores, n), 0);
    else
        assert_int_equal(gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_VALUE_F32, scores,
                                             sp->short_scores ? n - 1 : n),
                         0);
    if (sp->with_merges) {
        struct str merges[] = {str_from_cstr("h e")};
        assert_int_equal(gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 1), 0);
    }
    if (sp->bos >= 0)
        assert_int_equal(gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)sp->bos),
                         0);
    assert_int_equal(gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", true), 0);
    void *data;
    assert_int_equal(gguf_writer_to_memory(w, &data, len), ERR_OK);
    gguf_writer_free(w);
    return data;
}

static int load(const struct spec *sp, struct vocab *v, struct gguf **g, void **data)
{
    size_t len;
    struct errmsg err = {{0}};
    *data = build_file(sp, &len);
    assert_int_equal(gguf_open_memory(*data, len, g, &err), ERR_OK);
    int rc = vocab_load_gguf(*g, v, &err);
    if (rc != ERR_OK) assert_true(err.msg[0] != '\0');
    return rc;
}

static void unload(struct gguf *g, void *data)
{
    gguf_close(g);
    mem_free(data);
}

static void test_gpt2_fields(void **state)
{
    (void)state;
    struct spec sp = {
        .model = "gpt2", .pre = "qwen2", .with_tokens = true, .with_merges = true, .bos = 257};
    struct vocab v;
    struct gguf *g;
    void *data;
    assert_int_equal(load(&sp, &v, &g, &data), ERR_OK);
    assert_int_equal(v.kind, VOCAB_KIND_GPT2);
    assert_true(str_eq_cstr(v.pre, "qwen2"));
    assert_int_equal(v.n_tokens, 256 + N_EXTRA);
    assert_int_equal(v.n_merges, 1);
    assert_true(str_eq_cstr(v.merges[0], "h e"));
    assert_int_equal(v.token_types[257], VOCAB_TOKEN_CONTROL);
    assert_int_equal(v.bos_id, 257);
    assert_true(v.add_eos);
    assert_false(v.add_bos); // qwen2 default
    assert_null(v.strip);
    struct tokenizer *t;
    struct errmsg err;
    assert_int_equal(tok_new(&v, &t, &err), ERR_OK);
    struct tok_ids ids;
    tok_ids_init(&ids);
    assert_int_equal(tok_encode(t, str_from_cstr("he<|end|>"), true, true, &ids), ERR_OK);
    assert_int_equal(ids.n_ids, 3); // he, <|end|>, eos (= default 11 here: in range)
    assert_int_equal(ids.ids[0], 256);
    assert_int_equal(ids.ids[1], 257);
    assert_int_equal(ids.ids[2], 11);
    tok_ids_deinit(&ids);
    tok_free(t);
    vocab_deinit(&v);
    vocab_deinit(&v); // zeroed: a no-op
    unload(g, data);
}

static void test_llama_defaults_and_int_scores(void **state)
{
    (void)state;
    struct spec sp = {.model = "llama", .with_tokens = true, .int_scores = true, .bos = 9999};
    struct vocab v;
    struct gguf *g;
    void *data;
    assert_int_equal(load(&sp, &v, &g, &data), ERR_OK);
    assert_int_equal(v.kind, VOCAB_KIND_LLAMA);
    assert_int_equal(v.bos_id, 1); // 9999 is outside the vocab: default kept
    assert_int_equal(v.eos_id, 2);
    assert_true(v.add_bos);
    assert_true(v.add_space_prefix);
    assert_true(v.scores[258] == -2.0f);
    vocab_deinit(&v);
    unload(g, data);
}

static void test_bert_without_model_key(void **state)
{
    (void)state;
    struct spec sp = {.arch = "bert", .with_tokens = true, .bos = -1};
    struct vocab v;
    struct gguf *g;
    void *data;
    assert_int_equal(load(&sp, &v, &g, &data), ERR_OK);
    assert_int_equal(v.kind, VOCAB_KIND_BERT);
    assert_true(v.lowercase);
    assert_true(v.strip_accents);
    vocab_deinit(&v);
    unload(g, data);
    sp.arch = "llama";
    assert_int_equal(load(&sp, &v, &g, &data), ERR_FORMAT);
    unload(g, data);
}

static void test_bad_files(void **state)
{
    (void)state;
    struct vocab v;
    struct gguf *g;
    void *data;
    const struct spec bad[] = {
        {.model = "gpt2", .with_tokens = false, .with_merges = true, .bos = -1},
        {.model = "gpt2", .with_tokens = true, .with_merges = false, .bos = -1},
        {.model = "llama", .with_tokens = true, .bad_type_array = true, .bos = -1},
        {.model = "llama", .with_tokens = true, .short_scores = true, .bos = -1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load(&bad[i], &v, &g, &data), ERR_FORMAT);
        unload(g, data);
    }
    struct spec rwkv = {.model = "rwkv", .with_tokens = true, .bos = -1};
    assert_int_equal(load(&rwkv, &v, &g, &data), ERR_UNSUPPORTED);
    unload(g, data);
    // "t5" is the unigram tokenizer, with llama.cpp's defaults for it.
    struct spec t5 = {.model = "t5", .with_tokens = true, .bos = -1};
    assert_int_equal(load(&t5, &v, &g, &data), ERR_OK);
    assert_int_equal(v.kind, VOCAB_KIND_UGM);
    assert_int_equal(v.eos_id, 1);
    assert_int_equal(v.unk_id, 2);
    assert_true(v.add_eos);
    assert_false(v.add_bos);
    assert_null(v.charsmap);
    vocab_deinit(&v);
    unload(g, data);
    struct tokenizer *t = NULL;
    struct errmsg err = {{0}};
    assert_int_equal(vocab_tokenizer_from_file("/nonexistent/x.gguf", &t, &err), ERR_IO);
    assert_null(t);
}

static void test_phi3_rstrip(void **state)
{
    (void)state;
    struct spec sp = {.model = "llama", .name = "Phi3 mini", .with_tokens = true, .bos = -1};
    struct vocab v;
    struct gguf *g;
    void *data;
    assert_int_equal(load(&sp, &v, &g, &data), ERR_OK);
    assert_non_null(v.strip);
    assert_int_equal(v.strip[257], VOCAB_STRIP_RIGHT);
    struct tokenizer *t;
    struct errmsg err;
    assert_int_equal(tok_new(&v, &t, &err), ERR_OK);
    struct tok_ids a, b;
    tok_ids_init(&a);
    tok_ids_init(&b);
    assert_int_equal(tok_encode(t, str_from_cstr("<|end|>\n  he"), false, true, &a), ERR_OK);
    assert_int_equal(tok_encode(t, str_from_cstr("<|end|>he"), false, true, &b), ERR_OK);
    assert_int_equal(a.n_ids, b.n_ids); // the whitespace after <|end|> is dropped
    assert_memory_equal(a.ids, b.ids, a.n_ids * sizeof *a.ids);
    assert_int_equal(a.ids[1], 258); // "▁he": prefix space after a special token
    tok_ids_deinit(&a);
    tok_ids_deinit(&b);
    tok_free(t);
    vocab_deinit(&v);
    unload(g, data);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    struct spec sp = {.model = "gpt2",
                      .pre = "llama-bpe",
                      .name = "phi3",
                      .with_tokens = true,
                      .with_merges = true,
                      .bos = -1};
    size_t len;
    void *data = build_file(&sp, &len);
    int64_t live = mem_live_count();
    bool done = false;
    for (int64_t n = 0; !done && n < 5000; n++) {
        struct gguf *g = NULL;
        struct vocab v;
        struct tokenizer *t = NULL;
        struct errmsg err = {{0}};
        mem_fail_after(n);
        int rc = gguf_open_memory(data, len, &g, &err);
        if (rc == ERR_OK) {
            rc = vocab_load_gguf(g, &v, &err);
            if (rc == ERR_OK) {
                rc = tok_new(&v, &t, &err);
                vocab_deinit(&v);
            }
            gguf_close(g);
        }
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            done = true;
            tok_free(t);
        } else {
            assert_int_equal(rc, ERR_NOMEM);
        }
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(done);
    mem_free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_fields),
        cmocka_unit_test(test_llama_defaults_and_int_scores),
        cmocka_unit_test(test_bert_without_model_key),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_phi3_rstrip),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
