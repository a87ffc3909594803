/* Byte-level BPE ("gpt2" vocabs): the text is split into pre-tokens by the regex set named by
 * tokenizer.ggml.pre (run with PCRE2 in UTF+UCP mode, JIT-compiled where available; each regex
 * splits the pieces left by the one before, keeping unmatched gaps as pieces, as llama.cpp's
 * unicode_regex_split), then each pre-token's bytes are merged by rank (lowest first, ties
 * leftmost) with a heap over a linked list. Tokens are indexed by the raw bytes their
 * byte-level text (GPT-2's bytes_to_unicode) stands for, so no re-encoding happens per call. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer/tokenizer_internal.h"

#include "util/buf.h"
#include "util/checked.h"
#include "util/log.h"
#include "util/mem.h"

#include <pcre2.h>
#include <string.h>

/* ---- GPT-2 byte <-> unicode ---- */

static bool byte_is_printable(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The byte that the code point cp stands for, or -1. Printable bytes stand for themselves;
 * the other 68 bytes (0..32, 127..160, 173, in that order) map to U+0100.. (bytes_to_unicode). */
static int unicode_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(127 + k - 33);
    return k == 67 ? 173 : -1;
}

bool tok_bpe_unmap(const char *s, size_t len, char *out, size_t *out_len)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t clen = tok_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        int b = clen ? unicode_to_byte(cp) : -1;
        if (b < 0) return false;
        out[n++] = (char)b;
        i += clen;
    }
    *out_len = n;
    return n > 0;
}

/* ---- pre-tokenizers (regex strings from llama.cpp's llama-vocab.cpp; where it keeps the
 * tokenizer.json original in a comment and runs an adaptation, the original is used here) ---- */

#define RE_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define RE_GPT2         "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                  \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"   \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"        \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"     \
    "+" RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"            \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RE_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"         \
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_DEEPSEEK3                                                                               \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"             \
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

struct pre_family {
    const char *name; // for logs
    const char *regex[TOK_MAX_REGEX];
    bool ignore_merges;
    bool clean_spaces;
};

enum {
    PRE_DEFAULT,
    PRE_LLAMA3,
    PRE_DBRX,
    PRE_DEEPSEEK_LLM,
    PRE_DEEPSEEK_CODER,
    PRE_DEEPSEEK3,
    PRE_FALCON,
    PRE_STARCODER,
    PRE_STARCODER_NOCLEAN,
    PRE_GPT2,
    PRE_GPT2_NOCLEAN,
    PRE_QWEN2,
    PRE_QWEN2_CLEAN,
    PRE_QWEN35,
    PRE_PORO,
    PRE_PORO_CLEAN,
    PRE_CHATGLM4,
    PRE_VIKING,
    PRE_TEKKEN,
    PRE_CHAMELEON,
    PRE_GPT4O,
    PRE_TINY_AYA,
    PRE_BAILINGMOE,
    PRE_SEED_CODER,
    PRE_UFAKZEKA,
    PRE_EXAONE_MOE,
    PRE_MINICPM5,
    PRE_JAIS2,
    PRE_YOUTU,
    PRE_SPARK2_5,
    PRE_LAGUNA,
};

