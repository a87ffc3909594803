/* SentencePiece unigram ("t5" in GGUF, "Unigram" in tokenizer.json): the text is normalized
 * (the precompiled charsmap, then either SentencePiece's whitespace rules as llama.cpp's
 * llm_tokenizer_ugm applies them, or the Metaspace pre-tokenizer of Hugging Face tokenizers),
 * and the segmentation with the highest sum of token scores is found by Viterbi. Unknown
 * characters cost the lowest score minus 10 and consecutive ones fuse into one unknown token
 * (or become <0xNN> byte tokens with byte_fallback), as both SentencePiece and Hugging Face do.
 * Candidates are found by probing the token hash map with every prefix up to the longest token,
 * hashing incrementally, instead of keeping a second trie of ~250k tokens in memory. */
#include "text/tokenizer/tokenizer_internal.h"

#include "util/checked.h"
#include "util/mem.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

#define SP     "\xe2\x96\x81" // U+2581
#define SP_LEN 3

#define UNK_PENALTY 10.0

/* ---- setup ---- */

static bool is_candidate(uint8_t type)
{
    return type == VOCAB_TOKEN_NORMAL || type == VOCAB_TOKEN_USER_DEFINED ||
           type == VOCAB_TOKEN_UNUSED;
}

/* Copies the charsmap: a little-endian u32 byte count, that many bytes of u32 double-array
 * entries, then NUL-terminated replacement strings. Every entry and offset is checked again
 * when used, so a malformed map can only fail to match. */
static int copy_charsmap(struct tokenizer *t, const struct vocab *v, struct errmsg *err)
{
    const uint8_t *p = v->charsmap;
    size_t len = v->charsmap_len;
    if (len < 4) return errmsg_set(err, ERR_INVALID, "precompiled charsmap is too short");
    uint32_t blob =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (blob % 4 != 0 || blob == 0 || blob > len - 4 || len - 4 - blob == 0)
        return errmsg_set(err, ERR_INVALID, "precompiled charsmap: bad array size %u of %zu bytes",
                          blob, len);
    t->n_xcda = blob / 4;
    t->charsmap_repl_len = len - 4 - blob;
    t->xcda = mem_alloc(blob);
    t->charsmap_repl = mem_alloc(t->charsmap_repl_len);
    if (!t->xcda || !t->charsmap_repl)
        return errmsg_set(err, ERR_NOMEM, "out of memory copying the charsmap");
    for (size_t i = 0; i < t->n_xcda; i++) {
        const uint8_t *e = p + 4 + i * 4;
        t->xcda[i] =
            (uint32_t)e[0] | (uint32_t)e[1] << 8 | (uint32_t)e[2] << 16 | (uint32_t)e[3] << 24;
    }
    memcpy(t->charsmap_repl, p + 4 + blob, t->charsmap_repl_len);
    return ERR_OK;
}

/* True when "\u2581" is a candidate token and no candidate holds U+2581 past its first byte:
 * then no token can span a word start, and the best segmentation of a text is the
 * concatenation of the best segmentations of its words (a word starting at each U+2581). */
static bool is_chunkable(const struct tokenizer *t)
{
    tok_id sp = tok_map_find(&t->text_map, t->arena, SP, SP_LEN);
    if (sp == TOK_ID_NONE || !is_candidate(t->type[sp])) return false;
    for (tok_id id = 0; id < t->n_tokens; id++) {
        if (!is_candidate(t->type[id])) continue;
        const char *s = t->arena + t->text[id].off;
        for (uint32_t i = 1; i + SP_LEN <= t->text[id].len; i++)
            if (memcmp(s + i, SP, SP_LEN) == 0) return false;
    }
    return true;
}

int tok_ugm_setup(struct tokenizer *t, const struct vocab *v, struct errmsg *err)
{
    t->remove_extra_ws = v->remove_extra_ws;
    t->escape_ws = v->escape_ws;
    t->ws_as_suffix = v->ws_as_suffix;
    t->byte_fallback = v->byte_fallback;
    t->is_metaspace = v->is_metaspace;
    t->meta_split = v->meta_split;
    t->ws_split = v->ws_split;
    t->prepend = v->prepend;
    double min_score = DBL_MAX;
    for (tok_id id = 0; id < t->n_tokens; id++) {
        if (!is_candidate(t->type[id])) continue;
        if (t->type[id] == VOCAB_TOKEN_NORMAL && t->score[id] < min_score) min_score = t->score[id];
        if ((int64_t)t->text[id].len > t->ugm_max_len) t->ugm_max_len = (int32_t)t->text[id].len;
    }
    t->ugm_unk_score = (min_score == DBL_MAX ? 0.0 : min_score) - UNK_PENALTY;
    t->ugm_chunkable = is_chunkable(t);
    if (t->unk == TOK_ID_NONE && !t->byte_fallback)
        return errmsg_set(err, ERR_INVALID, "unigram vocab has no unknown token");
    if (v->charsmap_len > 0) return copy_charsmap(t, v, err);
    return ERR_OK;
}

