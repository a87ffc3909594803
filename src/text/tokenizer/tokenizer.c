/* Tokenizer construction: the tables built from a struct vocab (token texts, byte-level keys,
 * decoded pieces, hash maps, the special-token trie, end-of-generation ids) and the
 * accessors, plus the UTF-8, hash-map and heap helpers the algorithms share. Encoding is in
 * tokenizer_encode.c, decoding in tokenizer_decode.c. */
#include "text/tokenizer/tokenizer.h"

#include "text/tokenizer/tokenizer_internal.h"
#include "util/checked.h"
#include "util/log.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

#define SPM_SPACE     "\xe2\x96\x81" // U+2581, SentencePiece's visible space
#define SPM_SPACE_LEN 3

/* Texts llama.cpp treats as end of generation (llama-vocab.cpp, special_eog_ids). */
static const char *const k_eog_texts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>", // phi-3 ships it as user-defined: promoted to control, so unparsed text stays text
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "[e~[",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81"
    "of\xe2\x96\x81"
    "sentence\xef\xbd\x9c>",
};

/* ---- UTF-8 ---- */

size_t tok_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return n;
}

size_t tok_utf8_len_at(const char *s, size_t len)
{
    uint32_t cp;
    size_t n = tok_utf8_decode((const unsigned char *)s, len, &cp);
    return n ? n : 1;
}

size_t tok_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

int tok_utf8_append_lossy(struct buf *out, const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t run = i;
        uint32_t cp;
        size_t n;
        while (run < len && (n = tok_utf8_decode(s + run, len - run, &cp)) > 0)
            run += n;
        if (run > i && buf_append(out, s + i, run - i) != ERR_OK) return ERR_NOMEM;
        if (run < len) {
            if (buf_append(out, "\xef\xbf\xbd", 3) != ERR_OK) return ERR_NOMEM;
            run++;
        }
        i = run;
    }
    return ERR_OK;
}

bool tok_utf8_is_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    uint32_t cp;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = tok_utf8_decode(s + i, len - i, &cp);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

/* ---- hash map ---- */

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = TOK_HASH_INIT;
    for (size_t i = 0; i < len; i++)
        h = tok_hash_step(h, (unsigned char)s[i]);
    return tok_hash_end(h);
}

tok_id tok_map_find(const struct tok_map *m, const char *arena, const char *s, size_t len)
{
    return tok_map_find_hashed(m, arena, s, len, hash_bytes(s, len));
}

tok_id tok_map_find_hashed(const struct tok_map *m, const char *arena, const char *s, size_t len,
                           uint64_t hash)
{
    if (!m->slots) return TOK_ID_NONE;
    size_t i = (size_t)hash & m->mask;
    for (;;) {
        int32_t id = m->slots[i];
        if (id < 0) return TOK_ID_NONE;
        const struct tok_span *sp = &m->spans[id];
        if (sp->len == len && memcmp(arena + sp->off, s, len) == 0) return id;
        i = (i + 1) & m->mask;
    }
}

/* Indexes every id whose span is non-empty; a later id wins over an earlier one with the same
 * key (as llama.cpp's token_to_id[word] = i). ERR_NOMEM, ERR_LIMIT. */
static int map_build(struct tok_map *m, const char *arena, const struct tok_span *spans, int32_t n)
{
    size_t cap = 16, need;
    if (!size_mul((size_t)n, 2, &need)) return ERR_LIMIT;
    while (cap < need)
        cap *= 2;
    m->slots = mem_alloc(cap * sizeof *m->slots);
    if (!m->slots) return ERR_NOMEM;
    memset(m->slots, 0xff, cap * sizeof *m->slots);
    m->mask = cap - 1;
    m->spans = spans;
    for (int32_t id = 0; id < n; id++) {
        if (spans[id].len == 0) continue;
        const char *s = arena + spans[id].off;
        size_t i = (size_t)hash_bytes(s, spans[id].len) & m->mask;
        while (m->slots[i] >= 0) {
            const struct tok_span *o = &spans[m->slots[i]];
            if (o->len == spans[id].len && memcmp(arena + o->off, s, o->len) == 0) break;
            i = (i + 1) & m->mask;
        }
        m->slots[i] = id;
    }
    return ERR_OK;
}

/* ---- growable id array and heap ---- */

void tok_ids_init(struct tok_ids *a)
{
    a->ids = NULL;
    a->n_ids = 0;
    a->ids_cap = 0;
}

