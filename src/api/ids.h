/* Response and tool-call ids ("chatcmpl-…", "call_…", "msg_…", "resp_…"): a prefix and 24
 * random hex digits from the kernel's generator (unique, not guessable). */
#ifndef API_IDS_H
#define API_IDS_H

#include <stddef.h>

/* Writes prefix + 24 hex digits into out (truncated to cap). Cannot fail. Thread-safe. */
void api_make_id(const char *prefix, char *out, size_t cap);

#endif
