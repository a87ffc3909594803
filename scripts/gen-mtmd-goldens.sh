#!/usr/bin/env bash
# Regenerates tests/data/mtmd/: test images, and the reference implementation's image
# embeddings and greedy answers for them with the shared tiny Gemma 3 projector and a
# synthetic Gemma 3 text model, which test_clip and tests/e2e/vision.test.mjs compare against;
# the same for a synthetic Qwen2.5-VL projector and text model (test_clip_qwen2vl,
# tests/e2e/vision_qwen2vl.test.mjs) and a synthetic Ultravox audio projector.
# Run by hand (not by make test) after building the release tools:
#   make -j2 build/release/bin/gguf-synth && scripts/gen-mtmd-goldens.sh [REFERENCE_BIN_DIR]
# REFERENCE_BIN_DIR holds llama-mtmd-cli (default ~/.cache/llamapi-reference/llama.cpp/build-noamx/bin,
# a native build with AMX off; else .../build/bin).
# ONLY=audio regenerates the audio goldens alone.
# Keep the gguf-synth options and the prompt in step with test_clip.c and the e2e test.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=$HOME/.cache/llamapi-reference/llama.cpp
bin=${1:-$([ -x "$ref/build-noamx/bin/llama-mtmd-cli" ] && echo "$ref/build-noamx/bin" || echo "$ref/build/bin")}
synth=${GGUF_SYNTH:-build/release/bin/gguf-synth}
proj=../shared/models/mmproj/mmproj-tinygemma3.gguf
out=tests/data/mtmd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$synth" ] || { echo "build $synth first" >&2; exit 1; }
[ -x "${MMPROJ_SYNTH:-build/release/bin/mmproj-synth}" ] || { echo "build mmproj-synth first" >&2; exit 1; }
mkdir -p "$out"
# The answers of the reference's cli (any of the -n 12 runs below): it logs through a background
# thread and may exit before its last lines are out, so run it several times and keep the longest
# output (a complete one ends with the two final newlines). What it prints after the marker
# line, as hex (the synthetic vocabulary answers in arbitrary bytes): a newline, the answer, one
# more newline when it ended on an end-of-generation token (not at -n), then two newlines.
answer() { # answer NAME OUT_HEX cli-args...
    local name=$1 hex_out=$2 best= hex
    shift 2
    for try in 1 2 3 4 5 6; do
        MTMD_TEST_RESPONSE_MARKER=@@ANSWER@@ "$bin/llama-mtmd-cli" "$@" 2>/dev/null \
            > "$tmp/$name.out"
        hex=$(sed -n '/^@@ANSWER@@$/,$p' "$tmp/$name.out" | tail -n +2 | xxd -p | tr -d '\n')
        [ ${#hex} -gt ${#best} ] && best=$hex
    done
    case $best in 0a*0a0a) ;; *) echo "$name: no complete answer from the cli" >&2; exit 1 ;; esac
    printf '%s' "$best" > "$hex_out"
    echo "$name: $best"
}
mmsynth=${MMPROJ_SYNTH:-build/release/bin/mmproj-synth}
if [ "${ONLY:-}" != audio ]; then
(cd "$out" && python3 ../../../scripts/mtmd-test-images.py)
"$synth" --arch gemma3 --embd 128 --heads 4 --heads-kv 2 --layers 2 --ffn 256 --ctx 1024 \
    --swa 0 --seed 2 -o "$tmp/g3.gguf"
# a synthetic projector written by our tool, with pooling (merge 2) and Q8_0 blocks; keep its
# options in step with test_clip.c's SYNTH_POOL
"$mmsynth" --image 48 --patch 4 --merge 2 --embd 96 --heads 3 --layers 3 --ffn 256 --out 128 \
    --type q8_0 --seed 5 -o "$tmp/syn-pool.gguf"
