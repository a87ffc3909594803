/* text/tokenizer_json and the Unigram tokenizer: hand-built vocabularies (Viterbi choice,
 * unknown runs, byte fallback, the GGUF whitespace rules, a precompiled charsmap built here),
 * tokenizer.json fixtures written by the test (Unigram with Precompiled + Replace + Metaspace,
 * WordPiece with BertNormalizer, byte-level BPE with a Split regex; post-processors and
 * tokenizer_config.json), malformed files (each a clear error), allocation failures, and the
 * reference's UGM vocab (ggml-vocab-nomic-bert-moe.gguf, XLM-R's tokenizer) against vectors
 * tests/data/ugm-xlmr.out recorded with the reference tokenizer, both as the GGUF and rewritten
 * as a tokenizer.json, when that vocab is present; ../shared's qwen2 (BPE) and bert-bge
 * (WordPiece) vocabs rewritten as tokenizer.json against their golden ids. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/gguf/gguf.h"
#include "platform/cpu/vocab_gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/tokenizer_json.h"
#include "text/tokenizer/vocab.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/mem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SP "\xe2\x96\x81" // U+2581

/* ---- a precompiled charsmap built by hand ---- */

/* The double array: entry[0]'s base is the root's child block B0; the entry of a node reached
 * by label c sits at B ^ c (B its parent's block) and holds (B' ^ index) << 10 | leaf << 8 | c,
 * B' its own child block; a leaf's replacement offset sits at index B' with bit 31 set. Keys
 * here are short, so every value stays below 2^21. */
struct xcda {
    uint32_t e[4096];
    bool used[4096];
    struct buf repl;
};

/* Finds a base whose value slot (when leaf) and child slots are all free. */
static uint32_t find_base(struct xcda *x, const unsigned char *labels, int n, bool leaf)
{
    for (uint32_t b = 1; b < 4096; b++) {
        bool ok = !(leaf && x->used[b]);
        for (int i = 0; i < n && ok; i++)
            ok = (b ^ labels[i]) < 4096 && !x->used[b ^ labels[i]] && (b ^ labels[i]) != 0;
        if (ok) return b;
    }
    fail();
    return 0;
}

/* Places the subtree of keys sharing prefix key[0..depth) under entry p. */
static void place(struct xcda *x, uint32_t p, const char *const *keys, const char *const *vals,
                  int n_keys, size_t depth, const char *prefix)
{
    unsigned char labels[64];
    int n = 0;
    int value_of = -1;
    for (int k = 0; k < n_keys; k++) {
        if (strncmp(keys[k], prefix, depth) != 0) continue;
        if (strlen(keys[k]) == depth) {
            value_of = k;
            continue;
        }
        unsigned char c = (unsigned char)keys[k][depth];
        bool seen = false;
        for (int i = 0; i < n; i++)
            seen = seen || labels[i] == c;
        if (!seen) labels[n++] = c;
    }
    bool leaf = value_of >= 0 && p != 0;
    uint32_t b = find_base(x, labels, n, leaf);
    x->e[p] = (x->e[p] & 0x1ff) | (b ^ p) << 10; // stored relative to the node's index
    if (leaf) {
        x->used[b] = true;
        x->e[b] = 1u << 31 | (uint32_t)x->repl.len;
        assert_int_equal(buf_append(&x->repl, vals[value_of], strlen(vals[value_of]) + 1), ERR_OK);
    }
    for (int i = 0; i < n; i++)
        x->used[b ^ labels[i]] = true;
    for (int i = 0; i < n; i++) {
        uint32_t q = b ^ labels[i];
        char next[32];
        memcpy(next, prefix, depth);
        next[depth] = (char)labels[i];
        next[depth + 1] = '\0';
        bool child_leaf = false;
        for (int k = 0; k < n_keys; k++)
            child_leaf = child_leaf || strcmp(keys[k], next) == 0;
        x->e[q] = (child_leaf ? 1u << 8 : 0) | labels[i];
        place(x, q, keys, vals, n_keys, depth + 1, next);
    }
}

/* A charsmap mapping "H" -> "h", U+FF21 (full-width A) -> "a", "ff" -> "F". */
static void build_charsmap(struct buf *out)
{
    static const char *const keys[] = {"H", "\xef\xbc\xa1", "ff"};
    static const char *const vals[] = {"h", "a", "F"};
    struct xcda *x = calloc(1, sizeof *x);
    assert_non_null(x);
    buf_init(&x->repl);
    x->used[0] = true;
    place(x, 0, keys, vals, 3, 0, "");
    uint32_t n = 0;
    for (uint32_t i = 0; i < 4096; i++)
        if (x->used[i]) n = i + 1;
    uint32_t blob = n * 4;
    unsigned char hdr[4] = {(unsigned char)blob, (unsigned char)(blob >> 8),
                            (unsigned char)(blob >> 16), (unsigned char)(blob >> 24)};
    assert_int_equal(buf_append(out, hdr, 4), ERR_OK);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char le[4] = {(unsigned char)x->e[i], (unsigned char)(x->e[i] >> 8),
                               (unsigned char)(x->e[i] >> 16), (unsigned char)(x->e[i] >> 24)};
        assert_int_equal(buf_append(out, le, 4), ERR_OK);
    }
    assert_int_equal(buf_append(out, x->repl.data, x->repl.len), ERR_OK);
    buf_deinit(&x->repl);
    free(x);
}

