#!/usr/bin/env bash
# llama.cpp's own server test suite (tools/server/tests of the reference checkout), run offline
# with the shared stories260K model against our server and, when it is built, the reference
# llama-server; prints both pass counts per file and the tests only one of them passes.
# Not part of `make test` (it needs the reference checkout); `make compat` runs it.
#
# Usage: scripts/run-peer-suite.sh [--core] [OUR_BIN] [-- extra pytest args]
#   --core       only the seven files issue #19 measures (default: every file that runs offline)
#   OUR_BIN      default build/release/bin/llamapi-server
# Environment: LLAMA_SRC (reference checkout, default ~/.cache/llamapi-reference/llama.cpp),
#   REF_BIN (default $LLAMA_SRC/build/bin/llama-server; skipped when absent),
#   PEER_FILES (space-separated unit/test_*.py, overrides the lists), PEER_SUITE (the runner,
#   default ../shared/tools/peer-suite.sh), PEER_OUT (directory for logs, default a new tmp dir),
#   PEER_THREADS (compute threads of both servers, default 1).
set -u
cd "$(dirname "$0")/.."

CORE="unit/test_basic.py unit/test_tokenize.py unit/test_completion.py
      unit/test_chat_completion.py unit/test_security.py unit/test_ctx_shift.py
      unit/test_slot_save.py"
# Other files whose servers use only the stories260K preset (no other download).
EXTRA="unit/test_ignore_eos.py unit/test_template.py unit/test_tool_call.py
       unit/test_metrics.py unit/test_compat_anthropic.py unit/test_compat_oai_responses.py
       unit/test_kv_keep_only_active.py unit/test_sleep.py unit/test_compat_gcp.py
       unit/test_proxy.py"

files="$CORE $EXTRA"
if [ "${1:-}" = "--core" ]; then
    files=$CORE
    shift
fi
OUR_BIN=build/release/bin/llamapi-server
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    OUR_BIN=$1
    shift
fi
[ "${1:-}" = "--" ] && shift
files=${PEER_FILES:-$files}

LLAMA_SRC=${LLAMA_SRC:-$HOME/.cache/llamapi-reference/llama.cpp}
REF_BIN=${REF_BIN:-$LLAMA_SRC/build/bin/llama-server}
PEER_SUITE=${PEER_SUITE:-../shared/tools/peer-suite.sh}
OUT=${PEER_OUT:-$(mktemp -d /tmp/peer-compare.XXXX)}
mkdir -p "$OUT"

if [ ! -d "$LLAMA_SRC/tools/server/tests" ]; then
    echo "run-peer-suite: no reference checkout at $LLAMA_SRC (set LLAMA_SRC)" >&2
    exit 2
fi
if [ ! -x "$OUR_BIN" ]; then
    echo "run-peer-suite: $OUR_BIN is not built (make)" >&2
    exit 2
fi
for mod in pytest requests filelock wget prometheus_client; do
    if ! /usr/bin/python3 -c "import $mod" 2>/dev/null; then
        echo "run-peer-suite: python module '$mod' missing (apt-get install python3-pytest" \
            "python3-requests python3-filelock python3-wget python3-prometheus-client)" >&2
        exit 2
    fi
done

# A free TCP port, so runs beside other servers (or other runs) do not collide on 8080.
free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# run NAME BIN: the suite against BIN; writes $OUT/NAME.log and $OUT/NAME.results
# ("PASSED|FAILED|ERROR <test id>" per line, sorted).
run() {
    local name=$1 bin=$2
    shift 2
    echo "== $name: $bin" >&2
    # shellcheck disable=SC2086
    # One compute thread each (LLAMA_ARG_THREADS, read by both servers): on a shared machine
    # llama-server's spinning workers under nice made a run take tens of minutes instead of one.
    LLAMA_ARG_THREADS=${PEER_THREADS:-1} PORT=$(free_port) LLAMA_SRC=$LLAMA_SRC nice "$PEER_SUITE" \
        "$bin" $files -rA "$@" >"$OUT/$name.log" 2>&1
    # Test ids may hold spaces (parameters): keep the whole id, drop a failure's " - reason".
    grep -E '^(PASSED|FAILED|ERROR) unit/' "$OUT/$name.log" | sed -E 's/ - .*$//' |
        sort -u >"$OUT/$name.results"
}

# summary NAME: per-file pass counts and the total.
summary() {
    local name=$1 f total pass
    for f in $files; do
        total=$(grep -c " $f::" "$OUT/$name.results")
        pass=$(grep -c "^PASSED $f::" "$OUT/$name.results")
        printf '  %-36s %3d / %3d\n' "${f#unit/}" "$pass" "$total"
    done
    total=$(wc -l <"$OUT/$name.results")
    pass=$(grep -c '^PASSED ' "$OUT/$name.results")
    printf '  %-36s %3d / %3d\n' "total" "$pass" "$total"
    echo "  pytest: $(grep -E '^=*[^=]*(passed|failed)[^=]* in [0-9.]+s' "$OUT/$name.log" | tail -1 | tr -d '=')"
}

run ours "$OUR_BIN" "$@"
has_ref=false
if [ -x "$REF_BIN" ]; then
    run reference "$REF_BIN" "$@"
    has_ref=true
fi

echo
echo "llamapi-server ($OUR_BIN):"
summary ours
if $has_ref; then
    echo "llama-server ($REF_BIN):"
    summary reference
    sed -n 's/^PASSED //p' "$OUT/ours.results" | sort >"$OUT/ours.pass"
    sed -n 's/^PASSED //p' "$OUT/reference.results" | sort >"$OUT/reference.pass"
    echo
    echo "passed by llama-server only:"
    comm -13 "$OUT/ours.pass" "$OUT/reference.pass" | sed 's/^/  /'
    echo "passed by llamapi-server only:"
    comm -23 "$OUT/ours.pass" "$OUT/reference.pass" | sed 's/^/  /'
else
    echo "(no reference binary at $REF_BIN: only our counts)"
fi
echo
echo "logs and results: $OUT"
# Exit status: 0 when we pass every test the reference passes (or there is no reference).
if $has_ref && [ -n "$(comm -13 "$OUT/ours.pass" "$OUT/reference.pass")" ]; then
    exit 1
fi
exit 0
