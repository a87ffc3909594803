#!/usr/bin/env bash
# Engine benchmark: pp512 and tg128 on a synthetic Qwen2.5-0.5B-shaped model (24 layers, 896
# wide, 14 heads / 2 KV heads, FFN 4864, vocab 151936, tied embeddings) at Q8_0, Q4_0, Q4_K_M
# and F16, at 1 and 2 threads, median of 3 runs. Beside each of ours, in the same run, the
# reference's llama-bench on the same file (its native build, as ../shared/tools/build-reference.sh
# makes it: GGML_NATIVE, so it uses what the CPU has) and the ratio. Both sides' instruction
# sets are printed. tg lines also give the share of the memory-bandwidth limit each side
# reaches: weight bytes read per token (the file's size; tied embeddings are read once as the
# output matrix) x tokens/s / the rate at which bench_membw streams a buffer of that same size
# with the same threads. The probe reads as many bytes as a token does because a model that
# fits partly in the last-level cache (hundreds of MiB on server CPUs) is served partly from
# it, by the probe and by decode alike; a fixed-size probe would put such a model above 100%.
#   scripts/run-bench.sh BUILD_DIR
# Environment: BENCH_TYPES (default "q8_0 q4_0 q4_k_m f16"; empty: none), BENCH_THREADS ("1 2"),
# BENCH_RUNS (3), BENCH_ISAS (our kernel sets to run, each with LLAMAPI_ISA, e.g. "avx2 avx512"
# to see what a set buys in the same run; default: the best the CPU has), REFERENCE_BIN
# (directory holding llama-bench; default ~/.cache/llamapi-reference/llama.cpp/build/bin, where
# build-reference.sh puts it; a reference that dies with SIGILL is reported as such, with the
# fix: on a VM whose CPU lists AMX but cannot run it, a native build with AMX turned off), IK_REFERENCE_BIN (optional: a second reference's llama-bench
# directory, e.g. a CPU-focused fork; its ratio is printed too; default: where
# scripts/build-ik-reference.sh puts ik_llama.cpp's, used when present; empty: none).
# Mixture of experts: BENCH_MOE (types, default "q4_k_m"; empty: none) adds a synthetic
# Qwen3-30B-A3B-shaped qwen3moe (2048 wide, 32 heads of 128 / 4 KV heads, 128 experts of 768
# with 8 used per token, vocab 151936; all experts present) with BENCH_MOE_LAYERS (8) of its 48
# layers, so it fits a 24 GiB machine and generates quickly, to the same table; its tg lines
# have no bandwidth share (a token reads only its experts, not the file).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?build dir}
types=${BENCH_TYPES-q8_0 q4_0 q4_k_m f16}
thread_counts=${BENCH_THREADS:-1 2}
threads=${thread_counts##* } # the sections below use the largest count
runs=${BENCH_RUNS:-3}
ref_bin=${REFERENCE_BIN:-$HOME/.cache/llamapi-reference/llama.cpp/build/bin}
ik_bin=${IK_REFERENCE_BIN-$HOME/.cache/llamapi-reference/ik_llama.cpp/build/bin}
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

moe_layers=${BENCH_MOE_LAYERS:-8}
for t in ${BENCH_MOE-q4_k_m}; do
    f=$models/qwen3-30b-a3b-shape-${moe_layers}l-$t.gguf
    if [[ ! -s $f ]]; then
        echo "generating $f"
        "$build/bin/gguf-synth" --arch qwen3moe --layers "$moe_layers" --embd 2048 --heads 32 \
            --heads-kv 4 --head-dim 128 --ffn 768 --experts 128 --experts-used 8 \
            --vocab 151936 --ctx 40960 --rope-base 1000000 --eps 1e-6 --type "$t" --seed 1 \
            -o "$f.tmp" && mv "$f.tmp" "$f"
    fi
    files+=("$f")
done

have_ref=1
if [[ ! -x $ref_bin/llama-bench ]]; then
    have_ref=0
    echo "reference llama-bench not found in $ref_bin: no ratios (build it with" \
         "../shared/tools/build-reference.sh)"
fi
if [[ -n $ik_bin && ! -x $ik_bin/llama-bench ]]; then
    # the default place may simply be empty; a directory the user named must hold it
    [[ -n ${IK_REFERENCE_BIN:-} ]] && echo "IK_REFERENCE_BIN: no llama-bench in $ik_bin"
    ik_bin=
fi

# Instruction sets: ours from our dispatch; the reference's from its CPU backend's feature
# list (system info printed by llama-completion at start-up, when that tool is built).
isas=${BENCH_ISAS:-$("$build/bench/bench_engine" --isa)}
isas=${isas/avx2+vnni/avx2}
main_isa=${isas##* } # the ratio column compares the last one
echo "== kernels: ours $(for i in $isas; do LLAMAPI_ISA=$i "$build/bench/bench_engine" --isa; done | paste -sd' ')"
feats=
if ((have_ref)) && [[ -x $ref_bin/llama-completion ]]; then
    for f in "${files[@]}"; do # the first file it loads (a crashing kernel path skips one)
        feats=$("$ref_bin/llama-completion" -m "$f" -p hi -n 1 -no-cnv -t 1 </dev/null 2>&1 |
            grep -m1 -o 'CPU : .*' | tr '|' '\n' | grep -E '(AVX|AMX|FMA|F16C).*= 1' |
            sed 's/ = 1//; s/ //g' | paste -sd' ' || true)
        [[ -n $feats ]] && break
    done
fi
cache=$ref_bin/../CMakeCache.txt
if ((have_ref)) && [[ -n $feats ]]; then
    echo "== kernels: reference $feats ($ref_bin)"
elif ((have_ref)) && grep -q '^GGML_NATIVE:BOOL=ON' "$cache" 2>/dev/null; then
    # a native build compiles for what -march=native enables here, less what its flags turn off
    cflags=$(sed -n 's/^CMAKE_C_FLAGS:STRING=//p' "$cache")
    # shellcheck disable=SC2086 # the flags are words
    feats=$(echo | cc -march=native $cflags -dM -E - 2>/dev/null |
        grep -oE '__(AVX2|AVX512(F|BW|VL|DQ|VNNI|BF16)|AVXVNNI|AMX_(INT8|BF16|TILE))__' |
        tr -d _ | sort | paste -sd' ')
    echo "== kernels: reference native build (-march=native${cflags:+ $cflags} here:" \
         "${feats:-unknown}; $ref_bin)"
elif ((have_ref)) && [[ -f $cache ]]; then
    feats=$(grep -oE '^GGML_(AVX[A-Z0-9_]*|AMX[A-Z0-9_]*|FMA|F16C):BOOL=ON' "$cache" |
        sed 's/^GGML_//; s/:BOOL=ON//' | paste -sd' ')
    echo "== kernels: reference build with ${feats:-unknown} ($ref_bin)"
fi

ours=$(mktemp)
refout=$(mktemp)
trap 'rm -f "$ours" "$refout"' EXIT
# Weight bytes read per generated token: the GGUF's tensor data (its size minus the header);
# 0 (no share printed) for a mixture of experts, whose tokens read only their experts.
weight_bytes() { [[ $1 == *-a3b-* ]] && echo 0 || stat -c %s "$1"; }

# Why a reference binary stopped, from its exit status ($1) and what ran ($2). SIGILL (132):
# the build uses instructions this CPU or VM does not run; a native build on a CPU listing AMX
# whose hypervisor does not enable the AMX state dies this way on its quantized kernels.
ref_failure() {
    if (($1 == 132)); then
        echo "reference $2 died with SIGILL (illegal instruction): its build uses" \
             "instructions this machine does not run (a native build takes its AMX path where the" \
             "CPU lists AMX but the hypervisor does not enable it). Fix: point REFERENCE_BIN at a" \
             "native build with AMX turned off (cmake -DGGML_NATIVE=ON, with" \
             "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16 in CMAKE_C_FLAGS and CMAKE_CXX_FLAGS)." \
             "No ratio."
    elif (($1 > 128)); then
        echo "reference $2 was killed by signal $(($1 - 128)) ($(kill -l $(($1 - 128)) 2>/dev/null ||
            echo '?')): no ratio"
    else
        echo "reference $2 failed (exit status $1): no ratio"
    fi
}

