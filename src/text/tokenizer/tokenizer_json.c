/* tokenizer.json -> struct vocab -> struct tokenizer. Field names and meanings follow the
 * serialization of the Hugging Face tokenizers library (models/, normalizers/,
 * pre_tokenizers/, processors/); every field is type-checked, and anything this loader cannot
 * reproduce is refused by name rather than ignored. Token texts are borrowed from the parsed
 * JSON until tok_new() has copied them. */
#include "text/tokenizer/tokenizer_json.h"

#include "text/tokenizer/vocab.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/mem.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_NORM_STEPS 32
#define MAX_SPLITS     8
#define SP             "\xe2\x96\x81"
// The ByteLevel pre-tokenizer's own split (Hugging Face tokenizers, pre_tokenizers/byte_level).
#define GPT2_SPLIT                                                                                 \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* Everything one load owns; freed by ctx_deinit. */
struct ctx {
    json_t *root, *cfg;
    struct vocab v;
    struct str *tokens; // (v.n_tokens)
    float *scores;
    int32_t *types;
    uint8_t *strip;
    struct str *merges;
    struct buf merge_text; // "a b" strings for merges given as pairs
    unsigned char *charsmap;
    struct vocab_norm_step steps[MAX_NORM_STEPS];
    struct str splits[MAX_SPLITS];
    const char *model; // model.type
    struct errmsg *err;
};

static int fail(struct ctx *c, int code, const char *what)
{
    return errmsg_set(c->err, code, "tokenizer.json: %s", what);
}

static struct str jstr(const json_t *s)
{
    return (struct str){json_string_value(s), json_string_length(s)};
}

/* ---- the vocabulary ---- */

/* The highest token id named by the model vocab and the added tokens, plus one. */
static int count_tokens(struct ctx *c, const json_t *model, const json_t *added, int32_t *n)
{
    json_t *vocab = json_object_get(model, "vocab");
    int64_t max = -1;
    if (json_is_array(vocab)) {
        max = (int64_t)json_array_size(vocab) - 1;
    } else if (json_is_object(vocab)) {
        const char *k;
        json_t *id;
        json_object_foreach(vocab, k, id)
        {
            if (!json_is_integer(id) || json_integer_value(id) < 0)
                return fail(c, ERR_FORMAT, "model.vocab ids must be integers >= 0");
            if (json_integer_value(id) > max) max = json_integer_value(id);
        }
    } else {
        return fail(c, ERR_FORMAT, "model.vocab is missing");
    }
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a)
    {
        json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            !json_is_string(json_object_get(a, "content")))
            return fail(c, ERR_FORMAT, "added_tokens entries need an integer id and a content");
        if (json_integer_value(id) > max) max = json_integer_value(id);
    }
    if (max < 0) return fail(c, ERR_FORMAT, "the vocabulary is empty");
    if (max >= TOK_JSON_MAX_TOKENS)
        return errmsg_set(c->err, ERR_LIMIT, "tokenizer.json: token id %lld is too large",
                          (long long)max);
    *n = (int32_t)max + 1;
    return ERR_OK;
}

static int alloc_tables(struct ctx *c, int32_t n)
{
    c->v.n_tokens = n;
    c->tokens = mem_calloc((size_t)n, sizeof *c->tokens);
    c->scores = mem_calloc((size_t)n, sizeof *c->scores);
    c->types = mem_calloc((size_t)n, sizeof *c->types);
    c->strip = mem_calloc((size_t)n, 1);
    if (!c->tokens || !c->scores || !c->types || !c->strip)
        return fail(c, ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        c->tokens[i] = (struct str){"", 0};
        c->types[i] = VOCAB_TOKEN_UNUSED; // ids no entry names
    }
    return ERR_OK;
}

static bool is_byte_text(struct str s)
{
    return s.len == 6 && memcmp(s.ptr, "<0x", 3) == 0 && s.ptr[5] == '>';
}