/* ---- hand-built Unigram vocabs (the GGUF path) ---- */

#define MAX_TOK 300

struct test_vocab {
    struct vocab v;
    struct str tokens[MAX_TOK];
    float scores[MAX_TOK];
    int32_t types[MAX_TOK];
    char bytes[256][7];
};

static tok_id add(struct test_vocab *tv, const char *text, float score, int32_t type)
{
    tok_id id = tv->v.n_tokens++;
    assert_true(id < MAX_TOK);
    tv->tokens[id] = str_from_cstr(text);
    tv->scores[id] = score;
    tv->types[id] = type;
    return id;
}

/* 0 <pad>, 1 </s>, 2 <unk> (the t5 defaults), then the pieces. */
enum { U_SP = 3, U_A, U_B, U_AB, U_SPAB, U_SPA, U_C, U_SPC, U_HELLO, U_USER };

static void ugm_vocab(struct test_vocab *tv)
{
    memset(tv, 0, sizeof *tv);
    vocab_init_defaults(&tv->v, VOCAB_KIND_UGM, (struct str){"", 0});
    tv->v.tokens = tv->tokens;
    tv->v.scores = tv->scores;
    tv->v.token_types = tv->types;
    add(tv, "<pad>", 0, VOCAB_TOKEN_CONTROL);
    add(tv, "</s>", 0, VOCAB_TOKEN_CONTROL);
    add(tv, "<unk>", 0, VOCAB_TOKEN_UNKNOWN);
    add(tv, SP, -2.0f, VOCAB_TOKEN_NORMAL);
    add(tv, "a", -3.0f, VOCAB_TOKEN_NORMAL);
    add(tv, "b", -3.0f, VOCAB_TOKEN_NORMAL);
    add(tv, "ab", -5.5f, VOCAB_TOKEN_NORMAL);    // beats a + b (-6)
    add(tv, SP "ab", -9.0f, VOCAB_TOKEN_NORMAL); // loses to ▁ + ab (-7.5)
    add(tv, SP "a", -4.0f, VOCAB_TOKEN_NORMAL);
    add(tv, "c", -3.0f, VOCAB_TOKEN_NORMAL);
    add(tv, SP "c", -1.0f, VOCAB_TOKEN_NORMAL);
    add(tv, SP "hello", -1.0f, VOCAB_TOKEN_NORMAL);
    add(tv, "<x>", 0, VOCAB_TOKEN_USER_DEFINED);
}

static void encode_expect(const struct tokenizer *t, const char *text, int flags,
                          const tok_id *want, size_t n_want)
{
    struct tok_ids ids;
    tok_ids_init(&ids);
    assert_int_equal(tok_encode(t, str_from_cstr(text), flags & 1, (flags & 2) != 0, &ids), ERR_OK);
    if (ids.n_ids != n_want || (n_want && memcmp(ids.ids, want, n_want * sizeof *want))) {
        fprintf(stderr, "'%s': got", text);
        for (size_t i = 0; i < ids.n_ids; i++)
            fprintf(stderr, " %d", (int)ids.ids[i]);
        fprintf(stderr, "\n");
        fail();
    }
    tok_ids_deinit(&ids);
}

/* special: 0 plain, 1 (true) add special tokens, PARSE parse special tokens in the text. */
#define PARSE 2
#define EXPECT(t, text, special, ...)                                                              \
    do {                                                                                           \
        const tok_id want_[] = {__VA_ARGS__};                                                      \
        encode_expect(t, text, special, want_, sizeof want_ / sizeof want_[0]);                    \
    } while (0)

static struct tokenizer *new_tok(const struct vocab *v)
{
    struct tokenizer *t = NULL;
    struct errmsg err = {{0}};
    int rc = tok_new(v, &t, &err);
    if (rc != ERR_OK) fprintf(stderr, "tok_new: %s\n", err.msg);
    assert_int_equal(rc, ERR_OK);
    return t;
}

static void test_ugm_viterbi(void **state)
{
    (void)state;
    struct test_vocab tv;
    ugm_vocab(&tv);
    tv.v.add_space_prefix = true;
    struct tokenizer *t = new_tok(&tv.v);
    EXPECT(t, "ab", false, U_SPA, U_B);          // ▁a + b -7 beats ▁ + ab -7.5 and ▁ab -9
    EXPECT(t, "ab c", false, U_SPA, U_B, U_SPC); // the space becomes ▁ and joins c
    EXPECT(t, "a", true, U_SPA, 1);              // add_eos appends </s>
    EXPECT(t, "hello", false, U_HELLO);
    EXPECT(t, "a<x>b", false, U_SPA, U_USER, U_SP, U_B); // user-defined split out; each
                                                         // fragment gets its prefix
    EXPECT(t, "", true, 1);
    tok_free(t);
}

