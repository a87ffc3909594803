#!/usr/bin/env bash
# Engine benchmark: pp512 and tg128 on a synthetic Qwen2.5-0.5B-shaped model (24 layers, 896
# wide, 14 heads / 2 KV heads, FFN 4864, vocab 151936, tied embeddings) at Q8_0, Q4_0, Q4_K_M
# and F16, 2 threads, median of 3 runs. With the reference llama-bench built (see
# ../shared/tools/build-reference.sh; outside the repo), runs it on the same files in the same
# run and prints our/reference ratios.
#   scripts/run-bench.sh BUILD_DIR
# Environment: BENCH_TYPES (default "q8_0 q4_0 q4_k_m f16"), BENCH_THREADS (2), BENCH_RUNS (3),
# REFERENCE_BIN (directory holding llama-bench; default: an AVX2-only build of the reference in
# /work/refbuild/llama.cpp/build-avx2/bin when present, else /work/refbuild/llama.cpp/build/bin).
# The AVX2-only build matches the instruction set the engine uses; the native build also uses
# AVX-512/AMX where the CPU has them (and its AMX path crashed on Q8_0 models on this machine).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?build dir}
types=${BENCH_TYPES:-q8_0 q4_0 q4_k_m f16}
threads=${BENCH_THREADS:-2}
runs=${BENCH_RUNS:-3}
ref_root=/work/refbuild/llama.cpp
ref_bin=${REFERENCE_BIN:-$ref_root/build/bin}
[[ -z ${REFERENCE_BIN:-} && -x $ref_root/build-avx2/bin/llama-bench ]] && ref_bin=$ref_root/build-avx2/bin
models=build/bench-models
mkdir -p "$models"
make --no-print-directory BUILD="${build#build/}" tools benches >/dev/null

files=()
for t in $types; do
    f=$models/qwen2.5-0.5b-shape-$t.gguf
    if [[ ! -s $f ]]; then
        echo "generating $f"
        "$build/bin/gguf-synth" --arch qwen2 --layers 24 --embd 896 --heads 14 --heads-kv 2 \
            --ffn 4864 --vocab 151936 --ctx 32768 --tied --rope-base 1000000 --eps 1e-6 \
            --type "$t" --seed 1 -o "$f.tmp" && mv "$f.tmp" "$f"
    fi
    files+=("$f")
done

have_ref=1
if [[ ! -x $ref_bin/llama-bench ]]; then
    have_ref=0
    echo "reference llama-bench not found in $ref_bin: no ratios (build it with" \
         "../shared/tools/build-reference.sh /work/refbuild)"
fi
ours=$(mktemp)
trap 'rm -f "$ours"' EXIT
echo "== $threads threads, median of $runs runs (llama-bench: mean of $runs); per model ours, then" \
     "the reference, so machine load hits both alike"
printf '%-34s %6s %10s %10s %7s\n' model test ours ref ratio
for f in "${files[@]}"; do
    name=$(basename "$f")
    "$build/bench/bench_engine" -t "$threads" -r "$runs" -p 512 -n 128 "$f" >"$ours"
    if ((have_ref == 0)); then
        awk '{ printf "%-34s %6s %10.2f %10s %7s\n", $1, $2, $3, "-", "-" }' "$ours"
        continue
    fi
    # CSV columns vary between versions: pick n_prompt, n_gen and avg_ts by header name.
    "$ref_bin/llama-bench" -m "$f" -t "$threads" -p 512 -n 128 -r "$runs" -o csv 2>/dev/null |
    awk -F, -v name="$name" -v ours="$ours" '
        BEGIN { while ((getline l < ours) > 0) { split(l, a, " "); v[a[1] " " a[2]] = a[3] } }
        NR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); c[h] = i }; next }
        { p = $c["n_prompt"]; g = $c["n_gen"]; ts = $c["avg_ts"]; gsub(/"/, "", p);
          gsub(/"/, "", g); gsub(/"/, "", ts)
          test = (p + 0 > 0) ? "pp" p : "tg" g
          o = v[name " " test]
          printf "%-34s %6s %10.2f %10.2f %7.2f\n", name, test, o, ts, (ts > 0 ? o / ts : 0) }'
done

# Continuous batching: aggregate decode throughput with 1, 2, 4 and 8 sequences per step on the
# Q8_0 model (the cpu platform batches its instances this way), against llama-batched-bench
# (S_TG, the same sequences sharing each step) when that reference binary is built.
q8=$models/qwen2.5-0.5b-shape-q8_0.gguf
if [[ -s $q8 ]]; then
    echo "== continuous batching, $threads threads, median of $runs runs"
    "$build/bench/bench_batch" -t "$threads" -r "$runs" -n 32 "$q8"
    if [[ -x $ref_bin/llama-batched-bench ]]; then
        echo "-- reference llama-batched-bench (S_TG t/s)"
        "$ref_bin/llama-batched-bench" -m "$q8" -t "$threads" -c 2048 -b 512 -ub 512 -npp 16 \
            -ntg 32 -npl 1,2,4,8 2>/dev/null | grep -E '^\|' || true
    fi
fi

# Prompt cache: time to the first token for a new 512-token prompt against the same prompt
# plus a 16-token turn on the instance that cached it (what a multi-turn chat does).
if [[ -s $q8 ]]; then
    echo "== prompt cache, $threads threads, median of $runs runs"
    "$build/bench/bench_prompt_cache" -t "$threads" -r "$runs" -p 512 "$q8"
fi

# Structured output: decode speed with and without a grammar on the Q8_0 model with the real
# qwen2 vocabulary (151936 tokens, from ../shared when present; the built-in vocabulary's
# <extra_N> pieces would make the grammar's vocabulary trie unrealistically regular).
qwen2_vocab=../shared/models/vocab/ggml-vocab-qwen2.gguf
gq8=$models/qwen2.5-0.5b-shape-q8_0-qwen2vocab.gguf
if [[ -s $qwen2_vocab && ! -s $gq8 ]]; then
    echo "generating $gq8"
    "$build/bin/gguf-synth" --arch qwen2 --layers 24 --embd 896 --heads 14 --heads-kv 2 \
        --ffn 4864 --ctx 32768 --tied --rope-base 1000000 --eps 1e-6 --type q8_0 --seed 1 \
        --vocab-from "$qwen2_vocab" -o "$gq8.tmp" && mv "$gq8.tmp" "$gq8"
fi
if [[ -s $gq8 ]]; then
    echo "== structured output, $threads threads, median of $((runs + 2)) runs"
    "$build/bench/bench_grammar_gen" -t "$threads" -r "$((runs + 2))" -n 64 "$gq8"
else
    echo "== structured output: skipped ($qwen2_vocab not found)"
fi