static int read_unigram(struct ctx *c, const json_t *model)
{
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_array(vocab)) return fail(c, ERR_FORMAT, "Unigram model.vocab is not an array");
    size_t i;
    json_t *e;
    json_array_foreach(vocab, i, e)
    {
        json_t *piece = json_array_get(e, 0), *score = json_array_get(e, 1);
        if (!json_is_array(e) || !json_is_string(piece) || !json_is_number(score))
            return fail(c, ERR_FORMAT, "Unigram model.vocab entries must be [piece, score]");
        double s = json_number_value(score);
        if (!isfinite(s) || fabs(s) > 1e30)
            return fail(c, ERR_FORMAT, "Unigram model.vocab has a score out of range");
        c->tokens[i] = jstr(piece);
        c->scores[i] = (float)s;
        c->types[i] = VOCAB_TOKEN_NORMAL;
    }
    json_t *bf = json_object_get(model, "byte_fallback");
    c->v.byte_fallback = json_is_true(bf);
    for (i = 0; c->v.byte_fallback && i < (size_t)c->v.n_tokens; i++) {
        if (c->types[i] == VOCAB_TOKEN_NORMAL && is_byte_text(c->tokens[i]))
            c->types[i] = VOCAB_TOKEN_BYTE;
    }
    json_t *unk = json_object_get(model, "unk_id");
    if (json_is_integer(unk) && json_integer_value(unk) >= 0 &&
        json_integer_value(unk) < c->v.n_tokens)
        c->v.unk_id = (tok_id)json_integer_value(unk);
    else if (unk && !json_is_null(unk))
        return fail(c, ERR_FORMAT, "Unigram model.unk_id is not a token id");
    return ERR_OK;
}

/* Vocab objects {text: id} (WordPiece and BPE). */
static int read_vocab_object(struct ctx *c, const json_t *model)
{
    const char *k;
    json_t *id;
    json_t *vocab = json_object_get(model, "vocab");
    json_object_foreach(vocab, k, id)
    {
        json_int_t i = json_integer_value(id);
        c->tokens[i] = (struct str){k, strlen(k)};
        c->types[i] = VOCAB_TOKEN_NORMAL;
    }
    return ERR_OK;
}

static tok_id find_text(const struct ctx *c, struct str s)
{
    for (int32_t i = 0; i < c->v.n_tokens; i++) {
        if (c->tokens[i].len == s.len && memcmp(c->tokens[i].ptr, s.ptr, s.len) == 0) return i;
    }
    return TOK_ID_NONE;
}

static int read_named_unk(struct ctx *c, const json_t *model)
{
    json_t *unk = json_object_get(model, "unk_token");
    if (!unk || json_is_null(unk)) return ERR_OK;
    if (!json_is_string(unk)) return fail(c, ERR_FORMAT, "model.unk_token is not a string");
    c->v.unk_id = find_text(c, jstr(unk));
    return ERR_OK;
}

static int read_merges(struct ctx *c, const json_t *model)
{
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges)) return fail(c, ERR_FORMAT, "BPE model.merges is not an array");
    size_t n = json_array_size(merges), i;
    c->merges = mem_calloc(n ? n : 1, sizeof *c->merges);
    if (!c->merges) return fail(c, ERR_NOMEM, "out of memory");
    size_t *offs = mem_calloc(n ? n : 1, sizeof *offs);
    if (!offs) return fail(c, ERR_NOMEM, "out of memory");
    json_t *m;
    int rc = ERR_OK;
    json_array_foreach(merges, i, m)
    {
        if (json_is_string(m)) {
            offs[i] = SIZE_MAX;
            c->merges[i] = jstr(m);
            continue;
        }
        json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
        if (!json_is_array(m) || json_array_size(m) != 2 || !json_is_string(a) ||
            !json_is_string(b)) {
            rc = fail(c, ERR_FORMAT, "BPE model.merges entries must be \"a b\" or [a, b]");
            break;
        }
        offs[i] = c->merge_text.len;
        c->merges[i].len = json_string_length(a) + 1 + json_string_length(b);
        if (buf_append(&c->merge_text, json_string_value(a), json_string_length(a)) != ERR_OK ||
            buf_append_byte(&c->merge_text, ' ') != ERR_OK ||
            buf_append(&c->merge_text, json_string_value(b), json_string_length(b)) != ERR_OK) {
            rc = fail(c, ERR_NOMEM, "out of memory");
            break;
        }
    }
    for (i = 0; rc == ERR_OK && i < n; i++) { // the buffer may have moved while growing
        if (offs[i] != SIZE_MAX) c->merges[i].ptr = c->merge_text.data + offs[i];
    }
    mem_free(offs);
    c->v.merges = c->merges;
    c->v.n_merges = (int32_t)n;
    return rc;
}

