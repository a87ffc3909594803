/* The normalizer of a Hugging Face tokenizer.json, as a list of steps applied in order to every
 * text fragment before the tokenizer's algorithm: the SentencePiece charsmap, the four Unicode
 * normal forms (utf8proc), lower-casing, accent stripping, whitespace trimming, string or regex
 * replacement (PCRE2) and a prefix. Offsets are not tracked: the tokenizers here only need the
 * normalized text. Precompiled applies SentencePiece's rule (the longest prefix the map
 * lists, as the GGUF path and llama.cpp do); Hugging Face's normalizer tries a whole grapheme
 * first, which differs only where the map lists a multi-character grapheme and a prefix of it. */
#include "text/tokenizer/tokenizer_internal.h"

#include "util/checked.h"
#include "util/mem.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static void *pcre_malloc(size_t size, void *data)
{
    (void)data;
    return mem_alloc(size);
}

static void pcre_free(void *p, void *data)
{
    (void)data;
    mem_free(p);
}

static char *dup_str(struct str s)
{
    return mem_strndup(s.len ? s.ptr : "", s.len);
}

static int compile_step(struct tokenizer *t, struct tok_norm_step *st, int i, struct errmsg *err)
{
    if (!t->norm_gctx) t->norm_gctx = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
    if (!t->norm_gctx) return errmsg_set(err, ERR_NOMEM, "out of memory compiling the normalizer");
    pcre2_compile_context *cc = pcre2_compile_context_create(t->norm_gctx);
    if (!cc) return errmsg_set(err, ERR_NOMEM, "out of memory compiling the normalizer");
    int code;
    PCRE2_SIZE at;
    st->regex = pcre2_compile((PCRE2_SPTR)st->pattern, st->pattern_len, PCRE2_UTF | PCRE2_UCP,
                              &code, &at, cc);
    pcre2_compile_context_free(cc);
    if (st->regex) return ERR_OK;
    PCRE2_UCHAR msg[120];
    pcre2_get_error_message(code, msg, sizeof msg);
    bool is_oom = code == PCRE2_ERROR_HEAP_FAILED || code == PCRE2_ERROR_NOMEMORY;
    return errmsg_set(err, is_oom ? ERR_NOMEM : ERR_UNSUPPORTED,
                      "normalizer step %d: regex: %s at %zu", i, (char *)msg, (size_t)at);
}

int tok_norm_setup(struct tokenizer *t, const struct vocab *v, struct errmsg *err)
{
    if (v->n_norm == 0) return ERR_OK;
    t->norm = mem_calloc((size_t)v->n_norm, sizeof *t->norm);
    if (!t->norm) return errmsg_set(err, ERR_NOMEM, "out of memory copying the normalizer");
    t->n_norm = v->n_norm;
    for (int32_t i = 0; i < v->n_norm; i++) {
        const struct vocab_norm_step *src = &v->norm[i];
        struct tok_norm_step *st = &t->norm[i];
        if ((int)src->op < VOCAB_NORM_PRECOMPILED || src->op > VOCAB_NORM_PREPEND)
            return errmsg_set(err, ERR_INVALID, "normalizer step %d: unknown operation", (int)i);
        st->op = src->op;
        st->left = src->left;
        st->right = src->right;
        st->pattern = dup_str(src->pattern);
        st->content = dup_str(src->content);
        if (!st->pattern || !st->content)
            return errmsg_set(err, ERR_NOMEM, "out of memory copying the normalizer");
        st->pattern_len = src->pattern.len;
        st->content_len = src->content.len;
        if (st->op == VOCAB_NORM_PRECOMPILED && t->n_xcda == 0)
            return errmsg_set(err, ERR_INVALID, "normalizer step %d: no precompiled charsmap",
                              (int)i);
        if (st->op == VOCAB_NORM_REPLACE && src->is_regex) {
            int rc = compile_step(t, st, (int)i, err);
            if (rc != ERR_OK) return rc;
        }
    }
    return ERR_OK;
}

void tok_norm_free(struct tokenizer *t)
{
    for (int32_t i = 0; t->norm && i < t->n_norm; i++) {
        mem_free(t->norm[i].pattern);
        mem_free(t->norm[i].content);
        pcre2_code_free(t->norm[i].regex);
    }
    mem_free(t->norm);
    t->norm = NULL;
    t->n_norm = 0;
    pcre2_general_context_free(t->norm_gctx);
    t->norm_gctx = NULL;
}

/* ---- steps: each reads s[0..len) and appends the result to out ---- */

static int nf(const char *s, size_t len, utf8proc_option_t opt, struct buf *out)
{
    if (len == 0) return ERR_OK;
    if (len > (size_t)PTRDIFF_MAX / 8) return ERR_LIMIT;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst,
                                      opt | UTF8PROC_STABLE);
    if (n < 0) {
        // Only invalid UTF-8 (replaced before) or no memory can fail here.
        free(dst);
        return n == UTF8PROC_ERROR_NOMEM ? ERR_NOMEM : buf_append(out, s, len);
    }
    int rc = buf_append(out, dst, (size_t)n);
    free(dst); // utf8proc allocates with malloc
    return rc;
}

