/* WordPiece ("bert" vocabs): BERT's BasicTokenizer (lower-casing, NFD accent stripping via
 * utf8proc, whitespace/control clean-up, punctuation and CJK characters as words of their own,
 * as llama.cpp's llm_tokenizer_wpm::preprocess) followed by greedy longest-match-first over
 * each word. Two vocab forms: llama.cpp's converted form where word-initial tokens carry a
 * U+2581 prefix and continuations are bare, and the classic form where continuations carry
 * "##". A word with an unmatchable part becomes one unknown token. */
#include "text/tokenizer/tokenizer_internal.h"

#include "util/buf.h"
#include "util/mem.h"

#include <string.h>
#include <utf8proc.h>

static bool is_whitespace(uint32_t cp)
{
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || cp == 0x85 || cp == 0xa0 || cp == 0x1680)
        return true;
    return (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

static bool is_chinese(uint32_t cp)
{
    // Ranges as llama.cpp's is_chinese_char (0x2B920 lower bound as in HF's Rust code).
    return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) ||
           (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b73f) ||
           (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b920 && cp <= 0x2ceaf) ||
           (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

static bool is_category_c(utf8proc_category_t c)
{
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
           c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN;
}

static bool is_category_m(utf8proc_category_t c)
{
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

static bool is_category_p(utf8proc_category_t c)
{
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

static bool is_category_s(utf8proc_category_t c)
{
    return c >= UTF8PROC_CATEGORY_SM && c <= UTF8PROC_CATEGORY_SO;
}

struct wpm_session {
    const struct tokenizer *tok;
    struct buf word;    // current word, normalized UTF-8
    struct buf scratch; // prefix + candidate piece
    struct tok_ids *out;
};

/* Appends the tokens of one word (greedy longest match), or the unknown token. */
static int flush_word(struct wpm_session *ws)
{
    const struct tokenizer *t = ws->tok;
    const char *w = ws->word.data;
    size_t n = ws->word.len, n_before = ws->out->n_ids;
    int rc = ERR_OK;
    if (n == 0) return ERR_OK;
    for (size_t i = 0; i < n && rc == ERR_OK;) {
        const char *prefix =
            i == 0 ? (t->wpm_hash_form ? "" : "\xe2\x96\x81") : (t->wpm_hash_form ? "##" : "");
        size_t plen = strlen(prefix),
               end = n - i < (size_t)t->max_token_len ? n : i + (size_t)t->max_token_len;
        tok_id id = TOK_ID_NONE;
        for (; end > i; end--) {
            buf_clear(&ws->scratch);
            if (buf_append(&ws->scratch, prefix, plen) != ERR_OK ||
                buf_append(&ws->scratch, w + i, end - i) != ERR_OK)
                return ERR_NOMEM;
            id = tok_map_find(&t->text_map, t->arena, ws->scratch.data, ws->scratch.len);
            if (id != TOK_ID_NONE) break;
        }
        if (id == TOK_ID_NONE) {
            ws->out->n_ids = n_before; // the whole word becomes [UNK]
            break;
        }
        rc = tok_ids_push(ws->out, id);
        i = end;
    }
    if (rc == ERR_OK && ws->out->n_ids == n_before && t->unk != TOK_ID_NONE)
        rc = tok_ids_push(ws->out, t->unk);
    buf_clear(&ws->word);
    return rc;
}

static int add_char(struct wpm_session *ws, uint32_t cp)
{
    const struct tokenizer *t = ws->tok;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
    if (is_whitespace(cp)) return flush_word(ws);
    if (cp == 0 || cp == 0xfffd || is_category_c(cat)) return ERR_OK;
    if (t->strip_accents && is_category_m(cat)) return ERR_OK;
    uint32_t lc = t->lowercase ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp) : cp;
    char enc[4];
    size_t elen = tok_utf8_encode(lc, enc);
    if (is_category_p(cat) || (cp < 0x7f && is_category_s(cat)) || is_chinese(cp)) {
        int rc = flush_word(ws);
        if (rc == ERR_OK) rc = buf_append(&ws->word, enc, elen);
        return rc == ERR_OK ? flush_word(ws) : rc;
    }
    return buf_append(&ws->word, enc, elen);
}

int tok_wpm_encode(const struct tokenizer *t, const char *s, size_t len, struct tok_ids *out)
{
    struct wpm_session ws = {t, {NULL, 0, 0}, {NULL, 0, 0}, out};
    int rc = ERR_OK;
    for (size_t i = 0; i < len && rc == ERR_OK;) {
        uint32_t cp;
        size_t clen = tok_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        if (clen == 0) {
            cp = 0xfffd;
            clen = 1;
        }
        i += clen;
        if (!t->strip_accents) {
            rc = add_char(&ws, cp);
            continue;
        }
        utf8proc_int32_t dec[8];
        int boundclass = 0;
        utf8proc_ssize_t n =
            utf8proc_decompose_char((utf8proc_int32_t)cp, dec, 8, UTF8PROC_DECOMPOSE, &boundclass);
        if (n <= 0 || n > 8) {
            dec[0] = (utf8proc_int32_t)cp;
            n = 1;
        }
        for (utf8proc_ssize_t k = 0; k < n && rc == ERR_OK; k++)
            rc = add_char(&ws, (uint32_t)dec[k]);
    }
    if (rc == ERR_OK) rc = flush_word(&ws);
    buf_deinit(&ws.word);
    buf_deinit(&ws.scratch);
    return rc;
}