void tok_ids_deinit(struct tok_ids *a)
{
    mem_free(a->ids);
    tok_ids_init(a);
}

int tok_ids_push(struct tok_ids *a, tok_id id)
{
    if (a->n_ids == a->ids_cap) {
        size_t cap = a->ids_cap ? a->ids_cap : 64, bytes;
        if (!size_mul(cap, 2, &cap) || !size_mul(cap, sizeof *a->ids, &bytes)) return ERR_LIMIT;
        tok_id *p = mem_realloc(a->ids, bytes);
        if (!p) return ERR_NOMEM;
        a->ids = p;
        a->ids_cap = cap;
    }
    a->ids[a->n_ids++] = id;
    return ERR_OK;
}

static bool bigram_before(const struct tok_bigram *a, const struct tok_bigram *b)
{
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

int tok_heap_push(struct tok_heap *h, struct tok_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64, bytes;
        if (!size_mul(cap, sizeof *h->items, &bytes)) return ERR_LIMIT;
        struct tok_bigram *p = mem_realloc(h->items, bytes);
        if (!p) return ERR_NOMEM;
        h->items = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &h->items[parent])) break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = b;
    return ERR_OK;
}

struct tok_bigram tok_heap_pop(struct tok_heap *h)
{
    struct tok_bigram top = h->items[0];
    struct tok_bigram last = h->items[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->items[c + 1], &h->items[c])) c++;
        if (!bigram_before(&h->items[c], &last)) break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (h->n > 0) h->items[i] = last;
    return top;
}

/* ---- construction ---- */

