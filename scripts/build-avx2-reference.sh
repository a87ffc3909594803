#!/usr/bin/env bash
# Builds the mainline reference's llama-bench and llama-batched-bench as its native build on
# an AVX2-only machine (Haswell to Alder Lake client cores, Zen 1-3) would be: GGML_NATIVE off,
# AVX, AVX2, FMA, F16C and BMI2 on, every AVX-512 and AVX-VNNI extension off. OUTSIDE the
# project, from the checkout ../shared/tools/build-reference.sh made. On an AVX-512 machine it
# stands in for the AVX2 machine the speed targets also name: run it beside our AVX2 kernel set,
#   BENCH_ISAS=avx2 REFERENCE_BIN=$(scripts/build-avx2-reference.sh) IK_REFERENCE_BIN= \
#       scripts/run-bench.sh build/release
# so both sides use the same instructions. Benchmarks only. Prints the bin directory. Takes
# about 10 minutes on 2 cores; reruns are instant.
#   scripts/build-avx2-reference.sh [REFERENCE_DIR]   (default ~/.cache/llamapi-reference)
set -euo pipefail
dir=${1:-$HOME/.cache/llamapi-reference}/llama.cpp
bin=$dir/build-avx2/bin
if [[ -x $bin/llama-bench && -x $bin/llama-batched-bench ]]; then echo "$bin"; exit 0; fi
[[ -f $dir/CMakeLists.txt ]] || {
    echo "no reference source in $dir: run ../shared/tools/build-reference.sh first" >&2
    exit 1
}
cmake -S "$dir" -B "$dir/build-avx2" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
    -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$dir/build-avx2" -j"$(nproc)" --target llama-bench llama-batched-bench >/dev/null
echo "$bin"