static void test_ugm_unknown_runs(void **state)
{
    (void)state;
    struct test_vocab tv;
    ugm_vocab(&tv);
    struct tokenizer *t = new_tok(&tv.v);
    // No prefix: "zz\xc3\xa9a" has three unknown characters in a row -> one <unk>.
    EXPECT(t,
           "zz\xc3\xa9"
           "a",
           false, 2, U_A);
    EXPECT(t, "azb", false, U_A, 2, U_B);
    EXPECT(t, "\xff", false, 2); // invalid UTF-8 -> U+FFFD -> unknown
    tok_free(t);

    // Byte fallback: the unknown run becomes its bytes when every byte has a token.
    ugm_vocab(&tv);
    tok_id byte0 = tv.v.n_tokens;
    for (int b = 0; b < 256; b++) {
        snprintf(tv.bytes[b], sizeof tv.bytes[b], "<0x%02X>", b);
        add(&tv, tv.bytes[b], 0, VOCAB_TOKEN_BYTE);
    }
    tv.v.byte_fallback = true;
    t = new_tok(&tv.v);
    EXPECT(t,
           "z\xc3\xa9"
           "a",
           false, byte0 + 'z', byte0 + 0xc3, byte0 + 0xa9, U_A);
    struct buf dec;
    buf_init(&dec);
    tok_id ids[] = {byte0 + 0xc3, byte0 + 0xa9, U_SPA};
    assert_int_equal(tok_decode(t, ids, 3, false, &dec), ERR_OK);
    assert_string_equal(dec.data, "\xc3\xa9 a");
    buf_deinit(&dec);
    tok_free(t);
}

static void test_ugm_gguf_whitespace(void **state)
{
    (void)state;
    struct test_vocab tv;
    ugm_vocab(&tv);
    tv.v.add_space_prefix = true;
    tv.v.remove_extra_ws = true;
    struct tokenizer *t = new_tok(&tv.v);
    EXPECT(t, "  a   c  ", false, U_SPA, U_SPC); // leading, repeated and trailing dropped
    tok_free(t);
    ugm_vocab(&tv);
    tv.v.add_space_prefix = false;
    t = new_tok(&tv.v);
    EXPECT(t, "a  c", false, U_A, U_SP, U_SPC);
    EXPECT(t, "ab", false, U_AB); // ab -5.5 beats a + b -6 (no prefix here)
    tok_free(t);
    // Without an unknown token and without byte fallback there is no way to encode text.
    ugm_vocab(&tv);
    tv.v.unk_id = TOK_ID_NONE;
    tv.types[2] = VOCAB_TOKEN_CONTROL;
    struct tokenizer *bad = NULL;
    struct errmsg err = {{0}};
    assert_int_equal(tok_new(&tv.v, &bad, &err), ERR_INVALID);
    assert_non_null(strstr(err.msg, "unknown token"));
    assert_null(bad);
}

static void test_ugm_charsmap(void **state)
{
    (void)state;
    struct buf map;
    buf_init(&map);
    build_charsmap(&map);
    struct test_vocab tv;
    ugm_vocab(&tv);
    tv.v.add_space_prefix = true;
    tv.v.charsmap = (const uint8_t *)map.data;
    tv.v.charsmap_len = map.len;
    tok_id sp_f = add(&tv, SP "F", -1.0f, VOCAB_TOKEN_NORMAL);
    struct tokenizer *t = new_tok(&tv.v);
    EXPECT(t, "Hello", false, U_HELLO); // H -> h
    EXPECT(t,
           "\xef\xbc\xa1"
           "b",
           false, U_SPA, U_B);    // full-width A -> a
    EXPECT(t, "ff", false, sp_f); // the longest prefix wins
    tok_free(t);
    // Malformed maps are refused at load, never read out of bounds.
    static const size_t cuts[] = {0, 3, 4, 5, 8};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        tv.v.charsmap_len = cuts[i];
        struct tokenizer *bad = NULL;
        struct errmsg err = {{0}};
        int rc = tok_new(&tv.v, &bad, &err);
        if (cuts[i] == 0) {
            assert_int_equal(rc, ERR_OK); // no map at all is fine
            tok_free(bad);
        } else {
            assert_int_equal(rc, ERR_INVALID);
        }
    }
    // A map whose entries point anywhere: garbage in, no crash out.
    unsigned char junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 37 + 11);
    junk[0] = 40, junk[1] = junk[2] = junk[3] = 0;
    tv.v.charsmap = junk;
    tv.v.charsmap_len = sizeof junk;
    t = new_tok(&tv.v);
    struct tok_ids ids;
    tok_ids_init(&ids);
    assert_int_equal(tok_encode(t, str_from_cstr("Hello \x01\x7f ab"), true, false, &ids), ERR_OK);
    tok_ids_deinit(&ids);
    tok_free(t);
    buf_deinit(&map);
}

/* ---- tokenizer.json fixtures ---- */