static bool is_special_type(uint8_t type)
{
    return type == VOCAB_TOKEN_CONTROL || type == VOCAB_TOKEN_UNKNOWN ||
           type == VOCAB_TOKEN_USER_DEFINED;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xNN>" -> NN, or -1. */
static int parse_byte_token(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Writes id's decoded bytes at dst (room for 3 * text length + 4) and returns their count. */
static size_t make_piece(const struct tokenizer *t, tok_id id, char *dst)
{
    const char *s = t->arena + t->text[id].off;
    size_t len = t->text[id].len, n = 0;
    uint8_t type = t->type[id];
    if (type != VOCAB_TOKEN_NORMAL && type != VOCAB_TOKEN_BYTE) {
        memcpy(dst, s, len);
        return len;
    }
    if (t->kind == VOCAB_KIND_GPT2) {
        const struct tok_span *k = &t->key[id];
        if (k->len > 0 || len == 0) {
            memcpy(dst, t->arena + k->off, k->len);
            return k->len;
        }
        memcpy(dst, s, len);
        return len;
    }
    if (type == VOCAB_TOKEN_BYTE) {
        int b = parse_byte_token(s, len);
        if (b >= 0) {
            dst[0] = (char)b;
            return 1;
        }
    }
    if (t->kind == VOCAB_KIND_BERT && t->wpm_hash_form) {
        if (len > 2 && s[0] == '#' && s[1] == '#') {
            memcpy(dst, s + 2, len - 2);
            return len - 2;
        }
        dst[0] = ' ';
        memcpy(dst + 1, s, len);
        return len + 1;
    }
    for (size_t i = 0; i < len;) {
        if (len - i >= SPM_SPACE_LEN && memcmp(s + i, SPM_SPACE, SPM_SPACE_LEN) == 0) {
            dst[n++] = ' ';
            i += SPM_SPACE_LEN;
        } else {
            dst[n++] = s[i++];
        }
    }
    return n;
}

/* Copies texts, types and scores, and lays out keys and pieces in the arena. */
static int build_tables(struct tokenizer *t, const struct vocab *v, struct errmsg *err)
{
    int32_t n = v->n_tokens;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = v->tokens[i].len, cost;
        if (len > 0 && !v->tokens[i].ptr)
            return errmsg_set(err, ERR_INVALID, "token %d has no text", (int)i);
        if (!size_mul(len, 3, &cost) || !size_add(cost, 4, &cost) || !size_add(total, cost, &total))
            return errmsg_set(err, ERR_LIMIT, "vocab texts too large");
        if ((int64_t)len > t->max_token_len)
            t->max_token_len = (int32_t)(len > INT32_MAX ? INT32_MAX : len);
    }
    if (total > UINT32_MAX)
        return errmsg_set(err, ERR_LIMIT, "vocab texts too large (%zu bytes)", total);
    t->arena = mem_alloc(total ? total : 1);
    t->text = mem_calloc((size_t)n, sizeof *t->text);
    t->key = mem_calloc((size_t)n, sizeof *t->key);
    t->piece = mem_calloc((size_t)n, sizeof *t->piece);
    t->score = mem_calloc((size_t)n, sizeof *t->score);
    t->type = mem_calloc((size_t)n, sizeof *t->type);
    t->special_rank = mem_calloc((size_t)n, sizeof *t->special_rank);
    if (v->strip) t->strip = mem_calloc((size_t)n, 1);
    if (!t->arena || !t->text || !t->key || !t->piece || !t->score || !t->type ||
        !t->special_rank || (v->strip && !t->strip))
        return errmsg_set(err, ERR_NOMEM, "out of memory building the vocab tables");
    if (v->strip) memcpy(t->strip, v->strip, (size_t)n);
    uint32_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = v->tokens[i].len;
        if (len) memcpy(t->arena + off, v->tokens[i].ptr, len);
        t->text[i] = (struct tok_span){off, (uint32_t)len};
        off += (uint32_t)len;
        int32_t type = v->token_types ? v->token_types[i] : VOCAB_TOKEN_NORMAL;
        t->type[i] =
            (uint8_t)(type >= VOCAB_TOKEN_NORMAL && type <= VOCAB_TOKEN_BYTE ? type
                                                                             : VOCAB_TOKEN_NORMAL);
        t->score[i] = v->scores ? v->scores[i] : 0.0f;
        t->key[i] = (struct tok_span){off, 0};
        if (t->kind == VOCAB_KIND_GPT2) {
            size_t klen = 0;
            if (tok_bpe_unmap(v->tokens[i].ptr, len, t->arena + off, &klen)) {
                t->key[i].len = (uint32_t)klen;
                off += (uint32_t)klen;
            }
        }
    }
    if (t->kind == VOCAB_KIND_BERT) {
        for (int32_t i = 0; i < n && !t->wpm_hash_form; i++) {
            const struct tok_span *s = &t->text[i];
            t->wpm_hash_form = s->len > 2 && memcmp(t->arena + s->off, "##", 2) == 0;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        size_t plen = make_piece(t, i, t->arena + off);
        t->piece[i] = (struct tok_span){off, (uint32_t)plen};
        off += (uint32_t)plen;
    }
    return ERR_OK;
}

static bool text_is(const struct tokenizer *t, tok_id id, const char *s)
{
    struct str x = {t->arena + t->text[id].off, t->text[id].len};
    return str_eq_cstr(x, s);
}

static bool is_eog_text(const struct tokenizer *t, tok_id id)
{
    for (size_t i = 0; i < sizeof k_eog_texts / sizeof k_eog_texts[0]; i++) {
        if (text_is(t, id, k_eog_texts[i])) return true;
    }
    return false;
}

static tok_id valid_id(const struct tokenizer *t, tok_id id)
{
    return id >= 0 && id < t->n_tokens ? id : TOK_ID_NONE;
}

/* End-of-generation set: eos/eot/eom/fim_pad/fim_rep/fim_sep plus llama.cpp's eog texts,
 * which are also promoted to control type as llama.cpp does for "control-looking" tokens. */
static bool is_eog_id(const struct tokenizer *t, tok_id id)
{
    const struct tok_specials *sp = &t->specials;
    return id == t->eos || id == t->eot || id == t->eom || id == sp->fim_pad || id == sp->fim_rep ||
           id == sp->fim_sep;
}

/* The harmony format (gpt-oss, o200k_harmony) writes its structure with special tokens the
 * output parser must see, so, as the reference does: <|channel|>, <|message|>, <|start|> and
 * <|constrain|> are rendered as text (user-defined), and when <|return|> and <|call|> end a
 * generation, <|end|> (which closes a message inside one answer, e.g. the reasoning) neither
 * ends it nor is hidden. */
static void harmony_tokens(struct tokenizer *t)
{
    static const char *const rendered[] = {"<|channel|>", "<|message|>", "<|start|>",
                                           "<|constrain|>"};
    for (size_t i = 0; i < sizeof rendered / sizeof rendered[0]; i++) {
        tok_id id = tok_map_find(&t->text_map, t->arena, rendered[i], strlen(rendered[i]));
        if (id != TOK_ID_NONE) t->type[id] = VOCAB_TOKEN_USER_DEFINED;
    }
    int end_at = -1;
    bool has_return = false, has_call = false;
    for (int32_t i = 0; i < t->n_eog; i++) {
        has_return |= text_is(t, t->eog[i], "<|return|>");
        has_call |= text_is(t, t->eog[i], "<|call|>");
        if (text_is(t, t->eog[i], "<|end|>")) end_at = i;
    }
    if (!has_return || !has_call || end_at < 0) return;
    t->type[t->eog[end_at]] = VOCAB_TOKEN_USER_DEFINED;
    memmove(&t->eog[end_at], &t->eog[end_at + 1], (size_t)(t->n_eog - end_at - 1) * sizeof *t->eog);
    t->n_eog--;
}

static int build_eog(struct tokenizer *t)
{
    int32_t n = 0;
    for (tok_id id = 0; id < t->n_tokens; id++) {
        bool named = is_eog_text(t, id);
        if (named && t->type[id] != VOCAB_TOKEN_CONTROL) t->type[id] = VOCAB_TOKEN_CONTROL;
        if (named || is_eog_id(t, id)) n++;
    }
    t->eog = mem_calloc((size_t)n + 1, sizeof *t->eog);
    if (!t->eog) return ERR_NOMEM;
    for (tok_id id = 0; id < t->n_tokens; id++) {
        if (is_eog_text(t, id) || is_eog_id(t, id)) t->eog[t->n_eog++] = id;
    }
    harmony_tokens(t);
    return ERR_OK;
}

/* Orders special ids as llama.cpp's cache_special_tokens: longest text first; ties by id (a
 * stable counting sort by length). ERR_NOMEM. */
static int sort_specials(const struct tokenizer *t, tok_id *ids, size_t n)
{
    size_t n_len = (size_t)t->max_token_len + 2;
    size_t *start = mem_calloc(n_len, sizeof *start);
    tok_id *tmp = mem_calloc(n, sizeof *tmp);
    if (!start || !tmp) {
        mem_free(start);
        mem_free(tmp);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        start[t->text[ids[i]].len]++;
    size_t pos = 0;
    for (size_t len = n_len; len-- > 0;) {
        size_t c = start[len];
        start[len] = pos;
        pos += c;
    }
    for (size_t i = 0; i < n; i++)
        tmp[start[t->text[ids[i]].len]++] = ids[i];
    memcpy(ids, tmp, n * sizeof *ids);
    mem_free(start);
    mem_free(tmp);
    return ERR_OK;
}

static int32_t trie_child(struct tokenizer *t, int32_t node, unsigned char byte)
{
    int32_t c = node < 0 ? t->trie_root[byte] : t->trie[node].child;
    while (c >= 0 && t->trie[c].byte != byte)
        c = t->trie[c].sibling;
    return c;
}

static void trie_insert(struct tokenizer *t, tok_id id)
{
    const unsigned char *s = (const unsigned char *)t->arena + t->text[id].off;
    int32_t node = -1;
    for (uint32_t i = 0; i < t->text[id].len; i++) {
        int32_t c = trie_child(t, node, s[i]);
        if (c < 0) {
            c = t->n_trie++;
            t->trie[c] = (struct tok_trie_node){-1, -1, TOK_ID_NONE, s[i]};
            if (node < 0) {
                t->trie_root[s[i]] = c;
            } else {
                t->trie[c].sibling = t->trie[node].child;
                t->trie[node].child = c;
            }
        }
        node = c;
    }
    if (node >= 0 && t->trie[node].id == TOK_ID_NONE) t->trie[node].id = id;
}

/* The special-token trie and each special token's rank in llama.cpp's match order. */
static int build_specials(struct tokenizer *t)
{
    size_t n_special = 0, n_bytes = 0;
    for (tok_id id = 0; id < t->n_tokens; id++) {
        t->special_rank[id] = -1;
        if (is_special_type(t->type[id]) && t->text[id].len > 0) {
            n_special++;
            n_bytes += t->text[id].len;
        }
    }
    for (int i = 0; i < 256; i++)
        t->trie_root[i] = -1;
    if (n_special == 0) return ERR_OK;
    tok_id *order = mem_calloc(n_special, sizeof *order);
    t->trie = mem_calloc(n_bytes, sizeof *t->trie);
    if (!order || !t->trie) {
        mem_free(order);
        return ERR_NOMEM;
    }
    size_t k = 0;
    for (tok_id id = 0; id < t->n_tokens; id++) {
        if (is_special_type(t->type[id]) && t->text[id].len > 0) order[k++] = id;
    }
    if (sort_specials(t, order, n_special) != ERR_OK) {
        mem_free(order);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < n_special; i++) {
        t->special_rank[order[i]] = (int32_t)i;
        trie_insert(t, order[i]);
    }
    mem_free(order);
    return ERR_OK;
}

static int validate_vocab(const struct vocab *v, struct errmsg *err)
{
    if (v->kind != VOCAB_KIND_LLAMA && v->kind != VOCAB_KIND_GPT2 && v->kind != VOCAB_KIND_BERT &&
        v->kind != VOCAB_KIND_UGM)
        return errmsg_set(err, ERR_INVALID, "unknown vocab kind %d", (int)v->kind);
    if (v->n_tokens <= 0 || !v->tokens) return errmsg_set(err, ERR_INVALID, "vocab has no tokens");
    if (v->n_merges < 0 || (v->n_merges > 0 && !v->merges))
        return errmsg_set(err, ERR_INVALID, "vocab merges are inconsistent");
    if (v->n_norm < 0 || (v->n_norm > 0 && !v->norm) || v->n_pre_regex < 0 ||
        (v->n_pre_regex > 0 && !v->pre_regex) || (v->charsmap_len > 0 && !v->charsmap))
        return errmsg_set(err, ERR_INVALID, "vocab normalizer is inconsistent");
    return ERR_OK;
}

#define FW_BAR "\xef\xbd\x9c" // U+FF5C, DeepSeek's full-width bar

/* Texts llama.cpp recognizes for ids a GGUF may lack (llama_vocab::impl::load), in the order
 * they are tried here. NULL-terminated. */
static const char *const k_eot_texts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<|end_of_text|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "<" FW_BAR "end" SPM_SPACE "of" SPM_SPACE
                                          "sentence" FW_BAR ">",
                                          "<end_of_utterance>",
                                          NULL};
static const char *const k_eom_texts[] = {"<|eom_id|>", NULL};
static const char *const k_fim_pre_texts[] = {"<|fim_prefix|>",
                                              "<fim-prefix>",
                                              "<fim_prefix>",
                                              "<" FW_BAR "fim" SPM_SPACE "begin" FW_BAR ">",
                                              "<PRE>",
                                              SPM_SPACE "<PRE>",
                                              "<|code_prefix|>",
                                              "<|prefix|>",
                                              NULL};
static const char *const k_fim_suf_texts[] = {"<|fim_suffix|>",
                                              "<fim-suffix>",
                                              "<fim_suffix>",
                                              "<" FW_BAR "fim" SPM_SPACE "hole" FW_BAR ">",
                                              "<SUF>",
                                              SPM_SPACE "<SUF>",
                                              "<|code_suffix|>",
                                              "<|suffix|>",
                                              NULL};
static const char *const k_fim_mid_texts[] = {"<|fim_middle|>",
                                              "<fim-middle>",
                                              "<fim_middle>",
                                              "<" FW_BAR "fim" SPM_SPACE "end" FW_BAR ">",
                                              "<MID>",
                                              SPM_SPACE "<MID>",
                                              "<|code_middle|>",
                                              "<|middle|>",
                                              NULL};
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                              NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>",       "<reponame>",    NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};

/* id when valid, else the first token whose text is in the list, else TOK_ID_NONE. */
static tok_id id_or_text(const struct tokenizer *t, tok_id id, const char *const *texts)
{
    if (id >= 0 && id < t->n_tokens) return id;
    for (size_t i = 0; texts[i]; i++) {
        tok_id found = tok_map_find(&t->text_map, t->arena, texts[i], strlen(texts[i]));
        if (found != TOK_ID_NONE) return found;
    }
    return TOK_ID_NONE;
}

static void copy_flags(struct tokenizer *t, const struct vocab *v)
{
    t->bos = valid_id(t, v->bos_id);
    t->eos = valid_id(t, v->eos_id);
    t->unk = valid_id(t, v->unk_id);
    t->sep = valid_id(t, v->sep_id);
    t->pad = valid_id(t, v->pad_id);
    t->cls = valid_id(t, v->cls_id);
    t->mask = valid_id(t, v->mask_id);
    t->eot = id_or_text(t, v->eot_id, k_eot_texts);
    t->eom = id_or_text(t, v->eom_id, k_eom_texts);
    t->specials = (struct tok_specials){
        .bos = t->bos,
        .eos = t->eos,
        .unk = t->unk,
        .sep = t->sep,
        .pad = t->pad,
        .cls = t->cls != TOK_ID_NONE ? t->cls : t->bos,
        .mask = t->mask,
        .eot = t->eot,
        .eom = t->eom,
        .fim_pre = id_or_text(t, v->fim_pre_id, k_fim_pre_texts),
        .fim_suf = id_or_text(t, v->fim_suf_id, k_fim_suf_texts),
        .fim_mid = id_or_text(t, v->fim_mid_id, k_fim_mid_texts),
        .fim_pad = id_or_text(t, v->fim_pad_id, k_fim_pad_texts),
        .fim_rep = id_or_text(t, v->fim_rep_id, k_fim_rep_texts),
        .fim_sep = id_or_text(t, v->fim_sep_id, k_fim_sep_texts),
    };
    t->add_bos = v->add_bos;
    t->add_eos = v->add_eos;
    t->add_sep = v->add_sep;
    t->add_space_prefix =
        (v->kind == VOCAB_KIND_LLAMA || v->kind == VOCAB_KIND_UGM) && v->add_space_prefix;
    t->lowercase = v->lowercase;
    t->strip_accents = v->strip_accents;
    t->clean_spaces = v->kind == VOCAB_KIND_BERT;
}

/* A vocab without token types (e.g. classic BERT GGUFs) still has special tokens: its
 * declared special ids become control tokens (unk: unknown) so they are parsed as specials
 * and not rendered as text by default. */
static void mark_specials_control(struct tokenizer *t)
{
    tok_id ids[] = {t->bos, t->eos, t->sep, t->pad, t->cls, t->mask, t->eot, t->eom};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (ids[i] != TOK_ID_NONE) t->type[ids[i]] = VOCAB_TOKEN_CONTROL;
    }
    if (t->unk != TOK_ID_NONE) t->type[t->unk] = VOCAB_TOKEN_UNKNOWN;
}

