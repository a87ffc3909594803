/* Internals shared by tokenizer.c (front: tables, special tokens, decoding) and the three
 * algorithms (tokenizer_spm.c, tokenizer_bpe.c, tokenizer_wpm.c). Never include this from
 * another module. */
#ifndef TEXT_TOKENIZER_INTERNAL_H
#define TEXT_TOKENIZER_INTERNAL_H

#include "text/tokenizer.h"

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
};

/* UTF-8 helpers (tokenizer.c). utf8_decode returns the length of the valid, shortest-form
 * scalar value at s (1..4) and writes *cp, or 0 when the bytes there are not valid UTF-8. */
size_t tok_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);
size_t tok_utf8_encode(uint32_t cp, char out[4]);
/* True when s[0..len) is valid UTF-8. */
bool tok_utf8_is_valid(const unsigned char *s, size_t len);
/* Appends s to out with every byte that does not start a valid character replaced by U+FFFD
 * (EF BF BD). ERR_NOMEM (out may hold part of the text). */
int tok_utf8_append_lossy(struct buf *out, const unsigned char *s, size_t len);

/* Id of the key s in m, or TOK_ID_NONE. */
tok_id tok_map_find(const struct tok_map *m, const char *arena, const char *s, size_t len);

/* Algorithms: append the ids of one fragment of valid UTF-8 text (no special tokens left in
 * it). ERR_NOMEM, ERR_LIMIT. */
/* True when no mergeable token has U+2581 after another character (tokenizer_spm.c). */
bool tok_spm_chunkable(const struct tokenizer *t);
int tok_spm_encode(const struct tokenizer *t, const char *s, size_t len, bool add_prefix,
                   struct tok_ids *out);
int tok_bpe_encode(const struct tokenizer *t, const char *s, size_t len, struct tok_ids *out);
int tok_wpm_encode(const struct tokenizer *t, const char *s, size_t len, struct tok_ids *out);

/* gpt2 setup (tokenizer_bpe.c): byte-level decoding of a stored text into raw bytes
 * (returns false when a character is outside the byte-level alphabet); regex compilation
 * for the pre name and the ignore_merges/clean_spaces flags; merge table. */
bool tok_bpe_unmap(const char *s, size_t len, char *out, size_t *out_len);
int tok_bpe_setup(struct tokenizer *t, struct str pre, struct errmsg *err);
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