static const struct pre_family k_families[] = {
    [PRE_DEFAULT] = {"default",
                     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
                     false,
                     true},
    [PRE_LLAMA3] = {"llama3", {RE_LLAMA3}, true, true},
    [PRE_DBRX] = {"dbrx", {RE_LLAMA3}, false, true},
    [PRE_DEEPSEEK_LLM] =
        {"deepseek-llm",
         {"[\r\n]",
          "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-"
          "\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-"
          "\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-"
          "\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-"
          "\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-"
          "\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-"
          "\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-"
          "\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-"
          "\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-"
          "\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-"
          "\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-"
          "\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-"
          "\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
          "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+", "\\s+$",
          "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}+"},
         false,
         false},
    [PRE_DEEPSEEK_CODER] = {"deepseek-coder",
                            {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                             "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}"},
                            false,
                            false},
    [PRE_DEEPSEEK3] = {"deepseek-v3",
                       {"\\p{N}{1,3}", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+", RE_DEEPSEEK3},
                       false,
                       false},
    [PRE_FALCON] = {"falcon",
                    {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"},
                    false,
                    true},
    [PRE_STARCODER] = {"starcoder", {"\\p{N}", RE_GPT2}, false, true},
    [PRE_STARCODER_NOCLEAN] = {"starcoder", {"\\p{N}", RE_GPT2}, false, false},
    [PRE_GPT2] = {"gpt-2", {RE_GPT2}, false, true},
    [PRE_GPT2_NOCLEAN] = {"gpt-2", {RE_GPT2}, false, false},
    [PRE_QWEN2] = {"qwen2", {RE_QWEN2}, false, false},
    [PRE_QWEN2_CLEAN] = {"qwen2", {RE_QWEN2}, false, true},
    [PRE_QWEN35] = {"qwen35",
                    {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}"
                                     "\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                    false,
                    false},
    [PRE_PORO] = {"poro",
                  {" ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"},
                  false,
                  false},
    [PRE_PORO_CLEAN] = {"bloom",
                        {" ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"},
                        false,
                        true},
    [PRE_CHATGLM4] = {"chatglm4", {RE_LLAMA3}, false, true},
    [PRE_VIKING] = {"viking",
                    {" ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+", "\\p{N}"},
                    false,
                    false},
    [PRE_TEKKEN] = {"tekken",
                    {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}"
                     "\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
                     "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
                     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                    true,
                    false},
    [PRE_CHAMELEON] = {"chameleon",
                       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                        "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2},
                       false,
                       false},
    [PRE_GPT4O] = {"gpt-4o", {RE_GPT4O}, false, false},
    [PRE_TINY_AYA] = {"tiny_aya", {"\\d{1,3}(?=(?:\\d{3})*\\b)", RE_GPT4O}, false, false},
    [PRE_BAILINGMOE] = {"bailingmoe",
                        {"'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s"
                         "\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
                        false,
                        false},
    [PRE_SEED_CODER] = {"seed-coder",
                        {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}"
                                         "\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                        false,
                        false},
    [PRE_UFAKZEKA] = {"ufakzeka",
                      {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                       "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                      false,
                      false},
    [PRE_EXAONE_MOE] = {"exaone-moe",
                        {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}"
                                         "\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
                                         "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
                        false,
                        true},
    [PRE_MINICPM5] = {"minicpm5",
                      {"\\p{N}{1,3}",
                       RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}"
                                       "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                      true,
                      true},
    [PRE_JAIS2] = {"jais-2",
                   {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}"
                                    "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}"
                                    "(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|"
                                    "\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|"
                                    "\\s{1}"},
                   false,
                   true},
    [PRE_YOUTU] =
        {"youtu",
         {"[\uAC00-\uD7A3\u3131-\u318E]+|["
          "\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B\uFF0C\u3001-\u303F\uFE30-\uFE4F]+"
          "|[\u3105-\u312F]+|[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
          "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}"
          "\\p{Lo}\\p{M}]+" RE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}"
          "\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RE_CONTRACTIONS
          "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         true,
         false},
    [PRE_SPARK2_5] = {"spark2_5",
                      {"\\p{N}{1,3}", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
                       "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}"
                       "\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
                       "\\p{N}"},
                      false,
                      false},
    [PRE_LAGUNA] = {"laguna", {"[^\\n]+|[\\n]+", RE_QWEN2}, false, false},
};

/* tokenizer.ggml.pre names -> family (the name lists of llama.cpp's llama_vocab::impl::load). */
static const struct {
    const char *name;
    int family;
} k_pre_names[] = {
    {"default", PRE_DEFAULT},
    {"llama3", PRE_LLAMA3},
    {"llama-v3", PRE_LLAMA3},
    {"llama-bpe", PRE_LLAMA3},
    {"falcon3", PRE_LLAMA3},
    {"falcon-h1", PRE_LLAMA3},
    {"pixtral", PRE_LLAMA3},
    {"midm-2.0", PRE_LLAMA3},
    {"lfm2", PRE_LLAMA3},
    {"jina-v5-nano", PRE_LLAMA3},
    {"dbrx", PRE_DBRX},
    {"smaug-bpe", PRE_DBRX},
    {"deepseek-llm", PRE_DEEPSEEK_LLM},
    {"deepseek-coder", PRE_DEEPSEEK_CODER},
    {"deepseek-v3", PRE_DEEPSEEK3},
    {"hunyuan-dense", PRE_DEEPSEEK3},
    {"hy_v4", PRE_DEEPSEEK3},
    {"joyai-llm", PRE_DEEPSEEK3},
    {"falcon", PRE_FALCON},
    {"starcoder", PRE_STARCODER},
    {"refact", PRE_STARCODER},
    {"codeshell", PRE_STARCODER},
    {"exaone", PRE_STARCODER},
    {"minerva-7b", PRE_STARCODER},
    {"mellum2", PRE_STARCODER},
    {"command-r", PRE_STARCODER_NOCLEAN},
    {"smollm", PRE_STARCODER_NOCLEAN},
    {"gpt-2", PRE_GPT2},
    {"mpt", PRE_GPT2},
    {"olmo", PRE_GPT2},
    {"jais", PRE_GPT2},
    {"phi-2", PRE_GPT2},
    {"jina-es", PRE_GPT2},
    {"jina-de", PRE_GPT2},
    {"gigachat", PRE_GPT2},
    {"jina-v2-es", PRE_GPT2},
    {"jina-v2-de", PRE_GPT2},
    {"jina-v1-en", PRE_GPT2},
    {"jina-v2-code", PRE_GPT2},
    {"roberta-bpe", PRE_GPT2},
    {"a.x-4.0", PRE_GPT2},
    {"mellum", PRE_GPT2},
    {"modern-bert", PRE_GPT2},
    {"exaone4", PRE_GPT2},
    {"trillion", PRE_GPT2_NOCLEAN},
    {"granite-docling", PRE_GPT2_NOCLEAN},
    {"qwen2", PRE_QWEN2},
    {"deepseek-r1-qwen", PRE_QWEN2},
    {"kormo", PRE_QWEN2},
    {"f2llmv2", PRE_QWEN2},
    {"hunyuan", PRE_QWEN2},
    {"solar-open", PRE_QWEN2},
    {"grok-2", PRE_QWEN2},
    {"stablelm2", PRE_QWEN2_CLEAN},
    {"megrez", PRE_QWEN2_CLEAN},
    {"qwen35", PRE_QWEN35},
    {"poro-chat", PRE_PORO},
    {"bloom", PRE_PORO_CLEAN},
    {"gpt3-finnish", PRE_PORO_CLEAN},
    {"glm4", PRE_CHATGLM4},
    {"chatglm-bpe", PRE_CHATGLM4},
    {"viking", PRE_VIKING},
    {"tekken", PRE_TEKKEN},
    {"chameleon", PRE_CHAMELEON},
    {"gpt-4o", PRE_GPT4O},
    {"llama4", PRE_GPT4O},
    {"kanana2", PRE_GPT4O},
    {"talkie", PRE_GPT4O},
    {"minimax-m2", PRE_GPT4O},
    {"tiny_aya", PRE_TINY_AYA},
    {"cohere2moe", PRE_TINY_AYA},
    {"bailingmoe", PRE_BAILINGMOE},
    {"bailingmoe2", PRE_BAILINGMOE},
    {"llada-moe", PRE_BAILINGMOE},
    {"seed-coder", PRE_SEED_CODER},
    {"ufakzeka", PRE_UFAKZEKA},
    {"exaone-moe", PRE_EXAONE_MOE},
    {"minicpm5", PRE_MINICPM5},
    {"jais-2", PRE_JAIS2},
    {"youtu", PRE_YOUTU},
    {"spark2_5", PRE_SPARK2_5},
    {"laguna", PRE_LAGUNA},
};

static void *pcre_malloc(size_t size, void *data)
{
    (void)data;
    return mem_alloc(size);
}

static void pcre_free(void *p, void *data)
{
    (void)data;
    mem_free(p);
}

static int find_family(struct str pre)
{
    if (pre.len == 0) return PRE_DEFAULT;
    for (size_t i = 0; i < sizeof k_pre_names / sizeof k_pre_names[0]; i++) {
        if (str_eq_cstr(pre, k_pre_names[i].name)) return k_pre_names[i].family;
    }
    // Once per tokenizer (i.e. per model load), not per call.
    log_warn("tokenizer: unknown pre-tokenizer '%.*s', using 'default'", (int)pre.len, pre.ptr);
    return PRE_DEFAULT;
}

/* Rewrites \s so that it also matches U+0085 (NEL): it is White_Space for the regex engines
 * the tokenizers were trained with (Oniguruma, Rust regex, Python re), but not for PCRE2's \s.
 * Outside a class "\s" becomes "[\s\x{85}]" and "\S" becomes "[^\s\x{85}]"; inside a class
 * "\s" gains "\x{85}" (every \S of the known patterns is outside classes). */
static int widen_space_class(const char *re, struct buf *out)
{
    bool in_class = false;
    int rc = ERR_OK;
    for (size_t i = 0; re[i] && rc == ERR_OK; i++) {
        if (re[i] == '\\' && re[i + 1]) {
            char c = re[++i];
            if (c == 's')
                rc = buf_append_cstr(out, in_class ? "\\s\\x{85}" : "[\\s\\x{85}]");
            else if (c == 'S' && !in_class)
                rc = buf_append_cstr(out, "[^\\s\\x{85}]");
            else if ((rc = buf_append_byte(out, '\\')) == ERR_OK)
                rc = buf_append_byte(out, c);
            continue;
        }
        if (re[i] == '[' && !in_class)
            in_class = true;
        else if (re[i] == ']' && in_class)
            in_class = false;
        rc = buf_append_byte(out, re[i]);
    }
    return rc;
}

/* Compiles one split pattern (NUL-terminated) into t->regex. */
static int compile_split(struct tokenizer *t, pcre2_compile_context *cc, const char *re,
                         const char *family, struct errmsg *err)
{
    int code;
    PCRE2_SIZE at;
    struct buf pat;
    buf_init(&pat);
    if (widen_space_class(re, &pat) != ERR_OK || (pat.len == 0 && buf_reserve(&pat, 1) != ERR_OK)) {
        buf_deinit(&pat);
        return errmsg_set(err, ERR_NOMEM, "out of memory compiling the pre-tokenizer");
    }
    // $ is the end of the subject only, as in the engines the patterns were written for.
    pcre2_code *re_code =
        pcre2_compile((PCRE2_SPTR)pat.data, pat.len, PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
                      &code, &at, cc);
    buf_deinit(&pat);
    if (!re_code) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(code, msg, sizeof msg);
        return errmsg_set(
            err,
            code == PCRE2_ERROR_HEAP_FAILED || code == PCRE2_ERROR_NOMEMORY ? ERR_NOMEM
                                                                            : ERR_UNSUPPORTED,
            "pre-tokenizer %s regex %d: %s at %zu", family, t->n_regex, (char *)msg, (size_t)at);
    }
    (void)pcre2_jit_compile(re_code, PCRE2_JIT_COMPLETE); // interpreted when JIT is unavailable
    t->regex[t->n_regex++] = re_code;
    return ERR_OK;
}

/* The vocab's own split patterns (a tokenizer.json Split pre-tokenizer), each copied to a
 * NUL-terminated string first. */
static int compile_custom(struct tokenizer *t, pcre2_compile_context *cc, const struct vocab *v,
                          struct errmsg *err)
{
    if (v->n_pre_regex > TOK_MAX_REGEX)
        return errmsg_set(err, ERR_UNSUPPORTED, "more than %d pre-tokenizer regexes",
                          TOK_MAX_REGEX);
    int rc = ERR_OK;
    for (int32_t i = 0; i < v->n_pre_regex && rc == ERR_OK; i++) {
        struct buf z;
        buf_init(&z);
        rc = buf_append(&z, v->pre_regex[i].len ? v->pre_regex[i].ptr : "", v->pre_regex[i].len);
        if (rc == ERR_OK) rc = buf_append_byte(&z, '\0');
        if (rc != ERR_OK)
            rc = errmsg_set(err, ERR_NOMEM, "out of memory compiling the pre-tokenizer");
        else
            rc = compile_split(t, cc, z.data, "tokenizer.json", err);
        buf_deinit(&z);
    }
    return rc;
}

int tok_bpe_setup(struct tokenizer *t, const struct vocab *v, struct errmsg *err)
{
    const struct pre_family *f =
        &k_families[v->n_pre_regex > 0 ? PRE_DEFAULT : find_family(v->pre)];
    t->ignore_merges = f->ignore_merges || v->ignore_merges;
    t->clean_spaces = f->clean_spaces;
    pcre2_general_context *g = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
    if (!g) return errmsg_set(err, ERR_NOMEM, "out of memory compiling the pre-tokenizer");
    t->regex_gctx = g;
    pcre2_compile_context *cc = pcre2_compile_context_create(g);
    if (!cc) return errmsg_set(err, ERR_NOMEM, "out of memory compiling the pre-tokenizer");
    int rc = ERR_OK;
    if (v->n_pre_regex > 0) {
        rc = compile_custom(t, cc, v, err);
    } else {
        for (int i = 0; i < TOK_MAX_REGEX && f->regex[i] && rc == ERR_OK; i++)
            rc = compile_split(t, cc, f->regex[i], f->name, err);
    }
    pcre2_compile_context_free(cc);
    return rc;
}

void tok_bpe_free_regex(struct tokenizer *t)
{
    for (int i = 0; i < t->n_regex; i++)
        pcre2_code_free(t->regex[i]);
    t->n_regex = 0;
    pcre2_general_context_free(t->regex_gctx);
    t->regex_gctx = NULL;
}

/* ---- merge table ---- */

static uint64_t merge_key(tok_id left, tok_id right)
{
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static size_t merge_slot(uint64_t key, size_t mask)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 31)) & mask;
}