static void build_byte_ids(struct tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char c = (char)b, hex[7];
        t->byte_id[b] = TOK_ID_NONE;
        if (t->kind == VOCAB_KIND_GPT2) {
            t->byte_id[b] = tok_map_find(&t->key_map, t->arena, &c, 1);
        } else if (t->kind == VOCAB_KIND_LLAMA || t->kind == VOCAB_KIND_UGM) {
            static const char digits[] = "0123456789ABCDEF";
            memcpy(hex, "<0x", 3);
            hex[3] = digits[b >> 4];
            hex[4] = digits[b & 15];
            hex[5] = '>';
            t->byte_id[b] = tok_map_find(&t->text_map, t->arena, hex, 6);
            if (t->byte_id[b] == TOK_ID_NONE)
                t->byte_id[b] = tok_map_find(&t->text_map, t->arena, &c, 1);
        }
    }
}

int tok_new(const struct vocab *v, struct tokenizer **out, struct errmsg *err)
{
    int rc = validate_vocab(v, err);
    if (rc != ERR_OK) return rc;
    struct tokenizer *t = mem_calloc(1, sizeof *t);
    if (!t) return errmsg_set(err, ERR_NOMEM, "out of memory");
    t->kind = v->kind;
    t->n_tokens = v->n_tokens;
    rc = build_tables(t, v, err);
    if (rc == ERR_OK && map_build(&t->text_map, t->arena, t->text, t->n_tokens) != ERR_OK)
        rc = errmsg_set(err, ERR_NOMEM, "out of memory indexing the vocab");
    if (rc == ERR_OK && t->kind == VOCAB_KIND_GPT2 &&
        map_build(&t->key_map, t->arena, t->key, t->n_tokens) != ERR_OK)
        rc = errmsg_set(err, ERR_NOMEM, "out of memory indexing the vocab");
    if (rc == ERR_OK) {
        copy_flags(t, v);
        if (!v->token_types) mark_specials_control(t);
        build_byte_ids(t);
        t->spm_chunkable = t->kind == VOCAB_KIND_LLAMA && tok_spm_chunkable(t);
        if (build_eog(t) != ERR_OK || build_specials(t) != ERR_OK)
            rc = errmsg_set(err, ERR_NOMEM, "out of memory indexing special tokens");
    }
    if (rc == ERR_OK && t->kind == VOCAB_KIND_GPT2) rc = tok_bpe_setup(t, v, err);
    if (rc == ERR_OK && t->kind == VOCAB_KIND_UGM) rc = tok_ugm_setup(t, v, err);
    if (rc == ERR_OK) rc = tok_norm_setup(t, v, err);
    if (rc == ERR_OK && t->kind == VOCAB_KIND_GPT2) rc = tok_bpe_build_merges(t, v, err);
    if (rc != ERR_OK) {
        tok_free(t);
        return rc;
    }
    *out = t;
    return ERR_OK;
}

