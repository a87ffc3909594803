/* Synthetic models: builds a GGUF (through gguf_write) with the metadata, tensor names and
 * shapes of a llama / qwen2 / qwen3 decoder or a bert encoder, seeded random weights scaled so
 * activations stay near unit size, a chosen tensor type (or the Q4_K_M mix), and a tokenizer
 * (a small built-in one, or all tokenizer.* keys copied from another GGUF). For tests and
 * benchmarks; the weights mean nothing. */
#ifndef ENGINE_SYNTH_H
#define ENGINE_SYNTH_H

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

/* Filled by the caller; synth_params_default() gives a small llama. */
struct synth_params {
    const char *arch; // "llama", "qwen2", "qwen3", "bert", "gemma2", "gemma3", "phi3",
                      // "granite", "smollm3", "olmo2", "qwen3moe", "olmoe", "granitemoe",
                      // "gpt-oss", "lfm2", "qwen35", "qwen35moe", "mamba2",
                      // "granitehybrid", "nemotron_h", "nemotron_h_moe", "lfm2moe",
                      // "falcon-h1"
    int n_layer;
    int n_embd;
    int n_head;
    int n_head_kv; // bert: ignored (= n_head)
    int head_dim;  // 0: n_embd / n_head
    int n_ff;
    int n_vocab; // 0 with vocab_from: that file's token count; else >= built-in size
    int n_ctx;   // <arch>.context_length
    bool tied;   // no output.weight: the output reuses token_embd
    float rope_base;
    float norm_eps;
    const char *type; // "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                      // "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs",
                      // "mxfp4", or the mix "q4_k_m"
    uint64_t seed;
    const struct gguf *vocab_from; // borrowed; NULL: the built-in tokenizer
    int pooling_type;              // <arch>.pooling_type written when >= 0 (bert: 1 when < 0,
                                   // 4 with n_cls_out)
    int n_swa;         // sliding window of gemma2/gemma3/olmo2/gpt-oss/lfm2 (keys a query
                       // sees; lfm2: on every attention layer), -1: the family's synthetic
                       // default (8 for gemma, none for olmo2 and lfm2), 0: none
    int n_expert;      // mixture-of-experts families: experts (0: 8); granitehybrid has
                       // experts (and a shared expert) only when this is set
    int n_expert_used; // experts per token (0: 2)
    int ssm_state;     // hybrids' recurrent state: a delta-rule head's width (qwen35) or a
                       // Mamba-2 state size; 0: min(128, head_dim) / min(128, max(16, embd / 4))
    int ssm_heads;     // qwen35's value heads (0: embd / ssm_state) or Mamba-2 heads (0: the
                       // 2 * embd inner width in heads of min(64, max(16, embd / 4)) channels)
    int ssm_groups;    // qwen35's key heads (0: half the value heads) or Mamba-2 groups (0: 2)
    int n_cls_out;     // > 0: a reranker's classification head with this many outputs and
                       // <arch>.classifier.output_labels (bert: cls + cls.output with biases,
                       // decoders: cls.output), pooling_type 4 unless pooling_type says otherwise

    bool is_words_vocab; // the demo vocabulary of synth_words.h (n_vocab ignored); its output
                         // rows favour words, so sampled text is readable valid UTF-8
};

/* Every family feature is on: gemma's window (layers alternate sliding / global), soft-caps
 * low enough to bend typical values, gemma3's separate RoPE bases and linear scaling on global
 * layers, phi3's fused QKV / gate-up, partial rotation and LongRoPE factors (long ones beyond
 * context_length / 4), granite's four multipliers, granitemoe's shared expert, lfm2's
 * short-conv layers (attention on layers 1, 4, 7, ..., 3-tap convolutions; lfm2moe adds
 * sigmoid-routed experts with selection biases after one dense layer), qwen35's Gated
 * DeltaNet layers with gated attention on odd layers and a next-token-prediction block,
 * Mamba-2 mixers with two groups (mamba2 alone, granitehybrid around attention without RoPE,
 * nemotron_h beside ReLU^2 FFN and attention layers, falcon-h1 beside attention in the same
 * layers) (synth_hybrid.c); gemma2 is always
 * tied (the family has no output matrix), olmo2 / olmoe never. */

/* Defaults: llama, 2 layers, 64 wide, 4 heads / 2 KV heads, ffn 128, built-in vocab, ctx 256,
 * separate output, rope base 10000, eps 1e-5, f32, seed 1, no pooling_type, no head. Cannot
 * fail. */
struct synth_params synth_params_default(void);

/* Smallest n_vocab the built-in tokenizer accepts for arch. Cannot fail. */
int synth_builtin_vocab_size(const char *arch);

/* Builds the model into a new writer (caller frees with gguf_writer_free()). ERR_INVALID
 * (bad shape, unknown arch or type, vocab too small; message in err), ERR_UNSUPPORTED (a type
 * without a quantizer), ERR_NOMEM. Deterministic for given params. */
int synth_build(const struct synth_params *p, struct gguf_writer **out, struct errmsg *err);

#endif
