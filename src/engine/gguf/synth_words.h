/* The demo vocabulary of synthetic models: SentencePiece-style ("llama") tokens that are whole
 * English words, punctuation and single printable ASCII characters, with no byte tokens, so
 * whatever a model with random weights samples decodes to readable (if meaningless) valid
 * UTF-8. Not a real language model's vocabulary: merges never build the words from plain text. */
#ifndef ENGINE_SYNTH_WORDS_H
#define ENGINE_SYNTH_WORDS_H

#include "engine/gguf/gguf_write.h"

#include <stdbool.h>

/* Number of tokens in the vocabulary. Cannot fail. */
int synth_words_count(void);

/* Gain of token i's row of the output matrix: words and punctuation large, so sampling favours
 * them, the end-of-turn token twice a word's (so answers end), and 0 for single characters and
 * control tokens (their logit stays 0 and top-k / min-p drop them). i must be in [0, synth_words_count()). Cannot
 * fail. */
float synth_words_output_gain(int i);

/* Writes every tokenizer.* key (tokens, scores, types, specials, a ChatML template) to w.
 * ERR_NOMEM, or what gguf_writer returns. */
int synth_words_add(struct gguf_writer *w);

#endif