MTMD_DEBUG_EMBEDDINGS="$out/syn-pool-c.emb" "$bin/llama-mtmd-cli" -m "$tmp/g3.gguf" \
    --mmproj "$tmp/syn-pool.gguf" --image "$out/c.png" -p "hi" -n 1 --temp 0 -t 1 \
    >/dev/null 2>&1
# a synthetic Qwen2.5-VL projector (window attention every other block); keep its options in
# step with test_clip_qwen2vl.c's synth_params
(cd "$out" && python3 ../../../scripts/mtmd-qwen-images.py)
"$mmsynth" --projector qwen2.5vl_merger --image 448 --patch 14 --merge 2 --embd 64 --heads 4 \
    --layers 4 --ffn 96 --wa 2 --out 128 --type f16 --seed 7 -o "$tmp/qv.gguf"
for img in qa qb qz; do
    MTMD_DEBUG_EMBEDDINGS="$out/$img.emb" "$bin/llama-mtmd-cli" -m "$tmp/g3.gguf" \
        --mmproj "$tmp/qv.gguf" --image "$out/$img.png" -p "hi" -n 1 --temp 0 -t 1 \
        >/dev/null 2>&1
done
# Qwen2.5-VL image chat: a synthetic qwen2vl text model (M-RoPE sections [4, 6, 6, 0]) with
# the synthetic projector above; the reference's greedy answers for a square image (qa,
# 224x224: an 8x8 grid), a non-square one (qb, 200x150: fitted into 196x140, a 7x5 grid) and
# a large one (qc, 840x616: a 30x22 grid, 660 positions, more than one batch of 512).
# Keep the options in step with tests/e2e/vision_qwen2vl.test.mjs.
"$synth" --arch qwen2vl --embd 128 --heads 4 --heads-kv 2 --layers 2 --ffn 256 --ctx 1024 \
    --seed 3 -o "$tmp/qlm.gguf"
for img in qa qb qc; do
    best=
    for try in 1 2 3 4 5 6; do
        MTMD_TEST_RESPONSE_MARKER=@@ANSWER@@ "$bin/llama-mtmd-cli" -m "$tmp/qlm.gguf" \
            --mmproj "$tmp/qv.gguf" --image "$out/$img.png" -p "What is this?" -n 12 --temp 0 \
            -t 1 2>/dev/null > "$tmp/$img.out"
        hex=$(sed -n '/^@@ANSWER@@$/,$p' "$tmp/$img.out" | tail -n +2 | xxd -p | tr -d '\n')
        [ ${#hex} -gt ${#best} ] && best=$hex
    done
    # 12 tokens without an end-of-generation token: a newline, the answer, two newlines
    case $best in 0a*0a0a) ;; *) echo "$img: no complete answer from the cli" >&2; exit 1 ;; esac
    printf '%s' "$best" > "$out/$img.answer.hex"
    echo "$img: $(cat "$out/$img.answer.hex")"
done
for img in a b c; do
    # The cli logs through a background thread and may exit before its last lines are out:
    # run it several times and keep the longest output (a complete one ends with the two
    # final newlines).
    best=
    for try in 1 2 3 4 5 6; do
        # MTMD_DEBUG_EMBEDDINGS=FILE: int32 n_tokens, int32 n_embd, then the floats
        MTMD_DEBUG_EMBEDDINGS="$out/$img.emb" MTMD_TEST_RESPONSE_MARKER=@@ANSWER@@ \
            "$bin/llama-mtmd-cli" -m "$tmp/g3.gguf" --mmproj "$proj" --image "$out/$img.png" \
            -p "What is this?" -n 12 --temp 0 -t 1 2>/dev/null > "$tmp/$img.out"
        # What the cli prints after the marker line, as hex (the synthetic vocabulary answers
        # in arbitrary bytes): a newline, the answer, one more newline when it ended on an
        # end-of-generation token (not at -n), then two newlines.
        hex=$(sed -n '/^@@ANSWER@@$/,$p' "$tmp/$img.out" | tail -n +2 | xxd -p | tr -d '\n')
        [ ${#hex} -gt ${#best} ] && best=$hex
    done
    case $best in 0a*0a0a) ;; *) echo "$img: no complete answer from the cli" >&2; exit 1 ;; esac
    printf '%s' "$best" > "$out/$img.answer.hex"
    echo "$img: $(cat "$out/$img.answer.hex")"
