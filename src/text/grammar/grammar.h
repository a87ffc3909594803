/* Grammar matcher: the state of a partial output against a compiled GBNF grammar (a set of
 * pushdown stacks, like llama.cpp's), advanced byte by byte with partial UTF-8 carried across
 * calls, plus token masking over a whole vocabulary through a prefix trie of token bytes.
 * Not a sampler: the caller decides when to mask (see grammar_mask) and applies the result. */
#ifndef TEXT_GRAMMAR_H
#define TEXT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/grammar/gbnf.h"

struct grammar_state;
struct grammar_vocab;

/* Creates the state at the start of g's root rule. g is borrowed and must outlive the state
 * (and its clones). Caller frees with grammar_state_free(). One thread at a time per state.
 * Errors: ERR_NOMEM; ERR_LIMIT when the start alone expands past the matcher's limits. */
int grammar_state_new(const struct gbnf *g, struct grammar_state **out);

/* Frees the state. grammar_state_free(NULL) is a no-op. */
void grammar_state_free(struct grammar_state *st);

/* Copies the state (its position, not its caches). Caller frees the copy with
 * grammar_state_free(). Errors: ERR_NOMEM. */
int grammar_state_clone(const struct grammar_state *st, struct grammar_state **out);

/* Advances over bytes[0..len); a sequence may end (and the next call start) in the middle of a
 * UTF-8 code point. Returns ERR_OK, or ERR_INVALID when the grammar rejects some byte (also
 * for malformed UTF-8), in which case the state is unchanged. ERR_NOMEM, and ERR_LIMIT (the
 * grammar needs more than the matcher's limits: over 4096 stacks at one position, or a call's
 * work budget of about 8M stack visits), also leave the state unchanged; a request should then
 * fail with a "grammar too complex" error. */
int grammar_state_accept_bytes(struct grammar_state *st, const void *bytes, size_t len);

/* True when the bytes accepted so far form a complete match of root (so an end-of-generation
 * token is allowed). False in the middle of a code point. Cannot fail. */
bool grammar_state_can_end(const struct grammar_state *st);

/* True when no further byte can be accepted (the match is complete and root allows nothing
 * more). Cannot fail. */
bool grammar_state_is_done(const struct grammar_state *st);

/* The vocabulary as plain arrays, borrowed for the duration of grammar_vocab_new. piece[i]
 * holds the raw bytes token i decodes to (byte-level BPE already decoded); a NULL or empty
 * piece marks a token the grammar never allows (control tokens). eog[] lists the
 * end-of-generation ids, allowed exactly when the grammar can end. */
struct grammar_vocab_params {
    const char *const *piece; // n_tokens
    const size_t *piece_len;  // n_tokens, bytes
    size_t n_tokens;
    const int32_t *eog; // n_eog token ids
    size_t n_eog;
};

#define GRAMMAR_N_TOKENS_MAX  (1u << 22)
#define GRAMMAR_PIECE_LEN_MAX 1024 // bytes; longer pieces are never allowed

/* Builds the token trie once per model. Caller frees with grammar_vocab_free(); immutable
 * afterwards, so any number of threads may mask with it at once (each with its own state).
 * Errors: ERR_INVALID (an eog id out of range), ERR_LIMIT (more than GRAMMAR_N_TOKENS_MAX
 * tokens), ERR_NOMEM. */
int grammar_vocab_new(const struct grammar_vocab_params *params, struct grammar_vocab **out);
void grammar_vocab_free(struct grammar_vocab *gv);

/* Number of tokens, and the number of 32-bit words a mask for it needs. Cannot fail. */
size_t grammar_vocab_n_tokens(const struct grammar_vocab *gv);
size_t grammar_vocab_mask_words(const struct grammar_vocab *gv);

/* Fills allowed[0..mask_words) with one bit per token (bit i%32 of word i/32): set when the
 * grammar accepts the token's bytes from the current state, or for an eog token when it can
 * end. The state is not advanced. Cost: one walk of the trie that skips every subtree the
 * grammar rejects at its first byte, with transitions cached in the state; about 1-2.5 ms on a
 * 152k-token vocabulary inside a JSON string, tens of microseconds where few tokens fit.
 * Errors: ERR_NOMEM, ERR_LIMIT (as grammar_state_accept_bytes); allowed is then unspecified.
 * Sampling pattern: sample from the unmasked logits, check the winner with
 * grammar_state_allows_token (about 1 us), and mask + resample only when it is rejected. */
int grammar_mask(struct grammar_state *st, const struct grammar_vocab *gv, uint32_t *allowed);

/* Sets logits[i] = -INFINITY for every token whose bit in allowed is clear. Cannot fail. */
void grammar_mask_apply(const uint32_t *allowed, size_t n_tokens, float *logits);

/* *out = whether token id is allowed now (as grammar_mask would say), without advancing.
 * Errors: ERR_INVALID (id out of range), ERR_NOMEM, ERR_LIMIT. */
int grammar_state_allows_token(struct grammar_state *st, const struct grammar_vocab *gv, int32_t id,
                               bool *out);

/* Advances over token id's bytes. An eog token is accepted (the state is unchanged) only when
 * the grammar can end. Errors as grammar_state_accept_bytes, plus ERR_INVALID for an id out of
 * range or a token the grammar never allows. */
int grammar_state_accept_token(struct grammar_state *st, const struct grammar_vocab *gv,
                               int32_t id);

#endif