/* Per character: lower-case, or drop combining marks (Mn). */
static int map_chars(const char *s, size_t len, bool lower, struct buf *out)
{
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = tok_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        if (n == 0) { // not reached with valid input; copied as it is
            if (buf_append_byte(out, s[i++]) != ERR_OK) return ERR_NOMEM;
            continue;
        }
        i += n;
        if (!lower && utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_MN) continue;
        if (lower) cp = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
        char enc[4];
        if (buf_append(out, enc, tok_utf8_encode(cp, enc)) != ERR_OK) return ERR_NOMEM;
    }
    return ERR_OK;
}

static bool is_white(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

static int strip(const char *s, size_t len, bool left, bool right, struct buf *out)
{
    size_t start = 0, end = len;
    uint32_t cp;
    size_t n;
    while (left && start < end &&
           (n = tok_utf8_decode((const unsigned char *)s + start, end - start, &cp)) > 0 &&
           is_white(cp))
        start += n;
    while (right && end > start) {
        size_t b = end - 1;
        while (b > start && ((unsigned char)s[b] & 0xc0) == 0x80)
            b--;
        n = tok_utf8_decode((const unsigned char *)s + b, end - b, &cp);
        if (n == 0 || b + n != end || !is_white(cp)) break;
        end = b;
    }
    return buf_append(out, s + start, end - start);
}

static int replace_str(const struct tok_norm_step *st, const char *s, size_t len, struct buf *out)
{
    if (st->pattern_len == 0) return buf_append(out, s, len);
    size_t i = 0;
    while (i < len) {
        const char *hit = NULL;
        for (size_t k = i; k + st->pattern_len <= len && !hit; k++) {
            if (memcmp(s + k, st->pattern, st->pattern_len) == 0) hit = s + k;
        }
        size_t upto = hit ? (size_t)(hit - s) : len;
        if (buf_append(out, s + i, upto - i) != ERR_OK) return ERR_NOMEM;
        if (!hit) break;
        if (buf_append(out, st->content, st->content_len) != ERR_OK) return ERR_NOMEM;
        i = upto + st->pattern_len;
    }
    return ERR_OK;
}

static int replace_regex(const struct tokenizer *t, const struct tok_norm_step *st, const char *s,
                         size_t len, struct buf *out)
{
    pcre2_match_data *md = pcre2_match_data_create(1, t->norm_gctx);
    if (!md) return ERR_NOMEM;
    int rc = ERR_OK;
    size_t i = 0;
    while (i <= len && rc == ERR_OK) {
        int m = pcre2_match(st->regex, (PCRE2_SPTR)s, len, i, PCRE2_NO_UTF_CHECK, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            rc = m == PCRE2_ERROR_NOMEMORY || m == PCRE2_ERROR_HEAP_FAILED ? ERR_NOMEM : ERR_LIMIT;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms < i || me < ms || me > len) break; // \K tricks: stop rather than loop
        rc = buf_append(out, s + i, ms - i);
        if (rc == ERR_OK) rc = buf_append(out, st->content, st->content_len);
        if (me == ms) { // an empty match: copy one character and move past it
            size_t c = ms < len ? tok_utf8_len_at(s + ms, len - ms) : 1;
            if (rc == ERR_OK && ms < len) rc = buf_append(out, s + ms, c);
            me = ms + c;
        }
        i = me;
    }
    if (rc == ERR_OK && i < len) rc = buf_append(out, s + i, len - i);
    pcre2_match_data_free(md);
    return rc;
}

/* Flat dispatch over the step kinds. */
static int apply_step(const struct tokenizer *t, const struct tok_norm_step *st, const char *s,
                      size_t len, struct buf *out)
{
    switch (st->op) {
    case VOCAB_NORM_PRECOMPILED:
        return tok_charsmap_apply(t, s, len, out);
    case VOCAB_NORM_NFC:
        return nf(s, len, UTF8PROC_COMPOSE, out);
    case VOCAB_NORM_NFD:
        return nf(s, len, UTF8PROC_DECOMPOSE, out);
    case VOCAB_NORM_NFKC:
        return nf(s, len, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
    case VOCAB_NORM_NFKD:
        return nf(s, len, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
    case VOCAB_NORM_LOWERCASE:
        return map_chars(s, len, true, out);
    case VOCAB_NORM_STRIP_ACCENTS:
        return map_chars(s, len, false, out);
    case VOCAB_NORM_STRIP:
        return strip(s, len, st->left, st->right, out);
    case VOCAB_NORM_REPLACE:
        return st->regex ? replace_regex(t, st, s, len, out) : replace_str(st, s, len, out);
    case VOCAB_NORM_PREPEND:
        if (len > 0 && buf_append(out, st->content, st->content_len) != ERR_OK) return ERR_NOMEM;
        return buf_append(out, s, len);
    }
    return buf_append(out, s, len);
}

int tok_norm_apply(const struct tokenizer *t, const char *s, size_t len, struct buf *out)
{
    struct buf a, b;
    buf_init(&a);
    buf_init(&b);
    int rc = buf_append(&a, s, len);
    for (int32_t i = 0; i < t->n_norm && rc == ERR_OK; i++) {
        buf_clear(&b);
        rc = apply_step(t, &t->norm[i], a.len ? a.data : "", a.len, &b);
        struct buf tmp = a;
        a = b;
        b = tmp;
    }
    if (rc == ERR_OK) rc = buf_append(out, a.len ? a.data : "", a.len);
    buf_deinit(&a);
    buf_deinit(&b);
    return rc == ERR_OK || rc == ERR_LIMIT ? rc : ERR_NOMEM;
}