static char *unigram_json(const char *extra_norm)
{
    struct buf map, b64, j;
    buf_init(&map);
    buf_init(&b64);
    buf_init(&j);
    build_charsmap(&map);
    assert_int_equal(base64_encode_buf(&b64, map.data, map.len), ERR_OK);
    assert_int_equal(
        buf_printf(
            &j,
            "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
            "\"added_tokens\":["
            "{\"id\":0,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
            "\"normalized\":false,\"special\":true},"
            "{\"id\":1,\"content\":\"<pad>\",\"special\":true},"
            "{\"id\":2,\"content\":\"</s>\",\"special\":true},"
            "{\"id\":3,\"content\":\"<unk>\",\"special\":true},"
            "{\"id\":11,\"content\":\"<mask>\",\"lstrip\":true,\"special\":true}],"
            "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
            "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"%s\"},"
            "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" {2,}\"},\"content\":\" \"}%s]},"
            "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"" SP "\","
            "\"prepend_scheme\":\"always\",\"split\":true},"
            "\"post_processor\":{\"type\":\"TemplateProcessing\","
            "\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
            "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"</s>\","
            "\"type_id\":0}}],\"pair\":[],\"special_tokens\":{"
            "\"<s>\":{\"id\":\"<s>\",\"ids\":[0],\"tokens\":[\"<s>\"]},"
            "\"</s>\":{\"id\":\"</s>\",\"ids\":[2],\"tokens\":[\"</s>\"]}}},"
            "\"decoder\":{\"type\":\"Metaspace\"},"
            "\"model\":{\"type\":\"Unigram\",\"unk_id\":3,\"byte_fallback\":false,\"vocab\":["
            "[\"<s>\",0.0],[\"<pad>\",0.0],[\"</s>\",0.0],[\"<unk>\",0.0],"
            "[\"" SP "\",-3.5],[\"" SP "hello\",-5.25],[\"" SP "world\",-6.0],[\"hel\",-8.0],"
            "[\"lo\",-7.0],[\"a\",-4.0],[\"" SP "a\",-4.5]]}}",
            b64.data, extra_norm),
        ERR_OK);
    buf_deinit(&map);
    buf_deinit(&b64);
    return buf_steal(&j);
}

static struct tokenizer *load_json(const char *json, const char *config, struct tok_json_info *info)
{
    struct tokenizer *t = NULL;
    struct errmsg err = {{0}};
    int rc = tok_json_load(json, strlen(json), config, config ? strlen(config) : 0, &t, info, &err);
    if (rc != ERR_OK) fprintf(stderr, "tok_json_load: %s\n", err.msg);
    assert_int_equal(rc, ERR_OK);
    return t;
}

static void test_json_unigram(void **state)
{
    (void)state;
    char *json = unigram_json("");
    struct tok_json_info info;
    struct tokenizer *t = load_json(json, NULL, &info);
    assert_string_equal(info.model, "Unigram");
    assert_int_equal(info.model_max_length, 0);
    assert_int_equal(tok_kind(t), VOCAB_KIND_UGM);
    EXPECT(t, "Hello   world", true, 0, 5, 6, 2); // H -> h, runs of spaces -> one
    EXPECT(t, "hello", false, 5);
    EXPECT(t, "hello<mask>", PARSE, 5, 11);
    EXPECT(t, "hello <mask>", PARSE, 5, 11);         // <mask> swallows the space before it (lstrip)
    EXPECT(t, "\xef\xbc\xa1", false, 10);            // full-width A -> ▁a
    EXPECT(t, "hello \xe2\x82\xac", false, 5, 4, 3); // ▁ alone, then an unknown €
    EXPECT(t, "<s>hello", PARSE, 0, 5); // special added tokens are matched when parsing
    struct buf dec;
    buf_init(&dec);
    tok_id ids[] = {0, 5, 6, 2};
    assert_int_equal(tok_decode(t, ids, 4, false, &dec), ERR_OK);
    assert_string_equal(dec.data, "hello world");
    buf_deinit(&dec);
    tok_free(t);
    free(json);

    // Extra steps: NFKC folds the full-width A itself; Lowercase; Strip; Prepend.
    json = unigram_json(",{\"type\":\"NFKC\"},{\"type\":\"Lowercase\"},"
                        "{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true}");
    t = load_json(json,
                  "{\"add_eos_token\":false,\"model_max_length\":512,"
                  "\"pad_token\":{\"content\":\"<pad>\"}}",
                  &info);
    assert_int_equal(info.model_max_length, 512);
    assert_int_equal(info.pad_id, 1);
    EXPECT(t, "  HELLO  ", true, 0, 5); // add_eos_token false in the config wins
    tok_free(t);
    free(json);
}

static void test_json_wordpiece(void **state)
{
    (void)state;
    static const char json[] =
        "{\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true},"
        "{\"id\":1,\"content\":\"[UNK]\",\"special\":true},"
        "{\"id\":2,\"content\":\"[CLS]\",\"special\":true},"
        "{\"id\":3,\"content\":\"[SEP]\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,"
        "\"handle_chinese_chars\":true,\"strip_accents\":null,\"lowercase\":true},"
        "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
        "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\","
        "2]},"
        "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":"
        "\"##\","
        "\"max_input_chars_per_word\":100,\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,"
        "\"[SEP]\":3,\"hello\":4,\",\":5,\"un\":6,\"##aff\":7,\"##able\":8,\"cafe\":9}}}";
    struct tok_json_info info;
    struct tokenizer *t = load_json(json, NULL, &info);
    assert_string_equal(info.model, "WordPiece");
    EXPECT(t, "Hello, unaffable CAF\xc3\x89 xyz", true, 2, 4, 5, 6, 7, 8, 9, 1, 3);
    tok_free(t);
}

