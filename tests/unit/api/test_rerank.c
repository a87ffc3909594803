/* api/rerank: how a (query, document) pair becomes one input, for each layout llama.cpp's
 * server uses: bos? query eos? sep? document eos? as the vocab flags say, or the rerank
 * template with {query} and {document} replaced and special tokens parsed. The tokenizer is
 * gguf-synth's built-in bert vocabulary. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/rerank.h"
#include "engine/gguf/gguf_write.h"
#include "engine/gguf/synth.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct tokenizer *tok;

static int setup(void **state)
{
    (void)state;
    struct synth_params p = synth_params_default();
    p.arch = "bert";
    p.n_layer = 1;
    p.n_embd = 16;
    p.n_head = 2;
    p.n_ff = 16;
    p.n_vocab = synth_builtin_vocab_size("bert");
    struct gguf_writer *w;
    struct errmsg err;
    char path[96];
    snprintf(path, sizeof path, "/tmp/llamapi-test-rerank-vocab-%d.gguf", (int)getpid());
    if (synth_build(&p, &w, &err) != ERR_OK || gguf_writer_to_file(w, path, &err) != ERR_OK)
        return -1;
    gguf_writer_free(w);
    int rc = vocab_tokenizer_from_file(path, &tok, &err);
    unlink(path);
    return rc == ERR_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tok_free(tok);
    return 0;
}

static struct str s_(const char *s)
{
    return (struct str){s, strlen(s)};
}

/* The pair's ids under d must be exactly want (n of them). */
static void expect_pair(const struct platform_model_desc *d, const char *q, const char *doc,
                        const tok_id *want, size_t n)
{
    struct tok_ids ids;
    tok_ids_init(&ids);
    assert_int_equal(tok_ids_push(&ids, 19), ERR_OK); // appended after what is there
    assert_int_equal(rerank_format_pair(d, s_(q), s_(doc), &ids), ERR_OK);
    if (ids.n_ids != n + 1) {
        for (size_t i = 0; i < ids.n_ids; i++)
            printf("%d ", (int)ids.ids[i]);
        printf("\n");
        fail_msg("'%s' / '%s': %zu ids, want %zu", q, doc, ids.n_ids - 1, n);
    }
    assert_int_equal(ids.ids[0], 19);
    assert_memory_equal(ids.ids + 1, want, n * sizeof *want);
    tok_ids_deinit(&ids);
}

/* Vocabulary of the built-in bert: 2 [CLS], 3 [SEP], 5 hello, 6 world, 7 the, 8 a. */
static void test_vocab_flags(void **state)
{
    (void)state;
    struct platform_model_desc d = {
        .tokenizer = tok, .n_cls_out = 1, .rerank_bos = 2, .rerank_eos = -1, .rerank_sep = 3};
    // bert's flags (add_bos, add_sep): [CLS] query [SEP] document, no closing [SEP].
    const tok_id bert[] = {2, 5, 6, 3, 7, 8};
    expect_pair(&d, "hello world", "the a", bert, 6);
    // An empty document leaves the separators.
    const tok_id empty[] = {2, 5, 3};
    expect_pair(&d, "hello", "", empty, 3);
    // add_eos as well: eos after the query and after the document.
    d.rerank_eos = 9;
    const tok_id all3[] = {2, 5, 9, 3, 6, 9};
    expect_pair(&d, "hello", "world", all3, 6);
    // llama-like flags: bos and eos, no sep.
    d = (struct platform_model_desc){
        .tokenizer = tok, .n_cls_out = 1, .rerank_bos = 1, .rerank_eos = 4, .rerank_sep = -1};
    const tok_id llama[] = {1, 7, 4, 6, 4};
    expect_pair(&d, "the", "world", llama, 5);
    // No flags at all: the texts back to back.
    d.rerank_bos = d.rerank_eos = -1;
    const tok_id bare[] = {5, 6};
    expect_pair(&d, "hello", "world", bare, 2);
}

/* Special-token text in a query is text, not a token, without a template. */
static void test_specials_not_parsed(void **state)
{
    (void)state;
    const struct platform_model_desc d = {
        .tokenizer = tok, .n_cls_out = 1, .rerank_bos = 2, .rerank_eos = -1, .rerank_sep = 3};
    struct tok_ids ids;
    tok_ids_init(&ids);
    assert_int_equal(rerank_format_pair(&d, s_("[SEP]"), s_("a"), &ids), ERR_OK);
    size_t n_sep = 0;
    for (size_t i = 0; i < ids.n_ids; i++)
        n_sep += ids.ids[i] == 3;
    assert_int_equal(n_sep, 1); // only the layout's
    assert_true(ids.n_ids > 4);
    tok_ids_deinit(&ids);
}

/* A template: every {query} and {document} replaced, then tokenized with specials parsed and
 * nothing added, so the template's own markers are the only special tokens. */
static void test_template(void **state)
{
    (void)state;
    struct platform_model_desc d = {.tokenizer = tok,
                                    .n_cls_out = 1,
                                    .rerank_template = "[CLS]{query}[SEP]{document}[SEP]{query}",
                                    .rerank_bos = 2,
                                    .rerank_eos = 9,
                                    .rerank_sep = 3};
    const tok_id want[] = {2, 5, 3, 7, 8, 3, 5};
    expect_pair(&d, "hello", "the a", want, 7);
    // Braces that are not placeholders stay text; no placeholder at all is just the text.
    d.rerank_template = "{query";
    struct tok_ids a, b;
    tok_ids_init(&a);
    tok_ids_init(&b);
    assert_int_equal(rerank_format_pair(&d, s_("hello"), s_("x"), &a), ERR_OK);
    assert_int_equal(tok_encode(tok, s_("{query"), false, true, &b), ERR_OK);
    assert_int_equal(a.n_ids, b.n_ids);
    assert_memory_equal(a.ids, b.ids, a.n_ids * sizeof *a.ids);
    tok_ids_deinit(&a);
    tok_ids_deinit(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_flags),
        cmocka_unit_test(test_specials_not_parsed),
        cmocka_unit_test(test_template),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
