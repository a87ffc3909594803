#!/usr/bin/env bash
# Image encode time of one 448x448 image on a SigLIP-400M-shaped synthetic gemma3 projector
# (F16, written by bench_vision), ours against the reference's llama-mtmd-cli on the same file,
# image size and thread count, in one run. Not part of make test or make bench (the projector
# is 0.8 GB and one encode takes seconds). Usage:
#   make -j2 build/release/bench/bench_vision build/release/bin/gguf-synth
#   scripts/bench-vision.sh [REFERENCE_BIN_DIR] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-$HOME/.cache/llamapi-reference/llama.cpp/build/bin}
threads=${2:-2}
proj=build/siglip400m-gemma3-448-f16.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ours=$(BENCH_VISION_THREADS=$threads build/release/bench/bench_vision)
echo "ours:      $ours"
build/release/bin/gguf-synth --arch gemma3 --embd 128 --heads 4 --heads-kv 2 --layers 2 \
    --ffn 256 --ctx 1024 --swa 0 -o "$tmp/g3.gguf"
python3 - "$tmp/img.png" <<'PY'
import struct, sys, zlib
w = h = 448
raw = b''.join(b'\0' + bytes(((x * 7 + y * 13 + c * 50) & 255) for x in range(w) for c in range(3))
               for y in range(h))
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
                              + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
PY
best=
for rep in 1; do
    ms=$("$bin/llama-mtmd-cli" -m "$tmp/g3.gguf" --mmproj "$proj" --image "$tmp/img.png" -p hi \
        -n 1 --temp 0 -t "$threads" 2>&1 | sed -n 's/.*batch encoding done in \([0-9]*\) ms.*/\1/p')
    [ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
done
echo "reference: image encode 448x448, $threads threads: $best ms (llama-mtmd-cli)"
o=$(printf '%s\n' "$ours" | sed -n 's/.*: \([0-9]*\) ms.*/\1/p')
awk -v o="$o" -v r="$best" 'BEGIN { printf "ours / reference: %.2f (lower is faster)\n", o / r }'
