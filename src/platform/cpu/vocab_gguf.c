/* tokenizer.ggml.* GGUF keys -> struct vocab, following llama.cpp's llama_vocab::impl::load
 * for key names, types and defaults. */
#include "platform/cpu/vocab_gguf.h"

#include "util/log.h"
#include "util/mem.h"

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KEY_MODEL  "tokenizer.ggml.model"
#define KEY_PRE    "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES  "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_CHARS  "tokenizer.ggml.precompiled_charsmap"

static int detect_kind(const struct gguf *g, enum vocab_kind *kind, struct errmsg *err)
{
    struct str model, arch;
    int rc = gguf_get_str(g, KEY_MODEL, &model);
    if (rc == ERR_NOT_FOUND) {
        if (gguf_get_str(g, "general.architecture", &arch) == ERR_OK &&
            (str_eq_cstr(arch, "bert") || str_eq_cstr(arch, "nomic-bert") ||
             str_eq_cstr(arch, "jina-bert-v2"))) {
            *kind = VOCAB_KIND_BERT;
            return ERR_OK;
        }
        return errmsg_set(err, ERR_FORMAT, "no %s key", KEY_MODEL);
    }
    if (rc != ERR_OK) return errmsg_set(err, ERR_FORMAT, "%s is not a string", KEY_MODEL);
    if (!vocab_kind_parse(model, kind))
        return errmsg_set(err, ERR_UNSUPPORTED, "unsupported tokenizer model '%.*s'",
                          (int)(model.len > 64 ? 64 : model.len), model.ptr);
    return ERR_OK;
}

/* A string array of at least n_min elements into a new slice array. */
static int load_strings(const struct gguf *g, const char *key, int64_t n_min, struct str **out,
                        int32_t *n_out, struct errmsg *err)
{
    enum gguf_value_type type;
    int64_t n;
    int rc = gguf_get_arr(g, key, &type, &n);
    if (rc != ERR_OK || type != GGUF_VALUE_STRING)
        return errmsg_set(err, ERR_FORMAT, "%s is missing or not a string array", key);
    if (n < n_min || n > INT32_MAX)
        return errmsg_set(err, ERR_FORMAT, "%s has %lld elements", key, (long long)n);
    struct str *a = mem_calloc(n ? (size_t)n : 1, sizeof *a);
    if (!a) return errmsg_set(err, ERR_NOMEM, "out of memory reading %s", key);
    for (int64_t i = 0; i < n; i++) {
        if (gguf_get_arr_str(g, key, i, &a[i]) != ERR_OK) {
            mem_free(a);
            return errmsg_set(err, ERR_FORMAT, "%s[%lld] is unreadable", key, (long long)i);
        }
    }
    *out = a;
    *n_out = (int32_t)n;
    return ERR_OK;
}

/* Scores (F32 or I32) or token types (I32) for n tokens; absent keys leave *out NULL. */
static int load_numbers(const struct gguf *g, const char *key, int32_t n, bool as_float, void **out,
                        struct errmsg *err)
{
    enum gguf_value_type type;
    int64_t count;
    const void *data;
    int rc = gguf_get_arr_data(g, key, &type, &count, &data);
    if (rc == ERR_NOT_FOUND) return ERR_OK;
    bool type_ok = type == GGUF_VALUE_I32 || (as_float && type == GGUF_VALUE_F32);
    if (rc != ERR_OK || !type_ok) return errmsg_set(err, ERR_FORMAT, "%s has the wrong type", key);
    if (count < n)
        return errmsg_set(err, ERR_FORMAT, "%s has %lld elements for %d tokens", key,
                          (long long)count, (int)n);
    unsigned char *a = mem_calloc((size_t)n ? (size_t)n : 1, 4);
    if (!a) return errmsg_set(err, ERR_NOMEM, "out of memory reading %s", key);
    const unsigned char *src = data;
    for (int32_t i = 0; i < n; i++) {
        if (as_float && type == GGUF_VALUE_I32) {
            int32_t iv;
            memcpy(&iv, src + (size_t)i * 4, 4);
            float f = (float)iv;
            memcpy(a + (size_t)i * 4, &f, 4);
        } else {
            memcpy(a + (size_t)i * 4, src + (size_t)i * 4, 4); // little-endian host assumed
        }
    }
    *out = a;
    return ERR_OK;
}

/* The unigram normalizer's precompiled charsmap (an I8 or U8 array), copied; absent: *out
 * stays NULL. */
