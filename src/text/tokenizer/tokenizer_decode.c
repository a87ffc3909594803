/* Ids back to bytes: llama.cpp's detokenize (leading-space rule, clean-up of spaces) and the
 * streaming detokenizer that never emits half a UTF-8 character. */
#include "text/tokenizer/tokenizer.h"

#include "text/tokenizer/tokenizer_internal.h"
#include "util/mem.h"

#include <string.h>

static bool in_vocab(const struct tokenizer *t, tok_id id)
{
    return id >= 0 && id < t->n_tokens;
}

/* Hugging Face's clean_up_tokenization_spaces over s[0..len) in place, as the three passes of
 * llama.cpp's detokenize: drop the space before ?!., ; collapse " ' " to "'"; drop the space
 * before 's 'm 're 've. Returns the new length. */
static size_t clean_spaces(char *s, size_t len)
{
    size_t n = len ? 1 : 0;
    for (size_t i = 1; i < len; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) n--;
        s[n++] = x;
    }
    len = n;
    n = len ? 1 : 0;
    for (size_t i = 1; i < len; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < len && s[i - 1] == ' ' && s[i + 1] == ' ') {
            n--;
            s[++i] = '\0';
        }
        s[n++] = x;
    }
    len = n;
    n = len ? 1 : 0;
    for (size_t i = 1; i < len; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < len) {
            char x1 = s[i + 1], x2 = i + 2 < len ? s[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) n--;
        }
        s[n++] = x;
    }
    return n;
}

int tok_decode(const struct tokenizer *t, const tok_id *ids, size_t n_ids, bool render_special,
               struct buf *out)
{
    for (size_t i = 0; i < n_ids; i++) {
        if (!in_vocab(t, ids[i])) return ERR_INVALID;
    }
    size_t start = out->len;
    bool strip_space = t->add_space_prefix || t->kind == VOCAB_KIND_BERT;
    size_t i = 0;
    if (!render_special && t->add_bos && n_ids > 0 && ids[0] == t->bos)
        i = 1; // a leading bos is dropped; the first text piece still loses its space
    for (; i < n_ids; i++) {
        if (!render_special && tok_is_control(t, ids[i])) continue;
        struct str p = tok_piece(t, ids[i]);
        if (strip_space && p.len > 0 && p.ptr[0] == ' ') {
            p.ptr++;
            p.len--;
        }
        strip_space = false;
        if (buf_append(out, p.ptr, p.len) != ERR_OK) {
            out->len = start;
            if (out->data) out->data[start] = '\0';
            return ERR_NOMEM;
        }
    }
    if (t->clean_spaces && out->len > start) {
        out->len = start + clean_spaces(out->data + start, out->len - start);
        out->data[out->len] = '\0';
    }
    return ERR_OK;
}

void tok_stream_init(struct tok_stream *s, const struct tokenizer *t, bool render_special)
{
    s->tok = t;
    s->render_special = render_special;
    s->n_held = 0;
}

static size_t utf8_need(unsigned char c)
{
    if (c >= 0xc2 && c <= 0xdf) return 2;
    if (c >= 0xe0 && c <= 0xef) return 3;
    if (c >= 0xf0 && c <= 0xf4) return 4;
    return 0;
}

/* Length of the prefix of s[0..n) that does not end inside a character still waiting for
 * continuation bytes. */
static size_t complete_prefix(const unsigned char *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xc0) == 0x80) continue;
        size_t need = utf8_need(c);
        return need > back ? n - back : n;
    }
    return n;
}

int tok_stream_push(struct tok_stream *s, tok_id id, struct buf *out)
{
    if (!in_vocab(s->tok, id)) return ERR_INVALID;
    if (!s->render_special && tok_is_control(s->tok, id)) return ERR_OK;
    struct str p = tok_piece(s->tok, id);
    unsigned char small[64];
    unsigned char *joined = small;
    size_t n = s->n_held + p.len;
    if (n > sizeof small && !(joined = mem_alloc(n))) return ERR_NOMEM;
    memcpy(joined, s->held, s->n_held);
    memcpy(joined + s->n_held, p.ptr, p.len);
    size_t keep = complete_prefix(joined, n);
    size_t start = out->len;
    int rc = tok_utf8_append_lossy(out, joined, keep);
    if (rc == ERR_OK) {
        s->n_held = n - keep;
        memcpy(s->held, joined + keep, s->n_held);
    } else {
        out->len = start;
    }
    if (joined != small) mem_free(joined);
    return rc;
}

int tok_stream_flush(struct tok_stream *s, struct buf *out)
{
    if (s->n_held == 0) return ERR_OK;
    if (buf_append(out, "\xef\xbf\xbd", 3) != ERR_OK) return ERR_NOMEM;
    s->n_held = 0;
    return ERR_OK;
}