static void test_json_bpe(void **state)
{
    (void)state;
    static const char json[] =
        "{\"added_tokens\":[{\"id\":9,\"content\":\"<|endoftext|>\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"NFC\"},"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"Regex\":\" "
        "?\\\\p{L}+|\\\\s+\"},\"behavior\":\"Isolated\","
        "\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":"
        "false,"
        "\"use_regex\":false}]},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":"
        "\"A\"}},"
        "{\"SpecialToken\":{\"id\":\"<|endoftext|>\"}}],\"special_tokens\":{\"<|endoftext|>\":"
        "{\"id\":\"<|endoftext|>\",\"ids\":[9]}}},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"h\":0,\"e\":1,\"l\":2,\"o\":3,\"\\u0120\":4,"
        "\"he\":5,\"ll\":6,\"llo\":7,\"hello\":8,\"\\u0120hello\":10},"
        "\"merges\":[\"h e\",[\"l\",\"l\"],\"ll o\",\"he llo\",\"\\u0120 hello\"]}}";
    struct tok_json_info info;
    struct tokenizer *t = load_json(json, NULL, &info);
    assert_string_equal(info.model, "BPE");
    EXPECT(t, "hello hello", true, 8, 10, 9);
    EXPECT(t, "hel", false, 5, 2);
    tok_free(t);

    // ByteLevel alone (use_regex by default): GPT-2's split, the same pieces here.
    static const char plain[] =
        "{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
        "\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{\"h\":0,\"e\":1,"
        "\"l\":2,\"o\":3,\"\\u0120\":4,\"he\":5,\"ll\":6,\"llo\":7,\"hello\":8,"
        "\"\\u0120hello\":9,\"hell\":10},\"merges\":[\"h e\",\"l l\",\"ll o\",\"he llo\","
        "\"\\u0120 hello\"]}}";
    t = load_json(plain, NULL, NULL);
    EXPECT(t, "hello  hello", false, 8, 4, 9); // " " alone, then " hello": \s+(?!\S)
    EXPECT(t, "hell", false, 10); // ignore_merges: a whole-token piece is taken as it is
    tok_free(t);
}

/* Each malformed file: the given code and a message, never a crash. */
static void test_json_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *json, *config;
        int code;
        const char *says;
    } cases[] = {
        {"", NULL, ERR_FORMAT, "not valid JSON"},
        {"[1,2]", NULL, ERR_FORMAT, "not a JSON object"},
        {"{}", NULL, ERR_FORMAT, "model is missing"},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}}}", NULL, ERR_UNSUPPORTED, "WordLevel"},
        {"{\"model\":{\"type\":\"Unigram\",\"vocab\":{\"a\":1}}}", NULL, ERR_FORMAT,
         "not an array"},
        {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",\"x\"]]}}", NULL, ERR_FORMAT,
         "[piece, score]"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",1e300]]}}", NULL,
         ERR_FORMAT, "out of range"},
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":99999999}}}", NULL, ERR_LIMIT,
         "too large"},
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":-1}}}", NULL, ERR_FORMAT, ">= 0"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]},"
         "\"normalizer\":{\"type\":\"Nmt\"}}",
         NULL, ERR_UNSUPPORTED, "Nmt"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]},"
         "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"@@@\"}}",
         NULL, ERR_FORMAT, "base64"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]},"
         "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAAA\"}}",
         NULL, ERR_INVALID, "charsmap"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]},"
         "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(\"},\"content\":\"\"}}",
         NULL, ERR_UNSUPPORTED, "regex"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]},"
         "\"pre_tokenizer\":{\"type\":\"Digits\"}}",
         NULL, ERR_UNSUPPORTED, "Digits"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1],[\"b\",-1]]},"
         "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
         "{\"id\":\"a\"}},{\"SpecialToken\":{\"id\":\"b\"}},{\"Sequence\":{\"id\":\"A\"}}]}}",
         NULL, ERR_UNSUPPORTED, "one token per side"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[1]}}", NULL, ERR_FORMAT,
         "merges"},
        {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1]]}}", NULL, ERR_INVALID,
         "unknown token"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]}}", "{", ERR_FORMAT,
         "tokenizer_config.json"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]},"
         "\"added_tokens\":[{\"id\":\"x\"}]}",
         NULL, ERR_FORMAT, "added_tokens"},
        {"{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]},"
         "\"model\":{}}",
         NULL, ERR_FORMAT, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tokenizer *t = NULL;
        struct errmsg err = {{0}};
        int rc = tok_json_load(cases[i].json, strlen(cases[i].json), cases[i].config,
                               cases[i].config ? strlen(cases[i].config) : 0, &t, NULL, &err);
        if (rc != cases[i].code || !strstr(err.msg, cases[i].says))
            fprintf(stderr, "case %zu: rc %d, '%s'\n", i, rc, err.msg);
        assert_int_equal(rc, cases[i].code);
        assert_non_null(strstr(err.msg, cases[i].says));
        assert_null(t);
    }
}

/* Converters write an empty charsmap for "no map": the step is then a no-op, not an error. */
static void test_json_empty_charsmap(void **state)
{
    (void)state;
    static const char json[] =
        "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0],[\"\\u2581a\",-1]]}"
        ","
        "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Precompiled\","
        "\"precompiled_charsmap\":\"\"}]},\"pre_tokenizer\":{\"type\":\"Metaspace\","
        "\"replacement\":\"\\u2581\",\"add_prefix_space\":true}}";
    struct tokenizer *t = load_json(json, NULL, NULL);
    EXPECT(t, "a", false, 1);
    tok_free(t);
}

