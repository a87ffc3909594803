/* The tokenizers of synthetic models: a small built-in SentencePiece-style ("llama")
 * vocabulary with byte tokens, ChatML specials and template, a WordPiece one for bert, or
 * every tokenizer.* key copied from another GGUF. */
#include "engine/gguf/synth_internal.h"

#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define TOKEN_TYPE_NORMAL  1
#define TOKEN_TYPE_UNKNOWN 2
#define TOKEN_TYPE_CONTROL 3
#define TOKEN_TYPE_BYTE    6

#define SP "\xe2\x96\x81" // U+2581, the SPM word-start mark

static const char *const spm_pieces[] = {
    SP,       SP "t",  SP "a",  "he",  "in",    SP "the",   "er",       "on",
    SP "s",   SP "w",  "at",    "en",  SP "I",  "is",       SP "o",     "ou",
    SP "and", SP "to", SP "of", "ing", SP "is", SP "Hello", SP "world", SP "you",
    SP "was", SP "it", "ed",    "ll",  "or",    "an",       SP "h",     SP "b",
};

static const char *const special_pieces[] = {"<|im_start|>", "<|im_end|>"};

static const char chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

#define N_SPM_PIECES (int)(sizeof spm_pieces / sizeof spm_pieces[0])
#define N_SPECIALS   (int)(sizeof special_pieces / sizeof special_pieces[0])
#define SPM_FIXED    (3 + 256 + N_SPM_PIECES + N_SPECIALS)

static const char *const bert_words[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "the", "a", "is",
    "of",    "and",   "to",    "##s",   "##ing",  "##ed",  ",",     ".",   "!", "?",
};
#define N_BERT_FIXED (int)(sizeof bert_words / sizeof bert_words[0])

int synth_builtin_vocab_size(const char *arch)
{
    return arch && strcmp(arch, "bert") == 0 ? N_BERT_FIXED : SPM_FIXED;
}

/* Text, score and type of token i of the built-in SPM vocabulary; buf holds generated text. */
static void spm_token(int i, char *buf, size_t cap, const char **text, float *score, int32_t *type)
{
    *score = 0.0f;
    *type = TOKEN_TYPE_NORMAL;
    if (i < 3) {
        static const char *const first[3] = {"<unk>", "<s>", "</s>"};
        *text = first[i];
        *type = i == 0 ? TOKEN_TYPE_UNKNOWN : TOKEN_TYPE_CONTROL;
    } else if (i < 3 + 256) {
        snprintf(buf, cap, "<0x%02X>", i - 3);
        *text = buf;
        *type = TOKEN_TYPE_BYTE;
    } else if (i < 3 + 256 + N_SPM_PIECES) {
        *text = spm_pieces[i - 259];
        *score = -(float)(i - 259);
    } else if (i < SPM_FIXED) {
        *text = special_pieces[i - 259 - N_SPM_PIECES];
        *type = TOKEN_TYPE_CONTROL;
    } else {
        snprintf(buf, cap, "<extra_%d>", i - SPM_FIXED);
        *text = buf;
        *score = -1000.0f - (float)i;
    }
}

static int add_tokens(struct synth *s, struct str *toks, float *scores, int32_t *types, char *text,
                      size_t text_cap, bool is_bert)
{
    size_t used = 0;
    for (int i = 0; i < s->p->n_vocab; i++) {
        char buf[32];
        const char *t;
        if (is_bert) {
            if (i < N_BERT_FIXED)
                t = bert_words[i];
            else
                t = (snprintf(buf, sizeof buf, "w%d", i), buf);
            scores[i] = 0.0f;
            types[i] = i < 5 ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_NORMAL;
        } else {
            spm_token(i, buf, sizeof buf, &t, &scores[i], &types[i]);
        }
        size_t n = strlen(t);
        if (used + n > text_cap) return ERR_LIMIT;
        memcpy(text + used, t, n);
        toks[i].ptr = text + used;
        toks[i].len = n;
        used += n;
    }
    int rc = gguf_writer_add_arr_str(s->w, "tokenizer.ggml.tokens", toks, s->p->n_vocab);
    if (rc == ERR_OK)
        rc = gguf_writer_add_arr(s->w, "tokenizer.ggml.scores", GGUF_VALUE_F32, scores,
                                 s->p->n_vocab);
    if (rc == ERR_OK)
        rc = gguf_writer_add_arr(s->w, "tokenizer.ggml.token_type", GGUF_VALUE_I32, types,
                                 s->p->n_vocab);
    return rc;
}

