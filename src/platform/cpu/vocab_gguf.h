/* Glue between the GGUF reader (engine/gguf/gguf.h) and the tokenizer (text/): fills a struct vocab
 * from the tokenizer.ggml.* keys with llama.cpp's defaults for absent optional keys. Not a
 * tokenizer; reads no tensors. */
#ifndef PLATFORM_VOCAB_GGUF_H
#define PLATFORM_VOCAB_GGUF_H

#include "engine/gguf/gguf.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/vocab.h"
#include "util/err.h"

/* Fills *out from g. Token and merge strings (and v->pre) are borrowed from g's mapping: valid
 * until gguf_close(g). The token/merge slice arrays, scores and token types are allocated
 * here; release them with vocab_deinit(). tokenizer.ggml.model must be "llama", "gpt2", "t5" or
 * "bert"; when the key is absent and general.architecture names a BERT family, the vocab is
 * WordPiece (classic "##" vocabs such as tiny_bert). Special ids from the file that fall
 * outside the vocab are ignored (the family default stays), as llama.cpp does.
 * ERR_FORMAT (missing tokens, wrong key types, arrays shorter than the token list, gpt2
 * without merges), ERR_UNSUPPORTED (another tokenizer model), ERR_NOMEM, ERR_LIMIT; err says
 * which key. *out is written only on success. */
int vocab_load_gguf(const struct gguf *g, struct vocab *out, struct errmsg *err);

/* Frees what vocab_load_gguf() allocated and zeroes *v. A no-op on a zeroed vocab. Only for
 * vocabs filled by vocab_load_gguf(). */
void vocab_deinit(struct vocab *v);

/* Opens path, loads its vocab and builds a tokenizer, then closes the file (the tokenizer
 * copies what it needs). For the CLI and tests. Codes of gguf_open(), vocab_load_gguf() and
 * tok_new(). On success the caller frees *out with tok_free(). */
int vocab_tokenizer_from_file(const char *path, struct tokenizer **out, struct errmsg *err);

#endif