static int load_charsmap(const struct gguf *g, uint8_t **out, size_t *len, struct errmsg *err)
{
    enum gguf_value_type type;
    int64_t count;
    const void *data;
    int rc = gguf_get_arr_data(g, KEY_CHARS, &type, &count, &data);
    if (rc == ERR_NOT_FOUND) return ERR_OK;
    if (rc != ERR_OK || (type != GGUF_VALUE_U8 && type != GGUF_VALUE_I8))
        return errmsg_set(err, ERR_FORMAT, "%s has the wrong type", KEY_CHARS);
    if (count <= 0) return ERR_OK;
    if ((uint64_t)count > SIZE_MAX / 2)
        return errmsg_set(err, ERR_FORMAT, "%s is too large", KEY_CHARS);
    uint8_t *a = mem_alloc((size_t)count);
    if (!a) return errmsg_set(err, ERR_NOMEM, "out of memory reading %s", KEY_CHARS);
    memcpy(a, data, (size_t)count);
    *out = a;
    *len = (size_t)count;
    return ERR_OK;
}

static void read_id(const struct gguf *g, const char *key, int32_t n_tokens, tok_id *id)
{
    uint32_t v;
    if (gguf_get_u32(g, key, &v) != ERR_OK) return;
    if (v == UINT32_MAX) { // how converters write "none" (-1 stored unsigned): no warning;
        return;            // the default stays, as it does for any out-of-range id
    }
    if (v >= (uint32_t)n_tokens) {
        log_warn("vocab: %s = %u is outside the vocab, keeping %d", key, v, (int)*id);
        return;
    }
    *id = (tok_id)v;
}

static void read_flag(const struct gguf *g, const char *key, bool *flag)
{
    bool b;
    if (gguf_get_bool(g, key, &b) == ERR_OK) *flag = b;
}