void tok_free(struct tokenizer *t)
{
    if (!t) return;
    tok_bpe_free_regex(t);
    tok_norm_free(t);
    mem_free(t->xcda);
    mem_free(t->charsmap_repl);
    mem_free(t->arena);
    mem_free(t->text);
    mem_free(t->key);
    mem_free(t->piece);
    mem_free(t->score);
    mem_free(t->type);
    mem_free(t->strip);
    mem_free(t->special_rank);
    mem_free(t->text_map.slots);
    mem_free(t->key_map.slots);
    mem_free(t->merges);
    mem_free(t->trie);
    mem_free(t->eog);
    mem_free(t);
}

/* ---- accessors ---- */

static bool in_vocab(const struct tokenizer *t, tok_id id)
{
    return id >= 0 && id < t->n_tokens;
}

struct str tok_piece(const struct tokenizer *t, tok_id id)
{
    struct str s = {"", 0};
    if (in_vocab(t, id)) s = (struct str){t->arena + t->piece[id].off, t->piece[id].len};
    return s;
}

struct str tok_text(const struct tokenizer *t, tok_id id)
{
    struct str s = {"", 0};
    if (in_vocab(t, id)) s = (struct str){t->arena + t->text[id].off, t->text[id].len};
    return s;
}

tok_id tok_find(const struct tokenizer *t, struct str s)
{
    return tok_map_find(&t->text_map, t->arena, s.ptr, s.len);
}

