/* Byte-level helpers shared by the streaming text filters (stop strings, tool calls,
 * reasoning): how much of a text's tail might be the start of a marker, where a UTF-8 code
 * point boundary lies, and plain substring search. No allocation, no state. */
#ifndef TEXT_HOLDBACK_H
#define TEXT_HOLDBACK_H

#include <stddef.h>

/* Length of the longest proper prefix of marker (mlen bytes) that is a suffix of s (len
 * bytes): the bytes to hold back because the marker may complete in the next chunk. 0 when
 * none, and always < mlen. Cannot fail. */
size_t holdback_partial_len(const char *s, size_t len, const char *marker, size_t mlen);

/* Moves a cut position back so s[0..cut) does not end inside a UTF-8 sequence: for cut < len,
 * back over continuation bytes at s[cut]; for cut == len, before an incomplete final sequence.
 * Invalid UTF-8 is left alone (at most 3 bytes are ever moved over). Returns the new cut, <=
 * cut. Cannot fail. */
size_t holdback_utf8_cut(const char *s, size_t len, size_t cut);

/* Index of the first occurrence of needle (nlen > 0 bytes) in s[from..len), or -1. Cannot
 * fail. */
long holdback_find(const char *s, size_t len, size_t from, const char *needle, size_t nlen);

#endif
