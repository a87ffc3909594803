/* Tokenizer front for encoding: replaces invalid UTF-8, splits special tokens out of the text
 * (llama.cpp's tokenizer_st_partition: longest token first, then left to right, never
 * overlapping), and hands the text fragments to the SPM, BPE or WordPiece algorithm. */
#include "text/tokenizer/tokenizer.h"

#include "text/tokenizer/tokenizer_internal.h"
#include "util/checked.h"
#include "util/mem.h"

#include <stdlib.h>
#include <string.h>

/* A piece of the input: text to tokenize (id = TOK_ID_NONE) or one special token. */
struct fragment {
    size_t off, len;
    tok_id id;
};

struct occurrence {
    int32_t rank;
    uint32_t len;
    size_t pos;
    tok_id id;
};

static int cmp_occ_rank(const void *a, const void *b)
{
    const struct occurrence *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_occ_pos(const void *a, const void *b)
{
    const struct occurrence *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

struct occ_list {
    struct occurrence *items;
    size_t n, cap;
};

static int occ_push(struct occ_list *l, struct occurrence o)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16, bytes;
        if (!size_mul(cap, sizeof *l->items, &bytes)) return ERR_LIMIT;
        struct occurrence *p = mem_realloc(l->items, bytes);
        if (!p) return ERR_NOMEM;
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = o;
    return ERR_OK;
}

static bool special_allowed(const struct tokenizer *t, tok_id id, bool parse_special)
{
    // Without parse_special only user-defined tokens are split out, as llama.cpp does.
    return parse_special || t->type[id] == VOCAB_TOKEN_USER_DEFINED;
}

/* Every occurrence of every allowed special token in s. */
static int find_occurrences(const struct tokenizer *t, const unsigned char *s, size_t len,
                            bool parse_special, struct occ_list *l)
{
    for (size_t pos = 0; pos < len; pos++) {
        int32_t node = t->trie_root[s[pos]];
        size_t depth = 1;
        while (node >= 0) {
            const struct tok_trie_node *nd = &t->trie[node];
            if (nd->id != TOK_ID_NONE && special_allowed(t, nd->id, parse_special)) {
                struct occurrence o = {t->special_rank[nd->id], (uint32_t)depth, pos, nd->id};
                if (occ_push(l, o) != ERR_OK) return ERR_NOMEM;
            }
            if (pos + depth >= len) break;
            int32_t c = nd->child;
            while (c >= 0 && t->trie[c].byte != s[pos + depth])
                c = t->trie[c].sibling;
            node = c;
            depth++;
        }
    }
    return ERR_OK;
}

/* Keeps the occurrences llama.cpp's partition would take: token by token in rank order, left
 * to right, each one not overlapping anything taken before. Leaves them sorted by position. */
static int select_occurrences(struct occ_list *l, size_t len)
{
    qsort(l->items, l->n, sizeof *l->items, cmp_occ_rank);
    unsigned char *taken = mem_calloc(len, 1);
    if (!taken) return ERR_NOMEM;
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct occurrence *o = &l->items[i];
        bool is_free = true;
        for (size_t k = 0; k < o->len && is_free; k++)
            is_free = !taken[o->pos + k];
        if (!is_free) continue;
        memset(taken + o->pos, 1, o->len);
        l->items[kept++] = *o;
    }
    l->n = kept;
    mem_free(taken);
    qsort(l->items, l->n, sizeof *l->items, cmp_occ_pos);
    return ERR_OK;
}

/* Runs the fragment's text through the algorithm of the vocab kind. */
static int encode_plain(const struct tokenizer *t, const char *s, size_t len, bool is_first,
                        bool is_prev_special, struct tok_ids *out)
{
    switch (t->kind) {
    case VOCAB_KIND_LLAMA:
        return tok_spm_encode(t, s, len, t->add_space_prefix && is_prev_special, out);
    case VOCAB_KIND_GPT2:
        return tok_bpe_encode(t, s, len, out);
    case VOCAB_KIND_BERT:
        return tok_wpm_encode(t, s, len, out);
    case VOCAB_KIND_UGM:
        return tok_ugm_encode(t, s, len, is_first, out);
    }
    return ERR_OK;
}