/* ---- charsmap ---- */

/* The double array packs per entry: BASE in bits 10-30 (shifted left by 8 when bit 9 is set),
 * the label checked on entry in bits 0-7 (bit 31 marks value entries so they never match a
 * label), the leaf flag in bit 8, and in value entries the replacement offset in bits 0-30.
 * Returns the length of the longest prefix of s the map replaces (0: none) and its
 * replacement offset. */
static size_t charsmap_match(const struct tokenizer *t, const unsigned char *s, size_t len,
                             size_t *repl_off)
{
    if (t->n_xcda == 0) return 0;
    uint32_t e = t->xcda[0];
    size_t node = (e >> 10) << ((e & (1u << 9)) >> 6), best = 0;
    for (size_t i = 0; i < len && s[i] != 0; i++) {
        node ^= s[i];
        if (node >= t->n_xcda) break;
        e = t->xcda[node];
        if ((e & ((1u << 31) | 0xffu)) != s[i]) break;
        bool is_leaf = (e >> 8) & 1;
        node ^= (e >> 10) << ((e & (1u << 9)) >> 6);
        if (is_leaf) {
            if (node >= t->n_xcda) break;
            best = i + 1;
            *repl_off = t->xcda[node] & ((1u << 31) - 1);
        }
    }
    return best;
}

/* The replacement at off, or NULL when off or its terminator lies outside the strings. */
static const char *charsmap_repl(const struct tokenizer *t, size_t off, size_t *len)
{
    if (off >= t->charsmap_repl_len) return NULL;
    const char *r = t->charsmap_repl + off;
    const char *end = memchr(r, '\0', t->charsmap_repl_len - off);
    if (!end) return NULL;
    *len = (size_t)(end - r);
    return r;
}

/* One normalization step at s: the replacement of the longest mapped prefix, else one UTF-8
 * character (the text is valid UTF-8 here) as it is. */
static const char *normalize_prefix(const struct tokenizer *t, const char *s, size_t len,
                                    size_t *out_len, size_t *consumed)
{
    size_t off = 0, n = charsmap_match(t, (const unsigned char *)s, len, &off), rlen = 0;
    const char *r = n > 0 ? charsmap_repl(t, off, &rlen) : NULL;
    if (r) {
        *out_len = rlen;
        *consumed = n;
        return r;
    }
    uint32_t cp;
    size_t c = tok_utf8_decode((const unsigned char *)s, len, &cp);
    *out_len = *consumed = c ? c : 1;
    return s;
}

int tok_charsmap_apply(const struct tokenizer *t, const char *s, size_t len, struct buf *out)
{
    for (size_t i = 0; i < len;) {
        size_t n, used;
        const char *r = normalize_prefix(t, s + i, len - i, &n, &used);
        if (buf_append(out, r, n) != ERR_OK) return ERR_NOMEM;
        i += used;
    }
    return ERR_OK;
}

/* SentencePiece's whitespace rules as llama.cpp applies them to a GGUF unigram vocab: spaces
 * become U+2581 (escape_ws), add_space_prefix puts one before (or, with ws_as_suffix, after)
 * the text, remove_extra_ws drops leading spaces and merges runs. */
static int normalize_gguf(const struct tokenizer *t, const char *s, size_t len, struct buf *out)
{
    const char *space = t->escape_ws ? SP : " ";
    size_t space_len = t->escape_ws ? SP_LEN : 1;
    bool prepend = !t->ws_as_suffix && t->add_space_prefix;
    bool merge = t->remove_extra_ws, is_prepended = false, in_word = false;
    int rc = ERR_OK;
    for (size_t i = 0; i < len && rc == ERR_OK;) {
        size_t n, used;
        const char *r = normalize_prefix(t, s + i, len - i, &n, &used);
        for (size_t k = 0; k < n && rc == ERR_OK; k++) {
            if (r[k] != ' ') {
                if (!in_word && ((prepend && !is_prepended) || merge)) {
                    rc = buf_append(out, space, space_len);
                    is_prepended = true;
                }
                in_word = true;
                if (rc == ERR_OK) rc = buf_append_byte(out, r[k]);
            } else {
                in_word = false;
                if (!merge) rc = buf_append(out, space, space_len);
            }
        }
        i += used;
    }
    if (rc == ERR_OK && t->ws_as_suffix && t->add_space_prefix)
        rc = buf_append(out, space, space_len);
    return rc == ERR_OK ? ERR_OK : ERR_NOMEM;
}

