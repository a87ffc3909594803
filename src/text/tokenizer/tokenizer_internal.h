/* Internals shared by tokenizer.c (front: tables, special tokens, decoding) and the three
 * algorithms (tokenizer_spm.c, tokenizer_bpe.c, tokenizer_wpm.c). Never include this from
 * another module. */
#ifndef TEXT_TOKENIZER_INTERNAL_H
#define TEXT_TOKENIZER_INTERNAL_H

#include "text/tokenizer/tokenizer.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOK_MAX_REGEX 8

/* A byte range of the tokenizer's arena. */
struct tok_span {
    uint32_t off;
    uint32_t len;
};

/* Open-addressing hash map from byte strings to ids; the key of id i is spans[i]. */
struct tok_map {
    int32_t *slots;               // (mask + 1) ids, -1 = empty
    size_t mask;                  // capacity - 1, capacity a power of two
    const struct tok_span *spans; // borrowed from the tokenizer; spans[id].len == 0: no key
};

/* gpt2 merge rule (left, right) -> rank and merged token. */
struct tok_merge {
    uint64_t key;  // (uint64_t)left << 32 | right; 0 with rank < 0 = empty slot
    int32_t rank;  // index in tokenizer.ggml.merges, -1 for an empty slot
    tok_id result; // id of left+right, or TOK_ID_NONE
};

/* A node of the special-token trie (first-child / next-sibling). */
struct tok_trie_node {
    int32_t child;   // first child node or -1
    int32_t sibling; // next sibling node or -1
    tok_id id;       // token ending here or TOK_ID_NONE
    unsigned char byte;
};

struct tok_pre; // pre-tokenizer description, tokenizer_bpe.c

/* A normalizer step with its strings in the tokenizer's own memory (tokenizer_norm.c). */
struct tok_norm_step {
    enum vocab_norm_op op;
    char *pattern; // owned, NUL-terminated
    size_t pattern_len;
    char *content; // owned, NUL-terminated
    size_t content_len;
    void *regex; // pcre2_code_8 * for a regex REPLACE, else NULL
    bool left, right;
};

/* Immutable after tok_new(). */
struct tokenizer {
    enum vocab_kind kind;
    int32_t n_tokens;
    char *arena;              // owned: all token texts, keys and pieces
    struct tok_span *text;    // (n_tokens) stored text
    struct tok_span *key;     // (n_tokens) gpt2: raw bytes the byte-level text stands for
    struct tok_span *piece;   // (n_tokens) decoded bytes
    float *score;             // (n_tokens)
    uint8_t *type;            // (n_tokens) enum vocab_token_type
    uint8_t *strip;           // (n_tokens) enum vocab_strip bits, or NULL
    struct tok_map text_map;  // stored text -> id
    struct tok_map key_map;   // gpt2: raw bytes -> id
    struct tok_merge *merges; // gpt2 merge table, (merges_mask + 1) slots
    size_t merges_mask;
    tok_id byte_id[256];        // token for a raw byte (byte fallback), or TOK_ID_NONE
    struct tok_trie_node *trie; // special tokens (control, unknown, user-defined)
    int32_t n_trie;
    int32_t trie_root[256]; // first node for a leading byte, or -1
    int32_t *special_rank;  // (n_tokens) order in llama.cpp's longest-first list, or -1
    tok_id bos, eos, unk, sep, pad, cls, mask, eot, eom;
    struct tok_specials specials; // the same ids plus fim, for callers
    tok_id *eog;                  // end-of-generation ids
    int32_t n_eog;
    bool add_bos, add_eos, add_sep, add_space_prefix;
    bool lowercase, strip_accents;
    bool clean_spaces;     // tok_decode applies Hugging Face's clean_up_tokenization_spaces
    bool ignore_merges;    // gpt2: a pre-token that is a whole token skips the merges (llama3)
    bool wpm_hash_form;    // bert: "##" continuations (else "\u2581" word starts)
    bool spm_chunkable;    // llama: no mergeable token has U+2581 after another character,
                           // so merging can run word by word (see tokenizer_spm.c)
    int32_t max_token_len; // longest stored text, bytes
    int n_regex;
    void *regex[TOK_MAX_REGEX]; // pcre2_code_8 *
    void *regex_gctx;           // pcre2_general_context_8 *

    /* Unigram (tokenizer_ugm.c). */
    uint32_t *xcda; // (n_xcda) charsmap double-array entries, host order; owned
    size_t n_xcda;
    char *charsmap_repl; // replacement strings, NUL-terminated, back to back; owned
    size_t charsmap_repl_len;
    double ugm_unk_score; // min normal score - 10, as SentencePiece
    int32_t ugm_max_len;  // longest candidate token text, bytes
    bool remove_extra_ws, escape_ws, ws_as_suffix, byte_fallback;
    bool ugm_chunkable; // U+2581 is a token and no candidate has it after its start, so
                        // no token crosses a word start: Viterbi can run word by word

    /* tokenizer.json pipeline (tokenizer_norm.c). */
    struct tok_norm_step *norm; // (n_norm) owned
    int32_t n_norm;
    void *norm_gctx; // pcre2_general_context_8 * for the normalizer regexes
    bool is_metaspace, meta_split, ws_split;
    enum vocab_prepend prepend;
};

