/* Jinja lexer: splits a template into text and tag tokens, applying whitespace control the way
 * Jinja2 3.1's lexer does with trim_blocks and lstrip_blocks ('-' strips, '+' keeps). The
 * source must already have its newlines normalized (see jinja_eval.c). */
#include "text/jinja/jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lexer {
    const char *src;
    size_t len;
    size_t pos;
    struct arena *arena;
    struct tok *v;
    size_t n, cap;
    size_t line_off; // offset where `line` was last computed
    int line;
    size_t line_start;
    struct errmsg *err;
};

static void pos_to_line_col(struct lexer *lx, size_t off, int *line, int *col)
{
    if (off < lx->line_off) { // never happens for in-order tokens; recompute from scratch
        lx->line_off = 0;
        lx->line = 1;
        lx->line_start = 0;
    }
    for (size_t i = lx->line_off; i < off && i < lx->len; i++) {
        if (lx->src[i] == '\n') {
            lx->line++;
            lx->line_start = i + 1;
        }
    }
    lx->line_off = off;
    *line = lx->line;
    *col = (int)(off - lx->line_start) + 1;
}

static int lex_error(struct lexer *lx, size_t off, const char *what)
{
    int line, col;
    pos_to_line_col(lx, off, &line, &col);
    return errmsg_set(lx->err, ERR_FORMAT, "line %d col %d: %s", line, col, what);
}

static struct tok *push(struct lexer *lx, enum tok_kind kind, size_t off, size_t n)
{
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        struct tok *v = arena_alloc(lx->arena, cap * sizeof *v);
        if (!v) return NULL;
        if (lx->n) memcpy(v, lx->v, lx->n * sizeof *v);
        lx->v = v;
        lx->cap = cap;
    }
    struct tok *t = &lx->v[lx->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->p = lx->src + off;
    t->n = n;
    pos_to_line_col(lx, off, &t->line, &t->col);
    return t;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Python's unicode-escape decoding of a string literal body; unknown escapes stay as written. */
static bool unescape(struct lexer *lx, const char *s, size_t n, struct tok *t)
{
    char *o = arena_alloc(lx->arena, n + 1);
    if (!o) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            o[k++] = s[i];
            continue;
        }
        char c = s[++i];
        int nhex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (nhex && i + (size_t)nhex < n) {
            uint32_t cp = 0;
            bool ok = true;
            for (int j = 1; j <= nhex; j++) {
                int h = hexval(s[i + (size_t)j]);
                ok = ok && h >= 0;
                cp = cp * 16 + (uint32_t)(h < 0 ? 0 : h);
            }
            if (ok && cp <= 0x10FFFF) {
                k += put_utf8(o + k, cp); // at most 4 bytes from >= 4 source bytes
                i += (size_t)nhex;
                continue;
            }
        }
        const char *from = "nrtabfv\\'\"0";
        const char *to = "\n\r\t\a\b\f\v\\'\"";
        const char *hit = c ? strchr(from, c) : NULL;
        if (c == '\n') {
            continue; // backslash-newline is a line continuation
        } else if (hit && c != '0') {
            o[k++] = to[hit - from];
        } else if (c >= '0' && c <= '7') {
            uint32_t cp = (uint32_t)(c - '0');
            for (int j = 0; j < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; j++)
                cp = cp * 8 + (uint32_t)(s[++i] - '0');
            k += put_utf8(o + k, cp);
        } else {
            o[k++] = '\\';
            o[k++] = c;
        }
    }
    t->p = o;
    t->n = k;
    return true;
}

static int lex_string(struct lexer *lx)
{
    size_t start = lx->pos;
    char q = lx->src[lx->pos++];
    while (lx->pos < lx->len && lx->src[lx->pos] != q) {
        if (lx->src[lx->pos] == '\\') lx->pos++;
        lx->pos++;
    }
    if (lx->pos >= lx->len) return lex_error(lx, start, "unterminated string");
    lx->pos++;
    struct tok *t = push(lx, TOK_STRING, start, lx->pos - start);
    if (!t || !unescape(lx, lx->src + start + 1, lx->pos - start - 2, t)) return ERR_NOMEM;
    return ERR_OK;
}