static void test_json_alloc_failures(void **state)
{
    (void)state;
    char *json = unigram_json(",{\"type\":\"NFKC\"}");
    int64_t live = mem_live_count();
    bool done = false;
    for (int64_t n = 0; !done && n < 5000; n++) {
        struct tokenizer *t = NULL;
        struct errmsg err = {{0}};
        mem_fail_after(n);
        int rc = tok_json_load(json, strlen(json), NULL, 0, &t, NULL, &err);
        if (rc == ERR_OK) {
            struct tok_ids ids;
            tok_ids_init(&ids);
            rc = tok_encode(t, str_from_cstr("Hello  world"), true, false, &ids);
            mem_fail_after(-1);
            if (rc == ERR_OK) {
                assert_int_equal(ids.n_ids, 4);
                done = true;
            } else {
                assert_int_equal(rc, ERR_NOMEM);
            }
            tok_ids_deinit(&ids);
            tok_free(t);
        } else {
            mem_fail_after(-1);
            assert_int_equal(rc, ERR_NOMEM);
            assert_null(t);
        }
        assert_int_equal(mem_live_count(), live);
    }
    mem_fail_after(-1);
    assert_true(done);
    free(json);
}

/* ---- the reference's UGM vocab ---- */

static const char *find_ugm_vocab(void)
{
    static char path[512];
    const char *home = getenv("HOME");
    const char *dirs[] = {"../shared/models/vocab", NULL};
    char ref[400];
    if (home) {
        snprintf(ref, sizeof ref, "%s/.cache/llamapi-reference/llama.cpp/models", home);
        dirs[1] = ref;
    }
    for (size_t i = 0; i < 2; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/ggml-vocab-nomic-bert-moe.gguf", dirs[i]);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return path;
        }
    }
    return NULL;
}

static bool slurp(const char *path, struct buf *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        assert_int_equal(buf_append(out, chunk, n), ERR_OK);
    fclose(f);
    if (!out->data) assert_int_equal(buf_append(out, "", 0), ERR_OK);
    return true;
}

/* tests/data/ugm-xlmr.inp / .out: the llama.cpp test-tokenizer-0 format (inputs separated by
 * "\n__ggml_vocab_test__\n", one line of ids per input, no special tokens added). The inputs
 * are the 46 strings of ../shared's llama-spm vectors plus six multilingual, full-width and
 * special-token-looking ones; the ids were recorded with the reference library's
 * llama_tokenize (add_special and parse_special false) on ggml-vocab-nomic-bert-moe.gguf.
 * Returns the number of mismatches; *n_cases gets the case count. */
static int compare_vectors(const struct tokenizer *t, const char *label, int *n_cases)
{
    struct buf inp, outp;
    buf_init(&inp);
    buf_init(&outp);
    assert_true(slurp("tests/data/ugm-xlmr.inp", &inp));
    assert_true(slurp("tests/data/ugm-xlmr.out", &outp));
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t ip = 0, op = 0;
    int cases = 0, fails = 0;
    while (ip < inp.len) {
        const char *next = strstr(inp.data + ip, sep);
        size_t case_len = next ? (size_t)(next - (inp.data + ip)) : inp.len - ip;
        const char *nl = memchr(outp.data + op, '\n', outp.len - op);
        size_t line_len = nl ? (size_t)(nl - (outp.data + op)) : outp.len - op;
        struct tok_ids want, got;
        tok_ids_init(&want);
        tok_ids_init(&got);
        for (size_t i = 0; i < line_len;) {
            char *end;
            long v = strtol(outp.data + op + i, &end, 10);
            if (end == outp.data + op + i) break;
            assert_int_equal(tok_ids_push(&want, (tok_id)v), ERR_OK);
            i = (size_t)(end - (outp.data + op));
        }
        struct str text = {inp.data + ip, case_len};
        assert_int_equal(tok_encode(t, text, false, false, &got), ERR_OK);
        if (want.n_ids != got.n_ids ||
            (want.n_ids && memcmp(want.ids, got.ids, want.n_ids * sizeof *want.ids))) {
            fails++;
            fprintf(stderr, "%s case %d '%.*s': want", label, cases, (int)case_len, text.ptr);
            for (size_t i = 0; i < want.n_ids; i++)
                fprintf(stderr, " %d", (int)want.ids[i]);
            fprintf(stderr, "\n  got ");
            for (size_t i = 0; i < got.n_ids; i++)
                fprintf(stderr, " %d", (int)got.ids[i]);
            fprintf(stderr, "\n");
        }
        tok_ids_deinit(&want);
        tok_ids_deinit(&got);
        cases++;
        op += line_len + (nl ? 1 : 0);
        if (!next) break;
        ip += case_len + sizeof sep - 1;
    }
    printf("%s: %d/%d\n", label, cases - fails, cases);
    buf_deinit(&inp);
    buf_deinit(&outp);
    *n_cases = cases;
    return fails;
}

static void test_ugm_reference_vectors(void **state)
{
    (void)state;
    const char *path = find_ugm_vocab();
    if (!path) {
        printf("skip: ggml-vocab-nomic-bert-moe.gguf not found (../shared or the reference)\n");
        skip();
    }
    struct tokenizer *t = NULL;
    struct errmsg err = {{0}};
    int rc = vocab_tokenizer_from_file(path, &t, &err);
    if (rc != ERR_OK) fprintf(stderr, "%s: %s\n", path, err.msg);
    assert_int_equal(rc, ERR_OK);
    assert_int_equal(tok_kind(t), VOCAB_KIND_UGM);
    int cases;
    assert_int_equal(compare_vectors(t, "ugm reference vectors (gguf)", &cases), 0);
    assert_true(cases > 10);
    tok_free(t);
}

