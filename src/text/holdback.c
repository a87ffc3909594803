/* Marker-prefix holdback, UTF-8 cut points and substring search for the streaming filters. */
#include "text/holdback.h"

#include <stdbool.h>
#include <string.h>

size_t holdback_partial_len(const char *s, size_t len, const char *marker, size_t mlen)
{
    if (mlen == 0) return 0;
    size_t k = len < mlen - 1 ? len : mlen - 1;
    for (; k > 0; k--) {
        if (s[len - k] == marker[0] && memcmp(s + len - k, marker, k) == 0) return k;
    }
    return 0;
}

static bool is_cont(char c)
{
    return ((unsigned char)c & 0xC0) == 0x80;
}

/* Bytes in the sequence a lead byte starts; 0 for a continuation or invalid byte. */
static size_t seq_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 0;
}

size_t holdback_utf8_cut(const char *s, size_t len, size_t cut)
{
    if (cut > len) cut = len;
    if (cut < len) {
        size_t c = cut;
        while (c > 0 && cut - c < 3 && is_cont(s[c]))
            c--;
        return is_cont(s[c]) ? cut : c;
    }
    size_t i = len;
    while (i > 0 && len - i < 3 && is_cont(s[i - 1]))
        i--;
    if (i == 0) return len;
    size_t need = seq_len((unsigned char)s[i - 1]);
    return need > 1 && len - (i - 1) < need ? i - 1 : len;
}

long holdback_find(const char *s, size_t len, size_t from, const char *needle, size_t nlen)
{
    if (nlen == 0 || len < nlen) return -1;
    for (size_t i = from; i + nlen <= len; i++) {
        if (s[i] == needle[0] && memcmp(s + i, needle, nlen) == 0) return (long)i;
    }
    return -1;
}