static int read_added(struct ctx *c, const json_t *added)
{
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a)
    {
        json_int_t id = json_integer_value(json_object_get(a, "id"));
        c->tokens[id] = jstr(json_object_get(a, "content"));
        c->types[id] = json_is_true(json_object_get(a, "special")) ? VOCAB_TOKEN_CONTROL
                                                                   : VOCAB_TOKEN_USER_DEFINED;
        c->strip[id] =
            (uint8_t)((json_is_true(json_object_get(a, "lstrip")) ? VOCAB_STRIP_LEFT : 0) |
                      (json_is_true(json_object_get(a, "rstrip")) ? VOCAB_STRIP_RIGHT : 0));
    }
    return ERR_OK;
}

/* ---- normalizer ---- */

static int push_step(struct ctx *c, struct vocab_norm_step st)
{
    if (c->v.n_norm >= MAX_NORM_STEPS) return fail(c, ERR_UNSUPPORTED, "too many normalizer steps");
    c->steps[c->v.n_norm++] = st;
    return ERR_OK;
}

static int read_charsmap(struct ctx *c, const json_t *n)
{
    json_t *b64 = json_object_get(n, "precompiled_charsmap");
    if (!b64 || json_is_null(b64)) return ERR_OK; // an empty map: nothing to do
    if (!json_is_string(b64)) return fail(c, ERR_FORMAT, "precompiled_charsmap is not a string");
    if (c->charsmap) return fail(c, ERR_UNSUPPORTED, "more than one Precompiled normalizer");
    size_t len;
    int rc = base64_decode_alloc(json_string_value(b64), json_string_length(b64), 64u << 20, 0,
                                 &c->charsmap, &len, c->err);
    if (rc != ERR_OK)
        return fail(c, rc == ERR_NOMEM ? ERR_NOMEM : ERR_FORMAT,
                    "precompiled_charsmap is not valid base64");
    if (len == 0) { // some converters write "" for "no map": nothing to apply
        mem_free(c->charsmap);
        c->charsmap = NULL;
        return ERR_OK;
    }
    c->v.charsmap = c->charsmap;
    c->v.charsmap_len = len;
    return push_step(c, (struct vocab_norm_step){.op = VOCAB_NORM_PRECOMPILED});
}

static int read_replace(struct ctx *c, const json_t *n)
{
    json_t *pat = json_object_get(n, "pattern"), *content = json_object_get(n, "content");
    json_t *s = json_object_get(pat, "String"), *re = json_object_get(pat, "Regex");
    if (!json_is_string(content) || (!json_is_string(s) && !json_is_string(re)))
        return fail(c, ERR_FORMAT, "Replace needs a String or Regex pattern and a content");
    struct vocab_norm_step st = {.op = VOCAB_NORM_REPLACE, .content = jstr(content)};
    st.is_regex = json_is_string(re);
    st.pattern = jstr(st.is_regex ? re : s);
    return push_step(c, st);
}

static int read_normalizer(struct ctx *c, const json_t *n, int depth);

/* BertNormalizer: lower-casing and accent stripping (strip_accents null follows lowercase).
 * WordPiece applies them itself; other models get them as steps. */
static int read_bert_norm(struct ctx *c, const json_t *n)
{
    json_t *sa = json_object_get(n, "strip_accents");
    bool lower = !json_is_false(json_object_get(n, "lowercase"));
    bool accents = sa && !json_is_null(sa) ? json_is_true(sa) : lower;
    c->v.lowercase = lower;
    c->v.strip_accents = accents;
    if (c->v.kind == VOCAB_KIND_BERT) return ERR_OK;
    int rc = ERR_OK;
    if (accents) rc = push_step(c, (struct vocab_norm_step){.op = VOCAB_NORM_NFD});
    if (rc == ERR_OK && accents)
        rc = push_step(c, (struct vocab_norm_step){.op = VOCAB_NORM_STRIP_ACCENTS});
    if (rc == ERR_OK && lower)
        rc = push_step(c, (struct vocab_norm_step){.op = VOCAB_NORM_LOWERCASE});
    return rc;
}