int32_t tok_n_tokens(const struct tokenizer *t)
{
    return t->n_tokens;
}

enum vocab_kind tok_kind(const struct tokenizer *t)
{
    return t->kind;
}

int tok_token_type(const struct tokenizer *t, tok_id id)
{
    return in_vocab(t, id) ? t->type[id] : 0;
}

const struct tok_specials *tok_specials(const struct tokenizer *t)
{
    return &t->specials;
}

tok_id tok_bos(const struct tokenizer *t)
{
    return t->bos;
}

tok_id tok_eos(const struct tokenizer *t)
{
    return t->eos;
}

tok_id tok_eot(const struct tokenizer *t)
{
    return t->eot;
}

tok_id tok_eom(const struct tokenizer *t)
{
    return t->eom;
}

tok_id tok_sep(const struct tokenizer *t)
{
    return t->sep;
}

tok_id tok_cls(const struct tokenizer *t)
{
    return t->cls != TOK_ID_NONE ? t->cls : t->bos;
}

tok_id tok_pad(const struct tokenizer *t)
{
    return t->pad;
}

tok_id tok_unk(const struct tokenizer *t)
{
    return t->unk;
}

bool tok_is_eog(const struct tokenizer *t, tok_id id)
{
    for (int32_t i = 0; i < t->n_eog; i++) {
        if (t->eog[i] == id) return true;
    }
    return false;
}

bool tok_cleans_spaces(const struct tokenizer *t)
{
    return t->clean_spaces;
}

bool tok_is_control(const struct tokenizer *t, tok_id id)
{
    if (!in_vocab(t, id)) return false;
    uint8_t type = t->type[id];
    return type == VOCAB_TOKEN_CONTROL || type == VOCAB_TOKEN_UNKNOWN || type == VOCAB_TOKEN_UNUSED;
}

size_t tok_text_bytes_max(const struct tokenizer *t, size_t n_ids)
{
    const bool is_plain = (t->kind == VOCAB_KIND_LLAMA || t->kind == VOCAB_KIND_GPT2) &&
                          t->n_norm == 0 && !t->strip && !t->lowercase && !t->strip_accents;
    size_t bytes;
    if (!is_plain ||
        !size_mul(n_ids, (size_t)(t->max_token_len > 0 ? t->max_token_len : 1), &bytes))
        return SIZE_MAX;
    return bytes;
}
