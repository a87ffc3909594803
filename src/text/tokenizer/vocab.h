/* A tokenizer vocabulary as plain arrays: the value the platform layer fills from a model file
 * (see platform/cpu/vocab_gguf.h) and text/tokenizer/tokenizer.h consumes. Token types follow
 * GGUF's tokenizer.ggml.token_type numbering; defaults follow llama.cpp's llama-vocab.cpp. Not a
 * tokenizer and not a file reader. */
#ifndef TEXT_VOCAB_H
#define TEXT_VOCAB_H

#include "util/str.h"

#include <stdbool.h>
#include <stdint.h>

typedef int32_t tok_id; // a token id; -1 (TOK_ID_NONE) means "absent"

#define TOK_ID_NONE (-1)

enum vocab_kind {
    VOCAB_KIND_LLAMA = 0, // SentencePiece BPE with scores and <0xNN> byte fallback
    VOCAB_KIND_GPT2 = 1,  // byte-level BPE with merge ranks
    VOCAB_KIND_BERT = 2,  // WordPiece
    VOCAB_KIND_UGM = 3,   // SentencePiece unigram (GGUF "t5"; Hugging Face "Unigram"): Viterbi
                          // over the token scores
};

/* One step of a Hugging Face tokenizer.json normalizer, applied in order to every text
 * fragment (the text between special tokens). */
enum vocab_norm_op {
    VOCAB_NORM_PRECOMPILED = 0, // the SentencePiece precompiled charsmap (struct vocab's charsmap)
    VOCAB_NORM_NFC,
    VOCAB_NORM_NFD,
    VOCAB_NORM_NFKC,
    VOCAB_NORM_NFKD,
    VOCAB_NORM_LOWERCASE,
    VOCAB_NORM_STRIP_ACCENTS, // drop combining marks (Unicode category Mn)
    VOCAB_NORM_STRIP,         // trim whitespace on the sides named by left/right
    VOCAB_NORM_REPLACE,       // every match of pattern (a string, or a regex) becomes content
    VOCAB_NORM_PREPEND,       // content before non-empty text
};

struct vocab_norm_step {
    enum vocab_norm_op op;
    struct str pattern; // REPLACE: what to find
    struct str content; // REPLACE: the replacement; PREPEND: the prefix
    bool is_regex;      // REPLACE: pattern is a regex (PCRE2, UTF mode)
    bool left, right;   // STRIP: which sides
};

/* How the Metaspace pre-tokenizer puts U+2581 before a fragment's text. */
enum vocab_prepend {
    VOCAB_PREPEND_ALWAYS = 0, // before every fragment (and every word after a whitespace split)
    VOCAB_PREPEND_FIRST = 1,  // only before the fragment that starts the input
    VOCAB_PREPEND_NEVER = 2,
};

/* GGUF tokenizer.ggml.token_type values. */
enum vocab_token_type {
    VOCAB_TOKEN_NORMAL = 1,
    VOCAB_TOKEN_UNKNOWN = 2,
    VOCAB_TOKEN_CONTROL = 3,
    VOCAB_TOKEN_USER_DEFINED = 4,
    VOCAB_TOKEN_UNUSED = 5,
    VOCAB_TOKEN_BYTE = 6,
};

/* Per-token flags for special tokens (llama.cpp's LLAMA_TOKEN_ATTR_LSTRIP/RSTRIP): when the
 * token is matched in the text, whitespace on that side of it is dropped. */
enum vocab_strip {
    VOCAB_STRIP_LEFT = 1,
    VOCAB_STRIP_RIGHT = 2,
};

/* Filled by the caller; every pointer is borrowed for the duration of tok_new() only (the
 * tokenizer copies what it keeps). */
struct vocab {
    enum vocab_kind kind;
    struct str pre;             // tokenizer.ggml.pre; empty = "default"
    int32_t n_tokens;           // >= 1
    const struct str *tokens;   // (n_tokens) token texts as stored in the model
    const float *scores;        // (n_tokens) SPM merge scores, or NULL (all 0)
    const int32_t *token_types; // (n_tokens) enum vocab_token_type, or NULL (all normal)
    const uint8_t *strip;       // (n_tokens) enum vocab_strip bits, or NULL (none)
    int32_t n_merges;           // gpt2 only
    const struct str *merges;   // (n_merges) "left right", rank = index
    tok_id bos_id, eos_id, unk_id, sep_id, pad_id, cls_id, mask_id, eot_id, eom_id;
    tok_id fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
    bool add_bos;          // add_special prepends bos (bert: cls, falling back to bos)
    bool add_eos;          // add_special appends eos
    bool add_sep;          // bert: add_special appends sep
    bool add_space_prefix; // llama: a space is prepended to text that starts the input or
                           // follows a special token
    bool lowercase;        // bert normalizer: lower-case
    bool strip_accents;    // bert normalizer: NFD and drop combining marks

    /* Unigram (ugm) vocabs. */
    const uint8_t *charsmap; // SentencePiece precompiled_charsmap (u32 blob size, XCDA entries,
    size_t charsmap_len;     // NUL-terminated replacements), or NULL; any kind may use it
                             // through a VOCAB_NORM_PRECOMPILED step
    bool remove_extra_ws;    // gguf ugm: drop leading and repeated whitespace
    bool escape_ws;          // gguf ugm: spaces become U+2581 (default true)
    bool ws_as_suffix;       // gguf ugm: with add_space_prefix, the space goes after the text
    bool byte_fallback;      // ugm: unknown text becomes <0xNN> byte tokens when all exist

    /* A tokenizer.json pipeline (all zero for GGUF vocabs). */
    int32_t n_norm;                     // normalizer steps
    const struct vocab_norm_step *norm; // (n_norm) applied to every text fragment first
    bool is_metaspace;                  // ugm: Metaspace pre-tokenizer instead of gguf's rules
    enum vocab_prepend prepend;         // Metaspace prepend_scheme
    bool meta_split;                    // Metaspace split: a word starts at every U+2581
    bool ws_split;                      // WhitespaceSplit before Metaspace
    bool ignore_merges;                 // gpt2: a pre-token that is a whole token skips the
                                        // merges (as well as when the pre family says so)
    int32_t n_pre_regex;                // gpt2: split regexes replacing the pre family's
    const struct str *pre_regex;        // (n_pre_regex) PCRE2 patterns
};

/* Sets every field of *v to the defaults of the model family, as llama.cpp does before it
 * reads the optional GGUF keys: special ids (llama bos=1 eos=2 unk=0; bert cls/bos=101 sep=102
 * unk=100 pad=0 mask=103; gpt2 bos=eos=11; ugm eos=1 unk=2 pad=0), add_bos (llama, bert, and
 * the llama3/tekken/chameleon pre-tokenizers), add_eos (ugm), add_space_prefix (llama),
 * lowercase/strip_accents (bert), escape_ws (all), all other ids TOK_ID_NONE and arrays NULL. pre is borrowed into v->pre. Cannot fail. */
void vocab_init_defaults(struct vocab *v, enum vocab_kind kind, struct str pre);

/* Parses a tokenizer.ggml.model name: "llama", "gpt2", "bert" or "t5" (unigram). Returns true
 * and writes *out, or false for an unsupported name. */
bool vocab_kind_parse(struct str name, enum vocab_kind *out);

#endif