/* Flat dispatch over the normalizer types. */
static int read_normalizer(struct ctx *c, const json_t *n, int depth)
{
    if (!n || json_is_null(n)) return ERR_OK;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) return fail(c, ERR_FORMAT, "a normalizer has no type");
    if (depth > 4) return fail(c, ERR_UNSUPPORTED, "normalizers nested too deeply");
    static const struct {
        const char *name;
        enum vocab_norm_op op;
    } simple[] = {{"NFC", VOCAB_NORM_NFC},
                  {"NFD", VOCAB_NORM_NFD},
                  {"NFKC", VOCAB_NORM_NFKC},
                  {"NFKD", VOCAB_NORM_NFKD},
                  {"Lowercase", VOCAB_NORM_LOWERCASE},
                  {"StripAccents", VOCAB_NORM_STRIP_ACCENTS}};
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) {
        if (strcmp(type, simple[i].name) == 0)
            return push_step(c, (struct vocab_norm_step){.op = simple[i].op});
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers"), *e;
        size_t i;
        if (!json_is_array(list)) return fail(c, ERR_FORMAT, "Sequence normalizers is not a list");
        json_array_foreach(list, i, e)
        {
            int rc = read_normalizer(c, e, depth + 1);
            if (rc != ERR_OK) return rc;
        }
        return ERR_OK;
    }
    if (strcmp(type, "Precompiled") == 0) return read_charsmap(c, n);
    if (strcmp(type, "Replace") == 0) return read_replace(c, n);
    if (strcmp(type, "BertNormalizer") == 0) return read_bert_norm(c, n);
    if (strcmp(type, "Strip") == 0)
        return push_step(
            c, (struct vocab_norm_step){.op = VOCAB_NORM_STRIP,
                                        .left = json_is_true(json_object_get(n, "strip_left")),
                                        .right = json_is_true(json_object_get(n, "strip_right"))});
    if (strcmp(type, "Prepend") == 0) {
        json_t *p = json_object_get(n, "prepend");
        if (!json_is_string(p)) return fail(c, ERR_FORMAT, "Prepend needs a prepend string");
        return push_step(c, (struct vocab_norm_step){.op = VOCAB_NORM_PREPEND, .content = jstr(p)});
    }
    return errmsg_set(c->err, ERR_UNSUPPORTED,
                      "tokenizer.json: normalizer '%.40s' is not supported", type);
}

/* ---- pre-tokenizer ---- */

static int read_metaspace(struct ctx *c, const json_t *p)
{
    json_t *rep = json_object_get(p, "replacement"), *scheme = json_object_get(p, "prepend_scheme");
    if (rep && (!json_is_string(rep) || strcmp(json_string_value(rep), SP) != 0))
        return fail(c, ERR_UNSUPPORTED, "Metaspace replacement other than U+2581");
    c->v.is_metaspace = true;
    c->v.meta_split = !json_is_false(json_object_get(p, "split"));
    const char *s = json_string_value(scheme);
    if (s && strcmp(s, "first") == 0)
        c->v.prepend = VOCAB_PREPEND_FIRST;
    else if (s && strcmp(s, "never") == 0)
        c->v.prepend = VOCAB_PREPEND_NEVER;
    else if (s && strcmp(s, "always") == 0)
        c->v.prepend = VOCAB_PREPEND_ALWAYS;
    else if (s)
        return fail(c, ERR_FORMAT, "Metaspace prepend_scheme is not always, first or never");
    else // older files: add_prefix_space
        c->v.prepend = json_is_false(json_object_get(p, "add_prefix_space")) ? VOCAB_PREPEND_NEVER
                                                                             : VOCAB_PREPEND_ALWAYS;
    return ERR_OK;
}