int synth_add_builtin_vocab(struct synth *s, bool is_bert)
{
    const size_t n = (size_t)s->p->n_vocab, text_cap = n * 24;
    struct str *toks = mem_alloc(n * sizeof *toks);
    float *scores = mem_alloc(n * sizeof *scores);
    int32_t *types = mem_alloc(n * sizeof *types);
    char *text = mem_alloc(text_cap);
    int rc = ERR_NOMEM;
    if (toks && scores && types && text)
        rc = add_tokens(s, toks, scores, types, text, text_cap, is_bert);
    mem_free(toks);
    mem_free(scores);
    mem_free(types);
    mem_free(text);
    if (rc == ERR_OK && is_bert) {
        rc = gguf_writer_add_str(s->w, "tokenizer.ggml.model", "bert");
        if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.unknown_token_id", 1);
        if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.cls_token_id", 2);
        if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.seperator_token_id", 3);
        if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.padding_token_id", 0);
        // A reranker's pair layout starts with bos, which llama.cpp takes from bos_token_id
        // (101 by default for bert vocabs, outside this one), and llama.cpp loads a bert
        // only with a token type count.
        if (rc == ERR_OK && s->p->n_cls_out > 0)
            rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.bos_token_id", 2);
        if (rc == ERR_OK && s->p->n_cls_out > 0)
            rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.token_type_count", 2);
        return rc;
    }
    const uint32_t im_end = (uint32_t)(259 + N_SPM_PIECES + 1);
    if (rc == ERR_OK) rc = gguf_writer_add_str(s->w, "tokenizer.ggml.model", "llama");
    if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.bos_token_id", 1);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.eos_token_id", 2);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.unknown_token_id", 0);
    if (rc == ERR_OK) rc = gguf_writer_add_u32(s->w, "tokenizer.ggml.eot_token_id", im_end);
    if (rc == ERR_OK) rc = gguf_writer_add_bool(s->w, "tokenizer.ggml.add_bos_token", true);
    if (rc == ERR_OK) rc = gguf_writer_add_str(s->w, "tokenizer.chat_template", chatml_template);
    return rc;
}

/* Copies one tokenizer.* key of any type. */
static int copy_key(struct gguf_writer *w, const struct gguf *g, int64_t idx, const char *key)
{
    enum gguf_value_type t = gguf_key_type(g, idx), et;
    int64_t n;
    if (t == GGUF_VALUE_STRING) {
        struct str v;
        int rc = gguf_get_str(g, key, &v);
        return rc == ERR_OK ? gguf_writer_add_strn(w, key, v) : rc;
    }
    if (t != GGUF_VALUE_ARRAY) return gguf_writer_add_scalar(w, key, t, gguf_key_raw(g, idx));
    int rc = gguf_get_arr(g, key, &et, &n);
    if (rc != ERR_OK) return rc;
    if (et != GGUF_VALUE_STRING) {
        const void *data;
        rc = gguf_get_arr_data(g, key, &et, &n, &data);
        return rc == ERR_OK ? gguf_writer_add_arr(w, key, et, data, n) : rc;
    }
    struct str *elems = mem_alloc((size_t)(n ? n : 1) * sizeof *elems);
    if (!elems) return ERR_NOMEM;
    for (int64_t i = 0; i < n && rc == ERR_OK; i++)
        rc = gguf_get_arr_str(g, key, i, &elems[i]);
    if (rc == ERR_OK) rc = gguf_writer_add_arr_str(w, key, elems, n);
    mem_free(elems);
    return rc;
}

int synth_copy_vocab(struct synth *s)
{
    const struct gguf *g = s->p->vocab_from;
    int rc = ERR_OK;
    for (int64_t i = 0; i < gguf_key_count(g) && rc == ERR_OK; i++) {
        struct str name = gguf_key_name(g, i);
        char key[256];
        if (!str_has_prefix(name, "tokenizer.") || name.len >= sizeof key) continue;
        memcpy(key, name.ptr, name.len);
        key[name.len] = '\0';
        rc = copy_key(s->w, g, i, key);
    }
    return rc;
}