static size_t digits(const char *s, size_t i, size_t len)
{
    while (i < len && (is_digit(s[i]) || (s[i] == '_' && i + 1 < len && is_digit(s[i + 1]))))
        i++;
    return i;
}

static int lex_number(struct lexer *lx)
{
    const char *s = lx->src;
    size_t start = lx->pos, i = digits(s, lx->pos, lx->len);
    bool is_float = false;
    if (i + 1 < lx->len && s[i] == '.' && is_digit(s[i + 1])) {
        i = digits(s, i + 1, lx->len);
        is_float = true;
    }
    if (i < lx->len && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < lx->len && (s[j] == '+' || s[j] == '-')) j++;
        if (j < lx->len && is_digit(s[j])) {
            i = digits(s, j, lx->len);
            is_float = true;
        }
    }
    char tmp[64];
    size_t k = 0;
    for (size_t j = start; j < i && k + 1 < sizeof tmp; j++)
        if (s[j] != '_') tmp[k++] = s[j];
    tmp[k] = 0;
    struct tok *t = push(lx, is_float ? TOK_FLOAT : TOK_INT, start, i - start);
    if (!t) return ERR_NOMEM;
    if (is_float) {
        t->fval = strtod(tmp, NULL);
    } else {
        unsigned long long u = strtoull(tmp, NULL, 10);
        if (u > INT64_MAX) return lex_error(lx, start, "integer literal too large");
        t->ival = (int64_t)u;
    }
    lx->pos = i;
    return ERR_OK;
}

static int lex_op(struct lexer *lx)
{
    static const struct {
        const char *s;
        int op;
    } two[] = {{"==", OP_EQ}, {"!=", OP_NE},       {"<=", OP_LE},
               {">=", OP_GE}, {"//", OP_FLOORDIV}, {"**", OP_POW}};
    const char *s = lx->src + lx->pos;
    size_t left = lx->len - lx->pos;
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++) {
        if (left >= 2 && s[0] == two[i].s[0] && s[1] == two[i].s[1]) {
            struct tok *t = push(lx, TOK_OP, lx->pos, 2);
            if (!t) return ERR_NOMEM;
            t->op = two[i].op;
            lx->pos += 2;
            return ERR_OK;
        }
    }
    if (!strchr("+-/*%~[](){}<>=.:|,;", s[0]))
        return lex_error(lx, lx->pos, "unexpected character");
    struct tok *t = push(lx, TOK_OP, lx->pos, 1);
    if (!t) return ERR_NOMEM;
    t->op = (unsigned char)s[0];
    lx->pos++;
    return ERR_OK;
}

/* Lexes the inside of {{ }} or {% %} up to and including the end marker. Sets *line_starting
 * when the consumed end ends in a newline (Jinja2 uses that for lstrip_blocks). */
