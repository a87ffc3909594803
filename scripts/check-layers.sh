#!/usr/bin/env bash
# Checks every `#include "dir/…"` under src/ against the layering of docs/ARCHITECTURE.md: a
# file may include its own layer and the layers its row below names, nothing above. One line
# per wrong-way include ("src/api/x.c: api -> server (server/config.h)"), then exit 1; "layers:
# ok" and exit 0 when there is none. `make test` runs it before building anything.
#   scripts/check-layers.sh [SRC_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-src}

# What each layer may include besides itself (docs/ARCHITECTURE.md, "Layers" and
# "Deliberate differences"). server/ is the composition root: main.c wires every layer below.
declare -A allowed=(
    [server]="api core hub platform engine media text util"
    [api]="core hub platform media text util"
    [core]="platform util"
    [platform]="engine media text util"
    [engine]="util"
    [text]="util"
    [media]="util"
    [hub]="util"
    [cli]="hub text util"
    [util]=""
)
# Single headers a layer may reach outside its row, each with its reason.
declare -A allowed_files=(
    # the CLI's local tools (tokenize, template) read a GGUF's vocabulary and template
    [cli:engine/gguf/gguf.h]=1
    [cli:platform/cpu/vocab_gguf.h]=1
    # one version string for both binaries
    [cli:server/version.h]=1
)

bad=0
while IFS= read -r file; do
    layer=${file#"$src"/}
    layer=${layer%%/*}
    [[ -v allowed[$layer] ]] || { echo "$file: layer '$layer' is not in the table"; bad=1; continue; }
    while IFS= read -r inc; do
        target=${inc%%/*}
        [[ $target == "$layer" ]] && continue
        [[ " ${allowed[$layer]} " == *" $target "* ]] && continue
        [[ -v allowed_files[$layer:$inc] ]] && continue
        echo "$file: $layer -> $target ($inc)"
        bad=1
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z0-9_]*\/[^"]*\)".*/\1/p' "$file")
done < <(find "$src" -name '*.[ch]' -path "$src/*/*" | sort)

if ((bad)); then
    echo "layers: wrong-way includes above (the table is in scripts/check-layers.sh)" >&2
    exit 1
fi
echo "layers: ok"
