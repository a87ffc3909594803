/* The text of RKLLM result callbacks, joined into whole UTF-8 whichever way a runtime splits a
 * character: WAITING says the text so far ends inside a character, and the next NORMAL either
 * carries only the rest (starting with a continuation byte) or sends again bytes already given
 * (the runtime's decoder restarting at a character boundary). Not a decoder: bytes only. */
#ifndef PLATFORM_ROCKCHIP_RKLLM_TEXT_H
#define PLATFORM_ROCKCHIP_RKLLM_TEXT_H

#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>

/* Bytes at the end of s[0..n) that start a UTF-8 character not yet complete (0..3). Cannot
 * fail. */
size_t rkllm_text_incomplete_tail(const unsigned char *s, size_t n);

/* Takes one callback's text[0..len): a WAITING one (is_waiting) joins *held, the bytes held
 * back; a NORMAL one joins them and the result is appended to out, leaving *held empty. A text
 * that starts with a continuation byte continues the held bytes; one that starts anywhere
 * else replaces the held bytes from the longest of their suffixes (at a character start) it
 * repeats, and a held incomplete character it does not repeat is dropped. ERR_OK or ERR_NOMEM
 * (held and out are then left part-way: the caller ends the run). */
int rkllm_text_take(struct buf *held, const char *text, size_t len, bool is_waiting,
                    struct buf *out);

#endif