static const struct tok_merge *merge_find(const struct tokenizer *t, tok_id left, tok_id right)
{
    if (!t->merges) return NULL;
    uint64_t key = merge_key(left, right);
    for (size_t i = merge_slot(key, t->merges_mask);; i = (i + 1) & t->merges_mask) {
        const struct tok_merge *m = &t->merges[i];
        if (m->rank < 0) return NULL;
        if (m->key == key) return m;
    }
}

/* Inserts one "left right" rule; rules whose halves are not tokens are skipped, and the first
 * rule for a pair wins (llama.cpp's bpe_ranks.emplace). */
static void merge_insert(struct tokenizer *t, struct str rule, int32_t rank, char *scratch)
{
    const char *sp = rule.len > 1 ? memchr(rule.ptr + 1, ' ', rule.len - 1) : NULL;
    if (!sp) return;
    size_t llen = (size_t)(sp - rule.ptr), rlen = rule.len - llen - 1, lraw, rraw;
    if (!tok_bpe_unmap(rule.ptr, llen, scratch, &lraw) ||
        !tok_bpe_unmap(sp + 1, rlen, scratch + lraw, &rraw))
        return;
    tok_id l = tok_map_find(&t->key_map, t->arena, scratch, lraw);
    tok_id r = tok_map_find(&t->key_map, t->arena, scratch + lraw, rraw);
    if (l == TOK_ID_NONE || r == TOK_ID_NONE) return;
    uint64_t key = merge_key(l, r);
    size_t i = merge_slot(key, t->merges_mask);
    while (t->merges[i].rank >= 0) {
        if (t->merges[i].key == key) return;
        i = (i + 1) & t->merges_mask;
    }
    t->merges[i] =
        (struct tok_merge){key, rank, tok_map_find(&t->key_map, t->arena, scratch, lraw + rraw)};
}