static int lex_tag(struct lexer *lx, bool is_block, bool *line_starting)
{
    char e0 = is_block ? '%' : '}';
    int depth = 0;
    for (;;) {
        while (lx->pos < lx->len && is_space(lx->src[lx->pos]))
            lx->pos++;
        if (lx->pos >= lx->len)
            return lex_error(lx, lx->pos, is_block ? "missing %}" : "missing }}");
        const char *s = lx->src + lx->pos;
        size_t left = lx->len - lx->pos;
        bool minus = left >= 3 && (s[0] == '-' || s[0] == '+') && s[1] == e0 && s[2] == '}';
        bool plain = left >= 2 && s[0] == e0 && s[1] == '}' && (is_block || depth == 0);
        if (minus || plain) {
            if (!push(lx, is_block ? TOK_BLOCK_END : TOK_VAR_END, lx->pos, minus ? 3 : 2))
                return ERR_NOMEM;
            lx->pos += minus ? 3 : 2;
            *line_starting = false;
            if (minus && s[0] == '-') {
                while (lx->pos < lx->len && is_space(lx->src[lx->pos]))
                    lx->pos++;
                *line_starting = lx->src[lx->pos - 1] == '\n';
            } else if (plain && is_block && lx->pos < lx->len && lx->src[lx->pos] == '\n') {
                lx->pos++; // trim_blocks
                *line_starting = true;
            }
            return ERR_OK;
        }
        int rc;
        if (s[0] == '\'' || s[0] == '"') {
            rc = lex_string(lx);
        } else if (is_digit(s[0])) {
            rc = lex_number(lx);
        } else if (is_name_start(s[0])) {
            size_t i = lx->pos;
            while (i < lx->len && (is_name_start(lx->src[i]) || is_digit(lx->src[i])))
                i++;
            rc = push(lx, TOK_NAME, lx->pos, i - lx->pos) ? ERR_OK : ERR_NOMEM;
            lx->pos = i;
        } else {
            if (s[0] == '{' || s[0] == '[' || s[0] == '(')
                depth++;
            else if ((s[0] == '}' || s[0] == ']' || s[0] == ')') && depth > 0)
                depth--;
            rc = lex_op(lx);
        }
        if (rc != ERR_OK) return rc;
    }
}

static int lex_comment(struct lexer *lx, bool *line_starting)
{
    size_t start = lx->pos;
    const char *end = NULL;
    for (size_t i = lx->pos; i + 1 < lx->len; i++) {
        if (lx->src[i] == '#' && lx->src[i + 1] == '}') {
            end = lx->src + i;
            break;
        }
    }
    if (!end) return lex_error(lx, start, "missing end of comment tag");
    size_t e = (size_t)(end - lx->src);
    char sign = e > start ? lx->src[e - 1] : 0;
    lx->pos = e + 2;
    *line_starting = false;
    if (sign == '-') {
        while (lx->pos < lx->len && is_space(lx->src[lx->pos]))
            lx->pos++;
        *line_starting = lx->src[lx->pos - 1] == '\n';
    } else if (sign != '+' && lx->pos < lx->len && lx->src[lx->pos] == '\n') {
        lx->pos++;
        *line_starting = true;
    }
    return ERR_OK;
}

/* Applies '-' and lstrip_blocks to the text before a tag; returns the kept length. */
static size_t strip_before(const char *text, size_t n, char kind, char sign, bool line_starting)
{
    if (sign == '-') {
        while (n > 0 && is_space(text[n - 1]))
            n--;
        return n;
    }
    if (kind == '{' || sign == '+') return n;
    size_t l_pos = n;
    while (l_pos > 0 && text[l_pos - 1] != '\n')
        l_pos--;
    if (l_pos == 0 && !line_starting) return n;
    for (size_t i = l_pos; i < n; i++)
        if (!is_space(text[i])) return n;
    return l_pos;
}

/* {% raw %}: if the tag at off (just after "{%" and its sign) opens a raw block, sets *end to
 * just after its "%}" (and after whitespace for "-%}"). */
static bool raw_begin(const char *s, size_t off, size_t len, size_t *end)
{
    while (off < len && is_space(s[off]))
        off++;
    if (len - off < 3 || memcmp(s + off, "raw", 3) != 0) return false;
    off += 3;
    while (off < len && is_space(s[off]))
        off++;
    bool minus = off < len && s[off] == '-';
    off += minus;
    if (len - off < 2 || s[off] != '%' || s[off + 1] != '}') return false;
    off += 2;
    while (minus && off < len && is_space(s[off]))
        off++;
    *end = off;
    return true;
}

/* Finds the endraw tag from off: *tag_pos = its first brace, *sign_in and *sign_out its signs, *after
 * = just past "%}". */