static int read_split(struct ctx *c, const json_t *p)
{
    json_t *re = json_object_get(json_object_get(p, "pattern"), "Regex");
    json_t *str = json_object_get(json_object_get(p, "pattern"), "String");
    const char *behavior = json_string_value(json_object_get(p, "behavior"));
    if (!json_is_string(re) && !json_is_string(str))
        return fail(c, ERR_FORMAT, "Split needs a Regex or String pattern");
    if (json_is_true(json_object_get(p, "invert")) || !behavior ||
        strcmp(behavior, "Isolated") != 0)
        return fail(c, ERR_UNSUPPORTED, "Split other than Isolated, non-inverted");
    if (!json_is_string(re)) return fail(c, ERR_UNSUPPORTED, "Split with a String pattern");
    if (c->v.n_pre_regex >= MAX_SPLITS) return fail(c, ERR_UNSUPPORTED, "too many Split steps");
    c->splits[c->v.n_pre_regex++] = jstr(re);
    return ERR_OK;
}

/* Flat dispatch over the pre-tokenizer types; each is accepted only for the model it fits. */
static int read_pre(struct ctx *c, const json_t *p, int depth)
{
    if (!p || json_is_null(p)) return ERR_OK;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return fail(c, ERR_FORMAT, "a pre_tokenizer has no type");
    if (depth > 4) return fail(c, ERR_UNSUPPORTED, "pre_tokenizers nested too deeply");
    enum vocab_kind k = c->v.kind;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers"), *e;
        size_t i;
        if (!json_is_array(list))
            return fail(c, ERR_FORMAT, "Sequence pretokenizers is not a list");
        json_array_foreach(list, i, e)
        {
            int rc = read_pre(c, e, depth + 1);
            if (rc != ERR_OK) return rc;
        }
        return ERR_OK;
    }
    if (k == VOCAB_KIND_UGM && strcmp(type, "Metaspace") == 0) return read_metaspace(c, p);
    if (k == VOCAB_KIND_UGM && strcmp(type, "WhitespaceSplit") == 0) {
        c->v.ws_split = true;
        return ERR_OK;
    }
    if (k == VOCAB_KIND_BERT &&
        (strcmp(type, "BertPreTokenizer") == 0 || strcmp(type, "Whitespace") == 0))
        return ERR_OK; // WordPiece splits on whitespace and punctuation itself
    if (k == VOCAB_KIND_GPT2 && strcmp(type, "ByteLevel") == 0) {
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return fail(c, ERR_UNSUPPORTED, "ByteLevel add_prefix_space");
        // use_regex (default true) splits with GPT-2's pattern, after any Split before it.
        if (json_is_false(json_object_get(p, "use_regex"))) return ERR_OK;
        if (c->v.n_pre_regex >= MAX_SPLITS) return fail(c, ERR_UNSUPPORTED, "too many splits");
        c->splits[c->v.n_pre_regex++] = (struct str){GPT2_SPLIT, sizeof GPT2_SPLIT - 1};
        return ERR_OK;
    }
    if (k == VOCAB_KIND_GPT2 && strcmp(type, "Split") == 0) return read_split(c, p);
    return errmsg_set(c->err, ERR_UNSUPPORTED,
                      "tokenizer.json: pre_tokenizer '%.40s' is not supported for %s", type,
                      c->model);
}

/* ---- post-processor: which special tokens frame a single sequence ---- */

static tok_id template_id(struct ctx *c, const json_t *item, const json_t *specials)
{
    json_t *st = json_object_get(item, "SpecialToken");
    const char *name = json_string_value(json_object_get(st, "id"));
    if (!name) return TOK_ID_NONE;
    json_t *ids = json_object_get(json_object_get(specials, name), "ids");
    if (json_array_size(ids) == 1 && json_is_integer(json_array_get(ids, 0))) {
        json_int_t id = json_integer_value(json_array_get(ids, 0));
        if (id >= 0 && id < c->v.n_tokens) return (tok_id)id;
    }
    return find_text(c, (struct str){name, strlen(name)});
}