static void read_ids_and_flags(const struct gguf *g, struct vocab *v)
{
    static const struct {
        const char *key;
        size_t field; // offsetof into struct vocab
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(struct vocab, bos_id)},
        {"tokenizer.ggml.eos_token_id", offsetof(struct vocab, eos_id)},
        {"tokenizer.ggml.eot_token_id", offsetof(struct vocab, eot_id)},
        {"tokenizer.ggml.eom_token_id", offsetof(struct vocab, eom_id)},
        {"tokenizer.ggml.unknown_token_id", offsetof(struct vocab, unk_id)},
        {"tokenizer.ggml.seperator_token_id", offsetof(struct vocab, sep_id)},
        {"tokenizer.ggml.padding_token_id", offsetof(struct vocab, pad_id)},
        {"tokenizer.ggml.cls_token_id", offsetof(struct vocab, cls_id)},
        {"tokenizer.ggml.mask_token_id", offsetof(struct vocab, mask_id)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(struct vocab, fim_pre_id)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(struct vocab, fim_suf_id)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(struct vocab, fim_mid_id)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(struct vocab, fim_pad_id)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(struct vocab, fim_rep_id)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(struct vocab, fim_sep_id)},
        {"tokenizer.ggml.prefix_token_id", offsetof(struct vocab, fim_pre_id)}, // deprecated
        {"tokenizer.ggml.suffix_token_id", offsetof(struct vocab, fim_suf_id)},
        {"tokenizer.ggml.middle_token_id", offsetof(struct vocab, fim_mid_id)},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        read_id(g, ids[i].key, v->n_tokens, (tok_id *)(void *)((char *)v + ids[i].field));
    read_flag(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    read_flag(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
    read_flag(g, "tokenizer.ggml.add_sep_token", &v->add_sep);
    read_flag(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    read_flag(g, "tokenizer.ggml.remove_extra_whitespaces", &v->remove_extra_ws);
    read_flag(g, "tokenizer.ggml.normalizer.lowercase", &v->lowercase);
    v->strip_accents = v->lowercase; // llama.cpp: strip_accents defaults to lowercase
    read_flag(g, "tokenizer.ggml.normalizer.strip_accents", &v->strip_accents);
}

/* Case-insensitive substring test on a borrowed slice. */
static bool str_contains_ci(struct str hay, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= hay.len; i++) {
        size_t k = 0;
        while (k < n && tolower((unsigned char)hay.ptr[i + k]) == needle[k])
            k++;
        if (k == n) return true;
    }
    return false;
}

static tok_id find_text(const struct vocab *v, const char *text)
{
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (str_eq_cstr(v->tokens[i], text)) return i;
    }
    return TOK_ID_NONE;
}

static bool is_special_type(const struct vocab *v, int32_t i)
{
    int32_t type = v->token_types ? v->token_types[i] : VOCAB_TOKEN_NORMAL;
    return type == VOCAB_TOKEN_CONTROL || type == VOCAB_TOKEN_USER_DEFINED ||
           type == VOCAB_TOKEN_UNKNOWN;
}

/* llama.cpp sets strip attributes by model name, since GGUF does not carry them
 * (llama_vocab::impl::load, "Handle per token attributes"): Phi-3 special tokens swallow the
 * whitespace after them; the mask token of some embedding models swallows the one before.
 * *out stays NULL when no rule applies. ERR_NOMEM. */
static int derive_strip(const struct gguf *g, const struct vocab *v, uint8_t **out)
{
    struct str name = {"", 0}, arch = {"", 0};
    (void)gguf_get_str(g, "general.name", &name);
    (void)gguf_get_str(g, "general.architecture", &arch);
    const char *mask = NULL;
    bool is_phi3 = false;
    if (str_contains_ci(v->pre, "jina-v2-de") || str_contains_ci(v->pre, "jina-v2-es") ||
        str_contains_ci(v->pre, "jina-v2-code") || str_contains_ci(arch, "nomic-bert-moe") ||
        str_contains_ci(arch, "jina-bert-v3"))
        mask = "<mask>";
    else if (str_contains_ci(name, "phi-3") || str_contains_ci(name, "phi3"))
        is_phi3 = true;
    else if (str_contains_ci(name, "modern-bert"))
        mask = "[MASK]";
    tok_id mask_id = mask ? find_text(v, mask) : TOK_ID_NONE;
    if (!is_phi3 && mask_id == TOK_ID_NONE) return ERR_OK;
    uint8_t *strip = mem_calloc((size_t)v->n_tokens, 1);
    if (!strip) return ERR_NOMEM;
    if (mask_id != TOK_ID_NONE) strip[mask_id] = VOCAB_STRIP_LEFT;
    for (int32_t i = 0; is_phi3 && i < v->n_tokens; i++) {
        bool keep = str_eq_cstr(v->tokens[i], "<unk>") || str_eq_cstr(v->tokens[i], "<s>") ||
                    str_eq_cstr(v->tokens[i], "<|endoftext|>");
        if (!keep && (is_special_type(v, i) || str_eq_cstr(v->tokens[i], "</s>")))
            strip[i] = VOCAB_STRIP_RIGHT;
    }
    *out = strip;
    return ERR_OK;
}

int vocab_load_gguf(const struct gguf *g, struct vocab *out, struct errmsg *err)
{
    enum vocab_kind kind;
    int rc = detect_kind(g, &kind, err);
    if (rc != ERR_OK) return rc;
    struct str pre = {"", 0};
    if (gguf_get_str(g, KEY_PRE, &pre) != ERR_OK) pre = (struct str){"", 0};
    struct vocab v;
    vocab_init_defaults(&v, kind, pre);
    struct str *tokens = NULL, *merges = NULL;
    void *scores = NULL, *types = NULL;
    rc = load_strings(g, KEY_TOKENS, 1, &tokens, &v.n_tokens, err);
    if (rc == ERR_OK) rc = load_numbers(g, KEY_SCORES, v.n_tokens, true, &scores, err);
    if (rc == ERR_OK) rc = load_numbers(g, KEY_TYPES, v.n_tokens, false, &types, err);
    if (rc == ERR_OK && kind == VOCAB_KIND_GPT2)
        rc = load_strings(g, KEY_MERGES, 0, &merges, &v.n_merges, err);
    uint8_t *charsmap = NULL;
    if (rc == ERR_OK && kind == VOCAB_KIND_UGM)
        rc = load_charsmap(g, &charsmap, &v.charsmap_len, err);
    v.charsmap = charsmap;
    if (rc != ERR_OK) {
        mem_free(charsmap);
        mem_free(tokens);
        mem_free(scores);
        mem_free(types);
        mem_free(merges);
        return rc;
    }
    v.tokens = tokens;
    v.scores = scores;
    v.token_types = types;
    v.merges = merges;
    uint8_t *strip = NULL;
    if (derive_strip(g, &v, &strip) != ERR_OK) {
        vocab_deinit(&v);
        return errmsg_set(err, ERR_NOMEM, "out of memory reading the vocab");
    }
    v.strip = strip;
    read_ids_and_flags(g, &v);
    *out = v;
    return ERR_OK;
}

void vocab_deinit(struct vocab *v)
{
    // The arrays were allocated by vocab_load_gguf; the const in struct vocab is for readers.
    mem_free((void *)(uintptr_t)v->tokens);
    mem_free((void *)(uintptr_t)v->scores);
    mem_free((void *)(uintptr_t)v->token_types);
    mem_free((void *)(uintptr_t)v->merges);
    mem_free((void *)(uintptr_t)v->strip);
    mem_free((void *)(uintptr_t)v->charsmap);
    memset(v, 0, sizeof *v);
}

int vocab_tokenizer_from_file(const char *path, struct tokenizer **out, struct errmsg *err)
{
    struct gguf *g;
    struct vocab v;
    int rc = gguf_open(path, &g, err);
    if (rc != ERR_OK) return rc;
    rc = vocab_load_gguf(g, &v, err);
    if (rc == ERR_OK) {
        rc = tok_new(&v, out, err);
        vocab_deinit(&v);
    }
    gguf_close(g);
    return rc;
}
