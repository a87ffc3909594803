/* Tokenizers: text <-> token ids exactly as the models were trained. SentencePiece BPE
 * ("llama", llama.cpp's llm_tokenizer_spm), byte-level BPE ("gpt2", pre-tokenized by the
 * tokenizer.ggml.pre regexes run with PCRE2), WordPiece ("bert", both the "##" and the
 * "\u2581" vocab forms) and SentencePiece unigram ("t5", Viterbi over the token scores). Built
 * from a struct vocab (text/tokenizer/vocab.h; text/tokenizer/tokenizer_json.h fills one from a
 * Hugging Face tokenizer.json); reads no files. */
#ifndef TEXT_TOKENIZER_H
#define TEXT_TOKENIZER_H

#include "text/tokenizer/vocab.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/str.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Immutable after tok_new(): every function below may be called from any number of threads
 * at once on the same tokenizer (all scratch memory is per call). */
struct tokenizer;

/* A growable token array owned by the caller: zero it (or tok_ids_init) before first use,
 * free with tok_ids_deinit(). */
struct tok_ids {
    tok_id *ids;    // owned; NULL until the first append
    size_t n_ids;   // ids used
    size_t ids_cap; // ids allocated
};

void tok_ids_init(struct tok_ids *a);
void tok_ids_deinit(struct tok_ids *a);
/* Appends one id. ERR_NOMEM, ERR_LIMIT; a is unchanged on failure. */
int tok_ids_push(struct tok_ids *a, tok_id id);

/* Builds a tokenizer from v (borrowed for the call; everything needed is copied and indexed:
 * token and merge hash maps, piece table, compiled regexes). ERR_INVALID (inconsistent vocab:
 * no tokens, NULL arrays, gpt2 without merges), ERR_UNSUPPORTED (a regex PCRE2 rejects),
 * ERR_NOMEM, ERR_LIMIT; err says why. An unknown gpt2 pre-tokenizer name logs one warning
 * and falls back to the "default" regex set (llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT).
 * Special ids outside [0, n_tokens) are treated as absent. On success the caller frees *out
 * with tok_free(). */
int tok_new(const struct vocab *v, struct tokenizer **out, struct errmsg *err);

/* Frees everything; tok_free(NULL) is a no-op. */
void tok_free(struct tokenizer *t);

/* Appends the ids of text to out.
 * - add_special: bos/eos (llama, gpt2) or cls ... sep (bert) as the vocab flags say.
 * - parse_special: control and unknown-type tokens written in the text are matched as whole
 *   tokens (longest token first, like llama.cpp's tokenizer_st_partition). User-defined
 *   tokens are always matched, as in llama.cpp and Hugging Face tokenizers.
 * Invalid UTF-8 is replaced by U+FFFD (one per offending byte, like llama.cpp's
 * unicode_cpts_from_utf8) before tokenizing. Returns ERR_OK, ERR_NOMEM or ERR_LIMIT (a regex
 * ran out of its match limits); on error out->n_ids is unchanged. */
int tok_encode(const struct tokenizer *t, struct str text, bool add_special, bool parse_special,
               struct tok_ids *out);

/* The most bytes of text that n_ids tokens can stand for: a longer text cannot encode to
 * n_ids tokens or fewer, so a caller can refuse it without tokenizing it. Every token covers
 * at most its stored text's bytes (the longest is max_token_len) unless something removes
 * text first; SIZE_MAX (no bound) for the tokenizers that may: a normalizer, strip flags
 * around special tokens, WordPiece (a whole unknown word is one token) and unigram (runs of
 * unknown characters merge). Cannot fail. */
size_t tok_text_bytes_max(const struct tokenizer *t, size_t n_ids);

/* Appends the text of ids to out (llama.cpp's llama_detokenize with remove_special =
 * !render_special, unparse_special = render_special): byte tokens become bytes, "\u2581"
 * becomes a space, byte-level BPE is unmapped, "##" continuations are joined. The first piece
 * loses one leading space for llama vocabs with add_space_prefix and for bert; without
 * render_special a leading bos is dropped first (so "<s> Hello" gives "Hello", where
 * llama.cpp keeps the space). gpt2 vocabs whose pre-tokenizer says so, and bert, apply
 * Hugging Face's clean_up_tokenization_spaces (" ," -> ","). Control, unknown and unused
 * tokens are rendered only with render_special. ERR_INVALID for an id outside the vocab
 * (nothing appended), ERR_NOMEM. The bytes may be invalid UTF-8 when ids split a character
 * (use struct tok_stream for output that must be valid). */