/* ---- Viterbi ---- */

struct best {
    tok_id id;     // token ending here (TOK_ID_NONE: unknown text)
    uint32_t from; // where that token starts
    double score;  // best total score of s[0..here)
};

/* Appends the ids of an unknown run s[0..len): byte tokens when byte_fallback covers every
 * byte, else the unknown token. */
static int push_unknown(const struct tokenizer *t, const char *s, size_t len, struct tok_ids *out)
{
    bool use_bytes = t->byte_fallback;
    for (size_t i = 0; i < len && use_bytes; i++)
        use_bytes = t->byte_id[(unsigned char)s[i]] != TOK_ID_NONE;
    if (!use_bytes) return t->unk != TOK_ID_NONE ? tok_ids_push(out, t->unk) : ERR_OK;
    for (size_t i = 0; i < len; i++) {
        int rc = tok_ids_push(out, t->byte_id[(unsigned char)s[i]]);
        if (rc != ERR_OK) return rc;
    }
    return ERR_OK;
}

/* Relaxes every token that starts at pos. */
static void relax(const struct tokenizer *t, const char *s, size_t n, size_t pos, struct best *b)
{
    size_t clen = tok_utf8_len_at(s + pos, n - pos);
    size_t max = n - pos < (size_t)t->ugm_max_len ? n - pos : (size_t)t->ugm_max_len;
    bool has_single = false;
    uint64_t h = TOK_HASH_INIT;
    for (size_t len = 1; len <= max; len++) {
        h = tok_hash_step(h, (unsigned char)s[pos + len - 1]);
        tok_id id = tok_map_find_hashed(&t->text_map, t->arena, s + pos, len, tok_hash_end(h));
        if (id == TOK_ID_NONE || !is_candidate(t->type[id])) continue;
        has_single = has_single || len == clen;
        // User-defined tokens score 0 so they win over the log-probabilities (llama.cpp).
        double score =
            b[pos].score + (t->type[id] == VOCAB_TOKEN_USER_DEFINED ? 0.0 : (double)t->score[id]);
        if (score > b[pos + len].score) b[pos + len] = (struct best){id, (uint32_t)pos, score};
    }
    if (!has_single) {
        double score = b[pos].score + t->ugm_unk_score;
        if (score > b[pos + clen].score)
            b[pos + clen] = (struct best){TOK_ID_NONE, (uint32_t)pos, score};
    }
}

/* Appends the best segmentation of one word s[0..n) to out. */
static int viterbi(const struct tokenizer *t, const char *s, size_t n, struct tok_ids *out)
{
    if (n == 0) return ERR_OK;
    if (n > UINT32_MAX - 1) return ERR_LIMIT;
    struct best *b = mem_calloc(n + 1, sizeof *b);
    if (!b) return ERR_NOMEM;
    for (size_t i = 0; i <= n; i++)
        b[i] = (struct best){TOK_ID_NONE, 0, -DBL_MAX};
    b[0].score = 0.0;
    for (size_t pos = 0; pos < n; pos += tok_utf8_len_at(s + pos, n - pos))
        relax(t, s, n, pos, b);
    // Walk back twice (count, then fill in order). A run of unknown characters is one token:
    // only its last piece is kept, and its text starts where the kept token before it ends.
    size_t n_tok = 0;
    bool next_unk = false;
    for (size_t at = n; at > 0; at = b[at].from) {
        bool unk = b[at].id == TOK_ID_NONE;
        n_tok += !(unk && next_unk);
        next_unk = unk;
    }
    size_t *ends = mem_calloc(n_tok ? n_tok : 1, sizeof *ends);
    int rc = ends ? ERR_OK : ERR_NOMEM;
    size_t k = n_tok;
    next_unk = false;
    for (size_t at = n; rc == ERR_OK && at > 0; at = b[at].from) {
        bool unk = b[at].id == TOK_ID_NONE;
        if (!(unk && next_unk)) ends[--k] = at;
        next_unk = unk;
    }
    size_t start = 0;
    for (size_t i = 0; rc == ERR_OK && i < n_tok; i++) {
        tok_id id = b[ends[i]].id;
        rc = id != TOK_ID_NONE ? tok_ids_push(out, id)
                               : push_unknown(t, s + start, ends[i] - start, out);
        start = ends[i];
    }
    mem_free(ends);
    mem_free(b);
    return rc;
}

