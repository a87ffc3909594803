/* Model-family defaults for struct vocab, taken from llama.cpp's llama_vocab::impl::load (the
 * values it uses when a GGUF lacks the optional tokenizer keys). */
#include "text/tokenizer/vocab.h"

#include <string.h>

/* Pre-tokenizers for which llama.cpp turns add_bos on by default (llama-vocab.cpp). */
static const char *const k_pre_add_bos[] = {
    "llama3",   "llama-v3", "llama-bpe",    "falcon3", "falcon-h1", "pixtral",
    "midm-2.0", "lfm2",     "jina-v5-nano", "tekken",  "chameleon",
};

static bool pre_adds_bos(struct str pre)
{
    for (size_t i = 0; i < sizeof k_pre_add_bos / sizeof k_pre_add_bos[0]; i++) {
        if (str_eq_cstr(pre, k_pre_add_bos[i])) return true;
    }
    return false;
}

void vocab_init_defaults(struct vocab *v, enum vocab_kind kind, struct str pre)
{
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->pre = pre;
    v->bos_id = v->eos_id = v->unk_id = v->sep_id = v->pad_id = TOK_ID_NONE;
    v->cls_id = v->mask_id = v->eot_id = v->eom_id = TOK_ID_NONE;
    v->fim_pre_id = v->fim_suf_id = v->fim_mid_id = TOK_ID_NONE;
    v->fim_pad_id = v->fim_rep_id = v->fim_sep_id = TOK_ID_NONE;
    v->escape_ws = true;
    switch (kind) {
    case VOCAB_KIND_LLAMA:
        v->bos_id = 1;
        v->eos_id = 2;
        v->unk_id = 0;
        v->add_bos = true;
        v->add_space_prefix = true;
        break;
    case VOCAB_KIND_BERT:
        v->bos_id = 101;
        v->cls_id = 101;
        v->unk_id = 100;
        v->sep_id = 102;
        v->pad_id = 0;
        v->mask_id = 103;
        v->add_bos = true;
        v->add_sep = true;
        v->lowercase = true;
        v->strip_accents = true;
        break;
    case VOCAB_KIND_GPT2:
        v->bos_id = 11;
        v->eos_id = 11;
        v->add_bos = pre_adds_bos(pre);
        break;
    case VOCAB_KIND_UGM:
        v->eos_id = 1;
        v->unk_id = 2;
        v->pad_id = 0;
        v->add_eos = true;
        break;
    }
}

bool vocab_kind_parse(struct str name, enum vocab_kind *out)
{
    if (str_eq_cstr(name, "llama")) {
        *out = VOCAB_KIND_LLAMA;
        return true;
    }
    if (str_eq_cstr(name, "gpt2")) {
        *out = VOCAB_KIND_GPT2;
        return true;
    }
    if (str_eq_cstr(name, "bert")) {
        *out = VOCAB_KIND_BERT;
        return true;
    }
    if (str_eq_cstr(name, "t5")) {
        *out = VOCAB_KIND_UGM;
        return true;
    }
    return false;
}
