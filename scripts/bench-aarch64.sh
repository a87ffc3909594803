#!/usr/bin/env bash
# `make ARCH=aarch64 bench` on a non-ARM host: the aarch64 benchmarks under qemu-user, on a
# small synthetic model, to show they build and run. Emulated times say nothing about an ARM
# core's speed; the numbers are printed only as a sign of life.
#   scripts/bench-aarch64.sh BUILD_DIR        (QEMU_AARCH64, AARCH64_BENCH_CPU: max)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?aarch64 build dir}
qemu=${QEMU_AARCH64:-$(command -v qemu-aarch64-static || command -v qemu-aarch64)}
run=("$qemu" -cpu "${AARCH64_BENCH_CPU:-max}")
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== aarch64 under emulation (${run[*]}): a sign of life, not a speed"
for t in q8_0 q4_0 q4_k_m; do
    "${run[@]}" "$dir/bin/gguf-synth" --arch qwen2 --layers 2 --embd 256 --heads 4 --heads-kv 2 \
        --ffn 512 --ctx 512 --type "$t" --seed 1 -o "$work/$t.gguf" >/dev/null
done
"${run[@]}" "$dir/bench/bench_engine" -t 2 -r 1 -p 32 -n 8 "$work"/*.gguf
"${run[@]}" "$dir/bench/bench_batch" -t 2 -r 1 -n 4 "$work/q8_0.gguf"
