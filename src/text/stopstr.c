/* Stop strings over a pending buffer that holds only the undecided tail plus the newest chunk,
 * so each feed scans O(chunk + longest stop) bytes per stop string. */
#include "text/stopstr.h"

#include "text/holdback.h"
#include "util/buf.h"
#include "util/mem.h"

#include <string.h>

/* Owned by the one thread driving the stream. */
struct stopstr {
    char *stops[STOPSTR_MAX_STOPS]; // owned copies of the non-empty stop strings
    size_t stop_len[STOPSTR_MAX_STOPS];
    int stop_orig[STOPSTR_MAX_STOPS]; // index in the caller's array
    int n_stops;
    struct buf pend; // undecided text; bytes [0..emitted) were handed out by the last call
    size_t emitted;  // prefix of pend to drop at the next call
    int matched;     // caller index of the matched stop string, or -1
    int err;         // sticky error
};

static bool utf8_valid(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (n == 0 || i + n > len || (n == 2 && c < 0xC2)) return false;
        for (size_t k = 1; k < n; k++) {
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
        }
        i += n;
    }
    return true;
}

int stopstr_new(const char *const *stops, int n_stops, struct stopstr **out, struct errmsg *e)
{
    if (n_stops < 0 || (n_stops > 0 && !stops))
        return errmsg_set(e, ERR_INVALID, "invalid stop list");
    if (n_stops > STOPSTR_MAX_STOPS)
        return errmsg_set(e, ERR_LIMIT, "at most %d stop strings are allowed", STOPSTR_MAX_STOPS);
    for (int i = 0; i < n_stops; i++) {
        size_t n = strlen(stops[i]);
        if (n > STOPSTR_MAX_LEN)
            return errmsg_set(e, ERR_LIMIT, "stop string %d is longer than %d bytes", i,
                              STOPSTR_MAX_LEN);
        if (!utf8_valid(stops[i], n))
            return errmsg_set(e, ERR_INVALID, "stop string %d is not valid UTF-8", i);
    }
    struct stopstr *m = mem_calloc(1, sizeof *m);
    if (!m) return errmsg_set(e, ERR_NOMEM, "out of memory");
    m->matched = -1;
    buf_init(&m->pend);
    for (int i = 0; i < n_stops; i++) {
        if (stops[i][0] == '\0') continue;
        char *copy = mem_strdup(stops[i]);
        if (!copy) {
            stopstr_free(m);
            return errmsg_set(e, ERR_NOMEM, "out of memory");
        }
        m->stops[m->n_stops] = copy;
        m->stop_len[m->n_stops] = strlen(copy);
        m->stop_orig[m->n_stops++] = i;
    }
    *out = m;
    return ERR_OK;
}

void stopstr_free(struct stopstr *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_stops; i++)
        mem_free(m->stops[i]);
    buf_deinit(&m->pend);
    mem_free(m);
}

bool stopstr_is_stopped(const struct stopstr *m)
{
    return m->matched >= 0;
}

int stopstr_matched(const struct stopstr *m)
{
    return m->matched;
}

/* Drops the bytes handed out by the previous call. */
static void drop_emitted(struct stopstr *m)
{
    if (m->emitted == 0) return;
    memmove(m->pend.data, m->pend.data + m->emitted, m->pend.len - m->emitted);
    m->pend.len -= m->emitted;
    m->pend.data[m->pend.len] = '\0';
    m->emitted = 0;
}

/* Finds the match that ends first (then starts first). Returns its internal index or -1. */
static int find_first_match(const struct stopstr *m, size_t *start)
{
    int best = -1;
    size_t best_end = 0, best_start = 0;
    for (int i = 0; i < m->n_stops; i++) {
        long at = holdback_find(m->pend.data, m->pend.len, 0, m->stops[i], m->stop_len[i]);
        if (at < 0) continue;
        size_t end = (size_t)at + m->stop_len[i];
        if (best < 0 || end < best_end || (end == best_end && (size_t)at < best_start)) {
            best = i;
            best_end = end;
            best_start = (size_t)at;
        }
    }
    *start = best_start;
    return best;
}

static struct str slice(const struct stopstr *m, size_t len)
{
    return (struct str){len ? m->pend.data : "", len};
}

int stopstr_feed(struct stopstr *m, const char *text, size_t len, struct stopstr_result *out)
{
    out->emit = (struct str){"", 0};
    out->stop_index = -1;
    if (m->err) return m->err;
    if (m->matched >= 0) return ERR_OK;
    drop_emitted(m);
    if (len > 0 && buf_append(&m->pend, text, len) != ERR_OK) return m->err = ERR_NOMEM;
    if (m->pend.len == 0) return ERR_OK;
    size_t start;
    int hit = find_first_match(m, &start);
    if (hit >= 0) {
        m->matched = m->stop_orig[hit];
        out->stop_index = m->matched;
        out->emit = slice(m, start);
        m->emitted = m->pend.len; // the rest is discarded
        return ERR_OK;
    }
    // Hold back the longest tail that could start any stop string.
    size_t hold = 0;
    for (int i = 0; i < m->n_stops; i++) {
        size_t h = holdback_partial_len(m->pend.data, m->pend.len, m->stops[i], m->stop_len[i]);
        hold = h > hold ? h : hold;
    }
    size_t cut = holdback_utf8_cut(m->pend.data, m->pend.len, m->pend.len - hold);
    out->emit = slice(m, cut);
    m->emitted = cut;
    return ERR_OK;
}

int stopstr_flush(struct stopstr *m, struct str *emit)
{
    *emit = (struct str){"", 0};
    if (m->err) return m->err;
    if (m->matched >= 0) return ERR_OK;
    drop_emitted(m);
    *emit = slice(m, m->pend.len);
    m->emitted = m->pend.len;
    return ERR_OK;
}