done
fi

# Audio: a synthetic Ultravox projector written by our tool (keep its options in step with
# clip_synth_audio_params_default(), which test_clip_audio.c uses) and a synthetic llama text
# model; the reference's audio embeddings and greedy answers for the test WAVs (16 kHz mono,
# so no resampler is involved). Stack factor 4: with 8 the reference counts 187 tokens for a
# 30 s window but its graph makes 188 and it aborts.
(cd "$out" && python3 ../../../scripts/mtmd-test-audio.py)
"$mmsynth" --projector ultravox --mel 80 --embd 64 --layers 2 --heads 4 --ffn 128 --stack 4 \
    --proj-ffn 128 --out 128 --type f32 --seed 1 -o "$tmp/uv.gguf"
"$synth" --arch llama --embd 128 --heads 4 --heads-kv 2 --layers 2 --ffn 256 --ctx 1024 \
    --seed 4 -o "$tmp/lm.gguf"
# The reference's log-mel spectrograms, through its own preprocessor (scripts/mtmd-mel-dump.cpp
# built against its headers and static libraries; REFERENCE_SRC and REFERENCE_BUILD default to
# the reference checkout and the bin directory's build).
ref_src=${REFERENCE_SRC:-$HOME/.cache/llamapi-reference/llama.cpp}
ref_build=${REFERENCE_BUILD:-$(dirname "$bin")}
g++ -std=c++17 -O1 -I"$ref_src/tools/mtmd" -I"$ref_src/include" -I"$ref_src/ggml/include" \
    scripts/mtmd-mel-dump.cpp "$ref_build/tools/mtmd/libmtmd.a" "$ref_build/src/libllama.a" \
    "$ref_build/ggml/src/libggml.a" "$ref_build/ggml/src/libggml-cpu.a" \
    "$ref_build/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl -o "$tmp/mel-dump"
for snd in a b silent; do
    "$tmp/mel-dump" "$tmp/uv.gguf" "$out/audio-$snd.wav" "$out/audio-$snd.mel" 256 \
        2>/dev/null
    best=
    for try in 1 2 3 4 5 6; do
        MTMD_DEBUG_EMBEDDINGS="$out/audio-$snd.emb" MTMD_TEST_RESPONSE_MARKER=@@ANSWER@@ \
            "$bin/llama-mtmd-cli" -m "$tmp/lm.gguf" --mmproj "$tmp/uv.gguf" \
            --audio "$out/audio-$snd.wav" -p "What is this?" -n 12 --temp 0 -t 1 \
            2>/dev/null > "$tmp/$snd.out"
        hex=$(sed -n '/^@@ANSWER@@$/,$p' "$tmp/$snd.out" | tail -n +2 | xxd -p | tr -d '\n')
        [ ${#hex} -gt ${#best} ] && best=$hex
    done
    case $best in 0a*0a0a) ;; *) echo "audio-$snd: no complete answer from the cli" >&2; exit 1 ;; esac
    printf '%s' "$best" > "$out/audio-$snd.answer.hex"
    echo "audio-$snd: $(cat "$out/audio-$snd.answer.hex")"
done
# A clip of two 30 s windows (the answer only; tests/e2e/audio.test.mjs checks it).
answer audio-long "$out/audio-long.answer.hex" -m "$tmp/lm.gguf" --mmproj "$tmp/uv.gguf" \
    --audio "$out/audio-long.wav" -p "What is this?" -n 12 --temp 0 -t 1