int tok_bpe_build_merges(struct tokenizer *t, const struct vocab *v, struct errmsg *err)
{
    size_t cap = 16, need, max_len = 0;
    if (!size_mul((size_t)v->n_merges, 2, &need))
        return errmsg_set(err, ERR_LIMIT, "too many merges");
    while (cap < need)
        cap *= 2;
    for (int32_t i = 0; i < v->n_merges; i++)
        max_len = v->merges[i].len > max_len ? v->merges[i].len : max_len;
    t->merges = mem_alloc(cap * sizeof *t->merges);
    char *scratch = mem_alloc(max_len + 1);
    if (!t->merges || !scratch) {
        mem_free(scratch);
        return errmsg_set(err, ERR_NOMEM, "out of memory indexing merges");
    }
    for (size_t i = 0; i < cap; i++)
        t->merges[i] = (struct tok_merge){0, -1, TOK_ID_NONE};
    t->merges_mask = cap - 1;
    for (int32_t i = 0; i < v->n_merges; i++) {
        if (v->merges[i].len > 0 && v->merges[i].ptr) merge_insert(t, v->merges[i], i, scratch);
    }
    mem_free(scratch);
    return ERR_OK;
}

/* ---- encoding ---- */

/* Per-call scratch, reused across the pre-tokens of one call. */
struct bpe_session {
    const struct tokenizer *tok;
    const char *text; // the fragment being encoded
    struct tok_span *pieces, *next;
    size_t n_pieces, n_next, pieces_cap;
    struct tok_sym *sym;
    size_t sym_cap;
    struct tok_heap heap;
    pcre2_match_data *md;
};