static void set_frame(struct ctx *c, tok_id before, tok_id after)
{
    bool is_bert = c->v.kind == VOCAB_KIND_BERT;
    c->v.add_bos = before != TOK_ID_NONE;
    if (before != TOK_ID_NONE) {
        c->v.bos_id = before;
        if (is_bert) c->v.cls_id = before;
    }
    if (is_bert) {
        c->v.add_sep = after != TOK_ID_NONE;
        c->v.add_eos = false;
        if (after != TOK_ID_NONE) c->v.sep_id = after;
    } else {
        c->v.add_eos = after != TOK_ID_NONE;
        if (after != TOK_ID_NONE) c->v.eos_id = after;
    }
}

static int read_template(struct ctx *c, const json_t *p)
{
    json_t *single = json_object_get(p, "single"), *specials = json_object_get(p, "special_tokens");
    if (!json_is_array(single))
        return fail(c, ERR_FORMAT, "TemplateProcessing single is not a list");
    tok_id before = TOK_ID_NONE, after = TOK_ID_NONE;
    int n_before = 0, n_after = 0;
    bool seen_seq = false;
    size_t i;
    json_t *item;
    json_array_foreach(single, i, item)
    {
        if (json_object_get(item, "Sequence")) {
            seen_seq = true;
            continue;
        }
        tok_id id = template_id(c, item, specials);
        if (id == TOK_ID_NONE)
            return fail(c, ERR_FORMAT, "TemplateProcessing names an unknown token");
        if (seen_seq) {
            after = id;
            n_after++;
        } else {
            before = id;
            n_before++;
        }
    }
    if (!seen_seq || n_before > 1 || n_after > 1)
        return fail(c, ERR_UNSUPPORTED, "TemplateProcessing with more than one token per side");
    set_frame(c, before, after);
    return ERR_OK;
}

/* RobertaProcessing / BertProcessing: {"cls": [text, id], "sep": [text, id]}. */
static int read_cls_sep(struct ctx *c, const json_t *p)
{
    json_t *cls = json_array_get(json_object_get(p, "cls"), 1);
    json_t *sep = json_array_get(json_object_get(p, "sep"), 1);
    if (!json_is_integer(cls) || !json_is_integer(sep) || json_integer_value(cls) < 0 ||
        json_integer_value(sep) < 0 || json_integer_value(cls) >= c->v.n_tokens ||
        json_integer_value(sep) >= c->v.n_tokens)
        return fail(c, ERR_FORMAT, "cls/sep of the post_processor are not token ids");
    set_frame(c, (tok_id)json_integer_value(cls), (tok_id)json_integer_value(sep));
    return ERR_OK;
}

static int read_post(struct ctx *c, const json_t *p, int depth)
{
    if (!p || json_is_null(p)) return ERR_OK;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return fail(c, ERR_FORMAT, "a post_processor has no type");
    if (depth > 4) return fail(c, ERR_UNSUPPORTED, "post_processors nested too deeply");
    if (strcmp(type, "TemplateProcessing") == 0) return read_template(c, p);
    if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0)
        return read_cls_sep(c, p);
    if (strcmp(type, "ByteLevel") == 0) return ERR_OK; // offsets only
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "processors"), *e;
        size_t i;
        json_array_foreach(list, i, e)
        {
            int rc = read_post(c, e, depth + 1);
            if (rc != ERR_OK) return rc;
        }
        return ERR_OK;
    }
    return errmsg_set(c->err, ERR_UNSUPPORTED,
                      "tokenizer.json: post_processor '%.40s' is not supported", type);
}

/* ---- tokenizer_config.json ---- */

/* A special token named in the config: a string or {"content": string}. */
static tok_id config_token(struct ctx *c, const char *key)
{
    json_t *t = json_object_get(c->cfg, key);
    if (json_is_object(t)) t = json_object_get(t, "content");
    return json_is_string(t) ? find_text(c, jstr(t)) : TOK_ID_NONE;
}