int tok_decode(const struct tokenizer *t, const tok_id *ids, size_t n_ids, bool render_special,
               struct buf *out);

/* The decoded bytes of one token (no clean-up, no leading-space rule; control tokens give
 * their text), or an empty slice for an id outside the vocab. Borrowed; valid until
 * tok_free(). Cannot fail. */
struct str tok_piece(const struct tokenizer *t, tok_id id);

/* The token's text as stored in the vocab (e.g. "\u2581the", "<0x0A>", "Ġthe"), or an empty
 * slice for an id outside the vocab. Borrowed; valid until tok_free(). */
struct str tok_text(const struct tokenizer *t, tok_id id);

/* Lookups: the id of a token whose stored text is exactly s, or TOK_ID_NONE. */
tok_id tok_find(const struct tokenizer *t, struct str s);

int32_t tok_n_tokens(const struct tokenizer *t);
enum vocab_kind tok_kind(const struct tokenizer *t);
/* enum vocab_token_type of id, or 0 for an id outside the vocab. */
int tok_token_type(const struct tokenizer *t, tok_id id);
/* Special ids after validation (TOK_ID_NONE when absent). */
tok_id tok_bos(const struct tokenizer *t);
tok_id tok_eos(const struct tokenizer *t);
tok_id tok_eot(const struct tokenizer *t);
tok_id tok_eom(const struct tokenizer *t);
tok_id tok_sep(const struct tokenizer *t);
tok_id tok_cls(const struct tokenizer *t);
tok_id tok_pad(const struct tokenizer *t);
tok_id tok_unk(const struct tokenizer *t);
/* Every special id after validation (TOK_ID_NONE when absent). cls falls back to bos, and
 * eot is auto-detected from llama.cpp's texts ("<|eot_id|>", "<|im_end|>", "<|end|>",
 * "<end_of_turn>") when the vocab has none. */
struct tok_specials {
    tok_id bos, eos, unk, sep, pad, cls, mask, eot, eom;
    tok_id fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
};

/* Borrowed; valid until tok_free(). Cannot fail. */
const struct tok_specials *tok_specials(const struct tokenizer *t);

/* True for ids that end generation: eos, eot, eom and llama.cpp's end-of-generation texts
 * ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<end_of_turn>", ...). */
bool tok_is_eog(const struct tokenizer *t, tok_id id);
/* True when tok_decode applies Hugging Face's clean_up_tokenization_spaces. */
bool tok_cleans_spaces(const struct tokenizer *t);
/* True for control, unknown and unused tokens (not rendered by default). */
bool tok_is_control(const struct tokenizer *t, tok_id id);

/* Streaming detokenizer for generated tokens: concatenates tok_piece() (no leading-space
 * rule, no clean-up, like llama.cpp's server) and never emits half a UTF-8 character; bytes of
 * an incomplete character are held until the next push completes them. Caller storage;
 * owned by one thread. The tokenizer is borrowed until the last call. */
struct tok_stream {
    const struct tokenizer *tok; // borrowed
    bool render_special;         // emit control tokens' text
    unsigned char held[4];       // bytes of an incomplete trailing character
    size_t n_held;               // 0..3
};

/* Starts a stream. Cannot fail. */
void tok_stream_init(struct tok_stream *s, const struct tokenizer *t, bool render_special);

/* Appends to out what id completes. ERR_INVALID (id outside the vocab; stream unchanged),
 * ERR_NOMEM (stream unchanged). */
int tok_stream_push(struct tok_stream *s, tok_id id, struct buf *out);

/* Ends the stream: held bytes of an incomplete character become one U+FFFD. ERR_NOMEM. */
int tok_stream_flush(struct tok_stream *s, struct buf *out);

#endif
