#!/usr/bin/env bash
# Regenerates tests/data/families/<arch>.json: the reference implementation's teacher-forced
# logits and greedy continuation on each family's synthetic model, which test_families compares
# the engine against. Run by hand (not by make test) after building the release tools:
#   make -j2 build/release/bin/gguf-synth && scripts/gen-family-goldens.sh [REFERENCE_DIR]
# REFERENCE_DIR is a llama.cpp checkout built by ../shared/tools/build-reference.sh (default
# ~/.cache/llamapi-reference/llama.cpp). The models are the ones test_families builds in
# process: keep the options below and FAMILY_CASES in tests/unit/engine/test_families.c in step.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:-$HOME/.cache/llamapi-reference/llama.cpp}
synth=${GGUF_SYNTH:-build/release/bin/gguf-synth}
out=tests/data/families
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$synth" ] || { echo "build $synth first" >&2; exit 1; }
# libggml-cpu and libggml-base after libggml (static link order), OpenMP when the build used it
c++ -O2 -o "$tmp/reference-logits" -x c scripts/reference-logits.c -x none \
    -I"$ref/include" -I"$ref/ggml/include" \
    $(find "$ref/build" -name 'libllama.a') $(find "$ref/build" -name 'libggml.a') \
    $(find "$ref/build" -name 'libggml-cpu.a') $(find "$ref/build" -name 'libggml-base.a') \
    -lgomp -lpthread -lm
# the prompt: BOS, then 23 ids spread over the built-in vocabulary
prompt="1"
for i in $(seq 1 23); do prompt="$prompt $(( (i * 53 + 7) % 290 + 3 ))"; done
mkdir -p "$out"
for arch in gemma2 gemma3 phi3 granite smollm3 olmo2 qwen3moe olmoe granitemoe gpt-oss qwen2vl \
    lfm2 qwen35 qwen35moe mamba2 granitehybrid nemotron_h lfm2moe falcon-h1 nemotron_h_moe; do
    kv=2
    case $arch in olmo2|olmoe) kv=4 ;; esac
    # the reference's qwen2vl ignores the file's RMS epsilon (adds 0): make ours negligible
    eps=1e-5
    [ "$arch" = qwen2vl ] && eps=1e-30
    "$synth" --arch "$arch" --layers 4 --heads-kv "$kv" --type f32 --seed 7 --eps "$eps" \
        -o "$tmp/$arch.gguf"
    # shellcheck disable=SC2086
    "$tmp/reference-logits" "$tmp/$arch.gguf" 128 32 $prompt > "$out/$arch.json"
    echo "$arch: $(wc -c < "$out/$arch.json") bytes"
done
# qwen35 and mamba2 256 wide: their scans' 32-element steps
for arch in qwen35 mamba2; do
    "$synth" --arch "$arch" --layers 4 --embd 256 --ffn 512 --type f32 --seed 7 \
        -o "$tmp/$arch-256.gguf"
    # shellcheck disable=SC2086
    "$tmp/reference-logits" "$tmp/$arch-256.gguf" 128 32 $prompt > "$out/$arch-256.json"
    echo "$arch-256: $(wc -c < "$out/$arch-256.json") bytes"
done
# lfm2 with a sliding window on its attention layer
"$synth" --arch lfm2 --layers 4 --swa 8 --type f32 --seed 7 -o "$tmp/lfm2-swa.gguf"
# shellcheck disable=SC2086
"$tmp/reference-logits" "$tmp/lfm2-swa.gguf" 128 32 $prompt > "$out/lfm2-swa.json"
echo "lfm2-swa: $(wc -c < "$out/lfm2-swa.json") bytes"
# granitehybrid with experts and a shared expert
"$synth" --arch granitehybrid --layers 4 --experts 8 --type f32 --seed 7 \
    -o "$tmp/granitehybrid-moe.gguf"
# shellcheck disable=SC2086
"$tmp/reference-logits" "$tmp/granitehybrid-moe.gguf" 128 32 $prompt \
    > "$out/granitehybrid-moe.json"
echo "granitehybrid-moe: $(wc -c < "$out/granitehybrid-moe.json") bytes"
# the new block types: wider rows (IQ4_XS needs 256), the rest as above
for spec in gpt-oss:mxfp4 llama:iq4_nl llama:iq4_xs; do
    arch=${spec%%:*} type=${spec#*:}
    "$synth" --arch "$arch" --layers 4 --embd 256 --ffn 512 --type "$type" --seed 7 \
        -o "$tmp/$arch-$type.gguf"
    # shellcheck disable=SC2086
    "$tmp/reference-logits" "$tmp/$arch-$type.gguf" 128 32 $prompt > "$out/$arch-$type.json"
    echo "$arch-$type: $(wc -c < "$out/$arch-$type.json") bytes"
done