static void read_config(struct ctx *c, struct tok_json_info *info)
{
    static const struct {
        const char *key;
        size_t field;
    } ids[] = {{"bos_token", offsetof(struct vocab, bos_id)},
               {"eos_token", offsetof(struct vocab, eos_id)},
               {"unk_token", offsetof(struct vocab, unk_id)},
               {"sep_token", offsetof(struct vocab, sep_id)},
               {"pad_token", offsetof(struct vocab, pad_id)},
               {"cls_token", offsetof(struct vocab, cls_id)},
               {"mask_token", offsetof(struct vocab, mask_id)}};
    for (size_t i = 0; c->cfg && i < sizeof ids / sizeof ids[0]; i++) {
        tok_id id = config_token(c, ids[i].key);
        if (id != TOK_ID_NONE) *(tok_id *)(void *)((char *)&c->v + ids[i].field) = id;
    }
    json_t *b = json_object_get(c->cfg, "add_bos_token"),
           *e = json_object_get(c->cfg, "add_eos_token");
    if (json_is_boolean(b)) c->v.add_bos = json_is_true(b);
    if (json_is_boolean(e)) c->v.add_eos = json_is_true(e);
    json_t *pad = json_object_get(json_object_get(c->root, "padding"), "pad_id");
    info->pad_id = c->v.pad_id;
    if (info->pad_id == TOK_ID_NONE && json_is_integer(pad) && json_integer_value(pad) >= 0 &&
        json_integer_value(pad) < c->v.n_tokens)
        info->pad_id = (tok_id)json_integer_value(pad);
    json_t *mml = json_object_get(c->cfg, "model_max_length");
    json_t *trunc = json_object_get(json_object_get(c->root, "truncation"), "max_length");
    double m = json_is_number(mml) ? json_number_value(mml) : 0;
    if (!(m >= 1 && m <= INT32_MAX) && json_is_integer(trunc))
        m = (double)json_integer_value(trunc);
    info->model_max_length = m >= 1 && m <= INT32_MAX ? (int64_t)m : 0; // 1e30 means "none"
}

/* ---- load ---- */

static int pick_model(struct ctx *c, const json_t *model, struct tok_json_info *info)
{
    c->model = json_string_value(json_object_get(model, "type"));
    if (!c->model) {
        // Old WordPiece/BPE files have no type: tell them apart by their fields.
        c->model = json_object_get(model, "merges")                      ? "BPE"
                   : json_object_get(model, "continuing_subword_prefix") ? "WordPiece"
                                                                         : NULL;
    }
    if (!c->model) return fail(c, ERR_FORMAT, "model.type is missing");
    enum vocab_kind kind;
    if (strcmp(c->model, "Unigram") == 0)
        kind = VOCAB_KIND_UGM;
    else if (strcmp(c->model, "WordPiece") == 0)
        kind = VOCAB_KIND_BERT;
    else if (strcmp(c->model, "BPE") == 0)
        kind = VOCAB_KIND_GPT2;
    else
        return errmsg_set(c->err, ERR_UNSUPPORTED, "tokenizer.json: model '%.40s' is not supported",
                          c->model);
    snprintf(info->model, sizeof info->model, "%s", c->model);
    vocab_init_defaults(&c->v, kind, (struct str){"", 0});
    // tokenizer.json says everything itself: no family defaults for ids or flags.
    c->v.bos_id = c->v.eos_id = c->v.unk_id = c->v.sep_id = c->v.pad_id = TOK_ID_NONE;
    c->v.cls_id = c->v.mask_id = TOK_ID_NONE;
    c->v.add_bos = c->v.add_eos = c->v.add_sep = false;
    c->v.lowercase = c->v.strip_accents = false;
    return ERR_OK;
}

static int check_model(struct ctx *c, const json_t *model)
{
    if (c->v.kind == VOCAB_KIND_BERT) {
        json_t *pfx = json_object_get(model, "continuing_subword_prefix");
        if (pfx && (!json_is_string(pfx) || strcmp(json_string_value(pfx), "##") != 0))
            return fail(c, ERR_UNSUPPORTED, "WordPiece continuing_subword_prefix other than ##");
    }
    c->v.ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    if (c->v.kind == VOCAB_KIND_GPT2 && json_is_true(json_object_get(model, "byte_fallback")))
        return fail(c, ERR_UNSUPPORTED, "BPE with byte_fallback (a SentencePiece BPE)");
    return ERR_OK;
}