/* UTF-8 helpers (tokenizer.c). utf8_decode returns the length of the valid, shortest-form
 * scalar value at s (1..4) and writes *cp, or 0 when the bytes there are not valid UTF-8. */
size_t tok_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);
size_t tok_utf8_encode(uint32_t cp, char out[4]);
/* Bytes of the character at s (1..4, never past len > 0): its length when valid, else 1. */
size_t tok_utf8_len_at(const char *s, size_t len);
/* True when s[0..len) is valid UTF-8. */
bool tok_utf8_is_valid(const unsigned char *s, size_t len);
/* Appends s to out with every byte that does not start a valid character replaced by U+FFFD
 * (EF BF BD). ERR_NOMEM (out may hold part of the text). */
int tok_utf8_append_lossy(struct buf *out, const unsigned char *s, size_t len);

/* Id of the key s in m, or TOK_ID_NONE. */
tok_id tok_map_find(const struct tok_map *m, const char *arena, const char *s, size_t len);

/* The map's hash computed a byte at a time: start with TOK_HASH_INIT, feed every byte with
 * tok_hash_step, look up with tok_map_find_hashed(tok_hash_end(h)). Lets a caller probe every
 * prefix of a string in one pass. */
#define TOK_HASH_INIT 0xcbf29ce484222325ull
static inline uint64_t tok_hash_step(uint64_t h, unsigned char c)
{
    return (h ^ c) * 0x100000001b3ull;
}
static inline uint64_t tok_hash_end(uint64_t h)
{
    return h ^ (h >> 29);
}
tok_id tok_map_find_hashed(const struct tok_map *m, const char *arena, const char *s, size_t len,
                           uint64_t hash);

/* Algorithms: append the ids of one fragment of valid UTF-8 text (no special tokens left in
 * it). ERR_NOMEM, ERR_LIMIT. */
/* True when no mergeable token has U+2581 after another character (tokenizer_spm.c). */
bool tok_spm_chunkable(const struct tokenizer *t);
int tok_spm_encode(const struct tokenizer *t, const char *s, size_t len, bool add_prefix,
                   struct tok_ids *out);
int tok_bpe_encode(const struct tokenizer *t, const char *s, size_t len, struct tok_ids *out);
int tok_wpm_encode(const struct tokenizer *t, const char *s, size_t len, struct tok_ids *out);
/* Unigram: normalizes (gguf rules or the Metaspace pipeline; is_first: the fragment starts the
 * input) and appends the best-scoring segmentation. */
int tok_ugm_encode(const struct tokenizer *t, const char *s, size_t len, bool is_first,
                   struct tok_ids *out);

/* Unigram setup (tokenizer_ugm.c): copies and checks the precompiled charsmap, computes the
 * unknown-token score. ERR_INVALID (a malformed charsmap, no unknown token), ERR_NOMEM. */
int tok_ugm_setup(struct tokenizer *t, const struct vocab *v, struct errmsg *err);
/* Appends the charsmap normalization of s (SentencePiece's longest-prefix replacement; text
 * the map does not cover is copied). ERR_NOMEM. */
int tok_charsmap_apply(const struct tokenizer *t, const char *s, size_t len, struct buf *out);

/* tokenizer.json normalizer (tokenizer_norm.c): copies and compiles the steps; applies them.
 * setup: ERR_UNSUPPORTED (a regex PCRE2 rejects), ERR_NOMEM, ERR_LIMIT. apply: ERR_NOMEM,
 * ERR_LIMIT (a regex ran out of its match limits). */
int tok_norm_setup(struct tokenizer *t, const struct vocab *v, struct errmsg *err);
int tok_norm_apply(const struct tokenizer *t, const char *s, size_t len, struct buf *out);
void tok_norm_free(struct tokenizer *t);

/* gpt2 setup (tokenizer_bpe.c): byte-level decoding of a stored text into raw bytes
 * (returns false when a character is outside the byte-level alphabet); regex compilation
 * for the pre name (or the vocab's own pre_regex list) and the ignore_merges/clean_spaces
 * flags; merge table. */
bool tok_bpe_unmap(const char *s, size_t len, char *out, size_t *out_len);
int tok_bpe_setup(struct tokenizer *t, const struct vocab *v, struct errmsg *err);
int tok_bpe_build_merges(struct tokenizer *t, const struct vocab *v, struct errmsg *err);
void tok_bpe_free_regex(struct tokenizer *t);

/* Binary max-heap of candidate merges shared by SPM and BPE: highest prio first, ties by the
 * leftmost position (both as llama.cpp's comparators). */
struct tok_bigram {
    double prio;
    int32_t left, right;
    uint32_t size; // bytes of left + right when pushed; stale entries fail this check
};

struct tok_heap {
    struct tok_bigram *items;
    size_t n, cap;
};

int tok_heap_push(struct tok_heap *h, struct tok_bigram b);
struct tok_bigram tok_heap_pop(struct tok_heap *h);

/* A symbol of the merge loops: a byte range of the word, doubly linked. */
struct tok_sym {
    int32_t prev, next;
    uint32_t off, len; // len 0 = merged away
    tok_id id;         // gpt2: current token or TOK_ID_NONE
};

#endif