# llama-bench CSV -> "pp512 t/s" / "tg128 t/s" lines (columns picked by header name). Its
# status is llama-bench's: a run that dies prints nothing (no partial table).
ref_lines() {
    local csv rc=0
    csv=$("$1/llama-bench" -m "$2" -t "$3" -p 512 -n 128 -r "$runs" -o csv 2>/dev/null) || rc=$?
    ((rc == 0)) || return "$rc"
    # the header is plain; data fields are quoted and some hold commas (ik_llama.cpp's ser,
    # "-1,0"), so a data row is split at '","'
    awk 'NR == 1 { n = split($0, h, ","); for (i = 1; i <= n; i++) { gsub(/"/, "", h[i]); c[h[i]] = i }; next }
        { split($0, f, "\",\""); p = f[c["n_prompt"]]; g = f[c["n_gen"]]; ts = f[c["avg_ts"]]
          gsub(/"/, "", p); gsub(/"/, "", g); gsub(/"/, "", ts)
          print ((p + 0 > 0) ? "pp" p : "tg" g), ts }' <<<"$csv"
}

# Streaming read rate (GB/s) of a buffer as large as model $1's weights with $2 threads.
membw_for() {
    local bytes
    bytes=$(weight_bytes "$1")
    ((bytes > 0)) || { echo 0; return; }
    "$build/bench/bench_membw" -t "$2" -m $(((bytes + 1048575) / 1048576)) 2>/dev/null |
        awk '{ print $3 }'
}

for t in $thread_counts; do
    echo "== $t thread(s), median of $runs runs (llama-bench: mean of $runs); per model ours," \
         "then the reference, so machine load hits both alike; bw: tg's weight bytes per" \
         "second over the read rate of a buffer that size (bench_membw, $t threads, printed" \
         "after each model)"
    printf '%-30s %6s' model test
    for i in $isas; do printf ' %9s' "$i"; done
    printf ' %9s %6s %8s %8s%s\n' ref ratio "bw ours" "bw ref" "${ik_bin:+   ik-ref  ratio}"
    for f in "${files[@]}"; do
        name=$(basename "$f" .gguf)
        name=${name#qwen2.5-0.5b-shape-}
        : >"$ours"
        for i in $isas; do
            LLAMAPI_ISA=$i "$build/bench/bench_engine" -t "$t" -r "$runs" -p 512 -n 128 "$f" |
                awk -v i="$i" '{ print $2, i, $3 }' >>"$ours"
        done
        : >"$refout"
        rc=0
        ((have_ref)) && { ref_lines "$ref_bin" "$f" "$t" >"$refout" || rc=$?; }
        if ((rc != 0)); then
            echo "($(ref_failure "$rc" "llama-bench on $name"))"
            : >"$refout"
        fi
        ik=$(mktemp)
        rc=0
        [[ -n $ik_bin ]] && { ref_lines "$ik_bin" "$f" "$t" >"$ik" || rc=$?; }
        if ((rc != 0)); then
            echo "(IK_REFERENCE_BIN: $(ref_failure "$rc" "llama-bench on $name"))"
            : >"$ik"
        fi
        bw=$(membw_for "$f" "$t") # right after both sides ran, under the same load
        awk -v name="$name" -v bytes="$(weight_bytes "$f")" -v bw="$bw" -v ref="$refout" -v ik="$ik" \
            -v isas="$isas" -v main="$main_isa" '
            BEGIN { while ((getline l < ref) > 0) { split(l, a, " "); r[a[1]] = a[2] }
                    while ((getline l < ik) > 0) { split(l, a, " "); k[a[1]] = a[2] }
                    n_isa = split(isas, isa, " ") }
            { v[$1 " " $2] = $3; if (!($1 in seen)) { seen[$1] = 1; tests[++n] = $1 } }
            END { for (j = 1; j <= n; j++) { tt = tests[j]; o = v[tt " " main]
                  rv = (tt in r) ? r[tt] : 0; fo = "-"; fr = "-"
                  if (tt ~ /^tg/ && bw > 0 && bytes > 0) { fo = sprintf("%.0f%%", 100 * bytes * o / (bw * 1e9))
                      if (rv > 0) fr = sprintf("%.0f%%", 100 * bytes * rv / (bw * 1e9)) }
                  line = sprintf("%-30s %6s", name, tt)
                  for (m = 1; m <= n_isa; m++) line = line sprintf(" %9.2f", v[tt " " isa[m]])
                  line = line sprintf(" %9s %6s %8s %8s", rv > 0 ? sprintf("%.2f", rv) : "-",
                                      rv > 0 ? sprintf("%.2f", o / rv) : "-", fo, fr)
                  if (tt in k) line = line sprintf(" %9.2f %6.2f", k[tt], k[tt] > 0 ? o / k[tt] : 0)
                  print line } }' "$ours"
        rm -f "$ik"
        if [[ $bw != 0 ]]; then echo "$(printf '%-30s' "$name") memory read rate $bw GB/s"; fi
    done
done

# Continuous batching: 1-8 streams per step on the Q8_0 model beside llama-batched-bench's
# S_TG, interleaved run by run, with the ratio (scripts/bench-batching.sh; BATCH_REFERENCE_BIN
# names another reference build for it).
# These sections run on the kernel set the ratio column compares (the last of BENCH_ISAS).
export LLAMAPI_ISA=$main_isa
q8=$models/qwen2.5-0.5b-shape-q8_0.gguf
if [[ -s $q8 ]]; then
    BENCH_THREADS=$threads BENCH_RUNS=$runs REFERENCE_BIN=$ref_bin \
        scripts/bench-batching.sh "$build" "$q8"
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
if [[ -s $qwen2_vocab && ! -s $gq8 && " $types " == *" q8_0 "* ]]; then
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