static bool raw_end(const char *s, size_t off, size_t len, size_t *tag_pos, char *sign_in,
                    char *sign_out, size_t *after)
{
    for (size_t i = off; i + 1 < len; i++) {
        if (s[i] != '{' || s[i + 1] != '%') continue;
        size_t j = i + 2;
        char in = j < len && (s[j] == '-' || s[j] == '+') ? s[j] : 0;
        j += in != 0;
        while (j < len && is_space(s[j]))
            j++;
        if (len - j < 6 || memcmp(s + j, "endraw", 6) != 0) continue;
        j += 6;
        while (j < len && is_space(s[j]))
            j++;
        char out = j < len && (s[j] == '-' || s[j] == '+') ? s[j] : 0;
        j += out != 0;
        if (len - j < 2 || s[j] != '%' || s[j + 1] != '}') continue;
        *tag_pos = i;
        *sign_in = in;
        *sign_out = out;
        *after = j + 2;
        return true;
    }
    return false;
}

static int lex_raw(struct lexer *lx, size_t body, bool *line_starting)
{
    size_t tag, after;
    char in, out;
    if (!raw_end(lx->src, body, lx->len, &tag, &in, &out, &after))
        return lex_error(lx, body, "missing endraw");
    bool starting = body > 0 && lx->src[body - 1] == '\n';
    size_t n = strip_before(lx->src + body, tag - body, '%', in, starting);
    if (n > 0 && !push(lx, TOK_TEXT, body, n)) return ERR_NOMEM;
    lx->pos = after;
    *line_starting = false;
    if (out == '-') {
        while (lx->pos < lx->len && is_space(lx->src[lx->pos]))
            lx->pos++;
        *line_starting = lx->src[lx->pos - 1] == '\n';
    } else if (out != '+' && lx->pos < lx->len && lx->src[lx->pos] == '\n') {
        lx->pos++;
        *line_starting = true;
    }
    return ERR_OK;
}

int jinja_lex(const char *src, size_t len, struct arena *a, struct tok_list *out,
              struct errmsg *err)
{
    struct lexer lx = {.src = src, .len = len, .arena = a, .line = 1, .err = err};
    bool line_starting = true;
    while (lx.pos < len) {
        size_t tag = lx.pos;
        while (tag + 1 < len && !(src[tag] == '{' && (src[tag + 1] == '{' || src[tag + 1] == '%' ||
                                                      src[tag + 1] == '#')))
            tag++;
        if (tag + 1 >= len) tag = len;
        char kind = tag < len ? src[tag + 1] : 0;
        char sign =
            tag + 2 < len && (src[tag + 2] == '-' || src[tag + 2] == '+') ? src[tag + 2] : 0;
        size_t n = tag - lx.pos;
        if (tag < len) n = strip_before(src + lx.pos, n, kind, sign, line_starting);
        if (n > 0 && !push(&lx, TOK_TEXT, lx.pos, n)) return ERR_NOMEM;
        if (tag >= len) break;
        lx.pos = tag + 2 + (sign ? 1 : 0);
        int rc;
        size_t raw_body;
        if (kind == '%' && raw_begin(src, lx.pos, len, &raw_body)) {
            rc = lex_raw(&lx, raw_body, &line_starting);
        } else if (kind == '#') {
            rc = lex_comment(&lx, &line_starting);
        } else {
            bool is_block = kind == '%';
            rc = push(&lx, is_block ? TOK_BLOCK_BEGIN : TOK_VAR_BEGIN, tag, 2) ? ERR_OK : ERR_NOMEM;
            if (rc == ERR_OK) rc = lex_tag(&lx, is_block, &line_starting);
        }
        if (rc != ERR_OK) return rc;
    }
    if (!push(&lx, TOK_EOF, len, 0)) return ERR_NOMEM;
    out->v = lx.v;
    out->n = lx.n;
    return ERR_OK;
}