static int piece_push(struct bpe_session *bs, size_t off, size_t len)
{
    if (len == 0) return ERR_OK;
    if (bs->n_next == bs->pieces_cap) {
        size_t cap = bs->pieces_cap ? bs->pieces_cap * 2 : 64, bytes;
        if (!size_mul(cap, sizeof(struct tok_span), &bytes)) return ERR_LIMIT;
        struct tok_span *a = mem_realloc(bs->pieces, bytes);
        if (!a) return ERR_NOMEM;
        bs->pieces = a;
        struct tok_span *b = mem_realloc(bs->next, bytes);
        if (!b) return ERR_NOMEM;
        bs->next = b;
        bs->pieces_cap = cap;
    }
    bs->next[bs->n_next++] = (struct tok_span){(uint32_t)off, (uint32_t)len};
    return ERR_OK;
}

static int run_match(const pcre2_code *re, const char *s, size_t len, size_t start,
                     pcre2_match_data *md)
{
    int n = pcre2_match(re, (PCRE2_SPTR)s, len, start, PCRE2_NO_UTF_CHECK, md, NULL);
    if (n == PCRE2_ERROR_JIT_STACKLIMIT) // deep backtracking: retry with the heap interpreter
        n = pcre2_match(re, (PCRE2_SPTR)s, len, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    return n;
}

/* Splits one piece by re: matches and the gaps between them become pieces. */
static int split_piece(struct bpe_session *bs, const pcre2_code *re, struct tok_span p)
{
    const char *s = bs->text + p.off;
    size_t pos = 0, gap = 0;
    int rc = ERR_OK;
    while (pos <= p.len && rc == ERR_OK) {
        int n = run_match(re, s, p.len, pos, bs->md);
        if (n == PCRE2_ERROR_NOMATCH) break;
        if (n < 0) return n == PCRE2_ERROR_NOMEMORY ? ERR_NOMEM : ERR_LIMIT;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(bs->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { // empty match: no piece, step one character
            uint32_t cp;
            size_t clen =
                ms < p.len ? tok_utf8_decode((const unsigned char *)s + ms, p.len - ms, &cp) : 1;
            pos = ms + (clen ? clen : 1);
            continue;
        }
        rc = piece_push(bs, p.off + gap, ms - gap);
        if (rc == ERR_OK) rc = piece_push(bs, p.off + ms, me - ms);
        pos = gap = me;
    }
    if (rc == ERR_OK && gap < p.len) rc = piece_push(bs, p.off + gap, p.len - gap);
    return rc;
}

static int pretokenize(struct bpe_session *bs, size_t len)
{
    const struct tokenizer *t = bs->tok;
    int rc = piece_push(bs, 0, len);
    for (int r = 0; r < t->n_regex && rc == ERR_OK; r++) {
        struct tok_span *tmp = bs->pieces;
        bs->pieces = bs->next;
        bs->next = tmp;
        bs->n_pieces = bs->n_next;
        bs->n_next = 0;
        for (size_t i = 0; i < bs->n_pieces && rc == ERR_OK; i++)
            rc = split_piece(bs, t->regex[r], bs->pieces[i]);
    }
    return rc;
}

static int add_bigram(struct bpe_session *bs, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return ERR_OK;
    const struct tok_sym *l = &bs->sym[left], *r = &bs->sym[right];
    if (l->id == TOK_ID_NONE || r->id == TOK_ID_NONE) return ERR_OK;
    const struct tok_merge *m = merge_find(bs->tok, l->id, r->id);
    if (!m) return ERR_OK;
    struct tok_bigram b = {-(double)m->rank, left, right, l->len + r->len};
    return tok_heap_push(&bs->heap, b);
}

static int merge_word(struct bpe_session *bs, int32_t n_sym)
{
    int rc = ERR_OK;
    bs->heap.n = 0;
    for (int32_t i = 1; i < n_sym && rc == ERR_OK; i++)
        rc = add_bigram(bs, i - 1, i);
    while (rc == ERR_OK && bs->heap.n > 0) {
        struct tok_bigram b = tok_heap_pop(&bs->heap);
        struct tok_sym *l = &bs->sym[b.left], *r = &bs->sym[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.size)
            continue; // stale: a side was merged since this pair was queued
        const struct tok_merge *m = merge_find(bs->tok, l->id, r->id);
        l->id = m ? m->result : TOK_ID_NONE;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) bs->sym[r->next].prev = b.left;
        rc = add_bigram(bs, l->prev, b.left);
        if (rc == ERR_OK) rc = add_bigram(bs, b.left, l->next);
    }
    return rc;
}

static int emit_word(struct bpe_session *bs, const char *w, int32_t n_sym, struct tok_ids *out)
{
    const struct tokenizer *t = bs->tok;
    int rc = ERR_OK;
    for (int32_t i = 0; i < n_sym && rc == ERR_OK; i++) {
        const struct tok_sym *s = &bs->sym[i];
        if (s->len == 0) continue;
        tok_id id = s->id;
        if (id == TOK_ID_NONE) id = tok_map_find(&t->key_map, t->arena, w + s->off, s->len);
        if (id != TOK_ID_NONE) {
            rc = tok_ids_push(out, id);
            continue;
        }
        for (uint32_t k = 0; k < s->len && rc == ERR_OK; k++) { // bytes without a token drop
            tok_id b = t->byte_id[(unsigned char)w[s->off + k]];
            if (b != TOK_ID_NONE) rc = tok_ids_push(out, b);
        }
    }
    return rc;
}

static int encode_word(struct bpe_session *bs, const char *w, size_t len, struct tok_ids *out)
{
    const struct tokenizer *t = bs->tok;
    if (t->ignore_merges) {
        tok_id id = tok_map_find(&t->key_map, t->arena, w, len);
        if (id != TOK_ID_NONE) return tok_ids_push(out, id);
    }
    if (len > bs->sym_cap) {
        size_t bytes;
        if (!size_mul(len, sizeof *bs->sym, &bytes)) return ERR_LIMIT;
        struct tok_sym *p = mem_realloc(bs->sym, bytes);
        if (!p) return ERR_NOMEM;
        bs->sym = p;
        bs->sym_cap = len;
    }
    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++)
        bs->sym[i] = (struct tok_sym){i - 1, i + 1 < n ? i + 1 : -1, (uint32_t)i, 1,
                                      t->byte_id[(unsigned char)w[i]]};
    int rc = merge_word(bs, n);
    return rc == ERR_OK ? emit_word(bs, w, n, out) : rc;
}

int tok_bpe_encode(const struct tokenizer *t, const char *s, size_t len, struct tok_ids *out)
{
    if (len > INT32_MAX) return ERR_LIMIT;
    struct bpe_session bs;
    memset(&bs, 0, sizeof bs);
    bs.tok = t;
    bs.text = s;
    int rc = ERR_OK;
    if (t->n_regex > 0) {
        bs.md = pcre2_match_data_create(16, t->regex_gctx);
        // 16 pairs: only the whole-match offsets are read; fewer slots than groups is fine
        if (!bs.md) rc = ERR_NOMEM;
    }
    if (rc == ERR_OK) rc = pretokenize(&bs, len);
    for (size_t i = 0; i < bs.n_next && rc == ERR_OK; i++)
        rc = encode_word(&bs, s + bs.next[i].off, bs.next[i].len, out);
    pcre2_match_data_free(bs.md);
    mem_free(bs.pieces);
    mem_free(bs.next);
    mem_free(bs.sym);
    mem_free(bs.heap.items);
    return rc;
}
