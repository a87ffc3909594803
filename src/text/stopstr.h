/* Stop-string matcher for streamed text (OpenAI chat completions `stop`, llama.cpp `stop`):
 * feed decoded chunks, get back what is safe to emit. A tail that could begin a stop string is
 * held back until decided; when a stop string completes, the text before it is emitted and the
 * stop string and everything after it never are. Byte matching, UTF-8 safe (emitted text never
 * ends inside a code point). Not a token-level filter. */
#ifndef TEXT_STOPSTR_H
#define TEXT_STOPSTR_H

#include "util/err.h"
#include "util/str.h"

#include <stdbool.h>
#include <stddef.h>

/* OpenAI allows 4 stop strings and llama.cpp any number; 16 covers both in practice while
 * keeping the per-chunk scan bounded (16 x 256 bytes). */
#define STOPSTR_MAX_STOPS 16
#define STOPSTR_MAX_LEN   256 // bytes per stop string

struct stopstr;

struct stopstr_result {
    struct str emit; // text safe to send now; borrowed, valid until the next call on the matcher
    int stop_index;  // index (in the array given to stopstr_new) of the stop string that
                     // matched in this call, or -1
};

/* Creates a matcher for n_stops NUL-terminated strings (copied; stops is borrowed for the
 * call). Empty strings are ignored, as clients send [""] to mean none. Returns ERR_LIMIT when
 * n_stops > STOPSTR_MAX_STOPS or a string is longer than STOPSTR_MAX_LEN, ERR_INVALID for a
 * string that is not valid UTF-8 or n_stops < 0, ERR_NOMEM; e (may be NULL) says which. Caller
 * frees *out with stopstr_free(). One matcher per stream; not thread-safe. */
int stopstr_new(const char *const *stops, int n_stops, struct stopstr **out, struct errmsg *e);

/* Frees the matcher. stopstr_free(NULL) is a no-op. */
void stopstr_free(struct stopstr *m);

/* Feeds len bytes. When several stop strings occur, the one that ends first wins (then the one
 * that starts first), which is what a token-by-token stream sees, so the result does not depend
 * on how the text was split. After a match the matcher is stopped: later feeds emit nothing
 * and report -1. Returns ERR_NOMEM (sticky: later calls return it too). */
int stopstr_feed(struct stopstr *m, const char *text, size_t len, struct stopstr_result *out);

/* Ends the stream: emits the held-back tail (nothing if stopped). Sticky error as above. */
int stopstr_flush(struct stopstr *m, struct str *emit);

/* True once a stop string has matched. */
bool stopstr_is_stopped(const struct stopstr *m);

/* Index of the stop string that matched, or -1. */
int stopstr_matched(const struct stopstr *m);

#endif
