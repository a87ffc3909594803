#!/usr/bin/env bash
# A smoke test of a server binary run through a command prefix (an emulator): health,
# platforms, load, a streamed chat, embeddings, unload, then a clean exit on SIGTERM. Models
# are written by the same build's gguf-synth (a qwen2-shaped chat model in Q4_K/Q6_K, a BERT
# embedding model in Q8_0), so nothing outside the build is needed.
#   scripts/smoke-server.sh BUILD_DIR [RUNNER...]     e.g. build/aarch64-release qemu-aarch64-static
# Prints "ok   smoke: <step>" per step, then "smoke: N passed, N failed"; exit status 0 when all
# passed.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:?build dir}
shift
runner=("$@")
work=$(mktemp -d)
server_pid=
passed=0 failed=0
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

ok() { echo "ok   smoke: $1"; passed=$((passed + 1)); }
bad() {
    echo "FAIL smoke: $1"
    failed=$((failed + 1))
    [[ -f $work/server.log ]] && tail -20 "$work/server.log"
}
finish() {
    echo "smoke: $passed passed, $failed failed"
    ((failed == 0))
    exit
}
# check NAME PYTHON-EXPR: the expression over `body` (the response file's text) must be true.
check() {
    if python3 -c "import json,sys; body=open('$work/resp').read(); sys.exit(0 if ($2) else 1)" \
        2>/dev/null; then ok "$1"; else
        bad "$1"
        head -c 600 "$work/resp"
        echo
    fi
}

"${runner[@]}" "$dir/bin/gguf-synth" --arch qwen2 --layers 2 --embd 128 --heads 4 --heads-kv 2 \
    --ffn 256 --ctx 512 --type q4_k_m --seed 7 -o "$work/chat.gguf" >/dev/null 2>&1 &&
    "${runner[@]}" "$dir/bin/gguf-synth" --arch bert --layers 2 --embd 64 --heads 4 --ffn 128 \
        --type q8_0 --seed 8 -o "$work/embed.gguf" >/dev/null 2>&1 ||
    {
        bad "gguf-synth"
        finish
    }
ok "gguf-synth wrote the models"

"${runner[@]}" "$dir/bin/llamapi-server" --host 127.0.0.1 --port 0 -m "$work/chat.gguf" \
    --alias chat --threads 2 2>"$work/server.log" &
server_pid=$!
port=
for _ in $(seq 1200); do # up to 120 s: emulated start-up is slow
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$work/server.log" | head -1)
    [[ -n $port ]] && grep -q 'info: ready' "$work/server.log" && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [[ -z $port ]] || ! grep -q 'info: ready' "$work/server.log"; then
    bad "server start"
    finish
fi
ok "server started on port $port"
url=http://127.0.0.1:$port
req() { # METHOD PATH [JSON]
    if [[ $# -gt 2 ]]; then
        curl -sS -m 300 -X "$1" -H 'Content-Type: application/json' -d "$3" "$url$2" >"$work/resp"
    else
        curl -sS -m 300 -X "$1" "$url$2" >"$work/resp"
    fi
}

req GET /health
check "GET /health" "body.strip() == 'ok'"
req GET /v1/platforms
check "GET /v1/platforms" "any(p['id'] == 'cpu' and p['available'] for p in json.loads(body)['platforms'])"
req POST /v1/models/load "{\"model_id\":\"emb\",\"model_path\":\"$work/embed.gguf\"}"
check "POST /v1/models/load" "json.loads(body)['success'] is True"
req POST /v1/chat/completions \
    '{"model":"chat","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"Hello"}]}'
check "streamed chat" "body.rstrip().endswith('data: [DONE]') and all(json.loads(l[6:])['object'] == 'chat.completion.chunk' for l in body.splitlines() if l.startswith('data: {')) and sum(1 for l in body.splitlines() if l.startswith('data: {')) >= 2"
req POST /v1/embeddings '{"model":"emb","input":["hello world","a second text"]}'
check "embeddings" "(lambda d: len(d) == 2 and all(len(e['embedding']) == 64 and all(v == v for v in e['embedding']) for e in d) and abs(sum(v * v for v in d[0]['embedding']) - 1) < 1e-3)(json.loads(body)['data'])"
req POST /v1/models/unload '{"model_id":"emb"}'
check "POST /v1/models/unload" "json.loads(body)['success'] is True"
req GET /v1/models
check "unloaded model gone" "[m['id'] for m in json.loads(body)['data']] == ['chat']"

kill -TERM "$server_pid"
wait "$server_pid"
rc=$?
server_pid=
if ((rc == 0)); then ok "clean exit on SIGTERM"; else bad "server exited with $rc"; fi
finish