/* The same vocabulary written as the tokenizer.json Hugging Face would carry for it (Unigram
 * with scores, the charsmap as a Precompiled step, Strip and runs of spaces collapsed, as
 * SentencePiece's remove_extra_whitespaces does, and Metaspace), loaded through
 * tok_json_load: the Hugging Face pipeline must give the reference's ids too. */
static void test_ugm_reference_vectors_json(void **state)
{
    (void)state;
    const char *path = find_ugm_vocab();
    if (!path) {
        printf("skip: ggml-vocab-nomic-bert-moe.gguf not found (../shared or the reference)\n");
        skip();
    }
    struct gguf *g;
    struct errmsg err = {{0}};
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    struct vocab v;
    assert_int_equal(vocab_load_gguf(g, &v, &err), ERR_OK);
    json_t *vocab = json_array(), *added = json_array();
    for (int32_t i = 0; i < v.n_tokens; i++) {
        json_t *piece = json_stringn(v.tokens[i].ptr, v.tokens[i].len);
        assert_non_null(piece);
        json_array_append_new(vocab, json_pack("[o, f]", piece, (double)v.scores[i]));
        if (v.token_types[i] == VOCAB_TOKEN_CONTROL || v.token_types[i] == VOCAB_TOKEN_UNKNOWN)
            json_array_append_new(added, json_pack("{s:i, s:s%, s:b}", "id", (int)i, "content",
                                                   v.tokens[i].ptr, v.tokens[i].len, "special", 1));
    }
    struct buf b64;
    buf_init(&b64);
    assert_int_equal(base64_encode_buf(&b64, v.charsmap, v.charsmap_len), ERR_OK);
    json_t *root = json_pack(
        "{s:o, s:{s:s, s:[{s:s, s:s}, {s:s, s:b, s:b}, {s:s, s:{s:s}, s:s}]}, "
        "s:{s:s, s:s, s:s, s:b}, s:{s:s, s:i, s:o}}",
        "added_tokens", added, "normalizer", "type", "Sequence", "normalizers", "type",
        "Precompiled", "precompiled_charsmap", b64.data, "type", "Strip", "strip_left", 1,
        "strip_right", 1, "type", "Replace", "pattern", "Regex", " {2,}", "content", " ",
        "pre_tokenizer", "type", "Metaspace", "replacement", "\xe2\x96\x81", "prepend_scheme",
        "always", "split", 1, "model", "type", "Unigram", "unk_id", (int)v.unk_id, "vocab", vocab);
    assert_non_null(root);
    char *text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    struct tokenizer *t = load_json(text, NULL, NULL);
    int cases;
    assert_int_equal(compare_vectors(t, "ugm reference vectors (tokenizer.json)", &cases), 0);
    tok_free(t);
    free(text);
    json_decref(root);
    buf_deinit(&b64);
    vocab_deinit(&v);
    gguf_close(g);
}

/* Compares t with ../shared's golden ids for vocab `name`; returns the number of mismatches. */
static int compare_golden(const struct tokenizer *t, const char *name)
{
    char inp_path[256], out_path[256];
    snprintf(inp_path, sizeof inp_path, "../shared/models/vocab/ggml-vocab-%s.gguf.inp", name);
    snprintf(out_path, sizeof out_path, "../shared/models/vocab/ggml-vocab-%s.gguf.out", name);
    struct buf inp, outp;
    buf_init(&inp);
    buf_init(&outp);
    assert_true(slurp(inp_path, &inp));
    assert_true(slurp(out_path, &outp));
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t ip = 0, op = 0;
    int cases = 0, fails = 0;
    while (ip < inp.len) {
        const char *next = strstr(inp.data + ip, sep);
        size_t case_len = next ? (size_t)(next - (inp.data + ip)) : inp.len - ip;
        const char *nl = memchr(outp.data + op, '\n', outp.len - op);
        size_t line_len = nl ? (size_t)(nl - (outp.data + op)) : outp.len - op;
        struct tok_ids want, got;
        tok_ids_init(&want);
        tok_ids_init(&got);
        for (size_t i = 0; i < line_len;) {
            char *end;
            long x = strtol(outp.data + op + i, &end, 10);
            if (end == outp.data + op + i) break;
            assert_int_equal(tok_ids_push(&want, (tok_id)x), ERR_OK);
            i = (size_t)(end - (outp.data + op));
        }
        assert_int_equal(tok_encode(t, (struct str){inp.data + ip, case_len}, false, false, &got),
                         ERR_OK);
        if (want.n_ids != got.n_ids ||
            (want.n_ids && memcmp(want.ids, got.ids, want.n_ids * sizeof *want.ids))) {
            fails++;
            fprintf(stderr, "%s json case %d '%.*s'\n", name, cases, (int)case_len, inp.data + ip);
        }
        tok_ids_deinit(&want);
        tok_ids_deinit(&got);
        cases++;
        op += line_len + (nl ? 1 : 0);
        if (!next) break;
        ip += case_len + sizeof sep - 1;
    }
    printf("%s vectors through tokenizer.json: %d/%d\n", name, cases - fails, cases);
    buf_deinit(&inp);
    buf_deinit(&outp);
    return fails;
}

/* ../shared's qwen2 vocab written as its tokenizer.json (byte-level BPE with its merges, NFC,
 * Qwen2's Split pattern then ByteLevel without its own regex, the control tokens as special
 * added tokens) must give the golden ids of ggml-vocab-qwen2.gguf.out. */