static int encode_fragment(const struct tokenizer *t, const char *s, struct fragment f,
                           bool *is_prev_special, struct tok_ids *out)
{
    if (f.id != TOK_ID_NONE) {
        *is_prev_special = true;
        return tok_ids_push(out, f.id);
    }
    int rc;
    if (t->n_norm > 0) { // a tokenizer.json normalizer runs first
        struct buf norm;
        buf_init(&norm);
        rc = tok_norm_apply(t, s + f.off, f.len, &norm);
        if (rc == ERR_OK)
            rc = encode_plain(t, norm.len ? norm.data : "", norm.len, f.off == 0, *is_prev_special,
                              out);
        buf_deinit(&norm);
    } else {
        rc = encode_plain(t, s + f.off, f.len, f.off == 0, *is_prev_special, out);
    }
    *is_prev_special = false;
    return rc;
}

static bool is_ascii_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static uint8_t strip_of(const struct tokenizer *t, const struct occ_list *l, size_t i)
{
    return t->strip && i < l->n ? t->strip[l->items[i].id] : 0;
}

/* Splits s into text and special-token fragments and encodes them in order. Whitespace next
 * to a special token with a strip flag is dropped (llama.cpp's LSTRIP/RSTRIP). */
static int encode_text(const struct tokenizer *t, const char *s, size_t len, bool parse_special,
                       struct tok_ids *out)
{
    struct occ_list l = {NULL, 0, 0};
    bool is_prev_special = true;
    int rc = ERR_OK;
    if (len == 0) return ERR_OK;
    if (t->n_trie > 0) rc = find_occurrences(t, (const unsigned char *)s, len, parse_special, &l);
    if (rc == ERR_OK && l.n > 0) rc = select_occurrences(&l, len);
    size_t pos = 0;
    for (size_t i = 0; rc == ERR_OK && i <= l.n; i++) {
        size_t end = i < l.n ? l.items[i].pos : len;
        if (i > 0 && (strip_of(t, &l, i - 1) & VOCAB_STRIP_RIGHT)) {
            while (pos < end && is_ascii_space(s[pos]))
                pos++;
        }
        if (strip_of(t, &l, i) & VOCAB_STRIP_LEFT) {
            while (end > pos && is_ascii_space(s[end - 1]))
                end--;
        }
        if (end > pos) {
            struct fragment f = {pos, end - pos, TOK_ID_NONE};
            rc = encode_fragment(t, s, f, &is_prev_special, out);
        }
        if (rc == ERR_OK && i < l.n) {
            struct fragment f = {l.items[i].pos, l.items[i].len, l.items[i].id};
            rc = encode_fragment(t, s, f, &is_prev_special, out);
            pos = l.items[i].pos + l.items[i].len;
        }
    }
    mem_free(l.items);
    return rc;
}

static int push_if(struct tok_ids *out, bool cond, tok_id id)
{
    return cond && id != TOK_ID_NONE ? tok_ids_push(out, id) : ERR_OK;
}

int tok_encode(const struct tokenizer *t, struct str text, bool add_special, bool parse_special,
               struct tok_ids *out)
{
    size_t n_before = out->n_ids;
    struct buf clean;
    buf_init(&clean);
    const char *s = text.len ? text.ptr : "";
    int rc = ERR_OK;
    if (!tok_utf8_is_valid((const unsigned char *)s, text.len)) {
        rc = tok_utf8_append_lossy(&clean, (const unsigned char *)s, text.len);
        s = clean.data;
        text.len = clean.len;
    }
    bool is_bert = t->kind == VOCAB_KIND_BERT;
    if (rc == ERR_OK) rc = push_if(out, add_special && t->add_bos, is_bert ? tok_cls(t) : t->bos);
    if (rc == ERR_OK) rc = encode_text(t, s, text.len, parse_special, out);
    if (rc == ERR_OK)
        rc = push_if(out, add_special && (is_bert ? t->add_sep : t->add_eos),
                     is_bert ? t->sep : t->eos);
    buf_deinit(&clean);
    if (rc != ERR_OK) out->n_ids = n_before;
    return rc;
}
