#!/usr/bin/env bash
# Builds ik_llama.cpp's llama-bench natively, OUTSIDE the project, as the second reference of
# scripts/run-bench.sh (a llama.cpp fork focused on CPU speed; run-bench.sh prints its ratio
# when the build is present). Benchmarks only: nothing of it is linked into llamapi.
#   scripts/build-ik-reference.sh [SOURCE]
# SOURCE: an ik_llama.cpp checkout or git URL (default: https://github.com/ikawrakow/ik_llama.cpp,
# cloned into ~/.cache/llamapi-reference/ik_llama.cpp). Built with GGML_NATIVE=ON as its users
# build it; on a VM whose CPU lists AMX the hypervisor may not enable, set
# IK_CMAKE_FLAGS="-DCMAKE_C_FLAGS=-mno-amx-tile ..." as for the mainline reference. Prints the
# bin directory. Takes 10-20 minutes on 2 cores; reruns are instant.
set -euo pipefail
src=${1:-https://github.com/ikawrakow/ik_llama.cpp}
dir=$HOME/.cache/llamapi-reference/ik_llama.cpp
bin=$dir/build/bin
if [[ -x $bin/llama-bench ]]; then echo "$bin"; exit 0; fi
mkdir -p "$(dirname "$dir")"
if [[ ! -d $dir ]]; then
    if [[ -d $src ]]; then git clone -q "$src" "$dir" || true; else git clone -q --depth 1 "$src" "$dir"; fi
fi
[[ -f $dir/CMakeLists.txt ]] || { echo "no ik_llama.cpp source in $dir" >&2; exit 1; }
# shellcheck disable=SC2086 # the flags are words
cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DBUILD_SHARED_LIBS=OFF ${IK_CMAKE_FLAGS:-} >/dev/null
cmake --build "$dir/build" -j"$(nproc)" --target llama-bench >/dev/null
echo "$bin"