static void test_bpe_qwen2_vectors_json(void **state)
{
    (void)state;
    static const char path[] = "../shared/models/vocab/ggml-vocab-qwen2.gguf";
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        printf("skip: %s not found\n", path);
        skip();
    }
    fclose(probe);
    struct gguf *g;
    struct errmsg err = {{0}};
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    struct vocab v;
    assert_int_equal(vocab_load_gguf(g, &v, &err), ERR_OK);
    json_t *vocab = json_object(), *added = json_array(), *merges = json_array();
    for (int32_t i = 0; i < v.n_tokens; i++) {
        char key[512];
        if (v.tokens[i].len >= sizeof key) continue;
        memcpy(key, v.tokens[i].ptr, v.tokens[i].len);
        key[v.tokens[i].len] = '\0';
        json_object_set_new(vocab, key, json_integer(i));
        if (v.token_types[i] == VOCAB_TOKEN_CONTROL || v.token_types[i] == VOCAB_TOKEN_USER_DEFINED)
            json_array_append_new(added,
                                  json_pack("{s:i, s:s, s:b}", "id", (int)i, "content", key,
                                            "special", v.token_types[i] == VOCAB_TOKEN_CONTROL));
    }
    for (int32_t i = 0; i < v.n_merges; i++)
        json_array_append_new(merges, json_stringn(v.merges[i].ptr, v.merges[i].len));
    static const char split[] =
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
        "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    json_t *root =
        json_pack("{s:o, s:{s:s}, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}, "
                  "s:{s:s, s:o, s:o}}",
                  "added_tokens", added, "normalizer", "type", "NFC", "pre_tokenizer", "type",
                  "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", split,
                  "behavior", "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0,
                  "use_regex", 0, "model", "type", "BPE", "vocab", vocab, "merges", merges);
    assert_non_null(root);
    char *text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    struct tokenizer *t = load_json(text, NULL, NULL);
    assert_int_equal(compare_golden(t, "qwen2"), 0);
    tok_free(t);
    free(text);
    json_decref(root);
    vocab_deinit(&v);
    gguf_close(g);
}

/* ../shared's bert-bge vocab (llama.cpp's form: "\u2581" before word starts, "##" removed)
 * written back as its Hugging Face WordPiece tokenizer.json (BertNormalizer lower-casing,
 * BertPreTokenizer) must give the golden ids of ggml-vocab-bert-bge.gguf.out. */
static void test_wordpiece_bge_vectors_json(void **state)
{
    (void)state;
    static const char path[] = "../shared/models/vocab/ggml-vocab-bert-bge.gguf";
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        printf("skip: %s not found\n", path);
        skip();
    }
    fclose(probe);
    struct gguf *g;
    struct errmsg err = {{0}};
    assert_int_equal(gguf_open(path, &g, &err), ERR_OK);
    struct vocab v;
    assert_int_equal(vocab_load_gguf(g, &v, &err), ERR_OK);
    json_t *vocab = json_object();
    for (int32_t i = 0; i < v.n_tokens; i++) {
        char key[512];
        struct str tk = v.tokens[i];
        if (tk.len + 3 >= sizeof key) continue;
        bool is_word = tk.len >= 3 && memcmp(tk.ptr, SP, 3) == 0;
        bool is_bracket = tk.len > 2 && tk.ptr[0] == '[' && tk.ptr[tk.len - 1] == ']';
        if (is_word)
            snprintf(key, sizeof key, "%.*s", (int)tk.len - 3, tk.ptr + 3);
        else if (is_bracket || v.token_types[i] == VOCAB_TOKEN_CONTROL)
            snprintf(key, sizeof key, "%.*s", (int)tk.len, tk.ptr);
        else
            snprintf(key, sizeof key, "##%.*s", (int)tk.len, tk.ptr);
        json_object_set_new(vocab, key, json_integer(i));
    }
    json_t *root =
        json_pack("{s:{s:s, s:b, s:n}, s:{s:s}, s:{s:s, s:s, s:s, s:o}}", "normalizer", "type",
                  "BertNormalizer", "lowercase", 1, "strip_accents", "pre_tokenizer", "type",
                  "BertPreTokenizer", "model", "type", "WordPiece", "unk_token", "[UNK]",
                  "continuing_subword_prefix", "##", "vocab", vocab);
    assert_non_null(root);
    char *text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    struct tokenizer *t = load_json(text, NULL, NULL);
    assert_int_equal(compare_golden(t, "bert-bge"), 0);
    tok_free(t);
    free(text);
    json_decref(root);
    vocab_deinit(&v);
    gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ugm_viterbi),
        cmocka_unit_test(test_ugm_unknown_runs),
        cmocka_unit_test(test_ugm_gguf_whitespace),
        cmocka_unit_test(test_ugm_charsmap),
        cmocka_unit_test(test_json_unigram),
        cmocka_unit_test(test_json_wordpiece),
        cmocka_unit_test(test_json_bpe),
        cmocka_unit_test(test_json_malformed),
        cmocka_unit_test(test_json_empty_charsmap),
        cmocka_unit_test(test_json_alloc_failures),
        cmocka_unit_test(test_ugm_reference_vectors),
        cmocka_unit_test(test_ugm_reference_vectors_json),
        cmocka_unit_test(test_bpe_qwen2_vectors_json),
        cmocka_unit_test(test_wordpiece_bge_vectors_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
