/* The demo vocabulary (see synth_words.h): ids 0-4 are <unk>, <s>, </s>, <|im_start|>,
 * <|im_end|>; then the words (each with the U+2581 word-start mark), then the printable ASCII
 * characters, U+2581 alone and a newline, so any ASCII prompt tokenizes without <unk>. */
#include "engine/gguf/synth_words.h"

#include "util/mem.h"

#include <stdint.h>
#include <string.h>

#define SP "\xe2\x96\x81" // U+2581, the SPM word-start mark

#define TYPE_NORMAL  1
#define TYPE_UNKNOWN 2
#define TYPE_CONTROL 3

static const char *const specials[] = {"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"};
#define N_SPECIALS 5
#define ID_IM_END  4

static const char *const words[] = {
    "the",      "a",        "and",     "of",        "to",      "in",     "is",      "it",
    "that",     "was",      "for",     "on",        "with",    "as",     "at",      "by",
    "from",     "or",       "but",     "not",       "this",    "we",     "you",     "they",
    "she",      "he",       "I",       "one",       "two",     "three",  "all",     "some",
    "many",     "every",    "each",    "other",     "new",     "old",    "small",   "large",
    "long",     "short",    "bright",  "dark",      "quiet",   "loud",   "warm",    "cold",
    "green",    "blue",     "red",     "golden",    "silver",  "white",  "river",   "mountain",
    "forest",   "city",     "garden",  "window",    "door",    "road",   "bridge",  "ocean",
    "island",   "valley",   "cloud",   "rain",      "snow",    "wind",   "light",   "shadow",
    "morning",  "evening",  "night",   "day",       "year",    "season", "summer",  "winter",
    "spring",   "story",    "song",    "letter",    "book",    "word",   "voice",   "dream",
    "idea",     "question", "answer",  "reason",    "moment",  "place",  "time",    "world",
    "home",     "house",    "room",    "table",     "lamp",    "clock",  "stone",   "tree",
    "flower",   "bird",     "fish",    "horse",     "cat",     "dog",    "friend",  "child",
    "teacher",  "farmer",   "sailor",  "painter",   "machine", "engine", "model",   "number",
    "signal",   "pattern",  "circle",  "line",      "map",     "key",    "walks",   "runs",
    "sings",    "writes",   "reads",   "builds",    "finds",   "keeps",  "opens",   "closes",
    "carries",  "follows",  "watches", "remembers", "forgets", "turns",  "grows",   "falls",
    "rises",    "shines",   "waits",   "listens",   "speaks",  "learns", "counts",  "draws",
    "holds",    "gently",   "slowly",  "quickly",   "always",  "never",  "often",   "again",
    "together", "alone",    "here",    "there",     "above",   "below",  "beyond",  "across",
    "through",  "under",    "near",    "before",    "after",   "while",  "because", "when",
    "where",    "perhaps",  "still",   "only",
};
#define N_WORDS (int)(sizeof words / sizeof words[0])

#define ASCII_FIRST 0x21
#define ASCII_LAST  0x7e
#define N_CHARS     (ASCII_LAST - ASCII_FIRST + 1 + 2) // + U+2581 alone + "\n"

static const char chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

int synth_words_count(void)
{
    return N_SPECIALS + N_WORDS + N_CHARS;
}

float synth_words_output_gain(int i)
{
    if (i == ID_IM_END) return 6.0f; // answers end after ~100 words (median), not at n_ctx
    if (i >= N_SPECIALS && i < N_SPECIALS + N_WORDS) return 3.0f;
    const int c = i - N_SPECIALS - N_WORDS + ASCII_FIRST;
    if (c == '.' || c == ',') return 2.5f; // a little punctuation breaks the run of words
    return 0.0f;
}

/* Text and type of token i; one is a 2-byte scratch for single characters. */
static void token_of(int i, char one[2], struct str *text, int32_t *type)
{
    *type = TYPE_NORMAL;
    if (i < N_SPECIALS) {
        text->ptr = specials[i];
        text->len = strlen(specials[i]);
        *type = i == 0 ? TYPE_UNKNOWN : TYPE_CONTROL;
        return;
    }
    if (i < N_SPECIALS + N_WORDS) {
        text->ptr = NULL; // built by the caller: U+2581 + the word
        return;
    }
    const int c = i - N_SPECIALS - N_WORDS + ASCII_FIRST;
    if (c <= ASCII_LAST) {
        one[0] = (char)c;
        one[1] = '\0';
        text->ptr = one;
        text->len = 1;
    } else if (c == ASCII_LAST + 1) {
        text->ptr = SP;
        text->len = strlen(SP);
    } else {
        text->ptr = "\n";
        text->len = 1;
    }
}

/* Fills toks / scores / types; the words' and characters' text goes into arena, at least 32
 * bytes per token (the longest is U+2581 + a 9-letter word). */
static void fill_tokens(struct str *toks, float *scores, int32_t *types, char *arena)
{
    size_t used = 0;
    for (int i = 0; i < synth_words_count(); i++) {
        char one[2];
        token_of(i, one, &toks[i], &types[i]);
        if (!toks[i].ptr) {
            const char *w = words[i - N_SPECIALS];
            toks[i].len = strlen(SP) + strlen(w);
            memcpy(arena + used, SP, strlen(SP));
            memcpy(arena + used + strlen(SP), w, strlen(w));
        } else {
            memcpy(arena + used, toks[i].ptr, toks[i].len);
        }
        toks[i].ptr = arena + used;
        used += toks[i].len;
        // Merges prefer words, then characters; specials take no part in merges.
        scores[i] = i < N_SPECIALS + N_WORDS ? -(float)i : -1000.0f - (float)i;
    }
}

int synth_words_add(struct gguf_writer *w)
{
    const size_t n = (size_t)synth_words_count(), cap = n * 32;
    struct str *toks = mem_alloc(n * sizeof *toks);
    float *scores = mem_alloc(n * sizeof *scores);
    int32_t *types = mem_alloc(n * sizeof *types);
    char *arena = mem_alloc(cap);
    int rc = ERR_NOMEM;
    if (toks && scores && types && arena) {
        fill_tokens(toks, scores, types, arena);
        rc = gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, (int64_t)n);
    }
    if (rc == ERR_OK)
        rc = gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_VALUE_F32, scores, (int64_t)n);
    if (rc == ERR_OK)
        rc = gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_VALUE_I32, types, (int64_t)n);
    mem_free(toks);
    mem_free(scores);
    mem_free(types);
    mem_free(arena);
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", ID_IM_END);
    if (rc == ERR_OK) rc = gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    if (rc == ERR_OK) rc = gguf_writer_add_str(w, "tokenizer.chat_template", chatml_template);
    return rc;
}