/* Viterbi over s[0..n), word by word when the vocabulary allows it (see is_chunkable); the
 * result is the same, and probing for candidates stops at the end of each word instead of at
 * the longest token's length. */
static int viterbi_text(const struct tokenizer *t, const char *s, size_t n, struct tok_ids *out)
{
    if (!t->ugm_chunkable) return viterbi(t, s, n, out);
    size_t start = 0;
    int rc = ERR_OK;
    for (size_t i = 1; i <= n && rc == ERR_OK; i++) {
        if (i < n && !(n - i >= SP_LEN && memcmp(s + i, SP, SP_LEN) == 0)) continue;
        rc = viterbi(t, s + start, i - start, out);
        start = i;
    }
    return rc;
}

/* ---- Metaspace (tokenizer.json) ---- */

/* Unicode White_Space at s, returning its byte length, or 0. */
static size_t space_len_at(const char *s, size_t len)
{
    uint32_t cp;
    size_t n = tok_utf8_decode((const unsigned char *)s, len, &cp);
    if (n == 0) return 0;
    bool is_ws = (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 ||
                 cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
                 cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return is_ws ? n : 0;
}

/* Metaspace over one pre-token: spaces become U+2581, one goes in front per the prepend
 * scheme (unless the text starts with one), then each U+2581 starts a word (meta_split). */
static int metaspace(const struct tokenizer *t, const char *s, size_t len, bool is_first,
                     struct tok_ids *out)
{
    if (len == 0) return ERR_OK; // nothing to prepend to, as Hugging Face's prepend does
    struct buf w;
    buf_init(&w);
    bool add =
        t->prepend == VOCAB_PREPEND_ALWAYS || (t->prepend == VOCAB_PREPEND_FIRST && is_first);
    int rc = ERR_OK;
    bool has_sp = (len > 0 && s[0] == ' ') || (len >= SP_LEN && memcmp(s, SP, SP_LEN) == 0);
    if (add && !has_sp) rc = buf_append(&w, SP, SP_LEN);
    for (size_t i = 0; i < len && rc == ERR_OK; i++)
        rc = s[i] == ' ' ? buf_append(&w, SP, SP_LEN) : buf_append_byte(&w, s[i]);
    if (rc != ERR_OK) {
        buf_deinit(&w);
        return ERR_NOMEM;
    }
    size_t start = 0;
    for (size_t i = 0; i <= w.len && rc == ERR_OK; i++) {
        bool at_sp = i < w.len && w.len - i >= SP_LEN && memcmp(w.data + i, SP, SP_LEN) == 0;
        if (i == w.len || (t->meta_split && at_sp && i > start)) {
            rc = viterbi_text(t, w.data + start, i - start, out);
            start = i;
        }
    }
    buf_deinit(&w);
    return rc;
}

static int encode_metaspace(const struct tokenizer *t, const char *s, size_t len, bool is_first,
                            struct tok_ids *out)
{
    if (!t->ws_split) return metaspace(t, s, len, is_first, out);
    int rc = ERR_OK;
    size_t i = 0;
    bool is_first_word = is_first;
    while (i < len && rc == ERR_OK) {
        size_t sp;
        while (i < len && (sp = space_len_at(s + i, len - i)) > 0)
            i += sp;
        size_t start = i;
        while (i < len && space_len_at(s + i, len - i) == 0)
            i += tok_utf8_len_at(s + i, len - i);
        if (i > start) rc = metaspace(t, s + start, i - start, is_first_word, out);
        is_first_word = false;
    }
    return rc;
}

/* ---- entry ---- */

int tok_ugm_encode(const struct tokenizer *t, const char *s, size_t len, bool is_first,
                   struct tok_ids *out)
{
    if (t->is_metaspace) return encode_metaspace(t, s, len, is_first, out);
    struct buf norm;
    buf_init(&norm);
    int rc = normalize_gguf(t, s, len, &norm);
    if (rc == ERR_OK) rc = viterbi_text(t, norm.data, norm.len, out);
    buf_deinit(&norm);
    return rc;
}
