/* SentencePiece BPE ("llama" vocabs), behaving as llama.cpp's llm_tokenizer_spm: spaces become
 * U+2581, the text is split into UTF-8 characters, and the adjacent pair whose concatenation is
 * the highest-scoring token is merged until no pair is a token; leftovers fall back to <0xNN>
 * byte tokens. Unlike llama.cpp, control, byte and unused tokens never take part in merges
 * (SentencePiece never produces them from plain text). */
#include "text/tokenizer/tokenizer_internal.h"

#include "util/checked.h"
#include "util/mem.h"

#include <stdint.h>
#include <string.h>

#define SP     "\xe2\x96\x81" // U+2581
#define SP_LEN 3

struct spm_session {
    const struct tokenizer *tok;
    const char *text; // escaped text
    struct tok_sym *sym;
    struct tok_heap heap;
};

static bool mergeable(const struct tokenizer *t, tok_id id)
{
    return id != TOK_ID_NONE &&
           (t->type[id] == VOCAB_TOKEN_NORMAL || t->type[id] == VOCAB_TOKEN_USER_DEFINED);
}

static int try_add_bigram(struct spm_session *ss, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return ERR_OK;
    const struct tok_sym *l = &ss->sym[left], *r = &ss->sym[right];
    size_t len = (size_t)l->len + r->len;
    tok_id id = tok_map_find(&ss->tok->text_map, ss->tok->arena, ss->text + l->off, len);
    if (!mergeable(ss->tok, id)) return ERR_OK;
    struct tok_bigram b = {ss->tok->score[id], left, right, (uint32_t)len};
    return tok_heap_push(&ss->heap, b);
}

/* Replaces ' ' by U+2581 (and prepends one when add_prefix). Caller frees. */
static char *escape_spaces(const char *s, size_t len, bool add_prefix, size_t *out_len)
{
    size_t n_space = add_prefix ? 1 : 0, size;
    for (size_t i = 0; i < len; i++)
        n_space += s[i] == ' ';
    if (!size_mul(n_space, 2, &size) || !size_add(size, len + (add_prefix ? 1 : 0), &size))
        return NULL;
    char *e = mem_alloc(size ? size : 1);
    if (!e) return NULL;
    size_t n = 0;
    if (add_prefix) {
        memcpy(e, SP, SP_LEN);
        n = SP_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            memcpy(e + n, SP, SP_LEN);
            n += SP_LEN;
        } else {
            e[n++] = s[i];
        }
    }
    *out_len = n;
    return e;
}

/* One symbol per UTF-8 character of text[start, end). */
static int32_t split_chars(struct spm_session *ss, size_t start, size_t end)
{
    int32_t n = 0;
    for (size_t off = start; off < end;) {
        uint32_t cp;
        size_t clen = tok_utf8_decode((const unsigned char *)ss->text + off, end - off, &cp);
        if (clen == 0) clen = 1;
        ss->sym[n] = (struct tok_sym){n - 1, off + clen < end ? n + 1 : -1, (uint32_t)off,
                                      (uint32_t)clen, TOK_ID_NONE};
        off += clen;
        n++;
    }
    return n;
}

static int merge_all(struct spm_session *ss, int32_t n_sym)
{
    int rc = ERR_OK;
    for (int32_t i = 1; i < n_sym && rc == ERR_OK; i++)
        rc = try_add_bigram(ss, i - 1, i);
    while (rc == ERR_OK && ss->heap.n > 0) {
        struct tok_bigram b = tok_heap_pop(&ss->heap);
        struct tok_sym *l = &ss->sym[b.left], *r = &ss->sym[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.size)
            continue; // stale: one side was merged since
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) ss->sym[r->next].prev = b.left;
        rc = try_add_bigram(ss, l->prev, b.left);
        if (rc == ERR_OK) rc = try_add_bigram(ss, b.left, l->next);
    }
    return rc;
}

static int emit(struct spm_session *ss, struct tok_ids *out)
{
    const struct tokenizer *t = ss->tok;
    int rc = ERR_OK;
    for (int32_t i = 0; i != -1 && rc == ERR_OK; i = ss->sym[i].next) {
        const struct tok_sym *s = &ss->sym[i];
        tok_id id = tok_map_find(&t->text_map, t->arena, ss->text + s->off, s->len);
        if (mergeable(t, id)) {
            rc = tok_ids_push(out, id);
            continue;
        }
        for (uint32_t k = 0; k < s->len && rc == ERR_OK; k++) {
            tok_id b = t->byte_id[(unsigned char)ss->text[s->off + k]];
            if (b == TOK_ID_NONE) b = t->unk;
            if (b != TOK_ID_NONE) rc = tok_ids_push(out, b);
        }
    }
    return rc;
}

static bool is_space_at(const char *e, size_t len, size_t p)
{
    return p + SP_LEN <= len && memcmp(e + p, SP, SP_LEN) == 0;
}

/* End of the chunk starting at start: the next U+2581 that follows another character, when
 * the vocab lets merges never cross such a point (tok_spm_chunkable), else len. */
static size_t chunk_end(const struct tokenizer *t, const char *e, size_t len, size_t start)
{
    if (!t->spm_chunkable) return len;
    for (size_t p = start + 1; p < len; p++) {
        if (is_space_at(e, len, p) && !(p >= SP_LEN && is_space_at(e, len, p - SP_LEN))) return p;
    }
    return len;
}

bool tok_spm_chunkable(const struct tokenizer *t)
{
    for (tok_id id = 0; id < t->n_tokens; id++) {
        if (!mergeable(t, id)) continue;
        const char *s = t->arena + t->text[id].off;
        size_t len = t->text[id].len;
        for (size_t p = 1; p < len; p++) {
            if (is_space_at(s, len, p) && !(p >= SP_LEN && is_space_at(s, len, p - SP_LEN)))
                return false;
        }
    }
    return true;
}

int tok_spm_encode(const struct tokenizer *t, const char *s, size_t len, bool add_prefix,
                   struct tok_ids *out)
{
    size_t elen = 0;
    if (len == 0 && !add_prefix) return ERR_OK;
    char *e = escape_spaces(s, len, add_prefix, &elen);
    if (!e) return ERR_NOMEM;
    if (elen > INT32_MAX) { // symbol indexes are int32_t
        mem_free(e);
        return ERR_LIMIT;
    }
    struct spm_session ss = {
        t, e, mem_calloc(elen ? elen : 1, sizeof(struct tok_sym)), {NULL, 0, 0}};
    int rc = ss.sym ? ERR_OK : ERR_NOMEM;
    // Merging word by word keeps the heap small; the result is the same as one pass over
    // the whole text because no mergeable token spans a chunk boundary.
    for (size_t start = 0; start < elen && rc == ERR_OK;) {
        size_t end = chunk_end(t, e, elen, start);
        int32_t n_sym = split_chars(&ss, start, end);
        ss.heap.n = 0;
        rc = merge_all(&ss, n_sym);
        if (rc == ERR_OK && n_sym > 0) rc = emit(&ss, out);
        start = end;
    }
    mem_free(ss.heap.items);
    mem_free(ss.sym);
    mem_free(e);
    return rc;
}
