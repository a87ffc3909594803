/* Hugging Face tokenizers: a tokenizer.json (plus, optionally, its tokenizer_config.json) read
 * into a struct tokenizer. Models Unigram, WordPiece and byte-level BPE; normalizers
 * Precompiled, NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip, Replace, Prepend,
 * BertNormalizer and Sequence; pre-tokenizers Metaspace, WhitespaceSplit, BertPreTokenizer,
 * ByteLevel, Split (regex) and Sequence; post-processors TemplateProcessing (one special token
 * before and after the sequence at most), RobertaProcessing, BertProcessing. Parses text given
 * by the caller; reads no files. */
#ifndef TEXT_TOKENIZER_JSON_H
#define TEXT_TOKENIZER_JSON_H

#include "text/tokenizer/tokenizer.h"
#include "util/err.h"

#include <stddef.h>
#include <stdint.h>

#define TOK_JSON_MAX_TOKENS (4 * 1024 * 1024) // ids at or above this are refused

/* What the files say beyond the tokenizer itself. */
struct tok_json_info {
    int64_t model_max_length; // tokenizer_config.json's, else the truncation max_length; 0 when
                              // neither gives a usable value
    tok_id pad_id;            // the padding token (config pad_token, else the padding section),
                              // or TOK_ID_NONE
    char model[16];           // "Unigram", "WordPiece" or "BPE"
};

/* Builds a tokenizer from the text of a tokenizer.json (json, json_len bytes) and, when config
 * is not NULL, of its tokenizer_config.json (which may name special tokens and override
 * add_bos_token / add_eos_token). Both are borrowed for the call. ERR_FORMAT (not JSON, a
 * missing or mistyped field), ERR_UNSUPPORTED (a model, normalizer, pre-tokenizer or
 * post-processor this loader does not implement, named in err), ERR_LIMIT (token ids at or
 * above TOK_JSON_MAX_TOKENS), ERR_NOMEM, and tok_new()'s codes; err says which field. On
 * success the caller frees *out with tok_free(); *info (may be NULL) is written. Thread-safe. */
int tok_json_load(const char *json, size_t json_len, const char *config, size_t config_len,
                  struct tokenizer **out, struct tok_json_info *info, struct errmsg *err);

#endif
