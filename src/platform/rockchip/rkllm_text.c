/* Joining RKLLM callback text. The vendor's own consumers (rknn-llm examples/rkllm_api_demo
 * llm_demo.cpp and rkllm_server_demo flask_server.py, 1.2.0 through 1.3.0) print NORMAL text as
 * it comes and ignore WAITING, which is right only for a runtime whose NORMAL text re-sends the
 * held bytes; a runtime that sends only the rest needs them kept. Both are handled here. */
#include "platform/rockchip/rkllm_text.h"

#include "util/err.h"

#include <string.h>

static bool is_continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

size_t rkllm_text_incomplete_tail(const unsigned char *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = s[n - back];
        if (is_continuation(c)) continue; // look further back for the lead byte
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* How many leading bytes of held[0..n) stay in front of text[0..len), which starts at a
 * character: the bytes before the longest held suffix that text repeats, else the held
 * bytes without an incomplete character (one the runtime gave up on). A held text with no
 * incomplete character is only dropped when text repeats all of it, so whole characters never
 * vanish on a chance match. */
static size_t kept_before(const unsigned char *held, size_t n, const unsigned char *text,
                          size_t len)
{
    size_t tail = rkllm_text_incomplete_tail(held, n);
    size_t last_start = tail ? n - tail : 0;
    for (size_t k = 0; k <= last_start && k < n; k++) {
        if (is_continuation(held[k])) continue;
        if (n - k <= len && memcmp(held + k, text, n - k) == 0) return k;
    }
    return n - tail;
}

int rkllm_text_take(struct buf *held, const char *text, size_t len, bool is_waiting,
                    struct buf *out)
{
    const unsigned char *t = (const unsigned char *)text;
    size_t keep = held->len;
    if (len > 0 && !is_continuation(t[0]))
        keep = kept_before((const unsigned char *)held->data, held->len, t, len);
    struct buf *dst = is_waiting ? held : out;
    if (!is_waiting && keep > 0 && buf_append(out, held->data, keep) != ERR_OK) return ERR_NOMEM;
    if (is_waiting) held->len = keep;
    if (len > 0 && buf_append(dst, text, len) != ERR_OK) return ERR_NOMEM;
    if (!is_waiting) held->len = 0;
    return ERR_OK;
}