static int load(struct ctx *c, struct tok_json_info *info)
{
    json_t *model = json_object_get(c->root, "model");
    json_t *added = json_object_get(c->root, "added_tokens");
    if (!json_is_object(model)) return fail(c, ERR_FORMAT, "model is missing");
    if (added && !json_is_array(added)) return fail(c, ERR_FORMAT, "added_tokens is not a list");
    int32_t n = 0;
    int rc = pick_model(c, model, info);
    if (rc == ERR_OK) rc = check_model(c, model);
    if (rc == ERR_OK) rc = count_tokens(c, model, added, &n);
    if (rc == ERR_OK) rc = alloc_tables(c, n);
    if (rc == ERR_OK)
        rc = c->v.kind == VOCAB_KIND_UGM ? read_unigram(c, model) : read_vocab_object(c, model);
    if (rc == ERR_OK) rc = read_added(c, added);
    if (rc == ERR_OK && c->v.kind != VOCAB_KIND_UGM) rc = read_named_unk(c, model);
    if (rc == ERR_OK && c->v.kind == VOCAB_KIND_GPT2) rc = read_merges(c, model);
    if (rc == ERR_OK) rc = read_normalizer(c, json_object_get(c->root, "normalizer"), 0);
    if (rc == ERR_OK) rc = read_pre(c, json_object_get(c->root, "pre_tokenizer"), 0);
    if (rc == ERR_OK) rc = read_post(c, json_object_get(c->root, "post_processor"), 0);
    if (rc != ERR_OK) return rc;
    if (c->v.kind == VOCAB_KIND_UGM && !c->v.is_metaspace) {
        c->v.is_metaspace = true; // no pre-tokenizer: the text goes to the model whole
        c->v.prepend = VOCAB_PREPEND_NEVER;
    }
    if (c->v.unk_id != TOK_ID_NONE) c->types[c->v.unk_id] = VOCAB_TOKEN_UNKNOWN;
    read_config(c, info);
    c->v.add_space_prefix = c->v.kind == VOCAB_KIND_UGM && c->v.prepend != VOCAB_PREPEND_NEVER;
    c->v.tokens = c->tokens;
    c->v.scores = c->scores;
    c->v.token_types = c->types;
    c->v.strip = c->strip;
    c->v.norm = c->steps;
    c->v.pre_regex = c->splits;
    return ERR_OK;
}

/* The length of jansson's error text without its " near '...'" part, which quotes the file:
 * a file reached through a request (a symlink to anything) must not be echoed back. */
static int json_error_len(const char *text)
{
    const char *near = strstr(text, " near ");
    return (int)(near ? (size_t)(near - text) : strlen(text));
}

static json_t *parse(const char *text, size_t len, const char *what, struct errmsg *err)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j)
        errmsg_set(err, ERR_FORMAT, "%s: not valid JSON at line %d column %d: %.*s", what, je.line,
                   je.column, json_error_len(je.text), je.text);
    else if (!json_is_object(j)) {
        errmsg_set(err, ERR_FORMAT, "%s: not a JSON object", what);
        json_decref(j);
        j = NULL;
    }
    return j;
}

int tok_json_load(const char *json, size_t json_len, const char *config, size_t config_len,
                  struct tokenizer **out, struct tok_json_info *info, struct errmsg *err)
{
    struct tok_json_info scratch;
    if (!info) info = &scratch;
    memset(info, 0, sizeof *info);
    info->pad_id = TOK_ID_NONE;
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.err = err;
    buf_init(&c.merge_text);
    int rc = ERR_FORMAT;
    c.root = parse(json ? json : "", json ? json_len : 0, "tokenizer.json", err);
    if (c.root && config) c.cfg = parse(config, config_len, "tokenizer_config.json", err);
    if (c.root && (!config || c.cfg)) rc = load(&c, info);
    if (rc == ERR_OK) rc = tok_new(&c.v, out, err);
    json_decref(c.root);
    json_decref(c.cfg);
    mem_free(c.tokens);
    mem_free(c.scores);
    mem_free(c.types);
    mem_free(c.strip);
    mem_free(c.merges);
    mem_free(c.charsmap);
    buf_deinit(&c.merge_text);
    return rc;
}
